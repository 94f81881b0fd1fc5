"""Files written by the original Benzina tools read exactly as their manifest says."""

import hashlib
import struct

import numpy as np
import pytest

from bzna_tf.format import BznaFile, BznaWriter, split_nals
from bzna_tf.format.boxes import parse_boxes
from bzna_tf.format.hevc import NAL_PPS, NAL_SPS, NAL_VPS, hvcc_from_nals
from bzna_tf.format.sample import _entry_children, video_entry

pytestmark = pytest.mark.every_original


@pytest.fixture(scope="module")
def f(original_path):
    with BznaFile(original_path) as f:
        yield f


def test_file_identity(original_path, manifest):
    data = original_path.read_bytes()
    assert len(data) == manifest["file"]["size"]
    assert hashlib.sha256(data).hexdigest() == manifest["file"]["sha256"]


def test_top_level_and_ftyp(f, original_path, manifest):
    assert [{"type": t, "offset": o, "header_size": h, "size": s} for t, o, h, s in f.top_level] == manifest[
        "top_level"
    ]
    data = original_path.read_bytes()
    ftyp = parse_boxes(data, 0, 24)[0]
    r = ftyp.reader()
    major, minor = r.bytes(4).decode(), r.u32()
    compat = [r.bytes(4).decode() for _ in range(r.remaining // 4)]
    assert {"major": major, "minor": minor, "compatible": compat} == manifest["ftyp"]


def test_counts(f, manifest):
    assert {name: len(t) for name, t in f.tracks.items()} == manifest["sample_counts"]
    samples = manifest["samples"]
    assert len(f) == len(samples) == 12
    assert f.num_labelled == sum(s["target"] is not None for s in samples) == 9


def test_outer_tracks(f, manifest):
    assert list(f.tracks) == [t["name"] for t in manifest["outer_tracks"]]
    for exp in manifest["outer_tracks"]:
        t = f.tracks[exp["name"]]
        assert t.handler == exp["handler"]
        assert t.track_id == exp["track_id"]
        assert t.tkhd_version == exp["tkhd_version"]
        assert t.tkhd_flags == int(exp["tkhd_flags"], 16)
        assert t.width == exp["tkhd_width_16_16"][0] and t.height == exp["tkhd_height_16_16"][0]
        assert t.sample_count == exp["sample_count"]
        assert t.uses_co64 == (exp["chunk_offset_box"] == "co64")
        assert t.entry.type == exp["sample_entry"]
        if "mett" in exp:
            assert t.mime == exp["mett"]["mime_format"]


def test_outer_offsets_and_sizes(f, manifest):
    for key, track in [
        ("outer_bzna_input", "bzna_input"),
        ("outer_bzna_fname", "bzna_fname"),
        ("outer_bzna_thumb", "bzna_thumb"),
        ("outer_bzna_target", "bzna_target"),
    ]:
        t = f.tracks[track]
        exp = [s[key] for s in manifest["samples"] if s[key] is not None]
        assert t.offsets.tolist() == [e["offset"] for e in exp], track
        assert t.sizes.tolist() == [e["size"] for e in exp], track
        assert t.offsets.dtype == np.int64
        for i, e in enumerate(exp):  # the lazy per-sample path agrees with the arrays
            assert (t.offset(i), t.size(i)) == (e["offset"], e["size"])


def test_targets_and_filenames(f, manifest, original_path):
    exp_targets = [-1 if s["target"] is None else s["target"] for s in manifest["samples"]]
    assert f.targets.tolist() == exp_targets
    assert [f.target(i) for i in range(len(f))] == exp_targets
    assert f.filenames() == [s["filename"] for s in manifest["samples"]]
    assert [f.filename(i) for i in range(len(f))] == [s["filename"] for s in manifest["samples"]]
    # And they match the .target files the tools were given.
    src = original_path.parent
    for s in manifest["samples"]:
        if s["source"]["target_file"]:
            raw = (src / s["source"]["target_file"]).read_bytes()
            assert struct.unpack("<q", raw)[0] == s["target"]


def _check_video(v, e, clap):
    assert [v.width, v.height] == e["tkhd_size"]
    assert [v.coded_width, v.coded_height] == e["coded_size"]
    assert v.sample_offset == e["sample_abs_offset"]
    assert len(v.sample) == e["sample_size"]
    nals = split_nals(v.sample, v.hvcc.length_size)
    assert [(n[0] >> 1) & 0x3F for n in nals] == e["sample_nal_unit_types"]
    assert [len(n) for n in nals] == e["sample_nal_sizes"]
    assert v.children == e["sample_entry_children"]
    assert list(v.hvcc_payload) == [e["hvcC_payload_abs"]["offset"], e["hvcC_payload_abs"]["size"]]
    h = e["hvcC"]
    assert (v.hvcc.profile_idc, v.hvcc.level_idc, v.hvcc.tier_flag, v.hvcc.chroma_format) == (
        h["profile_idc"],
        h["level_idc"],
        h["tier_flag"],
        h["chromaFormat"],
    )
    assert (v.hvcc.bit_depth_luma, v.hvcc.bit_depth_chroma, v.hvcc.length_size - 1) == (
        h["bitDepthLuma"],
        h["bitDepthChroma"],
        h["lengthSizeMinusOne"],
    )
    assert len(v.hvcc.arrays) == h["numOfArrays"]
    assert v.hvcc.profile_compat_flags == int(h["profile_compat_flags"], 16)
    assert v.hvcc.constraint_flags == int(h["constraint_flags"], 16)
    assert [
        {"nal_unit_type": a.nal_unit_type, "nal_lengths": [len(n) for n in a.nalus]} for a in v.hvcc.arrays
    ] == e["hvcC_arrays"]
    c = v.clap
    assert c is not None
    got = [
        c.width_n,
        c.width_d,
        c.height_n,
        c.height_d,
        c.horiz_off_n,
        c.horiz_off_d,
        c.vert_off_n,
        c.vert_off_d,
    ]
    assert got == [
        clap[k]
        for k in (
            "cleanApertureWidthN",
            "cleanApertureWidthD",
            "cleanApertureHeightN",
            "cleanApertureHeightD",
            "horizOffN",
            "horizOffD",
            "vertOffN",
            "vertOffD",
        )
    ]
    assert (None if v.pasp is None else list(v.pasp)) == e["pasp"]  # a PNG without an aspect ratio has none


@pytest.mark.parametrize("i", range(12))
def test_nested_samples(f, manifest, i):
    m = manifest["samples"][i]
    s = f.sample(i)
    n = m["nested"]
    assert s.track_order == n["track_order"]
    assert list(s.input.size) == m["image_size"]
    assert list(s.input.coded_size) == m["input_coded_size"]
    assert list(s.thumb.size) == m["thumb_size"]
    assert list(s.thumb.coded_size) == m["thumb_coded_size"]
    assert s.has_separate_thumb == m["separate_thumbnail_encoded"]
    _check_video(s.input, n["bzna_input"], m["clap_input"])
    _check_video(s.thumb, n["bzna_thumb"], m["clap_thumb"])
    assert s.filename == m["filename"]
    assert s.target == m["target"]
    # The outer thumb index points at the nested thumbnail sample.
    assert f.thumb_location(i) == (s.thumb.sample_offset, len(s.thumb.sample))


def test_annexb_is_parameter_sets_then_start_coded_nals(f):
    s = f.sample(2)
    ab = s.thumb.annexb()
    h = s.thumb.hvcc
    expect = b""
    for t in (NAL_VPS, NAL_SPS, NAL_PPS):
        for n in h.nalus(t):
            expect += b"\0\0\0\1" + n
    for n in split_nals(s.thumb.sample):
        expect += b"\0\0\0\1" + n
    assert ab == expect
    assert ab.count(b"\0\0\0\1") >= 4
    assert ab.endswith(s.thumb.sample[4:])


def test_hvcc_round_trips_byte_exact(f, original_path):
    data = original_path.read_bytes()
    for i in range(len(f)):
        s = f.sample(i)
        for v in (s.input, s.thumb):
            off, size = v.hvcc_payload
            assert v.hvcc.to_bytes() == data[off : off + size]


def test_hvcc_from_parameter_sets_matches_the_muxer(f):
    """Building an hvcC from the SPS (as our encoder does) gives ffmpeg's header fields."""
    for i in (0, 2, 10):
        h = f.sample(i).input.hvcc
        nals = [n for a in h.arrays for n in a.nalus]
        built = hvcc_from_nals(nals)
        assert built.to_bytes()[:22] == h.to_bytes()[:22]
        assert [a.nalus for a in built.arrays] == [a.nalus for a in h.arrays]


def test_rewriting_the_original_gives_identical_bytes(f, original_path, tmp_path):
    """Our writer, fed the original per-image mp4s, reproduces the whole file byte for byte.

    By default it then adds its metadata box, which says a checksum table
    follows, and its checksum box (uuid boxes the original tools skip);
    without them the files are identical.
    """
    orig = original_path.read_bytes()
    for checksums in (False, True):
        out = tmp_path / f"copy-{checksums}.bzna"
        with BznaWriter(out, checksums=checksums) as w:
            for i in range(len(f)):
                t = f.target(i)
                w.append_mp4(f.sample_bytes(i), target=None if t < 0 else t, filename=f.filename(i))
        data = out.read_bytes()
        assert data[: len(orig)] == orig
        tail = [b.type for b in parse_boxes(data, len(orig), len(data))]
        assert tail == (["uuid", "uuid"] if checksums else [])


def test_rebuilding_per_image_mp4s_from_pictures(f, original_path, tmp_path):
    """append() with the original pictures rebuilds every box as the tools laid it out.

    The one difference: nested video tkhd durations are written in the movie
    timescale (20), where ffmpeg left 1000 from its own timescale. Where the
    tools wrote no pasp (a PNG without an aspect ratio), the writer adds a 1:1
    one after fiel and changes nothing else: those samples are copied whole
    (so that the rest of the file lines up) and their entries checked apart.
    """
    no_pasp = [i for i in range(len(f)) if f.sample(i).input.pasp is None or f.sample(i).thumb.pasp is None]
    out = tmp_path / "rebuilt.bzna"
    with BznaWriter(out, checksums=False) as w:
        for i in range(len(f)):
            s = f.sample(i)
            t = None if f.target(i) < 0 else f.target(i)
            if i in no_pasp:
                w.append_mp4(f.sample_bytes(i), target=t, filename=f.filename(i))
                continue
            w.append(
                s.input.to_picture(),
                thumb=s.thumb.to_picture() if s.has_separate_thumb else None,
                target=t,
                filename=f.filename(i),
            )
    a, b = original_path.read_bytes(), out.read_bytes()
    assert len(a) == len(b)
    diff = np.flatnonzero(np.frombuffer(a, np.uint8) != np.frombuffer(b, np.uint8))
    # Each differing byte is the low byte of a nested video tkhd duration (0x3e8 -> 0x14).
    with BznaFile(out) as g:
        tkhd_durations = []
        for i in (i for i in range(len(g)) if i not in no_pasp):
            off, size = g.sample_location(i)
            mp4 = b[off : off + size]
            moov = [x for x in parse_boxes(mp4, 0, size, base=off) if x.type == "moov"][0]
            for trak in (x for x in moov.children() if x.type == "trak"):
                tkhd = trak.children()[0]
                if tkhd.full_header()[0] == 0:
                    tkhd_durations.append(tkhd.payload_offset + 4 + 16)
    allowed = set()
    for d in tkhd_durations:
        allowed.update((d + 2, d + 3))
        assert b[d : d + 4] == struct.pack(">I", 20) and a[d : d + 4] == struct.pack(">I", 1000)
    assert set(diff.tolist()) <= allowed and diff.size
    for i in no_pasp:
        for v in (f.sample(i).input, f.sample(i).thumb):
            theirs = _entry_children(v.sample_entry)
            ours = _entry_children(video_entry(v.to_picture()))
            pasp = ("pasp", struct.pack(">I4sII", 16, b"pasp", 1, 1))
            assert ours[0] == theirs[0]  # the 78-byte visual sample entry
            assert ours[1] == [k for k in theirs[1] if k[0] == "hvcC" or k[0] == "fiel"] + [pasp] + [
                k for k in theirs[1] if k[0] not in ("hvcC", "fiel")
            ]
