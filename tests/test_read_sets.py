"""Which files read as one dataset, and which are refused: ImageNet's per-split files named by a pattern
or a list, shard sets of two conversions, files whose class names disagree, a file spelled as a file://
URL, a copy under another name, a shard numbered past its count."""

import os
import shutil
import warnings

import numpy as np
import pytest
from conftest import gradient

import bzna_tf
import bzna_tf.format.splits as splits
from bzna_tf import BznaWriter, ClassificationDataset, Dataset, ImageNet, open_bzna


@pytest.fixture(scope="module")
def encoded():
    """Four small encoded pictures (input, thumb), of flat colours."""
    from bzna_tf.convert import encode_image

    return [
        encode_image(np.full((16 + 4 * i, 24, 3), 40 * i + 20, np.uint8), preset="ultrafast")
        for i in range(4)
    ]


def write(path, encoded, n, *, prefix=None, target=lambda k: k % 3, **writer):
    """A .bzna file of n pictures named PREFIX_k.png (PREFIX: the file's stem), targets target(k)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = prefix or path.stem
    with BznaWriter(path, **writer) as w:
        for k in range(n):
            inp, thumb = encoded[k % len(encoded)]
            w.append(inp, thumb=thumb, target=target(k), filename=f"{prefix}_{k}.png")
    return path


def names(ds):
    return [n.split("_")[0] for n in ds.filenames]


# ------------------------------------------------------------------------ class names that disagree


def test_files_whose_class_names_disagree_are_refused_when_opened(tmp_path, encoded):
    d = tmp_path / "imagenet"
    write(d / "train.bzna", encoded, 6, metadata={"class_names": ["cat", "dog", "eel"]})
    # Converted apart from a folder without "dog": its "eel" is target 1, train's "dog".
    write(d / "val.bzna", encoded, 4, target=lambda k: k % 2, metadata={"class_names": ["cat", "eel"]})
    pair = [str(d / "train.bzna"), str(d / "val.bzna")]
    for opening in (
        lambda: ClassificationDataset(pair),
        lambda: ImageNet(d, split="val"),
        lambda: ImageNet(d, split="train"),
    ):
        with pytest.raises(ValueError) as e:
            opening()
        assert str(e.value).startswith(
            f"{d / 'val.bzna'}: class 1 is named 'dog' in an earlier file ({d / 'train.bzna'}) and 'eel' here"
        )
        assert "--class-names" in str(e.value)
    assert len(Dataset(pair)) == 10  # pictures only: no labels to mismatch
    assert len(ImageNet(d / "val.bzna")) == 4  # one file alone


def test_files_whose_class_names_agree_or_are_missing_read_together(tmp_path, encoded):
    a = write(tmp_path / "a.bzna", encoded, 3, metadata={"class_names": ["cat", None, "eel"]})
    b = write(tmp_path / "b.bzna", encoded, 3, metadata={"class_names": [None, "dog"]})
    c = write(tmp_path / "c.bzna", encoded, 3)
    assert ClassificationDataset([a, b, c]).class_names == ["cat", "dog", "eel"]
    assert ClassificationDataset([c]).class_names is None


# ---------------------------------------------------------------- shard sets of two conversions


def facts(shard, num_shards, start, stop, changes):
    out = {
        "fingerprint": "f" * 32,
        "sibling_fingerprint": "s" * 32,
        "shard": shard,
        "num_shards": num_shards,
        "start": start,
        "stop": stop,
        "order": "shuffle",
        "seed": 0,
        "skipped": [],
    }
    out.update(changes)
    return out


def shard_set(folder, encoded, changes=None, *, per_shard=3, count=3, metadata=True, prefix="s"):
    """count shards of per_shard pictures whose conversion facts tile [0, count * per_shard), named
    PREFIXk_i.png; changes: {shard: fact changes}."""
    changes = changes or {}
    for k in range(count):
        meta = {"conversion": facts(k, count, k * per_shard, (k + 1) * per_shard, changes.get(k, {}))}
        write(
            folder / f"train-{k:05d}-of-{count:05d}.bzna",
            encoded,
            per_shard,
            prefix=f"{prefix}{k}",
            metadata=meta if metadata else None,
        )
    return folder


def ranges(pairs):
    return {k: {"sibling_fingerprint": None, "start": s, "stop": e} for k, (s, e) in enumerate(pairs)}


@pytest.mark.parametrize(
    "changes, differs",
    [
        ({0: {"seed": 1, "fingerprint": "g" * 32}}, "seed 1 and seed 0"),
        ({1: {"order": "source", "seed": None}}, "order 'shuffle' and order 'source'"),
        ({2: {"sibling_fingerprint": "t" * 32}}, "other sources or options"),
        # Shards written before the sibling fingerprint was recorded: their positions still tell.
        (ranges([(0, 3), (2, 6), (6, 9)]), r"positions \[0, 3\) and \[2, 6\), which overlap"),
        (ranges([(0, 3), (4, 6), (6, 9)]), r"positions \[0, 3\) and \[4, 6\), which leave position 3 out"),
        (ranges([(0, 3), (3, 5), (8, 9)]), r"\[3, 5\) and \[8, 9\), which leave positions 5 to 7 out"),
        (ranges([(1, 3), (3, 6), (6, 9)]), r"shard 0 holds positions \[1, 3\) of its conversion"),
        ({0: {"shard": 1}}, "the other records shard 1 of 3"),
    ],
)
def test_shards_of_two_conversions_are_refused(tmp_path, encoded, changes, differs):
    d = shard_set(tmp_path / "set", encoded, changes)
    for root in (d, str(d / "train-*.bzna"), sorted(str(p) for p in d.iterdir())):
        for cls in (Dataset, ClassificationDataset):
            with pytest.raises(ValueError, match=differs) as e:
                cls(root)
            text = str(e.value)
            assert "written by two conversions" in text and "--overwrite" in text
            assert text.count(str(d / "train-0000")) == 2  # names both files


def test_verify_reports_a_shard_set_of_two_conversions(tmp_path, encoded, capsys):
    # verify checked the files one by one and said OK (exit 0) for a set that every reader then refused.
    from bzna_tf.cli import main
    from bzna_tf.verify import verify

    d = shard_set(tmp_path / "set", encoded, {0: {"seed": 1, "fingerprint": "g" * 32}})
    report = verify(d, decode=False)
    assert all(f.ok for f in report.files) and not report.ok
    (why,) = report.sets
    assert "written by two conversions" in why and "seed 1 and seed 0" in why
    assert report.to_json()["sets"] == [why]
    assert main(["verify", str(d), "--no-decode", "--no-progress"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == f"shard set: {why}"
    assert out[-1].endswith(": 0 damaged samples, 1 shard set of two conversions")
    good = shard_set(tmp_path / "good", encoded)
    assert verify(good, decode=False).ok and verify(good, decode=False).sets == []


def test_shards_of_one_conversion_read_as_one_set(tmp_path, encoded):
    # Array tasks that read their own copies of the sources: fingerprints differ (mtimes), siblings agree.
    d = shard_set(tmp_path / "tasks", encoded, {1: {"fingerprint": "1" * 32}, 2: {"fingerprint": "2" * 32}})
    assert len(ClassificationDataset(d)) == 9
    # Older shards without a sibling fingerprint, and files without conversion facts (the original tools').
    d = shard_set(tmp_path / "old", encoded, {k: {"sibling_fingerprint": None} for k in range(3)})
    assert len(ClassificationDataset(d)) == 9
    assert len(ClassificationDataset(shard_set(tmp_path / "none", encoded, metadata=False))) == 9
    # Whole conversions named as the shards of a set (each converted alone): not one conversion's shards.
    d = shard_set(
        tmp_path / "apart",
        encoded,
        {k: {"shard": 0, "num_shards": 1, "start": 0, "stop": 3} for k in range(3)},
    )
    assert len(ClassificationDataset(d)) == 9
    # An explicit subset of one conversion's shards, listed or picked by a pattern (as conversion takes it).
    d = shard_set(tmp_path / "subset", encoded)
    assert len(Dataset([str(d / "train-00000-of-00003.bzna"), str(d / "train-00002-of-00003.bzna")])) == 6
    assert len(Dataset(str(d / "train-0000[02]-of-00003.bzna"))) == 6
    assert len(ClassificationDataset(str(d / "train-0000[0-1]-of-*.bzna"))) == 6


def test_shards_of_one_set_listed_out_of_order_are_refused(tmp_path, encoded):
    # A list is read in the order given and its order numbers the samples. Shards out of their order come
    # from a listing with no fixed order (glob.glob, os.listdir) that another worker may get in another
    # order: a split or a worker's share would take other samples there, silently.
    d = shard_set(tmp_path / "set", encoded)
    k0, k1, k2 = (str(d / f"train-{k:05d}-of-00003.bzna") for k in range(3))
    for listing in ([k2, k0, k1], [k0, k2, k1], [str(d / "train-0000[12]-*"), k0]):
        for cls in (Dataset, ClassificationDataset):
            with pytest.raises(ValueError, match="shards of one set listed out of order") as e:
                cls(listing)
            assert "sorted(paths)" in str(e.value) and repr(str(d / "train-*-of-00003.bzna")) in str(e.value)
    # In their order, with other files between them, or some of them: read in the order given.
    val = str(write(tmp_path / "val.bzna", encoded, 2))
    assert names(Dataset([k0, val, k2])) == ["s0"] * 3 + ["val"] * 2 + ["s2"] * 3
    assert names(Dataset([val, k1, k2])) == ["val"] * 2 + ["s1"] * 3 + ["s2"] * 3
    # Files looked at one by one (bzna-tf info), or sorted by split (ImageNet): any order.
    from bzna_tf.cli import main

    assert main(["info", k2, k0]) == 0
    renamed = [str(d / f"val-{k:05d}-of-00003.bzna") for k in range(3)]
    for k in range(3):
        os.rename(str(d / f"train-{k:05d}-of-00003.bzna"), renamed[k])
    assert names(ImageNet(renamed[::-1], split="val")) == ["s0"] * 3 + ["s1"] * 3 + ["s2"] * 3


def test_files_numbered_alike_listed_out_of_order_are_read_with_a_warning(tmp_path, encoded):
    # part-2.bzna before part-0.bzna: names that differ only in their numbers, in neither their names' order
    # nor their numbers' (a glob.glob listing, which another worker may get in another order; or an order
    # chosen on purpose, such as the newest first: a warning, not an error).
    p0, p1, p2, p10 = (str(write(tmp_path / f"part-{k}.bzna", encoded, 2)) for k in (0, 1, 2, 10))
    for listing in ([p2, p0, p1], [p2, p1, p10, p0], [p1, p10, p0]):
        with pytest.warns(bzna_tf.ListOrderWarning, match="files numbered alike listed out of order") as got:
            ds = Dataset(listing)
        assert len(got) == 1 and "sorted(paths)" in str(got[0].message)
        assert ds.paths == listing  # read in the order given
    with pytest.warns(
        bzna_tf.ListOrderWarning, match=f"out of order: {p2} comes before {p0}. Files are read"
    ):
        ClassificationDataset([p2, p0])
    # Sorted (part-10 before part-2), in the numbers' order, some of them in order, or names not numbered
    # alike (another pattern of names, no number) between them: read in the order given, without a word.
    other = str(write(tmp_path / "day-3-part-1.bzna", encoded, 1))
    val = str(write(tmp_path / "val.bzna", encoded, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert names(Dataset(sorted([p0, p1, p2, p10]))) == [
            n for n in ("part-0", "part-1", "part-10", "part-2") for _ in range(2)
        ]
        assert names(Dataset([p0, p1, p2, p10]))[-2:] == ["part-10"] * 2
        assert names(Dataset([p1, other, p2, val])) == ["part-1"] * 2 + ["day-3-part-1"] + ["part-2"] * 2 + [
            "val"
        ]
    with pytest.warns(bzna_tf.ListOrderWarning):
        Dataset([p2, other, p0, val])
    # A sample list naming part-2 before part-0 opens them in their numbers' order: no warning.
    lst = Dataset([p0, p2]).select([3, 0]).to_sample_list("SINGLE-SAMPLE", ids="names").write(tmp_path / "l")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Dataset.from_sample_list(lst)
    assert again.paths == [p0, p2] and names(again) == ["part-2", "part-0"]


def test_the_cli_refuses_files_numbered_alike_in_a_shells_locale_order(tmp_path, encoded, capsys):
    # An unquoted data/part-*.bzna reaches the command in the shell's locale order: en_US lists part-0
    # part-10 part-1 part-2, the C locale part-0 part-1 part-10 part-2. A train list written in one shell
    # and a val list in the other shared part-10 and both left out part-1, exit 0 (a warning only).
    from bzna_tf.cli import main

    p0, p1, p2, p10 = (str(write(tmp_path / f"part-{k}.bzna", encoded, 2)) for k in (0, 1, 2, 10))
    out = str(tmp_path / "train.list")
    assert main(["samplelist", p0, p10, p1, p2, "--split", "[:50%]", "-o", out]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"bzna-tf samplelist: files numbered alike listed out of order: {p10} comes before {p1}."
    )
    assert "export LC_ALL=C" in err and err.count("\n") == 1 and not os.path.exists(out)
    assert main(["samplelist", p0, p1, p10, p2, "--split", "[:50%]", "-o", out]) == 0  # sorted by name
    assert main(["samplelist", p0, p1, p2, p10, "--split", "[:50%]", "-o", out]) == 0  # by number


def test_shards_of_one_set_are_compared_whatever_the_spelling_of_their_folder(tmp_path, encoded, monkeypatch):
    # "./set" and "set" are one folder: its shards out of order, or of two conversions, are refused.
    monkeypatch.chdir(tmp_path)
    shard_set(tmp_path / "set", encoded)
    k0, k1, k2 = (f"set/train-{k:05d}-of-00003.bzna" for k in range(3))
    with pytest.raises(ValueError, match="shards of one set listed out of order") as e:
        Dataset(["./" + k2, k0, k1])
    assert "(shard 2) comes before set/train-00000-of-00003.bzna (shard 0)" in str(e.value)
    assert len(Dataset([k0, "./" + k1, os.path.join(".", "set", "..", k2)])) == 9
    shard_set(tmp_path / "two", encoded, {0: {"seed": 1, "fingerprint": "g" * 32}})
    with pytest.raises(ValueError, match="written by two conversions .*seed 1 and seed 0"):
        Dataset([f"./two/train-{0:05d}-of-00003.bzna", *(f"two/train-{k:05d}-of-00003.bzna" for k in (1, 2))])


def test_a_pattern_opens_one_dataset_as_a_folder_does(tmp_path, encoded):
    # The same images converted twice in one folder: a pattern over both read each image twice.
    dup = tmp_path / "dup"
    shard_set(dup, encoded, per_shard=4)
    write(dup / "train.bzna", encoded, 12, prefix="t", metadata={"conversion": facts(0, 1, 0, 12, {})})
    for pattern in ("*.bzna", "train*"):
        for opening in (Dataset, ClassificationDataset, open_bzna):
            with pytest.raises(ValueError) as e:
                opening(str(dup / pattern))
            assert str(e.value).startswith(
                f"the pattern {str(dup / pattern)!r} matches 2 datasets, not one: "
                "train-*-of-00003.bzna (3 files), train.bzna. A pattern opens one set of shards or one file, "
                "as a directory does; pick one with a narrower pattern or a path (e.g. "
                f"{str(dup / 'train-*-of-00003.bzna')!r}), or list several explicitly to read them as one"
            )
    assert len(Dataset(str(dup / "train-*.bzna"))) == len(Dataset(str(dup / "train.bzna"))) == 12
    assert len(Dataset(str(dup / "train-0000[02]-of-00003.bzna"))) == 8  # shards of one set, picked
    # ImageNet's train shards beside val.bzna: one pattern mixed train and val (and a split of them).
    d = tmp_path / "imagenet"
    for k in range(2):
        write(d / f"train-{k:05d}-of-00002.bzna", encoded, 4, prefix=f"train{k}")
    write(d / "val.bzna", encoded, 3)
    with pytest.raises(
        ValueError, match=r"matches 2 datasets, not one: train-\*-of-00002\.bzna \(2 files\), val"
    ):
        ClassificationDataset(str(d / "*.bzna"), split="[:50%]")
    assert names(ImageNet(str(d / "*.bzna"), split="val")) == ["val"] * 3  # ImageNet sorts them by split
    listed = sorted(str(p) for p in d.iterdir())
    assert len(Dataset(listed)) == 11  # a list reads several as one, on purpose
    # Two conversions in two folders, one pattern over both: two datasets (of one name).
    for sub in ("a", "b"):
        shard_set(tmp_path / "r3" / sub, encoded)
    with pytest.raises(ValueError, match="matches 2 datasets, not one") as e:
        Dataset(str(tmp_path / "r3" / "*" / "train-*.bzna"))
    assert f"{tmp_path / 'r3' / 'a' / 'train-*-of-00003.bzna'} (3 files), " in str(e.value)
    # Files looked at one by one (bzna-tf info, verify): any pattern.
    from bzna_tf.cli import main

    assert main(["info", str(dup / "*.bzna")]) == 0


def test_two_conversions_of_one_source_are_refused(tmp_path, encoded):
    """Datasets whose conversion facts record one sibling fingerprint: the same images, read twice."""
    a = shard_set(tmp_path / "a", encoded)
    for seed, k in ((0, 1), (1, 0)):  # the same order (shard 1 twice), or another (shard 0 of each)
        b = shard_set(tmp_path / "b", encoded, {j: {"seed": seed} for j in range(3)}, prefix="b")
        listed = [str(a / f"train-0000{k}-of-00003.bzna"), str(b / "train-00001-of-00003.bzna")]
        for cls in (Dataset, ClassificationDataset):
            with pytest.raises(ValueError) as e:
                cls(listed)
            assert str(e.value).startswith(
                f"{listed[0]} and {listed[1]} are of two conversions of one source (their conversion facts "
                "record one source fingerprint"
            )
            assert "each image would be read twice an epoch" in str(e.value)
            assert "select them twice with Dataset.select" in str(e.value)
        with pytest.raises(ValueError, match="two conversions of one source"):
            Dataset([a, b])  # the whole sets, by their folders
    # Single files of one source, and a file beside the set it was converted again into.
    one = {"conversion": facts(0, 1, 0, 9, {"sibling_fingerprint": "u" * 32})}
    x = write(tmp_path / "x.bzna", encoded, 9, prefix="x", metadata=one)
    y = write(tmp_path / "y" / "x.bzna", encoded, 9, prefix="y", metadata=one)
    with pytest.raises(ValueError, match="two conversions of one source"):
        Dataset([x, y])
    again = write(a / "train.bzna", encoded, 9, prefix="t", metadata={"conversion": facts(0, 1, 0, 9, {})})
    with pytest.raises(ValueError, match="two conversions of one source"):
        Dataset([str(a / "train-*.bzna"), again])
    # Train and val converted from two sources; a set whose shards lie in two folders (one conversion's
    # pieces, which share no image); files that record no sibling fingerprint: read as one.
    val = {"conversion": facts(0, 1, 0, 3, {"sibling_fingerprint": "v" * 32})}
    val = write(tmp_path / "val.bzna", encoded, 3, metadata=val)
    b = shard_set(tmp_path / "b", encoded, prefix="b")
    pieces = [str(a / "train-00000-of-00003.bzna"), str(a / "train-00001-of-00003.bzna")]
    assert len(Dataset([*pieces, str(b / "train-00002-of-00003.bzna")])) == 9
    assert len(Dataset([str(a / "train-*.bzna"), x, val])) == 21
    old = {"conversion": facts(0, 1, 0, 9, {"sibling_fingerprint": None})}
    assert len(Dataset([write(tmp_path / "old.bzna", encoded, 9, metadata=old), x])) == 18


def test_a_shard_without_conversion_facts_in_a_converted_set_is_refused(tmp_path, encoded):
    d = shard_set(tmp_path / "set", encoded)
    write(d / "train-00001-of-00003.bzna", encoded, 3, prefix="other")  # another writer's file
    with pytest.raises(ValueError, match="the other records no conversion"):
        ClassificationDataset(d)


def ppm(rgb):
    h, w = rgb.shape[:2]
    return b"P6\n%d %d\n255\n" % (w, h) + np.ascontiguousarray(rgb).tobytes()


def image_folder(src, n, classes):
    """n 16 x 16 pictures in ``classes`` class folders (c{k % classes}/{k}.ppm), and quick options."""
    from bzna_tf.convert import EncodeOptions

    for k in range(n):
        (src / f"c{k % classes}").mkdir(parents=True, exist_ok=True)
        (src / f"c{k % classes}" / f"{k}.ppm").write_bytes(ppm(gradient(16, 16, seed=k)))
    return src, {"encoding": EncodeOptions(preset="ultrafast", crf=30), "progress": False, "workers": 0}


def test_a_set_converted_again_in_part_is_refused_until_converted_again_whole(tmp_path):
    """Shards of seed 0, then shard 0 converted again with seed 1 (a failed array task rerun alone)."""
    from bzna_tf.convert import ImageFolderSource, convert

    src, fast = image_folder(tmp_path / "src", 9, 3)
    out = tmp_path / "out" / "train.bzna"
    convert(ImageFolderSource(src), out, num_shards=3, seed=0, **fast)
    convert(ImageFolderSource(src), out, num_shards=3, seed=1, overwrite=True, shards=[0], **fast)
    with pytest.raises(ValueError, match=r"train-00000-of-00003\.bzna and .*train-00001-of-00003\.bzna "):
        ClassificationDataset(tmp_path / "out")
    convert(ImageFolderSource(src), out, num_shards=3, seed=1, overwrite=True, **fast)
    names = ClassificationDataset(tmp_path / "out").filenames
    assert sorted(names) == sorted(f"c{k % 3}/{k}.ppm" for k in range(9))


def test_a_file_and_its_conversion_again_into_shards_are_refused_together(tmp_path):
    """One source converted into one file and again into 3 shards: other shard counts, the same images."""
    from bzna_tf.convert import ImageFolderSource, convert

    src, fast = image_folder(tmp_path / "src", 8, 2)
    for folder, n in (("one", None), ("three", 3), ("two", 2), ("four", 4)):
        convert(ImageFolderSource(src), tmp_path / folder / "train.bzna", num_shards=n, seed=0, **fast)
    one, three = str(tmp_path / "one" / "train.bzna"), str(tmp_path / "three" / "train-00001-of-00003.bzna")
    for listed in ([one, three], [str(tmp_path / "three"), one]):
        with pytest.raises(ValueError, match="are of two conversions of one source") as e:
            ClassificationDataset(listed)
        assert "record one source fingerprint" in str(e.value)
    # Pieces of one order in two shard counts that share no image: positions [0, 4) and [4, 8).
    pieces = [str(tmp_path / "two" / "train-00000-of-00002.bzna")]
    pieces += [str(tmp_path / "four" / f"train-0000{k}-of-00004.bzna") for k in (2, 3)]
    names = ClassificationDataset(pieces).filenames
    assert sorted(names) == sorted(f"c{k % 2}/{k}.ppm" for k in range(8))
    with pytest.raises(ValueError, match="are of two conversions of one source"):
        ClassificationDataset([str(tmp_path / "four" / "train-00001-of-00004.bzna"), *pieces])


# --------------------------------------------------------------------- one file reached two ways


def test_a_file_url_and_its_path_are_one_file(tmp_path, encoded):
    path = str(write(tmp_path / "a.bzna", encoded, 3))
    for url in ("file://" + path, "file://localhost" + path):
        with pytest.raises(ValueError, match="a file is listed twice") as e:
            Dataset([url, path])
        assert f"'{url}' and '{path}', the same file" in str(e.value)
    assert len(Dataset(["file://" + path])) == 3


def test_a_copy_under_another_name_is_refused(tmp_path, encoded):
    for checksums in (True, False):
        d = tmp_path / f"checksums-{checksums}"
        x = write(d / "x.bzna", encoded, 5, checksums=checksums)
        y = shutil.copy(x, d / "y.bzna")
        with pytest.raises(ValueError, match="two files are copies of one another") as e:
            ClassificationDataset([x, y])
        assert f"{str(x)!r} and {str(y)!r}" in str(e.value)
        # Files of one size and layout that differ only in their names, or only in their targets, are two.
        z = write(d / "z.bzna", encoded, 5, prefix="y", checksums=checksums)
        w = write(d / "w.bzna", encoded, 5, prefix="x", target=lambda k: 2 - k % 3, checksums=checksums)
        assert os.path.getsize(x) == os.path.getsize(z) == os.path.getsize(w)
        assert len(ClassificationDataset([x, z, w])) == 15


# ----------------------------------------------------------------------- a shard past its count


def test_a_shard_numbered_past_its_count_is_refused(tmp_path, encoded):
    for k in range(3):
        write(tmp_path / f"t-{k:05d}-of-00002.bzna", encoded, 2, prefix=f"t{k}")
    stray = tmp_path / "t-00002-of-00002.bzna"
    for root in (tmp_path, str(tmp_path / "t-*.bzna"), [str(stray)]):
        with pytest.raises(ValueError, match="is named as shard 2 of a set of 2") as e:
            Dataset(root)
        assert str(stray) in str(e.value) and "numbered 0 to 1" in str(e.value)
    os.remove(stray)
    assert len(Dataset(tmp_path)) == 4


# ------------------------------------------------------ ImageNet: per-split files by pattern or list


@pytest.fixture()
def small_imagenet(monkeypatch):
    """ImageNet's val and test sizes made 2 and 3, so that small files have splits counted from the end:
    the count that must never cut several files."""
    monkeypatch.setattr(splits, "_VAL", 2)
    monkeypatch.setattr(splits, "_TEST", 3)


@pytest.fixture()
def per_split(tmp_path, encoded):
    """train in two shards of 4, val.bzna of 3: as bzna-tf convert writes ImageNet's splits."""
    d = tmp_path / "imagenet"
    for k in range(2):
        write(d / f"train-{k:05d}-of-00002.bzna", encoded, 4, prefix=f"train{k}")
    write(d / "val.bzna", encoded, 3)
    return d


