"""Per-picture checksums: a second top-level ``uuid`` box the original tools ignore.

::

    ftyp | mdat | moov | [uuid: metadata] | uuid: checksums

    offset  bytes  field (big-endian)
    0       4      size32 (1, then a 64-bit largesize, past 4 GiB)
    4       4      'uuid'
    8       16     usertype = CHECKSUMS_UUID
    24      1      version = 1
    25      3      flags = 0
    28      4      algorithm = 'c32c': CRC-32C (Castagnoli; reflected, init and final XOR 0xffffffff)
    32      4      sample_count N, that of the outer bzna_input track
    36      4      checksum of the whole outer 'moov' box (header included)
    40      4      checksum of the bzna_target samples, concatenated in order (of nothing: 0)
    44      4      checksum of the bzna_fname samples, concatenated in order
    48      1      track_count K
    49      ...    K track names, each one length byte then the hdlr name ('bzna_input', 'bzna_thumb')
    then           K columns of N uint32, one per track in the order of the names

What a picture's checksum covers, for sample i whose per-image mp4 is the bytes
M = [0, S) of its ``bzna_input`` sample:

- ``bzna_input``: all of M. The readers read all of it to decode the input.
- ``bzna_thumb``: M without the bytes [h, t), where t is where the thumbnail
  picture starts in M (the outer ``bzna_thumb`` sample offset minus the
  ``bzna_input`` one) and h is the first payload byte of the top-level box of
  M that holds byte t (its ``mdat``): the ftyp, the mdat header, the
  thumbnail and everything after it (the nested target and name, the nested
  moov with tkhd sizes and hvcC), that is every byte a reader of the
  thumbnail reads, and not the full-size picture before it, which it skips.
  When the image needs no thumbnail, h = t and both checksums are equal.

Nothing before this box changes: a file with it is the original tools' layout
byte for byte, followed by one box they skip. Readers (this module, the C++
``ReadBznaIndex``) take the first box with this usertype and refuse a
malformed one (sizes that do not add up, a sample count other than the
file's, a repeated track, a ``bzna_thumb`` column without that track). A
version or algorithm they do not know makes them ignore the table (the file
then reads as one without checksums), and so do columns of unknown tracks.

CRC-32C is computed with NumPy (:func:`bzna_tf.format.crc.crc32c`, about
300 MB/s on one core: independent 64-byte lanes, then combined) and in C++
with SSE4.2.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

import numpy as np

from bzna_tf.format.boxes import Where, box, read_header
from bzna_tf.format.crc import crc32c, masked_crc32c
from bzna_tf.format.sample import INPUT, THUMB

__all__ = [
    "ALGORITHM",
    "CHECKSUMS_UUID",
    "ChecksumTable",
    "build_checksum_box",
    "crc32c",
    "masked_crc32c",
    "mismatch_reason",
    "parse_checksum_box",
    "picture_checksums",
    "thumb_head_end",
]

# uuid5(NAMESPACE_URL, "https://bzna_tf/checksums/1"): fixed forever.
CHECKSUMS_UUID = uuid.uuid5(uuid.NAMESPACE_URL, "https://bzna_tf/checksums/1").bytes
VERSION = 1
ALGORITHM = b"c32c"
# The tracks whose pictures have checksums, in the order the writer stores them.
TRACKS = (INPUT, THUMB)
# version/flags, algorithm, sample_count, three index checksums, track_count.
_FIXED = 4 + 4 + 4 + 12 + 1
_FIXED_FIELDS = struct.Struct(">4sIIIIB")

# --------------------------------------------------------------------- what is covered


def thumb_head_end(mp4, thumb_offset: int, where: Where = Where()) -> int:
    """h: the first payload byte of the top-level box of ``mp4`` that holds byte ``thumb_offset``.

    Raises:
      BznaFormatError: ``thumb_offset`` is outside the per-image mp4, or in no
        top-level box's payload (its checksum cannot be defined).
    """
    size = len(mp4)
    if not 0 <= thumb_offset < size:
        raise where.error(
            f"the thumbnail picture starts at byte {thumb_offset} of a {size}-byte per-image mp4 (outer "
            f"'{THUMB}' index): outside it, so its checksum cannot be checked"
        )
    pos = 0
    while pos < size:
        _, header, box_size = read_header(mp4, pos, size - pos, where=where)
        if pos + header <= thumb_offset < pos + box_size:
            return pos + header
        if thumb_offset < pos + header:
            break
        pos += box_size
    raise where.error(
        f"the thumbnail picture starts at byte {thumb_offset} of the per-image mp4, in no top-level box's "
        "payload, so its checksum cannot be checked"
    )


def picture_checksums(mp4, thumb_offset: int, where: Where = Where()) -> tuple[int, int]:
    """(bzna_input, bzna_thumb) checksums of one per-image mp4 (see the module docstring).

    Args:
      mp4: the per-image mp4's bytes.
      thumb_offset: where its thumbnail picture starts in it (its input
        picture's offset when it has no separate thumbnail).
    """
    mv = memoryview(mp4)
    whole = crc32c(mv)
    head = thumb_head_end(mv, thumb_offset, where)
    if head == thumb_offset:
        return whole, whole
    return whole, crc32c(mv[thumb_offset:], crc32c(mv[:head]))


def mismatch_reason(track: str, stored: int, computed: int, covered: int, offset: int) -> str:
    """The words of a checksum mismatch (the C++ reader says the same), after "<file>, sample <i>: "."""
    return (
        f"checksum mismatch (stored 0x{stored:08x}, computed 0x{computed:08x}) of its '{track}' picture: the "
        f"{covered} bytes it covers in the per-image mp4 at byte offset {offset} changed since the file was "
        "written (damaged storage or copy)"
    )


# ------------------------------------------------------------------------- the box


@dataclass
class ChecksumTable:
    """The checksum box of one file.

    Attributes:
      offset: the box's byte offset in the file.
      version, algorithm: as stored. A table this reader does not know
        (``supported`` False, ``reason`` says why) has no columns.
      tracks: per-picture checksums, a uint32 array of the file's sample
        count per known track (``bzna_input``, ``bzna_thumb``).
      moov, targets, names: checksums of the outer index (see the module docstring).
    """

    offset: int
    version: int
    algorithm: bytes = ALGORITHM
    tracks: dict[str, np.ndarray] = field(default_factory=dict)
    moov: int | None = None
    targets: int | None = None
    names: int | None = None
    reason: str | None = None

    @property
    def supported(self) -> bool:
        return self.reason is None

    def describe(self) -> str:
        """``CRC-32C of bzna_input, bzna_thumb`` or why the table is ignored."""
        if not self.supported:
            return f"checksum table ignored: {self.reason}"
        return f"CRC-32C of {', '.join(self.tracks) or 'no track'}"


def build_checksum_box(tracks: dict[str, np.ndarray], *, moov: int, targets: int, names: int) -> bytes:
    """The checksum box: ``tracks`` maps hdlr names to one uint32 per sample (same lengths)."""
    counts = {len(v) for v in tracks.values()}
    if len(counts) != 1:
        raise ValueError(f"every track needs one checksum per sample. Received: lengths {sorted(counts)}")
    if len(tracks) > 255:
        raise ValueError(f"at most 255 tracks. Received: {len(tracks)}")
    (n,) = counts
    head = bytes((VERSION, 0, 0, 0)) + _FIXED_FIELDS.pack(ALGORITHM, n, moov, targets, names, len(tracks))
    names_part = b"".join(bytes((len(k.encode()),)) + k.encode() for k in tracks)
    columns = [np.asarray(v, dtype=">u4").tobytes() for v in tracks.values()]
    return box(b"uuid", CHECKSUMS_UUID, head, names_part, *columns)


def parse_checksum_box(
    read, offset: int, header: int, size: int, *, num_samples: int, has_thumb: bool, where: Where
) -> ChecksumTable:
    """The table in the checksum box at ``offset`` (whose usertype was already matched).

    Args:
      read: ``read(offset, n) -> bytes``, exactly n bytes of the file.
      offset, header, size: the box's offset, header size and size.
      num_samples: the file's sample count (bzna_input).
      has_thumb: whether the outer index has a bzna_thumb track.
      where: the file, for errors.

    Raises:
      BznaFormatError: a malformed table (naming the file, the box and the offset).
    """
    start = offset + header + 16
    length = size - header - 16

    def error(reason, at=None):
        return where.error(f"checksum table: {reason}", offset=offset if at is None else at, box="uuid")

    if length < 4:
        raise error(f"{length} bytes of payload, too short for its version")
    first = read(start, min(length, _FIXED + 255 * 256))
    version = first[0]
    if version != VERSION:
        return ChecksumTable(offset, version, reason=f"version {version}, this reader knows {VERSION}")
    if length < _FIXED:
        raise error(f"{length} bytes of payload, the fixed fields need {_FIXED}")
    algorithm, n, moov, targets, names, k = _FIXED_FIELDS.unpack_from(first, 4)
    if algorithm != ALGORITHM:
        return ChecksumTable(
            offset, version, algorithm, reason=f"algorithm {algorithm!r}, this reader knows 'c32c'"
        )
    if n != num_samples:
        raise error(f"{n} samples, the file has {num_samples}", at=start + 8)
    pos = _FIXED
    order = []
    for _ in range(k):
        if pos >= len(first):
            raise error(f"truncated track names: {length} bytes of payload", at=start + pos)
        m = first[pos]
        if pos + 1 + m > len(first):
            raise error(f"truncated track names: {length} bytes of payload", at=start + pos)
        name = first[pos + 1 : pos + 1 + m].decode("latin-1")
        if name in order:
            raise error(f"track '{name}' listed twice", at=start + pos)
        order.append(name)
        pos += 1 + m
    expected = pos + 4 * k * n
    if length != expected:
        raise error(f"{length} bytes of payload, expected {expected} for {k} x {n} checksums")
    if THUMB in order and not has_thumb:
        raise error(f"a '{THUMB}' column, but the file has no '{THUMB}' track")
    tracks = {}
    for j, name in enumerate(order):
        if name in TRACKS:
            at = start + pos + 4 * n * j
            tracks[name] = np.frombuffer(read(at, 4 * n), ">u4").astype(np.uint32)
    return ChecksumTable(offset, version, algorithm, tracks, moov, targets, names)
