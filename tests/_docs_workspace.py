"""The small data the docs' code blocks run on: examples/example_data.py writes it (its docstring
lists the files), and each page runs in a fresh copy of it."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))
from example_data import build  # noqa: E402  (examples/ is not a package)

__all__ = ["build", "cache_dir", "copy"]


def copy(source: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """A fresh copy of the workspace for one page (pages write files; they must not see each other's)."""
    shutil.copytree(source, dest)
    return dest


def cache_dir() -> str:
    """Where bzna_tf caches its native libraries (kept when a page's $HOME moves)."""
    if os.environ.get("BZNA_TF_CACHE_DIR"):
        return os.environ["BZNA_TF_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bzna_tf")
