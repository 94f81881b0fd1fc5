"""WebDataset tar shards as a conversion source: keys, labels, bad members, shards, workers, Beam."""

import json
import os
import re
import tarfile

import pytest
from _sources_data import (
    add_member,
    images,
    pictures_by_name,
    reference,
    wds_samples,
    write_shards,
)

from bzna_tf.convert import (
    ConversionError,
    EncodeOptions,
    Item,
    SourceError,
    WebDatasetSource,
    convert,
    shard_paths,
)
from bzna_tf.convert.sources.webdataset import expand_braces, split_name
from bzna_tf.datasets import ClassificationDataset
from bzna_tf.format import BznaFile

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average"), "progress": False}


def as_items(samples, image="ppm", label="cls"):
    return [
        Item(f"{i:05d}", int(s[label]) if label in s else None, data=s[image]) for i, s in enumerate(samples)
    ]


def test_names_split_and_braces_expand_as_webdataset_writes_them():
    assert split_name("a/b/0001.seg.PNG") == ("a/b/0001", "seg.png")
    assert split_name("0001.jpg") == ("0001", "jpg")
    assert split_name("dir.v2/0001.jpg") == ("dir.v2/0001", "jpg")
    assert split_name("README") is None and split_name("dir/.hidden") is None
    assert expand_braces("t-{000008..000011}.tar") == [f"t-0000{k:02d}.tar" for k in (8, 9, 10, 11)]
    assert expand_braces("{a,b}-{1..2}") == ["a-1", "a-2", "b-1", "b-2"]
    assert expand_braces("plain.tar") == ["plain.tar"]
    with pytest.raises(SourceError, match="goes down"):
        expand_braces("{5..2}")
    with pytest.raises(SourceError, match=r"expected \{A..B\} or \{x,y,...\}"):
        expand_braces("{oops}")


def test_shards_convert_to_the_same_pictures_labels_and_class_names(tmp_path):
    samples = wds_samples(10)
    write_shards(tmp_path / "wds", samples, per_shard=4)  # 3 shards: 4 + 4 + 2
    src = WebDatasetSource(str(tmp_path / "wds" / "train-{000000..000002}.tar"), class_names=["a", "b", "c"])
    assert len(src) == 10 and src.label_key == "cls" and src.labelled().all()
    assert [it.filename for it in src.items([9, 0, 4])] == ["00009", "00000", "00004"]
    assert src.item(5).origin == f"{tmp_path / 'wds' / 'train-000001.tar'} key '00005'"
    out = tmp_path / "out"
    summary = convert(src, out / "train.bzna", num_shards=3, workers=0, **FAST)
    assert summary.images == 10 and summary.class_names == ["a", "b", "c"]
    ds = ClassificationDataset(out)
    assert sorted(ds.filenames) == [f"{i:05d}" for i in range(10)]
    assert ds.class_names == ["a", "b", "c"]
    assert {n: int(t) for n, t in zip(ds.filenames, ds.targets, strict=True)} == {
        f"{i:05d}": i % 3 for i in range(10)
    }
    # Each picture is, byte for byte, what converting the image itself gives.
    want = reference(tmp_path, as_items(samples), **FAST)
    assert pictures_by_name(shard_paths(out / "train.bzna", 3)) == want
    # The glob and the list of paths are the same source (same fingerprint): a rerun skips every shard.
    again = convert(WebDatasetSource(str(tmp_path / "wds" / "*.tar"), class_names=["a", "b", "c"]),
                    out / "train.bzna", num_shards=3, workers=0, **FAST)  # fmt: skip
    assert again.written == [] and len(again.finished) == 3


