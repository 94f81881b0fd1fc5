"""Per-picture checksums: the box, both readers (Python and the source op), and bzna-tf verify.

Files here are the original-tools fixture's per-image mp4s copied by our
writer (no encoding, so they are quick to make): samples 2, 9 and 10 have a
separate thumbnail, the others do not.
"""

import json
import os
import re
import shutil
import struct
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import SHARD_SIZES, gradient

from bzna_tf import ClassificationDataset
from bzna_tf.cli import main
from bzna_tf.format import BznaFile, BznaFormatError, BznaWriter
from bzna_tf.format.boxes import box, parse_boxes
from bzna_tf.format.checksums import CHECKSUMS_UUID, build_checksum_box, crc32c
from bzna_tf.format.metadata import METADATA_UUID
from bzna_tf.format.samplelist import SampleList
from bzna_tf.ops import BznaDataset, read_samples, verify_checksums
from bzna_tf.verify import verify

SEPARATE_THUMBS = (2, 9, 10)


def _bitwise_crc32c(data: bytes) -> int:
    """CRC-32C straight from its definition, one bit at a time."""
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def test_crc32c_matches_its_definition():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    # RFC 3720 (iSCSI), appendix B.4.
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    rng = np.random.default_rng(0)
    for n in (1, 3, 4, 63, 64, 65, 128, 129, 1000, 4099):
        d = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc32c(d) == _bitwise_crc32c(d), n
        k = n // 3
        assert crc32c(d[k:], crc32c(d[:k])) == crc32c(d), n  # continuing a CRC


CRC_DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "lib/crc32c.h"
// Prints the hardware flag, then the CRC of every (start, length) pair of stdin's bytes given as arguments.
int main(int argc, char** argv) {
  std::vector<unsigned char> d;
  for (int c; (c = std::getchar()) != EOF;) d.push_back(static_cast<unsigned char>(c));
  std::printf("%d\n", bzna_tf::Crc32cIsHardware() ? 1 : 0);
  for (int k = 1; k + 1 < argc; k += 2) {
    size_t at = std::strtoul(argv[k], nullptr, 10), n = std::strtoul(argv[k + 1], nullptr, 10);
    std::printf("%u\n", bzna_tf::Crc32cExtend(bzna_tf::Crc32c(d.data(), at), d.data() + at, n));
  }
}
"""


def test_cpp_crc32c_matches_on_both_paths(tmp_path):
    """lib/crc32c.cc, with the crc32 instruction (where the CPU has it) and with its table."""
    import shutil
    import subprocess
    import sys

    from bzna_tf.ops._build import source_dir

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "driver.cc").write_text(CRC_DRIVER)
    data = np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    pairs = [(0, 0), (0, 9), (3, 1), (1, 4999), (7, 4096), (0, 5000), (4991, 9)]
    want = [crc32c(data[: a + n]) for a, n in pairs]
    flags = []
    for extra in ([], ["-DBZNA_TF_CRC32C_NO_HARDWARE"]):
        exe = tmp_path / f"crc{len(extra)}"
        sources = [str(tmp_path / "driver.cc"), str(source_dir() / "lib" / "crc32c.cc")]
        subprocess.run(
            [cxx, "-O2", "-std=c++17", *extra, f"-I{source_dir()}", *sources, "-o", str(exe)], check=True
        )
        args = [str(v) for p in pairs for v in p]
        out = subprocess.run([str(exe), *args], input=data, capture_output=True, check=True).stdout.split()
        flags.append(int(out[0]))
        assert [int(v) for v in out[1:]] == want, extra
    assert flags[1] == 0 and (flags[0] == 1 or sys.platform != "linux" or "sse4_2" not in _cpu_flags())


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def _copy_original(f, path, **kw):
    with BznaWriter(path, **kw) as w:
        for i in range(len(f)):
            t = f.target(i)
            w.append_mp4(f.sample_bytes(i), target=None if t < 0 else t, filename=f.filename(i))
    return path


@pytest.fixture(scope="module")
def original(original_path):
    with BznaFile(original_path) as f:
        yield f


@pytest.fixture(scope="module")
def written(original, tmp_path_factory):
    """The fixture's samples written by our writer: the original bytes, then the checksum box."""
    return _copy_original(original, tmp_path_factory.mktemp("sums") / "good.bzna")


def _flip(path, out, *offsets):
    b = bytearray(path.read_bytes())
    for off in offsets:
        b[off] ^= 0x10
    out.write_bytes(bytes(b))
    return out


def _payload_middle(f, i, track):
    """A byte in the middle of sample i's H.265 picture of that track."""
    s = f.sample(i, verify=False)
    pic = s.thumb if track == "bzna_thumb" else s.input
    return pic.sample_offset + len(pic.sample) // 2


@pytest.fixture(scope="module")
def damaged(written, tmp_path_factory):
    """`written` with one byte flipped in sample 2's thumbnail and one in sample 9's input picture."""
    with BznaFile(written) as f:
        offsets = _payload_middle(f, 2, "bzna_thumb"), _payload_middle(f, 9, "bzna_input")
    return _flip(written, tmp_path_factory.mktemp("sums") / "bad.bzna", *offsets)


