"""Malformed files through the C++ source op: DataLossError naming the file, never a crash.

The same mutations as test_bad_input.py (which checks the Python reader), and a
parity check: whatever the Python reader reads in full, the op reads to the
same bytes.
"""

import io
import itertools
import pathlib
import struct

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bad_input import (  # noqa: F401 (fixture)
    Layout,
    _overwrite_u32,
    _patch,
    box_offsets,
    read_everything,
    small_file,
    unchecked,
)

from bzna_tf.format import BznaFile, BznaFormatError
from bzna_tf.format.sample import FNAME, INPUT
from bzna_tf.ops import BznaDataset

FUZZ = settings(
    max_examples=120, deadline=5000, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
_names = itertools.count()
ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("op_fuzz")


def _op_read(path):
    out = []
    for track in ("thumb", "input"):
        for e in BznaDataset(str(path), track=track, with_filenames=True):
            out.append((track, int(e["index"]), e["data"].numpy(), int(e["width"]), int(e["height"])))
    return out


def _python_read(data):
    try:
        read_everything(data)
    except BznaFormatError:
        return None
    with BznaFile(io.BytesIO(data)) as f:
        return [
            (
                t,
                i,
                (s.thumb if t == "thumb" else s.input).annexb(),
                *(s.thumb if t == "thumb" else s.input).size,
            )
            for t in ("thumb", "input")
            for i, s in ((i, f.sample(i)) for i in range(len(f)))
        ]


def _check(fuzz_dir, data):
    """The op raises DataLossError naming the file, or reads what the Python reader reads."""
    path = fuzz_dir / f"fuzzed{next(_names)}.bzna"  # a new name: no cached index can answer
    path.write_bytes(data)
    expected = _python_read(data)
    try:
        got = _op_read(path)
    except tf.errors.DataLossError as e:
        assert path.name in e.message
        # The op reads less than the Python reader touches, so it may accept
        # files the reader refuses, but never refuse one the reader accepts.
        assert expected is None, e.message
        return
    if expected is not None:
        assert got == expected
    path.unlink()


def test_valid_file_reads_the_same(small_file, fuzz_dir):  # noqa: F811
    _check(fuzz_dir, small_file)


@FUZZ
@given(st.data())
def test_truncations(small_file, fuzz_dir, data):  # noqa: F811
    _check(fuzz_dir, small_file[: data.draw(st.integers(0, len(small_file) - 1))])


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), min_size=1, max_size=8))
def test_flipped_bytes(small_file, fuzz_dir, flips):  # noqa: F811
    b = bytearray(small_file)
    for pos, val in flips:
        b[pos % len(b)] = val
    _check(fuzz_dir, bytes(b))


@FUZZ
@given(st.data())
def test_bogus_box_sizes_and_fields(small_file, fuzz_dir, data):  # noqa: F811
    boxes = box_offsets(small_file)
    off, size = data.draw(st.sampled_from(boxes))
    pos = data.draw(st.one_of(st.just(off), st.integers(off, off + size - 4)))
    val = data.draw(
        st.one_of(
            st.sampled_from([0, 1, 2, 7, 8, 9, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, size + 1]),
            st.integers(0, (1 << 32) - 1),
        )
    )
    b = bytearray(small_file)
    b[pos : pos + 4] = struct.pack(">I", val)
    _check(fuzz_dir, bytes(b))


def _op_error(fuzz_dir, data):
    path = fuzz_dir / f"case{next(_names)}.bzna"
    path.write_bytes(data)
    with pytest.raises(tf.errors.DataLossError) as e:
        _op_read(path)
    assert str(path) in e.value.message
    return e.value.message


def test_huge_stsz_count_is_refused(small_file, fuzz_dir):  # noqa: F811
    data, at = _patch(small_file, b"stsz", 8, 0x7FFFFFFF)
    msg = _op_error(fuzz_dir, data)
    assert "trak[bzna_input]/mdia/minf/stbl/stsz" in msg and "2147483647" in msg


def test_offset_past_the_end_names_the_sample(small_file, fuzz_dir):  # noqa: F811
    data, _ = _patch(small_file, b"stco", 8 + 4, 0xFFFFFF00)
    msg = _op_error(fuzz_dir, data)
    assert "sample 1" in msg and "ends past the" in msg


def test_bad_nal_length_names_sample_and_offset(small_file, fuzz_dir):  # noqa: F811
    with BznaFile(io.BytesIO(small_file)) as f:
        off = f.sample(2).input.sample_offset
    b = bytearray(small_file)
    b[off : off + 4] = struct.pack(">I", 10_000)
    msg = _op_error(fuzz_dir, bytes(b))
    assert f"sample 2, box mdat, byte offset {off}: NAL unit length 10000" in msg


def test_not_a_bzna_and_missing_moov(small_file, fuzz_dir):  # noqa: F811
    assert "expected an 'ftyp' box first" in _op_error(fuzz_dir, b"\x00\x00\x00\x10junkjunkjunkjunk")
    assert "empty file" in _op_error(fuzz_dir, b"")
    moov = small_file.rindex(b"moov") - 4
    assert "no 'moov' box" in _op_error(fuzz_dir, small_file[:moov])


