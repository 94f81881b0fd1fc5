"""Class folders as other systems and tools leave them: names in two Unicode forms, system folders, links
up the tree, class names that repeat.

A validation folder copied from a Mac spelled "école" in NFD, the training folder in NFC: sorted, the
two numbered the classes differently ("e" + U+0301 sorts before "z", "é" after), and the check against
the training file beside it looked only where every name was spelled alike. A ``__MACOSX`` folder (a
zip file unpacked from a Mac) was class 0 of an empty class, and numbered every other class one higher.
"""

import os
import unicodedata

import pytest
from test_convert_shards import FAST, make_folder

from bzna_tf.cli import main
from bzna_tf.convert import ImageFolderSource, convert
from bzna_tf.convert.sources import SourceError
from bzna_tf.format import BznaFile

CLI_FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]
NFC, NFD = (unicodedata.normalize(form, "école") for form in ("NFC", "NFD"))


def stored(path):
    """{stored name: stored class name of its target}, and the class names."""
    with BznaFile(path) as f:
        names = f.class_names
        return {n: names[t] for n, t in zip(f.filenames(), f.targets.tolist(), strict=True)}, names


def test_a_validation_folder_in_another_unicode_form_is_refused_and_classes_numbers_it(tmp_path, capsys):
    train = make_folder(tmp_path / "train", {NFC: 1, "zoo": 1}, size=(16, 16))
    val = make_folder(tmp_path / "val", {NFD: 1, "zoo": 1}, size=(16, 16))
    out = tmp_path / "out"
    convert(ImageFolderSource(train), out / "train.bzna", workers=0, **FAST)
    assert stored(out / "train.bzna")[1] == ["zoo", NFC]
    assert ImageFolderSource(val).class_names == [NFD, "zoo"]  # numbered on its own: swapped
    with pytest.raises(SourceError) as e:
        convert(ImageFolderSource(val), out / "val.bzna", workers=0, **FAST)
    assert f"{val}: its classes, numbered by its own folders, would get other targets than in train.bzna" in (
        str(e.value)
    )
    assert f"{NFD!r} would be target 0 here and is target 1 there. Pass classes=" in str(e.value)
    assert not (out / "val.bzna").exists()
    # What the message says works: the folder of the NFD name is the listed NFC class's, stored as listed.
    argv = [
        "convert",
        "folder",
        str(val),
        str(out / "val.bzna"),
        *CLI_FAST,
        "--classes",
        str(out / "train.bzna"),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    labels, names = stored(out / "val.bzna")
    assert names == ["zoo", NFC] and labels == {f"{NFD}/{NFD}_0.ppm": NFC, "zoo/zoo_0.ppm": "zoo"}


def test_the_same_targets_under_names_of_another_form_are_refused_too(tmp_path):
    # Numbered alike, but stored as other names: readers refuse the two files together.
    train = make_folder(tmp_path / "train", {"ant": 1, NFC: 1}, size=(16, 16))
    val = make_folder(tmp_path / "val", {"ant": 1, NFD: 1}, size=(16, 16))
    convert(ImageFolderSource(train), tmp_path / "train.bzna", workers=0, **FAST)
    with pytest.raises(SourceError) as e:
        convert(ImageFolderSource(val), tmp_path / "val.bzna", workers=0, **FAST)
    assert (
        f"its class 1 would be stored under another name than in train.bzna beside val.bzna: {NFD!r} (NFD: "
        f"{ascii(NFD)}) and {NFC!r} (NFC: {ascii(NFC)}), one name in two Unicode forms" in str(e.value)
    )


def test_two_class_folders_of_one_name_in_two_forms_are_refused(tmp_path):
    root = make_folder(tmp_path / "m", {NFC: 1, NFD: 1, "dog": 1}, size=(16, 16))
    with pytest.raises(SourceError, match="are one name in two Unicode forms .*Move the images of one"):
        ImageFolderSource(root)
    with pytest.raises(SourceError, match="1 class listed more than once"):
        ImageFolderSource(make_folder(tmp_path / "n", {"dog": 1}, size=(16, 16)), classes=[NFC, NFD, "dog"])


def test_system_folders_are_not_classes_nor_images(tmp_path):
    train = make_folder(tmp_path / "train", {"cat": 1, "dog": 1}, size=(16, 16))
    val = make_folder(tmp_path / "val", {"cat": 1, "dog": 1}, size=(16, 16))
    (val / "__MACOSX" / "cat").mkdir(parents=True)
    (val / "__MACOSX" / "cat" / "._cat_0.ppm").write_bytes(b"\x00\x05\x16\x07 resource fork")
    (val / "dog" / "@eaDir" / "dog_0.ppm").mkdir(parents=True)  # Synology's thumbnails of dog_1.ppm
    (val / "dog" / "@eaDir" / "dog_0.ppm" / "SYNOPHOTO_THUMB_M.ppm").write_bytes(
        (val / "dog" / "dog_0.ppm").read_bytes()
    )
    out = tmp_path / "out"
    convert(ImageFolderSource(train), out / "train.bzna", workers=0, **FAST)
    source = ImageFolderSource(val)
    assert source.class_names == ["cat", "dog"] and len(source) == 2
    assert (
        "not taken: 2 system folders (zip metadata, thumbnails, ...: no images of their own) ('__MACOSX', "
        "'dog/@eaDir')" in source.notes
    )
    convert(source, out / "val.bzna", workers=0, **FAST)
    assert stored(out / "val.bzna") == ({"cat/cat_0.ppm": "cat", "dog/dog_0.ppm": "dog"}, ["cat", "dog"])


def test_a_class_folder_linking_up_the_tree_is_refused(tmp_path):
    root = make_folder(tmp_path / "m", {"cat": 1, "dog": 1}, size=(16, 16))
    os.symlink(".", root / "all")
    with pytest.raises(SourceError, match=r"the class folder 'all' is a symbolic link to .*, which holds .*m "
                       "itself: it would be a class without images of its own"):  # fmt: skip
        ImageFolderSource(root)
    os.remove(root / "all")
    os.symlink("..", root / "up")
    with pytest.raises(SourceError, match="the class folder 'up' is a symbolic link"):
        ImageFolderSource(root)


def test_an_output_in_a_folder_of_the_source_without_images_is_refused(tmp_path, capsys):
    # `convert folder m m/bzna/x.bzna` made m/bzna before listing m: an empty class 'bzna' at target 0, every
    # other class one higher, with a one-line warning (from Python: 3 classes, then 4 on a rerun).
    root = make_folder(tmp_path / "m", {"cat": 1, "dog": 1}, size=(16, 16))
    why = "taken as a class folder, so 'bzna' would be a class without images"
    for out in (root / "bzna" / "x.bzna", root / "bzna" / "sub" / "x.bzna"):
        assert main(["convert", "folder", str(root), str(out), *CLI_FAST, "--num-shards", "2"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"bzna-tf convert: {root}: the output {out} would be written in {root}/bzna, ")
        assert why in err and f"Write the output outside {root} (such as {tmp_path}/bzna/" in err, err
        assert sorted(os.listdir(root)) == ["cat", "dog"]  # nothing made
    # From Python: before the folder is made, and after (then listed as a class without images).
    with pytest.raises(SourceError, match=f"written in .*bzna, a folder that would be made in .*{why}"):
        convert(ImageFolderSource(root), root / "bzna" / "train.bzna", num_shards=2, workers=0, **FAST)
    assert sorted(os.listdir(root)) == ["cat", "dog"]
    (root / "bzna").mkdir()
    with pytest.raises(SourceError, match=f"bzna, a folder of .*m without images: .*{why}.*remove .*bzna if"):
        convert(ImageFolderSource(root), root / "bzna" / "train.bzna", workers=0, **FAST)
    assert main(["convert", "folder", str(root), str(root / "bzna" / "x.bzna"), *CLI_FAST]) == 1
    assert why in capsys.readouterr().err and os.listdir(root / "bzna") == []
    os.rmdir(root / "bzna")
    # A folder of m that is a link to the output's folder, outside m (given by its real path): listed too.
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "out")
    with pytest.raises(SourceError, match=r"in .*m/out, a folder of .*m without images: .*'out' would"):
        convert(ImageFolderSource(root), tmp_path / "elsewhere" / "train.bzna", workers=0, **FAST)
    assert os.listdir(tmp_path / "elsewhere") == []
    os.remove(root / "out")
    # A folder of unlabelled images: its new folder would make them images beside a class folder.
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.ppm").write_bytes((root / "cat" / "cat_0.ppm").read_bytes())
    with pytest.raises(SourceError, match="'out' would be a class without images"):
        convert(ImageFolderSource(flat), flat / "out" / "test.bzna", workers=0, **FAST)
    # In a class folder, at the top level, in a hidden folder: never a class; a rerun skips the files.
    for out in (root / "cat" / "x.bzna", root / "y.bzna", root / ".out" / "z.bzna"):
        for _ in range(2):
            assert main(["convert", "folder", str(root), str(out), *CLI_FAST, "--num-shards", "2"]) == 0
        printed = capsys.readouterr().out
        assert "skipped 2 files that were already converted" in printed and "without images" not in printed
        with BznaFile(str(out.parent / f"{out.stem}-00000-of-00002.bzna")) as f:
            assert f.class_names == ["cat", "dog"]


def test_class_names_that_repeat_number_a_validation_folder_as_the_training_file(tmp_path, capsys):
    # ImageNet's names repeat ("crane" the bird and the machine): a name is at several targets.
    (tmp_path / "names.txt").write_text("crane\ncrane\nmaillot\n")
    train = make_folder(tmp_path / "train", {"n01": 1, "n02": 1, "n03": 1}, size=(16, 16))
    val = make_folder(tmp_path / "val", {"n01": 1, "n02": 1, "n03": 1}, size=(16, 16))
    flags = [*CLI_FAST, "--class-names", str(tmp_path / "names.txt")]
    assert main(["convert", "folder", str(train), str(tmp_path / "o" / "train.bzna"), *flags]) == 0
    assert main(["convert", "folder", str(val), str(tmp_path / "o" / "val.bzna"), *flags]) == 0
    assert stored(tmp_path / "o" / "val.bzna")[1] == ["crane", "crane", "maillot"]
    # A folder that does move a class: the names file the message asks for, not the .bzna file (which
    # --classes refuses: its names repeat).
    short = make_folder(tmp_path / "short", {"n01": 1, "n03": 1}, size=(16, 16))
    (tmp_path / "two.txt").write_text("crane\nmaillot\n")
    argv = ["convert", "folder", str(short), str(tmp_path / "o" / "test.bzna"), *CLI_FAST]
    assert main([*argv, "--class-names", str(tmp_path / "two.txt")]) == 1
    err = capsys.readouterr().err
    assert "'maillot' would be target 1 here and is target 2 there" in err
    assert "Give the class folder names by target, as train.bzna was converted from them" in err
    (tmp_path / "folders.txt").write_text("n01\nn02\nn03\n")
    assert (
        main(
            [*argv, "--classes", str(tmp_path / "folders.txt"), "--class-names", str(tmp_path / "names.txt")]
        )
        == 0
    )


def test_a_validation_folder_with_a_class_of_its_own_is_checked_on_the_classes_it_shares(tmp_path):
    train = make_folder(tmp_path / "train", {"ant": 1, "bee": 1, "cat": 1}, size=(16, 16))
    val = make_folder(tmp_path / "val", {"ant": 1, "cat": 1, "extra": 1}, size=(16, 16))
    convert(ImageFolderSource(train), tmp_path / "train.bzna", workers=0, **FAST)
    with pytest.raises(
        SourceError, match="'cat' would be target 1 here and is target 2 there; this folder has no 'bee'"
    ):
        convert(ImageFolderSource(val), tmp_path / "val.bzna", workers=0, **FAST)


def test_class_folders_that_differ_only_in_case_are_two_classes_with_a_warning(tmp_path):
    root = make_folder(tmp_path / "m", {"Cat": 1, "cat": 1, "dog": 1}, size=(16, 16))
    source = ImageFolderSource(root)
    assert source.class_names == ["Cat", "cat", "dog"]  # as Keras and torchvision number them
    assert (
        "warning: class folders whose names differ only in case or surrounding spaces, each its own class: "
        "'Cat', 'cat' (merge them if they are one class)" in source.notes
    )
    assert not any("differ only" in n for n in ImageFolderSource(make_folder(tmp_path / "n", {"a": 1})).notes)