@pytest.mark.every_original
def test_box_layout_and_what_each_checksum_covers(original, original_path, written, tmp_path):
    orig, ours = original_path.read_bytes(), written.read_bytes()
    assert ours[: len(orig)] == orig  # the original tools' layout, then two boxes they skip:
    said, tail = parse_boxes(ours, len(orig), len(ours))
    # the metadata, which says a checksum table follows (so that one lost is damage, not absence),
    assert bytes(said.payload()[:16]) == METADATA_UUID
    assert json.loads(bytes(said.payload()[16:])) == {"checksums": {"version": 1, "algorithm": "c32c"}}
    # and the table.
    payload = bytes(tail.payload())
    assert tail.type == "uuid" and payload[:16] == CHECKSUMS_UUID
    head = payload[16:]
    assert head[:4] == b"\x01\x00\x00\x00" and head[4:8] == b"c32c"
    n, moov_sum, targets_sum, names_sum, k = struct.unpack_from(">IIIIB", head, 8)
    assert (n, k) == (12, 2)
    assert head[25:47] == b"\x0abzna_input\x0abzna_thumb"
    columns = np.frombuffer(head[47:], ">u4").reshape(2, n)
    assert len(head) == 47 + 8 * n
    top = {b[0]: b for b in original.top_level}
    _, off, _, size = top["moov"]
    assert moov_sum == crc32c(orig[off : off + size])
    t = original.tracks
    targets = b"".join(
        orig[o : o + s] for o, s in zip(t["bzna_target"].offsets, t["bzna_target"].sizes, strict=True)
    )
    names = b"".join(
        orig[o : o + s] for o, s in zip(t["bzna_fname"].offsets, t["bzna_fname"].sizes, strict=True)
    )
    assert (targets_sum, names_sum) == (crc32c(targets), crc32c(names))
    for i in range(n):
        base, size = original.sample_location(i)
        mp4 = orig[base : base + size]
        assert mp4[24:28] == b"mdat" and columns[0, i] == crc32c(mp4)  # the input: all of it
        at = original.thumb_location(i)[0] - base
        # The thumbnail: ftyp + the mdat header (28 bytes), then from the thumbnail on.
        assert columns[1, i] == crc32c(mp4[:28] + mp4[at:])
        assert (at > 28) == (i in SEPARATE_THUMBS)
    with BznaFile(written) as f:
        table = f.checksums
        assert table.supported and table.describe() == "CRC-32C of bzna_input, bzna_thumb"
        assert [c.tolist() for c in table.tracks.values()] == columns.tolist()
        assert f.check_index() == [] and all(
            f.check_sample(i) == ("bzna_input", "bzna_thumb") for i in range(n)
        )
    # checksums=False writes the original tools' file byte for byte.
    assert _copy_original(original, tmp_path / "plain.bzna", checksums=False).read_bytes() == orig


def test_python_reader_finds_a_flipped_byte(damaged):
    with BznaFile(damaged) as f:
        with pytest.raises(BznaFormatError) as e:
            f.sample(2)
        assert e.value.sample == 2 and f"{damaged}, sample 2: checksum mismatch (stored 0x" in str(e.value)
        assert "of its 'bzna_input' picture" in str(e.value)  # the input's covers the whole mp4
        with pytest.raises(BznaFormatError, match=r"sample 2: checksum mismatch .* 'bzna_thumb' picture"):
            f.check_sample(2, tracks=("bzna_thumb",))
        with pytest.raises(BznaFormatError, match=r"sample 9: checksum mismatch .* 'bzna_input' picture"):
            f.sample(9)
        # The thumbnail's checksum does not cover the full-size picture, which its readers skip.
        assert f.check_sample(9, tracks=("bzna_thumb",)) == ("bzna_thumb",)
        f.sample(9, verify=False)
        sums = f.sample_checksums(2)
        assert (
            sums["bzna_input"][0] != sums["bzna_input"][1] and sums["bzna_thumb"][0] != sums["bzna_thumb"][1]
        )
        for i in set(range(12)) - {2, 9}:
            f.sample(i)


def _op_read(path, track, indices=None):
    return [int(e["index"]) for e in BznaDataset(str(path), indices, track=track)]


def test_source_op_raises_data_loss_naming_file_and_sample(written, damaged):
    for track in ("thumb", "input"):
        assert _op_read(written, track) == list(range(12))
    with pytest.raises(tf.errors.DataLossError) as e:
        _op_read(damaged, "thumb")
    assert f"{damaged}, sample 2: checksum mismatch (stored 0x" in e.value.message
    assert "of its 'bzna_thumb' picture" in e.value.message
    with pytest.raises(tf.errors.DataLossError, match=r"sample 9: checksum mismatch .* 'bzna_input' picture"):
        _op_read(damaged, "input", [9])
    # Sample 9's thumbnail is intact: reading it never touches the damaged input picture.
    assert _op_read(damaged, "thumb", [9, 10, 11]) == [9, 10, 11]
    # Two files: the message names the file and the index within it.
    with pytest.raises(tf.errors.DataLossError, match=f"{damaged}, sample 2: checksum mismatch"):
        read_samples([str(written), str(damaged)], tf.constant([14], tf.int64), track="thumb")
    # Verification off: the damaged pictures are read as they are.
    before = verify_checksums(False)
    try:
        assert verify_checksums() is False
        assert _op_read(damaged, "thumb") == list(range(12))
    finally:
        verify_checksums(before)
    assert verify_checksums() is True


