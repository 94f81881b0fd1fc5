"""The folder converter follows Keras' and torchvision's layout rules; samples are named by relative path.

The walkthrough's case: ``m/a/sub/x.jpg`` (nested) and ``m/z.jpg`` (beside the
class folders) were skipped without a word ("1 images", class ``a`` empty),
and bare names repeated across classes.
"""

import os

import numpy as np
import pytest
from conftest import gradient
from test_convert_shards import ppm

from bzna_tf.cli import main
from bzna_tf.format import BznaFile

FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


@pytest.fixture()
def walkthrough(tmp_path):
    """m/a/sub/x.ppm (nested), m/b/x.ppm (the same bare name), m/z.ppm (beside the class folders)."""
    m = tmp_path / "m"
    (m / "a" / "sub").mkdir(parents=True)
    (m / "b").mkdir()
    (m / "a" / "sub" / "x.ppm").write_bytes(ppm(gradient(24, 32, seed=1)))
    (m / "b" / "x.ppm").write_bytes(ppm(gradient(24, 32, seed=2)))
    (m / "z.ppm").write_bytes(ppm(gradient(24, 32, seed=3)))
    return m


def test_images_beside_the_class_folders_are_an_error_naming_them(tmp_path, walkthrough, capsys):
    out = tmp_path / "out.bzna"
    assert main(["convert", "folder", str(walkthrough), str(out), *FAST]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bzna-tf convert: ") and "1 image file beside the class folders ('z.ppm')" in err
    assert "--allow-unlabelled" in err and not out.exists()


def test_nested_images_belong_to_their_class_and_names_are_relative_paths(tmp_path, walkthrough, capsys):
    os.remove(walkthrough / "z.ppm")
    out = tmp_path / "out.bzna"
    assert main(["convert", "folder", str(walkthrough), str(out), *FAST]) == 0
    assert "wrote" in capsys.readouterr().out
    with BznaFile(out) as f:
        assert sorted(zip(f.filenames(), f.targets.tolist(), strict=True)) == [
            ("a/sub/x.ppm", 0),
            ("b/x.ppm", 1),
        ]
        assert f.class_names == ["a", "b"]
        i = f.filenames().index("a/sub/x.ppm")
        assert f.sample(i).filename == "a/sub/x.ppm"  # the benzina layout's nested name track too


def test_allow_unlabelled_stores_the_images_beside_the_class_folders_last(tmp_path, walkthrough, capsys):
    out = tmp_path / "out.bzna"
    argv = ["convert", "folder", str(walkthrough), str(out), *FAST, "--allow-unlabelled"]
    assert main([*argv, "--order", "source"]) == 0
    printed = capsys.readouterr().out
    assert "labels: 2 labelled, 1 unlabelled\n" in printed
    why = "beside the class folders (--allow-unlabelled)"
    assert f"  unlabelled: 1 image {why}, {walkthrough / 'z.ppm'}\n" in printed
    with BznaFile(out) as f:
        assert f.filenames() == ["a/sub/x.ppm", "b/x.ppm", "z.ppm"]
        assert f.targets.tolist() == [0, 1, -1] and f.num_labelled == 2
    # Shuffled (the default), the unlabelled image still comes last: the folder knows it up front.
    for seed in range(4):
        assert main([*argv, "--seed", str(seed), "--overwrite"]) == 0
        with BznaFile(out) as f:
            assert f.filenames()[-1] == "z.ppm" and f.num_labelled == 2


def test_an_empty_class_is_a_warning_in_the_summary(tmp_path, walkthrough, capsys):
    os.remove(walkthrough / "z.ppm")
    (walkthrough / "c").mkdir()
    (walkthrough / "c" / "readme.txt").write_text("no images here")
    (walkthrough / ".ipynb_checkpoints").mkdir()  # hidden: not a class
    assert main(["convert", "folder", str(walkthrough), str(tmp_path / "o.bzna"), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "warning: 1 class without images: 'c' (target 2)" in printed
    assert "not taken: 1 file whose names do not end in an image extension ('c/readme.txt')" in printed
    assert BznaFile(tmp_path / "o.bzna").class_names == ["a", "b", "c"]


def test_relative_names_work_in_every_reader(tmp_path, walkthrough, capsys):
    """Python, the C++ source op (with_filenames) and sample lists by name all take a '/' in names."""
    import bzna_tf
    from bzna_tf.format.samplelist import SampleList

    os.remove(walkthrough / "z.ppm")
    (tmp_path / "data").mkdir()
    out = tmp_path / "data" / "out.bzna"
    assert main(["convert", "folder", str(walkthrough), str(out), *FAST]) == 0
    ds = bzna_tf.ClassificationDataset(out)
    names = ds.filenames
    assert sorted(names) == ["a/sub/x.ppm", "b/x.ppm"]  # bare names ("x.ppm" twice) were ambiguous
    images, labels, filenames = next(
        iter(ds.as_dataset(batch_size=2, shape=(8, 8), with_filenames=True, training=False))
    )
    assert [n.decode() for n in filenames.numpy()] == names
    assert labels.numpy().tolist() == [{"a/sub/x.ppm": 0, "b/x.ppm": 1}[n] for n in names]
    # Sample lists by name: refused with bare names (not unique), now written and read back.
    for kind in ("CONDUIT_HDF5_INCLUSION", "SINGLE-SAMPLE"):
        lst = tmp_path / f"{kind}.txt"
        assert main(["samplelist", str(out), "-o", str(lst), "--ids", "names", "--type", kind]) == 0, kind
        text = lst.read_text()
        assert "a/sub/x.ppm" in text and "b/x.ppm" in text
        picked = bzna_tf.ClassificationDataset.from_sample_list(SampleList.read(lst))
        assert picked.filenames == names
        assert main(["samplelist", "--check", str(lst)]) == 0
    capsys.readouterr()
    one = SampleList.parse(f"SINGLE-SAMPLE\n1\n{tmp_path / 'data'}\n-\nout.bzna/a/sub/x.ppm\n")
    assert bzna_tf.ClassificationDataset(out).select(one).filenames == ["a/sub/x.ppm"]


def test_the_writer_takes_relative_paths_and_refuses_bad_names(tmp_path, pictures):
    from bzna_tf import BznaWriter

    inp, thumb = pictures[0]
    with BznaWriter(tmp_path / "n.bzna") as w:
        w.append(inp, thumb=thumb, target=0, filename="cat/sub/1.jpg")
        for bad in ("/abs.jpg", "a//b.jpg", "a/../b.jpg", "./a.jpg", "a/", "", "a\0b"):
            with pytest.raises(ValueError, match="relative path"):
                w.append(inp, thumb=thumb, target=0, filename=bad)
    with BznaFile(tmp_path / "n.bzna") as f:
        assert f.filenames() == ["cat/sub/1.jpg"]


def test_symbolic_links_are_followed_once(tmp_path):
    from bzna_tf.convert import ImageFolderSource

    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "1.ppm").write_bytes(ppm(gradient(8, 8)))
    (root / "a" / "loop").symlink_to(root / "a")  # a folder reached twice is read once
    elsewhere = tmp_path / "raw" / "bees"
    elsewhere.mkdir(parents=True)
    (elsewhere / "2.ppm").write_bytes(ppm(gradient(8, 8, seed=1)))
    (root / "b").symlink_to(elsewhere)  # a class folder may be a link
    (root / "a" / "same.ppm").symlink_to(root / "a" / "1.ppm")  # one image in its class: taken once
    src = ImageFolderSource(root)
    assert [(i.filename, i.target) for i in src] == [("a/1.ppm", 0), ("b/2.ppm", 1)]
    assert np.array_equal(src.labelled(), [True, True])
    assert src.notes == (
        "not taken: 1 path to an image already taken, through symbolic links ('a/same.ppm')",
    )


def test_an_unlabelled_image_linked_twice_is_taken_once(tmp_path):
    from bzna_tf.convert import ImageFolderSource

    root = tmp_path / "test_set"  # no class folders: unlabelled images
    root.mkdir()
    (root / "x.ppm").write_bytes(ppm(gradient(8, 8)))
    (root / "y.ppm").symlink_to(root / "x.ppm")
    src = ImageFolderSource(root)
    assert [(i.filename, i.target) for i in src] == [("x.ppm", None)]
    assert src.notes == ("not taken: 1 path to an image already taken, through symbolic links ('y.ppm')",)


@pytest.mark.parametrize("how", ["class folder", "file", "beside"])
def test_an_image_linked_into_a_second_class_is_refused(tmp_path, how):
    from bzna_tf.convert import ImageFolderSource, SourceError

    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "1.ppm").write_bytes(ppm(gradient(8, 8)))
    if how == "class folder":
        (root / "b").symlink_to(root / "a")  # every image of a would also be in b: two labels each
        clash = "'b/1.ppm' (class 'b') is 'a/1.ppm' (class 'a')"
    elif how == "file":
        (root / "b").mkdir()
        (root / "b" / "x.ppm").symlink_to(root / "a" / "1.ppm")
        clash = "'b/x.ppm' (class 'b') is 'a/1.ppm' (class 'a')"
    else:
        (root / "x.ppm").symlink_to(root / "a" / "1.ppm")  # unlabelled and in class a
        clash = "'x.ppm' (beside the class folders) is 'a/1.ppm' (class 'a')"
    with pytest.raises(SourceError) as e:
        ImageFolderSource(root, allow_unlabelled=True)
    assert str(e.value) == (
        f"{root}: 1 image reached through symbolic links in a second class ({clash}): an image has one "
        "label. Remove the links that put an image in a second class; to store a picture in two classes, "
        "copy the file or make it a hard link (ln), which is a file of its own here"
    )


def _classes(root, **files):
    """root/CLASS/NAME files, each a distinct picture: files={"a": ["1.ppm", "sub/2.ppm"], ...}."""
    seed = 0
    for c, names in files.items():
        for name in names:
            (root / c / name).parent.mkdir(parents=True, exist_ok=True)
            (root / c / name).write_bytes(ppm(gradient(8, 8, seed=seed)))
            seed += 1
    return root


def _items(src):
    return [(i.filename, i.target) for i in src]


def test_hard_links_are_separate_images_as_copies_are(tmp_path):
    """A deduplicated tree (rdfind -makehardlinks, jdupes -L, hardlink) converts as the tree with copies
    does: each name of a file is its own image with its own label, within a class, across classes, beside
    them and among unlabelled images, as torchvision's ImageFolder and Keras take copies."""
    import shutil

    from bzna_tf.convert import ImageFolderSource

    def tree(name, same):
        root = _classes(tmp_path / name, a=["1.ppm"], b=["2.ppm"])
        (root / "a" / "sub").mkdir()
        same(root / "a" / "1.ppm", root / "a" / "0.ppm")  # within its class
        same(root / "a" / "1.ppm", root / "a" / "sub" / "1.ppm")
        same(root / "a" / "1.ppm", root / "b" / "x.ppm")  # in a second class: its own label there
        same(root / "b" / "2.ppm", root / "y.ppm")  # beside the class folders: unlabelled
        test_set = tmp_path / f"{name}_test"  # no class folders: unlabelled images
        test_set.mkdir()
        (test_set / "x.ppm").write_bytes(ppm(gradient(8, 8)))
        same(test_set / "x.ppm", test_set / "y.ppm")
        return ImageFolderSource(root, allow_unlabelled=True), ImageFolderSource(test_set)

    for src, test_set in (tree("linked", os.link), tree("copied", shutil.copyfile)):
        assert _items(src) == [
            ("a/0.ppm", 0), ("a/1.ppm", 0), ("a/sub/1.ppm", 0), ("b/2.ppm", 1), ("b/x.ppm", 1),
            ("y.ppm", None),
        ]  # fmt: skip
        assert np.array_equal(src.labelled(), [True] * 5 + [False])
        assert src.notes == ()
        assert _items(test_set) == [("x.ppm", None), ("y.ppm", None)]
        assert test_set.notes == ()


def test_a_symbolic_link_and_a_hard_link_to_one_file(tmp_path):
    """A symbolic link to a file is one image with the file it leads to; a hard link is another name of the
    file, so another image (with the symbolic links that lead to it)."""
    from bzna_tf.convert import ImageFolderSource, SourceError

    outside = tmp_path / "raw" / "pic.ppm"
    outside.parent.mkdir()
    outside.write_bytes(ppm(gradient(8, 8, seed=7)))
    root = _classes(tmp_path / "r", a=["5.ppm"], b=["2.ppm"])
    (root / "a" / "0.ppm").symlink_to(outside)  # a link to the file outside the tree: one image with it
    os.link(outside, root / "a" / "1.ppm")  # another name of that file: another image
    (root / "a" / "2.ppm").symlink_to(root / "a" / "1.ppm")  # a link to the hard link: one image with it
    (root / "a" / "3.ppm").symlink_to(outside)  # a second link to the file outside: not taken again
    os.link(root / "a" / "5.ppm", root / "b" / "6.ppm")  # a hard link in a second class: its own label
    src = ImageFolderSource(root)
    assert _items(src) == [("a/0.ppm", 0), ("a/1.ppm", 0), ("a/5.ppm", 0), ("b/2.ppm", 1), ("b/6.ppm", 1)]
    assert src.notes == (
        "not taken: 2 paths to an image already taken, through symbolic links ('a/2.ppm', 'a/3.ppm')",
    )
    (root / "b" / "7.ppm").symlink_to(root / "a" / "1.ppm")  # a symbolic link into a second class: refused
    with pytest.raises(SourceError, match=r"^\S+: 1 image reached through symbolic links in a second class "
                       r"\('b/7.ppm' \(class 'b'\) is 'a/1.ppm' \(class 'a'\)\)"):  # fmt: skip
        ImageFolderSource(root)


def test_a_tree_without_links_is_read_without_a_stat_per_file(tmp_path, monkeypatch):
    """The files, order, names and description (the conversion's fingerprint) of a tree without links; and
    no os.stat per file (nor per folder)."""
    from bzna_tf.convert import ImageFolderSource

    root = _classes(tmp_path / "r", cat=["1.ppm", "0.ppm", "sub/0.ppm"], dog=["0.ppm", "b/x/1.ppm"])
    (root / "emu").mkdir()
    (root / "cat" / "notes.txt").write_text("x")
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (1_700_000_000, 1_700_000_000))
    real_stat, stats = os.stat, []

    def counted(path, *args, **kwargs):
        stats.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counted)
    src = ImageFolderSource(root)
    monkeypatch.setattr(os, "stat", real_stat)
    assert stats == [str(root)]  # is it a folder?
    size = len(ppm(gradient(8, 8)))
    assert src.describe() == {
        "kind": "folder",
        "extensions": [".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"],
        "files": [
            ["cat/0.ppm", size, 1_700_000_000, 0],
            ["cat/1.ppm", size, 1_700_000_000, 0],
            ["cat/sub/0.ppm", size, 1_700_000_000, 0],
            ["dog/0.ppm", size, 1_700_000_000, 1],
            ["dog/b/x/1.ppm", size, 1_700_000_000, 1],
        ],
    }
    assert src.notes == (
        "warning: 1 class without images: 'emu' (target 2)",
        "not taken: 1 file whose names do not end in an image extension ('cat/notes.txt')",
    )


