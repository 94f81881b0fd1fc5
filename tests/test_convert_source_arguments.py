"""The file arguments of the record sources (TFRecord, WebDataset, Parquet, GulpIO): what a name or pattern
reads, and the sets of files refused because they would store images twice or mix two splits."""

import glob
import os
import tarfile

import pytest
from _sources_data import add_member, wds_samples, write_shards
from test_convert_labels import records

from bzna_tf.cli import main
from bzna_tf.convert import SourceError, TFRecordSource, WebDatasetSource
from bzna_tf.convert.sources.base import expand_patterns


def test_a_name_with_glob_characters_is_the_file_it_names(tmp_path):
    """A name was read as a pattern where that file exists: 'part[1].tfrecord' converted part1.tfrecord."""
    literal = records(tmp_path / "part[1].tfrecord", [[1], [2]])
    src = TFRecordSource(str(literal), label_offset=0)
    assert src.paths == [str(literal)] and [it.target for it in src] == [1, 2]
    # The same argument read as a pattern would match another file: which is meant cannot be told.
    records(tmp_path / "part1.tfrecord", [[3]])
    with pytest.raises(SourceError) as e:
        TFRecordSource(str(literal), label_offset=0)
    escaped = glob.escape(str(literal))
    assert str(e.value) == (
        f"{str(literal)!r} names an existing TFRecord file, and read as a glob pattern it matches "
        f"{str(tmp_path / 'part1.tfrecord')!r} instead: which is meant cannot be told. Name that file alone "
        f"with its glob characters escaped ({escaped!r}), or the files the pattern matches by their own names"
    )
    # Each way out reads what it says.
    assert [it.target for it in TFRecordSource(escaped, label_offset=0)] == [1, 2]
    assert [it.target for it in TFRecordSource(str(tmp_path / "part1.tfrecord"), label_offset=0)] == [3]
    # A name that, as a pattern, matches only itself is that file; a pattern that names no file still globs.
    star = tmp_path / "star"
    star.mkdir()
    (star / "a*.tar").write_bytes(b"x")
    assert expand_patterns(str(star / "a*.tar"), "tar shard") == [str(star / "a*.tar")]
    (star / "ab.tar").write_bytes(b"y")
    with pytest.raises(SourceError, match=r"names an existing tar shard, and read as a glob pattern it"):
        expand_patterns(str(star / "a*.tar"), "tar shard")
    assert expand_patterns(str(star / "a[b].tar"), "tar shard") == [str(star / "ab.tar")]


