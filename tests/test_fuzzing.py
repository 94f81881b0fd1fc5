"""The Python reader and the sample-list parser under the fuzzing rule, and the fixed findings.

The rule (fuzz/format_rule.py, whose ``exercise`` these tests run): on any
bytes, each parser succeeds or raises the error its contract names
(BznaFormatError for .bzna data, SampleListError for lists), never another
exception, a hang or an allocation out of proportion to what the input
announces. Hypothesis drives structured damage here (box sizes, counts,
truncations, tokens); fuzz/fuzz_format.py runs the same rule under atheris in
.ci/fuzz. Each finding fixed keeps its reproducer: the Python ones below, the
native ones in fuzz/regressions/<harness>/ (replayed by .ci/fuzz; those that
a user can meet through the ops also have a test here).
"""

import io
import struct
import sys
import tracemalloc

import pytest
from conftest import FREE, ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bzna_tf.format import BznaFile, BznaFormatError, BznaWriter, SampleList, SampleListError

sys.path.insert(0, str(ROOT / "fuzz"))
from format_rule import Finding, exercise  # noqa: E402

REGRESSIONS = ROOT / "fuzz" / "regressions"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _small_bzna_bytes(path):
    with BznaFile(FREE.path) as src, BznaWriter(path) as w:
        for i in (11, 11):
            w.append_mp4(src.sample_bytes(i), target=src.target(i), filename=src.filename(i))
    return path.read_bytes()


@pytest.fixture(scope="module")
def small_bzna(tmp_path_factory):
    """The original-tools fixture's smallest picture (hopper.jpg) repacked by our writer, with checksums."""
    return _small_bzna_bytes(tmp_path_factory.mktemp("fuzz") / "small.bzna")


def _box_offsets(data: bytes) -> list[int]:
    """Where each box header of the file starts (every nested level, as far as they parse)."""
    out, todo = [], [(0, len(data))]
    while todo:
        start, end = todo.pop()
        pos = start
        while pos + 8 <= end:
            size = struct.unpack_from(">I", data, pos)[0]
            out.append(pos)
            if size < 8 or pos + size > end:
                break
            if data[pos + 4 : pos + 8] in (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"dinf", b"mdat"):
                todo.append((pos + (16 if data[pos + 4 : pos + 8] == b"mdat" else 8), pos + size))
            pos += size
    return out


@st.composite
def damaged(draw, data):
    """``data`` with a few structured injuries: box sizes and fields rewritten, bytes flipped, a cut."""
    b = bytearray(data)
    boxes = _box_offsets(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["size", "field", "byte", "cut"]))
        if kind == "size" and boxes:
            at = draw(st.sampled_from(boxes))
            value = draw(st.sampled_from([0, 1, 7, 8, 9, 16, 2**31, 2**32 - 1]) | st.integers(0, 2**32 - 1))
            b[at : at + 4] = struct.pack(">I", value)
        elif kind == "field" and boxes:
            at = draw(st.sampled_from(boxes)) + draw(st.integers(8, 40))
            if at + 4 <= len(b):
                special = st.sampled_from([0, 1, 2, 0xFF, 0xFFFF, 2**31, 2**32 - 1])
                value = draw(special | st.integers(0, 2**32 - 1))
                b[at : at + 4] = struct.pack(">I", value)
        elif kind == "byte" and b:
            at = draw(st.integers(0, len(b) - 1))
            b[at] ^= draw(st.integers(1, 255))
        elif kind == "cut" and b:
            del b[draw(st.integers(0, len(b))) :]
    return bytes(b)


def test_damaged_files_raise_only_format_errors(small_bzna):
    @SETTINGS
    @given(damaged(small_bzna))
    def check(data):
        exercise(data)

    check()


def test_damaged_per_image_mp4s_raise_only_format_errors(small_bzna):
    with BznaFile(io.BytesIO(small_bzna)) as f:
        mp4 = f.sample_bytes(0)

    @SETTINGS
    @given(damaged(mp4))
    def check(data):
        exercise(data)

    check()


_TOKENS = st.sampled_from(
    ["CONDUIT_HDF5_INCLUSION", "MULTI-SAMPLE_EXCLUSION", "SINGLE-SAMPLE", "MULTI-SAMPLE_INCLUSION_V2", "-",
     "/data", "a.bzna", "sub/b.bzna", "a.bzna/3", "x.jpg", "...", "0", "1", "2", "4", "299", "300",
     "4294967296", "99999999999", "-1", "é", "\t", ""]
)  # fmt: skip