def test_imagenet_takes_the_splits_of_a_pattern_or_a_list_from_the_file_names(per_split, small_imagenet):
    d = per_split
    files = [str(d / "val.bzna"), str(d / "train-00001-of-00002.bzna"), str(d / "train-00000-of-00002.bzna")]
    for root in (d, str(d / "*.bzna"), files, str(d / "train-*.bzna")):
        train = ImageNet(root, split="train")
        assert len(train) == 8 and set(names(train)) == {"train0", "train1"}, root
        assert train.paths[:2] == [str(d / f"train-0000{k}-of-00002.bzna") for k in range(2)]
        with pytest.raises(ValueError, match="holds no test files"):
            ImageNet(root, split="test")
    for root in (d, str(d / "*.bzna"), files, str(d / "val.bzna"), [str(d / "val.bzna")]):
        val = ImageNet(root, split="val")
        assert names(val) == ["val"] * 3, root
        assert len(ImageNet(root, split="validation[:2]")) == 2
    with pytest.raises(ValueError, match=r"the pattern '.*train-\*\.bzna' holds no val files"):
        ImageNet(str(d / "train-*.bzna"), split="val")
    with pytest.raises(ValueError, match="the list of files holds no test files"):
        ImageNet(files, split="test")
    assert len(ImageNet(files)) == 11  # every sample, train first