def test_an_image_that_does_not_decode_stops_the_conversion_then_skip_resumes_it(tmp_path, capsys):
    """HTML saved as .jpg in a class folder: the default stops, naming the file, and keeps finished shards;
    the same command with --on-error skip finishes the rest, exactly as a skipping conversion from scratch."""
    m = tmp_path / "m"
    for c in ("a", "b"):
        (m / c).mkdir(parents=True)
        for i in range(3):
            (m / c / f"{i}.ppm").write_bytes(ppm(gradient(24, 32, seed=10 * ord(c) + i)))
    (m / "b" / "9.jpg").write_text("<html><body>404 Not Found</body></html>")  # the folder's last image
    out = tmp_path / "out" / "x.bzna"
    argv = ["convert", "folder", str(m), str(out), *FAST, "--order", "source", "--num-shards", "2"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bzna-tf convert: {m / 'b' / '9.jpg'}: FFmpeg cannot decode it (")
    assert "bytes starting b'<html><body>404 ' (neither JPEG nor PNG); --on-error skip" in err
    kept = sorted(p.name for p in out.parent.iterdir())
    assert kept == ["x-00000-of-00002.bzna"]  # shard 0 finished; shard 1's partial file removed
    first = (out.parent / kept[0]).read_bytes()
    assert main([*argv, "--on-error", "skip"]) == 0
    said = capsys.readouterr()
    assert "skipped 1 file that was already converted" in said.out
    assert "skipped 1 image that could not be read or decoded:" in said.out and "b/9.jpg" in said.out
    assert (out.parent / kept[0]).read_bytes() == first
    fresh = tmp_path / "fresh" / "x.bzna"
    assert main([*argv[:3], str(fresh), *argv[4:], "--on-error", "skip"]) == 0
    for k in range(2):
        name = f"x-{k:05d}-of-00002.bzna"
        assert (out.parent / name).read_bytes() == (fresh.parent / name).read_bytes()
    with BznaFile(out.parent / "x-00001-of-00002.bzna") as f:
        assert f.filenames() == ["b/0.ppm", "b/1.ppm", "b/2.ppm"] and f.targets.tolist() == [1, 1, 1]


def test_finished_shards_are_kept_only_where_they_fit_on_error_and_lenient(tmp_path, capsys):
    """A truncated JPEG in shard 1. Converted with --on-error skip, the shard leaves it out: a rerun with the
    default on_error refuses that shard (it would have stopped there); with --lenient the shard is converted
    again and keeps the repaired picture, while shard 0 (strict and complete) is kept as it is."""
    import io

    from PIL import Image

    m = tmp_path / "m"
    for c in ("a", "b"):
        (m / c).mkdir(parents=True)
        for i in range(2):
            (m / c / f"{i}.ppm").write_bytes(ppm(gradient(24, 32, seed=10 * ord(c) + i)))
    buf = io.BytesIO()
    Image.fromarray(gradient(96, 128, seed=7)).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    (m / "b" / "9.jpg").write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "out" / "x.bzna"
    argv = ["convert", "folder", str(m), str(out), *FAST, "--order", "source", "--num-shards", "2"]
    shard0, shard1 = (out.parent / f"x-0000{k}-of-00002.bzna" for k in range(2))
    assert main([*argv, "--on-error", "skip"]) == 0
    assert "skipped 1 image that could not be read or decoded" in capsys.readouterr().out
    first = {p: p.read_bytes() for p in (shard0, shard1)}
    assert main(["info", str(shard1)]) == 0
    info = capsys.readouterr().out
    assert ", 1 skipped\n" in info and f"  left out  {m / 'b' / '9.jpg'}: FFmpeg cannot decode it (" in info
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "bzna-tf convert: finished by a conversion with --on-error skip, which left out images" in err
    assert f"{shard1} left out {m / 'b' / '9.jpg'} (FFmpeg cannot decode it (" in err
    assert "Pass --on-error skip (on_error='skip') to keep these files as they are, or --overwrite" in err
    assert main([*argv, "--on-error", "skip"]) == 0
    said = capsys.readouterr().out
    assert "skipped 2 files that were already converted" in said
    assert "the files already converted left out 1 image that could not be read or decoded" in said
    assert {p: p.read_bytes() for p in first} == first
    assert main([*argv, "--lenient"]) == 0
    said = capsys.readouterr().out
    assert "skipped 1 file that was already converted" in said and f"wrote {shard1}: 3 images" in said
    assert (
        "converting x-00001-of-00002.bzna again: it was converted without --lenient and left out 1 image "
        "that --lenient may keep" in said
    )
    assert shard0.read_bytes() == first[shard0]
    assert main(["info", str(shard1)]) == 0
    assert ", 0 skipped, decoded leniently (--lenient)\n" in capsys.readouterr().out
    with BznaFile(shard1) as f:
        assert f.filenames() == ["b/0.ppm", "b/1.ppm", "b/9.jpg"]
        assert f.metadata["conversion"]["lenient"] is True and f.metadata["conversion"]["skipped"] == []
    # The same command again: nothing to do. Without --lenient, shard 1 (which may hold a repaired picture)
    # is converted again and stops at the truncated JPEG, which strict decoding refuses.
    assert main([*argv, "--lenient"]) == 0 and "skipped 2 files" in capsys.readouterr().out
    assert main(argv) == 1
    assert f"bzna-tf convert: {m / 'b' / '9.jpg'}: FFmpeg cannot decode it (" in capsys.readouterr().err
    assert shard0.read_bytes() == first[shard0] and shard1.exists()  # the lenient shard 1 is left as it was
