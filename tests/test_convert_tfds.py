"""A prepared TFDS dataset folder (NAME/VERSION with dataset_info.json) as a conversion source."""

import json
import os

import pytest
from _sources_data import images, pictures_by_name, reference
from test_convert_shards import tfrecord

from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    Item,
    SourceError,
    TFDSSource,
    convert,
    shard_paths,
)
from bzna_tf.datasets import ClassificationDataset

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}
NAMES = ["cat", "dog", "emu"]


def make_tfds(root, splits={"train": [4, 3], "test": [2]}, supervised=True, features=True):  # noqa: B006
    """root/mini/1.0.0 as TFDS prepares it: records with image, label, file_name; info, features, labels."""
    folder = root / "mini" / "1.0.0"
    folder.mkdir(parents=True)
    expected = {}
    k = 0
    info_splits = []
    for split, lengths in splits.items():
        expected[split] = []
        for s, n in enumerate(lengths):
            records = []
            for _ in range(n):
                pic = images(k + 1)[k]
                records.append({"image": pic, "label": k % 3, "file_name": f"{split}_{k}.ppm".encode()})
                expected[split].append(Item(f"{split}_{k}.ppm", k % 3, data=pic))
                k += 1
            tfrecord(folder / f"mini-{split}.tfrecord-{s:05d}-of-{len(lengths):05d}", records)
        template = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
        info_splits.append({"filepathTemplate": template, "name": split, "numBytes": "1",
                            "shardLengths": [str(n) for n in lengths]})  # fmt: skip
    info = {"fileFormat": "tfrecord", "name": "mini", "splits": info_splits, "version": "1.0.0"}
    if supervised:
        info["supervisedKeys"] = {"tuple": {"items": [{"featureKey": "image"}, {"featureKey": "label"}]}}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    if features:
        spec = {"featuresDict": {"features": {
            "image": {"pythonClassName": "tensorflow_datasets.core.features.image_feature.Image"},
            "label": {"pythonClassName": "tensorflow_datasets.core.features.class_label_feature.ClassLabel"},
            "file_name": {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text"},
        }}}  # fmt: skip
        (folder / "features.json").write_text(json.dumps(spec))
    (folder / "label.labels.txt").write_text("\n".join(NAMES) + "\n")
    return folder, expected


def test_a_split_converts_with_its_class_names(tmp_path):
    folder, expected = make_tfds(tmp_path)
    src = TFDSSource(folder, split="train")
    assert len(src) == 7 and src.class_names == NAMES and (src.image_key, src.label_key) == ("image", "label")
    assert [os.path.basename(p) for p in src.paths] == [
        "mini-train.tfrecord-00000-of-00002",
        "mini-train.tfrecord-00001-of-00002",
    ]
    s = convert(src, tmp_path / "out" / "train.bzna", num_shards=2, workers=0, **FAST)
    assert s.images == 7 and s.class_names == NAMES
    ds = ClassificationDataset(tmp_path / "out")
    assert ds.class_names == NAMES and sorted(ds.filenames) == sorted(i.filename for i in expected["train"])
    want = reference(tmp_path, expected["train"], **FAST)
    assert pictures_by_name(shard_paths(tmp_path / "out" / "train.bzna", 2)) == want
    # The dataset folder (one version in it) and the test split; the folder alone works without
    # supervised keys or features.json too (TFDS's usual image/label names).
    test = TFDSSource(tmp_path / "mini", split="test")
    assert [i.filename for i in test] == ["test_7.ppm", "test_8.ppm"] and test.folder == str(folder)
    plain, _ = make_tfds(tmp_path / "plain", supervised=False, features=False)
    assert [i.target for i in TFDSSource(plain, split="test")] == [1, 2]
    assert TFDSSource(plain, split="test").class_names == NAMES


def test_splits_versions_and_damaged_folders_are_refused_saying_why(tmp_path):
    folder, _ = make_tfds(tmp_path)
    with pytest.raises(SourceError, match=r"Expected --split \(split=\) as one of the splits of .*: 'test', "
                       r"'train'. Received: split=None"):  # fmt: skip
        TFDSSource(folder, split=None)
    with pytest.raises(SourceError, match=r"Received: split='train\[:10%\]'"):
        TFDSSource(folder, split="train[:10%]")
    (tmp_path / "mini" / "2.0.0").mkdir()
    (tmp_path / "mini" / "2.0.0" / "dataset_info.json").write_text("{}")
    with pytest.raises(SourceError, match=r"several prepared versions \(1.0.0, 2.0.0\)"):
        TFDSSource(tmp_path / "mini", split="train")
    with pytest.raises(SourceError, match="no dataset_info.json in it or in its sub-folders"):
        TFDSSource(tmp_path, split="train")
    os.remove(folder / "mini-train.tfrecord-00001-of-00002")
    with pytest.raises(SourceError, match=r"1 of the 2 files of split 'train' is missing "
                       r"\('mini-train.tfrecord-00001-of-00002'\)"):  # fmt: skip
        TFDSSource(folder, split="train")
    # A shard that does not hold the records dataset_info.json says it holds.
    tfrecord(folder / "mini-test.tfrecord-00000-of-00001", [{"image": images(1)[0], "label": 0}])
    src = TFDSSource(folder, split="test")
    with pytest.raises(SourceError, match=r"mini-test.tfrecord-00000-of-00001 holds 1, not 2"):
        len(src)
    info = json.loads((folder / "dataset_info.json").read_text())
    info["fileFormat"] = "array_record"
    (folder / "dataset_info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match="in 'array_record' files; only TFRecord folders are read"):
        TFDSSource(folder, split="test")


def test_the_cli_converts_a_split_and_negative_labels_follow_the_option(tmp_path, capsys):
    from bzna_tf.cli import main

    folder, _ = make_tfds(tmp_path)
    argv = ["convert", "tfds", str(folder), str(tmp_path / "t.bzna"), "--split", "test", "--processes", "0",
            "--no-progress", "--preset", "ultrafast"]  # fmt: skip
    assert main(argv) == 0
    assert "class names stored (3): 0 cat, 1 dog, 2 emu" in capsys.readouterr().out
    assert main(["convert", "folder", str(folder), str(tmp_path / "f.bzna"), "--split", "x"]) != 0
    assert "--split does not apply to folder sources (--split: tfds, hf)" in capsys.readouterr().err
    # TFDS writes -1 for images without a label: the converter's rule applies.
    tfrecord(folder / "mini-test.tfrecord-00000-of-00001",
             [{"image": images(2)[i], "label": -1, "file_name": b"u.ppm"} for i in range(2)])  # fmt: skip
    with pytest.raises(ConversionError, match="label -1 is negative"):
        convert(TFDSSource(folder, split="test"), tmp_path / "n.bzna", workers=0, **FAST)
    src = TFDSSource(folder, split="test")
    s = convert(src, tmp_path / "n.bzna", workers=0, negative_labels="unlabelled", **FAST)
    assert s.images == 2 and s.targets is None


def test_file_names_from_dataset_info_that_lead_out_of_the_folder_are_refused(tmp_path):
    folder, _ = make_tfds(tmp_path)
    info_path = folder / "dataset_info.json"
    info = json.loads(info_path.read_text())
    for k in range(2):  # where "../../" leads
        (tmp_path / f"mini-train.tfrecord-{k:05d}-of-00002").write_bytes(b"")
    (train,) = [s for s in info["splits"] if s["name"] == "train"]
    for template in ("../../{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}", f"{tmp_path}/{{SHARD_INDEX}}"):
        train["filepathTemplate"] = template
        info_path.write_text(json.dumps(info))
        with pytest.raises(SourceError) as e:
            TFDSSource(folder, split="train")
        assert str(e.value).startswith(f"{info_path}: split 'train''s files, '") and (
            f"lead out of the dataset folder {folder}: its files are in it" in str(e.value)
        )
    train["filepathTemplate"] = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
    info["supervisedKeys"] = {"tuple": {"items": [{"featureKey": "image"}, {"featureKey": "../../x"}]}}
    info_path.write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"the label's names, '\.\./\.\./x\.labels\.txt', lead out of the"):
        TFDSSource(folder, split="train")
