"""The documentation cannot drift: its code runs, its site builds, its references resolve.

- Every ``python`` and ``sh`` block of README.md and docs/ (not docs/_pending/) runs, page by page,
  in a copy of a tiny workspace (tests/_docs_workspace.py); blocks marked ``skip-KIND: reason`` are
  compiled or parsed with ``bash -n``; a block nobody could classify fails (tests/_docs_blocks.py).
  The pages run where ``BZNA_TF_DOCS_PAGES=1`` (``.ci/docs`` sets it); the classification always.
- ``mkdocs build --strict`` passes (when MkDocs is installed; ``.ci/docs`` always runs it).
- Every public name of the documented modules has a docstring and an API page.
- Every "SPEC section N" citation in the code, tests and docs names a section of
  docs/reference/format.md (the specification).
"""

from __future__ import annotations

import ast
import fcntl
import importlib
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import unicodedata

import _docs_blocks
import _docs_runner
import _docs_workspace
import pytest

ROOT = _docs_blocks.ROOT
DOCS = ROOT / "docs"
PAGES = _docs_blocks.doc_files()
RUNNER = pathlib.Path(__file__).with_name("_docs_runner.py")


def _rel(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


# ----------------------------------------------------------------------------------- the blocks


def test_every_block_is_classified():
    blocks = [b for page in PAGES for b in _docs_blocks.blocks_of(page)]  # DocsBlockError otherwise
    assert any(b.runs for b in blocks)


@pytest.mark.parametrize(
    "text, message",
    [
        ("```\nx = 1\n```\n", "without a language"),
        ("```py\nx = 1\n```\n", "neither run nor output"),
        ("```bash\nls\n```\n", "neither run nor output"),
        ("```python skip-laptop: too slow\nx = 1\n```\n", "unknown marker skip-laptop"),
        ("```python skip-gpu\nx = 1\n```\n", "needs a reason"),
        ("```text skip-gpu: no\nx\n```\n", "only python and sh"),
        ("```python title='a.py'\nx = 1\n```\n", "cannot read the info string"),
        ("```text requires-jax\nx\n```\n", "for blocks that run"),
        ("```python\nx = 1\n```\n```sh expect\nls\n```\n", "'expect' is for text blocks"),
        ("```text\nx\n```\n```text expect\nx\n```\n", "must follow a block that runs"),
        ("```python exits-1\nx = 1\n```\n", "exits-N is for sh blocks"),
        ("```sh exits-0\nfalse\n```\n", "exits-N is for sh blocks"),
        ("```sh exits-1 skip-long: slow\nfalse\n```\n", "exits-N is for sh blocks"),
        ("- item\n\n    ```python\n    x = 1\n", "never closed"),
    ],
)
def test_the_collector_refuses_blocks_it_cannot_classify(text, message):
    with pytest.raises(_docs_blocks.DocsBlockError, match=message):
        _docs_blocks.parse(text, "page.md")


def test_expected_output_matches_whitespace_and_ellipses():
    output = "Traceback ...\nValueError: a.bzna, sample 3:  bad box\n  at byte 40\n"
    assert _docs_runner.expected_in("a.bzna, sample 3: bad box at byte 40", output)
    assert _docs_runner.expected_in("a.bzna, ...: bad\nbox ... 40", output)
    assert not _docs_runner.expected_in("a.bzna, sample 4: bad box", output)
    assert not _docs_runner.expected_in("byte 40 ... sample 3", output)  # in order


def test_a_block_of_failing_commands_checks_each_ones_status(tmp_path, capsys):
    """``sh exits-N``: every command runs and must exit with N; one that succeeds or exits otherwise fails."""
    (block,) = _docs_blocks.parse("```sh exits-2\nls no-such-file\nls \\\n  also-missing\n```\n", "p.md")
    assert block.exits == 2 and block.runs
    assert _docs_runner.commands(block.code) == ["ls no-such-file", "ls \\\n  also-missing"]

    def run(code, status=2):
        ok = _docs_runner.run_blocks([{"where": "p.md:1", "lang": "sh", "code": code, "exits": status}])
        return ok, capsys.readouterr().out

    ok, out = run(block.code)
    assert ok and "no-such-file" in out and "also-missing" in out  # both ran: the expect text sees both
    ok, out = run("ls no-such-file\ntrue\nls also-missing\n")
    assert not ok and "COMMAND 2 EXITED WITH STATUS 0, NOT 2" in out and "also-missing" not in out
    ok, out = run("ls no-such-file\n", status=1)
    assert not ok and "STATUS 2, NOT 1" in out


def test_the_collector_reads_indented_and_marked_blocks():
    text = (
        "- item\n\n  ```python\n  x = 1\n  if x:\n      y = 2\n  ```\n\n"
        "```sh skip-cluster: two hosts\nssh a\n```\n\n````text\n```\n````\n"
        "```python requires-apache_beam requires-jax\nimport jax\n```\n"
    )
    a, b, c, d = _docs_blocks.parse(text, "page.md")
    assert (d.requires, d.runs) == (("apache_beam", "jax"), True)
    assert (a.lang, a.line, a.code, a.runs) == ("python", 3, "x = 1\nif x:\n    y = 2\n", True)
    assert (b.skip, b.reason, b.runs, b.where) == ("cluster", "two hosts", False, "page.md:9")
    assert (c.lang, c.code) == ("text", "```\n")


def _parsed(page):
    """A page's blocks, or none when it cannot be parsed (test_every_block_is_classified says why)."""
    try:
        return _docs_blocks.blocks_of(page)
    except _docs_blocks.DocsBlockError:
        return []


def _blocks(predicate):
    return [b for page in PAGES for b in _parsed(page) if predicate(b)]


@pytest.mark.parametrize(
    "block",
    _blocks(lambda b: b.skip is not None),
    ids=lambda b: f"{b.where}-{b.skip}",
)
def test_marked_blocks_compile(block):
    if block.lang == "python":
        compile(block.code, block.where, "exec")
    else:
        r = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
        assert r.returncode == 0, f"{block.where}: bash -n: {r.stderr}"


@pytest.fixture(scope="session")
def docs_workspace(tmp_path_factory):
    """The workspace, built once per test session (shared by pytest-xdist workers, under a lock)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    folder = shared / "docs-workspace"
    with open(shared / "docs-workspace.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".complete").exists():
            partial = shared / "docs-workspace.partial"
            if partial.exists():
                import shutil

                shutil.rmtree(partial)
            partial.mkdir()
            _docs_workspace.build(partial)
            (partial / ".complete").write_text("")
            partial.rename(folder)
    return folder


def _runnable_pages():
    return [page for page in PAGES if any(b.runs for b in _parsed(page))]


def _runner_env() -> dict:
    env = dict(os.environ)
    env.update(
        BZNA_TF_CACHE_DIR=_docs_workspace.cache_dir(),  # pages move $HOME: the built ops stay found
        PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),  # bzna-tf, python
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        MPLBACKEND="Agg",
    )
    return env


class _Server:
    """One ``_docs_runner.py --serve`` process: pages run one after another, TensorFlow imported once."""

    def __init__(self):
        self.proc = None
        self.lines = None

    def _start(self):
        import queue
        import threading

        self.proc = subprocess.Popen(
            [sys.executable, str(RUNNER), "--serve"],
            cwd=ROOT,
            env=_runner_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # A thread reads the output (a select() on the pipe would miss lines already buffered).
        self.lines = queue.Queue()

        def pump(stdout, lines):
            for line in stdout:
                lines.put(line)
            lines.put(None)  # the runner ended

        threading.Thread(target=pump, args=(self.proc.stdout, self.lines), daemon=True).start()

    def run(self, request: pathlib.Path, timeout: float) -> tuple[bool, str]:
        import queue

        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(f"{request}\n")
        self.proc.stdin.flush()
        lines, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                return False, "".join(lines) + f"\n(no answer after {timeout:.0f} s: stopped)"
            if line is None:
                self.proc = None
                return False, "".join(lines) + "\n(the runner process ended)"
            if line.strip() == _docs_runner.DONE:
                return True, "".join(lines)
            lines.append(line)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@pytest.fixture(scope="session")
def docs_server():
    server = _Server()
    yield server
    server.close()


def _needs_own_process(page: pathlib.Path) -> bool:
    """A page that chooses Keras' backend needs an interpreter that has not imported Keras."""
    return "KERAS_BACKEND" in page.read_text(encoding="utf-8")


# The pages' blocks take minutes (conversions, trainings, a fresh interpreter per command): .ci/docs runs
# them, so that the README's test command stays within its ten minutes.
DOCS_PAGES = os.environ.get("BZNA_TF_DOCS_PAGES", "") not in ("", "0")


@pytest.mark.skipif(
    not DOCS_PAGES, reason="the pages' code blocks run in .ci/docs (BZNA_TF_DOCS_PAGES=1 runs them here)"
)
@pytest.mark.parametrize("page", _runnable_pages(), ids=_rel)
def test_page_runs(page, docs_workspace, docs_server, tmp_path):
    blocks = [b for b in _docs_blocks.blocks_of(page) if b.runs or b.expect]
    work = _docs_workspace.copy(docs_workspace, tmp_path / "work")
    (work / ".complete").unlink()
    (work / "examples").symlink_to(ROOT / "examples")  # pages run the examples as from a checkout
    request = tmp_path / "request.json"
    result = tmp_path / "result.json"
    fields = ("where", "lang", "code", "requires", "expect", "exits")
    request.write_text(
        json.dumps(
            {
                "page": _rel(page),
                "cwd": str(work),
                "env": {"HOME": str(work)},  # ~/tensorflow_datasets is the workspace's
                "result": str(result),
                "blocks": [{f: getattr(b, f) for f in fields} for b in blocks],
            }
        )
    )
    if _needs_own_process(page):
        r = subprocess.run(
            [sys.executable, str(RUNNER), str(request)],
            cwd=work,
            env=_runner_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
        answered, output = True, r.stdout
    else:
        answered, output = docs_server.run(request, timeout=600)
    ok = answered and result.exists() and json.loads(result.read_text())["ok"]
    assert ok, f"{_rel(page)}: a code block failed:\n{output[-8000:]}"


# ----------------------------------------------------------------------------------- the site


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install '.[docs]'); .ci/docs runs it")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install '.[docs]')")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-8000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()
    # site_url is set: the sitemap lists every page (without it, MkDocs writes an empty one).
    sitemap = (tmp_path / "site" / "sitemap.xml").read_text(encoding="utf-8")
    pages = len([p for p in PAGES if p.name != "README.md"])
    assert len(re.findall(r"<loc>https?://[^<]+</loc>", sitemap)) == pages, sitemap[:2000]
    # Home shows Getting started's quickstart (tools/mkdocs_hooks.py), links and all.
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    shown = re.sub(r"<[^>]+>", "", home)
    assert 'id="quickstart"' in home and "bzna-tf convert folder images/ photos.bzna" in shown


