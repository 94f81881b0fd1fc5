"""Conversion at scale: shards, reruns that skip finished shards, array jobs, class names, TFDS records."""

import os
import stat

import numpy as np
import pytest
from conftest import gradient

from bzna_tf.cli import main
from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    ImageFolderSource,
    Item,
    TFRecordSource,
    convert,
    plan_shards,
    shard_paths,
)
from bzna_tf.datasets import ClassificationDataset, Dataset, ImageNet
from bzna_tf.format import BznaFile

FAST_ENCODING = EncodeOptions(preset="ultrafast", crf=24, chroma="average")
FAST = {"encoding": FAST_ENCODING, "progress": False}
# The same with another CRF: another conversion.
CRF30 = {"encoding": EncodeOptions(preset="ultrafast", crf=30, chroma="average"), "progress": False}


def ppm(rgb):
    h, w = rgb.shape[:2]
    return b"P6\n%d %d\n255\n" % (w, h) + np.ascontiguousarray(rgb).tobytes()


def make_folder(root, classes, size=(24, 32)):
    """An image folder: {class: count} of small PPM images, distinct per image."""
    k = 0
    for name, count in classes.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            (root / name / f"{name}_{i}.ppm").write_bytes(ppm(gradient(*size, seed=k)))
            k += 1
    return root


@pytest.fixture()
def folder(tmp_path):
    return make_folder(tmp_path / "src", {"ant": 4, "zebra": 4})


def test_plan_is_contiguous_and_named_like_tfds(tmp_path):
    plan = plan_shards(10, tmp_path / "train.bzna", 3)
    assert [(s.start, s.stop) for s in plan] == [(0, 3), (3, 6), (6, 10)]
    assert [os.path.basename(s.path) for s in plan] == [
        "train-00000-of-00003.bzna",
        "train-00001-of-00003.bzna",
        "train-00002-of-00003.bzna",
    ]
    assert plan[1].partial == str(tmp_path / ".train-00001-of-00003.bzna.partial")
    assert shard_paths(tmp_path / "x.bzna", None) == [str(tmp_path / "x.bzna")]
    for bad in (0, 11, True, 2.0):
        with pytest.raises(ValueError, match=r"num_shards.*\[1, 10\]"):
            plan_shards(10, tmp_path / "t.bzna", bad)
    with pytest.raises(ValueError, match="Expected an output file name"):
        plan_shards(10, tmp_path, 2)


def test_shards_read_as_one_dataset_with_class_names(tmp_path, folder):
    single = convert(ImageFolderSource(folder), tmp_path / "one.bzna", workers=0, **FAST)
    out = tmp_path / "out"
    out.mkdir()
    summary = convert(ImageFolderSource(folder), out / "train.bzna", num_shards=3, workers=0, **FAST)
    names = sorted(os.listdir(out))
    assert names == [f"train-0000{k}-of-00003.bzna" for k in range(3)]  # no partial file left
    assert summary.written == [str(out / n) for n in names] and summary.images == 8
    assert [len(BznaFile(out / n)) for n in names] == [2, 3, 3]
    assert "class names stored (2): 0 ant, 1 zebra" in str(summary)
    whole = ClassificationDataset(tmp_path / "one.bzna")
    for source in (out, str(out / "train-*.bzna"), [str(out / n) for n in names]):
        ds = ClassificationDataset(source)
        assert ds.filenames == whole.filenames and list(ds.targets) == list(whole.targets)
        assert ds.class_names == ["ant", "zebra"] == whole.class_names
    # The pictures are the single file's, byte for byte.
    with BznaFile(tmp_path / "one.bzna") as f, BznaFile(out / names[1]) as g:
        assert [g.sample_bytes(i) for i in range(3)] == [f.sample_bytes(i) for i in range(2, 5)]
        assert g.metadata["conversion"]["start"] == 2 and g.metadata["conversion"]["stop"] == 5
    assert single.class_names == ["ant", "zebra"]
    # The native reader takes the metadata box after moov in its stride: the same pictures.
    images, labels = next(iter(ClassificationDataset(out).as_dataset(batch_size=8, shape=(16, 16))))
    ref_images, ref_labels = next(iter(whole.as_dataset(batch_size=8, shape=(16, 16))))
    assert (images.numpy() == ref_images.numpy()).all() and list(labels.numpy()) == list(ref_labels.numpy())
    # Sample lists and file sharding work on them as on any several files.
    picked = ClassificationDataset(out).select([1, 4, 6])
    again = ClassificationDataset.from_sample_list(picked.to_sample_list())
    assert again.filenames == [whole.filenames[i] for i in (1, 4, 6)] and again.paths == picked.paths
    counts = []
    for k in range(3):
        per_file = ClassificationDataset(out).as_dataset(
            batch_size=8, shape=(16, 16), shard=(3, k), shard_by="files", training=False
        )
        counts.append(sum(int(labels.shape[0]) for _, labels in per_file))
    assert counts == [2, 3, 3]
    # A missing shard is refused by readers, naming it.
    os.remove(out / names[1])
    with pytest.raises(
        FileNotFoundError, match=r"1 of the 3 shards .* missing \(train-00001-of-00003.bzna\)"
    ):
        Dataset(out)
    with pytest.raises(FileNotFoundError, match="train-00001-of-00003.bzna"):
        Dataset(str(out / "train-*"))


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_respect_the_umask(tmp_path, folder, umask):
    old = os.umask(umask)
    try:
        convert(ImageFolderSource(folder), tmp_path / "x.bzna", workers=0, **FAST)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "x.bzna").st_mode) == 0o666 & ~umask


