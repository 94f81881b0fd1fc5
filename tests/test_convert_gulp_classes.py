"""A GulpIO source's classes given (``classes=``, ``--classes``), and a held-out split numbered unlike the
training file beside it refused, as for image folders (test_convert_folder_classes.py).

String labels are numbered by their sorted order within the chunks converted: a ``val/`` whose videos lack
``dog`` stored its ``eel`` frames as target 1, the training file's ``dog``, without a word.
"""

import pytest
from conftest import gradient
from test_convert import write_gulp_chunk
from test_convert_shards import FAST

from bzna_tf.cli import main
from bzna_tf.convert import ConversionError, GulpSource, convert
from bzna_tf.convert.plan import fingerprint
from bzna_tf.convert.sources import SourceError
from bzna_tf.format import BznaFile

CLASSES = ["cat", "dog", "eel"]
CLI_FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


def frames(seed, n=1):
    return [gradient(8, 8, seed=seed * 10 + k) for k in range(n)]


@pytest.fixture()
def splits(tmp_path):
    """gulp/train (videos cat, dog, eel) converted to out/train.bzna; gulp/val without a dog video."""
    write_gulp_chunk(tmp_path / "train", 0, {"t1": ("cat", frames(1)), "t2": ("dog", frames(2)),
                                            "t3": ("eel", frames(3))})  # fmt: skip
    write_gulp_chunk(tmp_path / "val", 0, {"v1": ("cat", frames(4)), "v3": ("eel", frames(5, 2))})
    convert(GulpSource(tmp_path / "train"), tmp_path / "out" / "train.bzna", workers=0, **FAST)
    return tmp_path, tmp_path / "val"


def stored(path):
    """{stored name: target} of a .bzna file, and its class names."""
    with BznaFile(path) as f:
        return dict(zip(f.filenames(), f.targets.tolist(), strict=True)), f.class_names


def assert_numbered_as_train(path):
    assert stored(path) == ({"v1_0000.jpg": 0, "v3_0000.jpg": 2, "v3_0001.jpg": 2}, CLASSES)


def test_a_validation_split_numbered_unlike_the_training_file_beside_it_is_refused(
    splits, capsys, monkeypatch
):
    tmp_path, val = splits
    out = tmp_path / "out" / "val.bzna"
    with pytest.raises(SourceError) as e:
        convert(GulpSource(val), out, workers=0, **FAST)
    train = str(tmp_path / "out" / "train.bzna")
    assert str(e.value) == (
        f"{val}: its classes, numbered by the sorted labels of its videos, would get other targets than in "
        "train.bzna beside val.bzna: 'eel' would be target 1 here and is target 2 there; no video here is "
        f"labelled 'dog'. Pass classes={train!r} (--classes {train}) to number them as train.bzna does; or, "
        "to number these videos' labels on their own, give them yourself (classes=[...], --classes FILE: "
        "one label per line, by target)"
    )
    assert not out.exists()
    monkeypatch.chdir(tmp_path / "out")
    assert main(["convert", "gulp", str(val), "val.bzna", *CLI_FAST]) == 1
    assert "Pass classes='train.bzna' (--classes train.bzna)" in capsys.readouterr().err
    # What the message says works: eel is target 2, as in train.bzna.
    assert main(["convert", "gulp", str(val), "val.bzna", *CLI_FAST, "--classes", "train.bzna"]) == 0
    assert "class names stored (3): 0 cat, 1 dog, 2 eel" in capsys.readouterr().out
    assert_numbered_as_train(out)


@pytest.mark.parametrize("how", ["list", "text file", "bzna"])
def test_the_classes_given_number_the_string_labels(splits, how):
    tmp_path, val = splits
    if how == "list":
        classes = list(CLASSES)
    elif how == "text file":
        classes = tmp_path / "classes.txt"
        classes.write_text("cat\ndog\neel\n")
    else:
        classes = str(tmp_path / "out" / "train.bzna")
    source = GulpSource(val, classes=classes)
    assert source.label_map == {"cat": 0, "eel": 2}
    assert source.class_names == CLASSES and source.num_classes == 3
    convert(source, tmp_path / "out" / "val.bzna", workers=0, **FAST)
    assert_numbered_as_train(tmp_path / "out" / "val.bzna")


