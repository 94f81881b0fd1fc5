"""What every writer of the command line does with its output, and the errors a new user meets.

The walkthrough's cases: ``bzna-tf convert: out/new/sub/.imgs.bzna.partial: No
such file or directory``; ``verify --exclusion-list`` failing after the whole
run with no report; ``preview`` on a file with one damaged sample ending in a
DataLossError traceback; ``-o grid.jpg`` holding PNG bytes; a quoted
``'~/tfr/tfds-*'`` never expanded.
"""

import os

import numpy as np
import pytest
from conftest import gradient
from test_convert_shards import make_folder, tfrecord
from test_on_error import DAMAGED, UNDECODABLE, bad_file  # noqa: F401 (a fixture)

from bzna_tf.cli import main
from bzna_tf.format import BznaFile

FAST = ["--workers", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]


@pytest.fixture()
def small(tmp_path):
    """A converted file of 6 images in 2 classes."""
    src = make_folder(tmp_path / "src", {"ant": 3, "bee": 3}, size=(16, 24))
    out = tmp_path / "small.bzna"
    assert main(["convert", "folder", str(src), str(out), *FAST]) == 0
    return out


# ----------------------------------------------------------------------------- output folders (item 6)


def test_convert_creates_the_output_folder(tmp_path, capsys):
    src = make_folder(tmp_path / "src", {"a": 2}, size=(8, 8))
    out = tmp_path / "out" / "new" / "sub" / "imgs.bzna"
    assert main(["convert", "folder", str(src), str(out), *FAST]) == 0, capsys.readouterr().err
    assert len(BznaFile(out)) == 2
    shards = tmp_path / "other" / "shards" / "train.bzna"
    assert main(["convert", "folder", str(src), str(shards), *FAST, "--num-shards", "2"]) == 0
    assert sorted(os.listdir(shards.parent)) == ["train-00000-of-00002.bzna", "train-00001-of-00002.bzna"]


def test_an_output_folder_that_cannot_be_made_is_refused_before_any_work(
    tmp_path, small, capsys, monkeypatch
):
    import bzna_tf.datasets
    import bzna_tf.verify

    (tmp_path / "blocker").write_text("a file where a folder should be")
    bad = tmp_path / "blocker" / "sub" / "out"
    # convert: before the source is read (a missing folder would give another message)
    assert main(["convert", "folder", str(tmp_path / "missing"), f"{bad}.bzna", *FAST]) == 1
    err = capsys.readouterr().err
    assert "blocker" in err and "missing" not in err, err

    def no_work(*args, **kwargs):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr(bzna_tf.verify, "verify", no_work)
    assert main(["verify", str(small), "--exclusion-list", f"{bad}.txt"]) == 1
    assert f"bzna-tf verify: {tmp_path / 'blocker'}" in capsys.readouterr().err
    monkeypatch.setattr(bzna_tf.datasets.Dataset, "to_sample_list", no_work)
    assert main(["samplelist", str(small), "-o", f"{bad}.txt"]) == 1
    assert f"bzna-tf samplelist: {tmp_path / 'blocker'}" in capsys.readouterr().err
    monkeypatch.setattr(bzna_tf.datasets.Dataset, "as_dataset", no_work)
    assert main(["preview", str(small), "-o", f"{bad}.png"]) == 1
    assert f"bzna-tf preview: {tmp_path / 'blocker'}" in capsys.readouterr().err