def test_one_file_named_by_split_is_that_split_not_counted_from_its_end(tmp_path, encoded, small_imagenet):
    train = write(tmp_path / "train.bzna", encoded, 7)
    assert len(ImageNet(train, split="train")) == 7  # counted from the end: 2 (7 - 2 - 3)
    with pytest.raises(ValueError, match="holds no val files"):
        ImageNet(train, split="val")
    # A file not named by split is one whole file: its splits are counted from its end.
    whole = shutil.copy(train, tmp_path / "ilsvrc2012.bzna")
    assert [len(ImageNet(whole, split=s)) for s in ("train", "val", "test")] == [2, 2, 3]


def test_several_files_not_named_by_split_have_no_named_splits(tmp_path, encoded, small_imagenet):
    files = [str(write(tmp_path / f"part-{k}.bzna", encoded, 6)) for k in range(2)]
    for split in ("train", "val", "test", "val[:1]"):
        with pytest.raises(ValueError, match="counts the splits from the end of one whole file only") as e:
            ImageNet(files, split=split)
        assert "part-0.bzna, part-1.bzna" in str(e.value) and "ClassificationDataset" in str(e.value)
    assert len(ImageNet(files)) == 12 and len(ImageNet(str(tmp_path / "part-*.bzna"), split="[:5]")) == 5
    named = write(tmp_path / "val.bzna", encoded, 2)
    with pytest.raises(
        ValueError, match=r"files named by split \(val\.bzna\) and files of no ImageNet split"
    ):
        ImageNet([*files, str(named)], split="val")


