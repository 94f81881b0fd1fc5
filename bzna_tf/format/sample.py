"""The per-image mp4: one sample of the ``bzna_input`` track.

Layout (offsets inside are relative to the start of this small file)::

    ftyp  'isom', 0, ['isom']                                        20 bytes
    mdat  8-byte header
          [input H.265 sample][thumb H.265 sample, if any][target int64 LE, if any][name + NUL]
    moov  mvhd, then traks (ids 1..n), found by hdlr name, never by position:
          bzna_input   vide  tkhd size = the original image size; stsd 'hvc1'
          bzna_fname   meta  'mett' text/plain
          bzna_target  meta  'mett' application/octet-stream   (only if labelled)
          bzna_thumb   vide  tkhd size = the thumbnail size; points at the input
                             sample when the image already fits 512x512

An ``hvc1`` sample entry is a 78-byte VisualSampleEntry body (coded width and
height at bytes 24-27) followed by child boxes in any order: ``hvcC`` (the
parameter sets), ``clap`` (the image rectangle in the coded frame), ``pasp``,
and whatever else the muxer wrote (``fiel``, ``btrt``).

Two layouts are written (``Picture.layout``; readers take both, as any reader
that finds traks by name and falls back from ``bzna_thumb`` to ``bzna_input``):

- ``"benzina"``: the above, as the original tools write it.
- ``"compact"``: only the video traks, ``bzna_input`` then ``bzna_thumb`` when
  the thumbnail is a separate picture (otherwise readers use the input), and
  no nested target or name (the outer ``bzna_target``/``bzna_fname`` tracks
  hold them); built ``hvc1`` entries hold ``hvcC``, ``pasp`` and ``clap`` only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from bzna_tf.format.boxes import Where, box, find, full_box, parse_boxes, require
from bzna_tf.format.hevc import HvcC, to_annexb
from bzna_tf.format.tracks import UNITY_MATRIX, TrakSpec, build_trak, parse_trak

__all__ = [
    "Clap",
    "Picture",
    "VideoTrack",
    "ImageMp4",
    "parse_image_mp4",
    "build_image_mp4",
    "build_hvc1",
    "VISUAL_ENTRY_BODY",
    "LAYOUTS",
]

VISUAL_ENTRY_BODY = 78  # SampleEntry (8) + VisualSampleEntry fields (70)
INPUT, TARGET, FNAME, THUMB = "bzna_input", "bzna_target", "bzna_fname", "bzna_thumb"
# How a per-image mp4 is laid out (module docstring); the first is the original tools'.
LAYOUTS = ("benzina", "compact")


@dataclass(frozen=True)
class Clap:
    """A ``clap`` box: the clean aperture as rationals (offsets are signed)."""

    width_n: int
    width_d: int
    height_n: int
    height_d: int
    horiz_off_n: int
    horiz_off_d: int
    vert_off_n: int
    vert_off_d: int

    @classmethod
    def for_image(cls, size, coded_size) -> Clap:
        """The clap Benzina writes: the image anchored top-left in the coded frame."""
        (w, h), (cw, ch) = size, coded_size
        return cls(w, 1, h, 1, w - cw, 2, h - ch, 2)

    def to_box(self) -> bytes:
        return box(
            b"clap",
            struct.pack(
                ">IIIIiIiI",
                *(
                    self.width_n,
                    self.width_d,
                    self.height_n,
                    self.height_d,
                    self.horiz_off_n,
                    self.horiz_off_d,
                    self.vert_off_n,
                    self.vert_off_d,
                ),
            ),
        )


@dataclass
class Picture:
    """One H.265 picture to store in a .bzna (what an encoder hands the writer).

    Attributes:
      sample: the picture as length-prefixed NAL units (no parameter sets).
      hvcc: its decoder configuration, an :class:`HvcC` or the raw payload.
      size: (width, height) of the image: the usable rectangle at the frame's
        top-left.
      coded_size: (width, height) of the coded frame.
      sample_entry: optionally, a complete ``hvc1`` box from the encoder's
        muxer. It is kept as it is (with ``clap``, and ``pasp`` if missing, added),
        which preserves what the muxer recorded. Without it, the writer builds
        one from ``hvcc`` and ``coded_size``, laid out as the original tools'.
      compressor: the encoder's name for a built entry (e.g. "libx265"), at most 31 bytes.
      layout: the per-image mp4 :func:`build_image_mp4` makes of this picture
        (as the input): ``"benzina"`` (the original tools' boxes) or
        ``"compact"`` (no nested target, name or duplicate thumbnail trak; see
        the module docstring). The encoder sets it with the coded frame size.
    """

    sample: bytes
    hvcc: HvcC | bytes
    size: tuple[int, int]
    coded_size: tuple[int, int]
    sample_entry: bytes | None = None
    compressor: str = ""
    layout: str = "benzina"

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}. Received: layout={self.layout!r}")
        self.size = tuple(int(v) for v in self.size)
        self.coded_size = tuple(int(v) for v in self.coded_size)
        (w, h), (cw, ch) = self.size, self.coded_size
        if not (0 < w <= cw < 1 << 16 and 0 < h <= ch < 1 << 16):
            raise ValueError(
                "expected 0 < size <= coded_size < 65536 on each side. "
                f"Received: size={self.size}, coded_size={self.coded_size}"
            )
        if not self.sample:
            raise ValueError("expected a non-empty H.265 sample. Received: sample=b''")
        _check_decodable(self.hvcc)

    @property
    def hvcc_bytes(self) -> bytes:
        return self.hvcc.to_bytes() if isinstance(self.hvcc, HvcC) else bytes(self.hvcc)


_CHROMA = {0: "4:0:0 (monochrome)", 1: "4:2:0", 2: "4:2:2", 3: "4:4:4"}


def _check_decodable(hvcc) -> None:
    """Refuses a picture whose ``hvcC`` says it is not 8-bit 4:2:0, the only pictures bzna_tf decodes.

    Every reader (FFmpeg's decoder on the CPU, NVDEC sessions on the GPU, as
    Benzina opens them) refuses the others at read time: written, they would
    make a file of samples nothing reads. An ``hvcC`` that does not parse is
    left to the readers, as before.
    """
    if not isinstance(hvcc, HvcC):
        try:
            hvcc = HvcC.from_bytes(bytes(hvcc))
        except (ValueError, TypeError):  # BznaFormatError is a ValueError
            return
    if (hvcc.chroma_format, hvcc.bit_depth_luma, hvcc.bit_depth_chroma) != (1, 8, 8):
        chroma = _CHROMA.get(hvcc.chroma_format, str(hvcc.chroma_format))
        raise ValueError(
            "expected an 8-bit 4:2:0 H.265 picture, the only kind bzna_tf's decoders read (encode with "
            f"pix_fmt yuv420p or yuvj420p, main profile). Received: an hvcC of {chroma}, "
            f"{hvcc.bit_depth_luma}-bit luma and {hvcc.bit_depth_chroma}-bit chroma"
        )


@dataclass
class VideoTrack:
    """A video track of a per-image mp4, as read.

    Attributes:
      name: 'bzna_input' or 'bzna_thumb'.
      width, height: the image size (tkhd, integer part).
      coded_width, coded_height: the coded frame size (hvc1).
      hvcc: the parsed ``hvcC``.
      clap: the ``clap`` box, or None when absent.
      pasp: (hSpacing, vSpacing), or None when absent.
      sample: the H.265 sample (length-prefixed NAL units).
      sample_offset: absolute offset of the sample in the .bzna file.
      sample_entry: the raw ``hvc1`` box.
      children: the types of the ``hvc1`` child boxes, in file order.
      hvcc_payload: (absolute offset, size) of the ``hvcC`` payload.
    """

    name: str
    width: int
    height: int
    coded_width: int
    coded_height: int
    hvcc: HvcC
    clap: Clap | None
    pasp: tuple[int, int] | None
    sample: bytes
    sample_offset: int
    sample_entry: bytes
    children: list[str] = field(default_factory=list)
    hvcc_payload: tuple[int, int] = (0, 0)
    where: Where = field(default=Where(), repr=False)

    @property
    def size(self) -> tuple[int, int]:
        return (self.width, self.height)

    @property
    def coded_size(self) -> tuple[int, int]:
        return (self.coded_width, self.coded_height)

    def annexb(self) -> bytes:
        """The picture as Annex-B: start codes, VPS/SPS/PPS from hvcC, then each NAL."""
        return to_annexb(self.sample, self.hvcc, where=self.where, offset=self.sample_offset)

    def to_picture(self) -> Picture:
        """This track as a :class:`Picture` for a writer (the hvc1 entry is kept)."""
        return Picture(self.sample, self.hvcc, self.size, self.coded_size, self.sample_entry)


@dataclass
class ImageMp4:
    """A parsed per-image mp4.

    Attributes:
      input: the full-size picture.
      thumb: the thumbnail track. When the image already fits 512x512 it points
        at the input's bytes (``has_separate_thumb`` is False); a file with no
        thumbnail track gets ``input`` here.
      target: the nested target, or None when the image has none.
      filename: the nested filename, or None when absent.
      track_order: the hdlr names of the traks, in file order.
    """

    input: VideoTrack
    thumb: VideoTrack
    target: int | None
    filename: str | None
    track_order: list[str]

    @property
    def has_separate_thumb(self) -> bool:
        return self.thumb.sample_offset != self.input.sample_offset


def _parse_video(trak, t, data, base, where) -> VideoTrack:
    entry = t.entry
    if entry is None or entry.type not in ("hvc1", "hev1"):
        got = "none" if entry is None else f"'{entry.type}'"
        raise trak.error(f"track '{t.name}' needs an 'hvc1' sample entry, found {got}")
    r = entry.reader()
    r.skip(24, "VisualSampleEntry header")
    cw, ch = r.u16("width"), r.u16("height")
    r.skip(VISUAL_ENTRY_BODY - 28, "VisualSampleEntry fields")
    kids = entry.children(VISUAL_ENTRY_BODY)
    hvcc_box = require(kids, "hvcC", entry, where)
    hvcc = HvcC.parse(hvcc_box)
    clap_box = find(kids, "clap")
    clap = None
    if clap_box is not None:
        cr = clap_box.reader()
        clap = Clap(cr.u32(), cr.u32(), cr.u32(), cr.u32(), cr.i32(), cr.u32(), cr.i32(), cr.u32())
    pasp_box = find(kids, "pasp")
    pasp = None
    if pasp_box is not None:
        pr = pasp_box.reader()
        pasp = (pr.u32("hSpacing"), pr.u32("vSpacing"))
    if t.sample_count < 1:
        raise trak.error(f"track '{t.name}' has no sample")
    off, size = t.offset(0), t.size(0)
    return VideoTrack(
        name=t.name,
        width=t.width,
        height=t.height,
        coded_width=cw,
        coded_height=ch,
        hvcc=hvcc,
        clap=clap,
        pasp=pasp,
        sample=bytes(data[off : off + size]),
        sample_offset=base + off,
        sample_entry=entry.raw(),
        children=[k.type for k in kids],
        hvcc_payload=(hvcc_box.payload_offset, hvcc_box.payload_size),
        where=where,
    )


def parse_image_mp4(data, *, base: int = 0, where: Where = Where()) -> ImageMp4:
    """Parse one per-image mp4.

    Args:
      data: its bytes.
      base: its absolute offset in the .bzna (for offsets in errors and results).
      where: the file name and sample index, for errors.

    Raises:
      BznaFormatError: anything malformed, located by file, sample, box and offset.
    """
    top = parse_boxes(data, 0, len(data), base=base, where=where)
    if top and top[0].type != "ftyp":  # SPEC section 2; the C++ reader refuses it too
        raise where.error(
            f"expected the per-image mp4 to start with 'ftyp', found '{top[0].type}'", offset=top[0].offset
        )
    moov = require(top, "moov", None, where)
    traks = {}
    order = []
    for b in moov.children():
        if b.type != "trak":
            continue
        t = parse_trak(b, limit=len(data))
        order.append(t.name)
        traks.setdefault(t.name, (b, t))
    if INPUT not in traks:
        raise moov.error(f"no '{INPUT}' track (found {order})")
    inp = _parse_video(*traks[INPUT], data, base, where)
    thumb = _parse_video(*traks[THUMB], data, base, where) if THUMB in traks else inp
    target = None
    if TARGET in traks:
        tb, tt = traks[TARGET]
        if tt.sample_count:
            off, size = tt.offset(0), tt.size(0)
            if size != 8:
                raise tb.error(f"target sample is {size} bytes, expected 8")
            target = int(np.frombuffer(data, "<i8", 1, off)[0])
    filename = None
    if FNAME in traks:
        tb, tt = traks[FNAME]
        if tt.sample_count:
            off, size = tt.offset(0), tt.size(0)
            filename = decode_name(bytes(data[off : off + size]), where, base + off)
    return ImageMp4(inp, thumb, target, filename, order)


def decode_name(raw: bytes, where: Where, offset: int) -> str:
    """A stored filename: UTF-8, one trailing NUL stripped."""
    try:
        return (raw[:-1] if raw.endswith(b"\0") else raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise where.error(
            f"filename is not valid UTF-8 ({e.reason})", offset=offset + e.start, box="mdat"
        ) from None


# Building.


def build_hvc1(hvcc: bytes, coded_size, compressor: str = "", sample_size: int | None = None) -> bytes:
    """An ``hvc1`` sample entry: VisualSampleEntry + hvcC + fiel (+ btrt).

    With ``sample_size`` (the one picture's bytes), the entry is laid out as
    the original tools' muxer did: ``hvcC``, ``fiel`` (progressive), and a
    ``btrt`` whose max and average bitrates are the picture's size in bits
    per second of its one-second sample (:func:`video_entry` adds ``pasp``
    and ``clap`` between them).
    """
    name = compressor.encode()[:31]
    body = struct.pack(
        ">6xH2xH12xHHIIIH32sHh",
        1,
        0,
        coded_size[0],
        coded_size[1],
        0x00480000,
        0x00480000,
        0,
        1,
        bytes((len(name),)) + name,
        0x0018,
        -1,
    )
    assert len(body) == VISUAL_ENTRY_BODY
    if sample_size is None:
        return box(b"hvc1", body, box(b"hvcC", hvcc))
    bits = min(sample_size * 8, 0xFFFFFFFF)
    return box(
        b"hvc1",
        body,
        box(b"hvcC", hvcc),
        box(b"fiel", b"\x01\x00"),
        box(b"btrt", struct.pack(">III", 0, bits, bits)),
    )


def _entry_children(entry: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Split an hvc1 box into its 78-byte body and its (type, raw box) children."""
    b = parse_boxes(entry, 0, len(entry), where=Where("hvc1 sample entry"))
    if len(b) != 1 or b[0].type not in ("hvc1", "hev1") or b[0].payload_size < VISUAL_ENTRY_BODY:
        raise ValueError("sample_entry must be one complete 'hvc1' box")
    body = bytes(b[0].payload()[:VISUAL_ENTRY_BODY])
    return body, [(k.type, k.raw()) for k in b[0].children(VISUAL_ENTRY_BODY)]


def video_entry(p: Picture) -> bytes:
    """The hvc1 entry stored for a picture: its own (or a built one) with clap and pasp.

    ``clap`` is always rewritten from the picture's sizes; a missing ``pasp`` is
    added as 1:1. They go after ``hvcC`` and any ``fiel``, before the rest, which
    is where the original tools leave them (``hvcC, fiel, pasp, clap, btrt``).
    A built entry of the compact layout has no ``fiel`` or ``btrt`` (no reader
    uses them): ``hvcC, pasp, clap``.
    """
    muxer_boxes = p.layout == "benzina"
    entry = p.sample_entry or build_hvc1(
        p.hvcc_bytes, p.coded_size, p.compressor, len(p.sample) if muxer_boxes else None
    )
    body, kids = _entry_children(entry)
    kids = [k for k in kids if k[0] != "clap"]
    if not any(t == "pasp" for t, _ in kids):
        kids.insert(_after(kids, ("hvcC", "fiel")), ("pasp", box(b"pasp", struct.pack(">II", 1, 1))))
    kids.insert(
        _after(kids, ("hvcC", "fiel", "pasp")), ("clap", Clap.for_image(p.size, p.coded_size).to_box())
    )
    return box(b"hvc1", body, *(raw for _, raw in kids))


def outer_thumb_entry(entry: bytes) -> bytes:
    """An outer ``bzna_thumb`` entry: a thumbnail's entry less ``clap`` and ``btrt``.

    ``clap`` describes one image and ``btrt`` one stream's bitrate, so neither
    holds for the whole track (the original tools drop the same two boxes).
    """
    body, kids = _entry_children(entry)
    return box(b"hvc1", body, *(raw for t, raw in kids if t not in ("clap", "btrt")))


def frame_key(entry: bytes, parameter_sets: bool = False) -> tuple:
    """What decides an outer ``bzna_thumb`` entry for a thumbnail's ``hvc1`` entry: its coded frame
    (width, height), and with ``parameter_sets`` its VPS, SPS and PPS too.

    The original tools write sample 0's entry for every thumbnail: all theirs
    share one 512 x 512 frame and one encoder setting, and their SPS differ only
    by the VUI's aspect ratio (each thumbnail's own), which no decoder needs. A
    benzina file keeps that one entry; the compact layout's thumbnails, coded
    in many frames and possibly by several encoders or settings (files
    repacked together), get one entry per frame and parameter sets.
    """
    body, kids = _entry_children(entry)
    if not parameter_sets:
        return (body[24:28],)
    hvcc = next((raw for t, raw in kids if t == "hvcC"), None)
    if hvcc is None:
        raise ValueError("sample_entry has no 'hvcC' box")
    parsed = HvcC.parse(parse_boxes(hvcc, 0, len(hvcc), where=Where("hvc1 sample entry"))[0])
    return (body[24:28], parsed.length_size, *parsed.parameter_sets)


def _after(kids, types) -> int:
    i = 0
    for j, (t, _) in enumerate(kids):
        if t in types:
            i = j + 1
    return i


@dataclass
class BuiltMp4:
    """A per-image mp4 and where its thumbnail lies in it."""

    data: bytes
    thumb_offset: int
    thumb_size: int
    thumb_entry: bytes


def _video_spec(track_id, name, flags, p, entry, offset) -> TrakSpec:
    return TrakSpec(
        track_id=track_id,
        name=name,
        handler=b"vide",
        entry=entry,
        sizes=np.array([len(p.sample)]),
        offsets=np.array([offset]),
        tkhd_version=0,
        tkhd_flags=flags,
        tkhd_duration=20,
        width_fixed=p.size[0] << 16,
        height_fixed=p.size[1] << 16,
        mdhd_version=0,
        timescale=16384,
        mdhd_duration=16384,
        sample_delta=16384,
        constant_size=True,
        video_order=True,
    )


def _meta_spec(track_id, name, flags, mime, size, offset) -> TrakSpec:
    return TrakSpec(
        track_id=track_id,
        name=name,
        handler=b"meta",
        entry=mett_entry(mime),
        sizes=np.array([size]),
        offsets=np.array([offset]),
        tkhd_flags=flags,
        tkhd_duration=20,
        mdhd_duration=20,
    )


def mett_entry(mime: str) -> bytes:
    """A 'mett' sample entry: SampleEntry header, empty content_encoding, mime."""
    return box(b"mett", b"\0" * 6, struct.pack(">H", 1), b"\0", mime.encode() + b"\0")


def mvhd(version: int, duration: int, next_track_id: int, volume: int) -> bytes:
    """A movie header with timescale 20 (the original tools' value)."""
    t = struct.pack(">QQIQ", 0, 0, 20, duration) if version == 1 else struct.pack(">IIII", 0, 0, 20, duration)
    return full_box(
        b"mvhd",
        version,
        0,
        t,
        struct.pack(">IH10x", 0x10000, volume),
        UNITY_MATRIX,
        b"\0" * 24,
        struct.pack(">I", next_track_id),
    )


def build_image_mp4(inp: Picture, thumb: Picture | None, target: int | None, filename: str) -> BuiltMp4:
    """Build one per-image mp4 in ``inp.layout`` (see the module docstring).

    ``"benzina"`` lays it out as the original tools do. ``"compact"`` stores
    the pictures and their video traks only: ``target`` and ``filename`` are
    the outer file's business (:class:`~bzna_tf.format.BznaWriter` stores them
    in its own tracks) and are not repeated here.
    """
    if inp.layout == "compact":
        return _build_compact_mp4(inp, thumb)
    name = filename.encode() + b"\0"
    ftyp = box(b"ftyp", b"isom", struct.pack(">I", 0), b"isom")
    payload = [inp.sample]
    pos = len(ftyp) + 8
    in_off = pos
    pos += len(inp.sample)
    if thumb is not None:
        th_off, th = pos, thumb
        payload.append(thumb.sample)
        pos += len(thumb.sample)
    else:
        th_off, th = in_off, inp
    if target is not None:
        tg_off = pos
        payload.append(struct.pack("<q", target))
        pos += 8
    fn_off = pos
    payload.append(name)
    mdat = box(b"mdat", *payload)

    in_entry = video_entry(inp)
    th_entry = in_entry if thumb is None else video_entry(thumb)
    specs = [
        _video_spec(1, INPUT, 0, inp, in_entry, in_off),
        _meta_spec(2, FNAME, 3, "text/plain", len(name), fn_off),
    ]
    if target is not None:
        specs.append(_meta_spec(3, TARGET, 0, "application/octet-stream", 8, tg_off))
    specs.append(_video_spec(len(specs) + 1, THUMB, 3, th, th_entry, th_off))
    moov = box(b"moov", mvhd(0, 20, len(specs) + 1, volume=0x0100), *(build_trak(s) for s in specs))
    return BuiltMp4(ftyp + mdat + moov, th_off, len(th.sample), th_entry)


def _build_compact_mp4(inp: Picture, thumb: Picture | None) -> BuiltMp4:
    """ftyp | mdat [input][thumb, if separate] | moov: mvhd, bzna_input, bzna_thumb if separate."""
    ftyp = box(b"ftyp", b"isom", struct.pack(">I", 0), b"isom")
    in_off = len(ftyp) + 8
    in_entry = video_entry(inp)
    specs = [_video_spec(1, INPUT, 0, inp, in_entry, in_off)]
    payload = [inp.sample]
    th_off, th, th_entry = in_off, inp, in_entry
    if thumb is not None:
        th_off, th, th_entry = in_off + len(inp.sample), thumb, video_entry(thumb)
        payload.append(thumb.sample)
        specs.append(_video_spec(2, THUMB, 3, thumb, th_entry, th_off))
    mdat = box(b"mdat", *payload)
    moov = box(b"moov", mvhd(0, 20, len(specs) + 1, volume=0x0100), *(build_trak(s) for s in specs))
    return BuiltMp4(ftyp + mdat + moov, th_off, len(th.sample), th_entry)
