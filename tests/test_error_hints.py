"""Errors that point to the fix: a folder of images, a file a conversion is still writing, a small
file opened as ImageNet, and what a conversion prints where stderr is not a terminal.

Each reader case is checked at every entry point where it applies (Dataset, ClassificationDataset,
ImageNet, bzna-tf info / verify / preview), so that they all say the same.
"""

import io
import os
import re
import subprocess
import sys
import threading

import pytest
from conftest import gradient
from test_convert import jpeg
from test_convert_shards import make_folder

from bzna_tf import cli
from bzna_tf.convert import Item, convert
from bzna_tf.datasets import ClassificationDataset, Dataset, ImageNet
from bzna_tf.format.atomic import partial_path
from bzna_tf.format.crc import masked_crc32c

FAST = {"workers": 0, "order": "source", "progress": False}
IMAGENET_DIR = "{} is a directory without ilsvrc2012.bzna or ilsvrc2012.mp4 and without per-split files ({})"
PER_SPLIT = "train.bzna, val.bzna, test.bzna, or shards such as train-00000-of-00004.bzna"


def _said(path, tmp_path, capsys, error=FileNotFoundError) -> dict:
    """What each reader entry point says when asked to open ``path``: {entry point: message}."""
    path = str(path)
    out = {}
    for cls in (Dataset, ClassificationDataset, ImageNet):
        with pytest.raises(error) as e:
            cls(path)
        out[cls.__name__] = str(e.value)
    capsys.readouterr()
    for command, *rest in (["info"], ["verify", "--no-decode"], ["preview", "-o", str(tmp_path / "g.png")]):
        assert cli.main([command, path, *rest]) == 1
        said = capsys.readouterr()
        if command == "verify" and not said.err:  # a file it cannot open is reported with the others
            line = f"{path}: could not be read: "
            out[command] = next(s for s in said.out.splitlines() if s.startswith(line))[len(line) :]
            continue
        prefix = f"bzna-tf {command}: "
        assert said.err.startswith(prefix) and said.err.count("\n") == 1, said
        out[command] = said.err[len(prefix) : -1]
    return out


def _jpegs(folder, names):
    for k, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(jpeg(gradient(24, 32, seed=k)))
    return folder


# ----------------------------------------------------------------------------- a folder of images


def test_a_folder_of_jpegs_says_how_to_convert_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _jpegs(tmp_path / "photos", ["IMG_0001.jpg", "IMG_0002.jpg"])
    (tmp_path / "photos" / "notes.txt").write_text("holiday\n")
    hint = (
        "photos/IMG_0001.jpg looks like a JPEG image (bzna-tf convert folder photos OUT.bzna makes a .bzna "
        "of the folder's images, unlabelled: one sub-folder per class labels them)"
    )
    said = _said("photos", tmp_path, capsys)
    assert said.pop("ImageNet") == IMAGENET_DIR.format("photos", PER_SPLIT) + ": " + hint
    assert set(said.values()) == {f"photos is a directory without .bzna files: {hint}"}, said


def test_a_folder_of_class_folders_says_how_to_convert_it(tmp_path, capsys):
    classes = _jpegs(tmp_path / "flowers", ["daisy/1.jpg", "daisy/2.jpg", "rose/3.jpg"])
    hint = (
        f"{classes}/daisy/1.jpg looks like a JPEG image (bzna-tf convert folder {classes} OUT.bzna makes a "
        ".bzna of the folder's images, one class per sub-folder)"
    )
    said = _said(classes, tmp_path, capsys)
    assert said.pop("ImageNet") == IMAGENET_DIR.format(classes, PER_SPLIT) + ": " + hint
    assert set(said.values()) == {f"{classes} is a directory without .bzna files: {hint}"}, said


def test_a_folder_of_tfrecords_gives_the_tfrecord_hint_of_a_single_file(tmp_path, capsys):
    records = tmp_path / "records"
    records.mkdir()
    data = b"\x0a\x00"  # an empty tf.train.Example would do as well: only the framing is looked at
    header = len(data).to_bytes(8, "little")
    frame = (
        header
        + masked_crc32c(header).to_bytes(4, "little")
        + data
        + masked_crc32c(data).to_bytes(4, "little")
    )
    (records / "train-00000-of-00001").write_bytes(frame * 3)
    (records / "README").write_text("made by hand\n")
    said = _said(records, tmp_path, capsys)
    hint = (
        f"{records}/train-00000-of-00001 looks like a TFRecord file (bzna-tf convert tfrecord makes a .bzna "
        "of it)"
    )
    assert said.pop("ImageNet").endswith(f"({PER_SPLIT}): {hint}")
    assert set(said.values()) == {f"{records} is a directory without .bzna files: {hint}"}, said