def test_a_split_of_files_from_two_folders_is_refused(per_split, tmp_path, encoded):
    other = write(tmp_path / "other" / "val.bzna", encoded, 3, prefix="other")
    with pytest.raises(ValueError, match="holds 2 datasets for the val split") as e:
        ImageNet([str(per_split / "val.bzna"), str(other)], split="val")
    assert str(other) in str(e.value)
    # Two spellings of one folder are one folder (they were two datasets for the train split).
    spelled = [
        str(per_split / "train-00000-of-00002.bzna"),
        f"{per_split}/./train-00001-of-00002.bzna",
    ]
    assert (
        names(ImageNet([*spelled, str(per_split / "val.bzna")], split="train"))
        == ["train0"] * 4 + ["train1"] * 4
    )


def test_imagenet_of_a_list_compares_the_class_names_of_every_split(tmp_path, encoded):
    train = write(tmp_path / "train.bzna", encoded, 6, metadata={"class_names": ["cat", "dog", "eel"]})
    val = write(
        tmp_path / "val.bzna", encoded, 4, target=lambda k: k % 2, metadata={"class_names": ["cat", "eel"]}
    )
    for split in ("val", "train"):
        with pytest.raises(ValueError, match=r"class 1 is named 'dog' in an earlier file \(.*train\.bzna\)"):
            ImageNet([str(val), str(train)], split=split)


