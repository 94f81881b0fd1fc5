"""Parquet files (the Hugging Face datasets layout, and plain ones) as a conversion source."""

import os
import pickle
import re

import pytest
from _sources_data import images, pictures_by_name, reference, write_parquet

pa = pytest.importorskip("pyarrow", reason="Parquet sources need pyarrow: pip install 'bzna-tf[parquet]'")
import pyarrow.parquet as pq  # noqa: E402

from bzna_tf.convert import (  # noqa: E402
    ConversionError,
    EncodeOptions,
    Item,
    ParquetSource,
    SourceError,
    convert,
    shard_paths,
)
from bzna_tf.convert.plan import fingerprint  # noqa: E402
from bzna_tf.datasets import ClassificationDataset  # noqa: E402
from bzna_tf.format import BznaFile  # noqa: E402

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}
NAMES = ["ant", "bee", "cat"]


def hf_files(tmp_path, n=11, per_file=6, row_group_size=4):
    """Parquet files as `datasets` writes them: image structs, ClassLabel names in the schema metadata."""
    pics = images(n)
    labels = [i % 3 for i in range(n)]
    paths = []
    (tmp_path / "data").mkdir(exist_ok=True)
    for k, s in enumerate(range(0, n, per_file)):
        part = slice(s, s + per_file)
        paths.append(write_parquet(tmp_path / "data" / f"train-{k:05d}.parquet", pics[part], labels[part],
                                   row_group_size, hf_names=NAMES,
                                   paths=[f"img_{i:05d}.ppm" for i in range(n)][part]))  # fmt: skip
    return paths, pics, labels


def test_hf_parquet_converts_with_class_names_from_the_schema(tmp_path):
    paths, pics, labels = hf_files(tmp_path)
    src = ParquetSource(str(tmp_path / "data" / "train-*.parquet"))
    assert (src.image_column, src.label_column, src.class_names, src.num_classes) == (
        "image",
        "label",
        NAMES,
        3,
    )
    assert len(src) == 11 and src.labelled().all()
    assert [pq.ParquetFile(p).num_row_groups for p in paths] == [2, 2]
    picked = list(src.items([10, 0, 5, 6]))
    assert [(it.filename, it.target) for it in picked] == [
        ("img_00010.ppm", 1),
        ("img_00000.ppm", 0),
        ("img_00005.ppm", 2),
        ("img_00006.ppm", 0),
    ]
    assert picked[0].data == pics[10]
    assert picked[3].origin == f"{paths[1]} row 0 (row group 0)" and src.item(5).origin.endswith(
        "row 5 (row group 1)"
    )
    out = tmp_path / "out" / "train.bzna"
    summary = convert(src, out, num_shards=3, workers=0, **FAST)
    assert summary.images == 11 and summary.class_names == NAMES
    ds = ClassificationDataset(tmp_path / "out")
    assert ds.class_names == NAMES and sorted(ds.filenames) == [f"img_{i:05d}.ppm" for i in range(11)]
    want = reference(
        tmp_path, [Item(f"img_{i:05d}.ppm", labels[i], data=p) for i, p in enumerate(pics)], **FAST
    )
    assert pictures_by_name(shard_paths(out, 3)) == want
    # Other class names must name every ClassLabel class.
    with pytest.raises(ValueError, match="Expected 3 class names"):
        convert(src, tmp_path / "o.bzna", workers=0, class_names=["a", "b"], **FAST)
    # The source travels (Beam, workers) without its open files and decoded row groups.
    again = pickle.loads(pickle.dumps(src))
    assert again._rows is None and [it.data for it in again.items([3, 9])] == [pics[3], pics[9]]