def test_source_order_workers_and_worker_index_give_the_same_files(tmp_path):
    write_shards(tmp_path / "wds", wds_samples(8), per_shard=3)
    pattern = str(tmp_path / "wds" / "*.tar")
    one = tmp_path / "one"
    convert(WebDatasetSource(pattern), one / "x.bzna", num_shards=4, workers=2, order="source", **FAST)
    split = tmp_path / "split"
    for w in range(2):
        s = convert(WebDatasetSource(pattern), split / "x.bzna", num_shards=4, workers=0, order="source",
                    worker_index=w, num_workers=2, **FAST)  # fmt: skip
        assert len(s.written) == 2
    for a, b in zip(shard_paths(one / "x.bzna", 4), shard_paths(split / "x.bzna", 4), strict=True):
        assert open(a, "rb").read() == open(b, "rb").read()
    # order="source": the shards' order, then the members'.
    assert ClassificationDataset(one).filenames == [f"{i:05d}" for i in range(8)]


def test_json_labels_image_key_and_labels_that_are_missing(tmp_path):
    pics = images(4)
    samples = [
        {"png": pics[0], "json": json.dumps({"label": 2, "meta": {"y": 0}}).encode()},
        {"png": pics[1], "json": json.dumps({"label": 0, "meta": {"y": 1}}).encode()},
        {"png": pics[2], "json": json.dumps({"label": 1, "meta": {"y": 1}}).encode()},
    ]
    write_shards(tmp_path / "j", samples, per_shard=5)
    src = WebDatasetSource(str(tmp_path / "j" / "*.tar"))
    assert src.label_key == "json:label" and src.labelled() is None
    assert [it.target for it in src] == [2, 0, 1]
    assert [it.target for it in WebDatasetSource(str(tmp_path / "j" / "*.tar"), label_key="json:meta.y")] == [
        0,
        1,
        1,
    ]
    assert [it.target for it in WebDatasetSource(str(tmp_path / "j" / "*.tar"), label_key=None)] == [None] * 3
    # Two image members: refused, naming them, unless one is chosen.
    two = [{"jpg": pics[0], "png": pics[1], "cls": b"1"}]
    write_shards(tmp_path / "two", two, per_shard=5)
    item = WebDatasetSource(str(tmp_path / "two" / "*.tar")).item(0)
    assert item.error == (
        "several image members (jpg, png): name the one to convert with --image-key (image_key=)"
    )
    assert WebDatasetSource(str(tmp_path / "two" / "*.tar"), image_key="PNG").item(0).read() == pics[1]
    # A sample without the cls member is a bad record, or unlabelled with allow_unlabelled: labelled()
    # and missing_labels() know which before reading.
    write_shards(tmp_path / "u", [{"ppm": pics[0], "cls": b"0"}, {"ppm": pics[1]}], per_shard=5)
    strict = WebDatasetSource(str(tmp_path / "u" / "*.tar"))
    assert list(strict.missing_labels()) == [1]
    assert strict.item(1).error.startswith("no label: no 'cls' member")
    src = WebDatasetSource(str(tmp_path / "u" / "*.tar"), allow_unlabelled=True)
    assert list(src.labelled()) == [True, False] and [it.target for it in src] == [0, None]
    s = convert(src, tmp_path / "u.bzna", workers=0, **FAST)  # shuffled: the unlabelled one goes last
    assert BznaFile(tmp_path / "u.bzna").num_labelled == 1 and s.images == 2


