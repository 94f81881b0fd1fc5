"""One ``trak``: parsing its sample tables into NumPy, and building it back.

Used both for the outer .bzna index (a million entries per table) and for the
one-sample tracks of each per-image mp4. The tables are kept as read-only
big-endian views of the ``moov`` bytes; nothing is converted or copied until a
caller asks for a whole array, and a per-sample lookup costs one index::

    trak
      tkhd                 track_id, flags, width/height (16.16)
      mdia
        mdhd
        hdlr               handler_type, name (finds the track: 'bzna_input', ...)
        minf
          nmhd | vmhd
          dinf/dref/'url '
          stbl
            stsd           one sample entry: 'mett' (meta tracks) or 'hvc1' (video)
            stts           [(count, delta)]
            stsz           sample_size (constant) or a u32 table
            stsc           [(first_chunk, samples_per_chunk, description_index)]
            stco | co64    u32 | u64 chunk offsets
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

import bzna_tf.format.wording as wording  # the module itself, not through the package
from bzna_tf.format.boxes import Box, box, find, full_box, require
from bzna_tf.format.errors import BznaFormatError

__all__ = ["Trak", "parse_trak", "build_trak", "TrakSpec"]

# Unity matrix of tkhd/mvhd, 16.16 and 2.30 fixed point.
UNITY_MATRIX = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)
LANG_UND = 0x55C4  # ISO-639-2 'und' packed as three 5-bit letters


class Trak:
    """The parsed facts of one track and lazy access to its sample table.

    Attributes:
      name: the hdlr name ('bzna_input', ...), one trailing NUL stripped.
      handler: the hdlr handler type ('meta', 'vide').
      track_id, tkhd_version, tkhd_flags: from tkhd.
      width, height: integer parts of the tkhd 16.16 width and height.
      entry: the first sample entry box of stsd (None when stsd is empty).
      sample_count: number of samples.
      box: the trak box itself.
    """

    def __init__(
        self,
        *,
        box,
        name,
        handler,
        track_id,
        tkhd_version,
        tkhd_flags,
        width,
        height,
        entry,
        sample_count,
        const_size,
        sizes_be,
        offsets_be,
        chunk_box,
        limit,
    ):
        self.box = box
        self.name = name
        self.handler = handler
        self.track_id = track_id
        self.tkhd_version = tkhd_version
        self.tkhd_flags = tkhd_flags
        self.width = width
        self.height = height
        self.entry = entry
        self.sample_count = sample_count
        self._const_size = const_size
        self._sizes_be = sizes_be
        self._offsets_be = offsets_be
        self._chunk_box = chunk_box
        self._limit = limit

    def __repr__(self):
        return f"Trak({self.name!r}, handler={self.handler!r}, samples={self.sample_count})"

    def __len__(self):
        return self.sample_count

    @property
    def mime(self) -> str | None:
        """The mime_format of a 'mett' sample entry (None for other entries)."""
        if self.entry is None or self.entry.type != "mett":
            return None
        r = self.entry.reader(8)
        r.cstring("content_encoding")
        return r.cstring("mime_format").decode("utf-8", "replace")

    @property
    def uses_co64(self) -> bool:
        return self._chunk_box.type == "co64"

    def _check_index(self, i: int) -> int:
        n = self.sample_count
        if not -n <= i < n:
            raise IndexError(
                f"sample index {i} out of range for track '{self.name}' of {wording.count(n, 'sample')}"
            )
        return i + n if i < 0 else i

    def size(self, i: int) -> int:
        i = self._check_index(i)
        return self._const_size if self._sizes_be is None else int(self._sizes_be[i])

    def offset(self, i: int) -> int:
        """Offset of sample i, checked to lie with its size inside the data."""
        i = self._check_index(i)
        off = int(self._offsets_be[i])
        size = self.size(i)
        if off + size > self._limit:
            self._range_error(i, off, size)
        return off

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        """Every sample size, as int64 (converted on first use, then cached)."""
        if self._sizes_be is None:
            return np.full(self.sample_count, self._const_size, dtype=np.int64)
        return self._sizes_be.astype(np.int64)

    @functools.cached_property
    def offsets(self) -> np.ndarray:
        """Every sample offset, as int64, each checked to fit the data with its size."""
        off = self._offsets_be.astype(np.int64)  # co64 values >= 2**63 turn negative
        bad = np.flatnonzero((off < 0) | (off + self.sizes > self._limit))
        if bad.size:
            i = int(bad[0])
            self._range_error(i, int(self._offsets_be[i]), self.size(i))
        return off

    def _range_error(self, i, off, size):
        w = self._chunk_box.where
        raise BznaFormatError(
            f"track '{self.name}' sample spans bytes [{off}, {off + size}) past the end of the "
            f"data ({self._limit} bytes)",
            path=w.path,
            offset=self._chunk_box.offset,
            box=self._chunk_box.path,
            sample=i if w.sample is None else w.sample,
        )


def _strip_nul(b: bytes) -> bytes:
    return b[:-1] if b.endswith(b"\0") else b


def parse_trak(trak: Box, *, limit: int) -> Trak:
    """Parse one ``trak`` box.

    Args:
      trak: the box.
      limit: size of the data its offsets point into (the file, or the
        per-image mp4); every sample must end within it.

    Raises:
      BznaFormatError: a required box is missing, a field is truncated, a count
        does not fit in its box, or the tables disagree on the sample count.
    """
    where = trak.where
    kids = trak.children()
    tkhd = require(kids, "tkhd", trak, where)
    version, flags = tkhd.full_header()
    r = tkhd.reader(4)
    if version == 1:
        r.skip(16, "creation/modification time")
        track_id = r.u32("track_ID")
        r.skip(12, "reserved + duration")
    elif version == 0:
        r.skip(8, "creation/modification time")
        track_id = r.u32("track_ID")
        r.skip(8, "reserved + duration")
    else:
        raise tkhd.error(f"version is {version}, expected 0 or 1", at=0)
    r.skip(52, "layer/volume/matrix")
    width = r.u32("width") >> 16
    height = r.u32("height") >> 16

    mdia = require(kids, "mdia", trak, where)
    mkids = mdia.children()
    hdlr = require(mkids, "hdlr", mdia, where)
    hr = hdlr.reader(8)
    handler = hr.bytes(4, "handler_type").decode("latin-1")
    hr.skip(12, "reserved")
    name = _strip_nul(hr.bytes(hr.remaining, "name")).decode("utf-8", "replace")
    minf = require(mkids, "minf", mdia, where)
    stbl = require(minf.children(), "stbl", minf, where)
    skids = stbl.children()

    stsd = require(skids, "stsd", stbl, where)
    sr = stsd.reader(4)
    n_entries = sr.u32("entry_count")
    entries = stsd.children(8)
    if n_entries and not entries:
        raise stsd.error(f"entry_count is {n_entries} but the box holds no sample entry")
    entry = entries[0] if entries else None

    stsz = require(skids, "stsz", stbl, where)
    zr = stsz.reader(4)
    const_size = zr.u32("sample_size")
    count = zr.u32("sample_count")
    sizes_be = None
    if const_size == 0:
        sizes_be = zr.array(count, ">u4", "stsz entry_size table")
    elif count > limit // const_size:
        raise stsz.error(
            f"{count} samples of {const_size} bytes cannot fit in the {limit} bytes of data", at=4
        )

    chunk = find(skids, "stco") or find(skids, "co64")
    if chunk is None:
        raise stbl.error("missing required child box 'stco' or 'co64'")
    cr = chunk.reader(4)
    n_chunks = cr.u32("entry_count")
    chunk_offsets = cr.array(n_chunks, ">u4" if chunk.type == "stco" else ">u8", "chunk offsets")

    stsc = find(skids, "stsc")
    spc = None
    if stsc is not None:
        tr = stsc.reader(4)
        n = tr.u32("entry_count")
        table = tr.array(3 * n, ">u4", "stsc entries").reshape(n, 3)
        if n and not (table[:, 1] == 1).all():
            spc = _samples_per_chunk(stsc, table, n_chunks)
    if spc is None:
        if n_chunks != count:
            raise chunk.error(
                f"{n_chunks} chunk offsets for {count} samples (stsz), with one sample per chunk"
            )
        offsets_be = chunk_offsets
    else:
        if int(spc.sum()) != count:
            held = wording.count(int(spc.sum()), "sample", grouped=False)
            raise stsc.error(f"chunks hold {held} but stsz has {count}")
        sizes = (
            sizes_be.astype(np.int64) if sizes_be is not None else np.full(count, const_size, dtype=np.int64)
        )
        offsets_be = _sample_offsets(chunk_offsets, spc, sizes)

    return Trak(
        box=trak,
        name=name,
        handler=handler,
        track_id=track_id,
        tkhd_version=version,
        tkhd_flags=flags,
        width=width,
        height=height,
        entry=entry,
        sample_count=count,
        const_size=const_size,
        sizes_be=sizes_be,
        offsets_be=offsets_be,
        chunk_box=chunk,
        limit=limit,
    )


def _sample_offsets(chunk_offsets: np.ndarray, spc: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each sample's offset: its chunk's, plus the sizes of the samples before it in that chunk.

    A chunk may hold no sample (``spc`` 0): only the chunks that hold one are indexed.
    """
    first = np.repeat(np.cumsum(spc) - spc, spc)  # each sample's chunk's first sample
    before = np.cumsum(sizes) - sizes
    return np.repeat(chunk_offsets.astype(np.int64), spc) + before - before[first]