def test_imagenet_without_a_split_is_not_read_as_one_pipeline_of_several_splits(per_split, small_imagenet):
    whole = ImageNet(per_split)
    assert len(whole) == 11  # described whole: len, targets, class names
    with pytest.raises(ValueError, match=r"holds the train and val splits, and as_dataset would read them"):
        whole.as_dataset(batch_size=2, shape=8)
    meant = [ImageNet(per_split, split="all"), ImageNet(per_split, split="train+val"), whole.select([0, 9])]
    for ds in meant:
        next(iter(ds.as_dataset(batch_size=2, shape=8)))
    with pytest.raises(ValueError, match="holds the train and val splits"):
        whole.labelled().as_dataset(batch_size=2, shape=8)  # chosen by label: still both splits
    assert len(ImageNet(per_split / "val.bzna")._splits_read) == 1  # one split: nothing to mix
    next(iter(ImageNet(per_split / "val.bzna").as_dataset(batch_size=2, shape=8)))


def test_imagenet_from_a_sample_list_over_shards(per_split, small_imagenet):
    # A list made from the training shards opens them again (it used to be refused: "ImageNet is one file").
    picked = ImageNet(per_split, split="train").select([1, 6])
    again = ImageNet.from_sample_list(picked.to_sample_list(), split="train")
    assert again.filenames == ["train0_1.png", "train1_2.png"] == picked.filenames
    assert again.paths == [str(per_split / f"train-0000{k}-of-00002.bzna") for k in range(2)]
    images, _ = next(iter(again.as_dataset(batch_size=2, shape=8)))
    assert images.shape == (2, 8, 8, 3)
    # A list over train and val names both splits' files: read as selected (nothing mixed by accident).
    both = ImageNet(per_split).select([0, 9])
    assert ImageNet.from_sample_list(both.to_sample_list()).filenames == ["train0_0.png", "val_1.png"]


