"""A conversion's progress: a redrawn bar on a terminal, plain lines in a log.

A bar redraws itself with carriage returns, which a terminal (or a Jupyter
notebook) turns into one line that changes; a log file, a pipe or a batch
job's output keeps every redraw, as one long line into which the skip lines
run. Where the log is not a terminal, the conversion prints instead one plain
line every :data:`INTERVAL` seconds, and each skipped image on a line of its
own::

    1,024 of 9,469 images (11%) in 0:01:00, 17.1 images/s, 0:08:14 left, 1 skipped
"""

from __future__ import annotations

import time

__all__ = ["INTERVAL", "PlainProgress", "redraws"]

INTERVAL = 60.0
"""Seconds between two lines of :class:`PlainProgress`."""


def redraws(log) -> bool:
    """Whether ``log`` shows a redrawn bar as one line: a terminal, or a Jupyter kernel's output."""
    try:
        if log.isatty():
            return True
    except (AttributeError, ValueError, OSError):  # no isatty (a logging adapter), or closed
        return False
    return type(log).__module__.partition(".")[0] == "ipykernel"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class PlainProgress:
    """The progress bar's part the converter uses (``update``, ``set_postfix``, ``write``), in plain lines.

    Args:
      total: how many images the conversion goes through (None when unknown).
      log: where the lines go (a file object).
    """

    def __init__(self, total: int | None, log):
        self.total, self.log = total, log
        self.n = self.skipped = 0
        self.start = self.last = time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n: int = 1) -> None:
        """Counts ``n`` more images; prints a line when :data:`INTERVAL` has passed since the last."""
        self.n += n
        now = time.monotonic()
        if now - self.last >= INTERVAL:
            self.last = now
            print(self._line(now - self.start), file=self.log, flush=True)

    def set_postfix(self, skipped: int = 0, refresh: bool = False) -> None:
        """The skipped images' count, for the next line."""
        del refresh
        self.skipped = skipped

    def write(self, message: str, file=None) -> None:
        """One line of its own (a skipped image)."""
        print(message, file=file or self.log, flush=True)

    def _line(self, elapsed: float) -> str:
        rate = self.n / elapsed if elapsed > 0 else 0.0
        if self.total:
            left = _clock((self.total - self.n) / rate) if rate > 0 else "?"
            head = f"{self.n:,} of {self.total:,} images ({100 * self.n // self.total}%)"
            tail = f", {left} left"
        else:
            head, tail = f"{self.n:,} images", ""
        skipped = f", {self.skipped:,} skipped" if self.skipped else ""
        return f"{head} in {_clock(elapsed)}, {rate:.1f} images/s{tail}{skipped}"