def _samples_per_chunk(stsc: Box, table: np.ndarray, n_chunks: int) -> np.ndarray:
    """Samples in each chunk, from a general stsc run table."""
    first = table[:, 0].astype(np.int64)
    if first[0] != 1 or (np.diff(first) <= 0).any() or first[-1] > max(n_chunks, 1):
        raise stsc.error(f"first_chunk values must start at 1 and increase within the {n_chunks} chunks")
    runs = np.diff(np.append(first, n_chunks + 1))
    return np.repeat(table[:, 1].astype(np.int64), runs)


# Building.


@dataclass
class TrakSpec:
    """Everything needed to write one trak of a .bzna or per-image mp4.

    Attributes:
      track_id: tkhd track_ID.
      name: the hdlr name (written with a trailing NUL).
      handler: b'meta' or b'vide'.
      entry: the complete sample entry box ('mett' or 'hvc1').
      sizes, offsets: one per sample (one sample per chunk).
      tkhd_version, tkhd_flags, tkhd_duration: as written in tkhd.
      width_fixed, height_fixed: tkhd width/height, raw 16.16 values.
      mdhd_version, timescale, mdhd_duration, sample_delta: media timing.
      constant_size: write stsz in its constant-size form (all sizes equal).
      video_order: stbl children as muxers order video (stsd, stts, stsc, stsz,
        stco) instead of as Benzina orders meta tracks (stsd, stts, stsz, stsc, stco).
      force_co64: write co64 even when every offset fits 32 bits.
      more_entries: sample entries after ``entry`` in stsd.
      entry_of: each sample's entry, 1-based (stsc's sample_description_index
        for its chunk); None: all ``entry``.
    """

    track_id: int
    name: str
    handler: bytes
    entry: bytes
    sizes: np.ndarray
    offsets: np.ndarray
    tkhd_version: int = 1
    tkhd_flags: int = 0
    tkhd_duration: int = 0
    width_fixed: int = 0
    height_fixed: int = 0
    mdhd_version: int = 1
    timescale: int = 20
    mdhd_duration: int = 0
    sample_delta: int = 20
    constant_size: bool = False
    video_order: bool = False
    force_co64: bool = False
    more_entries: tuple = ()
    entry_of: np.ndarray | None = None


