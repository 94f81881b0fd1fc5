"""A long run's progress: a redrawn bar on a terminal, plain lines in a log.

A bar redraws itself with carriage returns, which a terminal (or a Jupyter
notebook) turns into one line that changes; a log file, a pipe or a batch
job's output keeps every redraw, as one long line into which the skip lines
run. Where the log is not a terminal, a conversion (and ``bzna-tf verify``)
prints instead plain lines, at least one every :data:`INTERVAL` seconds and
one at each further :data:`STEP` percent (no closer than :data:`MIN_GAP`
seconds apart), and each skipped image on a line of its own::

    1,024 of 9,469 images (11%) in 0:01:00, 17.1 images/s, 0:08:14 left, 1 skipped

``progress=`` (``--progress``) picks one of :data:`PROGRESS_MODES`:
``"auto"`` (or True) the bar on a terminal and lines elsewhere, ``"bar"``,
``"lines"``, or ``"none"`` (or False).
"""

from __future__ import annotations

import time

__all__ = ["INTERVAL", "MIN_GAP", "PROGRESS_MODES", "PlainProgress", "STEP", "progress_mode", "redraws"]

PROGRESS_MODES = ("auto", "bar", "lines", "none")
"""What ``progress=`` (``--progress``) may name: auto (a bar on a terminal, else lines), bar, lines, none."""

INTERVAL = 60.0
"""The most seconds between two lines of :class:`PlainProgress`."""

STEP = 10
"""Percent: :class:`PlainProgress` also prints a line each time the count passes another STEP percent..."""

MIN_GAP = 5.0
"""... when at least this many seconds have passed since its last line (a short run prints a few lines)."""


def redraws(log) -> bool:
    """Whether ``log`` shows a redrawn bar as one line: a terminal, or a Jupyter kernel's output."""
    try:
        if log.isatty():
            return True
    except (AttributeError, ValueError, OSError):  # no isatty (a logging adapter), or closed
        return False
    return type(log).__module__.partition(".")[0] == "ipykernel"


def progress_mode(progress, log) -> str:
    """What ``progress`` shows on ``log``: ``"bar"``, ``"lines"`` or ``"none"``.

    Args:
      progress: True or ``"auto"`` (a bar where ``log`` redraws it, see :func:`redraws`, else lines),
        False, None or ``"none"``, ``"bar"`` or ``"lines"``.
      log: the stream the progress goes to.

    Raises:
      ValueError: ``progress`` is none of these.
    """
    if progress is True or progress == "auto":
        return "bar" if redraws(log) else "lines"
    if progress is False or progress is None or progress == "none":
        return "none"
    if progress in ("bar", "lines"):
        return progress
    raise ValueError(
        f"Expected `progress` as True, False or one of {PROGRESS_MODES}. Received: progress={progress!r}"
    )


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PlainProgress:
    """The part of a tqdm bar that the converter and verify use, in plain lines.

    Args:
      total: how many items the run goes through (None when unknown).
      log: where the lines go (a file object).
      unit: what the items are called in the lines ("images", "samples").
    """

    def __init__(self, total: int | None, log, unit: str = "images"):
        self.total, self.log, self.unit = total, log, unit
        self.n = 0
        self.note = ""
        self.start = self.last = time.monotonic()
        self.shown_step = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self) -> None:
        """Nothing to undo (a tqdm bar clears its line here)."""

    def update(self, n: int = 1) -> None:
        """Counts ``n`` more items; prints a line when one is due (see the module's description)."""
        self.n += n
        now = time.monotonic()
        gap = now - self.last
        step = 100 * self.n // (self.total * STEP) if self.total else 0
        if gap >= INTERVAL or (step > self.shown_step and gap >= MIN_GAP):
            self.last, self.shown_step = now, step
            print(self._line(now - self.start), file=self.log, flush=True)

    def set_postfix(self, refresh: bool = False, **counts) -> None:
        """Counts for the next line: ``skipped=3`` shows ", 3 skipped" (a zero count shows nothing)."""
        del refresh
        self.note = ", ".join(f"{v:,} {k}" for k, v in counts.items() if v)

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        """Words for the next line ("2 damaged")."""
        del refresh
        self.note = text

    def write(self, message: str, file=None) -> None:
        """One line of its own (a skipped image)."""
        print(message, file=file or self.log, flush=True)

    def _line(self, elapsed: float) -> str:
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if self.total:
            left = _clock((self.total - self.n) / rate) if rate > 0 else "?"
            head = f"{self.n:,} of {self.total:,} {self.unit} ({100 * self.n // self.total}%)"
            tail = f", {left} left"
        else:
            head, tail = f"{self.n:,} {self.unit}", ""
        note = f", {self.note}" if self.note else ""
        return f"{head} in {_clock(elapsed)}, {rate:.1f} {self.unit}/s{tail}{note}"
