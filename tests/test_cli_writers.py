"""What every writer of the command line does with its output, and the errors a new user meets.

The walkthrough's cases: ``bzna-tf convert: out/new/sub/.imgs.bzna.partial: No
such file or directory``; ``verify --exclusion-list`` failing after the whole
run with no report; ``preview`` on a file with one damaged sample ending in a
DataLossError traceback; ``-o grid.jpg`` holding PNG bytes; a quoted
``'~/tfr/tfds-*'`` never expanded.
"""

import os

import numpy as np
import pytest
from conftest import gradient
from test_convert_shards import make_folder, tfrecord
from test_on_error import DAMAGED, UNDECODABLE, bad_file  # noqa: F401 (a fixture)

from bzna_tf.cli import main
from bzna_tf.format import BznaFile

FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


@pytest.fixture()
def small(tmp_path):
    """A converted file of 6 images in 2 classes."""
    src = make_folder(tmp_path / "src", {"ant": 3, "bee": 3}, size=(16, 24))
    out = tmp_path / "small.bzna"
    assert main(["convert", "folder", str(src), str(out), *FAST]) == 0
    return out


# ----------------------------------------------------------------------------- output folders (item 6)


def test_convert_creates_the_output_folder(tmp_path, capsys):
    src = make_folder(tmp_path / "src", {"a": 2}, size=(8, 8))
    out = tmp_path / "out" / "new" / "sub" / "imgs.bzna"
    assert main(["convert", "folder", str(src), str(out), *FAST]) == 0, capsys.readouterr().err
    assert len(BznaFile(out)) == 2
    shards = tmp_path / "other" / "shards" / "train.bzna"
    assert main(["convert", "folder", str(src), str(shards), *FAST, "--num-shards", "2"]) == 0
    assert sorted(os.listdir(shards.parent)) == ["train-00000-of-00002.bzna", "train-00001-of-00002.bzna"]


def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(
    tmp_path, small, capsys, monkeypatch
):
    import bzna_tf.datasets
    import bzna_tf.verify

    (tmp_path / "blocker").write_text("a file where a folder should be")
    bad = tmp_path / "blocker" / "sub" / "out"
    # convert: before the source is read (a missing folder would give another message)
    assert main(["convert", "folder", str(tmp_path / "missing"), f"{bad}.bzna", *FAST]) == 1
    err = capsys.readouterr().err
    assert "blocker" in err and "missing" not in err, err

    def no_work(*args, **kwargs):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr(bzna_tf.verify, "verify", no_work)
    assert main(["verify", str(small), "--exclusion-list", f"{bad}.txt"]) == 1
    assert f"bzna-tf verify: {tmp_path / 'blocker'}" in capsys.readouterr().err
    monkeypatch.setattr(bzna_tf.datasets.Dataset, "to_sample_list", no_work)
    assert main(["samplelist", str(small), "-o", f"{bad}.txt"]) == 1
    assert f"bzna-tf samplelist: {tmp_path / 'blocker'}" in capsys.readouterr().err
    monkeypatch.setattr(bzna_tf.datasets.Dataset, "as_dataset", no_work)
    assert main(["preview", str(small), "-o", f"{bad}.png"]) == 1
    assert f"bzna-tf preview: {tmp_path / 'blocker'}" in capsys.readouterr().err