def build_trak(s: TrakSpec) -> bytes:
    n = len(s.sizes)
    if s.tkhd_version == 1:
        times = struct.pack(">QQIIQ", 0, 0, s.track_id, 0, s.tkhd_duration)
    else:
        times = struct.pack(">IIIII", 0, 0, s.track_id, 0, s.tkhd_duration)
    tkhd = full_box(
        b"tkhd",
        s.tkhd_version,
        s.tkhd_flags,
        times,
        struct.pack(">8xhhhH", 0, 0, 0, 0),
        UNITY_MATRIX,
        struct.pack(">II", s.width_fixed, s.height_fixed),
    )
    if s.mdhd_version == 1:
        mdhd_t = struct.pack(">QQIQ", 0, 0, s.timescale, s.mdhd_duration)
    else:
        mdhd_t = struct.pack(">IIII", 0, 0, s.timescale, s.mdhd_duration)
    mdhd = full_box(b"mdhd", s.mdhd_version, 0, mdhd_t, struct.pack(">HH", LANG_UND, 0))
    hdlr = full_box(b"hdlr", 0, 0, b"\0" * 4, s.handler, b"\0" * 12, s.name.encode() + b"\0")
    if s.handler == b"vide":
        media_header = full_box(b"vmhd", 0, 1, b"\0" * 8)
    else:
        media_header = full_box(b"nmhd", 0, 0)
    dinf = box(b"dinf", full_box(b"dref", 0, 0, struct.pack(">I", 1), full_box(b"url ", 0, 1)))

    sizes = np.asarray(s.sizes, dtype=np.int64)
    offsets = np.asarray(s.offsets, dtype=np.int64)
    if n and (sizes.max() >= 1 << 32 or sizes.min() < 0):
        raise ValueError(f"sample sizes must fit 32 bits. Received: max size {int(sizes.max())}")
    stsd = full_box(b"stsd", 0, 0, struct.pack(">I", 1 + len(s.more_entries)), s.entry, *s.more_entries)
    stts = full_box(b"stts", 0, 0, struct.pack(">III", 1, n, s.sample_delta) if n else b"\0" * 4)
    if s.constant_size and n and (sizes == sizes[0]).all():
        stsz = full_box(b"stsz", 0, 0, struct.pack(">II", int(sizes[0]), n))
    else:
        stsz = full_box(b"stsz", 0, 0, struct.pack(">II", 0, n), sizes.astype(">u4").tobytes())
    if s.entry_of is None or not n:
        stsc = full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, 1, 1) if n else b"\0" * 4)
    else:  # one sample per chunk: a run wherever the entry changes
        entry_of = np.asarray(s.entry_of, dtype=np.int64)
        if len(entry_of) != n or entry_of.min() < 1 or entry_of.max() > 1 + len(s.more_entries):
            raise ValueError(f"entry_of must give each of the {n} samples one of the track's entries")
        first = np.flatnonzero(np.diff(entry_of, prepend=0) != 0)
        runs = np.stack([first + 1, np.ones_like(first), entry_of[first]], axis=1)
        stsc = full_box(b"stsc", 0, 0, struct.pack(">I", len(runs)), runs.astype(">u4").tobytes())
    if s.force_co64 or (n and offsets.max() >= 1 << 32):
        chunks = full_box(b"co64", 0, 0, struct.pack(">I", n), offsets.astype(">u8").tobytes())
    else:
        chunks = full_box(b"stco", 0, 0, struct.pack(">I", n), offsets.astype(">u4").tobytes())
    order = (stsd, stts, stsc, stsz, chunks) if s.video_order else (stsd, stts, stsz, stsc, chunks)
    stbl = box(b"stbl", *order)
    minf = box(b"minf", media_header, dinf, stbl)
    return box(b"trak", tkhd, box(b"mdia", mdhd, hdlr, minf))
