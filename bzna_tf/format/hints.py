"""What to add when a path holds no .bzna: a conversion still writing it, or data that converts to one.

A missing file whose conversion is running (or was killed) has its partial
file beside it, under the name the converter gives it
(:func:`bzna_tf.format.atomic.partial_path`, ``.NAME.partial``); a folder
without .bzna files may hold images or TFRecord files, judged from their
first bytes as a single file is (:func:`bzna_tf.format.sniff.sniff`), and
then the message says which ``bzna-tf convert`` makes a .bzna of them::

    out/train.bzna: no such file, but out/.train.bzna.partial exists: a conversion is writing it (...)
    photos is a directory without .bzna files: photos/1.jpg looks like a JPEG image (bzna-tf convert
    folder photos OUT.bzna makes a .bzna of the folder's images, unlabelled: ...)

Local paths only: the callers leave URLs out.
"""

from __future__ import annotations

import os
import shlex

from bzna_tf.format.atomic import final_path, partial_path
from bzna_tf.format.sniff import convert_hint, read_head, sniff
from bzna_tf.format.wording import count

__all__ = ["FOLDER_IMAGES", "directory_hint", "missing_file", "writing_note"]

FOLDER_IMAGES = ("a JPEG image", "a PNG image", "a GIF image", "a WebP image", "a TIFF image")
"""What :func:`~bzna_tf.format.sniff.sniff` calls the images ``bzna-tf convert folder`` takes."""

# How much of a folder is looked at: a few files, and a few files of a few sub-folders (a folder of
# a million images is listed once, by the reader, and no sub-folder is walked).
_FILES = 8
_FOLDERS = 4
_FILES_PER_FOLDER = 4
# What tells nothing about what to do: sniff's words for text and empty files.
_UNHELPFUL = ("a text file", "an HTML page", "an empty file")
# Output names a reader looks for, whose partial files a folder's hint names.
_READ_SUFFIXES = (".bzna", ".mp4")


def writing_note(partial: str, name: str, others: int = 0) -> str:
    """``PARTIAL exists: a conversion is writing it (...)``: why the file ``name`` is not there yet."""
    also = f" (and {count(others, 'other partial file')})" if others else ""
    return (
        f"{partial} exists{also}: a conversion is writing it (it takes the name {name} when complete; a "
        "conversion that was killed leaves it too: run the same command again to finish it)"
    )


def missing_file(path: str) -> FileNotFoundError | None:
    """The error for a missing ``path`` whose partial file exists, else None (then it is only missing)."""
    partial = partial_path(path)
    if not os.path.exists(partial):
        return None
    # One argument, no errno: str() is then the message alone, not "[Errno 2] ...".
    return FileNotFoundError(f"{path}: no such file, but {writing_note(partial, os.path.basename(path))}")


def _entries(folder: str, limit: int | None = None) -> list[os.DirEntry]:
    """The folder's entries sorted by name (hidden ones left out), or [] if it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            found = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []
    return found if limit is None else found[:limit]


def _looks_like(entry: os.DirEntry) -> str | None:
    """What a file looks like (sniff's words), or None for a folder, an unreadable or unknown file."""
    head = read_head(entry.path)
    return None if head is None else sniff(head)


def _partials(folder: str) -> list[tuple[str, str]]:
    """The converter's partial files in ``folder``: (partial path, final name), sorted."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        final = final_path(os.path.join(folder, name))
        if final is not None and final.endswith(_READ_SUFFIXES):
            found.append((os.path.join(folder, name), os.path.basename(final)))
    return found


def directory_hint(folder: str) -> str | None:
    """What a folder without .bzna files holds that says what to do, or None when nothing does.

    A conversion's partial file comes first (the data is on its way); then
    images in sub-folders (class folders), images in the folder itself, and
    any other file sniff recognises (a TFRecord file, with its own hint).
    """
    partials = _partials(folder)
    if partials:
        return writing_note(*partials[0], len(partials) - 1)
    entries = _entries(folder)
    command = f"bzna-tf convert folder {shlex.quote(folder)} OUT.bzna"
    for sub in [e for e in entries if e.is_dir()][:_FOLDERS]:
        for entry in _entries(sub.path, _FILES_PER_FOLDER):
            what = _looks_like(entry)
            if what in FOLDER_IMAGES:
                hint = convert_hint(command, "the folder's images, one class per sub-folder")
                return f"{entry.path} looks like {what} ({hint})"
    other = None
    for entry in [e for e in entries if not e.is_dir()][:_FILES]:
        what = _looks_like(entry)
        if what in FOLDER_IMAGES:
            hint = convert_hint(
                command, "the folder's images, unlabelled: one sub-folder per class labels them"
            )
            return f"{entry.path} looks like {what} ({hint})"
        if other is None and what is not None and what not in _UNHELPFUL:
            other = f"{entry.path} looks like {what}"
    return other