def test_samplelist_preview_and_verify_create_their_output_folders(tmp_path, small, capsys):
    lst = tmp_path / "lists" / "new" / "all.txt"
    assert main(["samplelist", str(small), "-o", str(lst)]) == 0 and lst.exists()
    grid = tmp_path / "previews" / "new" / "grid.png"
    assert main(["preview", str(small), "-o", str(grid), "--n", "4"]) == 0 and grid.exists()
    excl = tmp_path / "verify" / "new" / "excluded.txt"
    assert main(["verify", str(small), "--exclusion-list", str(excl), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert excl.exists() and "6 samples" in printed and f"{excl}: CONDUIT_HDF5_EXCLUSION" in printed


def test_verify_prints_its_report_before_writing_the_exclusion_list(tmp_path, small, capsys, monkeypatch):
    from bzna_tf.format.samplelist import SampleList

    def fails(self, path, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(SampleList, "write", fails)
    assert main(["verify", str(small), "--exclusion-list", str(tmp_path / "x.txt"), "--workers", "1"]) == 1
    captured = capsys.readouterr()
    assert "6 samples" in captured.out and "Permission denied" in captured.err


# ----------------------------------------------------------------------------- preview (items 8 and 11)


def test_preview_of_a_damaged_sample_is_one_line_and_on_error_skip_leaves_it_out(tmp_path, bad_file, capsys):  # noqa: F811
    grid = tmp_path / "grid.png"
    assert main(["preview", str(bad_file), "-o", str(grid), "--first", "--n", "6"]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert (
        err.startswith(f"bzna-tf preview: {bad_file}, sample {DAMAGED}, byte offset ")
        and "--on-error skip" in err
    )
    assert not grid.exists()
    assert main(["preview", str(bad_file), "-o", str(grid), "--first", "--n", "6", "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    shown = [0, 1, 2, 4, 6, 7]  # 3 and 5 are damaged: the next samples take their places
    assert "6 samples (" + ", ".join(map(str, shown)) + ")" in captured.out
    skipped = [line for line in captured.err.splitlines() if "skipped a damaged sample" in line]
    first = f"bzna-tf preview: skipped a damaged sample: {bad_file}, sample 3: could not decode the 53-byte"
    assert skipped[0].startswith(first), skipped
    assert len(skipped) == 2 and f"{bad_file}, sample {DAMAGED}, byte offset" in skipped[1]
    assert "Traceback" not in captured.err and grid.exists()


def test_preview_skip_with_shuffle_and_too_few_good_samples(tmp_path, bad_file):  # noqa: F811
    import warnings

    from bzna_tf.previews import PreviewWarning, preview

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = preview(bad_file, 12, seed=3, on_error="skip", shape=(8, 8))
    bad = {*UNDECODABLE, DAMAGED}
    assert sorted(p.indices) == sorted(set(range(12)) - bad)
    messages = [str(w.message) for w in caught if issubclass(w.category, PreviewWarning)]
    assert sum("skipped a damaged sample" in m for m in messages) == 3
    assert "3 damaged samples left out: the preview shows 9 samples" in messages
    with pytest.raises(ValueError, match="on_error"):
        preview(bad_file, 2, on_error="ignore")


def test_preview_writes_the_format_its_suffix_names(tmp_path, small, capsys):
    for name, magic in (("g.png", b"\x89PNG"), ("g.jpg", b"\xff\xd8\xff"), ("G.JPEG", b"\xff\xd8\xff")):
        assert main(["preview", str(small), "-o", str(tmp_path / name), "--n", "2"]) == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    capsys.readouterr()
    assert main(["preview", str(small), "-o", str(tmp_path / "g.webp"), "--n", "2"]) == 1
    err = capsys.readouterr().err
    assert "Expected an image file name ending in .png, .jpg, .jpeg" in err and "g.webp" in err
    assert not (tmp_path / "g.webp").exists()


# ----------------------------------------------------------------------------- ~ in paths (item 11)


def test_tilde_is_expanded_in_quoted_patterns_and_paths(tmp_path, monkeypatch, capsys):
    from test_convert import write_gulp_chunk

    from bzna_tf.convert import GulpSource, ImageFolderSource, TFRecordSource

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "tfr").mkdir()
    images = [np.ascontiguousarray(gradient(8, 8, seed=i)) for i in range(3)]
    ppms = [b"P6\n8 8\n255\n" + im.tobytes() for im in images]
    tfrecord(
        tmp_path / "tfr" / "tfds-train.tfrecord-00000-of-00001", [{"image": p, "label": 1} for p in ppms]
    )
    # The README's snippet, the pattern quoted as documented: no shell expands the ~.
    assert main(["convert", "tfrecord", "~/tfr/tfds-*", "~/out/tfds.bzna", *FAST]) == 0, (
        capsys.readouterr().err
    )
    assert len(BznaFile(tmp_path / "out" / "tfds.bzna")) == 3
    capsys.readouterr()
    assert main(["info", "~/out/tfds.bzna"]) == 0
    assert main(["samplelist", "~/out/tfds.bzna", "-o", "~/lists/all.txt"]) == 0
    assert main(["samplelist", "--check", "~/lists/all.txt"]) == 0
    assert main(["preview", "~/out/tfds.bzna", "-o", "~/p/grid.png", "--n", "2"]) == 0
    assert main(["verify", "~/out/tfds.bzna", "--exclusion-list", "~/v/x.txt", "--workers", "1"]) == 0
    assert (tmp_path / "lists" / "all.txt").exists() and (tmp_path / "p" / "grid.png").exists()
    assert (tmp_path / "v" / "x.txt").exists()
    # The sources themselves, from Python.
    assert len(TFRecordSource("~/tfr/tfds-*")) == 3
    make_folder(tmp_path / "folder", {"a": 1}, size=(8, 8))
    assert len(ImageFolderSource("~/folder")) == 1
    write_gulp_chunk(tmp_path / "g", 0, {"v": (0, images[:2])})
    assert len(GulpSource("~/g")) == 2
