"""Malformed files raise BznaFormatError (naming file, offset, box, sample), never anything else."""

import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bzna_tf.format import BznaFile, BznaFormatError, BznaWriter, HvcC, NalArray, Picture
from bzna_tf.format.boxes import parse_boxes

CONTAINERS = {"moov", "trak", "mdia", "minf", "dinf", "stbl"}

HVCC = HvcC(
    profile_idc=1,
    level_idc=90,
    arrays=[
        NalArray(32, [b"\x40\x01\x0c\x01\xff\xff"]),
        NalArray(33, [b"\x42\x01\x01\x01\x60\x00\x00\x03"]),
        NalArray(34, [b"\x44\x01\xc0\x73"]),
    ],
)


def _pic(n, size, coded):
    nal = bytes([0x28, 0x01]) + bytes(range(n))
    return Picture(
        struct.pack(">I", len(nal)) + nal + struct.pack(">I", 3) + b"\x02\x01\x07", HVCC, size, coded
    )


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """A small but complete .bzna (fake slice payloads: this layer never decodes)."""
    path = tmp_path_factory.mktemp("bad") / "small.bzna"
    with BznaWriter(path) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
        w.append(
            _pic(9, (900, 600), (1024, 1024)),
            thumb=_pic(4, (512, 341), (512, 512)),
            target=1,
            filename="b.jpg",
        )
        w.append(_pic(7, (20, 30), (512, 512)), filename="c.jpg")
    return path.read_bytes()


def read_everything(data: bytes):
    """Touch every part of a file the way the loader and the CLI do."""
    with BznaFile(io.BytesIO(data), name="fuzzed.bzna") as f:
        touched = [f.targets, f.filenames()]
        for t in f.tracks.values():
            touched += [t.offsets, t.sizes, t.mime]
        for i in range(len(f)):
            f.target(i)
            f.filename(i)
            if "bzna_thumb" in f.tracks:
                f.thumb_location(i)
            s = f.sample(i)
            s.input.annexb()
            s.thumb.annexb()


def box_offsets(data, start=0, end=None, base=0):
    """(offset, size) of every box, nested per-image mp4s included."""
    end = len(data) if end is None else end
    out = []
    for b in parse_boxes(data, start, end, base=base):
        out.append((b.offset, b.size))
        if b.type in CONTAINERS:
            s = b.offset + b.header_size
            out += box_offsets(data, s, b.offset + b.size)
    return out


def test_small_file_is_valid(small_file):
    read_everything(small_file)
    with BznaFile(io.BytesIO(small_file)) as f:
        assert f.targets.tolist() == [3, 1, -1]
        assert f.sample(1).has_separate_thumb


def _expect_format_error(data):
    try:
        read_everything(data)
    except BznaFormatError as e:
        assert "fuzzed.bzna" in str(e)
        return e
    return None


FUZZ = settings(
    max_examples=300, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@FUZZ
@given(st.data())
def test_truncations(small_file, data):
    n = data.draw(st.integers(0, len(small_file) - 1))
    assert _expect_format_error(small_file[:n]) is not None


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), min_size=1, max_size=8))
def test_flipped_bytes(small_file, flips):
    b = bytearray(small_file)
    for pos, val in flips:
        b[pos % len(b)] = val
    _expect_format_error(bytes(b))


def _overwrite_u32(data: bytes, pos: int, value: int) -> bytes:
    b = bytearray(data)
    b[pos : pos + 4] = struct.pack(">I", value)
    return bytes(b)


@pytest.fixture(scope="module")
def small_boxes(small_file):
    return box_offsets(small_file)


@FUZZ
@given(st.data())
def test_bogus_box_sizes(small_file, small_boxes, data):
    off, size = data.draw(st.sampled_from(small_boxes))
    new = data.draw(
        st.one_of(
            st.sampled_from([0, 1, 2, 7, 8, 9, 0xFFFFFFFF, 0x7FFFFFFF]),
            st.integers(size - 16, size + 16).filter(lambda v: v >= 0 and v < 1 << 32),
            st.integers(0, (1 << 32) - 1),
        )
    )
    _expect_format_error(_overwrite_u32(small_file, off, new))


@FUZZ
@given(st.data())
def test_bogus_counts_and_fields(small_file, data):
    """Random 32-bit values written over moov fields (counts, sizes, offsets, versions)."""
    moov = [b for b in parse_boxes(small_file, 0, len(small_file)) if b.type == "moov"][0]
    pos = data.draw(st.integers(moov.offset + 8, moov.offset + moov.size - 4))
    val = data.draw(
        st.one_of(st.sampled_from([0, 1, 0xFFFFFFFF, 0x80000000, 1 << 20]), st.integers(0, (1 << 32) - 1))
    )
    _expect_format_error(_overwrite_u32(small_file, pos, val))


