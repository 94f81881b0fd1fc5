"""A folder source's classes given (``classes=``, ``--classes``): a split that lacks a class folder keeps the
training split's targets.

Numbered by its own sorted folders, a ``val/`` without ``dog/`` stored its ``eel`` images as target 1,
the training file's ``dog``, without a word.
"""

import re

import pytest
from conftest import gradient
from test_convert_shards import FAST, make_folder, ppm

from bzna_tf.cli import main
from bzna_tf.convert import ConversionError, ImageFolderSource, Item, convert
from bzna_tf.convert.plan import fingerprint
from bzna_tf.convert.sources import SourceError
from bzna_tf.format import BznaFile

TRAIN = {"ant": 1, "dog": 1, "eel": 1, "zebra": 1}
VAL = {"ant": 1, "eel": 2, "zebra": 1}  # no dog: numbered on its own, eel would be 1 and zebra 2
CLASSES = ["ant", "dog", "eel", "zebra"]
CLI_FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


@pytest.fixture()
def splits(tmp_path):
    """train/ (4 classes) converted to out/train.bzna; val/ without its dog folder."""
    train = make_folder(tmp_path / "train", TRAIN, size=(16, 16))
    val = make_folder(tmp_path / "val", VAL, size=(16, 16))
    convert(ImageFolderSource(train), tmp_path / "out" / "train.bzna", workers=0, **FAST)
    return tmp_path, val


def labels_by_folder(path):
    """{stored name: (target, its stored class name)} of a .bzna file, and its class names."""
    with BznaFile(path) as f:
        names = f.class_names
        return {n: (t, names[t]) for n, t in zip(f.filenames(), f.targets.tolist(), strict=True)}, names


def assert_numbered_as_train(path):
    labels, names = labels_by_folder(path)
    assert names == CLASSES
    assert len(labels) == 4
    for filename, (target, name) in labels.items():
        assert name == filename.split("/")[0] and target == CLASSES.index(name), (filename, target)


@pytest.mark.parametrize("how", ["list", "text file", "bzna", "bzna shards"])
def test_a_split_lacking_a_class_folder_keeps_the_targets_of_the_classes_given(splits, how):
    tmp_path, val = splits
    if how == "list":
        classes = list(CLASSES)
    elif how == "text file":
        classes = tmp_path / "classes.txt"
        # A byte order mark, Windows line ends and blank lines at the end are not names.
        classes.write_bytes("\ufeffant\r\ndog\r\neel\r\nzebra\r\n\r\n \n".encode())
    elif how == "bzna":
        classes = str(tmp_path / "out" / "train.bzna")
    else:  # the name shards derive from, as --classes gets it when the training split was sharded
        source = ImageFolderSource(tmp_path / "train")
        convert(source, tmp_path / "sharded" / "train.bzna", num_shards=2, workers=0, **FAST)
        assert not (tmp_path / "sharded" / "train.bzna").exists()
        classes = str(tmp_path / "sharded" / "train.bzna")
    source = ImageFolderSource(val, classes=classes)
    assert source.class_names == CLASSES and source.num_classes == 4
    summary = convert(source, tmp_path / "out" / "val.bzna", workers=0, **FAST)
    assert "warning: 1 class without images: 'dog' (target 1)" in summary.notes
    assert_numbered_as_train(tmp_path / "out" / "val.bzna")


def test_the_cli_flag_reads_a_bzna_file_or_a_text_file(splits, capsys, monkeypatch):
    tmp_path, val = splits
    monkeypatch.chdir(tmp_path / "out")
    assert main(["convert", "folder", str(val), "val.bzna", *CLI_FAST, "--classes", "train.bzna"]) == 0
    printed = capsys.readouterr().out
    assert "warning: 1 class without images: 'dog' (target 1)" in printed
    assert "class names stored (4): 0 ant, 1 dog, 2 eel, 3 zebra" in printed
    assert_numbered_as_train("val.bzna")
    (tmp_path / "names.txt").write_text("ant\ndog\neel\nzebra\n")
    argv = ["convert", "folder", str(val), "val2.bzna", *CLI_FAST, "--classes", str(tmp_path / "names.txt")]
    assert main(argv) == 0
    assert_numbered_as_train("val2.bzna")


def test_classes_are_read_by_the_bzna_dataset_as_the_folder_names(splits):
    import bzna_tf

    tmp_path, val = splits
    convert(ImageFolderSource(val, classes=CLASSES), tmp_path / "v.bzna", workers=0, **FAST)
    data = bzna_tf.ClassificationDataset(str(tmp_path / "v.bzna"))
    names = data.class_names
    assert names == CLASSES
    got = sorted((f, names[t]) for f, t in zip(data.filenames, data.targets.tolist(), strict=True))
    assert got == sorted((f, f.split("/")[0]) for f in data.filenames)


