"""The import graph of bzna_tf/: no cycle, every arrow down the layers, no TensorFlow in convert/format.

The layers, bottom to top (the docs' Development page draws them)::

    format -> transforms -> ops -> datasets/layers -> convert/cli

A module may import modules of its own layer and of the layers below it, never
one above; nothing in bzna_tf/ imports tooling (tools/, tests/, benchmarks/).
The graph is read from the source with ``ast`` (no module is imported), so it
also sees the imports inside functions. Those count as much as the ones at
the top of a module: a function-level import is still a dependency (the
module does not work without the imported one), it only runs later, and
"later" is exactly how a circle hides (format's errors -> sniff -> checksums
-> boxes -> errors worked only because sniff imported checksums inside a
function). Only the check that convert and format never load TensorFlow
looks at what runs at import time alone: a function may import TensorFlow
for the one case that needs it (format reads gs:// URLs through it).

What is an edge: ``import a.b.c`` depends on ``a.b.c``; ``from a.b import c``
depends on ``a.b`` (it reads the name ``c`` from that module, so a package's
``__init__`` counts) and on ``a.b.c`` too when that is a module. The parents
that Python imports on the way (``a``, ``a.b`` for ``import a.b.c``) are not
edges: every module of a package would otherwise form a circle with the
package's ``__init__``.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ("format", "transforms", "ops", "datasets/layers", "convert/cli")

# Where each module of bzna_tf belongs. A key holds the module or package it names and everything below
# it; a key ending in "*" holds every name starting with what comes before the "*" (so "bzna_tf.datasets*"
# holds bzna_tf.datasets, bzna_tf.datasets.pipeline and bzna_tf.datasets_catalog alike). The longest key
# that holds a name wins; the package root "bzna_tf" holds only its own __init__.
TABLE = {
    "bzna_tf.format": "format",  # the .bzna container: pure Python + NumPy, no TensorFlow
    "bzna_tf._cache": "format",  # where the native builds are kept, found without TensorFlow
    "bzna_tf.transforms": "transforms",  # the affine matrices and the per-sample samplers
    "bzna_tf.ops": "ops",  # builds, loads and wraps the native ops; the GPU core's ctypes binding
    "bzna_tf.decode": "ops",  # the CPU HEVC decode op, wrapped for tensors and NumPy
    "bzna_tf.datasets*": "datasets/layers",  # Dataset / ClassificationDataset / ImageNet, as_dataset
    "bzna_tf.layers": "datasets/layers",  # the Keras layers
    "bzna_tf.blending": "datasets/layers",  # mixes datasets' pipelines by weight
    "bzna_tf.previews": "datasets/layers",  # draws a grid of a dataset's augmented samples
    "bzna_tf.service": "datasets/layers",  # tf.data service servers for the pipelines
    "bzna_tf.callbacks": "datasets/layers",  # Keras callbacks that keep the pipelines' epochs in step
    "bzna_tf._keras_registration": "datasets/layers",  # registers the layers once Keras is imported
    "bzna_tf._legacy_keras": "datasets/layers",  # tells tf_keras objects apart (layers and callbacks refuse)
    "bzna_tf.verify": "datasets/layers",  # checks whole files (checksums, decoding), as a reader does
    "bzna_tf.convert": "convert/cli",  # the converter: sources, encoders, shards, Beam
    "bzna_tf.cli": "convert/cli",  # bzna-tf's commands
    "bzna_tf.__main__": "convert/cli",  # python -m bzna_tf: the same commands
    "bzna_tf": "convert/cli",  # the package root, the public surface: it imports from the layers below
}
# Tooling: bzna_tf never imports it (top-level names; the modules of the GPU kit and the TensorFlow carry).
TOOLING = (
    "tools",
    "tests",
    "benchmarks",
    "examples",
    "conftest",
    "kit_builder",
    "kit_bench",
    "run_kit",
    "carry_builder",
    "device_run",
)
# What convert and format must not load when imported.
HEAVY = ("tensorflow", "keras")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (of the package), or the top-level name outside it
    line: int
    import_time: bool  # at module level (or in a class body), not inside a function

    def where(self, graph: Graph) -> str:
        return f"{graph.relpath(self.source)}:{self.line}" + ("" if self.import_time else " (in a function)")


class Graph:
    """The modules of one package under ``root`` and their imports, read with ast."""

    def __init__(self, root: Path, package: str = "bzna_tf"):
        self.root = root
        self.package = package
        self.paths: dict[str, Path] = {}
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.paths[".".join(parts)] = path
        self.internal: list[Import] = []  # edges between the package's modules
        self.external: list[Import] = []  # imports of anything else, by top-level name
        for name in self.paths:
            self._read(name)

    def relpath(self, module: str) -> str:
        return self.paths[module].relative_to(self.root).as_posix()

    def is_package(self, module: str) -> bool:
        return self.paths[module].name == "__init__.py"

    def _resolve(self, dotted: str) -> str | None:
        """The package's module that ``dotted`` names, or the deepest one holding it (a name in it)."""
        while dotted:
            if dotted in self.paths:
                return dotted
            dotted = dotted.rpartition(".")[0]
        return None

    def _add(self, source: str, dotted: str, line: int, import_time: bool) -> None:
        top = dotted.partition(".")[0]
        if top == self.package:
            target = self._resolve(dotted)
            if target is not None and target != source:
                self.internal.append(Import(source, target, line, import_time))
        else:
            self.external.append(Import(source, top, line, import_time))

    def _read(self, name: str) -> None:
        tree = ast.parse(self.paths[name].read_text(), filename=str(self.paths[name]))
        here = name if self.is_package(name) else name.rpartition(".")[0]

        def visit(node, import_time):
            for child in ast.iter_child_nodes(node):
                inner = import_time and not isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                )
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        self._add(name, alias.name, child.lineno, import_time)
                elif isinstance(child, ast.ImportFrom):
                    if child.level:  # relative: from the importing module's package, level - 1 up
                        base = here.split(".")[: len(here.split(".")) - child.level + 1]
                        module = ".".join(base + ([child.module] if child.module else []))
                    else:
                        module = child.module or ""
                    if module == "__future__":
                        continue
                    self._add(name, module, child.lineno, import_time)
                    for alias in child.names:
                        if f"{module}.{alias.name}" in self.paths:
                            self._add(name, f"{module}.{alias.name}", child.lineno, import_time)
                visit(child, inner)

        visit(tree, True)

    def edges(self) -> dict[str, dict[str, Import]]:
        """source -> {target: the first import of it}."""
        out: dict[str, dict[str, Import]] = {name: {} for name in self.paths}
        for imp in self.internal:
            out[imp.source].setdefault(imp.target, imp)
        return out

    def cycles(self) -> list[tuple[list[str], list[Import]]]:
        """Each group of modules that import each other in a circle (Tarjan's strongly connected
        components), with one cycle through it (its imports), the shortest from its first module."""
        edges = self.edges()
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        groups: list[list[str]] = []

        def connect(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in sorted(edges[v]):
                if w not in index:
                    connect(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

        for v in sorted(edges):
            if v not in index:
                connect(v)
        found = []
        for group in groups:
            members = set(group)
            start = group[0]
            # The shortest way from start back to itself inside the group (breadth first).
            previous: dict[str, Import] = {}
            frontier = [start]
            while start not in previous:
                following = []
                for v in frontier:
                    for w, imp in sorted(edges[v].items()):
                        if w in members and w not in previous:
                            previous[w] = imp
                            following.append(w)
                frontier = following
            cycle = [previous[start]]
            while cycle[-1].source != start:
                cycle.append(previous[cycle[-1].source])
            found.append((group, cycle[::-1]))
        return found

    def import_time_closure(self, module: str) -> list[str]:
        """Every module of the package that importing ``module`` runs: its parents, their imports, ..."""
        seen: list[str] = []
        todo = [module]
        by_source: dict[str, list[str]] = {}
        for imp in self.internal:
            if imp.import_time:
                by_source.setdefault(imp.source, []).append(imp.target)
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.append(m)
            parent = m.rpartition(".")[0]
            todo += ([parent] if parent else []) + by_source.get(m, [])
        return seen


def layer_of(module: str, table=TABLE) -> str | None:
    best = None
    for key, layer in table.items():
        if key.endswith("*"):
            holds = module.startswith(key[:-1])
        elif "." not in key:  # the package root: itself only
            holds = module == key
        else:
            holds = module == key or module.startswith(key + ".")
        if holds and (best is None or len(key.rstrip("*")) > len(best[0].rstrip("*"))):
            best = (key, layer)
    return None if best is None else best[1]


def describe(cycle: list[Import], graph: Graph) -> str:
    return " -> ".join([cycle[0].source] + [f"{imp.target} ({imp.where(graph)})" for imp in cycle])


def cycle_problems(graph: Graph) -> list[str]:
    problems = []
    for group, cycle in graph.cycles():
        others = "" if len(group) == len(cycle) else f" (one circle among {', '.join(group)})"
        problems.append(f"import cycle: {describe(cycle, graph)}{others}")
    return problems


def layer_problems(graph: Graph, table=TABLE) -> list[str]:
    problems = []
    for name in graph.paths:
        if layer_of(name, table) is None:
            problems.append(
                f"{graph.relpath(name)} ({name}) is in no layer: add it to TABLE in tests/test_imports.py "
                f"with one of {', '.join(LAYERS)} (and draw it on the docs' Development page)"
            )
    for imp in graph.internal:
        mine, theirs = layer_of(imp.source, table), layer_of(imp.target, table)
        if mine is None or theirs is None:
            continue
        if LAYERS.index(theirs) > LAYERS.index(mine):
            problems.append(
                f"{imp.where(graph)}: {imp.source} ({mine}) imports {imp.target} ({theirs}), a higher layer: "
                "move the code it needs down, or pass it in"
            )
    for imp in graph.external:
        if imp.target in TOOLING:
            problems.append(f"{imp.where(graph)}: {imp.source} imports tooling ({imp.target})")
    return problems


def heavy_problems(graph: Graph, layers=("format", "convert/cli"), table=TABLE) -> list[str]:
    """Modules of ``layers`` (the package root and cli aside) whose import loads TensorFlow or Keras."""
    heavy = {}
    for imp in graph.external:
        if imp.import_time and imp.target in HEAVY:
            heavy.setdefault(imp.source, imp)
    problems = []
    for name in graph.paths:
        if layer_of(name, table) not in layers or name in (graph.package, f"{graph.package}.cli"):
            continue
        for m in graph.import_time_closure(name):
            if m in heavy:
                problems.append(
                    f"importing {name} imports {heavy[m].target}: {heavy[m].where(graph)} (import it inside "
                    "the function that needs it)"
                )
                break
    return problems


@pytest.fixture(scope="module")
def graph():
    return Graph(ROOT)


def test_the_graph_is_read_as_python_imports(graph):
    """The reader sees what the checks rely on (so that they cannot pass on an empty graph)."""
    edges = graph.edges()
    assert len(graph.paths) > 50 and len(graph.internal) > 100
    assert "bzna_tf.format.boxes" in edges["bzna_tf.format.reader"]
    assert not edges["bzna_tf.cli"]["bzna_tf.convert.sources"].import_time  # inside a function
    assert "bzna_tf.transforms.constant" in edges["bzna_tf.ops.warp"]  # a module-level import
    assert edges["bzna_tf"]["bzna_tf.datasets"].import_time
    assert any(i.source == "bzna_tf.ops.source" and i.target == "tensorflow" for i in graph.external)


def test_no_import_cycles(graph):
    problems = cycle_problems(graph)
    assert not problems, "\n".join(problems)


def test_imports_point_down_the_layers(graph):
    problems = layer_problems(graph)
    assert not problems, "\n".join(problems)


def test_convert_and_format_do_not_import_tensorflow(graph):
    problems = heavy_problems(graph)
    assert not problems, "\n".join(problems)


def test_the_checks_find_what_they_look_for(tmp_path):
    """A made-up package with a cycle (through a function-level import and a package __init__), an
    upward import, a module in no layer, a tooling import and TensorFlow loaded by its format layer."""
    files = {
        "__init__.py": "from pkg.fmt import a\n",
        "fmt/__init__.py": "from pkg.fmt.a import A\n",
        "fmt/a.py": "from pkg.fmt import b\nA = 1\n",  # through fmt/__init__: fmt -> a -> fmt
        "fmt/b.py": "import numpy\n\ndef f():\n    from pkg.top import g\n",  # up, in a function
        "fmt/c.py": "from . import d\n",  # relative
        "fmt/d.py": "from pkg.fmt.c import x\nimport pkg.mid\n",  # d -> c -> d; mid loads TensorFlow
        "mid.py": "import tensorflow as tf\n",
        "top.py": "import kit_builder\n",
        "fmt/e.py": "import pkg.fmt.f\n",
        "fmt/f.py": "import pkg.fmt.e\nimport pkg.fmt.g\n",  # e -> f -> e, and f -> g -> e
        "fmt/g.py": "import pkg.fmt.e\n",
        "stray.py": "",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(textwrap.dedent(text))
    g = Graph(tmp_path, "pkg")
    table = {"pkg.fmt": "format", "pkg.mid": "ops", "pkg.top": "convert/cli", "pkg": "convert/cli"}
    cycles = cycle_problems(g)
    assert sorted(cycles) == [
        "import cycle: pkg.fmt -> pkg.fmt.a (pkg/fmt/__init__.py:1) -> pkg.fmt (pkg/fmt/a.py:1)",
        "import cycle: pkg.fmt.c -> pkg.fmt.d (pkg/fmt/c.py:1) -> pkg.fmt.c (pkg/fmt/d.py:1)",
        "import cycle: pkg.fmt.e -> pkg.fmt.f (pkg/fmt/e.py:1) -> pkg.fmt.e (pkg/fmt/f.py:1) (one circle "
        "among pkg.fmt.e, pkg.fmt.f, pkg.fmt.g)",
    ], cycles
    layers = layer_problems(g, table)
    assert layers == [
        "pkg/stray.py (pkg.stray) is in no layer: add it to TABLE in tests/test_imports.py with one of "
        "format, transforms, ops, datasets/layers, convert/cli (and draw it on the docs' Development page)",
        "pkg/fmt/b.py:4 (in a function): pkg.fmt.b (format) imports pkg.top (convert/cli), a higher layer: "
        "move the code it needs down, or pass it in",
        "pkg/fmt/d.py:2: pkg.fmt.d (format) imports pkg.mid (ops), a higher layer: move the code it needs "
        "down, or pass it in",
        "pkg/top.py:1: pkg.top imports tooling (kit_builder)",
    ], layers
    heavy = heavy_problems(g, layers=("format",), table=table)
    # c and d load mid (d imports it, c imports d); a and b do not (b reaches top only in a function).
    assert heavy == [
        f"importing pkg.fmt.{m} imports tensorflow: pkg/mid.py:1 (import it inside the function that "
        "needs it)"
        for m in ("c", "d")
    ], heavy
