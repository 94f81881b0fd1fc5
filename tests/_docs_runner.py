"""Runs pages' code blocks, in order (tests/test_docs.py starts it).

    python tests/_docs_runner.py REQUEST.json     one page, then exit
    python tests/_docs_runner.py --serve          pages one after another: a REQUEST.json path per
                                                  line of stdin, a DONE line on stdout after each

A request: ``{"page": "docs/x.md", "cwd": DIR, "env": {...}, "result": PATH, "blocks": [{"where":
"docs/x.md:12", "lang": "python", "code": ..., "requires": [...], "expect": false}]}``. The page runs
in ``cwd`` with ``env`` set (and restored after it). Python blocks of a page share one namespace
(``__name__ == "__main__"``, as in a script: a snippet that starts worker processes guards itself
as users must; a served page gets a fresh one); shell blocks run with ``bash -e -o pipefail``. A
``text`` block with ``"expect": true`` must appear in the output of the block before it (runs of
whitespace compared as one space, ``...`` matching anything). An ``sh exits-N`` block (``"exits": N``)
runs command by command, each of which must exit with status N. The first failure prints its
traceback or output and ends the page; the outcome is written to ``result`` as JSON
(``{"ok": bool}``).

Serving saves each page the import of TensorFlow; pages that need a fresh interpreter (one that
chooses Keras' backend) are run one per process by the test.
"""

from __future__ import annotations

import importlib.util
import io
import json
import linecache
import os
import re
import shlex
import subprocess
import sys
import time
import traceback

DONE = "@@ docs runner: page done @@"


class _Tee(io.TextIOBase):
    """Writes to a stream and keeps a copy (a block's output, for the ``expect`` blocks after it)."""

    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, text):
        self.copy.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def expected_in(expected: str, output: str) -> bool:
    """Whether ``expected`` appears in ``output``: whitespace runs as one space, ``...`` as anything."""
    parts = [re.escape(" ".join(part.split())) for part in expected.split("...")]
    return re.search(r".*?".join(parts), " ".join(output.split()), re.DOTALL) is not None


def commands(code: str) -> list[str]:
    """The commands of a shell block, one per line (a line ending in a backslash continues)."""
    out, pending = [], ""
    for line in code.splitlines():
        if line.endswith("\\"):
            pending += line + "\n"
            continue
        command = pending + line
        pending = ""
        if command.strip() and not command.lstrip().startswith("#"):
            out.append(command)
    if pending.strip():
        out.append(pending.rstrip("\\\n"))
    return out


def each_fails(code: str, status: int) -> str:
    """A script running each command of ``code`` and stopping unless it exits with ``status``."""
    script = []
    for n, command in enumerate(commands(code), 1):
        script += [
            f"{command} && __status=0 || __status=$?",
            f'if [ "$__status" -ne {status} ]; then',
            f'  echo "DOCS COMMAND {n} EXITED WITH STATUS $__status, NOT {status}: "{shlex.quote(command)}',
            "  exit 1",
            "fi",
        ]
    return "\n".join(script) + "\n"


def run_blocks(blocks: list) -> bool:
    namespace = {"__name__": "__main__"}
    output = None  # what the last block that ran printed
    for block in blocks:
        where, lang, code = block["where"], block["lang"], block["code"]
        if block.get("expect"):
            if output is not None and not expected_in(code, output):
                print(f"DOCS BLOCK FAILED: {where}: the block before it did not print this text:\n{code}")
                return False
            continue
        output = None
        print(f"----- {where} ({lang})", flush=True)
        missing = [m for m in block.get("requires", ()) if importlib.util.find_spec(m) is None]
        if missing:
            if lang == "python":
                compile(code, where, "exec")
            else:
                subprocess.run(["bash", "-n", "-c", code], check=True)
            print(f"----- {where}: compiled only: {', '.join(missing)} not installed", flush=True)
            continue
        start = time.perf_counter()
        if lang == "python":
            # The source stays findable, as a script's is (inspect.getsource, AutoGraph, tracebacks).
            linecache.cache[where] = (len(code), None, code.splitlines(True), where)
            copy = []
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Tee(stdout, copy), _Tee(stderr, copy)
            try:
                exec(compile(code, where, "exec"), namespace)
            except BaseException:  # noqa: BLE001 - SystemExit from a snippet is a failure too
                traceback.print_exc()
                print(f"DOCS BLOCK FAILED: {where}", flush=True)
                return False
            finally:
                sys.stdout, sys.stderr = stdout, stderr
            output = "".join(copy)
        else:
            sys.stdout.flush()
            status = block.get("exits")
            r = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", code if status is None else each_fails(code, status)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            print(r.stdout, end="", flush=True)
            output = r.stdout
            if r.returncode:
                print(f"DOCS BLOCK FAILED: {where} (exit status {r.returncode})", flush=True)
                return False
        print(f"----- {where}: {time.perf_counter() - start:.1f} s", flush=True)
    return True


def run_page(request: dict) -> bool:
    """One page, in its folder and environment (both restored afterwards)."""
    cwd, env = os.getcwd(), dict(os.environ)
    os.chdir(request["cwd"])
    os.environ.update(request.get("env", {}))
    try:
        ok = run_blocks(request["blocks"])
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
    with open(request["result"], "w", encoding="utf-8") as f:
        json.dump({"ok": ok}, f)
    return ok


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            run_page(_load(line.strip()))
            print(f"\n{DONE}", flush=True)
    else:
        sys.exit(0 if run_page(_load(sys.argv[1])) else 3)
