"""Label metadata is checked while converting: class names that do not fit, negative and multi-value labels.

The walkthrough's cases: ``--class-names`` with 2 names for 3 classes was
stored (3 classes, 2 names); negative labels were stored and multi-value
labels cut to their first value without a word.
"""

import os

import pytest
from conftest import gradient
from test_convert_shards import make_folder, ppm

from bzna_tf.cli import main
from bzna_tf.format import BznaFile

FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]
# These records' labels start at 0 (classic-layout TFRecords must say which).
ZERO = ["--label-offset", "0"]


def records(path, labels, texts=None):
    """A TFRecord file of tiny images with these ``image/class/label`` values (a list per record), and
    these ``image/class/text`` (a string per record, or None for none)."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as w:
        for i, label in enumerate(labels):
            feature = {
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[ppm(gradient(8, 8, seed=i))])
                ),
                "image/filename": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[f"{i}.ppm".encode()])
                ),
            }
            if label is not None:
                feature["image/class/label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=label))
            if texts is not None and texts[i] is not None:
                text = texts[i].encode()
                feature["image/class/text"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[text]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def test_class_names_that_do_not_match_the_folder_classes_are_refused(tmp_path, capsys):
    src = make_folder(tmp_path / "src", {"ant": 1, "bee": 1, "cat": 1}, size=(8, 8))
    (tmp_path / "two.txt").write_text("first\nsecond\n")
    out = tmp_path / "x.bzna"
    assert (
        main(["convert", "folder", str(src), str(out), *FAST, "--class-names", str(tmp_path / "two.txt")])
        == 1
    )
    err = capsys.readouterr().err
    assert "Expected 3 class names, one per class of the source ('ant', 'bee', 'cat')" in err
    assert "Received: 2 names in class_names (--class-names): 'first', 'second'" in err and not out.exists()
    (tmp_path / "three.txt").write_text("Ant\nBee\nCat\n")
    assert (
        main(["convert", "folder", str(src), str(out), *FAST, "--class-names", str(tmp_path / "three.txt")])
        == 0
    )
    assert BznaFile(out).class_names == ["Ant", "Bee", "Cat"]
    # Saved by Windows Notepad: a byte-order mark, CRLF line ends. The mark was kept in the first name.
    (tmp_path / "bom.txt").write_bytes("\ufeffAnt\r\nBee\r\nCat\r\n".encode())
    argv = ["convert", "folder", str(src), str(out), *FAST, "--class-names", str(tmp_path / "bom.txt")]
    assert main([*argv, "--overwrite"]) == 0
    assert BznaFile(out).class_names == ["Ant", "Bee", "Cat"]


def test_a_label_past_the_given_class_names_is_an_error_naming_the_record(tmp_path, capsys):
    rec = records(tmp_path / "r-0", [[0], [2], [1]])
    (tmp_path / "two.txt").write_text("zero\none\n")
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(rec), str(out), *FAST, *ZERO]
    assert main([*argv, "--class-names", str(tmp_path / "two.txt")]) == 1
    err = capsys.readouterr().err
    assert (
        f"{rec} record 1 (byte " in err
        and "label 2, but the class names stop at 1" in err
        and not out.exists()
    )


def test_records_that_disagree_on_a_class_name_are_refused(tmp_path, capsys):
    # The first record seen named the class: one file said target 0 is 'WRONG' where 2 of 3 records say
    # 'tench'; in shards, each its own first one, and reading the set failed.
    rec = records(tmp_path / "r-0", [[1], [2], [1], [1]], ["tench", "goldfish", "WRONG", "tench"])
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(rec), str(out), *FAST, "--label-offset", "-1"]
    for shards in ([], ["--num-shards", "2"]):
        assert main([*argv, *shards]) == 1
        err = capsys.readouterr().err
        assert "(its 'image/class/text'), but " in err and "the records disagree on the class's name" in err
        assert "the record names class 0 " in err and "'WRONG'" in err and "'tench'" in err, err
        assert f"{rec} record 2 (byte " in err
        assert f"{rec} record 0 (byte " in err or f"{rec} record 3 (byte " in err
        assert "--class-names FILE" in err and "--class-text-key '' (class_text_key=None)" in err
        # Stopped where the second name is met: a shard finished before it is kept, as after any error.
        assert not out.exists() and len(list(tmp_path.glob("x-*-of-00002.bzna"))) < 2
    # The way out the message gives: the names from a file, the records' left out.
    (tmp_path / "names.txt").write_text("tench\ngoldfish\n")
    assert main([*argv, "--class-names", str(tmp_path / "names.txt"), "--class-text-key", ""]) == 0
    with BznaFile(out) as f:
        assert f.class_names == ["tench", "goldfish"] and sorted(f.targets) == [0, 0, 0, 1]
    # Without names at all.
    assert main([*argv, "--class-text-key", "", "--overwrite"]) == 0
    assert BznaFile(out).class_names is None


def test_class_names_that_contradict_the_records_are_refused(tmp_path, capsys):
    # --class-names that swapped two of the records' image/class/text won without a word.
    from bzna_tf.convert import ConversionError, Item, convert

    rec = records(tmp_path / "r-0", [[1], [2], [1]], ["tench", "goldfish", "tench"])
    (tmp_path / "swapped.txt").write_text("goldfish\ntench\n")
    (tmp_path / "same.txt").write_text("tench\ngoldfish\n")
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(rec), str(out), *FAST, "--label-offset", "-1", "--class-names"]
    assert main([*argv, str(tmp_path / "swapped.txt")]) == 1
    err = capsys.readouterr().err
    way_out = "or give --class-text-key '' (class_text_key=None) to leave the records' 'image/class/text' out"
    assert (
        "(its 'image/class/text'), but --class-names (class_names=) names it " in err
        and ("class 0 'tench' " in err or "class 1 'goldfish' " in err)
        and f"Correct whichever is wrong, {way_out} and store these names" in err
        and not out.exists()
    ), err
    assert main([*argv, str(tmp_path / "same.txt")]) == 0
    assert BznaFile(out).class_names == ["tench", "goldfish"]
    assert main([*argv, str(tmp_path / "swapped.txt"), "--class-text-key", "", "--overwrite"]) == 0
    assert BznaFile(out).class_names == ["goldfish", "tench"]
    # Any source's items: a class_name that the given names contradict, or another item's.
    image = ppm(gradient(8, 8, seed=0))
    items = [Item("a.ppm", 0, data=image, class_name="cat"), Item("b.ppm", 0, data=image, class_name="dog")]
    fast = {"order": "source", "workers": 0, "progress": False}
    said = r"b.ppm: the record names class 0 'dog' \(its class_name\), but a.ppm names it 'cat': the records"
    with pytest.raises(ConversionError, match=said + " disagree .* and items without class_name"):
        convert(items, tmp_path / "i.bzna", **fast)
    said = r"a.ppm: the record names class 0 'cat' \(its class_name\), but --class-names \(class_names=\)"
    with pytest.raises(ConversionError, match=said + " names it 'kitten'"):
        convert(items[:1], tmp_path / "i.bzna", class_names=["kitten"], **fast)


def test_negative_labels_are_an_error_or_unlabelled_by_flag(tmp_path, capsys):
    rec = records(tmp_path / "r-0", [[3], [-1], [0]])
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(rec), str(out), *FAST, *ZERO]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{rec} record 1 (byte " in err and "label -1 is negative" in err and "--negative-labels" in err
    assert err.rstrip().endswith("if the labels are shifted, fix --label-offset")  # a flag tfrecord takes
    assert not out.exists()
    # --label-offset -1 makes the classic 1-based labels 0-based, and a 0 label negative
    assert main(["convert", "tfrecord", str(records(tmp_path / "s-0", [[1], [0]])), str(out), *FAST, *ZERO,
                 "--label-offset", "-1"]) == 1  # fmt: skip
    assert "label -1 is negative" in capsys.readouterr().err
    assert main([*argv, "--negative-labels", "unlabelled", "--order", "source", "--missing-label", "-1"]) == 0
    with BznaFile(out) as f:
        assert f.filenames() == ["0.ppm", "1.ppm", "2.ppm"] and f.targets.tolist() == [3, -1, 0]
    out.unlink()
    # without --missing-label the unlabelled image must come last
    assert main([*argv, "--negative-labels", "unlabelled", "--order", "source"]) == 1
    assert "a labelled image after unlabelled ones" in capsys.readouterr().err
    only = records(tmp_path / "t-0", [[-1], [-1]])  # TFDS's test splits: every label -1
    assert (
        main(["convert", "tfrecord", str(only), str(out), *FAST, *ZERO, "--negative-labels", "unlabelled"])
        == 0
    )
    with BznaFile(out) as f:
        assert f.num_labelled == 0 and len(f) == 2


def test_multi_value_labels_are_an_error_naming_the_record(tmp_path, capsys):
    rec = records(tmp_path / "r-0", [[1], [1, 5, 7], [2]])
    out = tmp_path / "x.bzna"
    assert main(["convert", "tfrecord", str(rec), str(out), *FAST, *ZERO]) == 1
    err = capsys.readouterr().err
    assert f"{rec} record 1 (byte " in err and "'image/class/label' holds 3 labels [1, 5, 7]" in err
    assert "one target per image" in err and not out.exists()


def test_gulp_labels_that_are_not_one_integer_or_string_are_refused(tmp_path):
    import json
    import re

    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, SourceError

    write_gulp_chunk(tmp_path / "g", 0, {"v": (1, [gradient(8, 8)])})
    meta = tmp_path / "g" / "meta_0.gmeta"
    table = json.loads(meta.read_text())
    for bad in ([1, 2], True, 1.5):
        table["v"]["meta_data"][0]["label"] = bad
        meta.write_text(json.dumps(table))
        with pytest.raises(
            SourceError, match=rf"meta_0.gmeta: video 'v': label {re.escape(repr(bad))} \('label'\)"
        ):
            GulpSource(tmp_path / "g")


def test_gulp_labels_mixing_strings_and_integers_are_refused(tmp_path):
    # A string label is numbered by rank, an integer taken as it is: "cat" and 0 would share target 0.
    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, SourceError

    videos = {"va": ("cat", [gradient(8, 8)]), "vb": (0, [gradient(8, 8, seed=1)])}
    write_gulp_chunk(tmp_path / "g", 0, videos)
    with pytest.raises(
        SourceError, match=r"labels mix strings \(video 'va' in .*data_0.gulp\) and integers \(video 'vb'"
    ):
        GulpSource(tmp_path / "g")


def test_a_file_named_twice_is_refused_naming_both_arguments(tmp_path, capsys):
    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, SourceError

    rec = records(tmp_path / "r-0", [[0], [1]])
    records(tmp_path / "r-1", [[1]])
    out = tmp_path / "x.bzna"
    # Overlapping patterns, or one file under two spellings: its images would be stored twice.
    for names in ([str(tmp_path / "r-*"), str(rec)], [str(rec), os.path.join(tmp_path, ".", "r-0")]):
        assert main(["convert", "tfrecord", *names, str(out), *FAST, *ZERO]) == 1
        err = capsys.readouterr().err
        assert f"the TFRecord file is named by {names[0]!r} and by {names[1]!r}" in err, err
        assert "would be stored twice" in err and not out.exists()
    write_gulp_chunk(tmp_path / "g", 0, {"v": (0, [gradient(8, 8)])})
    with pytest.raises(SourceError, match=r"meta_0.gmeta: the GulpIO chunk is named by '.*g' and by"):
        GulpSource([tmp_path / "g", tmp_path / "g" / "meta_0.gmeta"])
    assert len(GulpSource([tmp_path / "g"])) == 1


def test_one_file_under_two_names_hard_links_is_refused_by_every_file_list_source(tmp_path):
    """Two hard links are two real paths of one file: known by (device, inode), not read twice."""
    from _sources_data import wds_samples, write_parquet, write_shards
    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, ParquetSource, SourceError, TFRecordSource, WebDatasetSource

    def refused(make, first, second, what, named=None):
        if not os.path.exists(second):
            os.link(first, second)
        with pytest.raises(SourceError) as e:
            make(named or [first, second])
        by = " and by ".join(repr(str(p)) for p in named or [first, second])
        assert str(e.value) == (
            f"{second}: the {what} is named by {by} (as {first} and {second}, two names of one file: hard "
            "links): its images would be stored twice. Name each file once (patterns that overlap match a "
            "file twice)"
        )

    rec = records(tmp_path / "r-0", [[0], [1]])
    refused(TFRecordSource, rec, tmp_path / "r-1", "TFRecord file")
    (shard,) = write_shards(tmp_path / "w", wds_samples(2), per_shard=2)
    refused(WebDatasetSource, shard, tmp_path / "w" / "copy.tar", "tar shard")
    write_gulp_chunk(tmp_path / "g", 0, {"v": (0, [gradient(8, 8)])})
    (tmp_path / "h").mkdir()
    os.link(tmp_path / "g" / "data_0.gulp", tmp_path / "h" / "data_0.gulp")
    first, second = tmp_path / "g" / "meta_0.gmeta", tmp_path / "h" / "meta_0.gmeta"
    refused(GulpSource, first, second, "GulpIO chunk or folder")
    refused(GulpSource, str(first), str(second), "GulpIO chunk", named=[tmp_path / "g", tmp_path / "h"])
    pytest.importorskip("pyarrow", reason="Parquet sources need pyarrow")
    pq = write_parquet(tmp_path / "p-0.parquet", [ppm(gradient(8, 8))], [0], row_group_size=1)
    refused(ParquetSource, pq, tmp_path / "p-1.parquet", "Parquet file")
    # A symbolic link is named as before: one real path.
    (tmp_path / "r-2").symlink_to(rec)
    with pytest.raises(SourceError, match=r"named by '.*r-0' and by '.*r-2' \(as \S+r-0 and \S+r-2\): its"):
        TFRecordSource([rec, tmp_path / "r-2"])


def test_a_label_past_int64_is_a_bad_record_naming_it(tmp_path, capsys):
    import io
    import tarfile

    tar = tmp_path / "s-000000.tar"
    with tarfile.open(tar, "w") as t:
        for i, label in enumerate([b"0", b"9223372036854775808", b"1"]):
            for ext, data in (("ppm", ppm(gradient(8, 8, seed=i))), ("cls", label)):
                m = tarfile.TarInfo(f"{i:04d}.{ext}")
                m.size = len(data)
                t.addfile(m, io.BytesIO(data))
    out = tmp_path / "x.bzna"
    assert main(["convert", "webdataset", str(tar), str(out), *FAST]) == 1
    err = capsys.readouterr().err
    assert f"{tar} key '0001': label 9223372036854775808 does not fit in a .bzna target" in err, err
    assert "--on-error skip" in err and not out.exists()
    assert main(["convert", "webdataset", str(tar), str(out), *FAST, "--on-error", "skip"]) == 0
    with BznaFile(out) as f:
        assert len(f) == 2 and sorted(f.targets) == [0, 1]


def test_classic_records_need_their_label_offset(tmp_path, capsys):
    # build_imagenet_data.py's labels are 1..1000, other tools' 0-based: without --label-offset, targets
    # were stored 1-based (every class shifted by one) and ImageNet() read them.
    rec = records(tmp_path / "train-00000-of-00001", [[1], [2]])
    out = tmp_path / "x.bzna"
    assert main(["convert", "tfrecord", str(rec), str(out), *FAST]) == 1
    err = capsys.readouterr().err
    assert "classic ImageNet TFRecords ('image/class/label' labels): give --label-offset" in err
    assert "-1 for ImageNet's labels 1..1000" in err and not out.exists()
    # Records of images alone (no label feature) have no labels to shift: no offset asked for.
    from bzna_tf.convert import TFRecordSource

    plain = records(tmp_path / "p-00000-of-00001", [None, None])
    assert [
        i.unlabelled is not None for i in TFRecordSource(str(plain), allow_unlabelled=True).items([0, 1])
    ] == [
        True,
        True,
    ]
    assert main(["convert", "tfrecord", str(rec), str(out), *FAST, "--label-offset", "-1"]) == 0
    with BznaFile(out) as f:
        assert sorted(f.targets) == [0, 1]
    # A file made 1-based (labels 1..1000 kept) is refused by ImageNet, whose classes are 0..999.
    from bzna_tf import ImageNet

    top = records(tmp_path / "t-00000-of-00001", [[1], [1000]])
    assert main(["convert", "tfrecord", str(top), str(tmp_path / "d" / "train.bzna"), *FAST, *ZERO]) == 0
    with pytest.raises(ValueError, match=r"targets reach 1000, past ImageNet's 0..999: .*--label-offset -1"):
        ImageNet(tmp_path / "d", split="train")
    # The offset named in the message when it made a label negative.
    zero = records(tmp_path / "z-00000-of-00001", [[0]])
    assert (
        main(["convert", "tfrecord", str(zero), str(tmp_path / "z.bzna"), *FAST, "--label-offset", "-1"]) == 1
    )
    assert "label -1 is negative: the record's 0 plus --label-offset -1. Check --label-offset" in (
        capsys.readouterr().err
    )


def test_classic_records_need_their_label_offset_whichever_record_comes_first(tmp_path, capsys, monkeypatch):
    # Only the first record was looked at: when it had no label, the 1-based labels of the others were
    # stored unshifted, without a word, by a conversion that skips it or stores it unlabelled.
    from bzna_tf.convert import SourceError, TFRecordSource
    from bzna_tf.convert.sources import tfrecords

    rec = records(tmp_path / "train-00000-of-00001", [None, [1], [2], [4]])
    out = tmp_path / "x.bzna"
    argv = ["convert", "tfrecord", str(rec), str(out), *FAST]
    unlabelled = ["--allow-unlabelled", "--order", "source", "--missing-label", "-1"]
    for options in (["--on-error", "skip"], unlabelled):
        assert main([*argv, *options]) == 1, options
        err = capsys.readouterr().err
        assert f"bzna-tf convert: {rec} record 1 (byte " in err, err
        assert "classic ImageNet TFRecords ('image/class/label' labels): give --label-offset" in err
        assert not out.exists()
    assert main([*argv, "--on-error", "skip", "--label-offset", "-1"]) == 0
    with BznaFile(out) as f:
        assert sorted(f.targets) == [0, 1, 3]
    # Records of images alone need no offset: every record was looked at. Past the records looked at, the
    # offset is asked for, as labels may follow.
    monkeypatch.setattr(tfrecords, "OFFSET_SCAN", 3)
    plain = records(tmp_path / "p-00000-of-00001", [None, None, None])
    assert TFRecordSource(str(plain), allow_unlabelled=True).label_offset == 0
    late = records(tmp_path / "l-00000-of-00001", [None, None, None, [1]])
    said = r"l-00000-of-00001: classic ImageNet TFRecords whose first 3 records have no 'image/class/label'"
    with pytest.raises(SourceError, match=said + r" label: give --label-offset .* or --label-key ''"):
        TFRecordSource(str(late), allow_unlabelled=True)
    assert TFRecordSource(str(late), allow_unlabelled=True, label_key=None).label_key is None


def test_a_pattern_over_an_incomplete_set_or_two_sets_of_shards_is_refused(tmp_path, capsys):
    from bzna_tf.convert import SourceError, TFRecordSource

    for k in (0, 1, 3):  # shard 2 of 4 missing: a download cut short
        records(tmp_path / f"train-0000{k}-of-00004", [[k + 1]])  # not copies of one file, which are refused
    records(tmp_path / "validation-00000-of-00001", [[5]])
    with pytest.raises(SourceError, match=r"1 of the 4 shards of train-\*-of-00004 in .* is missing "
                       r"\(train-00002-of-00004\)"):  # fmt: skip
        TFRecordSource(str(tmp_path / "train-*"), label_offset=-1)
    with pytest.raises(
        SourceError, match=r"matches 2 sets of shards \(train-\*-of-00004, validation-\*-of-00001\)"
    ):
        TFRecordSource(str(tmp_path / "*-of-*"), label_offset=-1)
    # Shards picked on purpose, and the two sets as two patterns: taken.
    assert len(TFRecordSource(str(tmp_path / "train-0000[01]-of-00004"), label_offset=-1)) == 2
    both = TFRecordSource(
        [str(tmp_path / "train-0000[013]-*"), str(tmp_path / "validation-*")], label_offset=-1
    )
    assert len(both) == 4
    # Unpadded shard names (train-1-of-3), as some tools write them: the same check.
    for k in (0, 2):
        records(tmp_path / f"part-{k}-of-3", [[k + 1]])
    said = r"1 of the 3 shards of part-\*-of-3 in .* is missing \(part-1-of-3\)"
    with pytest.raises(SourceError, match=said):
        TFRecordSource(str(tmp_path / "part-*"), label_offset=-1)
    assert len(TFRecordSource(str(tmp_path / "part-[02]-of-3"), label_offset=-1)) == 2


def tfds_records(path, rows):
    """A TFRecord file in TFDS's layout: ``image`` and the int64 features of each row (a dict)."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as w:
        for i, row in enumerate(rows):
            image = ppm(gradient(8, 8, seed=i))
            feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image]))}
            for key, value in row.items():
                feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def test_tfds_class_names_follow_a_label_offset(tmp_path):
    from bzna_tf.convert import TFRecordSource

    rec = tfds_records(tmp_path / "d.tfrecord-00000-of-00001", [{"label": 1}])
    (tmp_path / "label.labels.txt").write_text("zero\none\ntwo\n")
    assert TFRecordSource(str(rec)).class_names == ["zero", "one", "two"]
    assert TFRecordSource(str(rec), label_offset=-1).class_names == ["one", "two"]
    assert TFRecordSource(str(rec), label_offset=1).class_names == [None, "zero", "one", "two"]