def write_tar(path, members):
    """A tar file of (name, data) members, in this order; the data offset of each name's first member."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            add_member(tf, name, data)
    with tarfile.open(path) as tf:
        at = {}
        for m in tf:
            at.setdefault(m.name, m.offset_data)
    return at


def test_a_key_seen_twice_is_refused_naming_both_places(tmp_path, capsys):
    """A sample's members apart in the tar were read as two samples, each missing a member (and the hint
    to --allow-unlabelled then stored every image unlabelled); a key in two shards, or twice in one, stored
    two images under one name."""
    pics = images(3)
    # All the images first, then all the labels: each key's members are not next to each other.
    apart = tmp_path / "apart" / "train-000000.tar"
    members = [(f"{i:05d}.ppm", pics[i]) for i in range(3)] + [(f"{i:05d}.cls", b"1") for i in range(3)]
    at = write_tar(apart, members)
    message = (
        f"{apart}: key '00000' appears again later in the shard: member 00000.ppm at byte {at['00000.ppm']}, "
        f"then, after 2 other samples, member 00000.cls at byte {at['00000.cls']}. The members of one sample "
        "must be next to each other in the tar, as WebDataset reads them, and a key names one sample (the "
        "image is stored under it): re-create the shard with each sample's members together and each key "
        "once (3 samples in all repeat an earlier key)"
    )
    for allow in (False, True):
        with pytest.raises(SourceError) as e:
            WebDatasetSource(str(apart), allow_unlabelled=allow)
        assert str(e.value) == message
    from bzna_tf.cli import main

    argv = ["convert", "webdataset", str(apart), str(tmp_path / "x.bzna"), "--no-progress"]
    assert main([*argv, "--allow-unlabelled", "--on-error", "skip"]) == 1
    err = capsys.readouterr().err
    assert err == f"bzna-tf convert: {message}\n"
    # One key as two whole samples of one shard.
    twice = tmp_path / "twice" / "t.tar"
    at = write_tar(twice, [("a.ppm", pics[0]), ("a.cls", b"0"), ("b.ppm", pics[1]), ("b.cls", b"1"),
                           ("a.ppm", pics[2]), ("a.cls", b"2")])  # fmt: skip
    with pytest.raises(SourceError) as e:
        WebDatasetSource(str(twice))
    with tarfile.open(twice) as tf:
        second = [m.offset_data for m in tf if m.name == "a.ppm"][1]
    assert str(e.value).startswith(
        f"{twice}: key 'a' appears again later in the shard: members a.ppm, a.cls at byte {at['a.ppm']}, "
        f"then, after 1 other sample, members a.ppm, a.cls at byte {second}. The members"
    )
    # One key in two shards (their other bytes differ: not a copy of one file).
    s0, s1 = tmp_path / "two" / "s-0.tar", tmp_path / "two" / "s-1.tar"
    first = write_tar(s0, [("k1.ppm", pics[0]), ("k1.cls", b"0"), ("k2.ppm", pics[1])])
    later = write_tar(s1, [("k0.ppm", pics[2]), ("k2.ppm", pics[2]), ("k2.cls", b"2")])
    with pytest.raises(SourceError) as e:
        WebDatasetSource(str(tmp_path / "two" / "*.tar"), label_key=None)
    assert str(e.value) == (
        f"key 'k2' is in two shards: member k2.ppm at byte {first['k2.ppm']} of {s0}, and members k2.ppm, "
        f"k2.cls at byte {later['k2.ppm']} of {s1}: a shard "
        "named twice or copied would store its images twice, and a key names one sample (the image is stored "
        "under it). Leave the repeated shard out; if the shards hold different samples (keys that start "
        "again in each shard), convert with --per-shard-keys (per_shard_keys=True), which stores each sample "
        "under its shard's name and its key (s-1/k2)"
    )


def restarting_shards(folder, samples, per_shard):
    """Shards train-000000.tar, ... whose keys start again at 00000 in each (as some writers number them)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(0, len(samples), per_shard):
        path = folder / f"train-{s // per_shard:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for k, i in enumerate(range(s, min(s + per_shard, len(samples)))):
                for ext, data in samples[i].items():
                    add_member(tf, f"{k:05d}.{ext}", data)
        paths.append(path)
    return paths


