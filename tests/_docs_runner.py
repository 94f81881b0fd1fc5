"""Runs one page's code blocks, in order, in the current directory (tests/test_docs.py starts it).

    python tests/_docs_runner.py REQUEST.json

REQUEST.json: ``{"page": "docs/x.md", "blocks": [{"where": "docs/x.md:12", "lang": "python", "code": ...,
"requires": [...]}]}``.
Python blocks share one namespace (``__name__ == "__main__"``, as in a script: a snippet that
starts worker processes guards itself as users must); shell blocks run with ``bash -e -o pipefail``.
A ``text`` block with ``"expect": true`` must appear in the output of the block before it (runs of
whitespace compared as one space, ``...`` matching anything). The first failure prints its
traceback or output and ends the run with status 3.
"""

from __future__ import annotations

import importlib.util
import io
import json
import linecache
import re
import subprocess
import sys
import time
import traceback


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


def run(request: dict) -> int:
    namespace = {"__name__": "__main__"}
    output = None  # what the last block that ran printed
    for block in request["blocks"]:
        where, lang, code = block["where"], block["lang"], block["code"]
        if block.get("expect"):
            if output is not None and not expected_in(code, output):
                print(f"DOCS BLOCK FAILED: {where}: the block before it did not print this text:\n{code}")
                return 3
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
                return 3
            finally:
                sys.stdout, sys.stderr = stdout, stderr
            output = "".join(copy)
        else:
            sys.stdout.flush()
            r = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", code],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            print(r.stdout, end="", flush=True)
            output = r.stdout
            if r.returncode:
                print(f"DOCS BLOCK FAILED: {where} (exit status {r.returncode})", flush=True)
                return 3
        print(f"----- {where}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.exit(run(json.load(f)))