def test_a_folder_without_anything_known_is_said_as_before(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("nothing to see\n")
    said = _said(tmp_path / "empty", tmp_path, capsys)
    assert said.pop("ImageNet") == IMAGENET_DIR.format(tmp_path / "empty", PER_SPLIT)
    assert set(said.values()) == {f"{tmp_path / 'empty'} is a directory without .bzna files"}


# ------------------------------------------------------------------------- a conversion still writing


class _Paused(list):
    """Items whose ``pause``-th is handed over only once ``go`` is set (``ready`` says it is waited for)."""

    def __init__(self, items, pause):
        super().__init__(items)
        self.pause, self.ready, self.go = pause, threading.Event(), threading.Event()

    def __getitem__(self, i):
        if i == self.pause:
            self.ready.set()
            assert self.go.wait(120), "the test never let the conversion go on"
        return super().__getitem__(i)


def _running(items, output, **kwargs):
    """A real conversion of ``items`` in a thread, paused at ``items.pause``; joined by the caller."""
    result = {}

    def run():
        try:
            result["summary"] = convert(items, output, **FAST, **kwargs)
        except BaseException as e:  # reported by the test
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert items.ready.wait(120), result
    return thread, result


def _finish(items, thread, result):
    items.go.set()
    thread.join(120)
    assert "summary" in result, result


def _items(n):
    return [Item(f"{i}.jpg", i % 2, data=jpeg(gradient(24, 32, seed=i))) for i in range(n)]


def test_a_file_a_running_conversion_writes_is_named_with_its_partial_file(tmp_path, capsys):
    items = _Paused(_items(3), pause=2)
    out = tmp_path / "out" / "train.bzna"
    thread, result = _running(items, out)
    try:
        partial = partial_path(out)  # the converter's own naming
        assert os.path.exists(partial) and not out.exists()
        note = (
            f"{partial} exists: a conversion is writing it (it takes the name train.bzna when complete; a "
            "conversion that was killed leaves it too: run the same command again to finish it)"
        )
        said = _said(out, tmp_path, capsys)
        assert set(said.values()) == {f"{out}: no such file, but {note}"}, said
        # A pattern that would match it (the partial file matches it in partial form) says so too.
        pattern = str(out.parent / "tr*.bzna")
        said = _said(pattern, tmp_path, capsys)
        assert set(said.values()) == {f"no file matches the pattern {pattern!r}: {note}"}, said
        # The folder it goes in says the same, whichever entry point opens it.
        said = _said(out.parent, tmp_path, capsys)
        assert said.pop("ImageNet") == IMAGENET_DIR.format(out.parent, PER_SPLIT) + ": " + note
        assert set(said.values()) == {f"{out.parent} is a directory without .bzna files: {note}"}, said
    finally:
        _finish(items, thread, result)
    assert out.exists() and not os.path.exists(partial_path(out))
    # Without a partial file, a missing file is only missing.
    said = _said(tmp_path / "out" / "other.bzna", tmp_path, capsys)
    assert all("No such file or directory" in m and "partial" not in m for m in said.values()), said


def test_shards_a_running_conversion_writes_are_named_with_their_partial_file(tmp_path, capsys):
    items = _Paused(_items(6), pause=4)  # shard 0 (items 0-2) is finished, shard 1 is being written
    out = tmp_path / "out" / "train.bzna"  # a split's name: ImageNet's per-split folder opens it too
    thread, result = _running(items, out, num_shards=2)
    try:
        shard1 = tmp_path / "out" / "train-00001-of-00002.bzna"
        partial = partial_path(shard1)
        assert os.path.exists(partial) and (tmp_path / "out" / "train-00000-of-00002.bzna").exists()
        note = (
            f"{partial} exists: a conversion is writing it (it takes the name train-00001-of-00002.bzna when "
            "complete; a conversion that was killed leaves it too: run the same command again to finish it)"
        )
        said = _said(out.parent, tmp_path, capsys)
        expected = (
            f"{out.parent}: 1 of the 2 shards train-*-of-00002.bzna are missing (train-00001-of-00002.bzna): "
            + note
        )
        assert set(said.values()) == {expected}, said
        said = _said(shard1, tmp_path, capsys)
        assert set(said.values()) == {f"{shard1}: no such file, but {note}"}, said
    finally:
        _finish(items, thread, result)


# ----------------------------------------------------------------------------- a small file as ImageNet


def test_a_small_file_opened_as_imagenet_points_to_classification_dataset(tmp_path):
    small = tmp_path / "small.bzna"
    convert(_items(4), small, **FAST)
    for split in ("train", "val[:10]", "test"):
        with pytest.raises(ValueError) as e:
            ImageNet(small, split=split)
        assert str(e.value) == (
            "an ImageNet file holds at least 150000 entries (val + test, counted from its end): for other "
            "data, use bzna_tf.ClassificationDataset (its one split, 'all', slices as '[:80%]' and "
            "'[80%:]'); a folder of per-split files (train.bzna, val.bzna) opens with "
            f"bzna_tf.ImageNet(folder, split=...). Received: num_samples=4 (in {small})"
        )
    assert len(ClassificationDataset(small, split="[:50%]")) == 2  # what the message says works
    assert len(ImageNet(small)) == 4  # no split asked: every sample, nothing counted from the end


# ------------------------------------------------------------------- a conversion's output to a log file


def _skip_items():
    good = _items(4)
    return [good[0], Item("bad.jpg", 1, data=b"<html>404 Not Found</html>", origin="bad one"), *good[1:]]


def test_skip_lines_and_progress_are_plain_lines_where_the_log_is_no_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr("bzna_tf.format.progress.INTERVAL", 0.0)  # a progress line after every image
    log = io.StringIO()  # not a terminal
    summary = convert(
        _skip_items(), tmp_path / "x.bzna", workers=0, order="source", on_error="skip", progress=True, log=log
    )
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text and text.endswith("\n"), repr(text)
    lines = text.splitlines()
    skipped = [line for line in lines if line.startswith("skipped ")]
    assert skipped == [
        "skipped bad one: FFmpeg cannot decode it (Invalid data found when processing input): 26 bytes "
        "starting b'<html>404 Not Fo' (neither JPEG nor PNG)"
    ]
    progress = [line for line in lines if line not in skipped]
    assert len(progress) == 5, lines  # one per image, skipped or not
    pattern = r"(\d) of 5 images \((\d+)%\) in 0:00:\d\d, \d+\.\d images/s, 0:\d\d:\d\d left(, 1 skipped)?"
    found = [re.fullmatch(pattern, line) for line in progress]
    assert all(found), progress
    assert [int(m[1]) for m in found] == [1, 2, 3, 4, 5] and [int(m[2]) for m in found] == [
        20,
        40,
        60,
        80,
        100,
    ]
    assert [bool(m[3]) for m in found] == [False, True, True, True, True]
    assert summary.images == 4


def test_a_terminal_log_keeps_the_redrawn_bar(tmp_path):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    log = Terminal()
    convert(
        _skip_items(), tmp_path / "x.bzna", workers=0, order="source", on_error="skip", progress=True, log=log
    )
    assert "\r" in log.getvalue() and "5/5" in log.getvalue() and "skipped bad one: " in log.getvalue()


def test_the_cli_with_captured_stderr_prints_each_skip_line_whole_and_the_summary_intact(tmp_path):
    src = make_folder(tmp_path / "src", {"a": 3, "b": 3}, size=(16, 24))
    (src / "a" / "broken.jpg").write_bytes(b"<html>404 Not Found</html>")
    command = [sys.executable, "-m", "bzna_tf.cli", "convert", "folder", str(src), str(tmp_path / "x.bzna")]
    run = subprocess.run(
        [*command, "--processes", "0", "--on-error", "skip", "--preset", "ultrafast"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one log, as `2>&1 | tee log` or a batch job's output file
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout
    assert "\r" not in run.stdout, repr(run.stdout)
    lines = run.stdout.splitlines()
    skip = f"skipped {src}/a/broken.jpg: FFmpeg cannot decode it (Invalid data found when processing input)"
    assert [line for line in lines if "broken.jpg" in line] == [
        f"{skip}: 26 bytes starting b'<html>404 Not Fo' (neither JPEG nor PNG)",
        f"  {src}/a/broken.jpg: FFmpeg cannot decode it (Invalid data found when processing input): 26 bytes "
        "starting b'<html>404 Not Fo' (neither JPEG nor PNG)",
    ]
    # The summary (stdout) comes whole after the log lines (stderr), each on its own line.
    wrote = [k for k, line in enumerate(lines) if line.startswith("wrote ")]
    assert len(wrote) == 1 and lines[wrote[0]].startswith(f"wrote {tmp_path / 'x.bzna'}: 6 images, ")
    assert lines[wrote[0] - 1] == f"{skip}: 26 bytes starting b'<html>404 Not Fo' (neither JPEG nor PNG)"
    assert "skipped 1 image that could not be read or decoded:" in lines[wrote[0] :]


def test_the_folder_images_are_named_as_sniff_names_them():
    from bzna_tf.format.hints import FOLDER_IMAGES
    from bzna_tf.format.sniff import SIGNATURES

    assert set(FOLDER_IMAGES) <= {what for _, what in SIGNATURES}


def test_which_logs_get_the_redrawn_bar(tmp_path):
    from bzna_tf.format.progress import redraws

    class Notebook(io.StringIO):  # a Jupyter kernel's output: no terminal, but it draws '\r' as one line
        pass

    Notebook.__module__ = "ipykernel.iostream"

    class Logger:  # a logging adapter (the Beam pipeline's): no isatty at all
        def write(self, text):
            pass

    closed = open(tmp_path / "log", "w")
    closed.close()
    assert redraws(Notebook()) and not redraws(io.StringIO()) and not redraws(Logger())
    assert not redraws(closed)
