"""Write -> read round trips with real libx265 pictures, and the writer's guarantees."""

import dataclasses
import errno
import os
import struct
from unittest import mock

import numpy as np
import pytest

from bzna_tf.format import BznaFile, BznaWriter, HvcC, Picture, open_bzna, reader, split_nals
from bzna_tf.format.hevc import to_annexb
from bzna_tf.format.sample import build_image_mp4, outer_thumb_entry
from bzna_tf.format.writer import FTYP, build_moov


def _write(path, pictures, targets, names, **kw):
    with BznaWriter(path, **kw) as w:
        for (inp, th), t, n in zip(pictures, targets, names, strict=True):
            w.append(inp, thumb=th, target=t, filename=n)
    return path


def _check(f, pictures, targets, names):
    assert len(f) == len(pictures)
    assert f.num_labelled == sum(t is not None for t in targets)
    assert f.targets.tolist() == [-1 if t is None else t for t in targets]
    assert f.filenames() == names
    for i, (inp, th) in enumerate(pictures):
        s = f.sample(i)
        assert s.input.sample == inp.sample
        assert s.input.size == inp.size and s.input.coded_size == inp.coded_size
        assert s.input.hvcc == (inp.hvcc if isinstance(inp.hvcc, HvcC) else HvcC.from_bytes(inp.hvcc))
        exp_th = th or inp
        assert s.thumb.sample == exp_th.sample
        assert s.thumb.size == exp_th.size and s.thumb.coded_size == exp_th.coded_size
        assert s.has_separate_thumb == (th is not None)
        # The original tools' muxer's layout.
        assert s.input.children == ["hvcC", "fiel", "pasp", "clap", "btrt"]
        c = s.input.clap
        assert (c.width_n, c.height_n) == inp.size
        assert (c.horiz_off_n, c.horiz_off_d) == (inp.size[0] - inp.coded_size[0], 2)
        assert s.target == targets[i] and s.filename == names[i]
        assert f.thumb_location(i) == (s.thumb.sample_offset, len(exp_th.sample))


def test_round_trip(pictures, tmp_path):
    targets, names = [7, 0, None], ["a.jpg", "b.JPEG", "ünï.png"]
    path = _write(tmp_path / "x.bzna", pictures, targets, names)
    with BznaFile(path) as f:
        _check(f, pictures, targets, names)
        assert not any(t.uses_co64 for t in f.tracks.values())
        # uuid: the metadata (saying a checksum table follows), then the checksums
        assert [b[0] for b in f.top_level] == ["ftyp", "mdat", "moov", "uuid", "uuid"]
        assert f.top_level[1][1:3] == (24, 16)
        assert f.tracks["bzna_input"].offset(0) == 40
    # Opening reads the headers (a uuid box's usertype and the checksum table's fixed fields with its
    # header), moov, then the metadata: one read each (each one a request on gs://).
    reads = []
    real = reader.Source.read
    with mock.patch.object(
        reader.Source, "read", lambda src, off, size, **kw: reads.append(size) or real(src, off, size, **kw)
    ):
        with BznaFile(path, read_metadata=True) as f:
            assert f.identity is not None and f.class_names is None
    top = f.top_level
    assert len(reads) == 1 + (len(top) - 1) + 1 + 1, (
        reads
    )  # the first bytes (ftyp), the other headers, moov, metadata
    # Pictures carry the parameter sets of the encoder; the file gives them back for decoding.
    inp = pictures[0][0]
    with BznaFile(path) as f:
        assert f.sample(0).input.annexb() == to_annexb(inp.sample, inp.hvcc)


def test_round_trip_from_file_object(pictures, tmp_path):
    path = _write(tmp_path / "x.bzna", pictures[:1], [3], ["a"])
    with open(path, "rb") as fo, BznaFile(fo) as f:
        _check(f, pictures[:1], [3], ["a"])
        assert f.name == str(path)


def test_co64_forced(pictures, tmp_path):
    targets, names = [1, 2, 3], ["a", "b", "c"]
    path = _write(tmp_path / "x.bzna", pictures, targets, names, force_co64=True)
    with BznaFile(path) as f:
        assert all(t.uses_co64 for t in f.tracks.values())
        _check(f, pictures, targets, names)