def _mkdocs_hooks():
    """tools/mkdocs_hooks.py, imported (it imports MkDocs: skipped without the docs extra)."""
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install '.[docs]'); .ci/docs runs it")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mkdocs_hooks
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return mkdocs_hooks


def test_names_in_tables_break_only_between_words():
    """`drop_remainder` broke as `drop_remaind|er` in a narrow column: each word is a piece kept whole."""
    mkdocs_hooks = _mkdocs_hooks()
    html = (
        "<p><code>outside_tables</code></p><table><tr><td><code>drop_remainder</code></td>"
        "<td><code>tf.image.resize(antialias=True)</code></td>"
        "<td><code>a --label-key b</code></td></tr></table>"
    )
    out = mkdocs_hooks.on_page_content(html, None, None, None)
    assert out.startswith("<p><code>outside_tables</code></p>")
    assert '<code class="bzna-words"><span>drop_remainder</span></code>' in out
    assert (
        "<span>tf.</span><wbr><span>image.</span><wbr><span>resize(</span><wbr><span>antialias=</span>" in out
    )
    assert '<code class="bzna-words"><span>a</span> <span>--label-key</span> <span>b</span></code>' in out
    css = (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert re.search(r"code\.bzna-words > span \{\s*white-space: nowrap;", css)
    assert "stylesheets/extra.css" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _cli_texts(parser) -> list[str]:
    """Every description and argument help of ``parser`` and its subcommands, as ``--help`` prints them."""
    import argparse

    texts = [parser.description] if parser.description else []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                texts += _cli_texts(child)
        elif (
            action.help
            and action.help != argparse.SUPPRESS
            and not isinstance(action, (argparse._HelpAction, argparse._VersionAction))
        ):
            texts.append(parser._get_formatter()._expand_help(action))
    return texts


def test_the_cli_reference_shows_every_help_text_as_written():
    """Help texts are plain text: Markdown must not eat their {...}, <...> or *...* on the site."""
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install '.[docs]'); .ci/docs runs it")
    import html

    import markdown
    from mkdocs.config import load_config

    from bzna_tf.cli import build_parser

    mkdocs_hooks = _mkdocs_hooks()
    config = load_config(str(ROOT / "mkdocs.yml"))
    page = markdown.markdown(
        mkdocs_hooks.cli_reference(),
        extensions=config.markdown_extensions,
        extension_configs=config.mdx_configs,
    )
    shown = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    texts = _cli_texts(build_parser())[1:]  # the reference starts at the subcommands
    assert any("{'files': [...]" in t for t in texts)  # the text that the site lost
    missing = [t for t in texts if " ".join(t.split()) not in shown]
    assert not missing, f"the CLI reference does not show these help texts as written: {missing}"