def test_the_names_file_beside_tfds_records_is_the_label_keys(tmp_path, capsys):
    # CIFAR-100 in TFDS: label (fine) and coarse_label, each with its LABEL.labels.txt. label.labels.txt was
    # read whatever --label-key said: the coarse targets got the fine classes' names, and an unlabelled
    # conversion (--label-key '') stored names too.
    from bzna_tf.convert import TFRecordSource

    rows = [{"label": fine, "coarse_label": fine // 2} for fine in (0, 1, 2, 3)]
    rec = tfds_records(tmp_path / "cifar100-train.tfrecord-00000-of-00001", rows)
    (tmp_path / "label.labels.txt").write_text("apple\naquarium_fish\nbaby\nbear\n")
    (tmp_path / "coarse_label.labels.txt").write_text("fruit\nfish_and_people\n")
    assert TFRecordSource(str(rec)).class_names == ["apple", "aquarium_fish", "baby", "bear"]
    assert TFRecordSource(str(rec), label_key="coarse_label").class_names == ["fruit", "fish_and_people"]
    assert TFRecordSource(str(rec), label_key=None).class_names is None
    out = tmp_path / "coarse.bzna"
    assert main(["convert", "tfrecord", str(rec), str(out), *FAST, "--label-key", "coarse_label"]) == 0
    with BznaFile(out) as f:
        assert f.class_names == ["fruit", "fish_and_people"] and sorted(f.targets) == [0, 0, 1, 1]
    assert main(["convert", "tfrecord", str(rec), str(tmp_path / "none.bzna"), *FAST, "--label-key", ""]) == 0
    with BznaFile(tmp_path / "none.bzna") as f:
        assert f.class_names is None and f.num_labelled == 0
    # A label key without its own names file: no names, not another label's.
    (tmp_path / "coarse_label.labels.txt").unlink()
    assert TFRecordSource(str(rec), label_key="coarse_label").class_names is None
    # A key with a '/' names no file (it would be in another folder).
    (tmp_path / "image" / "class").mkdir(parents=True)
    (tmp_path / "image" / "class" / "label.labels.txt").write_text("x\n")
    classic = records(tmp_path / "train-00000-of-00001", [[0]])
    assert TFRecordSource(str(classic), label_offset=0).class_names is None
