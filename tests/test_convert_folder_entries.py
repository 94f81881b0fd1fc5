"""An image folder's odd entries are named, skipped or refused, never dropped silently (issue 35, items 5, 8).

A file name that is not UTF-8 (``bad\\xff\\xfe.jpg``) stopped the conversion
some images in with "'utf-8' codec can't encode characters ... surrogates not
allowed", naming no file, even with ``--on-error skip``; it is now a bad
record named with ``\\x`` escapes, found before any image is encoded.
Dangling symbolic links were neither taken nor counted; they are now listed
with the other files not taken.
"""

import os
import sys

import numpy as np
import pytest
from _sources_data import gradient, ppm

from bzna_tf.cli import main
from bzna_tf.convert import ConversionError, EncodeOptions, ImageFolderSource, Item, SourceError, convert
from bzna_tf.format import BznaFile

CLI = ["--processes", "0", "--preset", "ultrafast", "--crf", "24", "--chroma", "average", "--no-progress"]
BAD = os.fsdecode(b"bad\xff\xfe.ppm")  # as os.listdir gives it: 'bad\udcff\udcfe.ppm'

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or sys.getfilesystemencoding().lower() != "utf-8",
    reason="file names as bytes: a POSIX file system with UTF-8 names",
)


def folder(root, per_class=5):
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            (root / c / f"{i}.ppm").write_bytes(ppm(gradient(16, 24, seed=10 * ord(c[0]) + i)))
    return root


def test_a_file_name_that_is_not_utf8_is_skipped_by_name_and_the_rest_converts(tmp_path, capsys):
    root = folder(tmp_path / "m")
    (root / "cat" / BAD).write_bytes(ppm(gradient(16, 24, seed=99)))
    out = tmp_path / "out" / "x.bzna"
    argv = ["convert", "folder", str(root), str(out), *CLI]
    # Without --on-error skip: stopped before any image is encoded, wherever the shuffle puts the file.
    assert main(argv) == 1
    err = capsys.readouterr().err
    shown = f"{root}/cat/bad\\xff\\xfe.ppm"
    assert err == (
        f"bzna-tf convert: {shown}: its name is not valid UTF-8 (shown with \\x escapes), and a .bzna file "
        "stores names as UTF-8: rename it; --on-error skip (on_error='skip') leaves such records out and "
        "counts them in the summary\n"
    )
    assert not out.parent.exists() or not os.listdir(out.parent)
    assert main([*argv, "--on-error", "skip"]) == 0
    said = capsys.readouterr()
    assert "labels: 10 labelled, 0 unlabelled, 1 skipped" in said.out
    assert f"  {shown}: its name is not valid UTF-8" in said.out
    with BznaFile(out) as f:
        assert sorted(f.filenames()) == sorted(f"{c}/{i}.ppm" for c in ("cat", "dog") for i in range(5))
        assert f.metadata["conversion"]["skipped"] == [[shown, f.metadata["conversion"]["skipped"][0][1]]]


def test_several_such_names_are_counted_before_any_work(tmp_path):
    root = folder(tmp_path / "m", per_class=2)
    (root / "dog" / os.fsdecode(b"sub\xe9")).mkdir()  # a folder inside a class: every file under it
    for name in (b"a\xff.ppm", b"b\xff.ppm"):
        (root / "dog" / os.fsdecode(b"sub\xe9") / os.fsdecode(name)).write_bytes(ppm(gradient(16, 24)))
    (root / "cat" / BAD).write_bytes(ppm(gradient(16, 24)))
    src = ImageFolderSource(root)
    assert src.bad_records().tolist() == [2, 5, 6]
    assert [src.item(i).filename for i in (2, 5, 6)] == [
        "cat/bad\\xff\\xfe.ppm",
        "dog/sub\\xe9/a\\xff.ppm",
        "dog/sub\\xe9/b\\xff.ppm",
    ]
    with pytest.raises(ConversionError) as e:
        convert(src, tmp_path / "x.bzna", workers=0, progress=False)
    assert str(e.value).startswith(
        f"{root}/cat/bad\\xff\\xfe.ppm: its name is not valid UTF-8 (shown with \\x escapes), and a .bzna "
        f"file stores names as UTF-8: rename it (3 images in all: this one, {root}/dog/sub\\xe9/a\\xff.ppm, "
        f"{root}/dog/sub\\xe9/b\\xff.ppm); --on-error skip"
    )