def test_keys_that_start_again_in_each_shard_convert_with_per_shard_keys(tmp_path, capsys):
    """Keys 00000, ... in every shard (old img2dataset output; read by the webdataset package) were refused
    as a key in two shards, with no way to convert them: --per-shard-keys stores each as SHARD/KEY."""
    samples = wds_samples(7)  # labels i % 3
    s0, s1, s2 = restarting_shards(tmp_path / "wds", samples, per_shard=3)  # 3 + 3 + 1
    pattern = str(tmp_path / "wds" / "*.tar")
    with pytest.raises(SourceError) as e:
        WebDatasetSource(pattern)
    assert str(e.value) == (
        f"key '00000' is in two shards: members 00000.ppm, 00000.cls at byte 512 of {s0}, and members "
        f"00000.ppm, 00000.cls at byte 512 of {s1}: a shard named twice or copied would store its images "
        "twice, and a key names one sample (the image is stored under it). Leave the repeated shard out; if "
        "the shards hold different samples (keys that start again in each shard), convert with "
        "--per-shard-keys (per_shard_keys=True), which stores each sample under its shard's name and its key "
        "(train-000001/00000) (4 samples in all repeat an earlier key)"
    )
    src = WebDatasetSource(pattern, per_shard_keys=True)
    names = [f"train-{i // 3:06d}/{i % 3:05d}" for i in range(7)]
    assert len(src) == 7 and [it.filename for it in src] == names
    assert src.item(4).origin == f"{s1} key '00001'"  # messages name the shard and the member's own key
    assert src.describe()["per_shard_keys"] is True
    assert "per_shard_keys" not in WebDatasetSource(str(s0)).describe()  # earlier fingerprints still match
    summary = convert(src, tmp_path / "out" / "x.bzna", workers=0, **FAST)
    assert summary.images == 7
    items = [Item(name, int(s["cls"]), data=s["ppm"]) for name, s in zip(names, samples, strict=True)]
    want = reference(tmp_path, items, **FAST)
    got = pictures_by_name([tmp_path / "out" / "x.bzna"])
    assert got == want and {n: t for n, (_, t) in got.items()} == {n: i % 3 for i, n in enumerate(names)}
    # The command line: refused without the flag, naming it; converted with it.
    from bzna_tf.cli import main

    argv = ["convert", "webdataset", pattern, str(tmp_path / "cli.bzna"), "--no-progress", "-j", "0"]
    assert main(argv) == 1
    assert "convert with --per-shard-keys (per_shard_keys=True)" in capsys.readouterr().err
    assert main([*argv, "--per-shard-keys"]) == 0
    assert pictures_by_name([tmp_path / "cli.bzna"]).keys() == set(names)
    # A key twice in one shard is still refused.
    twice = tmp_path / "twice" / "t.tar"
    pics = images(2)
    write_tar(twice, [("a.ppm", pics[0]), ("a.cls", b"0"), ("b.ppm", pics[1]), ("b.cls", b"1"),
                      ("a.ppm", pics[1]), ("a.cls", b"2")])  # fmt: skip
    with pytest.raises(SourceError, match=f"^{re.escape(str(twice))}: key 'a' appears again later in the"):
        WebDatasetSource(str(twice), per_shard_keys=True)
    dot = tmp_path / "dot" / "..tar"  # stored as ./00000
    restarting_shards(tmp_path / "dot", samples[:1], per_shard=1)[0].rename(dot)
    with pytest.raises(SourceError) as e:
        WebDatasetSource(str(dot), per_shard_keys=True)
    assert str(e.value) == (
        f"{dot}: with --per-shard-keys (per_shard_keys=True) each sample is stored as SHARD/KEY, SHARD the "
        "shard's file name without .tar (its path from the shards' common folder when two shards have one "
        "file name), and '.' has an empty or '.' part: rename the shard"
    )