def test_a_class_folder_not_listed_is_refused_naming_it(splits):
    tmp_path, val = splits
    with pytest.raises(SourceError) as e:
        ImageFolderSource(val, classes=["ant", "dog", "zebra"])
    assert str(e.value) == (
        f"{val}: 1 class folder not among the classes given (classes=) (3 classes): 'eel'. An image of a "
        "class that is not listed has no target: add it to the classes (at the end, to keep the others' "
        f"targets), or move it out of {val}"
    )
    # A name that differs by case or surrounding spaces is pointed at.
    (tmp_path / "c.txt").write_text("ant\nEel \nzebra\n")
    with pytest.raises(SourceError, match=r"'eel' \('eel' is listed as 'Eel '\)"):
        ImageFolderSource(val, classes=tmp_path / "c.txt")
    # From a .bzna file: its names may be --class-names', not its folders'.
    convert(
        ImageFolderSource(tmp_path / "train"), tmp_path / "named.bzna", class_names=["a", "d", "e", "z"],
        workers=0, **FAST,
    )  # fmt: skip
    with pytest.raises(SourceError, match="3 class folders not among the class names stored in .*named.bzna"):
        ImageFolderSource(val, classes=tmp_path / "named.bzna")
    with pytest.raises(SourceError, match="give the folder names by target in a text file"):
        ImageFolderSource(val, classes=tmp_path / "named.bzna")


def test_a_class_listed_twice_or_an_empty_name_is_refused(tmp_path, splits):
    _, val = splits
    with pytest.raises(
        SourceError, match=r"^classes=: 1 class listed more than once: 'eel' \(targets 1, 3\)"
    ):
        ImageFolderSource(val, classes=["ant", "eel", "zebra", "eel"])
    (tmp_path / "c.txt").write_text("ant\ndog\neel\nzebra\ndog\neel\n")
    with pytest.raises(
        SourceError, match=r"c.txt: 2 classes listed more than once: 'dog' \(lines 2, 5\), 'eel'"
    ):
        ImageFolderSource(val, classes=tmp_path / "c.txt")
    (tmp_path / "c.txt").write_text("ant\n\neel\nzebra\n")  # a blank line inside: which target is it?
    with pytest.raises(SourceError, match="c.txt: line 2 is empty"):
        ImageFolderSource(val, classes=tmp_path / "c.txt")
    with pytest.raises(SourceError, match="classes=: target 1 is empty"):
        ImageFolderSource(val, classes=["ant", "", "eel", "zebra"])
    with pytest.raises(SourceError, match="classes=: no class listed"):
        ImageFolderSource(val, classes=[])
    with pytest.raises(TypeError, match="Expected `classes` as a list of class folder names"):
        ImageFolderSource(val, classes=["ant", 1])