def test_a_label_not_listed_is_refused_naming_its_video_and_chunk(splits):
    tmp_path, val = splits
    with pytest.raises(SourceError) as e:
        GulpSource(val, classes=["cat", "dog"])
    assert str(e.value) == (
        f"{val}: 1 label not among the classes given (classes=) (2 classes): 'eel' (video 'v3' in "
        f"{val / 'data_0.gulp'}). A video whose label is not listed has no target: add it to the classes (at "
        "the end, to keep the others' targets)"
    )
    (tmp_path / "c.txt").write_text("cat\nEel \n")
    with pytest.raises(SourceError, match=r"'eel' \(video 'v3' in .*\) \('eel' is listed as 'Eel '\)"):
        GulpSource(val, classes=tmp_path / "c.txt")
    (tmp_path / "c.txt").write_text("cat\n\neel\n")
    with pytest.raises(SourceError, match="c.txt: line 2 is empty: each target needs the label of its video"):
        GulpSource(val, classes=tmp_path / "c.txt")
    with pytest.raises(TypeError, match="Expected `classes` as a list of labels by target"):
        GulpSource(val, classes=["cat", 1])


def test_integer_labels_and_a_label_map_with_the_classes_are_refused(tmp_path):
    write_gulp_chunk(tmp_path / "g", 0, {"a": (0, frames(1)), "b": (1, frames(2))})
    with pytest.raises(SourceError) as e:
        GulpSource(tmp_path / "g", classes=["cat", "dog"])
    assert str(e.value) == (
        f"the 'label' labels are integers (video 'a' in {tmp_path / 'g' / 'data_0.gulp'}), targets already: "
        "classes (--classes) numbers string labels. Leave it out; to store class names for the integers, "
        "give them with --class-names (class_names=), one per target"
    )
    write_gulp_chunk(tmp_path / "s", 0, {"a": ("cat", frames(1))})
    with pytest.raises(ValueError, match="Expected classes= or label_map=, not both"):
        GulpSource(tmp_path / "s", classes=["cat"], label_map={"cat": 0})


def test_the_fingerprint_has_the_classes_only_when_given(splits):
    tmp_path, val = splits
    plain = GulpSource(val)
    assert "classes" not in plain.describe()  # as before: old conversions resume
    own = GulpSource(val, classes=["cat", "eel"])  # the same targets as without
    more = GulpSource(val, classes=["cat", "eel", "yak"])  # and a name more to store
    assert own.describe()["classes"] == ["cat", "eel"]
    assert [i.target for i in own] == [i.target for i in plain] == [i.target for i in more]
    assert len({fingerprint(s, FAST["encoding"]) for s in (plain, own, more)}) == 3
    out = tmp_path / "v.bzna"
    convert(own, out, workers=0, **FAST)
    with pytest.raises(ConversionError, match="written by a conversion with other sources or options"):
        convert(more, out, workers=0, **FAST)


def test_nothing_is_said_where_the_labels_are_not_numbered_by_their_sorted_order(splits):
    """Refused only where the labels are strings numbered here (the first case is refused, as a control)."""
    tmp_path, val = splits
    out = tmp_path / "out" / "val.bzna"
    with pytest.raises(SourceError, match="would get other targets than in train.bzna"):
        GulpSource(val).check_output(out)
    GulpSource(val, label_map={"cat": 0, "eel": 2}).check_output(out)  # numbered as the user says
    GulpSource(val, classes=["cat", "eel"]).check_output(out)  # the user's own numbering
    GulpSource(val).check_output(tmp_path / "out" / "train-small.bzna")  # not a held-out split
    write_gulp_chunk(tmp_path / "ints", 0, {"v1": (0, frames(1)), "v3": (1, frames(2))})
    GulpSource(tmp_path / "ints").check_output(out, class_names=["cat", "eel"])  # integers: targets already


def test_the_cli_flag_names_the_sources_that_take_it(tmp_path, capsys):
    (tmp_path / "c.txt").write_text("a\n")
    argv = ["convert", "tfrecord", str(tmp_path / "x"), str(tmp_path / "o.bzna"), "--classes", "c.txt"]
    assert main(argv) == 1
    assert "--classes does not apply to tfrecord sources (--classes: folder, gulp)" in capsys.readouterr().err