def test_samplelist_preview_and_verify_create_their_output_folders(tmp_path, small, capsys):
    lst = tmp_path / "lists" / "new" / "all.txt"
    assert main(["samplelist", str(small), "-o", str(lst)]) == 0 and lst.exists()
    grid = tmp_path / "previews" / "new" / "grid.png"
    assert main(["preview", str(small), "-o", str(grid), "--n", "4"]) == 0 and grid.exists()
    excl = tmp_path / "verify" / "new" / "excluded.txt"
    assert main(["verify", str(small), "--exclusion-list", str(excl), "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert excl.exists() and "6 samples" in printed and f"{excl}: CONDUIT_HDF5_EXCLUSION" in printed


def test_verify_prints_its_report_before_writing_the_exclusion_list(tmp_path, small, capsys, monkeypatch):
    from bzna_tf.format.samplelist import SampleList

    def fails(self, path, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(SampleList, "write", fails)
    assert main(["verify", str(small), "--exclusion-list", str(tmp_path / "x.txt"), "--threads", "1"]) == 1
    captured = capsys.readouterr()
    assert "6 samples" in captured.out and "Permission denied" in captured.err


# ----------------------------------------------------------------------------- preview (items 8 and 11)


def test_preview_of_a_damaged_sample_is_one_line_and_on_error_skip_leaves_it_out(tmp_path, bad_file, capsys):  # noqa: F811
    grid = tmp_path / "grid.png"
    assert main(["preview", str(bad_file), "-o", str(grid), "--first", "--n", "6"]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert (
        err.startswith(f"bzna-tf preview: {bad_file}, sample {DAMAGED}, byte offset ")
        and "--on-error skip" in err
    )
    assert not grid.exists()
    assert main(["preview", str(bad_file), "-o", str(grid), "--first", "--n", "6", "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    shown = [0, 1, 2, 4, 6, 7]  # 3 and 5 are damaged: the next samples take their places
    assert "6 samples (" + ", ".join(map(str, shown)) + ")" in captured.out
    skipped = [line for line in captured.err.splitlines() if "skipped a damaged sample" in line]
    first = f"bzna-tf preview: skipped a damaged sample: {bad_file}, sample 3: could not decode the 53-byte"
    assert skipped[0].startswith(first), skipped
    assert len(skipped) == 2 and f"{bad_file}, sample {DAMAGED}, byte offset" in skipped[1]
    assert "Traceback" not in captured.err and grid.exists()


def test_preview_skip_with_shuffle_and_too_few_good_samples(tmp_path, bad_file):  # noqa: F811
    import warnings

    from bzna_tf.previews import PreviewWarning, preview

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = preview(bad_file, 12, seed=3, on_error="skip", shape=(8, 8))
    bad = {*UNDECODABLE, DAMAGED}
    assert sorted(p.indices) == sorted(set(range(12)) - bad)
    messages = [str(w.message) for w in caught if issubclass(w.category, PreviewWarning)]
    assert sum("skipped a damaged sample" in m for m in messages) == 3
    assert "3 damaged samples left out: the preview shows 9 samples" in messages
    with pytest.raises(ValueError, match="on_error"):
        preview(bad_file, 2, on_error="ignore")


def test_preview_writes_the_format_its_suffix_names(tmp_path, small, capsys):
    for name, magic in (("g.png", b"\x89PNG"), ("g.jpg", b"\xff\xd8\xff"), ("G.JPEG", b"\xff\xd8\xff")):
        assert main(["preview", str(small), "-o", str(tmp_path / name), "--n", "2"]) == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    capsys.readouterr()
    assert main(["preview", str(small), "-o", str(tmp_path / "g.webp"), "--n", "2"]) == 1
    err = capsys.readouterr().err
    assert "Expected an image file name ending in .png, .jpg, .jpeg" in err and "g.webp" in err
    assert not (tmp_path / "g.webp").exists()


# ----------------------------------------------------------------------------- ~ in paths (item 11)


def test_tilde_is_expanded_in_quoted_patterns_and_paths(tmp_path, monkeypatch, capsys):
    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, ImageFolderSource, TFRecordSource

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "tfr").mkdir()
    images = [np.ascontiguousarray(gradient(8, 8, seed=i)) for i in range(3)]
    ppms = [b"P6\n8 8\n255\n" + im.tobytes() for im in images]
    tfrecord(
        tmp_path / "tfr" / "tfds-train.tfrecord-00000-of-00001", [{"image": p, "label": 1} for p in ppms]
    )
    # The README's snippet, the pattern quoted as documented: no shell expands the ~.
    assert main(["convert", "tfrecord", "~/tfr/tfds-*", "~/out/tfds.bzna", *FAST]) == 0, (
        capsys.readouterr().err
    )
    assert len(BznaFile(tmp_path / "out" / "tfds.bzna")) == 3
    capsys.readouterr()
    assert main(["info", "~/out/tfds.bzna"]) == 0
    assert main(["samplelist", "~/out/tfds.bzna", "-o", "~/lists/all.txt"]) == 0
    assert main(["samplelist", "--check", "~/lists/all.txt"]) == 0
    assert main(["preview", "~/out/tfds.bzna", "-o", "~/p/grid.png", "--n", "2"]) == 0
    assert main(["verify", "~/out/tfds.bzna", "--exclusion-list", "~/v/x.txt", "--threads", "1"]) == 0
    assert (tmp_path / "lists" / "all.txt").exists() and (tmp_path / "p" / "grid.png").exists()
    assert (tmp_path / "v" / "x.txt").exists()
    # The sources themselves, from Python.
    assert len(TFRecordSource("~/tfr/tfds-*")) == 3
    make_folder(tmp_path / "folder", {"a": 1}, size=(8, 8))
    assert len(ImageFolderSource("~/folder")) == 1
    write_gulp_chunk(tmp_path / "g", 0, {"v": (0, images[:2])})
    assert len(GulpSource("~/g")) == 2


# ----------------------------------------------------------------------------- write errors (issue 35 item 9)


def _full_disk_for(monkeypatch, name):
    """Makes the writer's partial file called ``name`` one on a full disk: its descriptor is /dev/full's.

    The writer creates and locks the file as usual; then every write to it
    meets the kernel's own ENOSPC, where the write happens (a buffered one at
    its flush), as on a disk that fills up. No disk can be filled for a test
    without root (a small tmpfs needs a mount), so the descriptor is swapped.
    """
    import bzna_tf.format.writer as writer

    real = writer.os.fdopen

    def fdopen(fd, *args, **kwargs):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == name:
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, fd)
            os.close(full)
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(writer.os, "fdopen", fdopen)


@pytest.mark.skipif(not os.path.exists("/dev/full") or not os.path.isdir("/proc/self/fd"), reason="Linux")
def test_a_full_disk_names_the_file_says_so_and_what_is_kept(tmp_path, capsys, monkeypatch):
    src = make_folder(tmp_path / "src", {"ant": 3, "bee": 3}, size=(48, 64))
    out = tmp_path / "out" / "train.bzna"
    argv = ["convert", "folder", str(src), str(out), *FAST, "--num-shards", "2"]
    partial = tmp_path / "out" / ".train-00001-of-00002.bzna.partial"
    with monkeypatch.context() as m:
        _full_disk_for(m, partial.name)
        assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == (
        f"bzna-tf convert: {partial}: cannot write it: the disk is full (No space left on device, errno 28); "
        f"this unfinished file is removed, and {tmp_path / 'out' / 'train-00001-of-00002.bzna'} was not "
        "written; 1 of 2 shards are finished and kept: run the same command again once it can be written "
        "(they are skipped)\n"
    )
    assert os.listdir(tmp_path / "out") == ["train-00000-of-00002.bzna"]  # no partial file, no final name
    first = os.stat(tmp_path / "out" / "train-00000-of-00002.bzna")
    assert main(argv) == 0  # room again: the finished shard is kept as it is, the other converted
    again = os.stat(tmp_path / "out" / "train-00000-of-00002.bzna")
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert sorted(os.listdir(tmp_path / "out")) == ["train-00000-of-00002.bzna", "train-00001-of-00002.bzna"]


def test_a_file_size_limit_names_the_file_and_says_so(tmp_path):
    """A real EFBIG from the kernel: the file size limit (ulimit -f) of a child process, SIGXFSZ ignored."""
    import subprocess
    import sys

    resource = pytest.importorskip("resource", reason="POSIX only")
    if not hasattr(resource, "RLIMIT_FSIZE"):
        pytest.skip("no RLIMIT_FSIZE here")
    src = make_folder(tmp_path / "src", {"ant": 4}, size=(48, 64))
    out = tmp_path / "big.bzna"
    child = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "from bzna_tf.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", child, "convert", "folder", str(src), str(out), *FAST],
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        capture_output=True,
        text=True,
        timeout=120,
    )
    partial = tmp_path / ".big.bzna.partial"
    assert r.returncode == 1 and r.stderr == (
        f"bzna-tf convert: {partial}: cannot write it: the file is larger than the file system or the "
        "file size limit (ulimit -f) allows (File too large, errno 27); this unfinished file is "
        f"removed, and {out} was not written; run the same command again once it can be written\n"
    ), r.stderr
    assert os.listdir(tmp_path) == ["src"]


def test_a_read_only_file_system_is_not_reported_as_a_permission(tmp_path, capsys, monkeypatch):
    """EROFS: the folder's file system is mounted read-only (os.statvfs's ST_RDONLY).

    Mounting one needs root, so the two answers of the system are given here:
    os.access says the folder cannot be written, os.statvfs that its file
    system is read-only (for ``mnt``; ``locked``'s is this one, writable); the
    rest is the command as it runs.
    """
    import bzna_tf.format.atomic as atomic

    folder, locked = tmp_path / "mnt", tmp_path / "locked"
    folder.mkdir()
    locked.mkdir()
    real_access, real_statvfs = os.access, os.statvfs
    denied = (str(folder), str(locked))
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: p not in denied and real_access(p, mode))

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(atomic.os, "statvfs", lambda p: ReadOnly() if p == str(folder) else real_statvfs(p))
    src = make_folder(tmp_path / "src", {"ant": 2}, size=(8, 8))
    assert main(["convert", "folder", str(src), str(folder / "x.bzna"), *FAST]) == 1
    assert capsys.readouterr().err == (
        f"bzna-tf convert: {folder}: cannot write in this folder: the file system is read-only (Read-only "
        "file system, errno 30)\n"
    )
    assert main(["convert", "folder", str(src), str(locked / "x.bzna"), *FAST]) == 1
    assert capsys.readouterr().err == (
        f"bzna-tf convert: {locked}: cannot write in this folder: permission denied (Permission denied, "
        "errno 13)\n"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a folder without write permission")
def test_a_folder_without_write_permission_says_permission_denied(tmp_path, capsys):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        src = make_folder(tmp_path / "src", {"ant": 2}, size=(8, 8))
        assert main(["convert", "folder", str(src), str(folder / "x.bzna"), *FAST]) == 1
        assert capsys.readouterr().err == (
            f"bzna-tf convert: {folder}: cannot write in this folder: permission denied (Permission denied, "
            "errno 13)\n"
        )
    finally:
        folder.chmod(0o755)


def test_json_output_is_an_object_also_when_no_file_is_found(tmp_path, capsys):
    # info --json and verify --json printed nothing on stdout for a pattern that matched nothing.
    import json

    pattern = str(tmp_path / "none-*.bzna")
    for command in ("info", "verify"):
        assert main([command, "--json", pattern]) == 1
        out = capsys.readouterr().out
        assert json.loads(out) == {"file": pattern, "error": f"no file matches the pattern {pattern!r}"}
