"""MkDocs hooks: the parts of the site made from the code at build time, so that they cannot drift.

A page asks for generated content with a line of its own, ``<!-- generated: NAME -->``:

- ``cli``: the command-line reference, from the argparse parsers of ``bzna_tf/cli.py``
  (:func:`bzna_tf.cli.build_parser`): every command, its usage, description, examples and arguments;
  help texts are plain text, escaped so that Markdown shows them as ``--help`` does.
- ``gpu-abi-header``: the GPU core's header, ``custom_ops/gpu/core/bzna_gpu.h``, verbatim.
- ``quickstart``: the "Quickstart" section of ``docs/getting-started.md``, for Home.

An unknown name fails the build. The API reference needs no hook: mkdocstrings renders the
docstrings (``::: bzna_tf.Dataset`` lines); this file only turns the docstrings' Sphinx roles
(``:class:`X```) into plain code, which mkdocstrings would print as written, and keeps the words of
the code in tables whole (see _names_whole).
"""

from __future__ import annotations

import argparse
import copy
import os
import re

from mkdocs.exceptions import PluginError

_MARKER = re.compile(r"^<!-- generated: (?P<name>[a-z0-9-]+) -->$", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(?P<tilde>~?)(?P<target>[^<]*)</code>")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Help texts are plain text, written for a terminal: characters that Markdown (and its extensions) would
# read as markup are escaped, so that the site shows them as --help does. attr_list took a cell's final
# "{'files': [...]}" for attributes, and "<label>" was an HTML tag.
_MARKUP = re.compile(r"([\\`*_{}\[\]#|])")


def _plain(text: str) -> str:
    """Plain text as Markdown that renders to exactly that text."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKUP.sub(r"\\\1", text)


def _code(value) -> str:
    """A value as inline code in a table cell (a pipe would end the cell)."""
    return "`" + str(value).replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    """Markdown for a table cell, on one line (the parts are escaped by _plain and _code)."""
    return " ".join(str(text).split())


def _argument(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{s}`" for s in action.option_strings)
        if action.nargs == 0:
            return names
        # The help's own words ("N", "H [W]", "[MODE]", "LO HI"), but a name for a choice: the choices
        # are listed beside it.
        shown = copy.copy(action)
        shown.metavar = action.metavar or action.dest.upper()
        metavar = parser._get_formatter()._format_args(shown, shown.metavar)
        return f"{names} `{metavar}`"
    name = action.metavar or action.dest
    return f"`{name}`" + (" ..." if action.nargs in ("+", "*") else "")


def _details(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = _plain(parser._get_formatter()._expand_help(action)) if action.help else ""
    extra = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        extra.append("one of " + ", ".join(_code(c) for c in action.choices))
    default = action.default
    if action.option_strings and default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        extra.append(f"default {_code(shown)}")
    if action.required and action.option_strings:
        extra.append("required")
    if extra:
        listed = "; ".join(extra)
        text = f"{text} ({listed})" if text else listed[0].upper() + listed[1:]
    return _cell(text)


def _command(parser: argparse.ArgumentParser, name: str, summary: str | None, level: int) -> list[str]:
    anchor = name.replace("bzna-tf ", "").replace(" ", "-") or "bzna-tf"
    out = [f"{'#' * level} `{name}` {{#{anchor}}}", ""]
    if summary:
        out += [_plain(summary[0].upper() + summary[1:] + "."), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        out += [_plain(parser.description), ""]
    if parser.epilog:  # the "examples:" of the help, as shell lines
        lines = [line[2:] for line in parser.epilog.splitlines()[1:]]
        out += ["Examples:", "", "```sh", *lines, "```", ""]
    sub = None
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS  # an old name
        ]
        rows = []
        for action in actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action
                continue
            rows.append(f"| {_argument(parser, action)} | {_details(parser, action)} |")
        if rows:
            title = group.title[0].upper() + group.title[1:]
            out += [f"{title}:", "", "| argument | meaning |", "|---|---|", *rows, ""]
    if sub is not None:
        helps = {a.dest: a.help for a in sub._choices_actions}
        for child_name, child in sub.choices.items():
            out += _command(child, f"{name} {child_name}", helps.get(child_name), level + 1)
    return out


def cli_reference() -> str:
    """The command-line reference, one section per command, from ``bzna_tf.cli.build_parser()``."""
    from bzna_tf.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines to the terminal's width
    parser = build_parser()
    parser.prog = "bzna-tf"
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = []
    for name, child in sub.choices.items():
        out += _command(child, f"bzna-tf {name}", helps.get(name), 2)
    return "\n".join(out)


def gpu_abi_header() -> str:
    """``custom_ops/gpu/core/bzna_gpu.h`` as a C code block."""
    with open(os.path.join(_ROOT, "custom_ops", "gpu", "core", "bzna_gpu.h"), encoding="utf-8") as f:
        header = f.read()
    return f"```c\n{header.rstrip()}\n```"


def quickstart() -> str:
    """The quickstart of getting-started.md, for Home: one copy (the docs' tests run it there)."""
    with open(os.path.join(_ROOT, "docs", "getting-started.md"), encoding="utf-8") as f:
        page = f.read()
    m = re.search(r"^## Quickstart\b.*?(?=^## )", page, re.MULTILINE | re.DOTALL)
    if m is None:
        raise PluginError("docs/getting-started.md has no '## Quickstart' section for Home")
    # Its links to its own page's sections point there from Home (both pages are at the docs' root).
    return re.sub(r"\]\(#", "](getting-started.md#", m[0]).rstrip() + "\n"


GENERATORS = {"cli": cli_reference, "gpu-abi-header": gpu_abi_header, "quickstart": quickstart}


def on_page_markdown(markdown, page, config, files):
    def generate(match):
        name = match["name"]
        if name not in GENERATORS:
            raise PluginError(
                f"{page.file.src_path}: unknown generated content {name!r}; known: {sorted(GENERATORS)}"
            )
        return GENERATORS[name]()

    return _MARKER.sub(generate, markdown)


def _names_whole(table: re.Match) -> str:
    """A table's inline code broken only between words: `drop_remainder`, `--label-key` kept whole.

    Each word of the code (the text between its spaces) becomes a piece that never breaks
    (docs/stylesheets/extra.css), so that a narrow column cannot split it mid-word, nor
    `--label-key` between its dashes. A word longer than ``_LONG_NAME`` characters may break after
    its ``/ . ( , = _`` (``tf.image.`` / ``resize(antialias=True)``), so that it does not widen its
    table past the page.
    """

    def word(text: str) -> str:
        parts = _BREAK_AFTER.split(text) if len(text) > _LONG_NAME else [text]
        return "<wbr>".join(f"<span>{p}</span>" for p in parts if p)

    def code(match: re.Match) -> str:
        return '<code class="bzna-words">' + " ".join(map(word, match[1].split(" "))) + "</code>"

    return _CODE.sub(code, table[0])


_TABLE = re.compile(r"<table>.*?</table>", re.DOTALL)
_CODE = re.compile(r"<code>([^<]+)</code>")
_LONG_NAME = 16
_BREAK_AFTER = re.compile(r"(?<=[/.(,=_])")


def on_page_content(html, page, config, files):
    # Docstrings write Sphinx roles (:class:`bzna_tf.EpochState`): show them as code (``~``: the last name).
    def plain(match):
        target = match["target"]
        if match["tilde"]:
            target = target.rsplit(".", 1)[-1]
        return f"<code>{target}</code>"

    return _TABLE.sub(_names_whole, _ROLE.sub(plain, html))