def test_a_sample_list_naming_shard_2_before_shard_0_opens_its_files_in_shard_order(
    tmp_path, encoded, capsys
):
    # A selection in a chosen order, written as SINGLE-SAMPLE lines (in selection order) or by hand: the
    # list picks its samples by file, so its files' order is no order of the user's (it was refused as
    # "shards of one set listed out of order", with advice the user could not follow).
    from bzna_tf import SampleList
    from bzna_tf.cli import main

    d = shard_set(tmp_path / "set", encoded)
    picked = Dataset(d).select([7, 0, 4])
    assert picked.filenames == ["s2_1.png", "s0_0.png", "s1_1.png"]
    hand = tmp_path / "hand.list"
    hand.write_text(
        f"CONDUIT_HDF5_INCLUSION\n3 3 2\n{d}\ntrain-00002-of-00003.bzna 1 2 1\n"
        "train-00000-of-00003.bzna 2 1 0 2\n"
    )
    single = picked.to_sample_list("SINGLE-SAMPLE", ids="names").write(tmp_path / "one.list")
    cases = ((single, (0, 1, 2), picked.filenames), (hand, (0, 2), ["s2_1.png", "s0_0.png", "s0_2.png"]))
    for lst, shards, want in cases:
        for cls in (Dataset, ClassificationDataset):
            again = cls.from_sample_list(lst)
            assert again.paths == [str(d / f"train-0000{k}-of-00003.bzna") for k in shards]
            assert again.filenames == want
        assert main(["samplelist", "--check", str(lst)]) == 0
        assert "3 samples used" in capsys.readouterr().out
    assert SampleList.read(hand).data_paths()[0].endswith("train-00002-of-00003.bzna")  # as first named