def test_rerun_skips_finished_shards_and_refuses_other_files(tmp_path, folder):
    out = tmp_path / "d.bzna"
    convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **FAST)
    paths = shard_paths(out, 2)
    before = [(os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths]
    again = convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **FAST)
    assert again.written == [] and again.finished == [(p, 4) for p in paths] and again.images == 0
    assert (
        "skipped 2 files that were already converted from these sources with these options (8 images)"
        in str(again)
    )
    assert [(os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths] == before
    # Other options, or a foreign file under the name: refused, unless overwrite.
    with pytest.raises(ConversionError, match=r"refusing .*--overwrite.*other sources or options"):
        convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **CRF30)
    (tmp_path / "own.bzna").write_bytes(b"not a bzna")
    for overwrite in (False, True):  # not a .bzna at all (a source named as the output?): never replaced
        with pytest.raises(
            ConversionError, match=r"not \.bzna files, --overwrite or not: .*own.bzna: a text file"
        ):
            convert(ImageFolderSource(folder), tmp_path / "own.bzna", workers=0, overwrite=overwrite, **FAST)
    assert (tmp_path / "own.bzna").read_bytes() == b"not a bzna"  # untouched
    # A .bzna cut short (its first bytes): refused without overwrite, replaced with it.
    with open(paths[0], "rb") as f:
        (tmp_path / "cut.bzna").write_bytes(f.read(100))
    with pytest.raises(ConversionError, match=r"cut.bzna: not a complete .bzna"):
        convert(ImageFolderSource(folder), tmp_path / "cut.bzna", workers=0, **FAST)
    cut = convert(ImageFolderSource(folder), tmp_path / "cut.bzna", workers=0, overwrite=True, **FAST)
    assert cut.written == [str(tmp_path / "cut.bzna")]
    redone = convert(ImageFolderSource(folder), out, num_shards=2, workers=0, overwrite=True, **CRF30)
    assert redone.written == paths
    # A changed source (a file added) is another conversion too.
    (folder / "ant" / "ant_9.ppm").write_bytes(ppm(gradient(24, 32, seed=99)))
    with pytest.raises(ConversionError, match="other sources or options"):
        convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **CRF30)


