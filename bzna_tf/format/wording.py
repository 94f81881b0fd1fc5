"""Counts in messages: "1 sample", "2 samples", "a.bzna holds", "the files hold"."""

from __future__ import annotations

__all__ = ["count", "holds"]


def count(n: int, noun: str, plural: str | None = None, *, grouped: bool = True) -> str:
    """``n`` and the noun in the right number: "1 sample", "1,281,167 samples".

    Args:
      n: how many.
      noun: the singular ("sample", "data file").
      plural: the plural when it is not ``noun + "s"`` ("entries").
      grouped: thousands separators; False where the C++ reader words the same error without them.
    """
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else (plural or noun + 's')}"


def holds(paths) -> str:
    """The subject and verb for what some files hold: "a.bzna holds" for one file, "the 3 files hold"."""
    paths = list(paths)
    if len(paths) == 1:
        return f"{paths[0]} holds"
    return f"the {len(paths):,} files hold"
