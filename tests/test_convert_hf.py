"""Hugging Face datasets on this machine (save_to_disk folders, a name for load_dataset) as a source.

The folders are made with the ``datasets`` package itself (the ``hf`` extra); without it these tests
skip, except the one that checks the message a NAME gives when ``datasets`` is missing.
"""

import os
import sys

import pytest
from _sources_data import images, pictures_by_name, reference, write_parquet

pytest.importorskip("pyarrow", reason="Hugging Face sources need pyarrow: pip install 'bzna-tf[hf]'")

from bzna_tf.convert import EncodeOptions, HFSource, Item, SourceError, convert, shard_paths  # noqa: E402
from bzna_tf.datasets import ClassificationDataset  # noqa: E402

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}
NAMES = ["ant", "bee", "cat"]


def hf_dataset(n, start=0):
    datasets = pytest.importorskip(
        "datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'"
    )
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=NAMES)})
    pics = images(start + n)[start:]
    rows = {"image": [{"bytes": p, "path": f"im{start + i}.ppm"} for i, p in enumerate(pics)],
            "label": [(start + i) % 3 for i in range(n)]}  # fmt: skip
    items = [Item(f"im{start + i}.ppm", (start + i) % 3, data=p) for i, p in enumerate(pics)]
    return datasets.Dataset.from_dict(rows, features=features), items


def test_a_saved_dataset_dict_converts_one_split_with_its_class_names(tmp_path):
    datasets = pytest.importorskip(
        "datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'"
    )
    train, train_items = hf_dataset(9)
    test, _ = hf_dataset(3, start=9)
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(tmp_path / "dd", max_shard_size="10KB")
    src = HFSource(tmp_path / "dd", split="train")
    assert len(src.files) > 1  # several data files: rows run on across them
    assert (
        len(src) == 9
        and src.class_names == NAMES
        and (src.image_column, src.label_column) == ("image", "label")
    )
    assert [i.filename for i in src.items([8, 0, 4])] == ["im8.ppm", "im0.ppm", "im4.ppm"]
    s = convert(src, tmp_path / "out" / "train.bzna", num_shards=2, workers=0, **FAST)
    assert s.images == 9 and s.class_names == NAMES
    assert ClassificationDataset(tmp_path / "out").class_names == NAMES
    want = reference(tmp_path, train_items, **FAST)
    assert pictures_by_name(shard_paths(tmp_path / "out" / "train.bzna", 2)) == want
    message = (
        r"Expected --split \(split=\) as one of the splits of .*dd: 'train', 'test'. Received: split='val'"
    )
    with pytest.raises(SourceError, match=message):
        HFSource(tmp_path / "dd", split="val")
    # One Dataset saved alone; the command line.
    test.save_to_disk(tmp_path / "one")
    assert [i.target for i in HFSource(tmp_path / "one")] == [0, 1, 2]
    from bzna_tf.cli import main

    assert main(["convert", "hf", str(tmp_path / "dd"), str(tmp_path / "c.bzna"), "--split", "test",
                 "--processes", "0", "--no-progress", "--preset", "ultrafast"]) == 0  # fmt: skip
    assert sorted(ClassificationDataset(tmp_path / "c.bzna").filenames) == ["im10.ppm", "im11.ppm", "im9.ppm"]


def test_a_label_column_that_is_not_integers_is_refused(tmp_path):
    """As for Parquet files: a float 'label' (a regression target, pandas' floats) was stored unlabelled."""
    datasets = pytest.importorskip(
        "datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'"
    )
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("float32")})
    pics = [{"bytes": p, "path": f"im{i}.ppm"} for i, p in enumerate(images(2))]
    rows = {"image": pics, "label": [0.0, 0.5]}
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(tmp_path / "f")
    message = r"column 'label' is float, not integers: .* If its values are whole numbers .* --label-column"
    with pytest.raises(SourceError, match=message):
        HFSource(tmp_path / "f")
    assert [it.target for it in HFSource(tmp_path / "f", label_column=None)] == [None, None]


def test_a_name_is_loaded_offline_through_datasets(tmp_path):
    pytest.importorskip("datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'")
    repo = tmp_path / "repo" / "data"
    repo.mkdir(parents=True)
    pics = images(5)
    write_parquet(
        repo / "train-00000-of-00001.parquet", pics, [2, 1, 0, 1, 2], row_group_size=2, hf_names=NAMES
    )
    src = HFSource(str(tmp_path / "repo"), split="train", cache_dir=str(tmp_path / "cache"))
    assert all(
        f.startswith(str(tmp_path / "cache")) for f in src.files
    )  # its Arrow cache, read memory-mapped
    assert src.class_names == NAMES and [i.target for i in src] == [2, 1, 0, 1, 2]
    assert [i.data for i in src] == pics
    message = r"'no-such-dataset-xyz' \(split 'train'\) cannot be loaded from this machine without network"
    with pytest.raises(SourceError, match=message):
        HFSource("no-such-dataset-xyz", split="train", cache_dir=str(tmp_path / "cache"))


def test_a_name_without_the_datasets_package_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # an import of it fails, as when it is not installed
    with pytest.raises(SourceError, match=r"needs the datasets package, which is not installed: pip install "
                       r"'bzna-tf\[hf\]'"):  # fmt: skip
        HFSource("mnist", split="train")
    os.makedirs(tmp_path / "empty")
    with pytest.raises(SourceError, match="needs the datasets package"):
        HFSource(tmp_path / "empty", split="train")  # not a save_to_disk folder: a name for datasets