def test_a_class_folder_whose_name_is_not_utf8_is_refused(tmp_path):
    """Skipping a class would shift the targets of the classes after it: its name must be fixed."""
    root = folder(tmp_path / "m", per_class=1)
    (root / os.fsdecode(b"caf\xe9")).mkdir()
    (root / os.fsdecode(b"caf\xe9") / "1.ppm").write_bytes(ppm(gradient(16, 24)))
    with pytest.raises(SourceError) as e:
        ImageFolderSource(root)
    assert str(e.value) == (
        f"{root}: 1 class folder whose name is not valid UTF-8 (shown with \\x escapes: 'caf\\xe9'); a .bzna "
        "file stores class names as UTF-8: rename it"
    )


def test_a_root_whose_name_is_not_utf8_converts_and_prints_with_escapes(tmp_path):
    """The stored names are relative to the root; the root shows in messages (and a shard's metadata)."""
    root = folder(tmp_path / os.fsdecode(b"data\xff"), per_class=1)
    (root / "dog" / "x.jpg").write_bytes(b"<html>404</html>")
    out = tmp_path / "x.bzna"
    s = convert(ImageFolderSource(root), out, workers=0, progress=False, on_error="skip", log=None)
    assert s.images == 2 and s.skipped[0][0] == f"{tmp_path}/data\\xff/dog/x.jpg"
    with BznaFile(out) as f:
        assert sorted(f.filenames()) == ["cat/0.ppm", "dog/0.ppm"]
        assert f.metadata["conversion"]["skipped"][0][0] == f"{tmp_path}/data\\xff/dog/x.jpg"


def test_a_record_name_that_is_not_utf8_is_a_bad_record_for_every_source(tmp_path):
    """A list of Items (or a source such as WebDataset, whose tar member names may hold any bytes)."""
    data = ppm(gradient(16, 24))
    items = [Item("ok.ppm", 0, data=data), Item(os.fsdecode(b"x\xff.ppm"), 0, data=data, origin="t.tar 1")]
    with pytest.raises(ConversionError, match=r"^t.tar 1: its name is not valid UTF-8 \(shown with \\x"):
        convert(items, tmp_path / "x.bzna", order="source", workers=0, progress=False)
    s = convert(
        items, tmp_path / "y.bzna", order="source", workers=0, progress=False, on_error="skip", log=None
    )
    assert s.images == 1 and s.skipped[0][0] == "t.tar 1"


def test_dangling_and_looping_links_and_fifos_are_counted_as_not_taken(tmp_path, capsys):
    root = folder(tmp_path / "m", per_class=2)
    (root / "dog" / "gone.ppm").symlink_to(root / "nowhere.ppm")
    (root / "cat" / "sub").mkdir()
    (root / "cat" / "sub" / "gone.ppm").symlink_to("../../missing.ppm")
    (root / "cat" / "loop.ppm").symlink_to(root / "cat" / "loop.ppm")
    (root / "top.ppm").symlink_to(root / "absent.ppm")  # beside the class folders: not an image either
    os.mkfifo(root / "dog" / "pipe.ppm")  # opening it would wait forever
    (tmp_path / "elsewhere.ppm").write_bytes(ppm(gradient(16, 24, seed=99)))
    (root / "dog" / "ok.ppm").symlink_to(tmp_path / "elsewhere.ppm")  # a link to a file is taken
    src = ImageFolderSource(root)
    assert [i.filename for i in src] == ["cat/0.ppm", "cat/1.ppm", "dog/0.ppm", "dog/1.ppm", "dog/ok.ppm"]
    assert src.notes == (
        "not taken: 3 dangling symbolic links ('top.ppm', 'cat/sub/gone.ppm', 'dog/gone.ppm')",
        "not taken: 1 symbolic link in a loop ('cat/loop.ppm')",
        "not taken: 1 entry that is neither a file nor a folder (a FIFO, socket or device) ('dog/pipe.ppm')",
    )
    assert main(["convert", "folder", str(root), str(tmp_path / "x.bzna"), *CLI]) == 0
    said = capsys.readouterr().out
    assert "not taken: 3 dangling symbolic links ('top.ppm', 'cat/sub/gone.ppm', 'dog/gone.ppm')\n" in said
    with BznaFile(tmp_path / "x.bzna") as f:
        assert len(f) == 5 and np.array_equal(np.sort(f.targets), [0, 0, 1, 1, 1])


def locked(monkeypatch, *paths):
    """``os.scandir`` refusing ``paths`` as ``chmod 000`` makes it (root, as in CI containers, reads any
    folder, so the refusal is simulated)."""
    scandir, refused = os.scandir, {os.fspath(p) for p in paths}

    def listing(path="."):
        if os.fspath(path) in refused:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", listing)


