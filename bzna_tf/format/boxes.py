"""ISOBMFF box walking and building, with bounds checked on every read.

A box on disk::

    +--------+--------+----------------------+-----------------------------+
    | size32 | type   | largesize (size32=1) | payload ...                 |
    | u32 BE | 4 char | u64 BE, optional     |                             |
    +--------+--------+----------------------+-----------------------------+
    size32 = 0 means "to the end of the enclosing range"; size includes the header.

A *full box* starts its payload with version (u8) and flags (u24).

Parsing never trusts a size or a count: every one is checked against the bytes
that actually exist before anything is sliced or allocated, and every problem
raises :class:`BznaFormatError` naming the file, the absolute byte offset, the
box path and, where known, the sample index.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from bzna_tf.format.errors import BznaFormatError

__all__ = ["Box", "Where", "FieldReader", "box", "full_box", "parse_boxes", "read_header"]

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


@dataclass(frozen=True)
class Where:
    """Where the bytes being parsed come from, for error messages."""

    path: str | None = None
    sample: int | None = None

    def error(self, reason: str, *, offset: int | None = None, box: str | None = None):
        return BznaFormatError(reason, path=self.path, offset=offset, box=box, sample=self.sample)


class Box:
    """One parsed box header over an in-memory buffer.

    Attributes:
      type: the four-character type, decoded as latin-1 (so any bytes work).
      offset: absolute byte offset of the box in its file.
      header_size: 8, or 16 with a largesize.
      size: the whole box's size, header included.
      path: the box path used in error messages (``moov/trak/tkhd``).
    """

    __slots__ = ("type", "offset", "header_size", "size", "path", "where", "_data", "_start")

    def __init__(self, data, start, base, btype, header_size, size, path, where):
        self._data = data
        self._start = start  # index of the box's first byte in _data
        self.offset = base + start
        self.type = btype
        self.header_size = header_size
        self.size = size
        self.path = path
        self.where = where

    def __repr__(self):
        return f"Box({self.type!r}, offset={self.offset}, size={self.size})"

    @property
    def payload_offset(self) -> int:
        """Absolute offset of the first payload byte."""
        return self.offset + self.header_size

    @property
    def payload_size(self) -> int:
        return self.size - self.header_size

    def payload(self) -> memoryview:
        s = self._start + self.header_size
        return self._data[s : self._start + self.size]

    def raw(self) -> bytes:
        """The whole box, header included, as bytes."""
        return bytes(self._data[self._start : self._start + self.size])

    def error(self, reason: str, *, at: int | None = None) -> BznaFormatError:
        """An error located in this box; ``at`` is a payload-relative offset."""
        off = self.payload_offset + at if at is not None else self.offset
        return self.where.error(reason, offset=off, box=self.path)

    def reader(self, skip: int = 0) -> FieldReader:
        """A bounds-checked reader over the payload, starting ``skip`` bytes in."""
        return FieldReader(self, skip)

    def children(self, skip: int = 0) -> list[Box]:
        """The boxes inside the payload, after ``skip`` bytes of fields."""
        if skip > self.payload_size:
            raise self.error(f"payload is {self.payload_size} bytes, expected at least {skip}")
        s = self._start + self.header_size + skip
        return parse_boxes(
            self._data,
            s,
            self._start + self.size,
            base=self.offset - self._start,
            parent=self.path,
            where=self.where,
        )

    def full_header(self) -> tuple[int, int]:
        """(version, flags) of a full box."""
        r = self.reader()
        v = r.u8()
        return v, r.uint(3)


class FieldReader:
    """Reads big-endian fields from one box's payload, refusing to overrun it."""

    __slots__ = ("box", "pos", "_buf")

    def __init__(self, box: Box, pos: int = 0):
        self.box = box
        self._buf = box.payload()
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self._buf) - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.remaining:
            raise self.box.error(
                f"{what} needs {n} bytes but only {max(self.remaining, 0)} remain in the box",
                at=self.pos,
            )

    def bytes(self, n: int, what: str = "field") -> bytes:
        self.need(n, what)
        b = bytes(self._buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def skip(self, n: int, what: str = "field") -> None:
        self.need(n, what)
        self.pos += n

    def uint(self, n: int, what: str = "field") -> int:
        self.need(n, what)
        v = int.from_bytes(self._buf[self.pos : self.pos + n], "big")
        self.pos += n
        return v

    def u8(self, what: str = "field") -> int:
        return self.uint(1, what)

    def u16(self, what: str = "field") -> int:
        return self.uint(2, what)

    def u32(self, what: str = "field") -> int:
        return self.uint(4, what)

    def u64(self, what: str = "field") -> int:
        return self.uint(8, what)

    def i32(self, what: str = "field") -> int:
        v = self.uint(4, what)
        return v - (1 << 32) if v >= 1 << 31 else v

    def array(self, count: int, dtype: str, what: str) -> np.ndarray:
        """``count`` big-endian integers as a read-only NumPy view (no copy).

        The count is checked against the bytes present before anything is
        allocated, so a bogus count of 2**32 fails at once.
        """
        dt = np.dtype(dtype)
        if count * dt.itemsize > self.remaining:
            raise self.box.error(
                f"{what}: {count} entries of {dt.itemsize} bytes need {count * dt.itemsize} bytes "
                f"but only {self.remaining} remain in the box",
                at=self.pos,
            )
        a = np.frombuffer(self._buf, dtype=dt, count=count, offset=self.pos)
        self.pos += count * dt.itemsize
        return a

    def cstring(self, what: str = "string") -> bytes:
        """Bytes up to a NUL (consumed) or the end of the box."""
        rest = self._buf[self.pos :]
        b = bytes(rest)
        i = b.find(b"\0")
        if i < 0:
            self.pos += len(b)
            return b
        self.pos += i + 1
        return b[:i]


def parse_boxes(
    data, start: int, end: int, *, base: int = 0, parent: str = "", where: Where = Where()
) -> list[Box]:
    """Parse the sequence of boxes in ``data[start:end]``.

    Args:
      data: a bytes-like object.
      start, end: the range to parse, as indices into ``data``.
      base: absolute file offset of ``data[0]``.
      parent: the enclosing box path, for messages.
      where: file name and sample index, for messages.

    Returns:
      The boxes, in file order. Every box lies wholly inside the range.

    Raises:
      BznaFormatError: a header is truncated, a size is smaller than its header,
        or a box runs past the end of the range.
    """
    boxes = []
    off = start
    mv = memoryview(data)
    while off < end:
        btype, header, size = read_header(mv, off, end - off, base=base, parent=parent, where=where)
        boxes.append(Box(mv, off, base, btype, header, size, _join(parent, btype), where))
        off += size
    return boxes


def read_header(
    buf, pos: int, left: int, *, base: int = 0, parent: str = "", where: Where = Where()
) -> tuple[str, int, int]:
    """Decode and check the box header at ``buf[pos:]``.

    Args:
      buf: bytes holding at least ``min(left, 16)`` bytes from ``pos``.
      pos: index of the header in ``buf``.
      left: bytes from the header to the end of the enclosing range (the parent
        box or the file); the box must fit in them.
      base, parent, where: absolute offset of ``buf[0]``, enclosing box path and
        file/sample, for messages.

    Returns:
      (type, header_size, size); size 0 ("to the end") is resolved to ``left``.
    """
    at = base + pos
    if left < 8:
        raise where.error(
            f"truncated box header: {left} bytes left in {parent or 'the file'}, need 8",
            offset=at,
            box=parent or None,
        )
    size = _U32.unpack_from(buf, pos)[0]
    btype = bytes(buf[pos + 4 : pos + 8]).decode("latin-1")
    path = _join(parent, btype)
    header = 8
    if size == 1:
        if left < 16:
            raise where.error(
                f"box '{btype}' has a 64-bit size but only {left} bytes remain", offset=at, box=path
            )
        size = _U64.unpack_from(buf, pos + 8)[0]
        header = 16
    elif size == 0:
        size = left
    if size < header:
        raise where.error(f"box size {size} is smaller than its {header}-byte header", offset=at, box=path)
    if size > left:
        raise where.error(
            f"box size {size} runs past the end of {parent or 'the file'} ({left} bytes remain)",
            offset=at,
            box=path,
        )
    return btype, header, size


def _join(parent: str, child: str) -> str:
    return f"{parent}/{child}" if parent else child


def find(boxes: list[Box], btype: str) -> Box | None:
    """The first box of a type, or None."""
    for b in boxes:
        if b.type == btype:
            return b
    return None


def require(boxes: list[Box], btype: str, parent: Box | None, where: Where) -> Box:
    """The first box of a type, or a BznaFormatError naming the parent."""
    b = find(boxes, btype)
    if b is None:
        if parent is not None:
            raise parent.error(f"missing required child box '{btype}'")
        raise where.error(f"missing required top-level box '{btype}'")
    return b


# Building.


def box(btype: bytes, *parts: bytes) -> bytes:
    """A box: header + concatenated payload parts (largesize when needed)."""
    n = sum(len(p) for p in parts)
    if n + 8 < 1 << 32:
        return b"".join((_U32.pack(n + 8), btype, *parts))
    return b"".join((_U32.pack(1), btype, _U64.pack(n + 16), *parts))


def full_box(btype: bytes, version: int, flags: int, *parts: bytes) -> bytes:
    return box(btype, bytes((version,)) + flags.to_bytes(3, "big"), *parts)