def test_shards_of_one_file_name_in_two_folders_are_stored_under_their_paths(tmp_path, capsys):
    """part1/train-000000.tar and part2/train-000000.tar (two img2dataset runs, keys starting again in each)
    were refused with --per-shard-keys, asking to rename one (often impossible: read-only shared data)."""
    samples = wds_samples(8)
    runs = tmp_path / "runs"
    p1 = restarting_shards(runs / "part1", samples[:6], per_shard=3)
    p2 = restarting_shards(runs / "part2", samples[6:], per_shard=3)
    patterns = [str(runs / "part1" / "*.tar"), str(runs / "part2" / "*.tar")]
    src = WebDatasetSource(patterns, per_shard_keys=True)
    shards = ["part1/train-000000", "part1/train-000001", "part2/train-000000"]
    names = [f"{shards[i // 3]}/{i % 3:05d}" for i in range(8)]
    assert [it.filename for it in src] == names
    assert src.item(6).origin == f"{p2[0]} key '00000'"
    # The fingerprint names the files as the samples are: from the common folder, so that a resumed
    # conversion of other folders (part3/train-000000.tar, a copy of part2's) is not taken for this one.
    assert [f[0] for f in src.describe()["files"]] == [f"{s}.tar" for s in shards]
    # Shards whose file names differ keep their names and fingerprints (earlier conversions still resume).
    one_run = WebDatasetSource(patterns[0], per_shard_keys=True)
    assert [it.filename for it in one_run] == [f"train-{i // 3:06d}/{i % 3:05d}" for i in range(6)]
    assert [f[0] for f in one_run.describe()["files"]] == ["train-000000.tar", "train-000001.tar"]
    pics = images(2)
    write_tar(tmp_path / "c1" / "s.tar", [("a.ppm", pics[0]), ("a.cls", b"0")])
    write_tar(tmp_path / "c2" / "s.tar", [("b.ppm", pics[1]), ("b.cls", b"1")])
    without = WebDatasetSource([str(tmp_path / "c1" / "s.tar"), str(tmp_path / "c2" / "s.tar")])
    assert [it.filename for it in without] == ["a", "b"]
    assert [f[0] for f in without.describe()["files"]] == ["s.tar", "s.tar"]
    summary = convert(src, tmp_path / "out" / "x.bzna", workers=0, **FAST)
    assert summary.images == 8
    items = [Item(name, int(s["cls"]), data=s["ppm"]) for name, s in zip(names, samples, strict=True)]
    assert pictures_by_name([tmp_path / "out" / "x.bzna"]) == reference(tmp_path, items, **FAST)
    # Without the flag, the refusal names the name the flag would give.
    with pytest.raises(SourceError, match=re.escape("its key (part1/train-000001/00000) (5 samples in all")):
        WebDatasetSource(patterns)
    # The command line, with one pattern over both folders.
    from bzna_tf.cli import main

    argv = ["convert", "webdataset", str(runs / "part*" / "*.tar"), str(tmp_path / "cli.bzna"), "-j", "0"]
    assert main([*argv, "--no-progress", "--per-shard-keys"]) == 0
    assert pictures_by_name([tmp_path / "cli.bzna"]).keys() == set(names)
    # Two shards of one name without .tar in one folder are still refused.
    upper = runs / "part2" / "train-000000.TAR"
    upper.write_bytes(p1[1].read_bytes())
    with pytest.raises(SourceError) as e:
        WebDatasetSource([str(p2[0]), str(upper)], per_shard_keys=True)
    assert str(e.value) == (
        f"{p2[0]} and {upper} have one name without .tar ('train-000000'): with --per-shard-keys "
        "(per_shard_keys=True) each sample is stored as SHARD/KEY, SHARD the shard's file name without .tar "
        "(its path from the shards' common folder when two shards have one file name), so their samples "
        "would be stored under the same names. Leave out a shard that is a copy of the other; if they hold "
        "different samples, rename one"
    )
    # A shard beside a folder of its name: part1/train-000000.tar's key x/00000 and part1/train-000000/x.tar's
    # key 00000 are both stored as part1/train-000000/x/00000.
    write_tar(runs / "part1" / "train-000000" / "x.tar", [("00000.ppm", pics[1]), ("00000.cls", b"1")])
    at = write_tar(p1[0], [("x/00000.ppm", pics[0]), ("x/00000.cls", b"0")])
    with pytest.raises(SourceError) as e:
        WebDatasetSource([str(p1[0]), str(runs / "part1" / "train-000000" / "x.tar"), str(p2[0])],
                         per_shard_keys=True)  # fmt: skip
    assert str(e.value) == (
        f"members x/00000.ppm, x/00000.cls at byte {at['x/00000.ppm']} of {p1[0]} and members 00000.ppm, "
        f"00000.cls at byte 512 of {runs / 'part1' / 'train-000000' / 'x.tar'} would both be stored as "
        "'part1/train-000000/x/00000': with --per-shard-keys (per_shard_keys=True) each sample is stored as "
        "SHARD/KEY, SHARD the shard's file name without .tar (its path from the shards' common folder when "
        "two shards have one file name), and a name holds one image. Leave one of the shards out, or convert "
        "it on its own"
    )