def test_a_folder_that_cannot_be_read_stops_naming_it_and_its_class_even_with_on_error_skip(
    tmp_path, monkeypatch, capsys
):
    """It stopped with a bare "PATH: Permission denied", even with --on-error skip. Its images cannot be
    listed, and the folder is read when the source is made (before the conversion and its on_error):
    leaving it out would drop them without a word, so it stops, naming the folder and its class."""
    root = folder(tmp_path / "m", per_class=1)
    (root / "dog" / "locked").mkdir()
    (root / "dog" / "locked" / "1.ppm").write_bytes(ppm(gradient(16, 24)))
    tail = (
        ". Its images cannot be listed, and a folder is not a record that --on-error skip can leave out "
        "(folders are listed when the source is made, before the conversion; leaving one out would drop its "
        f"images without a word): make it readable (chmod -R u+rX), or move it out of {root} to convert "
        "without its images"
    )
    nested = (
        f"{root / 'dog' / 'locked'}: cannot read this folder (in class 'dog'): permission denied (Permission "
        f"denied, errno 13){tail}"
    )
    locked(monkeypatch, root / "dog" / "locked")
    with pytest.raises(SourceError) as e:
        ImageFolderSource(root)
    assert str(e.value) == nested
    out = tmp_path / "x.bzna"
    assert main(["convert", "folder", str(root), str(out), *CLI, "--on-error", "skip"]) == 1
    assert capsys.readouterr().err == f"bzna-tf convert: {nested}\n"
    assert not out.exists()
    # A class folder itself.
    locked(monkeypatch, root / "cat")
    with pytest.raises(SourceError) as e:
        ImageFolderSource(root)
    assert str(e.value) == (
        f"{root / 'cat'}: cannot read this folder (the folder of class 'cat'): permission denied (Permission "
        f"denied, errno 13){tail}"
    )
    # The folder to convert.
    locked(monkeypatch, root)
    with pytest.raises(SourceError) as e:
        ImageFolderSource(root)
    assert str(e.value) == (
        f"{root}: cannot read this folder: permission denied (Permission denied, errno 13): make it readable "
        "(chmod u+rX), or convert as a user who can read it"
    )


def test_a_rerun_refused_after_the_folder_changed_says_which_images_changed(tmp_path):
    root = folder(tmp_path / "m", per_class=3)
    out = tmp_path / "out" / "x.bzna"
    fast = {"workers": 0, "progress": False, "encoding": EncodeOptions(preset="ultrafast", crf=30)}
    convert(ImageFolderSource(root), out, num_shards=2, **fast)
    (root / "cat" / "new.ppm").write_bytes(ppm(gradient(16, 24, seed=77)))
    os.remove(root / "dog" / "2.ppm")
    with pytest.raises(ConversionError) as e:
        convert(ImageFolderSource(root), out, num_shards=2, **fast)
    assert "written by a conversion with other sources or options" in str(e.value)
    assert str(e.value).endswith(
        ". The source's images by name: 1 image added since (cat/new.ppm), 1 image gone (dog/2.ppm)"
    )
    os.remove(root / "cat" / "new.ppm")
    (root / "dog" / "2.ppm").write_bytes(ppm(gradient(16, 24, seed=78)))  # the same name, other bytes
    later = (
        os.stat(root / "dog" / "1.ppm").st_mtime_ns + 5 * 10**9
    )  # (a whole second on: fingerprints count them)
    os.utime(root / "dog" / "2.ppm", ns=(later, later))
    with pytest.raises(ConversionError, match="The source holds the same images by name: their sizes, dates"):
        convert(ImageFolderSource(root), out, num_shards=2, **fast)
    # Images left out (on_error="skip") were in the folder: not "added" since.
    (root / "cat" / "bad.ppm").write_bytes(b"P6\n16 24\n255\n")  # no pixels
    convert(ImageFolderSource(root), out, num_shards=2, overwrite=True, on_error="skip", **fast)
    os.remove(root / "dog" / "0.ppm")
    with pytest.raises(ConversionError) as e:
        convert(ImageFolderSource(root), out, num_shards=2, on_error="skip", **fast)
    assert str(e.value).endswith(". The source's images by name: 1 image gone (dog/0.ppm)")
    os.remove(out.parent / "x-00001-of-00002.bzna")  # a shard missing: its images are not "added"
    (root / "cat" / "0.ppm").unlink()
    with pytest.raises(ConversionError) as e:
        convert(ImageFolderSource(root), out, num_shards=2, **fast)
    assert "added" not in str(e.value)