def test_the_environment_turns_verification_off():
    """$BZNA_TF_VERIFY_CHECKSUMS, read once in a fresh process (the library alone, through ctypes)."""
    import glob
    import os
    import subprocess
    import sys

    from bzna_tf.ops import _load, load_library

    load_library()
    framework = glob.glob(os.path.join(tf.sysconfig.get_lib(), "libtensorflow_framework.so*"))
    if not framework:
        pytest.skip("no libtensorflow_framework.so to load the ops library beside")
    code = (
        "import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
        "print(ctypes.CDLL(sys.argv[2]).bzna_tf_verify_checksums(-1))"
    )
    for value, on in (("0", 0), ("Off", 0), ("no", 0), ("1", 1), ("", 1), (None, 1)):
        env = {k: v for k, v in os.environ.items() if k != "BZNA_TF_VERIFY_CHECKSUMS"}
        if value is not None:
            env["BZNA_TF_VERIFY_CHECKSUMS"] = value
        args = [sys.executable, "-c", code, framework[0], str(_load._path)]
        out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
        assert int(out) == on, value


def test_a_checksum_mismatch_is_subject_to_on_error(damaged):
    out = read_samples(str(damaged), tf.constant([1, 2, 3], tf.int64), track="thumb", on_error="skip")
    errors = [e.decode() for e in out["errors"].numpy()]
    assert errors[0] == errors[2] == "" and f"{damaged}, sample 2: checksum mismatch" in errors[1]
    assert out["data"].numpy()[1] == b"" and out["data"].numpy()[0] != b""


def _with_table(path, out, table: bytes):
    """`path` with its checksum box (the last box) replaced by `table`."""
    data = path.read_bytes()
    last = parse_boxes(data, 0, len(data))[-1]
    assert bytes(last.payload()[:16]) == CHECKSUMS_UUID
    out.write_bytes(data[: last.offset] + table)
    return out


def _fixed(n=12, k=2, algorithm=b"c32c", version=1):
    return bytes((version, 0, 0, 0)) + struct.pack(">4sIIIIB", algorithm, n, 0, 0, 0, k)


def _names(*names):
    return b"".join(bytes((len(n),)) + n for n in names)


