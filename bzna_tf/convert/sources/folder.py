"""Images from a folder of class folders, the layout of Keras' ``image_dataset_from_directory``.

::

    ROOT/ant/1.jpg            -> target 0, stored as "ant/1.jpg"
    ROOT/ant/sub/2.jpg        -> target 0 (anywhere under a class folder), "ant/sub/2.jpg"
    ROOT/zebra/3.png          -> target 1
    ROOT/4.jpg                -> beside the class folders: an error, or unlabelled with allow_unlabelled

Class folders are ROOT's sub-folders in sorted order (targets 0, 1, ...); a
ROOT without sub-folders is a folder of unlabelled images (a test set).
"""

from __future__ import annotations

import os

import numpy as np

from bzna_tf.convert.sources.base import IMAGE_EXTENSIONS, Item, Source, SourceError, few, file_facts
from bzna_tf.format.wording import count

__all__ = ["ImageFolderSource"]


def _visible(entries):
    """Directory entries sorted by name, without hidden ones (``.git``, ``.ipynb_checkpoints``, ...)."""
    return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


class ImageFolderSource(Source):
    """Images from a folder: one sub-folder per class (sorted names -> targets 0, 1, ...).

    The rules are those of Keras' ``image_dataset_from_directory`` and
    torchvision's ``ImageFolder``: every image anywhere under a class folder
    (in nested folders too) belongs to that class. Image files beside the
    class folders are an error naming them, unless ``allow_unlabelled``
    stores them as unlabelled images (after the labelled ones). A folder
    without sub-folders gives unlabelled images (a test set). Files whose
    names do not end in ``extensions`` and hidden files and folders (names
    starting with '.') are not taken; the conversion summary counts the
    former and warns about classes without images. Each sample's stored name
    is its path relative to ``root`` (``"ant/sub/2.jpg"``), so names are
    unique. Symbolic links to files and folders are followed (within a class,
    a folder reached twice is read once).

    Args:
      root: the folder (``~`` is expanded).
      extensions: the file name endings that count as images (case-insensitive).
      allow_unlabelled: store image files beside the class folders as
        unlabelled images instead of refusing them.

    Raises:
      SourceError: ``root`` is not a folder, holds no image, or has image
        files beside its class folders without ``allow_unlabelled``.
    """

    kind = "folder"
    cli_help = "one folder with a sub-folder per class (images anywhere under it)"
    cli_options = ("allow_unlabelled",)

    def __init__(self, root, *, extensions=IMAGE_EXTENSIONS, allow_unlabelled=False):
        self.root = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(self.root):
            raise SourceError(f"{self.root}: not a folder")
        self.extensions = tuple(e.lower() for e in extensions)
        self.allow_unlabelled = bool(allow_unlabelled)
        with os.scandir(self.root) as it:
            top = _visible(it)
        self.classes = [e.name for e in top if e.is_dir()]
        self.class_names = list(self.classes) or None
        self.num_classes = len(self.classes) or None
        ignored = []
        beside = [e.name for e in top if e.is_file() and self._is_image(e.name)]
        ignored += [e.name for e in top if e.is_file() and not self._is_image(e.name)]
        self._files = []  # (target, path relative to root, '/'-separated)
        empty = []
        for target, name in enumerate(self.classes):
            # Within a class, a folder reached twice (a link back up, two links) is read once.
            found = self._walk(name, {os.path.realpath(self.root)}, ignored)
            if not found:
                empty.append(f"{name!r} (target {target})")
            self._files += [(target, rel) for rel in found]
        if self.classes and beside and not self.allow_unlabelled:
            raise SourceError(
                f"{self.root}: {count(len(beside), 'image file')} beside the class folders ({few(beside)}): "
                f"an image belongs to the class folder it is in ({self.root}/CLASS/...). Move "
                f"{'it' if len(beside) == 1 else 'them'} into a class folder, or pass --allow-unlabelled "
                "(allow_unlabelled=True) to store them as unlabelled images after the labelled ones"
            )
        self._files += [(None, name) for name in beside]
        if not self._files:
            raise SourceError(f"{self.root}: no image files ({', '.join(self.extensions)})")
        notes = []
        if empty:
            notes.append(f"warning: {count(len(empty), 'class')} without images: {', '.join(empty)}")
        if ignored:
            notes.append(
                f"not taken: {count(len(ignored), 'file')} whose names do not end in an image extension "
                f"({few(ignored, 3)})"
            )
        self.notes = tuple(notes)
        self._unlabelled = (
            "beside the class folders (--allow-unlabelled)"
            if self.classes
            else "in a folder without class folders"
        )

    def _is_image(self, name):
        return name.lower().endswith(self.extensions)

    def _walk(self, rel, seen, ignored):
        """Image paths (relative to root) under the folder ``rel``, sorted level by level."""
        folder = os.path.join(self.root, rel)
        real = os.path.realpath(folder)
        if real in seen:  # a symbolic link back up, or to a folder already read
            return []
        seen.add(real)
        out = []
        with os.scandir(folder) as it:
            entries = _visible(it)
        for e in entries:
            path = f"{rel}/{e.name}"
            if e.is_dir():
                out += self._walk(path, seen, ignored)
            elif e.is_file():
                (out if self._is_image(e.name) else ignored).append(path)
        return out

    def __len__(self):
        return len(self._files)

    def labelled(self):
        return np.array([t is not None for t, _ in self._files], bool)

    def missing_labels(self):
        return np.zeros(0, np.int64)  # images beside the class folders are refused when the source is made

    def _describe(self):
        return {
            "extensions": list(self.extensions),
            "files": [[*file_facts(os.path.join(self.root, rel), self.root), t] for t, rel in self._files],
        }

    def item(self, index):
        target, rel = self._files[index]
        path = os.path.join(self.root, *rel.split("/"))
        return Item(
            rel, target, path=path, origin=path, unlabelled=None if target is not None else self._unlabelled
        )

    @classmethod
    def from_cli(cls, paths, *, allow_unlabelled=False):
        if len(paths) != 1:
            raise ValueError(f"Expected one folder. Received: {paths}")
        return cls(paths[0], allow_unlabelled=allow_unlabelled)
