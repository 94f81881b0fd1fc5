"""H.265 decoder configuration (``hvcC``) and length-prefixed -> Annex-B conversion.

``hvcC`` payload (ISO/IEC 14496-15, 8.3.3.1)::

    u8  configurationVersion (1)
    u8  profile_space:2 tier_flag:1 profile_idc:5
    u32 profile_compatibility_flags
    u48 constraint_indicator_flags
    u8  level_idc
    u16 reserved:4 (1111) min_spatial_segmentation_idc:12
    u8  reserved:6 parallelismType:2
    u8  reserved:6 chromaFormat:2
    u8  reserved:5 bitDepthLumaMinus8:3
    u8  reserved:5 bitDepthChromaMinus8:3
    u16 avgFrameRate
    u8  constantFrameRate:2 numTemporalLayers:3 temporalIdNested:1 lengthSizeMinusOne:2
    u8  numOfArrays
    numOfArrays x { u8 array_completeness:1 reserved:1 NAL_unit_type:6
                    u16 numNalus
                    numNalus x { u16 nalUnitLength, nalUnit bytes } }

A sample in an mp4 is a run of NAL units, each prefixed by its length in
``lengthSizeMinusOne + 1`` big-endian bytes. A decoder that reads an elementary
stream wants Annex-B instead: each NAL preceded by the start code 00 00 00 01,
with the parameter sets (VPS, SPS, PPS) in front of the picture.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bzna_tf.format.boxes import Box, Where, box, parse_boxes

__all__ = ["HvcC", "NalArray", "NAL_VPS", "NAL_SPS", "NAL_PPS", "split_nals", "to_annexb"]

NAL_VPS, NAL_SPS, NAL_PPS, NAL_PREFIX_SEI = 32, 33, 34, 39
START_CODE = b"\x00\x00\x00\x01"


@dataclass
class NalArray:
    """One array of an hvcC: NAL units of one type."""

    nal_unit_type: int
    nalus: list[bytes]
    completeness: bool = True


@dataclass
class HvcC:
    """A parsed ``hvcC`` box (HEVCDecoderConfigurationRecord).

    ``length_size`` is lengthSizeMinusOne + 1 (4 in every file Benzina writes).
    Parsing then :meth:`to_bytes` gives back the payload byte for byte when its
    reserved bits are all ones, as the standard requires.
    """

    profile_idc: int
    level_idc: int
    arrays: list[NalArray] = field(default_factory=list)
    configuration_version: int = 1
    profile_space: int = 0
    tier_flag: int = 0
    profile_compat_flags: int = 0
    constraint_flags: int = 0
    min_spatial_segmentation: int = 0
    parallelism_type: int = 0
    chroma_format: int = 1
    bit_depth_luma: int = 8
    bit_depth_chroma: int = 8
    avg_frame_rate: int = 0
    constant_frame_rate: int = 0
    num_temporal_layers: int = 1
    temporal_id_nested: int = 1
    length_size: int = 4

    def nalus(self, nal_unit_type: int) -> list[bytes]:
        """Every NAL unit of one type, in array order."""
        return [n for a in self.arrays if a.nal_unit_type == nal_unit_type for n in a.nalus]

    @property
    def parameter_sets(self) -> list[bytes]:
        """VPS, SPS then PPS NAL units: what a decoder needs before a picture."""
        return self.nalus(NAL_VPS) + self.nalus(NAL_SPS) + self.nalus(NAL_PPS)

    def parameter_sets_only(self) -> HvcC:
        """A copy without the arrays a decoder never reads (SEI: x265's ~2.3 kB version string).

        Readers hand decoders only :attr:`parameter_sets`, so the copy decodes
        the same; the compact layout stores it.
        """
        keep = (NAL_VPS, NAL_SPS, NAL_PPS)
        return dataclasses.replace(self, arrays=[a for a in self.arrays if a.nal_unit_type in keep])

    @classmethod
    def parse(cls, b: Box) -> HvcC:
        """Parse an ``hvcC`` box; every length is checked against the box."""
        r = b.reader()
        version = r.u8("configurationVersion")
        if version != 1:
            raise b.error(f"configurationVersion is {version}, expected 1", at=0)
        x = r.u8()
        compat = r.u32()
        constraint = r.uint(6)
        level = r.u8()
        seg = r.u16() & 0x0FFF
        par = r.u8() & 0x3
        chroma = r.u8() & 0x3
        bdl = (r.u8() & 0x7) + 8
        bdc = (r.u8() & 0x7) + 8
        afr = r.u16()
        y = r.u8()
        length_size = (y & 0x3) + 1
        if length_size == 3:
            raise b.error("lengthSizeMinusOne is 2: NAL length fields must be 1, 2 or 4 bytes", at=21)
        n_arrays = r.u8("numOfArrays")
        arrays = []
        for _ in range(n_arrays):
            t = r.u8("array header")
            count = r.u16("numNalus")
            nalus = []
            for _ in range(count):
                n = r.u16("nalUnitLength")
                nalus.append(r.bytes(n, "nalUnit"))
            arrays.append(NalArray(t & 0x3F, nalus, bool(t & 0x80)))
        return cls(
            profile_idc=x & 0x1F,
            level_idc=level,
            arrays=arrays,
            configuration_version=version,
            profile_space=x >> 6,
            tier_flag=(x >> 5) & 1,
            profile_compat_flags=compat,
            constraint_flags=constraint,
            min_spatial_segmentation=seg,
            parallelism_type=par,
            chroma_format=chroma,
            bit_depth_luma=bdl,
            bit_depth_chroma=bdc,
            avg_frame_rate=afr,
            constant_frame_rate=y >> 6,
            num_temporal_layers=(y >> 3) & 0x7,
            temporal_id_nested=(y >> 2) & 1,
            length_size=length_size,
        )

    @classmethod
    def from_bytes(cls, payload: bytes, where: Where = Where()) -> HvcC:
        """Parse an ``hvcC`` payload (the box's contents, without its header)."""
        data = box(b"hvcC", payload)
        return cls.parse(parse_boxes(data, 0, len(data), where=where)[0])

    def to_bytes(self) -> bytes:
        """The ``hvcC`` payload (without the box header)."""
        if self.length_size not in (1, 2, 4):
            raise ValueError(f"length_size must be 1, 2 or 4. Received: length_size={self.length_size}")
        out = bytearray()
        out.append(self.configuration_version)
        out.append((self.profile_space << 6) | (self.tier_flag << 5) | self.profile_idc)
        out += self.profile_compat_flags.to_bytes(4, "big")
        out += self.constraint_flags.to_bytes(6, "big")
        out.append(self.level_idc)
        out += (0xF000 | self.min_spatial_segmentation).to_bytes(2, "big")
        out.append(0xFC | self.parallelism_type)
        out.append(0xFC | self.chroma_format)
        out.append(0xF8 | (self.bit_depth_luma - 8))
        out.append(0xF8 | (self.bit_depth_chroma - 8))
        out += self.avg_frame_rate.to_bytes(2, "big")
        out.append(
            (self.constant_frame_rate << 6)
            | (self.num_temporal_layers << 3)
            | (self.temporal_id_nested << 2)
            | (self.length_size - 1)
        )
        out.append(len(self.arrays))
        for a in self.arrays:
            out.append((0x80 if a.completeness else 0) | a.nal_unit_type)
            out += len(a.nalus).to_bytes(2, "big")
            for n in a.nalus:
                out += len(n).to_bytes(2, "big") + n
        return bytes(out)


def split_nals(
    sample, length_size: int = 4, *, where: Where = Where(), offset: int | None = None
) -> list[bytes]:
    """Split a length-prefixed sample into its NAL units.

    Args:
      sample: the sample's bytes.
      length_size: bytes per length prefix (hvcC lengthSizeMinusOne + 1).
      where, offset: the file, sample index and absolute offset of the sample,
        for error messages.

    Raises:
      BznaFormatError: a prefix is truncated, a length is zero or runs past the
        end of the sample.
    """
    mv = memoryview(sample)
    n = len(mv)
    pos = 0
    out = []
    while pos < n:
        at = None if offset is None else offset + pos
        if n - pos < length_size:
            raise where.error(
                f"truncated NAL length prefix: {n - pos} bytes left, need {length_size}",
                offset=at,
                box="mdat",
            )
        size = int.from_bytes(mv[pos : pos + length_size], "big")
        pos += length_size
        if size == 0 or size > n - pos:
            raise where.error(
                f"NAL unit length {size} does not fit in the {n - pos} bytes left of the {n}-byte sample",
                offset=at,
                box="mdat",
            )
        out.append(bytes(mv[pos : pos + size]))
        pos += size
    if not out:
        raise where.error("empty H.265 sample", offset=offset, box="mdat")
    return out


def to_annexb(sample, hvcc: HvcC, *, where: Where = Where(), offset: int | None = None) -> bytes:
    """Annex-B bytes for one picture: start code + VPS, SPS, PPS, then every NAL.

    Every length prefix of the sample is replaced by a start code; a sample may
    hold several NAL units (slices, SEI).
    """
    nals = split_nals(sample, hvcc.length_size, where=where, offset=offset)
    parts = []
    for n in hvcc.parameter_sets + nals:
        parts.append(START_CODE)
        parts.append(n)
    return b"".join(parts)


# From an encoder's Annex-B output to what an mp4 stores.


def split_annexb(data) -> list[bytes]:
    """The NAL units of an Annex-B stream (start codes and trailing zeros removed)."""
    b = bytes(data)
    out = []
    i = b.find(b"\x00\x00\x01")
    while i >= 0:
        start = i + 3
        nxt = b.find(b"\x00\x00\x01", start)
        end = len(b) if nxt < 0 else nxt
        nal = b[start:end].rstrip(b"\x00")
        if nal:
            out.append(nal)
        i = nxt
    return out


def nal_type(nal: bytes) -> int:
    return (nal[0] >> 1) & 0x3F


class _Bits:
    """MSB-first bit reader over an RBSP (emulation prevention bytes removed)."""

    def __init__(self, nal: bytes):
        rbsp = bytearray()
        zeros = 0
        for byte in nal[2:]:  # skip the 2-byte NAL header
            if zeros >= 2 and byte == 3:
                zeros = 0
                continue
            rbsp.append(byte)
            zeros = zeros + 1 if byte == 0 else 0
        self.data = bytes(rbsp)
        self.pos = 0

    def u(self, n: int) -> int:
        v = 0
        for _ in range(n):
            byte = self.pos >> 3
            if byte >= len(self.data):
                raise ValueError("SPS ends early")
            v = (v << 1) | ((self.data[byte] >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v

    def ue(self) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise ValueError("bad Exp-Golomb code in SPS")
        return (1 << zeros) - 1 + self.u(zeros)


def hvcc_from_nals(nals: list[bytes]) -> HvcC:
    """An hvcC (length size 4) built from parameter-set NAL units.

    Profile, tier, level and flags come from the SPS's profile_tier_level,
    chroma format and bit depths from the SPS; VPS, SPS, PPS and prefix SEI
    units become the arrays, in that order.
    """
    sps = [n for n in nals if nal_type(n) == NAL_SPS]
    if not sps:
        raise ValueError(
            f"expected an SPS among the NAL units. Received: types {[nal_type(n) for n in nals]}"
        )
    r = _Bits(sps[0])
    r.u(4)  # sps_video_parameter_set_id
    max_sub_layers_minus1 = r.u(3)
    temporal_id_nested = r.u(1)
    profile_space, tier, profile_idc = r.u(2), r.u(1), r.u(5)
    compat = r.u(32)
    constraint = r.u(48)
    level = r.u(8)
    present = [(r.u(1), r.u(1)) for _ in range(max_sub_layers_minus1)]
    if max_sub_layers_minus1:
        r.u(2 * (8 - max_sub_layers_minus1))
    for prof, lev in present:
        r.u(88 if prof else 0)
        r.u(8 if lev else 0)
    r.ue()  # sps_seq_parameter_set_id
    chroma = r.ue()
    if chroma == 3:
        r.u(1)
    r.ue()
    r.ue()  # pic_width/height_in_luma_samples
    if r.u(1):  # conformance_window_flag
        for _ in range(4):
            r.ue()
    bdl, bdc = r.ue() + 8, r.ue() + 8
    arrays = []
    for t in (NAL_VPS, NAL_SPS, NAL_PPS, NAL_PREFIX_SEI):
        units = [n for n in nals if nal_type(n) == t]
        if units:
            arrays.append(NalArray(t, units, completeness=t != NAL_PREFIX_SEI))
    return HvcC(
        profile_idc=profile_idc,
        level_idc=level,
        arrays=arrays,
        profile_space=profile_space,
        tier_flag=tier,
        profile_compat_flags=compat,
        constraint_flags=constraint,
        chroma_format=chroma,
        bit_depth_luma=bdl,
        bit_depth_chroma=bdc,
        num_temporal_layers=max_sub_layers_minus1 + 1,
        temporal_id_nested=temporal_id_nested,
        length_size=4,
    )


def annexb_to_picture_parts(data) -> tuple[bytes, HvcC]:
    """Split one encoded picture (Annex-B) into (length-prefixed sample, hvcC).

    Parameter sets and the prefix SEI units before the first slice go to the
    hvcC, as mp4 muxers do; everything from the first slice on is the sample.
    """
    nals = split_annexb(data)
    first_vcl = next((i for i, n in enumerate(nals) if nal_type(n) < 32), None)
    if first_vcl is None:
        raise ValueError("the encoder output holds no picture (no VCL NAL unit)")
    params = (NAL_VPS, NAL_SPS, NAL_PPS)
    rest = nals[first_vcl:]
    body = [n for n in rest if nal_type(n) not in params]
    sample = b"".join(len(n).to_bytes(4, "big") + n for n in body)
    return sample, hvcc_from_nals(nals[:first_vcl] + [n for n in rest if nal_type(n) in params])