def test_co64_past_4gib(pictures, tmp_path):
    """A sample stored past 4 GiB: the moov switches to co64 by itself and reads back.

    The file is sparse (the gap in mdat is a hole), so it costs no disk.
    """
    inp, th = pictures[1]
    built = build_image_mp4(inp, th, 5, "far.jpg")
    path = tmp_path / "far.bzna"
    far = (1 << 32) + 1234
    with open(path, "wb") as fo:
        fo.write(FTYP + struct.pack(">I4sQ", 1, b"mdat", 0))
        fo.seek(far)
        fo.write(built.data)
        tg = fo.tell()
        fo.write(struct.pack("<q", 5))
        fn = fo.tell()
        fo.write(b"far.jpg\0")
        end = fo.tell()
        fo.write(
            build_moov(
                input_offsets=np.array([far]),
                input_sizes=np.array([len(built.data)]),
                num_targets=1,
                targets_offset=tg,
                name_sizes=np.array([8]),
                names_offset=fn,
                thumb_offsets=np.array([far + built.thumb_offset]),
                thumb_sizes=np.array([built.thumb_size]),
                thumb_entry=outer_thumb_entry(built.thumb_entry),
            )
        )
        fo.seek(len(FTYP) + 8)
        fo.write(struct.pack(">Q", end - len(FTYP)))
    with BznaFile(path) as f:
        # Every track points past 4 GiB (targets and names follow the sample).
        assert all(t.uses_co64 for t in f.tracks.values())
        assert f.tracks["bzna_input"].offsets.tolist() == [far]
        _check(f, [(inp, th)], [5], ["far.jpg"])
        assert f.sample_location(0) == (far, len(built.data))


def test_unlabelled_must_come_last(pictures, tmp_path):
    with BznaWriter(tmp_path / "x.bzna") as w:
        w.append(pictures[0][0], target=1, filename="a")
        w.append(pictures[0][0], filename="b")
        with pytest.raises(ValueError, match="labelled samples must all come before"):
            w.append(pictures[0][0], target=2, filename="c")
    with BznaFile(tmp_path / "x.bzna") as f:
        assert f.targets.tolist() == [1, -1]


@pytest.mark.parametrize("name", ["", "/a.jpg", "a//b.jpg", "a/../b.jpg", "a\0b"])
def test_bad_filenames(pictures, tmp_path, name):
    with BznaWriter(tmp_path / "x.bzna") as w:
        with pytest.raises(ValueError, match="base name or a relative path"):
            w.append(pictures[0][0], filename=name)
        w.append(pictures[0][0], filename="ok")
        w.append(pictures[0][0], filename="cat/ok.jpg")  # a path relative to a source folder


def test_bad_targets(pictures, tmp_path):
    with BznaWriter(tmp_path / "x.bzna") as w:
        with pytest.raises(TypeError, match="Received: target=1.5"):
            w.append(pictures[0][0], target=1.5, filename="a")
        with pytest.raises(ValueError, match="int64"):
            w.append(pictures[0][0], target=1 << 63, filename="a")
        w.append(pictures[0][0], target=np.int64(4), filename="a")
    with BznaFile(tmp_path / "x.bzna") as f:
        assert f.target(0) == 4


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


def test_exception_leaves_no_file(pictures, tmp_path):
    path = tmp_path / "x.bzna"
    with pytest.raises(RuntimeError):
        with BznaWriter(path) as w:
            w.append(pictures[0][0], target=1, filename="a")
            raise RuntimeError("boom")
    assert _leftovers(tmp_path) == []


def test_interrupt_leaves_no_file(pictures, tmp_path):
    path = tmp_path / "x.bzna"
    with pytest.raises(KeyboardInterrupt):
        with BznaWriter(path) as w:
            w.append(pictures[0][0], target=1, filename="a")
            raise KeyboardInterrupt
    assert _leftovers(tmp_path) == []


def test_partial_file_is_not_at_the_final_name_until_close(pictures, tmp_path):
    path = tmp_path / "x.bzna"
    w = BznaWriter(path)
    w.append(pictures[0][0], target=1, filename="a")
    assert not path.exists()
    assert len(_leftovers(tmp_path)) == 1 and _leftovers(tmp_path)[0].endswith(".partial")
    w.close()
    assert _leftovers(tmp_path) == ["x.bzna"]