@SETTINGS
@given(st.lists(st.lists(_TOKENS, max_size=7).map(" ".join), min_size=1, max_size=7).map("\n".join))
def test_sample_lists_raise_only_sample_list_errors(text):
    exercise(text.encode())


# ---------------------------------------------------------------------------------- fixed findings


def test_a_range_is_counted_before_it_is_expanded():
    """Finding (sample lists): "0 ... N" on a line announcing fewer ids expanded all N + 1 ids
    before comparing, so a 60-byte list could ask for gigabytes and minutes. The count is now
    checked first, against the line's own count and what line 2 leaves for it."""
    mismatch = "MULTI-SAMPLE_INCLUSION_V2\n1 1\n/d\na.bzna 1 0 ... 3000000\n"
    beyond = "MULTI-SAMPLE_INCLUSION_V2\n1 1\n/d\na.bzna 3000001 0 ... 3000000\n"
    for text, message in (
        (mismatch, "line 4: a.bzna: the line says 1 included sample but lists 3,000,001 ids"),
        (beyond, "line 2: the counts announce 1 included sample, the file lines add up to more (3000001 by"),
    ):
        tracemalloc.start()
        try:
            with pytest.raises(SampleListError) as e:
                SampleList.parse(text, path="l.txt")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert message in str(e.value)
        assert peak < 1 << 20, f"{peak} bytes allocated to refuse a {len(text)}-byte list"


def test_chunks_holding_more_samples_than_stsz_are_refused_by_the_op(small_bzna, tmp_path):
    """Finding (fuzz/differential.py on the fuzz_container corpus): an outer sample table whose
    stsc puts more samples in its chunks than stsz sizes was read by the source op, which placed
    the first ones and ignored the rest, while the Python reader refuses it. Which samples are
    meant is a guess: the op now refuses it too, with the Python reader's words."""
    import tensorflow as tf

    from bzna_tf.ops import BznaDataset

    data = bytearray(small_bzna)
    with BznaFile(io.BytesIO(small_bzna)) as f:
        trak = f.tracks["bzna_input"].box
    stsc = data.find(b"stsc", trak.offset, trak.offset + trak.size) - 4
    # entry_count 1: (first_chunk 1, samples_per_chunk 1 -> 2, sample_description_index 1)
    assert struct.unpack_from(">IIII", data, stsc + 12) == (1, 1, 1, 1)
    struct.pack_into(">I", data, stsc + 20, 2)
    path = tmp_path / "stsc.bzna"
    path.write_bytes(bytes(data))
    with pytest.raises(BznaFormatError, match="chunks hold 4 samples but stsz has 2"):
        BznaFile(path)
    with pytest.raises(tf.errors.DataLossError, match=r"stsc\b.*chunks hold 4 samples but stsz has 2"):
        list(BznaDataset(str(path)))


def test_python_reproducers_stay_fixed():
    """fuzz/regressions/fuzz_format/: the inputs of fixed Python findings, each run through the rule."""
    paths = sorted((REGRESSIONS / "fuzz_format").glob("*"))
    assert paths
    for path in paths:
        try:
            exercise(path.read_bytes())
        except Finding as e:
            pytest.fail(f"{path.name}: {e}")


def test_regressions_folder_names_harnesses():
    """Each reproducer sits in the folder of the harness that replays it (.ci/fuzz reads them there)."""
    harnesses = {"fuzz_container", "fuzz_sample", "fuzz_decode_warp", "fuzz_warp", "fuzz_crc32c"}
    harnesses.add("fuzz_format")
    if REGRESSIONS.is_dir():
        assert {p.name for p in REGRESSIONS.iterdir()} <= harnesses
    assert all((ROOT / "fuzz" / f"{h}.{'py' if h == 'fuzz_format' else 'cc'}").is_file() for h in harnesses)


def test_the_seed_corpus_converter_files_are_written(tmp_path):
    """fuzz/make_corpus.py's converted files use the converter's current API (.ci/fuzz needs them)."""
    from make_corpus import converted_files

    paths = converted_files(tmp_path)
    assert len(paths) == 3 and all(p.stat().st_size > 0 for p in paths)
    last_names = []
    for p in paths:
        with BznaFile(p) as f:
            assert len(f) == 3 and [f.target(i) for i in range(3)][:2] == [0, 1]
            last_names.append(f.filename(2))
    assert last_names == ["odd.png"] * 3