def test_plain_parquet_bytes_and_int_columns_names_and_given_class_names(tmp_path):
    pics = images(5)
    table = pa.table({"id": pa.array(["a", "b", "c", "d", "e"]), "jpeg": pa.array(pics, pa.binary()),
                      "y": pa.array([1, 0, 1, 0, 1], pa.int32())})  # fmt: skip
    pq.write_table(table, tmp_path / "plain.parquet", row_group_size=2)
    src = ParquetSource(tmp_path / "plain.parquet")
    assert (src.image_column, src.label_column, src.class_names) == ("jpeg", "y", None)
    assert [(it.filename, it.target) for it in src] == [(f"plain.parquet-{r:06d}", t) for r, t in
                                                         enumerate([1, 0, 1, 0, 1])]  # fmt: skip
    s = convert(src, tmp_path / "p.bzna", workers=0, order="source", class_names=["no", "yes"], **FAST)
    assert s.class_names == ["no", "yes"] and BznaFile(tmp_path / "p.bzna").class_names == ["no", "yes"]
    assert list(ClassificationDataset(tmp_path / "p.bzna").targets) == [1, 0, 1, 0, 1]
    # No integer column: unlabelled, and the summary says why.
    pq.write_table(table.drop(["y"]), tmp_path / "nolabel.parquet")
    src = ParquetSource(tmp_path / "nolabel.parquet")
    assert src.label_column is None and "no integer column to take as the label" in src.notes[0]
    assert not src.labelled().any()