def test_dropped_writer_removes_its_partial_file(pictures, tmp_path):
    w = BznaWriter(tmp_path / "x.bzna")
    w.append(pictures[0][0], target=1, filename="a")
    del w
    assert _leftovers(tmp_path) == []


# Where a Ctrl-C can land while the writer opens its partial file: a given name (a conversion's) is
# locked, then truncated (it may be a killed conversion's), then wrapped; a random name only wrapped.
@pytest.mark.parametrize(
    "where, partial", [("fdopen", False), ("fdopen", True), ("ftruncate", True)], ids=lambda v: str(v)
)
def test_ctrl_c_while_the_writer_opens_its_partial_file_leaves_nothing(tmp_path, monkeypatch, where, partial):
    # What a conversion interrupted just as it starts its next shard met: the partial file created, the
    # writer not yet holding it (the cleanup registered only after fdopen) left it behind.
    import bzna_tf.format.writer as writer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(writer.os, where, interrupted)
    given = {"partial": tmp_path / ".x.bzna.partial"} if partial else {}
    with pytest.raises(KeyboardInterrupt):
        BznaWriter(tmp_path / "x.bzna", **given)
    monkeypatch.undo()
    assert _leftovers(tmp_path) == []


def test_a_partial_file_another_process_writes_is_left_alone(tmp_path):
    fcntl = pytest.importorskip("fcntl")
    tmp = tmp_path / ".x.bzna.partial"
    with open(tmp, "wb") as other:
        other.write(b"theirs")
        other.flush()
        fcntl.flock(other, fcntl.LOCK_EX)  # flock locks belong to the open file: this one blocks the writer
        with pytest.raises(FileExistsError, match="another live process"):
            BznaWriter(tmp_path / "x.bzna", partial=tmp)
        assert tmp.read_bytes() == b"theirs"


@pytest.mark.skipif(not hasattr(os, "symlink") or not hasattr(os, "mkfifo"), reason="POSIX links, FIFOs")
@pytest.mark.parametrize("kind", ["link", "dangling link", "fifo"])
def test_a_link_or_fifo_at_the_partial_name_is_removed_never_followed(pictures, tmp_path, kind):
    # A symbolic link at .x.bzna.partial (stale, or put in a shared output folder by someone else) was
    # followed: its target truncated and overwritten with the file, anywhere the user can write, and the
    # link renamed to the final name. A dangling link created its target; a FIFO blocked the open.
    import signal

    final, tmp, target = tmp_path / "x.bzna", tmp_path / ".x.bzna.partial", tmp_path / "notes.txt"
    if kind == "fifo":
        os.mkfifo(tmp)
    else:
        if kind == "link":
            target.write_text("important text\n")
        os.symlink(target, tmp)

    def hung(*_):
        raise TimeoutError("the writer blocked opening its partial file")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # a hang fails the test instead of blocking it
    try:
        w = BznaWriter(final, partial=tmp)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not tmp.is_symlink() and tmp.is_file()
    w.append(pictures[0][0], target=1, filename="a")
    w.close()
    assert not final.is_symlink()
    with BznaFile(final) as f:
        assert len(f) == 1
    if kind == "link":
        assert target.read_text() == "important text\n"
    assert _leftovers(tmp_path) == (["notes.txt", "x.bzna"] if kind == "link" else ["x.bzna"])


def test_a_folder_at_the_partial_name_is_an_error_naming_it(tmp_path):
    tmp = tmp_path / ".x.bzna.partial"
    tmp.mkdir()
    (tmp / "kept").write_bytes(b"")
    with pytest.raises(OSError) as e:
        BznaWriter(tmp_path / "x.bzna", partial=tmp)
    assert e.value.filename == str(tmp) and "cannot create it" in e.value.strerror
    assert (tmp / "kept").exists()


