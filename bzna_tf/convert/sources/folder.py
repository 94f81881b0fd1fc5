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

import errno
import os

import numpy as np

from bzna_tf.convert.sources.base import (
    IMAGE_EXTENSIONS,
    NAME_NOT_UTF8,
    FileFacts,
    Item,
    Source,
    SourceError,
    escaped_name,
    file_facts,
)
from bzna_tf.format.wording import count

__all__ = ["ImageFolderSource"]


# Entries that are neither files nor folders, by what they are, for the "not taken" notes.
_STRANGE = {
    "dangling": ("dangling symbolic link", None),
    "loop": ("symbolic link in a loop", None),
    "other": ("entry that is neither a file nor a folder (a FIFO, socket or device)", "entries that are "
              "neither files nor folders (FIFOs, sockets or devices)"),
}  # fmt: skip


def _visible(entries):
    """Directory entries sorted by name, without hidden ones (``.git``, ``.ipynb_checkpoints``, ...)."""
    return sorted((e for e in entries if not e.name.startswith(".")), key=lambda e: e.name)


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 come as lone surrogates from os.scandir
        return False
    return True


def _few(names, limit=5) -> str:
    """:func:`few` of names; those that are not UTF-8 with their bytes as ``\\xNN`` (not doubled by repr)."""
    shown = ", ".join(repr(n) if _is_utf8(n) else f"'{escaped_name(n)}'" for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _kind(entry) -> str:
    """What an entry is, links followed: "dir", "file", or else a key of ``_STRANGE``.

    Raises:
      OSError: an entry that cannot be looked at (its message names it).
    """
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        os.stat(entry.path)
    except FileNotFoundError:  # a link to nothing (is_dir and is_file say False)
        return "dangling"
    except OSError as e:
        if e.errno == errno.ELOOP:  # a link to itself, or links to each other
            return "loop"
        raise
    return "other"


def _links(kinds) -> str:
    """'symbolic links', 'hard links' or 'symbolic or hard links': the kinds ("symbolic", "hard") found."""
    if len(kinds) > 1:
        return "symbolic or hard links"
    return f"{next(iter(kinds))} links"


def _device(folder: str):
    """The device of a folder, which its entries that are not links are on (a mount point is a folder)."""
    try:
        return os.stat(folder).st_dev
    except OSError:
        return None


def _identity(entry, folder_real: str, folder_device):
    """(real path, (device, inode) or None, whether that pair came from os.stat) of an image file entry.

    The real path is a link's target, else the name in its folder's real path
    (no system call). The (device, inode) pair is what hard links share: for
    an entry that is not a link, the inode its directory entry gives
    (``os.DirEntry.inode``, no system call on POSIX) on its folder's device;
    for a link, its target's, from one os.stat (links are rare). None when
    it cannot be read: the real path alone names the file then. (A file
    bind-mounted over another is found again by its real path only: its
    directory entry gives the number of the file underneath.)
    """
    if entry.is_symlink():
        real = os.path.realpath(entry.path)
        try:
            st = os.stat(entry.path)
        except OSError:
            return real, None, False
        return real, (st.st_dev, st.st_ino), True
    real = os.path.join(folder_real, entry.name)
    if folder_device is None:
        return real, None, False
    try:
        return real, (folder_device, entry.inode()), False
    except OSError:
        return real, None, False


class _Taken:
    """The image files taken so far, by what they are: one file reached by several paths is one image.

    A file is found again by its real path (symbolic links) or by its
    (device, inode) (hard links, and a symbolic link to a hard link). Two
    paths are one file by inode only once os.stat says so for both: some
    file systems give directory entries numbers that are not the files' (a
    FUSE file system without ``use_ino`` gives one number to every entry), and
    two files must never be taken for one. Only a path whose inode number is
    already known costs a system call, so a folder without hard links costs
    none; where the numbers mislead, a file is still found by its real path.
    """

    def __init__(self, root: str):
        self._root = root
        self._by_real = {}  # real path -> (target, rel) that took the file
        self._by_inode = {}  # (device, inode) -> (target, rel) that took the file
        self._stats = {}  # rel -> (device, inode) from os.stat, or None where it failed; made on need

    def take(self, target, rel: str, real: str, inode, stated: bool):
        """Takes the file at ``rel`` for ``target``, unless a path took it already: then that path's
        (target, rel) and how the two are one file, else (None, None). How: "symbolic" (one real path:
        symbolic links lead the two paths to one name of the file) or "hard" (two real paths: two names
        of the file, hard links, whatever symbolic links lead to them).

        ``real``, ``inode``, ``stated``: what :func:`_identity` says of the file at ``rel``.
        """
        if stated:
            self._stats[rel] = inode
        owner = self._by_real.get(real)
        if owner is not None:
            return owner, "symbolic"  # one real path: a symbolic link on one of the two paths
        if inode is not None and inode in self._by_inode:  # a number seen before: stat the two
            mine = self._stat(rel)
            for key in dict.fromkeys((inode, mine)):  # this entry's number, then its file's if it differs
                owner = self._same(key, mine) if key is not None else None
                if owner is not None:
                    return owner, "hard"  # two real paths, one file: two names of it in folders
            inode = mine
        me = (target, rel)
        self._by_real.setdefault(real, me)
        if inode is not None:
            self._by_inode.setdefault(inode, me)
        return None, None

    def _same(self, key, mine):
        """The (target, rel) filed under ``key`` when os.stat says its file is ``mine``, else None.

        One filed under a number that is not its file's moves to its file's.
        """
        owner = self._by_inode.get(key)
        if owner is None:
            return None
        theirs = self._stat(owner[1])
        if theirs != key:
            del self._by_inode[key]
            if theirs is not None:
                self._by_inode.setdefault(theirs, owner)
        return owner if mine is not None and theirs == mine else None

    def _stat(self, rel: str):
        if rel not in self._stats:
            try:
                st = os.stat(os.path.join(self._root, *rel.split("/")))
                self._stats[rel] = (st.st_dev, st.st_ino)
            except OSError:
                self._stats[rel] = None
        return self._stats[rel]


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
    unique. Symbolic links to files and folders are followed. One file
    reached by several paths, through symbolic links or hard links (a file is
    known by its device and inode, and by its real path), is one image: with
    one label, or unlabelled, it is taken once (by the first of its paths,
    names read in sorted order; the summary counts the others); in a second
    class, or beside the class folders too, it is refused: it would have two
    labels. Links that lead nowhere (dangling, or in a loop) and entries that
    are neither files nor folders (FIFOs, sockets) are not taken, and the
    summary counts them. An image file whose path under ``root`` is not
    valid UTF-8 is a bad record (its Item has
    ``error``, naming it with ``\\xNN`` escapes): a .bzna file stores names as
    UTF-8; a class folder's name that is not UTF-8 is refused.

    Args:
      root: the folder (``~`` is expanded).
      extensions: the file name endings that count as images (case-insensitive).
      allow_unlabelled: store image files beside the class folders as
        unlabelled images instead of refusing them.

    Raises:
      SourceError: ``root`` is not a folder, holds no image, has image files
        beside its class folders without ``allow_unlabelled``, has a class
        folder whose name is not UTF-8, or has an image that symbolic or hard
        links put in a second class (or beside the class folders too).
    """

    kind = "folder"
    cli_help = "one folder with a sub-folder per class (images anywhere under it)"
    cli_options = ("allow_unlabelled",)

    def __init__(self, root, *, extensions=IMAGE_EXTENSIONS, allow_unlabelled=False):
        self.root = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(self.root):
            raise SourceError(f"{escaped_name(self.root)}: not a folder")
        self.extensions = tuple(e.lower() for e in extensions)
        self.allow_unlabelled = bool(allow_unlabelled)
        with os.scandir(self.root) as it:
            top = _visible(it)
        kinds = {e.name: _kind(e) for e in top}
        self.classes = [e.name for e in top if kinds[e.name] == "dir"]
        unnamed = [c for c in self.classes if not _is_utf8(c)]
        if unnamed:
            # Skipping a class would shift the targets of the classes after it: the name must be fixed.
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(unnamed), 'class folder')} whose name is not valid "
                f"UTF-8 (shown with \\x escapes: {_few(unnamed)}); a .bzna file stores class names as UTF-8: "
                f"rename {'it' if len(unnamed) == 1 else 'them'}"
            )
        self.class_names = list(self.classes) or None
        self.num_classes = len(self.classes) or None
        ignored = []
        strange = {kind: [] for kind in _STRANGE}  # entries that are neither files nor folders, by kind
        for name, kind in kinds.items():
            if kind in strange:
                strange[kind].append(name)
        beside = [e for e in top if kinds[e.name] == "file" and self._is_image(e.name)]
        ignored += [name for name, kind in kinds.items() if kind == "file" and not self._is_image(name)]
        self._files = []  # (target, path relative to root, '/'-separated)
        empty = []
        top_real = os.path.realpath(self.root)
        # One file reached by several paths (symbolic or hard links) is one image: taken once within its
        # class; in two classes (or in one and beside them) it would have two labels, which is refused.
        taken = _Taken(self.root)
        again = []  # (path, how: "symbolic" or "hard") not taken
        clashes = []  # (path, target, the first path's target, the first path, how)

        def take(target, rel, identity):
            first, how = taken.take(target, rel, *identity)
            if first is None:
                self._files.append((target, rel))
            elif first[0] == target:
                again.append((rel, how))
            else:
                clashes.append((rel, target, *first, how))

        for target, name in enumerate(self.classes):
            # Within a class, a folder reached twice (a link back up, two links) is read once.
            found = self._walk(name, {top_real}, ignored, strange)
            if not found:
                empty.append(f"{name!r} (target {target})")
            for rel, identity in found:
                take(target, rel, identity)
        if self.classes and beside and not self.allow_unlabelled:
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(beside), 'image file')} beside the class folders "
                f"({_few([e.name for e in beside])}): an image belongs to the class folder it is in "
                f"({escaped_name(self.root)}/CLASS/...). Move "
                f"{'it' if len(beside) == 1 else 'them'} into a class folder, or pass --allow-unlabelled "
                "(allow_unlabelled=True) to store them as unlabelled images after the labelled ones"
            )
        top_device = _device(self.root) if beside else None
        for e in beside:
            take(None, e.name, _identity(e, top_real, top_device))
        if clashes:

            def which(target):
                return "beside the class folders" if target is None else f"class {self.classes[target]!r}"

            shown = [
                f"{_few([rel])} ({which(t)}) is {_few([orig])} ({which(u)})" for rel, t, u, orig, _ in clashes
            ]
            kinds = {how for *_, how in clashes}
            hard_hint = (
                " (of two hard links, delete the one where it does not belong)" if "hard" in kinds else ""
            )
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(clashes), 'image')} reached through "
                f"{_links(kinds)} in a second class ({', '.join(shown[:3])}"
                f"{', ...' if len(shown) > 3 else ''}): an image has one label. Remove the links that put an "
                f"image in a second class{hard_hint}; "
                "to store a picture in two classes, copy the file"
            )
        if not self._files:
            raise SourceError(f"{escaped_name(self.root)}: no image files ({', '.join(self.extensions)})")
        notes = []
        if empty:
            notes.append(f"warning: {count(len(empty), 'class')} without images: {', '.join(empty)}")
        if again:
            notes.append(
                f"not taken: {count(len(again), 'path')} to an image already taken, through "
                f"{_links({how for _, how in again})} ({_few([rel for rel, _ in again], 3)})"
            )
        if ignored:
            notes.append(
                f"not taken: {count(len(ignored), 'file')} whose names do not end in an image extension "
                f"({_few(ignored, 3)})"
            )
        for kind, paths in strange.items():
            if paths:
                notes.append(f"not taken: {count(len(paths), *_STRANGE[kind])} ({_few(paths, 3)})")
        self.notes = tuple(notes)
        self._bad = np.array([i for i, (_, rel) in enumerate(self._files) if not _is_utf8(rel)], np.int64)
        self._unlabelled = (
            "beside the class folders (--allow-unlabelled)"
            if self.classes
            else "in a folder without class folders"
        )

    def _is_image(self, name):
        return name.lower().endswith(self.extensions)

    def _walk(self, rel, seen, ignored, strange):
        """(image path relative to root, :func:`_identity`) under the folder ``rel``, sorted level by level.

        Other files go to ``ignored``, entries that are neither files nor folders to ``strange``.
        """
        folder = os.path.join(self.root, rel)
        real = os.path.realpath(folder)
        if real in seen:  # a symbolic link back up, or to a folder already read
            return []
        seen.add(real)
        out = []
        with os.scandir(folder) as it:
            entries = _visible(it)
        device = _device(folder) if entries else None
        for e in entries:
            path = f"{rel}/{e.name}"
            kind = _kind(e)
            if kind == "dir":
                out += self._walk(path, seen, ignored, strange)
            elif kind == "file":
                if self._is_image(e.name):
                    out.append((path, _identity(e, real, device)))
                else:
                    ignored.append(path)
            else:
                strange[kind].append(path)
        return out

    def __len__(self):
        return len(self._files)

    def labelled(self):
        return np.array([t is not None for t, _ in self._files], bool)

    def missing_labels(self):
        return np.zeros(0, np.int64)  # images beside the class folders are refused when the source is made

    def bad_records(self):
        return self._bad  # the image files whose names are not UTF-8

    def _describe(self):
        return {
            "extensions": list(self.extensions),
            # FileFacts: without_mtimes knows where the mtime is.
            "files": [
                FileFacts([*file_facts(os.path.join(self.root, rel), self.root), t]) for t, rel in self._files
            ],
        }

    def item(self, index):
        target, rel = self._files[index]
        path = os.path.join(self.root, *rel.split("/"))
        return Item(
            escaped_name(rel),
            target,
            path=path,
            origin=escaped_name(path),
            unlabelled=None if target is not None else self._unlabelled,
            error=None if _is_utf8(rel) else NAME_NOT_UTF8,
        )

    @classmethod
    def from_cli(cls, paths, *, allow_unlabelled=False):
        if len(paths) != 1:
            raise ValueError(f"Expected one folder. Received: {paths}")
        return cls(paths[0], allow_unlabelled=allow_unlabelled)