def test_what_is_not_a_list_of_class_names_is_refused_naming_it(tmp_path, splits):
    _, val = splits
    (tmp_path / "latin1.txt").write_bytes("ant\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(SourceError, match=r"latin1.txt: not UTF-8 text \(byte 7\)"):
        ImageFolderSource(val, classes=tmp_path / "latin1.txt")
    (tmp_path / "photo.txt").write_bytes(b"\xff\xd8\xff\xe0" + bytes(60))
    with pytest.raises(
        SourceError, match=r"photo.txt: not a list of class names \(it looks like a JPEG image\)"
    ):
        ImageFolderSource(val, classes=tmp_path / "photo.txt")
    with pytest.raises(SourceError, match="nope.txt: no such file. Expected as classes a list"):
        ImageFolderSource(val, classes=str(tmp_path / "nope.txt"))
    with pytest.raises(SourceError, match="train: a folder. Expected as classes"):
        ImageFolderSource(val, classes=tmp_path / "train")


def test_a_bzna_file_without_class_names_or_with_unnamed_targets_is_refused_naming_it(tmp_path, splits):
    _, val = splits
    picture = ppm(gradient(16, 16))
    convert([Item("a.ppm", 0, picture), Item("b.ppm", 2, picture)], tmp_path / "plain.bzna", order="source",
            workers=0, **FAST)  # fmt: skip
    with pytest.raises(SourceError, match=r"plain.bzna stores no class names \(its conversion gave none\)"):
        ImageFolderSource(val, classes=tmp_path / "plain.bzna")
    items = [Item("a.ppm", 0, picture, class_name="ant"), Item("b.ppm", 2, picture, class_name="eel")]
    convert(items, tmp_path / "holes.bzna", order="source", workers=0, **FAST)
    with BznaFile(tmp_path / "holes.bzna") as f:
        assert f.class_names == ["ant", None, "eel"]
    with pytest.raises(SourceError, match=r"holes.bzna stores no name for 1 target of its 3 \(1\)"):
        ImageFolderSource(val, classes=tmp_path / "holes.bzna")


def test_class_names_rename_the_classes_given_one_per_class(splits):
    tmp_path, val = splits
    source = ImageFolderSource(val, classes=CLASSES)
    out = tmp_path / "renamed.bzna"
    with pytest.raises(
        ValueError, match=r"Expected 4 class names, one per class of the source \('ant', 'dog'"
    ):
        convert(source, out, class_names=["A", "E", "Z"], workers=0, **FAST)
    convert(source, out, class_names=["A", "D", "E", "Z"], workers=0, **FAST)
    labels, names = labels_by_folder(out)
    assert names == ["A", "D", "E", "Z"]
    assert {f: t for f, (t, _) in labels.items()} == {
        "ant/ant_0.ppm": 0,
        "eel/eel_0.ppm": 2,
        "eel/eel_1.ppm": 2,
        "zebra/zebra_0.ppm": 3,
    }


def test_the_fingerprint_has_the_classes_only_when_given(splits):
    tmp_path, val = splits
    plain = ImageFolderSource(val)
    assert sorted(plain.describe()) == ["extensions", "files", "kind"]  # as before: old conversions resume
    own = ImageFolderSource(val, classes=["ant", "eel", "zebra"])  # the same targets as without
    more = ImageFolderSource(val, classes=["ant", "eel", "zebra", "yak"])  # and a name more to store
    assert own.describe()["classes"] == ["ant", "eel", "zebra"]
    assert [i.target for i in own] == [i.target for i in plain] == [i.target for i in more]
    prints = {fingerprint(s, FAST["encoding"]) for s in (plain, own, more)}
    assert len(prints) == 3
    # A rerun with other classes is not taken for a finished file (which stores the other names).
    out = tmp_path / "v.bzna"
    convert(own, out, workers=0, **FAST)
    assert convert(own, out, workers=0, **FAST).finished == [(str(out), 4)]
    with pytest.raises(ConversionError, match="written by a conversion with other sources or options"):
        convert(more, out, workers=0, **FAST)
    summary = convert(more, out, workers=0, overwrite=True, **FAST)
    assert summary.written == [str(out)]
    assert labels_by_folder(out)[1] == ["ant", "eel", "zebra", "yak"]


def test_a_folder_without_class_folders_stores_the_classes_given(tmp_path):
    root = tmp_path / "test"
    root.mkdir()
    (root / "1.ppm").write_bytes(ppm(gradient(16, 16)))
    source = ImageFolderSource(root, classes=["ant", "dog"])
    assert [(i.filename, i.target) for i in source] == [("1.ppm", None)]
    assert source.class_names == ["ant", "dog"]


def test_every_listed_class_without_a_folder_is_named_in_the_warning(splits):
    _, val = splits
    source = ImageFolderSource(val, classes=[*CLASSES, "yak"])
    assert source.notes == ("warning: 2 classes without images: 'dog' (target 1), 'yak' (target 4)",)


def test_other_sources_refuse_the_flag(tmp_path, capsys):
    (tmp_path / "c.txt").write_text("a\n")
    argv = ["convert", "tfrecord", str(tmp_path / "x"), str(tmp_path / "o.bzna"), "--classes", "c.txt"]
    assert main(argv) == 1
    assert "--classes does not apply to tfrecord sources (--classes: folder, gulp)" in capsys.readouterr().err


# ------------------------------------------------------------- a held-out split beside its training file


def test_a_validation_split_numbered_unlike_the_training_file_beside_it_is_refused(
    splits, capsys, monkeypatch
):
    tmp_path, val = splits
    out = tmp_path / "out" / "val.bzna"
    with pytest.raises(SourceError) as e:
        convert(ImageFolderSource(val), out, workers=0, **FAST)
    train = str(tmp_path / "out" / "train.bzna")
    assert str(e.value) == (
        f"{val}: its classes, numbered by its own folders, would get other targets than in train.bzna beside "
        "val.bzna: 'eel' would be target 1 here and is target 2 there; this folder has no 'dog'. Pass "
        f"classes={train!r} (--classes {train}) to number them as train.bzna does; or, to number this "
        "folder's classes on their own, give them yourself (classes=[...], --classes FILE: one class folder "
        "name per line, by target)"
    )
    assert not out.exists()
    for folder in (tmp_path / "out", f"{tmp_path / 'out'}/"):  # not a file name: said as before
        with pytest.raises(ValueError, match="Expected an output file name"):
            convert(ImageFolderSource(val), folder, workers=0, **FAST)
    monkeypatch.chdir(tmp_path / "out")
    assert main(["convert", "folder", str(val), "val.bzna", *CLI_FAST]) == 1
    assert "Pass classes='train.bzna' (--classes train.bzna)" in capsys.readouterr().err
    # What the message says works.
    assert main(["convert", "folder", str(val), "val.bzna", *CLI_FAST, "--classes", "train.bzna"]) == 0
    assert_numbered_as_train(out)


def test_training_shards_beside_are_named_by_the_name_they_derive_from(tmp_path):
    train = make_folder(tmp_path / "train", TRAIN, size=(16, 16))
    val = make_folder(tmp_path / "val", VAL, size=(16, 16))
    convert(ImageFolderSource(train), tmp_path / "out" / "train.bzna", num_shards=2, workers=0, **FAST)
    with pytest.raises(
        SourceError, match="than in train-\\*-of-00002.bzna beside test.bzna.*--classes .*train.bzna\\)"
    ):
        convert(ImageFolderSource(val), tmp_path / "out" / "test.bzna", workers=0, **FAST)


def test_nothing_is_said_where_the_numbering_is_not_surely_wrong(tmp_path):
    """Refused only where all holds: a held-out name, a training file beside, every class in it, another
    target for one; each case below lacks one of them (the first is refused, as a control)."""
    cases = {
        "refused": (TRAIN, VAL, "val.bzna", "train.bzna"),
        "same classes": (TRAIN, TRAIN, "val.bzna", "train.bzna"),
        # An unrelated training file: not all of val's classes are in it.
        "other classes": ({"ant": 1, "bee": 1, "zebra": 1}, VAL, "val.bzna", "train.bzna"),
        "output named train": (TRAIN, VAL, "train-small.bzna", "train.bzna"),
        "not a held-out name": (TRAIN, VAL, "pets.bzna", "train.bzna"),
        "no train file": (TRAIN, VAL, "val.bzna", "pets.bzna"),
    }
    for case, (train_classes, val_classes, output, sibling) in cases.items():
        base = tmp_path / case.replace(" ", "-")
        make_folder(base / "a", train_classes, size=(16, 16))
        root = make_folder(
            base / ("b" if case == "not a held-out name" else "val"), val_classes, size=(16, 16)
        )
        convert(ImageFolderSource(base / "a"), base / "out" / sibling, workers=0, **FAST)
        if case == "refused":
            with pytest.raises(SourceError, match="would get other targets than in train.bzna"):
                convert(ImageFolderSource(root), base / "out" / output, workers=0, **FAST)
            continue
        summary = convert(ImageFolderSource(root), base / "out" / output, workers=0, **FAST)
        assert summary.written == [str(base / "out" / output)], case


def test_only_the_training_file_of_the_same_dataset_is_looked_at(tmp_path):
    """/out/cifar10-train.bzna (airplane..truck) beside /out/pets-val.bzna from pets-val/{cat,dog}: another
    dataset, whose numbering says nothing of this one's. Only the output's name with its split word swapped
    for train/training (compared by words and numbers, case-insensitively) is this dataset's training file."""
    cifar10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    cifar = make_folder(tmp_path / "cifar10-train", dict.fromkeys(cifar10, 1), size=(16, 16))
    pets = make_folder(tmp_path / "pets-val", {"cat": 1, "dog": 1}, size=(16, 16))
    out = tmp_path / "out"
    convert(ImageFolderSource(cifar), out / "cifar10-train.bzna", workers=0, **FAST)
    summary = convert(ImageFolderSource(pets), out / "pets-val.bzna", workers=0, **FAST)
    assert summary.written == [str(out / "pets-val.bzna")]

    # The names that are, and are not, this dataset's training file (copies of one: only the names differ).
    train = make_folder(tmp_path / "train", TRAIN, size=(16, 16))
    convert(ImageFolderSource(train), tmp_path / "one" / "t.bzna", workers=0, **FAST)
    convert(ImageFolderSource(train), tmp_path / "two" / "t.bzna", num_shards=2, workers=0, **FAST)
    val = make_folder(tmp_path / "val", VAL, size=(16, 16))
    cases = [  # (output, the training file beside it, refused)
        ("pets-val.bzna", "pets-train.bzna", True),
        ("pets-val.bzna", "pets_training.bzna", True),
        ("val.bzna", "train.bzna", True),
        ("CIFAR10-Val.bzna", "cifar10-TRAIN.bzna", True),
        ("imagenet-validation.bzna", "imagenet-train-*-of-00002.bzna", True),
        ("imagenet-validation-00000-of-00004.bzna", "imagenet-train-*-of-00002.bzna", True),
        ("pets-val.bzna", "cifar10-train.bzna", False),
        ("cifar10-val.bzna", "cifar100-train.bzna", False),
        ("val.bzna", "pets-train.bzna", False),
        ("pets-val.bzna", "train.bzna", False),
        ("pets-test.bzna", "pets-train-small.bzna", False),
    ]
    check = ImageFolderSource(val).check_output
    for k, (output, beside, refused) in enumerate(cases):
        folder = tmp_path / f"case{k}"
        folder.mkdir()
        if "*" in beside:
            for i in range(2):
                shard = tmp_path / "two" / f"t-0000{i}-of-00002.bzna"
                (folder / beside.replace("*", f"0000{i}")).write_bytes(shard.read_bytes())
        else:
            (folder / beside).write_bytes((tmp_path / "one" / "t.bzna").read_bytes())
        if refused:
            with pytest.raises(SourceError, match=f"would get other targets than in {re.escape(beside)}"):
                check(folder / output)
        else:
            check(folder / output)  # nothing said: not this dataset's training file


@pytest.mark.parametrize(
    "splits_named",
    [("train", "val"), ("train2017", "val2017", "test2017"), ("seg_train", "seg_test"), ("val",)],
)
def test_a_root_of_split_folders_is_refused_as_classes(tmp_path, splits_named):
    # dogs_vs_cats/{train,val}/{cat,dog}/... converted as one folder made the splits the classes: every
    # training image labelled 0 and every validation image 1, in one file, without a word.
    root = tmp_path / "pets"
    for split in splits_named:
        make_folder(root / split, {"cat": 1, "dog": 1}, size=(16, 16))
    with pytest.raises(SourceError, match="named as splits of a dataset") as e:
        ImageFolderSource(root)
    first = splits_named[0]  # the training split's, where there is one
    spaced = tmp_path / "my pets"
    root.rename(spaced)
    with pytest.raises(SourceError, match=f"bzna-tf convert folder '{spaced / first}' {first}.bzna"):
        ImageFolderSource(spaced)  # commands to paste: the paths quoted
    spaced.rename(root)
    assert f"bzna-tf convert folder {root / first} {first}.bzna" in str(e.value)
    assert f"{first}/cat/" in str(e.value)
    assert "--classes FILE" in str(e.value)
    # Given as the classes, they are: the caller chose.
    source = ImageFolderSource(root, classes=list(splits_named))
    assert source.classes == list(splits_named)


def test_split_named_classes_of_images_or_beside_other_classes_are_classes(tmp_path):
    # Refused only where every class folder is named as a split of one dataset and holds folders: "test"
    # and "train" as classes of images (system folders in them are no folders), beside other classes, or
    # names that merely hold a split word, stay classes.
    flat = make_folder(tmp_path / "flat", {"train": 1, "test": 1}, size=(16, 16))
    for name in ("train", "test"):
        (flat / name / "@eaDir").mkdir()
        (flat / name / "__MACOSX").mkdir()
    assert ImageFolderSource(flat).classes == ["test", "train"]
    for classes in (("test_negative", "test_positive"), ("not_valid", "valid")):
        root = tmp_path / classes[0]
        for name in classes:
            make_folder(root / name, {"patient1": 1}, size=(16, 16))
        assert ImageFolderSource(root).classes == list(classes)
    mixed = make_folder(tmp_path / "mixed", {"cat": 1}, size=(16, 16))
    make_folder(mixed / "train", {"a": 1}, size=(16, 16))
    assert ImageFolderSource(mixed).classes == ["cat", "train"]


def test_an_empty_last_class_folder_still_counts_in_num_classes(tmp_path):
    # train/{ant,bee,zebra} with zebra/ empty: num_classes was 2 (1 + the largest target), one short of the
    # class names, so Dense(num_classes) could not output the zebra that another split stores as 2.
    from bzna_tf import ClassificationDataset

    root = make_folder(tmp_path / "train", {"ant": 1, "bee": 1}, size=(16, 16))
    (root / "zebra").mkdir()
    convert(ImageFolderSource(root), tmp_path / "train.bzna", workers=0, **FAST)
    ds = ClassificationDataset(tmp_path / "train.bzna")
    assert ds.class_names == ["ant", "bee", "zebra"] and ds.num_classes == 3
    assert ds.targets.max() == 1
