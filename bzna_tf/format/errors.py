"""The one exception that malformed .bzna data raises."""

from __future__ import annotations

from bzna_tf.format.sniff import printable

__all__ = ["BznaFormatError"]


class BznaFormatError(ValueError):
    """A .bzna file (or a per-image mp4 inside one) is malformed.

    The message names, where known, the file, the absolute byte offset, the box
    path (for example ``moov/trak[bzna_input]/mdia/minf/stbl/stsz``) and the
    sample index, then says what was expected and what was found. Bytes that
    are not printable ASCII (a box type read from a file that is not a .bzna)
    are written ``\\xNN`` in the message, as the C++ reader writes them; the
    attributes keep the facts as found, for programs.

    Attributes:
      path: the file's name (or ``repr`` of the file object), or None.
      offset: absolute byte offset in the file where the problem was found.
      box: the box path, or None.
      sample: the sample index, or None.
      reason: what is wrong, without the location.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        box: str | None = None,
        sample: int | None = None,
    ):
        self.reason = reason
        self.path = path
        self.offset = offset
        self.box = box
        self.sample = sample
        where = []
        if path is not None:
            where.append(str(path))
        if sample is not None:
            where.append(f"sample {sample}")
        if box is not None:
            where.append(f"box {printable(box)}")
        if offset is not None:
            where.append(f"byte offset {offset}")
        reason = printable(reason)
        super().__init__(f"{', '.join(where)}: {reason}" if where else reason)