MALFORMED = {
    "too short": (box(b"uuid", CHECKSUMS_UUID, b"\x01\x00"), "2 bytes of payload, too short for its version"),
    "no names": (box(b"uuid", CHECKSUMS_UUID, _fixed(k=1)), "truncated track names"),
    "fixed fields": (box(b"uuid", CHECKSUMS_UUID, b"\x01\0\0\0c32c"), "the fixed fields need 25"),
    "sample count": (
        build_checksum_box({"bzna_input": np.zeros(11, np.uint32)}, moov=0, targets=0, names=0),
        "checksum table: 11 samples, the file has 12",
    ),
    "truncated names": (box(b"uuid", CHECKSUMS_UUID, _fixed(k=1), b"\x0abzna"), "truncated track names"),
    "listed twice": (
        box(b"uuid", CHECKSUMS_UUID, _fixed(k=2), _names(b"bzna_input", b"bzna_input"), bytes(96)),
        "track 'bzna_input' listed twice",
    ),
    "size": (
        box(b"uuid", CHECKSUMS_UUID, _fixed(k=1), _names(b"bzna_input"), bytes(44)),
        "80 bytes of payload, expected 84 for 1 x 12 checksums",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_tables_are_refused_by_both_readers(written, tmp_path, case):
    table, fragment = MALFORMED[case]
    path = _with_table(written, tmp_path / f"{case.replace(' ', '_')}.bzna", table)
    with BznaFile(path) as f:
        with pytest.raises(BznaFormatError, match=fragment) as e:
            _ = f.checksums
        assert str(path) in str(e.value) and "box uuid" in str(e.value)
    with pytest.raises(tf.errors.DataLossError, match=fragment) as e:
        _op_read(path, "thumb")
    assert f"{path}, box uuid, byte offset " in e.value.message


def test_a_thumbnail_column_needs_the_thumbnail_track(written, tmp_path):
    data = bytearray(written.read_bytes())
    moov = next(b for b in parse_boxes(bytes(data), 0, len(data)) if b.type == "moov")
    at = bytes(data).rindex(b"bzna_thumb", moov.offset, moov.offset + moov.size)  # the outer hdlr name
    data[at + 9] = ord("X")
    path = tmp_path / "no_thumb_track.bzna"
    path.write_bytes(bytes(data))
    fragment = "a 'bzna_thumb' column, but the file has no 'bzna_thumb' track"
    with pytest.raises(BznaFormatError, match=fragment):
        _ = BznaFile(path).checksums
    with pytest.raises(tf.errors.DataLossError, match=fragment):
        _op_read(path, "thumb")


@pytest.mark.parametrize("version, algorithm", [(2, b"c32c"), (1, b"xxh3")])
def test_tables_of_another_version_or_algorithm_are_ignored(damaged, tmp_path, version, algorithm):
    fields = _fixed(version=version, algorithm=algorithm, k=1) + _names(b"bzna_input") + bytes(48)
    path = _with_table(damaged, tmp_path / "other.bzna", box(b"uuid", CHECKSUMS_UUID, fields))
    with BznaFile(path) as f:
        assert not f.checksums.supported and f.checksums.tracks == {}
        assert "ignored" in f.checksums.describe()
        f.sample(2)  # nothing to check against
    assert _op_read(path, "thumb") == list(range(12))
    report = verify(path, decode=False)
    assert "checksum table ignored" in report.files[0].method
    # The file's metadata says it was written with version 1 of c32c: the other table is damage.
    (index,) = [d for d in report.files[0].damage if d.kind == "index"]
    said = f"version {version}" if version != 1 else f"version 1, algorithm {algorithm.decode()!r}"
    wanted = "version 1" if version != 1 else "version 1, algorithm 'c32c'"
    assert index.message == (
        f"the checksum table says {said}, where the file's metadata says {wanted}: the table is damaged"
    )


def test_a_table_of_a_newer_format_that_the_metadata_announces_is_not_damage():
    from bzna_tf.format.checksums import ChecksumTable
    from bzna_tf.verify import _lost_checksums

    newer = ChecksumTable(0, 2, reason="version 2, this reader knows 1")  # its algorithm not read
    assert _lost_checksums({"version": 2, "algorithm": "xxh3"}, newer) is None
    assert "says version 2" in _lost_checksums({"version": 1, "algorithm": "c32c"}, newer)
    assert _lost_checksums({"version": 1, "algorithm": "c32c"}, ChecksumTable(0, 1)) is None
    assert _lost_checksums(None, None) is None


def test_a_lost_checksum_table_is_damage_where_the_metadata_says_there_was_one(damaged, tmp_path, capsys):
    # A file cut short at its last box read as one written without checksums: its damaged pictures
    # (two flipped bytes that FFmpeg decodes without a word) then passed `bzna-tf verify`.
    data = damaged.read_bytes()
    last = parse_boxes(data, 0, len(data))[-1]
    cut = tmp_path / "cut.bzna"
    cut.write_bytes(data[: last.offset])
    with BznaFile(cut) as f:
        assert f.checksums is None and f.metadata["checksums"] == {"version": 1, "algorithm": "c32c"}
    report = verify(cut)
    assert not report.ok
    assert [d.message for d in report.files[0].damage if d.kind == "index"] == [
        "no checksum table, though the file's metadata says it was written with one (version 1): the file "
        "was cut short, or its last box damaged"
    ]
    assert main(["verify", str(cut), "--progress", "none"]) == 1
    # Written without checksums: no table, none said, nothing to report.
    with BznaFile(damaged) as f:
        plain = _copy_original(f, tmp_path / "plain.bzna", checksums=False)
    assert verify(plain).ok


def test_columns_of_unknown_tracks_are_ignored(written, damaged, tmp_path):
    with BznaFile(written) as f:
        inputs, sums = f.checksums.tracks["bzna_input"], f.checksums
    table = build_checksum_box(  # the index's own checksums: the targets are checked as they are read
        {"bzna_other": np.zeros(12, np.uint32), "bzna_input": inputs},
        moov=sums.moov, targets=sums.targets, names=sums.names,
    )  # fmt: skip
    path = _with_table(damaged, tmp_path / "other_track.bzna", table)
    with BznaFile(path) as f:
        assert list(f.checksums.tracks) == ["bzna_input"]
        assert f.check_sample(2, tracks=("bzna_thumb",)) == ()  # no thumbnail column: nothing to check
    assert _op_read(path, "thumb") == list(range(12))
    with pytest.raises(tf.errors.DataLossError, match="sample 2: checksum mismatch"):
        _op_read(path, "input", [2])


def test_a_column_renamed_by_damage_is_damage_to_verify(written, tmp_path, capsys):
    # One byte of the table's "bzna_input" turned that column's checks off (an unknown track's column is
    # ignored), and verify said OK: the metadata says the file was written with a table, which holds a
    # column for each picture track.
    with BznaFile(written) as f:
        at = f.checksums.offset
    data = bytearray(written.read_bytes())
    name = data.index(b"bzna_input", at)
    data[name + 5] ^= 0x01  # bzna_hnput
    path = tmp_path / "renamed.bzna"
    path.write_bytes(bytes(data))
    with BznaFile(path) as f:
        assert list(f.checksums.tracks) == ["bzna_thumb"]
    (r,) = verify(path, decode=False).files
    assert not r.ok and [d.kind for d in r.damage] == ["index"]
    assert "the checksum table has no 'bzna_input' column" in r.damage[0].message
    assert main(["verify", str(path), "--no-decode"]) == 1
    assert "no 'bzna_input' column" in capsys.readouterr().out


def _moved_thumbnail(written, out, where):
    """`written` with the outer bzna_thumb offset of sample 0 set to `where(file)`."""
    data = bytearray(written.read_bytes())
    with BznaFile(written) as f:
        trak = f.tracks["bzna_thumb"].box
        value = where(f)
    stco = bytes(data).index(b"stco", trak.offset, trak.offset + trak.size)
    data[stco + 12 : stco + 16] = struct.pack(">I", value)  # after type, version/flags, entry_count
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize(
    "where, fragment",
    [
        (
            lambda f: f.sample_location(1)[0] + 28,  # sample 1's thumbnail: 28 bytes after sample 0's end
            lambda size: f"starts at byte {size + 28} of a {size}-byte per-image mp4",
        ),
        (
            lambda f: f.sample_location(0)[0] + 4,
            lambda size: "starts at byte 4 of the per-image mp4, in no top-level box's",
        ),
    ],
    ids=["outside the sample", "in a box header"],
)
def test_a_thumbnail_its_checksum_cannot_cover_is_refused(written, tmp_path, where, fragment):
    path = _moved_thumbnail(written, tmp_path / "moved.bzna", where)
    with BznaFile(path) as f:
        fragment = fragment(f.sample_location(0)[1])
        with pytest.raises(BznaFormatError, match=fragment) as e:
            f.sample(0)
        assert str(e.value).startswith(f"{path}, sample 0: ")
        f.check_sample(0, tracks=("bzna_input",))  # the input's checksum does not depend on it
    with pytest.raises(tf.errors.DataLossError, match=fragment) as e:
        _op_read(path, "thumb", [0])
    assert f"{path}, sample 0: " in e.value.message
    assert _op_read(path, "input", [0]) == [0]


def test_index_checksums(written, tmp_path):
    with BznaFile(written) as f:
        first_target = int(f.tracks["bzna_target"].offsets[0])
    path = _flip(written, tmp_path / "label.bzna", first_target)
    with BznaFile(path) as f:
        (problem,) = f.check_index()
        assert f"{path}: checksum mismatch of the targets" in problem
    # The source op checks the targets it reads with the index, as the Python reader does (it read them
    # unchecked: used on its own, a wrong label); the rest of the index is verify's to check.
    before = verify_checksums(False)  # the pictures' setting: the targets are checked whatever it says
    try:
        for op in (lambda: _op_read(path, "thumb", [0]), lambda: read_samples([str(path)], [0])):
            with pytest.raises(tf.errors.DataLossError) as e:
                op()
            assert (
                f"{path}, box trak[bzna_target]: checksum mismatch of the targets (stored" in e.value.message
            )
    finally:
        verify_checksums(before)
    (r,) = verify(path, decode=False).files
    assert not r.ok and r.bad_samples == [] and [d.kind for d in r.damage] == ["index"]


def test_damaged_targets_and_names_are_refused_where_they_are_read(written, tmp_path):
    # One changed byte of a target was a wrong label (or a made-up class: num_classes from it) in every
    # pipeline, and one of a name a wrong name: the index's checksums of them are compared as they are read.
    from bzna_tf import Dataset

    with BznaFile(written) as f:
        target, name = int(f.tracks["bzna_target"].offsets[3]), int(f.tracks["bzna_fname"].offsets[2])
        good_targets, good_names = f.targets.tolist(), f.filenames()
    label = _flip(written, tmp_path / "label.bzna", target)
    with BznaFile(label) as f:
        with pytest.raises(
            BznaFormatError,
            match=r"label\.bzna, box trak\[bzna_target\]: checksum mismatch of the targets .*verify",
        ):
            _ = f.targets
        with pytest.raises(BznaFormatError, match="checksum mismatch of the targets"):
            f.target(0)  # one target: checked as all are
        assert f.filenames() == good_names
    ds = ClassificationDataset(str(label))  # targets are read on first use
    for use in (lambda: ds.num_classes, lambda: ds.as_dataset(batch_size=2, shape=8, training=False)):
        with pytest.raises(BznaFormatError, match="checksum mismatch of the targets"):
            use()
    assert len(Dataset(str(label))) == len(good_targets)  # pictures only: no targets read
    named = _flip(written, tmp_path / "named.bzna", name)
    with BznaFile(named) as f:
        assert f.targets.tolist() == good_targets
        with pytest.raises(
            BznaFormatError, match=r"named\.bzna, box trak\[bzna_fname\]: checksum mismatch of the names"
        ):
            f.filenames()
        with pytest.raises(BznaFormatError, match="checksum mismatch of the names"):
            f.filename(0)
    assert main(["info", str(named)]) == 1  # its first sample's name is shown
    for ds in (Dataset(str(named)), ClassificationDataset(str(named)).labelled()):
        with pytest.raises(BznaFormatError, match="checksum mismatch of the names"):
            _ = ds.filenames
        with pytest.raises(BznaFormatError, match="checksum mismatch of the names"):
            ds.as_dataset(batch_size=2, shape=8, with_filenames=True)
        next(iter(ds.as_dataset(batch_size=2, shape=8)))  # without the names: read


def test_compact_layout_pictures_verify(tmp_path):
    from bzna_tf.convert import encode_image

    path = tmp_path / "compact.bzna"
    with BznaWriter(path) as w:
        for i, (h, w_) in enumerate([(40, 48), (300, 700)]):
            inp, thumb = encode_image(gradient(h, w_, i), preset="ultrafast", layout="compact")
            w.append(inp, thumb=thumb, target=i, filename=f"{i}.png")
    for track in ("thumb", "input"):
        assert _op_read(path, track) == [0, 1]
    report = verify(path)
    assert report.ok and report.files[0].pictures_checked == 4 and report.files[0].pictures_decoded == 3


def test_verify_finds_the_damage_and_its_list_excludes_it(flat_shards, tmp_path):
    data = tmp_path / "shards"
    data.mkdir()
    for p in flat_shards:
        shutil.copy(p, data)
    bad = {("part-1.bzna", 3), ("part-2.bzna", 0)}
    for name, i in bad:
        with BznaFile(data / name) as f:
            at = _payload_middle(f, i, "bzna_input")
        _flip(data / name, data / name, at)
    report = verify(str(data), workers=2)
    assert not report.ok and report.damaged == 2 and report.samples == sum(SHARD_SIZES)
    found = {(r.file.rsplit("/", 1)[1], i) for r in report.files for i in r.bad_samples}
    assert found == bad
    assert {d.kind for r in report.files for d in r.damage} == {"checksum"}
    assert all(r.pictures_checked == 2 * r.samples for r in report.files)
    listed = report.exclusion_list().write(tmp_path / "good.list")
    lst = SampleList.read(listed)
    assert lst.type == "CONDUIT_HDF5_EXCLUSION" and lst.num_excluded == 2
    ds = ClassificationDataset(sorted(str(p) for p in data.glob("part-*.bzna")))  # three files, as one
    with pytest.raises(tf.errors.DataLossError, match="checksum mismatch"):
        for _ in ds.as_dataset(batch_size=8, shape=16):
            pass
    seen = []
    for _, labels, names in ds.as_dataset(batch_size=8, shape=16, sample_list=listed, with_filenames=True):
        seen += [(n.decode(), int(t)) for n, t in zip(names.numpy(), labels.numpy(), strict=True)]
    expected = [
        (f"s{k}_{i:02d}.png", k)
        for k, n in enumerate(SHARD_SIZES)
        for i in range(n)
        if (f"part-{k}.bzna", i) not in bad
    ]
    assert seen == expected


def _decode_failure(original, i):
    """Sample i's input picture with its first_slice_segment_in_pic_flag cleared: FFmpeg returns nothing."""
    s = original.sample(i)
    return s.input.sample_offset + 6  # 4-byte length, 2-byte NAL header, then the slice header


@pytest.mark.every_original
def test_verify_original_tools_file_by_decoding_only(original, original_path, tmp_path, capsys):
    (r,) = verify(original_path).files
    assert r.ok and r.checksums is None and r.method == "no checksums: verified by decoding only"
    assert (r.pictures_checked, r.pictures_decoded) == (0, 12 + len(SEPARATE_THUMBS))
    assert main(["verify", str(original_path), "--no-progress"]) == 0
    assert "no checksums: verified by decoding only" in capsys.readouterr().out
    # Without checksums nor decoding nothing is verified: said, and not a success.
    report = verify(original_path, decode=False)
    assert not report.ok and not report.files[0].verified and report.damaged == 0
    assert main(["verify", str(original_path), "--no-decode"]) == 1
    out = capsys.readouterr().out
    assert "no checksums: not verified (decoding is off) (0 pictures checked, 0 decoded): NOT VERIFIED" in out
    # The total said "verified 12 samples ...: 0 damaged samples, 1 file with problems or not verified".
    total = out.splitlines()[-1]
    assert re.fullmatch(r"checked 12 samples in 1 file in .*: no damage found, 1 file NOT VERIFIED", total)
    b = bytearray(original_path.read_bytes())
    b[_decode_failure(original, 4)] = 0
    path = tmp_path / "undecodable.bzna"
    path.write_bytes(bytes(b))
    (r,) = verify(path, workers=1).files
    assert r.bad_samples == [4]
    (d,) = r.damage
    assert d.kind == "decode" and d.track == "bzna_input" and d.message.startswith(f"{path}, sample 4:")
    assert "no picture came out" in d.message


def test_verify_reads_the_targets_and_names_of_a_file_without_checksums(original, original_path, tmp_path):
    # The original tools' files have no checksum of the index: a name every reader refuses was passed.
    name = original.filenames()[2].encode()
    path = tmp_path / "bad-name.bzna"
    path.write_bytes(original_path.read_bytes().replace(name, b"\xff" + name[1:]))
    (r,) = verify(path, decode=False).files
    assert not r.ok
    (d,) = [d for d in r.damage if d.kind == "index"]  # the outer name track (the nested one: "format")
    assert "sample 2" in d.message and "filename is not valid UTF-8" in d.message
    assert main(["verify", str(path), "--no-progress"]) == 1


def test_cli_verify(written, damaged, tmp_path, capsys):
    listed = tmp_path / "exclude.list"
    assert main(["verify", str(written), str(damaged), "--exclusion-list", str(listed), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert f"{written}: 12 samples, checksums of bzna_thumb, bzna_input + decoding" in out
    assert f"checksum: {damaged}, sample 2: checksum mismatch" in out and "2 damaged samples" in out
    assert f"{listed}: CONDUIT_HDF5_EXCLUSION, leaves out 2 damaged samples, uses 22" in out
    assert SampleList.read(listed).num_included == 22
    assert main(["verify", str(damaged), "--json", "--no-decode", "--track", "bzna_thumb"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert got["file"] == str(damaged) and got["damaged_samples"] == [2]  # sample 9's thumbnail is intact
    assert got["checksums"] == "CRC-32C of bzna_input, bzna_thumb" and got["pictures_decoded"] == 0
    assert main(["verify", str(written), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["damage"] == []


def test_the_exclusion_list_names_the_files_verified_after_a_chdir(written, damaged, tmp_path, monkeypatch):
    # verify("x.bzna") of a damaged file; then the working directory moves to a folder whose x.bzna is
    # undamaged: the list must name the file verified, whose damaged samples it leaves out.
    for d, f in (("a", damaged), ("b", written)):
        (tmp_path / d).mkdir()
        shutil.copy(f, tmp_path / d / "x.bzna")
    monkeypatch.chdir(tmp_path / "a")
    report = verify("x.bzna", workers=1)
    assert report.files[0].file == "x.bzna" and report.files[0].bad_samples == [2, 9]
    monkeypatch.chdir(tmp_path / "b")
    lst = SampleList.read(report.exclusion_list().write(tmp_path / "good.list"))
    assert [os.path.join(lst.base, e.file) for e in lst.entries] == [str(tmp_path / "a" / "x.bzna")]
    assert lst.entries[0].ids == (2, 9)


def _thumb_column_damaged(written, out, i):
    """`written` with sample i's stored thumbnail checksum changed (the table's, not the picture's)."""
    with BznaFile(written) as f:
        at, n = f.checksums.offset, len(f)
    data = bytearray(written.read_bytes())
    columns = at + 8 + 16 + 47  # box header, usertype, the table's head (test_box_layout...)
    data[columns + 4 * n + 4 * i] ^= 0x01
    out.write_bytes(bytes(data))
    return out


def _verify_both_ways(monkeypatch, paths, **kw):
    """verify(paths, decode=False) in Python, then through the native reader (in chunks of 5 samples):
    both reports as JSON without their times, and the samples the native run checked in Python."""
    import bzna_tf.verify as v

    reports, rechecked = [], []
    check = v._check

    def counted(f, i, *a):
        rechecked.append((os.path.basename(f.name), i))
        return check(f, i, *a)

    monkeypatch.setattr(v, "NATIVE_CHUNK", 5)
    for least in (10**9, 0):
        monkeypatch.setattr(v, "NATIVE_MIN_SAMPLES", least)
        rechecked.clear()
        monkeypatch.setattr(v, "_check", counted)
        t = time.perf_counter()
        j = v.verify(paths, decode=False, **kw).to_json()
        assert 0 < j.pop("seconds") <= time.perf_counter() - t + 0.001  # rounded to ms
        reports.append(j)
    return reports[0], reports[1], sorted(rechecked)


@pytest.mark.parametrize("tracks", [("bzna_input", "bzna_thumb"), ("bzna_input",), ("bzna_thumb",)])
def test_verify_without_decoding_through_the_native_reader_reports_as_python(
    written, damaged, tmp_path, monkeypatch, tracks
):
    # Large files are checked by read_samples (the op as_dataset reads with), and only the samples it
    # refuses again in Python, for the words: the report must be the same, damage for damage.
    column = _thumb_column_damaged(damaged, tmp_path / "column.bzna", 5)
    moved = _moved_thumbnail(written, tmp_path / "moved.bzna", lambda f: f.sample_location(0)[0] + 4)
    paths = [str(written), str(damaged), str(column), str(moved)]
    python, native, rechecked = _verify_both_ways(monkeypatch, paths, workers=2, tracks=tracks)
    assert native == python
    bad = {os.path.basename(r["file"]): r["damaged_samples"] for r in python["files"]}
    th = "bzna_thumb" in tracks
    # Sample 2's thumbnail and 9's full-size picture changed; the full-size picture's checksum covers the
    # whole per-image mp4, the thumbnail's only its own part; 5's stored thumbnail checksum changed; 0's
    # thumbnail moved where no checksum covers it.
    assert bad == {
        "good.bzna": [],
        "bad.bzna": [2, 9] if "bzna_input" in tracks else [2],
        "column.bzna": ([2, 5, 9] if th else [2, 9]) if "bzna_input" in tracks else [2, 5],
        "moved.bzna": [0] if th else [],
    }
    # The native run checked in Python only what the reader refused (it reads the full-size pictures
    # always): the changed samples, 5 and 0 only where thumbnails are verified.
    refused = {
        "bad.bzna": [2, 9],
        "column.bzna": [2, 5, 9] if th else [2, 9],
        "moved.bzna": [0] if th else [],
    }
    assert rechecked == [(f, i) for f, ids in refused.items() for i in ids]


def test_verify_without_decoding_falls_back_to_python_where_the_reader_would_not_check(damaged, monkeypatch):
    import bzna_tf.verify as v

    monkeypatch.setattr(v, "NATIVE_MIN_SAMPLES", 0)
    with BznaFile(damaged) as bad:
        assert v._native_reader([bad], decode=False) is v._read_natively
        assert v._native_reader([bad], decode=True) is None  # decoding: through the Python reader
        # Checksums turned off in this process: the reader would take every sample.
        before = verify_checksums(False)
        try:
            assert v._native_reader([bad], decode=False) is None
            assert verify(damaged, decode=False).files[0].bad_samples == [2, 9]
        finally:
            verify_checksums(before)
        # The file at the path is not the one opened (another conversion since: another size, or other
        # index checksums): every sample is checked in Python, in the file opened.
        check, rechecked = v._check, []
        monkeypatch.setattr(v, "_check", lambda f, i, *a: rechecked.append(i) or check(f, i, *a))
        with bad.held_open():
            other = bad.identity._replace(size=bad.identity.size + 1)
            files = v._NativeFiles([os.fsencode(bad.path)], [other], [0])
            results = v._check_natively(v._read_natively, files, 0, bad, 0, 12, v.TRACKS)
        assert rechecked == list(range(12))
        assert [i for i, (damage, _, _) in enumerate(results) if damage] == [2, 9]
        assert [checked for _, checked, _ in results] == [2] * 12
    monkeypatch.setattr(v, "NATIVE_MIN_SAMPLES", 13)  # more than the file holds
    with BznaFile(damaged) as bad:
        assert v._native_reader([bad], decode=False) is None


def test_verify_through_the_native_reader_reads_the_file_on_disk_now(written, damaged, tmp_path, monkeypatch):
    # A second verify in one process, after the file was replaced by a damaged copy of the same conversion
    # with the same size and time (cp -p then mv, rsync -a): the op's kernel, kept by eager TensorFlow,
    # read the file it had opened first and reported no damage.
    import bzna_tf.verify as v

    monkeypatch.setattr(v, "NATIVE_MIN_SAMPLES", 0)
    path = tmp_path / "x.bzna"
    shutil.copy2(written, path)
    assert verify(path, decode=False).files[0].bad_samples == []
    replacement = tmp_path / "x.bzna.new"
    shutil.copy(damaged, replacement)
    then = os.stat(path)
    os.utime(replacement, ns=(then.st_atime_ns, then.st_mtime_ns))
    os.replace(replacement, path)
    assert verify(path, decode=False).files[0].bad_samples == [2, 9]


def test_verify_through_the_native_reader_trusts_no_read_during_which_verification_was_off(
    damaged, monkeypatch
):
    # Another thread turning verification off and on again while a chunk is read: those pictures were
    # read unchecked, so every sample of the chunk is checked in Python.
    import bzna_tf.verify as v

    def toggled(*args, **kwargs):
        verify_checksums(False)
        try:
            return v._read_natively(*args, **kwargs)
        finally:
            verify_checksums(True)

    before = verify_checksums(True)
    try:
        with BznaFile(damaged) as f, f.held_open():
            files = v._NativeFiles([os.fsencode(f.path)], [f.identity], [0])
            steady = v._check_natively(v._read_natively, files, 0, f, 0, 12, v.TRACKS)
            check, rechecked = v._check, []
            monkeypatch.setattr(v, "_check", lambda f, i, *a: rechecked.append(i) or check(f, i, *a))
            results = v._check_natively(toggled, files, 0, f, 0, 12, v.TRACKS)
    finally:
        verify_checksums(before)
    assert rechecked == list(range(12))
    assert results == steady and [i for i, (d, _, _) in enumerate(results) if d] == [2, 9]


def test_verify_through_the_native_reader_takes_names_that_are_not_utf8(damaged, tmp_path, monkeypatch):

    path = tmp_path / os.fsdecode(b"caf\xe9.bzna")
    shutil.copy(damaged, path)
    python, native, rechecked = _verify_both_ways(monkeypatch, [str(path)], workers=2)
    assert native == python and python["damaged_samples"] == [2, 9]
    assert rechecked == [(os.path.basename(str(path)), 2), (os.path.basename(str(path)), 9)]


def test_verify_imports_no_tensorflow_where_no_ops_were_built(damaged, tmp_path, monkeypatch):
    import bzna_tf.verify as v
    from bzna_tf._cache import OPS_LIBRARY_NAME, OPS_LIBRARY_VAR, ops_library_may_exist

    monkeypatch.setattr(v, "NATIVE_MIN_SAMPLES", 0)
    monkeypatch.delenv(OPS_LIBRARY_VAR, raising=False)
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    assert not ops_library_may_exist()
    with BznaFile(damaged) as f:
        assert v._native_reader([f], decode=False) is None  # before TensorFlow is imported
    built = tmp_path / "cache" / "ops-tf0.0-0" / OPS_LIBRARY_NAME
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    assert ops_library_may_exist()  # built for some TensorFlow: whether for this one takes TensorFlow
