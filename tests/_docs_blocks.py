"""The code blocks of README.md and docs/: found, classified, and refused when they cannot be.

Every fenced block's info string is one of:

- ``python`` / ``sh``: run by tests/test_docs.py, in page order, in a copy of the test workspace
  (tests/_docs_workspace.py); a page's Python blocks share one namespace;
- ``sh exits-N``: a shell block whose every command must fail, with exit status N (1 to 255):
  each line is one command (a trailing ``\\`` continues it), run in turn and its status checked, so
  that a page shows a failing command as a user would type it;
- ``python skip-KIND: reason`` / ``sh skip-KIND: reason``: cannot run here (KIND in ``SKIPS``);
  compiled (Python) or parsed with ``bash -n`` (shell) only;
- ``text``: output, file contents, a synopsis: never run;
- ``text expect``: output that the run block just before it must print (its text, with runs of
  whitespace as one space, must appear in that block's output; ``...`` stands for anything): for
  messages quoted in the docs, which must not drift from what the code says.

A run block may also say ``requires-MODULE`` (``python requires-apache_beam``): it needs an optional
package (an extra). Where that module is not installed the block is compiled only, and the run
says so; the test-full extra installs them all.

Anything else (no info string, another language, an unknown KIND, a skip without a reason) is an
error: a block nobody runs must say why. docs/_pending/ (drafts other branches leave) is not read.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent

RUN = ("python", "sh")
OUTPUT = ("text",)
SKIPS = {
    "gpu": "needs an NVIDIA GPU and its driver",
    "cluster": "needs several hosts, a job scheduler, or runs until it is killed",
    "cloud": "needs a cloud bucket or a cloud runner",
    "network": "downloads or installs packages",
    "root": "needs root (system packages)",
    "long": "runs for many minutes (test suites, CI, benchmarks, whole datasets)",
    "bazel": "needs Bazel",
}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_INFO = re.compile(
    r"^(?P<lang>[A-Za-z0-9_+-]+)(?P<requires>(?:\s+requires-[A-Za-z_][\w.]*)*)(?:\s+exits-(?P<exits>\d+))?"
    r"(?:\s+skip-(?P<kind>[a-z]+)(?::\s*(?P<reason>\S.*))?)?(?P<expect>\s+expect)?$"
)


class DocsBlockError(ValueError):
    """A code block the docs tests cannot classify: names the file and line."""


@dataclasses.dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip: str | None = None  # a key of SKIPS
    reason: str | None = None
    requires: tuple[str, ...] = ()  # modules the block needs (optional packages)
    expect: bool = False  # a text block the previous run block must print
    exits: int | None = None  # sh exits-N: the exit status each of the block's commands must have

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.skip is None


def parse(text: str, path: str = "<string>") -> list[Block]:
    """The fenced code blocks of one Markdown text, classified (DocsBlockError if one cannot be)."""
    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        start = i
        body = []
        i += 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        while i < len(lines) and not close.match(lines[i]):
            line = lines[i]
            strip = min(indent, len(line) - len(line.lstrip(" \t")))
            body.append(line[strip:])
            i += 1
        if i == len(lines):
            raise DocsBlockError(f"{path}:{start + 1}: a code block that is never closed")
        i += 1
        blocks.append(_classify(path, start + 1, info, "\n".join(body) + "\n"))
    for before, block in zip([None, *blocks], blocks, strict=False):
        if block.expect and (before is None or before.lang not in RUN or before.skip):
            raise DocsBlockError(f"{block.where}: a 'text expect' block must follow a block that runs")
    return blocks


def _classify(path: str, line: int, info: str, code: str) -> Block:
    where = f"{path}:{line}"
    known = f"known: {', '.join(RUN + OUTPUT)}, or {' / '.join(RUN)} skip-KIND: reason"
    if not info:
        raise DocsBlockError(f"{where}: a code block without a language ({known})")
    m = _INFO.match(info)
    if not m:
        raise DocsBlockError(f"{where}: cannot read the info string {info!r} ({known})")
    lang, kind, reason = m["lang"], m["kind"], m["reason"]
    requires = tuple(r.removeprefix("requires-") for r in m["requires"].split())
    if lang not in RUN + OUTPUT:
        raise DocsBlockError(f"{where}: a {lang!r} block is neither run nor output ({known})")
    if requires and (lang not in RUN or kind is not None):
        raise DocsBlockError(f"{where}: requires-MODULE is for blocks that run: {info!r}")
    if m["expect"] and (lang != "text" or kind is not None):
        raise DocsBlockError(f"{where}: 'expect' is for text blocks (output to check): {info!r}")
    exits = None if m["exits"] is None else int(m["exits"])
    if exits is not None and (lang != "sh" or kind is not None or not 1 <= exits <= 255):
        raise DocsBlockError(
            f"{where}: exits-N is for sh blocks that run, N an exit status from 1 to 255: {info!r}"
        )
    if kind is None:
        return Block(path, line, lang, code, requires=requires, expect=bool(m["expect"]), exits=exits)
    if lang not in RUN:
        raise DocsBlockError(f"{where}: only {' and '.join(RUN)} blocks take a skip marker: {info!r}")
    if kind not in SKIPS:
        raise DocsBlockError(f"{where}: unknown marker skip-{kind}; known: {', '.join(sorted(SKIPS))}")
    if not reason:
        raise DocsBlockError(
            f"{where}: skip-{kind} needs a reason: '{lang} skip-{kind}: why it cannot run here'"
        )
    return Block(path, line, lang, code, kind, reason)


def doc_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """README.md and every page under docs/ (not docs/_pending/), sorted."""
    docs = root / "docs"
    pages = [p for p in docs.rglob("*.md") if "_pending" not in p.relative_to(docs).parts]
    return [root / "README.md", *sorted(pages)]


def blocks_of(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[Block]:
    return parse(path.read_text(encoding="utf-8"), str(path.relative_to(root)))