def test_columns_that_cannot_be_chosen_are_refused_listing_them(tmp_path):
    pics = images(2)
    columns = {"a": pa.array(pics, pa.binary()), "b": pa.array(pics, pa.binary())}
    columns.update({"l1": pa.array([0, 1]), "l2": pa.array([1, 0]), "name": pa.array(["x", "y"])})
    two = pa.table(columns)
    pq.write_table(two, tmp_path / "two.parquet")
    path = tmp_path / "two.parquet"
    with pytest.raises(SourceError, match=rf"{path}: several image columns \('a', 'b'\): the columns are "
                       r"\['a' \(binary\), 'b' \(binary\), 'l1' \(int64\).*--image-column"):  # fmt: skip
        ParquetSource(path)
    with pytest.raises(
        SourceError, match=r"several integer columns could be the label \('l1', 'l2'\).*--label-column"
    ):
        ParquetSource(path, image_column="a")
    assert ParquetSource(path, image_column="b", label_column="l2").item(0).target == 1
    assert ParquetSource(path, image_column="b", label_column=None).item(0).target is None
    with pytest.raises(SourceError, match=r"column 'name' is string, not integers"):
        ParquetSource(path, image_column="a", label_column="name")
    with pytest.raises(SourceError, match=r"column 'l1' is int64, not bytes nor a struct"):
        ParquetSource(path, image_column="l1")
    with pytest.raises(SourceError, match=r"no column 'img' \(--image-column\); it has \['a'"):
        ParquetSource(path, image_column="img")
    other = pa.table({"b": pa.array(pics, pa.binary()), "l2": pa.array([1, 0])})
    pq.write_table(other, tmp_path / "z-other.parquet")
    with pytest.raises(SourceError, match=r"z-other.parquet: no column 'a', which the first file has"):
        ParquetSource([path, tmp_path / "z-other.parquet"], image_column="a", label_column="l1")
    (tmp_path / "not.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(SourceError, match="not.parquet: not a readable Parquet file"):
        ParquetSource(tmp_path / "not.parquet")


def test_a_label_column_that_is_not_integers_is_refused_saying_how_to_go_on(tmp_path, capsys):
    """A 'label' column that pandas made float64 (one NaN), or of names, was converted unlabelled, exit 0."""
    pd = pytest.importorskip("pandas")
    pics = images(3)
    frame = pd.DataFrame({"img": pics, "label": [0, None, 2]})
    assert str(frame["label"].dtype) == "float64"
    frame.to_parquet(tmp_path / "nan.parquet")
    path = tmp_path / "nan.parquet"
    with pytest.raises(SourceError) as e:
        ParquetSource(path)
    assert str(e.value) == (
        f"{path}: column 'label' is double, not integers: a .bzna file stores one integer target per image, "
        "and a label is never rounded, nor a class name numbered (the columns are ['img' (binary), 'label' "
        "(double)]). If its values are whole numbers with NaN for missing labels (pandas stores an integer "
        "column with a missing value as floats), write it as integers: df['label'] = "
        "df['label'].astype('Int64') keeps the missing ones as nulls, missing labels (see "
        "--allow-unlabelled). Name an integer column with --label-column (label_column=), or store every "
        "image unlabelled with --label-column '' (label_column=None)"
    )
    from bzna_tf.cli import main

    out = str(tmp_path / "x.bzna")
    assert main(["convert", "parquet", str(path), out, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bzna-tf convert: {path}: column 'label' is double") and "Traceback" not in err
    # The way the message gives: the nullable integers keep the missing label a null.
    frame["label"] = frame["label"].astype("Int64")
    frame.to_parquet(tmp_path / "fixed.parquet")
    fixed = ParquetSource(tmp_path / "fixed.parquet", allow_unlabelled=True)
    assert fixed.label_column == "label" and [it.target for it in fixed] == [0, None, 2]
    # Names, or another integer column beside it (which must not be taken for the label in its place).
    pq.write_table(pa.table({"img": pa.array(pics), "label": pa.array(["ant", "bee", "ant"]),
                             "id": pa.array([7, 8, 9])}), tmp_path / "names.parquet")  # fmt: skip
    message = (
        r"column 'label' is string, not integers: .* If it holds class names, write them as integers, one "
        r"per class \(--class-names FILE names them\)\. Name"
    )
    with pytest.raises(SourceError, match=message):
        ParquetSource(tmp_path / "names.parquet")
    pq.write_table(pa.table({"img": pa.array(pics), "Labels": pa.array([None] * 3)}), tmp_path / "n.parquet")
    with pytest.raises(SourceError, match=r"column 'Labels' is null, not integers: .*It holds no value at"):
        ParquetSource(tmp_path / "n.parquet")
    # Choosing: no labels, or the integer column.
    assert main(["convert", "parquet", str(path), out, "--no-progress", "--processes", "0",
                 "--preset", "ultrafast", "--label-column", ""]) == 0  # fmt: skip
    assert BznaFile(out).num_labelled == 0
    assert [it.target for it in ParquetSource(tmp_path / "names.parquet", label_column="id")] == [7, 8, 9]


def test_an_integer_label_column_beside_a_label_named_column_of_another_type_is_taken(tmp_path):
    """An int64 'label' beside a string 'labels' (or 'Label') was refused for the other column."""
    pics = images(3)
    for other in ("labels", "Label"):
        path = tmp_path / f"{other}.parquet"
        pq.write_table(pa.table({"image": pa.array(pics), "label": pa.array([2, 0, 1]),
                                 other: pa.array(["c", "a", "b"])}), path)  # fmt: skip
        src = ParquetSource(path)
        assert src.label_column == "label" and [it.target for it in src] == [2, 0, 1]
    # Two integer columns among the label names: one must be named, as before.
    path = tmp_path / "both.parquet"
    pq.write_table(pa.table({"image": pa.array(pics), "label": pa.array([2, 0, 1]),
                             "labels": pa.array([1, 1, 1])}), path)  # fmt: skip
    with pytest.raises(SourceError, match=r"several integer columns could be the label \('label', 'labels'"):
        ParquetSource(path)


def test_a_label_column_of_nulls_only_is_refused_only_when_every_file_has_it_so(tmp_path):
    """A first file whose label column is nulls only (typed null) was refused, where a later one is taken."""
    pics = images(4)
    nulls, ints = tmp_path / "a-nulls.parquet", tmp_path / "b-ints.parquet"
    pq.write_table(pa.table({"image": pa.array(pics[:2]), "label": pa.array([None, None])}), nulls)
    pq.write_table(pa.table({"image": pa.array(pics[2:]), "label": pa.array([1, 0])}), ints)
    for label_column in ("auto", "label"):
        src = ParquetSource([nulls, ints], allow_unlabelled=True, label_column=label_column)
        assert src.label_column == "label" and [it.target for it in src] == [None, None, 1, 0]
        assert src.labelled().tolist() == [False, False, True, True]
        # Either order: a later file of nulls only is taken too.
        assert [it.target for it in ParquetSource([ints, nulls], allow_unlabelled=True)] == [1, 0, None, None]
    said = r"a-nulls.parquet row 0 \(row group 0\): no label: its label is null .*\(2 images in all have no"
    with pytest.raises(ConversionError, match=said):
        convert(ParquetSource([nulls, ints]), tmp_path / "x.bzna", order="source", workers=0, **FAST)
    # Nulls in every file: no label at all, refused.
    more = tmp_path / "c-nulls.parquet"
    pq.write_table(pa.table({"image": pa.array(pics[2:]), "label": pa.array([None, None])}), more)
    for label_column in ("auto", "label"):
        with pytest.raises(SourceError) as e:
            ParquetSource([nulls, more], allow_unlabelled=True, label_column=label_column)
        assert str(e.value).startswith(f"{nulls}: column 'label' is null, not integers: ")
        assert "It holds no value at all, in any of the 2 files. Name an integer column" in str(e.value)
    assert [it.target for it in ParquetSource([nulls, more], label_column=None)] == [None] * 4
    # Another integer column beside it: the label is chosen as where 'label' is integers (refused).
    pq.write_table(pa.table({"image": pa.array(pics[:2]), "label": pa.array([None, None]),
                             "id": pa.array([7, 8])}), nulls)  # fmt: skip
    with pytest.raises(SourceError, match=r"several integer columns could be the label \('label', 'id'\)"):
        ParquetSource([nulls, ints])


def test_a_negative_label_s_hint_names_what_the_source_takes(tmp_path):
    """Parquet's negative-label message said "fix --label-offset", a flag Parquet sources refuse."""
    path = write_parquet(tmp_path / "neg.parquet", images(2), [0, -1], 2)
    with pytest.raises(ConversionError) as e:
        convert(ParquetSource(path), tmp_path / "x.bzna", order="source", workers=0, **FAST)
    assert str(e.value).endswith(
        "label -1 is negative. If negative labels mark images without a label (TFDS writes -1 for them), "
        "pass --negative-labels unlabelled (negative_labels='unlabelled'); if the labels are shifted, "
        "rewrite them to start at 0 (--label-offset is for tfrecord sources only)"
    )


def test_null_images_stop_naming_the_row_or_are_skipped_and_counted(tmp_path, capsys):
    pics = images(5)
    (tmp_path / "on-disk.ppm").write_bytes(pics[4])
    rows = [pics[0], None, pics[2], None, None]
    paths = ["0.ppm", "1.ppm", "2.ppm", None, str(tmp_path / "on-disk.ppm")]
    path = write_parquet(tmp_path / "nulls.parquet", rows, [0, 1, None, 2, 1], row_group_size=2, paths=paths)
    assert ParquetSource(path).item(2).error.startswith("no label: its label is null (column 'label')")
    src = ParquetSource(path, allow_unlabelled=True)
    got = list(src)
    assert [it.error for it in got] == [
        None,
        "null image bytes, and its path '1.ppm' is not a file here",
        None,
        "null image (column 'image')",
        None,
    ]
    assert got[4].path == str(tmp_path / "on-disk.ppm") and got[4].target == 1  # a path-only Image feature
    assert got[2].target is None and list(src.labelled()) == [True, True, False, True, True]
    with pytest.raises(
        ConversionError, match=rf"{path} row 1 \(row group 0\): null image bytes.*--on-error skip"
    ):
        convert(src, tmp_path / "x.bzna", workers=0, order="source", **FAST)
    s = convert(
        src, tmp_path / "x.bzna", workers=0, on_error="skip", order="source", missing_label=-1, **FAST
    )
    assert s.images == 3 and [o for o, _ in s.skipped] == [f"{path} row 1 (row group 0)",
                                                           f"{path} row 3 (row group 1)"]  # fmt: skip
    with BznaFile(tmp_path / "x.bzna") as f:
        assert f.filenames() == ["0.ppm", "2.ppm", "on-disk.ppm"] and list(f.targets) == [0, -1, 1]
    from bzna_tf.cli import main

    capsys.readouterr()
    argv = ["convert", "parquet", str(path), str(tmp_path / "c.bzna"), "--processes", "0", "--no-progress",
            "--preset", "ultrafast", "--order", "source", "--missing-label", "-1",
            "--allow-unlabelled"]  # fmt: skip
    assert main(argv) == 1
    assert f"bzna-tf convert: {path} row 1 (row group 0): null image bytes" in capsys.readouterr().err
    assert main([*argv, "--on-error", "skip"]) == 0
    assert "skipped 2 images that could not be read or decoded" in capsys.readouterr().out


def test_the_cli_takes_the_columns_and_refuses_them_for_other_sources(tmp_path, capsys):
    from bzna_tf.cli import main

    pics = images(4)
    table = pa.table(
        {"x": pa.array(pics, pa.binary()), "y": pa.array(pics, pa.binary()), "t": pa.array([3, 2, 1, 0])}
    )
    pq.write_table(table, tmp_path / "t.parquet")
    argv = ["convert", "parquet", str(tmp_path / "t.parquet"), str(tmp_path / "o" / "t.bzna"),
            "--processes", "0", "--no-progress", "--preset", "ultrafast"]  # fmt: skip
    assert main([*argv, "--image-column", "y", "--num-shards", "2"]) == 0
    assert sorted(os.listdir(tmp_path / "o")) == ["t-00000-of-00002.bzna", "t-00001-of-00002.bzna"]
    assert sorted(ClassificationDataset(tmp_path / "o").targets) == [0, 1, 2, 3]
    capsys.readouterr()
    assert main([*argv[:3], str(tmp_path / "p.bzna"), *argv[4:]]) == 1
    assert "t.parquet: several image columns ('x', 'y')" in capsys.readouterr().err
    assert main(["convert", "folder", str(tmp_path), str(tmp_path / "f.bzna"), "--image-column", "x"]) != 0
    assert (
        "--image-column does not apply to folder sources (--image-column: parquet" in capsys.readouterr().err
    )


def test_a_row_naming_a_file_outside_the_dataset_folder_is_not_read(tmp_path, capsys):
    """A path-only image (null bytes) is read only inside the Parquet file's folder, links resolved."""
    from bzna_tf.cli import main
    from bzna_tf.convert.converter import encode_item

    pics = images(5)
    private = tmp_path / "home" / "private.ppm"  # a file of this machine that the dataset must not pull in
    private.parent.mkdir()
    private.write_bytes(pics[0])
    ds = tmp_path / "ds"
    (ds / "img").mkdir(parents=True)
    (ds / "img" / "own.ppm").write_bytes(pics[1])
    (ds / "img" / "link.ppm").symlink_to(private)  # a name inside that leads out
    paths = [str(private), "../home/private.ppm", "img/link.ppm", "img/own.ppm", str(ds / "img" / "own.ppm")]
    path = write_parquet(ds / "train.parquet", [None] * 5, [0, 1, 2, 1, 0], row_group_size=5, paths=paths)
    got = list(ParquetSource(path))
    hint = "--allow-outside-paths (allow_outside_paths=True) reads such files when the dataset is trusted"
    real_ds = os.path.realpath(ds)
    assert got[0].error == (
        f"null image bytes, and its path {str(private)!r} is outside the dataset folder {real_ds}: a "
        f"dataset's rows may name only its own files; {hint}"
    )
    assert f"'../home/private.ppm' is outside the dataset folder {real_ds}: " in got[1].error
    real = os.path.realpath(private)
    assert f"'img/link.ppm' is outside the dataset folder {real_ds} (it resolves to {real}): " in got[2].error
    assert [it.error for it in got[3:]] == [None, None] and got[3].root == real_ds
    said = rf"{path} row 0 \(row group 0\): null image bytes, and its path '{private}' is outside the dataset"
    with pytest.raises(ConversionError, match=said):
        convert(ParquetSource(path), tmp_path / "x.bzna", workers=0, order="source", **FAST)
    s = convert(ParquetSource(path), tmp_path / "x.bzna", workers=0, order="source", on_error="skip", **FAST)
    assert s.images == 2 and [o for o, _ in s.skipped] == [f"{path} row {r} (row group 0)" for r in range(3)]
    with BznaFile(tmp_path / "x.bzna") as f:
        assert f.filenames() == ["own.ppm", "own.ppm"]
    # The explicit option reads them, and is part of what a resumed conversion must match.
    trusted = ParquetSource(path, allow_outside_paths=True)
    assert [it.error for it in trusted] == [None] * 5 and trusted.describe() != ParquetSource(path).describe()
    assert "allow_outside_paths" not in ParquetSource(path).describe()  # older fingerprints still match
    s = convert(trusted, tmp_path / "t.bzna", workers=0, order="source", **FAST)
    assert s.images == 5
    # A link put in the way after the source's check: the worker checks what it opens.
    item = ParquetSource(path).item(3)
    (ds / "img" / "own.ppm").unlink()
    (ds / "img" / "own.ppm").symlink_to(private)
    result = encode_item(item, FAST["encoding"].settings)
    assert result[0] == "skip" and f"resolves to {real}, outside the dataset folder {real_ds}; " in result[1]
    # The command line: the flag, and one line naming the row and the path.
    argv = ["convert", "parquet", str(path), str(tmp_path / "c.bzna"), "--processes", "0", "--no-progress",
            "--preset", "ultrafast", "--order", "source"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bzna-tf convert: {path} row 0 (row group 0): null image bytes, and its path ")
    assert "--allow-outside-paths" in err and err.count("\n") == 1
    assert main([*argv, "--allow-outside-paths"]) == 0
    assert main(["convert", "folder", str(ds), str(tmp_path / "f.bzna"), "--allow-outside-paths"]) != 0
    assert "--allow-outside-paths does not apply to folder sources" in capsys.readouterr().err


def test_every_file_is_checked_as_the_first_one_labels_names_and_image_columns(tmp_path):
    # Only the first file's columns used to be checked for their types: a later file's float labels were
    # truncated (1.9 -> 1), string labels taken, and the first file's class names given to every file.
    pics = images(4)
    first = write_parquet(tmp_path / "a-0.parquet", pics[:2], [0, 1], 2, hf_names=["cat", "dog"])
    for name, label in [("float", pa.array([0.0, 1.9])), ("string", pa.array(["0", "1"]))]:
        other = tmp_path / f"b-{name}.parquet"
        pq.write_table(pa.table({"image": pa.array(pics[2:], pa.binary()), "label": label}), other)
        wrong = rf"b-{name}.parquet: column 'label' is {label.type}, not integers as in the first file"
        with pytest.raises(SourceError, match=wrong + ".*never rounded"):
            ParquetSource([first, other])
    swapped = write_parquet(tmp_path / "b-names.parquet", pics[2:], [0, 1], 2, hf_names=["dog", "cat"])
    differ = r"b-names.parquet: the class names of the label column 'label' differ from the first file's"
    with pytest.raises(SourceError, match=differ + r" \(label 0: 'dog' here, 'cat' there\)"):
        ParquetSource([first, swapped])
    longer = write_parquet(tmp_path / "b-more.parquet", pics[2:], [0, 2], 2, hf_names=["cat", "dog", "eel"])
    with pytest.raises(SourceError, match=r"\(label 2: 'eel' here, none \(2 names\) there\)"):
        ParquetSource([first, longer])
    # Plain bytes in one file and the Image feature's {bytes, path} struct in another: both are read.
    plain = tmp_path / "b-plain.parquet"
    pq.write_table(pa.table({"image": pa.array(pics[2:], pa.binary()), "label": pa.array([1, 0])}), plain)
    src = ParquetSource([first, plain])
    assert [(it.data, it.target) for it in src.items(range(4))] == list(zip(pics, [0, 1, 1, 0], strict=True))
    assert src.class_names == ["cat", "dog"]
    no_names = write_parquet(tmp_path / "b-none.parquet", pics[2:], [1, 0], 2)
    assert ParquetSource([first, no_names]).class_names == ["cat", "dog"]  # nothing contradicts them
    # A file whose labels are all missing (pyarrow and pandas type such a column null): taken.
    nulls = tmp_path / "b-nulls.parquet"
    pq.write_table(
        pa.table({"image": pa.array(pics[2:], pa.binary()), "label": pa.array([None, None])}), nulls
    )
    src = ParquetSource([first, nulls], allow_unlabelled=True)
    assert [it.target for it in src.items(range(4))] == [0, 1, None, None]


def test_class_names_come_from_the_first_file_that_names_them_and_every_such_file_must_agree(tmp_path):
    # A first file without huggingface metadata left class_names None: the later files' names were neither
    # stored nor compared with each other.
    pics = images(6)
    plain = write_parquet(tmp_path / "b-0.parquet", pics[:2], [0, 1], 2)
    named = write_parquet(tmp_path / "b-1.parquet", pics[2:4], [2, 0], 2, hf_names=["x", "y", "z"])
    src = ParquetSource([plain, named])
    assert src.class_names == ["x", "y", "z"] and src.num_classes == 3
    summary = convert(src, tmp_path / "b.bzna", workers=0, order="source", **FAST)
    assert summary.written == [str(tmp_path / "b.bzna")]
    with BznaFile(tmp_path / "b.bzna") as f:
        assert f.class_names == ["x", "y", "z"] and f.targets.tolist() == [0, 1, 2, 0]
    # A file without names after them is taken; one with other names is refused, naming both files.
    later = write_parquet(tmp_path / "b-3.parquet", pics[4:], [1, 0], 2)
    assert ParquetSource([plain, named, later]).class_names == ["x", "y", "z"]
    other = write_parquet(tmp_path / "b-4.parquet", pics[4:], [1, 0], 2, hf_names=["x", "q", "z"])
    with pytest.raises(SourceError) as e:
        ParquetSource([plain, named, later, other])
    assert str(e.value) == (
        f"{other}: the class names of the label column 'label' differ from those of {named} (label 1: 'q' "
        "here, 'y' there): the same label would mean two classes. Convert the files separately, or rewrite "
        "their labels to one list of names"
    )


def test_negative_labels_are_unlabelled_and_put_last_in_a_shuffled_order(tmp_path):
    # Hugging Face datasets mark a missing label with -1. The source reads its label column up front, so
    # a shuffled conversion with negative_labels="unlabelled" puts those rows last (it used to stop:
    # "a labelled image after unlabelled ones").
    pics = images(10)
    labels = [0, 1, -1, 0, 1, -1, 0, 1, 0, 1]
    path = write_parquet(tmp_path / "neg.parquet", pics, labels, 4, hf_names=["a", "b"])
    src = ParquetSource(path)
    assert src.negative_labels().tolist() == [v < 0 for v in labels]
    out = tmp_path / "neg.bzna"
    summary = convert(src, out, negative_labels="unlabelled", **FAST)
    assert summary.labelled == 8
    stored = pictures_by_name([out])
    with BznaFile(out) as f:
        assert f.num_labelled == 8
        tail = {f.filename(i) for i in range(8, 10)}
    assert tail == {f"img_{i:05d}.ppm" for i in (2, 5)}
    assert {name: target for name, (_, target) in stored.items()} == {
        f"img_{i:05d}.ppm": label if label >= 0 else None for i, label in enumerate(labels)
    }
    with pytest.raises(ConversionError, match=r"neg.parquet row [25] \(row group [01]\): label -1 is"):
        convert(src, tmp_path / "raise.bzna", **FAST)


def test_the_source_order_puts_rows_known_unlabelled_after_the_labelled_ones(tmp_path):
    # The source reads its label column up front: in the source order too, null and negative labels go
    # last, each group in the rows' order (it stopped: "a labelled image after unlabelled ones").
    pics = images(8)
    labels = [0, None, 1, -1, 0, 1, None, 1]
    path = write_parquet(tmp_path / "mixed.parquet", pics, labels, 3, hf_names=["a", "b"])
    out = tmp_path / "mixed.bzna"
    src = ParquetSource(path, allow_unlabelled=True)
    summary = convert(src, out, order="source", negative_labels="unlabelled", **FAST)
    assert summary.labelled == 5
    with BznaFile(out) as f:
        assert f.filenames() == [f"img_{i:05d}.ppm" for i in (0, 2, 4, 5, 7, 1, 3, 6)]
        assert f.targets.tolist()[: f.num_targets] == [0, 1, 0, 1, 1] and f.num_labelled == 5
    # Moved, the order is another conversion than the plain source order (which earlier versions wrote,
    # and succeeded with where each shard's unlabelled images came last): their shards must not mix.
    with BznaFile(out) as f:
        facts = f.metadata["conversion"]
    plain = dict(missing_label=None, negative_labels="unlabelled", total=8, num_shards=1)
    assert facts["fingerprint"] == fingerprint(src, FAST["encoding"], **plain, order="source", seed=None,
                                               class_names=None, unlabelled_last=True)  # fmt: skip
    assert facts["fingerprint"] != fingerprint(src, FAST["encoding"], **plain, order="source", seed=None,
                                               class_names=None)  # fmt: skip
    # All labelled first already: the same file as before (no other order, the same fingerprint).
    first = write_parquet(tmp_path / "first.parquet", pics[:4], [0, 1, None, None], 3, hf_names=["a", "b"])
    convert(ParquetSource(first, allow_unlabelled=True), tmp_path / "first.bzna", order="source", **FAST)
    with BznaFile(tmp_path / "first.bzna") as f:
        assert f.filenames() == [f"img_{i:05d}.ppm" for i in range(4)]
        unmoved = f.metadata["conversion"]["fingerprint"]
    assert unmoved == fingerprint(ParquetSource(first, allow_unlabelled=True), FAST["encoding"],
                                  missing_label=None, negative_labels="error", total=4, num_shards=1,
                                  order="source", seed=None, class_names=None)  # fmt: skip


@pytest.mark.parametrize(
    "error, said",
    [
        (
            ModuleNotFoundError("No module named 'pyarrow'"),
            "which is not installed: pip install 'bzna-tf[parquet]'",
        ),
        (
            ImportError("pyarrow requires NumPy 2.0 or newer, found 1.26.4"),
            "which is installed but does not import: pyarrow requires NumPy 2.0 or newer, found 1.26.4 (with "
            "NumPy 1.x, as TensorFlow 2.16 and 2.17 need: pip install 'pyarrow<26')",
        ),
    ],
)
def test_a_pyarrow_that_does_not_import_is_not_called_missing(monkeypatch, error, said):
    """pyarrow 26 refuses NumPy 1.x (TensorFlow 2.16's, 2.17's): installed, the error said it was not."""
    import builtins

    from bzna_tf.convert.sources.parquet import pyarrow_or_error

    real = builtins.__import__

    def importing(name, *args, **kwargs):
        if name.split(".")[0] == "pyarrow":
            raise error
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", importing)
    with pytest.raises(SourceError, match="^Parquet sources need pyarrow, " + re.escape(said)):
        pyarrow_or_error("Parquet sources")