def test_keys_whose_hashes_collide_are_not_taken_for_one_key():
    from array import array

    from bzna_tf.convert.sources.webdataset import _Index

    idx = _Index()
    for key in ("a", "b", "c", "b"):
        idx.new_sample(key)
    assert idx.repeated() == (3, 1, 1)
    idx.hashes = array("q", [7, 7, 7, 5])  # a, b, c collide; the last b no longer meets the first
    assert idx.repeated() is None
    idx.hashes = array("q", [7, 7, 9, 7])
    assert idx.repeated() == (3, 1, 1)


def corrupt_shards(tmp_path):
    """One shard with three bad samples among good ones, the last member truncated."""
    pics = images(6)
    path = tmp_path / "bad" / "bad-000000.tar"
    path.parent.mkdir()
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        add_member(tf, "00000.ppm", pics[0])
        add_member(tf, "00000.cls", b"0")
        add_member(tf, "00001.txt", b"no image here")  # no image member
        add_member(tf, "00001.cls", b"1")
        add_member(tf, "00002.ppm", pics[2])
        add_member(tf, "00002.cls", b"dog")  # not an integer
        add_member(tf, "00003.ppm", pics[3])
        add_member(tf, "00003.cls", b"1")
        add_member(tf, "00004.cls", b"0")
        add_member(tf, "00004.ppm", pics[4])  # truncated below
    data = path.read_bytes()
    end = data.index(pics[4][:64]) + 100  # cut inside the last member's data
    path.write_bytes(data[:end])
    return path, pics


def test_bad_samples_stop_with_their_key_or_are_skipped_and_counted(tmp_path, capsys):
    path, pics = corrupt_shards(tmp_path)
    src = WebDatasetSource(path)
    assert len(src) == 5
    errors = {it.filename: it.error for it in src}
    assert errors["00000"] is None and errors["00003"] is None
    assert errors["00001"].startswith("no image member; the sample has members 00001.txt, 00001.cls")
    assert errors["00002"].startswith("member 00002.cls holds 'dog', not an integer label")
    assert errors["00004"].startswith("member '00004.ppm' is truncated: it declares")
    with pytest.raises(ConversionError, match=rf"{path} key '00001': no image member.*--on-error skip"):
        convert(src, tmp_path / "x.bzna", workers=0, order="source", **FAST)
    assert not os.path.exists(tmp_path / "x.bzna")
    with pytest.raises(
        ValueError, match=r"Expected `on_error` in \('raise', 'skip'\). Received: on_error='ignore'"
    ):
        convert(src, tmp_path / "x.bzna", workers=0, on_error="ignore", **FAST)
    s = convert(src, tmp_path / "x.bzna", workers=0, on_error="skip", **FAST)
    assert s.images == 2 and len(s.skipped) == 3
    assert sorted(origin for origin, _ in s.skipped) == [f"{path} key '0000{k}'" for k in (1, 2, 4)]
    assert "skipped 3 images that could not be read or decoded:" in str(s)
    with BznaFile(tmp_path / "x.bzna") as f:
        assert sorted(f.filenames()) == ["00000", "00003"]
        assert len(f.metadata["conversion"]["skipped"]) == 3
    # A rerun of the same conversion takes the file as finished (2 written + 3 skipped = its range).
    again = convert(WebDatasetSource(path), tmp_path / "x.bzna", workers=0, on_error="skip", **FAST)
    assert again.written == [] and again.finished == [(str(tmp_path / "x.bzna"), 2)]
    # From the command line: the default stops with the message, --on-error skip counts.
    from bzna_tf.cli import main

    capsys.readouterr()
    assert main(["convert", "webdataset", str(path), str(tmp_path / "c.bzna"), "--processes", "0",
                 "--no-progress", "--preset", "ultrafast"]) == 1  # fmt: skip
    assert f"bzna-tf convert: {path} key '00001': no image member" in capsys.readouterr().err
    assert main(["convert", "webdataset", str(path), str(tmp_path / "c.bzna"), "--processes", "0",
                 "--no-progress", "--preset", "ultrafast", "--on-error", "skip"]) == 0  # fmt: skip
    assert "skipped 3 images that could not be read or decoded" in capsys.readouterr().out