def test_a_file_written_meanwhile_by_another_conversion_is_never_replaced(tmp_path, folder, monkeypatch):
    from bzna_tf.convert import converter

    out = tmp_path / "d.bzna"
    paths = shard_paths(out, 2)
    real = converter._triage

    def triage_then_another_conversion_finishes(*args, **kwargs):
        todo = real(*args, **kwargs)  # both shards absent: to convert
        monkeypatch.setattr(converter, "_triage", real)
        convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **CRF30)  # the other run
        return todo

    monkeypatch.setattr(converter, "_triage", triage_then_another_conversion_finishes)
    said = r"d-00000-of-00002.bzna appeared while this conversion wrote it \(another .*\): that file is kept"
    with pytest.raises(ConversionError, match=said + ".*--overwrite"):
        convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **FAST)
    theirs = [open(p, "rb").read() for p in paths]
    # The other conversion's files are whole and its own: a rerun of it finds them finished.
    again = convert(ImageFolderSource(folder), out, num_shards=2, workers=0, **CRF30)
    assert again.written == [] and [open(p, "rb").read() for p in paths] == theirs
    assert sorted(os.listdir(tmp_path)) == ["d-00000-of-00002.bzna", "d-00001-of-00002.bzna", "src"]

    # A symbolic link that leads nowhere under a name: refused before any work, not after.
    monkeypatch.setattr(converter, "_triage", real)
    os.symlink(tmp_path / "elsewhere.bzna", tmp_path / "e.bzna")
    with pytest.raises(ConversionError, match=r"refusing .*e.bzna: a symbolic link to .*elsewhere.bzna'?, "
                       r"which does not exist"):  # fmt: skip
        convert(ImageFolderSource(folder), tmp_path / "e.bzna", workers=0, **FAST)
    # With --overwrite, it replaces them.
    monkeypatch.setattr(converter, "_triage", triage_then_another_conversion_finishes)
    redone = convert(ImageFolderSource(folder), out, num_shards=2, workers=0, overwrite=True, **FAST)
    assert redone.written == paths