def test_a_pattern_over_files_of_two_splits_is_refused(tmp_path, capsys):
    """'wds/mix/*.tar' over imagenet-train-*.tar and imagenet-val-*.tar converted both as one set."""
    samples = wds_samples(6)
    mix = tmp_path / "mix"
    write_shards(mix, samples[:4], per_shard=2, stem="imagenet-train")
    with tarfile.open(mix / "imagenet-val-000000.tar", "w") as tf:  # keys of its own
        for i in (4, 5):
            for ext, data in samples[i].items():
                add_member(tf, f"val{i}.{ext}", data)
    with pytest.raises(SourceError) as e:
        WebDatasetSource(str(mix / "*.tar"))
    assert str(e.value) == (
        f"{str(mix / '*.tar')!r} matches files of different splits, such as "
        f"{mix / 'imagenet-train-000000.tar'} (train) and {mix / 'imagenet-val-000000.tar'} (val): one "
        "pattern, one split (converting them together would mix, say, training and validation images). Give "
        "a narrower pattern per split, or name the files to convert explicitly"
    )
    assert main(["convert", "webdataset", str(mix / "*.tar"), str(tmp_path / "x.bzna"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "matches files of different splits" in err and "Traceback" not in err
    # A pattern per split, or the files by name: taken.
    assert len(WebDatasetSource(str(mix / "imagenet-train-*.tar"))) == 4
    assert len(WebDatasetSource([str(mix / "imagenet-train-*.tar"), str(mix / "imagenet-val-*.tar")])) == 6

    def names(*paths):
        for p in paths:
            (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / p).write_bytes(b"")  # empty: no two are compared as copies

    # Words glued to digits count (COCO's train2017, val2017); words inside other words do not.
    names("coco/train2017-0.tar", "coco/val2017-0.tar")
    with pytest.raises(SourceError, match=r"coco/train2017-0.tar \(train\) and .*coco/val2017-0.tar \(val\)"):
        expand_patterns(str(tmp_path / "coco" / "*.tar"), "tar shard")
    names("words/contest-0.tar", "words/devices-1.tar", "words/trainer-2.tar", "words/validated-3.tar")
    assert len(expand_patterns(str(tmp_path / "words" / "*.tar"), "tar shard")) == 4
    # A split word common to every file (a folder's name) is one set; so are files without any.
    names("test-runs/train-0.tar", "test-runs/train-1.tar", "test-runs/extra-2.tar")
    assert len(expand_patterns(str(tmp_path / "test-runs" / "*.tar"), "tar shard")) == 3
    # Splits told apart by their folders.
    names("split/train/0.tar", "split/test/0.tar")
    with pytest.raises(SourceError, match=r"split/test/0.tar \(test\) and .*split/train/0.tar \(train\)"):
        expand_patterns(str(tmp_path / "split" / "*" / "0.tar"), "tar shard")


def test_a_copied_file_is_refused_naming_both(tmp_path):
    """A copied tar shard or TFRecord file (another inode, the same bytes) was converted twice."""
    shards = write_shards(tmp_path / "wds", wds_samples(4), per_shard=4)
    copy = tmp_path / "wds" / "train-000001.tar"
    copy.write_bytes(shards[0].read_bytes())
    with pytest.raises(SourceError) as e:
        WebDatasetSource(str(tmp_path / "wds" / "*.tar"))
    size = os.path.getsize(copy)
    assert str(e.value) == (
        f"{copy}: the tar shard holds the same {size:,} bytes ({size / 1024:.1f} KiB) as {shards[0]}: a copy "
        "of one file, whose images would be stored twice. Leave one of them out (to read its images twice on "
        "purpose, oversampling them, convert the file once and select its samples twice when reading: "
        "Dataset.select)"
    )
    rec = records(tmp_path / "a.tfrecord", [[1], [2]])
    (tmp_path / "b.tfrecord").write_bytes(rec.read_bytes())
    with pytest.raises(SourceError, match=r"b.tfrecord: the TFRecord file holds the same .* as .*a.tfrecord"):
        TFRecordSource(str(tmp_path / "*.tfrecord"), label_offset=0)
    # Files of one size but other bytes are not copies: tar shards of same-size images, files whose first
    # 64 KiB are the same.
    two = write_shards(tmp_path / "same-size", wds_samples(4), per_shard=2)
    assert os.path.getsize(two[0]) == os.path.getsize(two[1])
    assert len(WebDatasetSource(str(tmp_path / "same-size" / "*.tar"))) == 4
    head = os.urandom(1 << 16)
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "1.bin").write_bytes(head + b"1" * 1000)
    (tmp_path / "h" / "2.bin").write_bytes(head + b"2" * 1000)
    assert len(expand_patterns(str(tmp_path / "h" / "*.bin"), "file")) == 2
    (tmp_path / "h" / "3.bin").write_bytes(head + b"2" * 1000)
    with pytest.raises(SourceError, match=r"3.bin: the file holds the same .* as .*2.bin"):
        expand_patterns(str(tmp_path / "h" / "*.bin"), "file")
    # Empty files and files of zeros (an empty tar shard) store nothing: not refused.
    (tmp_path / "z").mkdir()
    for name in ("0.tar", "1.tar"):
        (tmp_path / "z" / name).write_bytes(bytes(10240))
    for name in ("2.tar", "3.tar"):
        (tmp_path / "z" / name).write_bytes(b"")
    assert len(expand_patterns(str(tmp_path / "z" / "*.tar"), "tar shard")) == 4


def test_empty_compressed_tfrecords_and_zero_row_parquet_files_are_not_copies(tmp_path):
    """Empty GZIP/ZLIB TFRecord shards (always the same 20 or 8 bytes) and zero-row Parquet files of one
    schema were refused as copies of each other, though they hold no image."""
    import tensorflow as tf

    for kind, size in (("GZIP", 20), ("ZLIB", 8)):
        folder = tmp_path / kind
        folder.mkdir()
        for n in range(2):
            tf.io.TFRecordWriter(str(folder / f"{n}.gz.tfrecord"), options=kind).close()
            assert os.path.getsize(folder / f"{n}.gz.tfrecord") == size
        assert len(expand_patterns(str(folder / "*.gz.tfrecord"), "TFRecord file")) == 2
        # A compressed shard that holds a record is still refused when copied.
        with tf.io.TFRecordWriter(str(folder / "2.gz.tfrecord"), options=kind) as w:
            w.write(b"a record")
        (folder / "3.gz.tfrecord").write_bytes((folder / "2.gz.tfrecord").read_bytes())
        with pytest.raises(SourceError, match=r"3.gz.tfrecord: the TFRecord file holds the same .* as"):
            expand_patterns(str(folder / "*.gz.tfrecord"), "TFRecord file")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "pq").mkdir()
    empty = pa.table({"image": pa.array([], pa.binary()), "label": pa.array([], pa.int64())})
    for n in range(2):
        pq.write_table(empty, tmp_path / "pq" / f"{n}.parquet")
    assert (tmp_path / "pq" / "0.parquet").read_bytes() == (tmp_path / "pq" / "1.parquet").read_bytes()
    assert len(expand_patterns(str(tmp_path / "pq" / "*.parquet"), "Parquet file")) == 2
    one = pa.table({"image": pa.array([b"x"], pa.binary()), "label": pa.array([0], pa.int64())})
    for n in (2, 3):
        pq.write_table(one, tmp_path / "pq" / f"{n}.parquet")
    with pytest.raises(SourceError, match=r"3.parquet: the Parquet file holds the same .* as .*2.parquet"):
        expand_patterns(str(tmp_path / "pq" / "*.parquet"), "Parquet file")


def test_files_of_one_size_are_told_apart_by_their_first_4_kib(tmp_path, monkeypatch):
    """Tar shards are padded to 10,240 bytes, so most of them share a size: each was read 64 KiB deep."""
    from bzna_tf.convert.sources import base

    shards = write_shards(tmp_path / "wds", wds_samples(6), per_shard=2)
    assert len({os.path.getsize(s) for s in shards}) == 1
    limits = []
    digest = base._digest
    monkeypatch.setattr(base, "_digest", lambda path, limit=None: limits.append(limit) or digest(path, limit))
    assert len(expand_patterns(str(tmp_path / "wds" / "*.tar"), "tar shard")) == 3
    assert limits == [4096] * 3


def test_a_pattern_leaves_out_bzna_files_and_partial_files_a_name_given_is_kept(tmp_path, capsys):
    """'imagenet/train-*' beside the conversion's own train-0000k-of-00004.bzna matched them too: a
    second set of shards, refused, so the documented rerun of the same command failed."""
    d = tmp_path / "imagenet"
    d.mkdir()
    recs = [records(d / f"train-{k:05d}-of-00002", [[k], [1 - k]]) for k in range(2)]
    outputs = [d / f"train-{k:05d}-of-00004.bzna" for k in range(3)]
    for p in outputs:
        p.write_bytes(b"not a record")
    partials = [d / ".train-00003-of-00004.bzna.partial", d / ".train-00003-of-00004.bzna.0a1b2c3d.partial"]
    for p in partials:
        p.write_bytes(b"")
    assert expand_patterns(str(d / "train-*"), "TFRecord file") == [str(p) for p in recs]
    assert expand_patterns(str(d / "*"), "TFRecord file") == [str(p) for p in recs]
    # A pattern that matches only such files matches nothing, and says why.
    with pytest.raises(SourceError) as e:
        TFRecordSource(str(d / "*.bzna"), label_offset=0)
    assert str(e.value) == (
        f"no TFRecord file matches {str(d / '*.bzna')!r}: it matches only 3 conversion outputs "
        f"({str(outputs[0])!r}, {str(outputs[1])!r}, {str(outputs[2])!r}), which a pattern leaves out: "
        "a .bzna file is never a TFRecord file"
    )
    with pytest.raises(SourceError, match=r"no tar shard matches .*: it matches only 2 conversion outputs"):
        WebDatasetSource(str(d / ".train-*"))
    # A .bzna file named as it is stays the argument given: its own error says it is not a record file.
    assert main(["convert", "tfrecord", str(outputs[0]), str(tmp_path / "x.bzna"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"{outputs[0]}: record 0 at byte 0:" in err and "not a TFRecord file" in err, err


@pytest.mark.parametrize("as_path", [str, os.fspath, lambda p: p])
def test_a_path_given_as_the_source_is_refused_naming_the_source_to_use(tmp_path, as_path):
    """A folder path was indexed as a string of characters: AttributeError: 'str' object has no attribute
    'origin'. A path could be a folder, TFRecords or tar shards: the caller names its source."""
    from bzna_tf.convert import convert

    folder = tmp_path / "imgs"
    folder.mkdir()
    with pytest.raises(TypeError) as e:
        convert(as_path(folder), tmp_path / "out.bzna")
    assert f"Received a path: source={str(folder)!r}" in str(e.value)
    assert f"convert(ImageFolderSource({str(folder)!r}), ...)" in str(e.value)
    assert list(tmp_path.iterdir()) == [folder]


def test_bzna_tf_convert_is_there_after_import_bzna_tf():
    import subprocess
    import sys

    code = "import bzna_tf, sys; print(bzna_tf.convert.convert.__name__, 'tensorflow' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["convert", "False"], r.stderr[-2000:]
