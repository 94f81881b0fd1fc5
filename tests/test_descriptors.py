"""File descriptors: readers close what they open, datasets hold none, and a closed reader says so.

A ``BznaFile`` dropped unclosed is closed when collected (a finaliser, also in
a reference cycle); datasets and ``BznaShards`` read their files' indices and
keep no file open, so neither many datasets nor a dataset of many files runs
out of descriptors (``ulimit -n``); reading after ``close`` is a ValueError
naming the file; a file object the caller passed in is never closed.
"""

import gc
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

import bzna_tf.verify as bzna_verify
from bzna_tf import (
    BznaFile,
    BznaFormatError,
    BznaShards,
    BznaWriter,
    ClassificationDataset,
    Dataset,
    ImageNet,
    open_bzna,
)
from bzna_tf.verify import verify


def _open_fds(*within) -> int:
    """This process's descriptors open on the paths ``within`` (files or folders) or on files under them:
    the count moves with nothing else the process does meanwhile (the runtime's threads, an earlier test's
    reader closed by the collector, pytest's own files)."""
    roots = [os.path.realpath(p) for p in within]
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (os.listdir's own descriptor among them)
            continue
        count += any(target == r or target.startswith(r + os.sep) for r in roots)
    return count


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")


def test_dropped_readers_and_datasets_leave_no_descriptor_open(flat_shards):
    gc.collect()  # readers an earlier test left to the collector are not closed during the count
    before = _open_fds(*flat_shards)
    for _ in range(300):
        f = BznaFile(flat_shards[0])
        assert len(f) and f.filename(0)
        del f
        d = ClassificationDataset(flat_shards)
        assert d.num_classes == 3
        del d
    for _ in range(100):  # in a reference cycle: only the collector frees it, and its finaliser closes it
        f = BznaFile(flat_shards[1])
        f.cycle = f
        del f
    gc.collect()
    assert _open_fds(*flat_shards) == before


def test_a_dataset_keeps_no_file_open_yet_reads_them(flat_shards):
    gc.collect()
    before = _open_fds(*flat_shards)
    kept = [ClassificationDataset(flat_shards, split="all[1:]") for _ in range(100)]
    kept += [Dataset(flat_shards[1:]), ImageNet(flat_shards), BznaShards(flat_shards)]
    assert _open_fds(*flat_shards) == before  # 103 objects over 3 files each: no descriptor held
    d = kept[0]
    assert d.filenames[:2] == ["s0_01.png", "s0_02.png"] and d.class_names is None
    assert kept[-1].sample(7).input.width > 0 and kept[-1].filename(20) == "s2_08.png"
    assert _open_fds(*flat_shards) == before  # each read opened its file for its duration only


def test_with_closes_and_a_closed_reader_names_the_file(flat_shards):
    path = flat_shards[0]
    gc.collect()
    before = _open_fds(path)
    with BznaFile(path) as f:
        assert _open_fds(path) == before + 1 and not f.closed
        name = f.filename(1)
    assert _open_fds(path) == before and f.closed
    for read in (lambda: f.sample_bytes(0), lambda: f.filenames(), lambda: f.sample(1)):
        with pytest.raises(ValueError, match=f"^{re.escape(path)} is closed") as e:
            read()
        assert not isinstance(e.value, BznaFormatError)
    f.close()  # again: nothing

    # A file object the caller passed in stays the caller's: neither close nor collection closes it.
    with open(path, "rb") as fo:
        f = BznaFile(fo)
        assert f.filename(1) == name
        f.close()
        with pytest.raises(ValueError, match="is closed"):
            f.filename(1)  # not read through the caller's file after close
        assert not fo.closed
        BznaFile(fo)
        gc.collect()
        assert not fo.closed and fo.seek(0) == 0 and len(fo.read(8)) == 8

    with ClassificationDataset(flat_shards) as d:
        assert len(d.filenames) == 21
    with pytest.raises(ValueError, match=f"^{re.escape(flat_shards[0])} is closed"):
        _ = d.filenames
    shards = open_bzna(flat_shards)  # a BznaShards
    shards.close()
    with pytest.raises(ValueError, match="is closed"):
        shards.sample_bytes(0)


def test_a_file_that_changed_since_its_index_was_read_is_refused(flat_shards, tmp_path):
    path = tmp_path / "data.bzna"
    shutil.copy(flat_shards[0], path)
    d = Dataset(str(path))
    shutil.copy(flat_shards[1], tmp_path / "other.bzna")
    os.replace(tmp_path / "other.bzna", path)  # a conversion finishing again, under the same name
    with pytest.raises(BznaFormatError, match=f"^{re.escape(str(path))}: the file changed since"):
        _ = d.filenames  # the old index over the new bytes would name the wrong pictures
    os.remove(path)
    with pytest.raises(FileNotFoundError, match=f"^{re.escape(str(path))}: no such file any more"):
        _ = d.filenames


def _copies(flat_shards, folder, n):
    """``n`` shards of one dataset: the fixture's shards' pictures, each file with names of its own (copies
    of one file, read together, are refused)."""
    folder.mkdir()
    paths = []
    for k in range(n):
        p = folder / f"part-{k:05d}-of-{n:05d}.bzna"
        with BznaFile(flat_shards[k % len(flat_shards)]) as src, BznaWriter(p) as w:
            for i, name in enumerate(src.filenames()):
                w.append_mp4(src.sample_bytes(i), target=src.target(i), filename=f"c{k:03d}_{name}")
        paths.append(str(p))
    return paths


@pytest.mark.slow
def test_many_datasets_and_a_dataset_of_many_files_under_a_descriptor_limit(flat_shards, tmp_path):
    _copies(flat_shards, tmp_path / "shards", 300)
    code = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        from bzna_tf import BznaFile, ClassificationDataset
        from bzna_tf.verify import verify
        for _ in range(1000):
            d = ClassificationDataset({flat_shards!r})
            f = BznaFile({flat_shards[0]!r})
            assert d.num_classes == 3 and f.filename(0) == "s0_00.png"
        d = ClassificationDataset({str(tmp_path / "shards")!r})  # 300 files, more than the limit
        assert len(d) == 300 // 3 * 21 and len(d.filenames) == len(d)
        report = verify({str(tmp_path / "shards")!r}, decode=False, workers=2)
        assert report.ok and report.samples == len(d), report.files[0]
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr[-3000:]


def test_verify_holds_at_most_a_few_files_open(flat_shards, tmp_path, monkeypatch):
    paths = _copies(flat_shards, tmp_path / "shards", 40)
    seen = []
    check = bzna_verify._check

    def counting(f, i, tracks, decode):
        seen.append(_open_fds(tmp_path / "shards"))
        return check(f, i, tracks, decode)

    monkeypatch.setattr(bzna_verify, "_check", counting)
    report = verify(paths, decode=False, workers=2)
    assert report.ok and report.samples == 40 // 3 * 21 + 7
    assert 1 <= max(seen) <= 4  # the files being checked (two threads) and the next ones
    assert _open_fds(tmp_path / "shards") == 0  # none left open


@pytest.mark.slow
def test_a_pipeline_over_more_files_than_the_descriptor_limit_reads_every_sample(flat_shards, tmp_path):
    # The native reader keeps at most a quarter of `ulimit -n` files open (64 here) and reopens the
    # others when it reads them; a file replaced meanwhile is refused, not read with its old index.
    paths = _copies(flat_shards, tmp_path / "shards", 300)
    code = textwrap.dedent(
        f"""
        import os, resource, shutil
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        import tensorflow as tf
        from bzna_tf import Dataset
        paths = {paths!r}
        d = Dataset(paths)
        ds = d.as_dataset(batch_size=50, shape=8, with_filenames=True, shuffle=True, seed=3)
        names, most = [], 0
        for batch in ds:
            names += [n.decode() for n in batch[-1].numpy()]
            most = max(most, len(os.listdir("/proc/self/fd")))
        assert sorted(names) == sorted(d.filenames) and len(names) == 300 // 3 * 21, len(names)
        assert most < 200, most
        again = []
        for k, batch in enumerate(ds):
            if k == 10:  # touched under the running pipeline: the same conversion (size, index checksums)
                for p in paths:
                    os.utime(p, ns=(1, 1))
            again += [n.decode() for n in batch[-1].numpy()]
        assert sorted(again) == sorted(names)
        try:
            for k, batch in enumerate(ds):
                if k == 10:  # the files change under the running pipeline (another size: converted again)
                    for p in paths:
                        with open(p, "ab") as f:
                            f.write(b"x" * 8)
        except tf.errors.FailedPreconditionError as e:
            assert ".bzna: the file changed since its index was read" in str(e), e
        else:
            raise AssertionError("files that changed were read with their old index")
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and r.stdout.endswith("ok\n"), r.stderr[-3000:]