def test_array_workers_and_shard_lists_make_the_same_files(tmp_path, folder):
    whole = tmp_path / "whole"
    whole.mkdir()
    convert(ImageFolderSource(folder), whole / "t.bzna", num_shards=3, workers=0, **FAST)
    parts = tmp_path / "parts"
    parts.mkdir()
    a = convert(
        ImageFolderSource(folder),
        parts / "t.bzna",
        num_shards=3,
        worker_index=0,
        num_workers=2,
        workers=0,
        **FAST,
    )
    assert [os.path.basename(p) for p in a.written] == ["t-00000-of-00003.bzna", "t-00002-of-00003.bzna"]
    b = convert(ImageFolderSource(folder), parts / "t.bzna", num_shards=3, shards=[1], workers=0, **FAST)
    assert [os.path.basename(p) for p in b.written] == ["t-00001-of-00003.bzna"]
    for name in sorted(os.listdir(whole)):
        assert (parts / name).read_bytes() == (whole / name).read_bytes()
    for kwargs, fragment in [
        ({"worker_index": 2, "num_workers": 2}, r"worker_index.*\[0, 2\)"),
        ({"worker_index": 0}, "together"),
        ({"shards": [3]}, r"shards.*\[0, 3\)"),
        ({"shards": [0], "worker_index": 0, "num_workers": 1}, "not both"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            convert(ImageFolderSource(folder), parts / "t.bzna", num_shards=3, workers=0, **kwargs, **FAST)


def test_an_array_task_past_the_plan_says_why_it_has_nothing_to_do(tmp_path, folder, capsys):
    # Without --num-shards the plan is one file: task 1 of 2 printed only "nothing to do for t.bzna".
    out = tmp_path / "nt" / "t.bzna"
    argv = ["convert", "folder", str(folder), str(out), "--processes", "0", "--preset", "ultrafast"]
    assert main([*argv, "--no-progress", "--task-index", "1", "--num-tasks", "2"]) == 0
    assert capsys.readouterr().out.startswith(
        f"nothing to do for {out}: task 1 of 2 has no shard to convert: the plan has 1 file, which task 0 "
        "converts (give --num-shards N >= --num-tasks to share the conversion among the tasks; "
        "num_shards >= num_workers in Python)\n"
    )
    assert not out.parent.exists() or os.listdir(out.parent) == []
    task = {"workers": 0, **FAST}
    s = convert(ImageFolderSource(folder), out, num_shards=3, worker_index=3, num_workers=4, **task)
    assert s.written == [] and s.idle.startswith(
        "task 3 of 4 has no shard to convert: the plan has 3 files, which tasks 0 to 2 convert (give"
    )
    s = convert(ImageFolderSource(folder), out, shard_size=1e9, worker_index=1, num_workers=2, **task)
    assert "N >= --num-tasks or a smaller --shard-size to share" in str(s)
    s = convert(ImageFolderSource(folder), out, num_shards=3, worker_index=1, num_workers=2, **task)
    assert s.idle is None and "nothing to do" not in str(s)


def test_an_array_task_that_runs_another_conversion_than_its_siblings_is_refused(tmp_path, folder):
    # Each task checked only its own shards: a task with another seed (or sources changed between
    # tasks) made a set with images missing and others stored twice, which every reader took.
    out = tmp_path / "out" / "t.bzna"
    task = {"num_shards": 3, "num_workers": 2, "workers": 0, **FAST}
    convert(ImageFolderSource(folder), out, worker_index=0, **task)
    seed = r"t-00000-of-00003.bzna: written by a conversion with seed 0, now 1;"
    with pytest.raises(ConversionError, match=seed + ".*every task of an array job must run the same"):
        convert(ImageFolderSource(folder), out, worker_index=1, seed=1, **task)
    assert sorted(os.listdir(out.parent)) == ["t-00000-of-00003.bzna", "t-00002-of-00003.bzna"]
    # A source changed between the tasks: its fingerprint differs.
    extra = folder / "ant" / "zz_new.ppm"
    extra.write_bytes(ppm(gradient(24, 32, seed=99)))
    changed = r"written by a conversion with .*other sources \(names or sizes\)"
    with pytest.raises(ConversionError, match=changed):
        convert(ImageFolderSource(folder), out, worker_index=1, **task)
    os.remove(extra)
    # The same command, on a copy of the sources whose mtimes differ (cp without -p): it completes the set.
    for path in folder.rglob("*.ppm"):
        os.utime(path, (1e9, 1e9))
    convert(ImageFolderSource(folder), out, worker_index=1, **task)
    assert sorted(ClassificationDataset(str(out.parent / "t-*.bzna")).filenames) == sorted(
        f"{c}/{c}_{i}.ppm" for c in ("ant", "zebra") for i in range(4)
    )
    # A plain list (no fingerprint) as the source: the tasks compare plan, order and seed only.
    items = [Item(f"{i}.ppm", i % 2, data=ppm(gradient(24, 32, seed=i))) for i in range(6)]
    listed = tmp_path / "listed" / "l.bzna"
    convert(items, listed, num_shards=2, shards=[0], workers=0, **FAST)
    convert(items, listed, num_shards=2, shards=[1], workers=0, **FAST)
    s = convert(ImageFolderSource(folder), out, worker_index=1, seed=1, overwrite=True, **task)
    assert any("2 other shards of this set were written by another conversion" in n for n in s.notes)


def test_shard_size_is_estimated_the_same_way_every_time(tmp_path, folder):
    small = convert(ImageFolderSource(folder), tmp_path / "s.bzna", shard_size=1, workers=0, **FAST)
    assert small.num_shards == 8  # 1 byte per shard: one image each (at most one shard per image)
    big = convert(ImageFolderSource(folder), tmp_path / "b.bzna", shard_size=1e9, workers=0, **FAST)
    assert big.num_shards == 1 and big.written == [str(tmp_path / "b-00000-of-00001.bzna")]
    with BznaFile(big.written[0]) as f:
        per_image = f.file_size / len(f)
    mid = convert(
        ImageFolderSource(folder), tmp_path / "m.bzna", shard_size=2.5 * per_image, workers=0, **FAST
    )
    assert 3 <= mid.num_shards <= 4  # 8 images of ~per_image bytes in ~2.5-image shards
    with pytest.raises(ValueError, match="not both"):
        convert(ImageFolderSource(folder), tmp_path / "x.bzna", num_shards=2, shard_size=1, **FAST)


def test_imagenet_reads_a_directory_of_split_shards(tmp_path, folder):
    data = tmp_path / "imagenet"
    data.mkdir()
    convert(ImageFolderSource(folder), data / "train.bzna", num_shards=2, workers=0, **FAST)
    val = make_folder(tmp_path / "valsrc", {"ant": 1, "zebra": 2}, size=(16, 16))
    convert(ImageFolderSource(val), data / "val.bzna", workers=0, **FAST)
    train = ImageNet(data, split="train")
    assert len(train) == 8 and train.paths == [
        *(str(data / f"train-0000{k}-of-00002.bzna") for k in range(2)),
        str(data / "val.bzna"),
    ]
    assert len(ImageNet(data, split="val")) == 3 and len(ImageNet(data, split="validation[:2]")) == 2
    assert sorted(ImageNet(data, split="val").filenames) == [
        "ant/ant_0.ppm",
        "zebra/zebra_0.ppm",
        "zebra/zebra_1.ppm",
    ]
    assert len(ImageNet(data)) == 11 and len(ImageNet(data, split="train+val")) == 11
    assert ImageNet(data).class_names == ["ant", "zebra"]
    with pytest.raises(ValueError, match="holds no test files"):
        ImageNet(data, split="test")
    with pytest.raises(
        FileNotFoundError, match="without ilsvrc2012.bzna or ilsvrc2012.mp4 and without per-split"
    ):
        ImageNet(folder)


def tfrecord(path, records):
    import tensorflow as tf

    def feature(v):
        if isinstance(v, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            ex = tf.train.Example(features=tf.train.Features(feature={k: feature(v) for k, v in r.items()}))
            w.write(ex.SerializeToString())


def test_tfds_and_classic_records_are_recognised_with_class_names(tmp_path):
    images = [ppm(gradient(16, 24, seed=i)) for i in range(3)]
    tfds = tmp_path / "tfds"
    tfds.mkdir()
    tfrecord(
        tfds / "mnistlike-train.tfrecord-00000-of-00001",
        [{"image": im, "label": i % 2, "file_name": f"n{i}.png".encode()} for i, im in enumerate(images)],
    )
    (tfds / "label.labels.txt").write_text("cat\ndog\n")
    src = TFRecordSource(str(tfds / "*.tfrecord-*"))
    assert src.layout == "tfds" and src.class_names == ["cat", "dog"]
    s = convert(src, tmp_path / "tfds.bzna", workers=0, order="source", **FAST)
    ds = ClassificationDataset(tmp_path / "tfds.bzna")
    assert ds.filenames == ["n0.png", "n1.png", "n2.png"] and list(ds.targets) == [0, 1, 0]
    assert ds.class_names == ["cat", "dog"] == s.class_names
    classic = tmp_path / "classic-00000-of-00001"
    tfrecord(
        classic,
        [
            {"image/encoded": im, "image/class/label": 1 + 2 * i, "image/class/text": f"c{2 * i}".encode()}
            for i, im in enumerate(images)
        ],
    )
    src = TFRecordSource(classic, label_offset=-1)
    assert src.layout == "classic"
    convert(src, tmp_path / "classic.bzna", workers=0, order="source", **FAST)
    assert BznaFile(tmp_path / "classic.bzna").class_names == ["c0", None, "c2", None, "c4"]
    # In shards, each names the targets it holds; the summary names those of every shard.
    s = convert(src, tmp_path / "classic", workers=0, order="source", num_shards=3, **FAST)
    assert [BznaFile(p).class_names for p in s.written] == [
        ["c0"],
        [None, None, "c2"],
        [None, None, None, None, "c4"],
    ]
    assert s.class_names == ["c0", None, "c2", None, "c4"]
    # Explicit names that contradict the records' are refused; they are stored with the records' left out.
    # A record without the named feature lists what it has.
    said = r"'c[024]' \(its 'image/class/text'\), but --class-names \(class_names=\) names it '[ace]'"
    with pytest.raises(ConversionError, match=said):
        convert(TFRecordSource(classic, label_offset=-1), tmp_path / "n.bzna", workers=0,
                class_names=list("abcdef"), **FAST)  # fmt: skip
    convert(
        TFRecordSource(classic, label_offset=-1, class_text_key=None),
        tmp_path / "named.bzna",
        workers=0,
        class_names=list("abcdef"),
        **FAST,
    )
    assert BznaFile(tmp_path / "named.bzna").class_names == list("abcdef")
    item = TFRecordSource(classic, image_key="img").item(0)
    assert item.error.startswith("no bytes feature 'img'; the record has the features ['image/class")


def test_items_are_read_by_index_in_any_order(tmp_path, folder):
    records = [{"image/encoded": ppm(gradient(8, 8, seed=i)), "image/class/label": i} for i in range(7)]
    tfrecord(tmp_path / "a-0", records[:4])
    tfrecord(tmp_path / "a-1", records[4:])
    src = TFRecordSource(str(tmp_path / "a-*"), label_offset=0)
    everything = [i.target for i in src]
    assert everything == list(range(7))
    for indices in [range(0, 7), range(2, 5), [3], [6, 0, 4, 1], [5, 5, 2], []]:
        assert [i.target for i in src.items(indices)] == [everything[k] for k in indices]
    assert src.item(4).origin == f"{tmp_path / 'a-1'} record 0 (byte 0)"
    folder_src = ImageFolderSource(folder)
    names = [i.filename for i in folder_src]
    assert [i.filename for i in folder_src.items([6, 3, 0])] == [names[6], names[3], names[0]]


def test_plain_iterables_convert_to_one_file_but_not_to_shards(tmp_path):
    items = [Item(f"{i}.ppm", i, data=ppm(gradient(8, 8, seed=i))) for i in range(2)]
    with pytest.raises(ValueError, match=r"Expected order='source' for a source without len\(\)"):
        convert(iter(items), tmp_path / "x.bzna", workers=0, **FAST)
    convert(iter(items), tmp_path / "x.bzna", workers=0, order="source", **FAST)
    with pytest.raises(ValueError, match="shards need a source with len"):
        convert(iter(items), tmp_path / "y.bzna", num_shards=2, workers=0, order="source", **FAST)
    with pytest.raises(ConversionError, match="cannot be fingerprinted"):
        convert(items, tmp_path / "x.bzna", workers=0, **FAST)  # exists: not known to be this conversion


def test_cli_shards_rerun_overwrite_and_info(tmp_path, folder, capsys):
    from bzna_tf.cli import main

    out = tmp_path / "c.bzna"
    argv = ["convert", "folder", str(folder), str(out), "--processes", "0", "--preset", "ultrafast"]
    argv += ["--chroma", "average", "--num-shards", "2", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "wrote 2 of 2 shards (c-00000-of-00002.bzna, c-00001-of-00002.bzna): 8 images" in printed
    assert "class names stored (2): 0 ant, 1 zebra" in printed
    assert main(argv) == 0
    assert "skipped 2 files that were already converted" in capsys.readouterr().out
    assert main([*argv[:-1], "--crf", "24", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bzna-tf convert: refusing to replace existing files") and "--overwrite" in err
    assert main([*argv, "--crf", "24", "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "c-00001-of-00002.bzna")]) == 0
    table = capsys.readouterr().out
    assert "classes   2 named: 0 ant, 1 zebra" in table
    assert "shard     1 of 2: positions [4, 8) of the order shuffled with seed 0, 0 skipped" in table


def test_compact_layout_through_convert_is_smaller_and_part_of_the_fingerprint(tmp_path, folder):
    b = convert(ImageFolderSource(folder), tmp_path / "b.bzna", workers=0, **FAST)
    compact = EncodeOptions(preset="ultrafast", crf=24, chroma="average", layout="compact")
    c = convert(ImageFolderSource(folder), tmp_path / "c.bzna", workers=0, encoding=compact, progress=False)
    assert c.bytes < b.bytes / 2  # 24x32 pictures: 144x144 frames and lean boxes instead of 512x512
    with BznaFile(tmp_path / "c.bzna") as f:
        assert f.sample(0).input.coded_size == (144, 144)
    with pytest.raises(ConversionError, match="other sources or options"):
        convert(ImageFolderSource(folder), tmp_path / "c.bzna", workers=0, **FAST)
    with pytest.raises(ValueError, match="layout"):
        EncodeOptions(layout="tiny")