def test_per_image_mp4_must_start_with_ftyp(small_file, fuzz_dir):  # noqa: F811
    """Both readers refuse a per-image mp4 whose first box is not 'ftyp' (SPEC section 2), alike."""
    with BznaFile(io.BytesIO(small_file)) as f:
        off = int(f.tracks["bzna_input"].offsets[0])  # where sample 0's per-image mp4 starts
    assert small_file[off + 4 : off + 8] == b"ftyp"
    b = bytearray(small_file)
    b[off + 4] = 0
    with pytest.raises(BznaFormatError) as e:
        read_everything(bytes(b))
    want = f"sample 0, byte offset {off}: expected the per-image mp4 to start with 'ftyp', found '\\x00typ'"
    assert want in str(e.value)
    assert want in _op_error(fuzz_dir, bytes(b))
    _check(fuzz_dir, bytes(b))  # what test_flipped_bytes draws as flips=[(off + 4, 0)]


def test_zero_byte_input_sample_is_named_so(small_file, fuzz_dir):  # noqa: F811
    """Both readers say the outer index gives the per-image mp4 0 bytes (not that it has no 'moov')."""
    layout = Layout(small_file)
    data = _overwrite_u32(small_file, layout.stbl[INPUT]["stsz"].payload_offset + 12 + 4 * 1, 0)
    off = layout.tracks[INPUT][0][1]
    want = (
        f"sample 1, box trak[{INPUT}], byte offset {off}: input sample is 0 bytes, expected a per-image mp4"
    )
    with pytest.raises(BznaFormatError) as e:
        read_everything(data)
    assert want in str(e.value)
    path = fuzz_dir / f"case{next(_names)}.bzna"
    path.write_bytes(data)
    for track in ("thumb", "input"):
        with pytest.raises(tf.errors.DataLossError) as e:
            list(BznaDataset(str(path), track=track))
        assert f"{path}, {want}" in e.value.message


def test_an_empty_picture_sample_is_refused_by_both_readers_alike(fuzz_dir):
    """A per-image mp4 whose picture sample is 0 bytes: the op gave a picture of nothing (a fuzz finding,
    fuzz/regressions/fuzz_sample/empty-picture-sample, whose mp4 follows the harness's 15 bytes)."""
    from bzna_tf.format import BznaWriter

    regression = ROOT / "fuzz" / "regressions" / "fuzz_sample" / "empty-picture-sample"
    path = fuzz_dir / f"case{next(_names)}.bzna"
    with BznaWriter(path) as w:
        w.append_mp4(regression.read_bytes()[15:], target=None, filename="x.jpg")
    with pytest.raises(BznaFormatError) as e:
        read_everything(path.read_bytes())
    want = str(e.value).split(", ", 1)[1]  # after the file's name
    assert want == "sample 0, box mdat, byte offset 68: empty H.265 sample", want
    for track in ("thumb", "input"):
        with pytest.raises(tf.errors.DataLossError) as e:
            list(BznaDataset(str(path), track=track))
        assert f"{path}, {want}" in e.value.message


# Sample 1's stored name is b"b.jpg\0": its five bytes replaced (the NUL is
# stripped by both readers, so a sequence at the end is cut short by it).
NAMES = {
    "continuation byte first": b"b\xaejpg",
    "overlong 2 bytes": b"\xc0\xafjpg",
    "overlong 3 bytes": b"\xe0\x80\xafpg",
    "overlong 4 bytes": b"\xf0\x8f\xbf\xbfg",
    "surrogate": b"\xed\xa0\x80pg",
    "past U+10FFFF": b"\xf4\x90\x80\x80g",
    "F5 lead": b"\xf5\x80\x80\x80g",
    "FF": b"b.jp\xff",
    "cut short inside": b"\xe2\x82jpg",
    "cut short at the end": b"b.j\xe2\x82",
    "lead at the end": b"b.jp\xf0",
    "2 bytes": b"\xc3\xa9jpg",
    "3 bytes": b"\xe2\x82\xacpg",
    "U+FFFF": b"\xef\xbf\xbfpg",
    "4 bytes": b"\xf0\x9f\x98\x80g",
    "U+10FFFF": b"\xf4\x8f\xbf\xbfg",
    "NUL inside": b"b\x00jpg",
}


@pytest.mark.parametrize("raw", NAMES.values(), ids=NAMES.keys())
def test_names_are_utf8_as_the_python_reader_decodes_them(small_file, fuzz_dir, raw):  # noqa: F811
    """The op reads a name the Python reader reads, and refuses one it refuses, in the same words."""
    with BznaFile(io.BytesIO(small_file)) as f:
        off = int(f.tracks[FNAME].offsets[1])
    assert small_file[off : off + 6] == b"b.jpg\0"
    # Unchecked (a table of another version): a changed name is refused by its checksum where it is checked.
    data = unchecked(small_file[:off] + raw + small_file[off + 5 :])
    path = fuzz_dir / f"case{next(_names)}.bzna"
    path.write_bytes(data)
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        want = (
            f"sample 1, box mdat, byte offset {off + bad.start}: filename is not valid UTF-8 ({bad.reason})"
        )
        with pytest.raises(BznaFormatError) as e:
            read_everything(data)
        assert want in str(e.value)
        with pytest.raises(tf.errors.DataLossError) as e:
            list(BznaDataset(str(path), with_filenames=True))
        assert f"{path}, {want}" in e.value.message
        return
    assert read_everything(data).names == ("a.jpg", name, "c.jpg")
    got = [e["filename"].numpy() for e in BznaDataset(str(path), with_filenames=True)]
    assert got == [b"a.jpg", raw, b"c.jpg"]