def test_every_image_is_shown():
    """A plot under docs/images that no page shows is a page that says "the plot below" and has none."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    unused = [p.name for p in sorted((DOCS / "images").iterdir()) if f"images/{p.name})" not in text]
    assert not unused, f"images no page shows: {unused}"


def test_shown_commands_are_what_a_user_types():
    """A command expected to fail goes in an ``sh exits-N`` block, not behind ``|| true``."""
    leftovers = [
        f"{b.where}: {line}"
        for b in _blocks(lambda b: b.lang == "sh")
        for line in b.code.splitlines()
        if line.rstrip().endswith("|| true")
    ]
    assert not leftovers, f"commands ending in '|| true' (use an 'sh exits-N' block): {leftovers}"


def _anchors(page: pathlib.Path) -> set[str]:
    """The heading anchors of a page, as MkDocs makes them (explicit ``{#id}``, else the slug)."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#{1,6} (.*?)\s*(?:\{#([\w-]+)\})?\s*$", line)
        if m:
            if m[2]:
                out.add(m[2])
            else:
                text = unicodedata.normalize("NFKD", m[1].replace("`", "")).encode("ascii", "ignore").decode()
                out.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower()))
    return out


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 12_000, f"README.md is {len(readme.encode())} bytes; keep it <= 12,000"
    links = re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#([^)\s]*))?\)", readme)
    assert links, "the README links into the docs"
    missing = [link for link, _ in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    broken = [f"{link}#{a}" for link, a in links if a and a not in _anchors(ROOT / link)]
    assert not broken, f"README.md links to anchors that do not exist: {broken}"


# ----------------------------------------------------------------------------------- the API reference

API_MODULES = (
    "bzna_tf",
    "bzna_tf.layers",
    "bzna_tf.transforms",
    "bzna_tf.callbacks",
    "bzna_tf.service",
    "bzna_tf.format",
    "bzna_tf.convert",
    "bzna_tf.ops",
    "bzna_tf.verify",
    "bzna_tf.previews",
    "bzna_tf.decode",
)


def _documented_objects():
    """{(module, name)} and {id(object): {names}} of every ``::: module.name`` line of the API pages."""
    names, objects = set(), {}
    for page in sorted((DOCS / "reference" / "api").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            m = re.match(r"^::: ([\w.]+)\s*$", line)
            if m:
                module, _, name = m[1].rpartition(".")
                names.add((module, name))
                objects.setdefault(id(getattr(importlib.import_module(module), name)), set()).add(name)
    return names, objects


def _assignment_docstring(module_name: str, name: str, seen=()) -> str | None:
    """The attribute docstring (a string right after ``name = ...``) where ``name`` is defined.

    Follows ``from X import name`` through the package, as griffe (and so the API pages) does.
    """
    module = importlib.import_module(module_name)
    tree = ast.parse(inspect.getsource(module))
    body = tree.body
    for i, node in enumerate(body):
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        if name in targets:
            after = body[i + 1] if i + 1 < len(body) else None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return after.value.value if isinstance(after.value.value, str) else None
            return None
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == name for a in node.names):
            if node.module not in seen:
                return _assignment_docstring(node.module, name, (*seen, module_name))
    return None


def _public_names():
    out = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        out += [(module_name, name) for name in module.__all__]
    return out


@pytest.mark.parametrize("module_name, name", _public_names(), ids=lambda v: v)
def test_public_name_has_a_docstring_and_an_api_page(module_name, name):
    obj = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        doc = obj.__doc__
    else:
        doc = _assignment_docstring(module_name, name)
    assert doc and doc.strip(), f"{module_name}.{name} has no docstring"
    names, objects = _documented_objects()
    # A re-export (bzna_tf.BznaFile is bzna_tf.format.BznaFile) is covered by its page.
    assert (module_name, name) in names or name in objects.get(id(obj), ()), (
        f"{module_name}.{name} is on no API page: add '::: {module_name}.{name}' to docs/reference/api/"
    )


def test_every_api_module_has_a_page_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in sorted((DOCS / "reference" / "api").glob("*.md")):
        assert f"reference/api/{page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"


# ----------------------------------------------------------------------------------- SPEC citations

_CITATION = re.compile(r"\bSPEC(\.md)?(?:'s)?,? sections? (\d+)")
_SOURCES = ("bzna_tf", "custom_ops", "tests", "benchmarks", "examples", "tools", "bazel", "docs", ".ci")


def _cited_files():
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "BUILD", ROOT / "WORKSPACE"]
    for top in _SOURCES:
        for path in (ROOT / top).rglob("*"):
            parts = path.relative_to(ROOT).parts
            if path.is_file() and "_pending" not in parts and "__pycache__" not in parts:
                if (
                    path.suffix in (".py", ".cc", ".h", ".cu", ".md", ".bzl", ".sh", "")
                    or path.name == "BUILD"
                ):
                    files.append(path)
    return [f for f in files if f.exists()]


def _spec_sections():
    text = (DOCS / "reference" / "format.md").read_text(encoding="utf-8")
    return {int(n) for n in re.findall(r"^## (\d+)\. .*\{#spec-\1\}\s*$", text, re.MULTILINE)}


def test_spec_citations_name_sections_of_the_format_page():
    sections = _spec_sections()
    assert sections == {1, 2, 3, 4, 5, 6}, f"docs/reference/format.md's numbered sections: {sorted(sections)}"
    bad, stale, count = [], [], 0
    for path in _cited_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if path.name == "test_docs.py":
                continue
            for m in _CITATION.finditer(line):
                count += 1
                if int(m[2]) not in sections:
                    bad.append(f"{_rel(path)}:{lineno}: {m[0]}")
            if "SPEC.md" in line:
                stale.append(f"{_rel(path)}:{lineno}")
    assert count > 20, "the code cites the specification: the pattern must find it"
    assert not bad, f"citations of sections docs/reference/format.md does not have: {bad}"
    assert not stale, (
        "SPEC.md is not part of the repository: cite 'SPEC section N' (docs/reference/format.md, "
        f"see docs/development.md): {stale}"
    )