def test_a_payload_that_is_no_image_stops_the_conversion_unless_skipped(tmp_path, capsys):
    from bzna_tf.cli import main

    pics = images(2)
    samples = [{"jpg": b"<html>not found</html>", "cls": b"0"}, {"ppm": pics[1], "cls": b"1"}]
    write_shards(tmp_path / "w", samples, per_shard=5)
    src = WebDatasetSource(str(tmp_path / "w" / "*.tar"))
    with pytest.raises(ConversionError, match=rf"^{re.escape(str(src.paths[0]))} key '00000': FFmpeg cannot"):
        convert(src, tmp_path / "y.bzna", workers=0, order="source", **FAST)
    assert not (tmp_path / "y.bzna").exists()
    s = convert(src, tmp_path / "x.bzna", workers=0, order="source", on_error="skip", **FAST)
    assert s.images == 1 and [o for o, _ in s.skipped] == [f"{src.paths[0]} key '00000'"]
    args = ["convert", "webdataset", str(tmp_path / "w" / "*.tar"), str(tmp_path / "c.bzna"),
            "--processes", "0", "--no-progress", "--preset", "ultrafast", "--order", "source"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err
    assert (
        f"bzna-tf convert: {src.paths[0]} key '00000': FFmpeg cannot decode it" in err
        and "--on-error skip" in err
    )
    assert main([*args, "--on-error", "skip"]) == 0
    assert "skipped 1 image that could not be read or decoded" in capsys.readouterr().out


def test_damaged_and_compressed_shards_are_refused_naming_the_file(tmp_path):
    write_shards(tmp_path / "w", wds_samples(4), per_shard=4)
    good = tmp_path / "w" / "train-000000.tar"
    data = bytearray(good.read_bytes())
    # Garble the third member's header (samples 0 and 1 stay readable): tarfile would stop there quietly.
    headers = [i for i in range(0, len(data), 512) if data[i : i + 5] in (b"00001", b"00002")]
    bad = tmp_path / "garbled.tar"
    third = headers[2]
    data[third + 148 : third + 156] = b"garbage!"  # the header checksum
    bad.write_bytes(bytes(data))
    with pytest.raises(SourceError, match=rf"{bad}: corrupt tar header at byte {third} \(after member "):
        WebDatasetSource(bad)
    gz = tmp_path / "train.tar.gz"
    import gzip

    gz.write_bytes(gzip.compress(good.read_bytes()))
    with pytest.raises(SourceError, match="gzip-compressed tar file.*decompress it first"):
        WebDatasetSource(gz)
    (tmp_path / "junk.tar").write_bytes(b"x" * 1000)
    with pytest.raises(SourceError, match="junk.tar: not a readable tar file"):
        WebDatasetSource(tmp_path / "junk.tar")
    with pytest.raises(SourceError, match="no tar shard matches"):
        WebDatasetSource(str(tmp_path / "nothing-*.tar"))


def test_members_that_are_not_samples_are_left_out_and_noted(tmp_path):
    pics = images(2)
    path = tmp_path / "m.tar"
    with tarfile.open(path, "w") as tf:
        add_member(tf, "__meta__", b"{}")
        add_member(tf, "README", b"hello")
        d = tarfile.TarInfo("sub")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        add_member(tf, "sub/0.ppm", pics[0])
        add_member(tf, "sub/0.cls", b"1")
        add_member(tf, "sub/1.ppm", pics[1])
        add_member(tf, "sub/1.cls", b"0")
    src = WebDatasetSource(path)
    assert [(it.filename, it.target) for it in src] == [("sub/0", 1), ("sub/1", 0)]
    assert src.notes == ("not taken: 1 tar member without an extension ('README')",)


def test_member_names_made_in_the_shards_folder_drop_their_leading_dot_slash(tmp_path):
    # `tar --sort=name -cf x.tar .` names every member ./NAME: the same paths as NAME.
    pics = images(2)
    path = tmp_path / "dot.tar"
    with tarfile.open(path, "w") as tf:
        d = tarfile.TarInfo("./")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        add_member(tf, "./0.ppm", pics[0])
        add_member(tf, "./0.cls", b"1")
        add_member(tf, "././sub/1.ppm", pics[1])
        add_member(tf, "./sub/1.cls", b"0")
    src = WebDatasetSource(path)
    assert [(it.filename, it.target) for it in src] == [("0", 1), ("sub/1", 0)]
    assert src.notes == ()
    summary = convert(src, tmp_path / "dot.bzna", workers=0, order="source", **FAST)
    assert summary.images == 2
    with BznaFile(tmp_path / "dot.bzna") as f:
        assert f.filenames() == ["0", "sub/1"]


def test_the_cli_converts_shards_from_a_brace_pattern(tmp_path, capsys):
    from bzna_tf.cli import main

    write_shards(tmp_path / "wds", wds_samples(6), per_shard=2)
    (tmp_path / "names.txt").write_text("x\ny\nz\n")
    argv = ["convert", "webdataset", str(tmp_path / "wds" / "train-{000000..000002}.tar"),
            str(tmp_path / "out" / "t.bzna"), "--num-shards", "2", "--processes", "0", "--no-progress",
            "--preset", "ultrafast", "--class-names", str(tmp_path / "names.txt")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "6 images" in out and "class names stored (3): 0 x, 1 y, 2 z" in out
    assert ClassificationDataset(tmp_path / "out").class_names == ["x", "y", "z"]
    assert main([*argv, "--label-offset", "1"]) != 0
    assert "--label-offset does not apply to webdataset sources" in capsys.readouterr().err


def test_beam_writes_what_a_local_conversion_writes(tmp_path):
    pytest.importorskip("apache_beam", reason="Apache Beam is an optional extra: pip install 'bzna-tf[beam]'")
    from bzna_tf.convert.beam import run

    write_shards(tmp_path / "wds", wds_samples(6), per_shard=4)
    src = WebDatasetSource(str(tmp_path / "wds" / "*.tar"))
    run(src, tmp_path / "beam" / "t.bzna", 2, **{k: v for k, v in FAST.items() if k != "progress"})
    convert(src, tmp_path / "local" / "t.bzna", num_shards=2, workers=0, **FAST)
    beam, local = shard_paths(tmp_path / "beam" / "t.bzna", 2), shard_paths(tmp_path / "local" / "t.bzna", 2)
    for a, b in zip(beam, local, strict=True):
        assert open(a, "rb").read() == open(b, "rb").read()