def test_a_partial_file_renamed_away_while_it_is_claimed_is_not_truncated(pictures, tmp_path, monkeypatch):
    # Another writer of the same shard finishes (renames its partial file to the final name) between
    # this one's open of the partial name and its lock: the file locked is then the finished shard,
    # which a truncate would empty under its final name.
    fcntl = pytest.importorskip("fcntl")
    from bzna_tf.format import writer

    final, tmp = tmp_path / "x.bzna", tmp_path / ".x.bzna.partial"
    tmp.write_bytes(b"finished by the other process")
    real = fcntl.flock

    def the_other_finishes_first(fd, op, done=[]):  # noqa: B006 (once)
        if not done:
            done.append(os.replace(tmp, final))
        return real(fd, op)

    monkeypatch.setattr(writer.fcntl, "flock", the_other_finishes_first)
    w = BznaWriter(final, partial=tmp)
    monkeypatch.undo()
    assert final.read_bytes() == b"finished by the other process"
    w.append(pictures[0][0], target=1, filename="a")
    w.close()  # its own partial file, then the final name (the same bytes a real rerun would write)
    with BznaFile(final) as f:
        assert len(f) == 1 and not tmp.exists()


def test_a_finished_writer_keeps_its_lock_until_the_rename(pictures, tmp_path, monkeypatch):
    fcntl = pytest.importorskip("fcntl")
    from bzna_tf.format import writer

    tmp = tmp_path / ".x.bzna.partial"
    w = BznaWriter(tmp_path / "x.bzna", partial=tmp)
    w.append(pictures[0][0], target=1, filename="a")
    real = os.replace
    locked = []

    def replace(src, dst):
        with open(src, "rb") as probe:  # another process's claim, at the moment of the rename
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked.append(False)
            except BlockingIOError:
                locked.append(True)
        return real(src, dst)

    monkeypatch.setattr(writer.os, "replace", replace)
    w.close()
    assert locked == [True]


@pytest.mark.parametrize("hard_links", [True, False], ids=["hard-links", "no-hard-links"])
def test_replace_false_keeps_a_file_that_appeared_while_writing(pictures, tmp_path, monkeypatch, hard_links):
    from bzna_tf.format import writer

    if not hard_links:  # a file system without hard links (FAT, some network file systems)

        def no_link(src, dst):
            raise PermissionError(errno.EPERM, "Operation not permitted", src)

        monkeypatch.setattr(writer.os, "link", no_link)
    path = tmp_path / "x.bzna"
    w = BznaWriter(path, replace=False)
    w.append(pictures[0][0], target=1, filename="a")
    path.write_bytes(b"another process's file")
    with pytest.raises(FileExistsError, match=r"x.bzna appeared while this file was being written .* not "
                       r"replaced, and the file written here is removed"):  # fmt: skip
        w.close()
    assert path.read_bytes() == b"another process's file" and _leftovers(tmp_path) == ["x.bzna"]
    # With nothing there, the file is put in place, the partial name gone (hard link, then unlink).
    w = BznaWriter(tmp_path / "y.bzna", replace=False)
    w.append(pictures[0][0], target=1, filename="a")
    w.close()
    with BznaFile(tmp_path / "y.bzna") as f:
        assert len(f) == 1
    assert _leftovers(tmp_path) == ["x.bzna", "y.bzna"]
    # The default replaces what is there.
    w = BznaWriter(path)
    w.append(pictures[0][0], target=1, filename="a")
    w.close()
    with BznaFile(path) as f:
        assert len(f) == 1


def test_a_partial_name_left_linked_to_a_finished_file_is_never_truncated(pictures, tmp_path):
    # replace=False links the finished file into place, then removes the partial name: a process killed
    # between the two leaves both names on one file, and the next claim of the name must not truncate it.
    final = tmp_path / "x.bzna"
    w = BznaWriter(final, partial=tmp_path / ".x.bzna.partial", replace=False)
    w.append(pictures[0][0], target=1, filename="a")
    w.close()
    os.link(final, tmp_path / ".x.bzna.partial")  # as the killed process left it
    before = final.read_bytes()
    again = BznaWriter(tmp_path / "x.bzna", partial=tmp_path / ".x.bzna.partial")
    assert final.read_bytes() == before and os.stat(final).st_nlink == 1
    again.abort()
    assert final.read_bytes() == before and _leftovers(tmp_path) == ["x.bzna"]