def test_files_named_outside_the_dataset_folder_are_not_read(tmp_path):
    """state.json's data files and path-only images must be inside the dataset's folder, links resolved."""
    import json

    pytest.importorskip("datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'")
    hint = "--allow-outside-paths (allow_outside_paths=True) reads such files when the dataset is trusted"
    ds, _ = hf_dataset(3)
    ds.save_to_disk(tmp_path / "one")
    state_file = tmp_path / "one" / "state.json"
    state = json.loads(state_file.read_text())
    (name,) = [d["filename"] for d in state["_data_files"]]
    (tmp_path / "elsewhere").mkdir()
    os.rename(tmp_path / "one" / name, tmp_path / "elsewhere" / name)
    for entry in (f"../elsewhere/{name}", str(tmp_path / "elsewhere" / name), "link.arrow"):
        if entry == "link.arrow":
            (tmp_path / "one" / entry).symlink_to(tmp_path / "elsewhere" / name)
        state["_data_files"] = [{"filename": entry}]
        state_file.write_text(json.dumps(state))
        with pytest.raises(SourceError) as e:
            HFSource(tmp_path / "one")
        assert str(e.value) == (
            f"{state_file}: its _data_files name files outside the dataset folder "
            f"{os.path.realpath(tmp_path / 'one')} ({entry!r}); a saved dataset's data files are its own; "
            f"{hint}"
        )
        assert len(HFSource(tmp_path / "one", allow_outside_paths=True)) == 3
    # A NAME that is a local folder: datasets records its images' absolute paths, which are read; a row
    # of its data naming a file elsewhere is a bad record.
    pics = images(3)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "private.ppm").write_bytes(pics[0])
    repo = tmp_path / "repo" / "data"
    repo.mkdir(parents=True)
    (repo / "own.ppm").write_bytes(pics[1])
    write_parquet(repo / "train-00000-of-00001.parquet", [None, None, pics[2]], [0, 1, 2], row_group_size=3,
                  paths=[str(tmp_path / "home" / "private.ppm"), str(repo / "own.ppm"), "2.ppm"],
                  hf_names=NAMES)  # fmt: skip
    src = HFSource(str(tmp_path / "repo"), split="train", cache_dir=str(tmp_path / "cache"))
    got = list(src)
    private, folder = tmp_path / "home" / "private.ppm", os.path.realpath(tmp_path / "repo")
    assert got[0].error.startswith(
        f"null image bytes, and its path '{private}' is outside the dataset folder {folder}: "
    )
    assert got[0].error.endswith(hint) and [it.error for it in got[1:]] == [None, None]
    assert got[1].path == str(repo / "own.ppm")
    trusted = HFSource(str(tmp_path / "repo"), split="train", cache_dir=str(tmp_path / "cache"),
                       allow_outside_paths=True)  # fmt: skip
    assert [it.error for it in trusted] == [None] * 3


def test_a_data_file_named_twice_in_state_json_is_refused(tmp_path):
    """By two spellings, or by two hard links (one file, two names): its rows would be stored twice."""
    import json

    pytest.importorskip("datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'")
    ds, _ = hf_dataset(3)
    ds.save_to_disk(tmp_path / "one")
    state_file = tmp_path / "one" / "state.json"
    state = json.loads(state_file.read_text())
    (name,) = [d["filename"] for d in state["_data_files"]]
    os.link(tmp_path / "one" / name, tmp_path / "one" / "again.arrow")
    folder = f"{tmp_path}/one"
    for entry, same in (
        (name, ""),
        (f"./{name}", f" (as {folder}/{name} and {folder}/./{name})"),
        ("again.arrow", f" (as {folder}/{name} and {folder}/again.arrow, two names of one file: hard links)"),
    ):
        state["_data_files"] = [{"filename": name}, {"filename": entry}]
        state_file.write_text(json.dumps(state))
        with pytest.raises(SourceError) as e:
            HFSource(tmp_path / "one")
        assert str(e.value) == (
            f"{folder}/{entry}: the data file is named twice by {str(state_file)!r}{same}: its images would "
            "be stored twice. Name each data file once in _data_files"
        )


def test_a_dataset_s_loading_script_is_never_run(tmp_path, monkeypatch):
    datasets = pytest.importorskip(
        "datasets", reason="the hf extra is not installed: pip install 'bzna-tf[hf]'"
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    marker = tmp_path / "ran"
    (repo / "repo.py").write_text(f"open({str(marker)!r}, 'w').write('the data ran code')\n")
    with pytest.raises(SourceError):
        HFSource(str(repo), split="train", cache_dir=str(tmp_path / "cache"))
    assert not marker.exists()

    # datasets 2.16 to 3.x run a script only when asked: bzna_tf says no.
    asked = []

    def load_dataset(path, split=None, cache_dir=None, trust_remote_code=None, **kwargs):
        asked.append(trust_remote_code)
        raise FileNotFoundError(path)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(SourceError, match="cannot be loaded"):
        HFSource(str(repo), split="train", cache_dir=str(tmp_path / "cache"))
    assert asked == [False]
