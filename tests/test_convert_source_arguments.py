"""The file arguments of the record sources (TFRecord, WebDataset, Parquet, GulpIO): what a name or pattern
reads, and the sets of files refused because they would store images twice or mix two splits."""

import glob

import pytest
from test_convert_labels import records

from bzna_tf.convert import SourceError, TFRecordSource
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
