"""MkDocs hooks: the parts of the site made from the code at build time, so that they cannot drift.

A page asks for generated content with a line of its own, ``<!-- generated: NAME -->``:

- ``cli``: the command-line reference, from the argparse parsers of ``bzna_tf/cli.py``
  (:func:`bzna_tf.cli.build_parser`): every command, its usage, description, examples and arguments.
- ``gpu-abi-header``: the GPU core's header, ``custom_ops/gpu/core/bzna_gpu.h``, verbatim.

An unknown name fails the build. The API reference needs no hook: mkdocstrings renders the
docstrings (``::: bzna_tf.Dataset`` lines); this file only turns the docstrings' Sphinx roles
(``:class:`X```) into plain code, which mkdocstrings would print as written.
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


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


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
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    extra = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    default = action.default
    if action.option_strings and default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        extra.append(f"default `{shown}`")
    if action.required and action.option_strings:
        extra.append("required")
    if extra:
        text = f"{text} ({'; '.join(extra)})" if text else "; ".join(extra).capitalize()
    return _cell(text)


def _command(parser: argparse.ArgumentParser, name: str, summary: str | None, level: int) -> list[str]:
    anchor = name.replace("bzna-tf ", "").replace(" ", "-") or "bzna-tf"
    out = [f"{'#' * level} `{name}` {{#{anchor}}}", ""]
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        out += [parser.description, ""]
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


GENERATORS = {"cli": cli_reference, "gpu-abi-header": gpu_abi_header}


def on_page_markdown(markdown, page, config, files):
    def generate(match):
        name = match["name"]
        if name not in GENERATORS:
            raise PluginError(
                f"{page.file.src_path}: unknown generated content {name!r}; known: {sorted(GENERATORS)}"
            )
        return GENERATORS[name]()

    return _MARKER.sub(generate, markdown)


def on_page_content(html, page, config, files):
    # Docstrings write Sphinx roles (:class:`bzna_tf.EpochState`): show them as code (``~``: the last name).
    def plain(match):
        target = match["target"]
        if match["tilde"]:
            target = target.rsplit(".", 1)[-1]
        return f"<code>{target}</code>"

    return _ROLE.sub(plain, html)