@FUZZ
@given(st.data())
def test_child_larger_than_parent(small_file, small_boxes, data):
    off, size = data.draw(st.sampled_from(small_boxes))
    grow = data.draw(st.integers(1, 1 << 16))
    _expect_format_error(_overwrite_u32(small_file, off, size + grow))


# Exact messages for the common cases.


def _patch(data, find_type, rel, value, fmt=">I", nth=0):
    """Write ``value`` at ``rel`` bytes into the payload of the nth box of a type."""
    b = bytearray(data)
    hits = [o for o, _ in box_offsets(data) if data[o + 4 : o + 8] == find_type]
    o = hits[nth] + 8 + rel
    b[o : o + struct.calcsize(fmt)] = struct.pack(fmt, value)
    return bytes(b), o


def test_huge_stsz_count_is_refused_before_allocating(small_file):
    data, at = _patch(small_file, b"stsz", 8, 0x7FFFFFFF)  # sample_count of bzna_input
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    msg = str(e.value)
    assert "fuzzed.bzna" in msg and "stsz" in msg and "2147483647 entries" in msg
    assert e.value.box.endswith("stbl/stsz") and e.value.offset == at + 4


def test_offset_past_the_end_names_the_sample(small_file):
    data, _ = _patch(small_file, b"stco", 8 + 4, 0xFFFFFF00)  # second bzna_input offset
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    assert e.value.sample == 1 and "sample 1" in str(e.value)
    assert "past the end" in str(e.value)


def test_truncated_file_message(small_file):
    with pytest.raises(BznaFormatError) as e:
        read_everything(small_file[:100])
    assert "runs past the end of the file" in str(e.value) and e.value.offset == 24
    assert e.value.box == "mdat"


def test_bad_nal_length_names_sample_and_offset(small_file):
    with BznaFile(io.BytesIO(small_file)) as f:
        off = f.sample(2).input.sample_offset
    b = bytearray(small_file)
    b[off : off + 4] = struct.pack(">I", 10_000)
    # The file has checksums: the reader's check after parsing finds the change first.
    with pytest.raises(BznaFormatError, match="sample 2: checksum mismatch"):
        read_everything(bytes(b))
    with BznaFile(io.BytesIO(bytes(b))) as f, pytest.raises(BznaFormatError) as e:
        f.sample(2, verify=False).input.annexb()
    assert e.value.sample == 2 and e.value.offset == off
    assert "NAL unit length 10000" in str(e.value)


def test_not_a_bzna():
    with pytest.raises(BznaFormatError, match="expected an 'ftyp' box first"):
        BznaFile(io.BytesIO(b"\x00\x00\x00\x10junkjunkjunkjunk"), name="x")
    with pytest.raises(BznaFormatError, match="empty file"):
        BznaFile(io.BytesIO(b""), name="x")


def test_missing_moov(small_file):
    moov = [b for b in parse_boxes(small_file, 0, len(small_file)) if b.type == "moov"][0]
    with pytest.raises(BznaFormatError, match="no 'moov' box"):
        BznaFile(io.BytesIO(small_file[: moov.offset]), name="x")


def test_index_errors_are_not_format_errors(small_file):
    with BznaFile(io.BytesIO(small_file)) as f:
        with pytest.raises(IndexError):
            f.sample(3)
        assert f.filename(-1) == "c.jpg"


def test_huge_co64_offset_is_refused(tmp_path):
    path = tmp_path / "x.bzna"
    with BznaWriter(path, force_co64=True) as w:
        w.append(_pic(5, (300, 200), (512, 512)), target=3, filename="a.jpg")
        w.append(_pic(6, (300, 200), (512, 512)), target=4, filename="b.jpg")
    data, _ = _patch(path.read_bytes(), b"co64", 8 + 8, 0xFFFFFFFFFFFFFFF0, fmt=">Q")
    with BznaFile(io.BytesIO(data), name="fuzzed.bzna") as f:
        for get in (lambda: f.tracks["bzna_input"].offsets, lambda: f.sample(1)):
            with pytest.raises(BznaFormatError, match="past the end") as e:
                get()
            assert e.value.sample == 1 and "18446744073709551600" in str(e.value)