def test_a_pattern_over_a_set_with_a_shard_missing_is_refused_where_it_covers_it(tmp_path, encoded):
    d = shard_set(tmp_path / "cut", encoded)
    os.remove(d / "train-00001-of-00003.bzna")
    for pattern in ("train-*.bzna", "train-0000[0-1]-of-00003.bzna", "*"):
        with pytest.raises(
            FileNotFoundError, match=r"1 of the 3 shards .* are missing \(train-00001-of-00003"
        ):
            Dataset(str(d / pattern))
    assert len(Dataset(str(d / "train-0000[02]-of-00003.bzna"))) == 6  # the missing one is not asked for
    with pytest.raises(FileNotFoundError, match="are missing"):
        Dataset(d)  # a directory: its whole set


def test_class_names_that_differ_only_in_spelling_are_said_so(tmp_path, encoded):
    d = tmp_path / "imagenet"
    write(d / "train.bzna", encoded, 6, metadata={"class_names": ["cat", "dog", "eel"]})
    write(d / "val.bzna", encoded, 6, metadata={"class_names": ["Cat", "dog", "eel"]})
    with pytest.raises(ValueError) as e:
        ImageNet(d, split="train")  # every split's files are compared
    assert "class 0 is named 'cat' in an earlier file" in str(e.value)
    assert "'Cat' here: two spellings of one name ('cat' and 'Cat': case, spaces or Unicode form)" in str(
        e.value
    )
    assert "ImageNet('DIR/train-*.bzna', split='train')" in str(e.value)
    assert len(ImageNet(str(d / "train*.bzna"), split="train")) == 6  # what the message says works


