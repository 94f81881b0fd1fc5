"""Counts in messages: "1 sample", "2 samples", "a.bzna holds", "the files hold"; where a warning points."""

from __future__ import annotations

import sys

__all__ = ["count", "holds", "user_stacklevel"]

# Frames a warning should not point at: bzna_tf's own, and Keras' and TensorFlow's between the user's
# code and ours (a layer's constructor runs under Keras' wrappers).
_LIBRARIES = ("bzna_tf", "keras", "tensorflow")


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


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn``, called by the caller of this function, that points at
    the first frame outside bzna_tf, Keras and TensorFlow: the user's line, however deep the warning is."""
    frame, level = sys._getframe(1), 1
    while frame is not None and str(frame.f_globals.get("__name__")).partition(".")[0] in _LIBRARIES:
        frame, level = frame.f_back, level + 1
    return level