def test_existing_file_survives_a_failed_rewrite(pictures, tmp_path):
    path = _write(tmp_path / "x.bzna", pictures[:1], [1], ["a"])
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        with BznaWriter(path) as w:
            w.append(pictures[1][0], target=2, filename="b")
            raise RuntimeError
    assert path.read_bytes() == before


def test_empty_writer_refuses(tmp_path):
    with pytest.raises(ValueError, match="no sample"):
        with BznaWriter(tmp_path / "x.bzna"):
            pass
    assert _leftovers(tmp_path) == []


def test_picture_validation(pictures):
    inp = pictures[0][0]
    with pytest.raises(ValueError, match="Received: size=\\(600, 10\\)"):
        Picture(inp.sample, inp.hvcc, (600, 10), (512, 512))
    with pytest.raises(ValueError, match="non-empty"):
        Picture(b"", inp.hvcc, (10, 10), (512, 512))
    # A picture no bzna_tf decoder reads (each refused it at read time only, after the file was written).
    for changes, received in (
        ({"bit_depth_luma": 10, "bit_depth_chroma": 10}, "4:2:0, 10-bit luma and 10-bit chroma"),
        ({"chroma_format": 3}, "4:4:4, 8-bit luma"),
        ({"chroma_format": 0}, r"4:0:0 \(monochrome\)"),
    ):
        other = dataclasses.replace(inp.hvcc, **changes)
        for hvcc in (other, other.to_bytes()):
            with pytest.raises(ValueError, match=rf"expected an 8-bit 4:2:0 H.265 picture.*{received}"):
                Picture(inp.sample, hvcc, inp.size, inp.coded_size)
    assert Picture(inp.sample, inp.hvcc.to_bytes(), inp.size, inp.coded_size).coded_size == inp.coded_size


def test_encoded_pictures_follow_benzina_sizes(pictures):
    (small, small_th), (wide, wide_th), (tall, tall_th) = pictures
    assert small.size == (128, 96) and small.coded_size == (512, 512) and small_th is None
    assert wide.size == (700, 300) and wide.coded_size == (1024, 512)
    assert wide_th.size == (512, 219) and wide_th.coded_size == (512, 512)  # int(300 * 512/700)
    assert tall.size == (200, 620) and tall.coded_size == (512, 1024)
    assert tall_th.size == (165, 512)  # int(200 * 512/620)
    for p in (small, wide, tall, wide_th, tall_th):
        nals = split_nals(p.sample)
        assert nals and all((n[0] >> 1) & 0x3F < 32 for n in nals)  # slices only
        assert [a.nal_unit_type for a in p.hvcc.arrays][:3] == [32, 33, 34]
        assert p.hvcc.profile_idc == 1 and p.hvcc.chroma_format == 1


def test_append_mp4_copies_samples(pictures, tmp_path):
    a = _write(tmp_path / "a.bzna", pictures, [1, 2, None], ["a", "b", "c"])
    order = [1, 0, 2]
    with BznaFile(a) as f, BznaWriter(tmp_path / "b.bzna") as w:
        for i in order:
            t = f.target(i)
            w.append_mp4(f.sample_bytes(i), target=None if t < 0 else t, filename=f.filename(i))
        originals = [f.sample_bytes(i) for i in order]
    with open_bzna(tmp_path / "b.bzna") as g:
        assert g.targets.tolist() == [2, 1, -1]
        assert g.filenames() == ["b", "a", "c"]
        assert [g.sample_bytes(i) for i in range(3)] == originals
        _check(g, [pictures[i] for i in order], [2, 1, None], ["b", "a", "c"])


def test_sample_offsets_with_chunks_that_hold_no_sample():
    # stsc may give a chunk no sample (a fuzz finding: the reader raised IndexError where the C++ reader
    # reads the file).
    from bzna_tf.format.tracks import _sample_offsets

    def offsets(chunks, spc, sizes):
        return _sample_offsets(np.array(chunks), np.array(spc), np.array(sizes, np.int64)).tolist()

    assert offsets([100, 200, 300], [2, 0, 1], [5, 7, 9]) == [100, 105, 300]
    assert offsets([100, 200], [0, 2], [5, 7]) == [200, 205]
    assert offsets([100, 200], [2, 0], [5, 7]) == [100, 105]
    assert offsets([100], [0], []) == []