def test_class_names_of_two_vocabularies_are_said_to_be_two_lists(tmp_path, encoded):
    # Train from ImageNet's TFRecords (words), val from its synset folders (WordNet ids): the message said
    # the files "number their classes differently", which nothing showed.
    d = tmp_path / "imagenet"
    write(d / "train.bzna", encoded, 6, metadata={"class_names": ["tench", "goldfish", "great white shark"]})
    write(d / "val.bzna", encoded, 6, metadata={"class_names": ["n01440764", "n01443537", "n01484850"]})
    with pytest.raises(ValueError) as e:
        ImageNet(d, split="val")
    said = str(e.value)
    assert "class 0 is named 'tench' in an earlier file" in said
    assert "one file names its classes by WordNet ids and the other by words" in said
    assert "--class-names FILE" in said and "number their classes differently" not in said
    # Other classes altogether: said to be numbered differently, with no advice to rename them.
    other = tmp_path / "other"
    write(other / "train.bzna", encoded, 6, metadata={"class_names": ["cat", "dog", "eel"]})
    write(other / "val.bzna", encoded, 6, metadata={"class_names": ["carp", "trout", "pike"]})
    with pytest.raises(ValueError, match="number their classes differently") as e:
        ImageNet(other, split="val")
    assert "WordNet" not in str(e.value)


def test_shards_by_file_count_the_files_of_the_split(per_split, small_imagenet):
    train = ImageNet(per_split, split="train")  # holds val.bzna too: train's two files hold the split
    for k in range(3):
        with pytest.raises(
            ValueError, match="needs at least as many files as shards: 2 files holding the sampl"
        ):
            train.as_dataset(batch_size=2, shape=8, shard=(3, k), shard_by="files")
    seen = []
    for k in range(2):
        per_file = train.as_dataset(
            batch_size=2, shape=8, shard=(2, k), shard_by="files", with_filenames=True
        )
        seen += [n.decode().split("_")[0] for _, _, names in per_file for n in names.numpy()]
    assert sorted(seen) == ["train0"] * 4 + ["train1"] * 4
