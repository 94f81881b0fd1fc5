"""Images from a folder of class folders, the layout of Keras' ``image_dataset_from_directory``.

::

    ROOT/ant/1.jpg            -> target 0, stored as "ant/1.jpg"
    ROOT/ant/sub/2.jpg        -> target 0 (anywhere under a class folder), "ant/sub/2.jpg"
    ROOT/zebra/3.png          -> target 1
    ROOT/4.jpg                -> beside the class folders: an error, or unlabelled with allow_unlabelled

Class folders are ROOT's sub-folders in sorted order (targets 0, 1, ...), or
in the order of the classes given (``classes=``: a split that lacks a class
folder keeps the training split's targets); a ROOT without sub-folders is a
folder of unlabelled images (a test set).
"""

from __future__ import annotations

import errno
import os
import shlex

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
from bzna_tf.convert.sources.classes import HELD_OUT_WORDS as _HELD_OUT_WORDS
from bzna_tf.convert.sources.classes import TRAIN_WORDS as _TRAIN_WORDS
from bzna_tf.convert.sources.classes import ClassList as _Classes
from bzna_tf.convert.sources.classes import ClassWords, check_beside_training
from bzna_tf.convert.sources.classes import few_names as _few
from bzna_tf.convert.sources.classes import is_utf8 as _is_utf8
from bzna_tf.convert.sources.classes import name_forms as _forms
from bzna_tf.convert.sources.classes import name_tokens as _tokens
from bzna_tf.convert.sources.classes import nfc as _nfc
from bzna_tf.format.atomic import file_error
from bzna_tf.format.reader import is_url
from bzna_tf.format.shards import near_name as _near
from bzna_tf.format.wording import count

__all__ = ["ImageFolderSource"]


# Entries that are neither files nor folders, by what they are, for the "not taken" notes.
_STRANGE = {
    "dangling": ("dangling symbolic link", None),
    "loop": ("symbolic link in a loop", None),
    "other": ("entry that is neither a file nor a folder (a FIFO, socket or device)", "entries that are "
              "neither files nor folders (FIFOs, sockets or devices)"),
    "system": ("system folder (zip metadata, thumbnails, ...: no images of its own)", "system folders (zip "
               "metadata, thumbnails, ...: no images of their own)"),
}  # fmt: skip


# Folders that tools and systems leave in a tree, holding no images of their own: macOS's zip metadata
# (``._x.jpg`` copies of resource forks), Synology's thumbnails (``x.jpg/SYNOPHOTO_THUMB_M.jpg``), a
# filesystem's root, Windows' bin and volume folder. As class folders they would number the classes after
# them one higher (an empty class 0 in a split unzipped on a Mac); inside a class, add other files.
SYSTEM_FOLDERS = frozenset({"__MACOSX", "@eaDir", "lost+found", "$RECYCLE.BIN", "System Volume Information"})


def _output_folder(root, output):
    """The name of the folder at ``root``'s top level that ``output`` would be written in (directly or
    deeper), and ``output``'s path relative to ``root``; None where it lies outside ``root``, at its top
    level, or in a folder that is never a class (hidden, a :data:`SYSTEM_FOLDERS` name). Compared as given
    (links kept) and with links resolved, and through ``root``'s folders that are links."""
    output = os.fspath(output)
    if is_url(output):
        return None
    for base, path in (
        (os.path.abspath(root), os.path.abspath(output)),
        (os.path.realpath(root), os.path.realpath(output)),
    ):
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # another drive (Windows)
            continue
        parts = rel.split(os.sep)
        if os.path.isabs(rel) or parts[0] in (os.curdir, os.pardir) or len(parts) < 2:
            continue
        if parts[0].startswith(".") or parts[0] in SYSTEM_FOLDERS:  # never listed
            return None
        return parts[0], rel
    # A folder of root that is a link to the output's folder (or to a folder above it) lists it too.
    real = os.path.realpath(output)
    try:
        with os.scandir(root) as entries:
            links = [e for e in entries if e.is_symlink()]
    except OSError:
        return None
    for e in sorted(links, key=lambda e: e.name):
        if e.name.startswith(".") or e.name in SYSTEM_FOLDERS:
            continue
        try:
            rel = os.path.relpath(real, os.path.realpath(e.path))
        except ValueError:  # another drive (Windows)
            continue
        if not (os.path.isabs(rel) or rel.split(os.sep)[0] in (os.curdir, os.pardir)):
            return e.name, os.path.join(e.name, rel)
    return None


def check_output_place(root, output, with_images=None) -> None:
    """Refuses an ``output`` under the folder source ``root`` in a top-level folder of ``root`` that holds
    no images: listed as a class folder, it would be an empty class, and the classes after it would be
    numbered one higher (the output's own folder as class 0 when its name sorts first).

    Args:
      root: the source's folder (``~`` expanded).
      output: the conversion's output (a URL is not looked at).
      with_images: the names of ``root``'s folders that hold images (its classes'), as listed; None before
        the listing: only a folder that does not exist yet (that making the output's folder would add)
        is refused.

    Raises:
      SourceError: naming ``root``, the folder, and the way out (an output outside ``root``).
    """
    found = _output_folder(root, output)
    if found is None:
        return
    name, rel = found
    folder = os.path.join(root, name)
    exists = os.path.isdir(folder)
    if exists and (with_images is None or name in with_images):
        return
    norm = os.path.normpath(root)
    if os.path.basename(norm) in ("", os.curdir, os.pardir):
        norm = os.path.abspath(root)
    outside = os.path.join(os.path.dirname(norm), rel)
    shown, where = escaped_name(root), escaped_name(folder)
    what = (
        f"{where}, a folder of {shown} without images"
        if exists
        else f"{where}, a folder that would be made in {shown}"
    )
    raise SourceError(
        f"{shown}: the output {escaped_name(output)} would be written in {what}: every folder in {shown} is "
        f"taken as a class folder, so {_few([name])} would be a class without images, and the classes after "
        f"it would be numbered one higher (their images stored with shifted targets). Write the output "
        f"outside {shown} (such as {escaped_name(outside)})"
        + (f", and remove {where} if it was made for the output" if exists else "")
    )


def _visible(entries, system=None):
    """Directory entries sorted by name, without hidden ones (``.git``, ``.ipynb_checkpoints``, ...) and
    :data:`SYSTEM_FOLDERS` (whose names go to ``system``)."""
    shown = []
    for e in entries:
        if e.name in SYSTEM_FOLDERS:
            if system is not None:
                system.append(e)
        elif not e.name.startswith("."):
            shown.append(e)
    return sorted(shown, key=lambda e: e.name)


# How messages name the names a folder's classes are numbered by (classes=, check_output).
_WORDS = ClassWords(
    name="class folder name",
    numbers="class folders",
    one="the name of its class folder",
    own="numbered by its own folders",
    lacks="this folder has no",
    these="this folder's classes",
)


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


def _real_path(entry, folder_real: str) -> str:
    """A file entry's real path: a link's target, else its name in its folder's real path (no system call)."""
    return os.path.realpath(entry.path) if entry.is_symlink() else os.path.join(folder_real, entry.name)


class ImageFolderSource(Source):
    """Images from a folder: one sub-folder per class (sorted names, or ``classes``, -> targets 0, 1, ...).

    The rules are those of Keras' ``image_dataset_from_directory`` and
    torchvision's ``ImageFolder``: every image anywhere under a class folder
    (in nested folders too) belongs to that class. Image files beside the
    class folders are an error naming them, unless ``allow_unlabelled``
    stores them as unlabelled images (after the labelled ones). A folder
    without sub-folders gives unlabelled images (a test set). Files whose
    names do not end in ``extensions``, hidden files and folders (names
    starting with '.') and :data:`SYSTEM_FOLDERS` (``__MACOSX``, ``@eaDir``,
    ...) are not taken; the conversion summary counts the former and the
    system folders, and warns about classes without images. Two class
    folders of one name in two Unicode forms (NFC, NFD) and a class folder
    that is a link to ``root`` or above are refused. Each sample's stored name
    is its path relative to ``root`` (``"ant/sub/2.jpg"``), so names are
    unique. Symbolic links to files and folders are followed; one file
    reached through symbolic links by several paths is one image (with one
    label, or unlabelled, taken once; in a second class, or beside the class
    folders too, refused: it would have two labels). Hard links are not
    symbolic links: each name of a file is its own image, with its own
    label, as a copy of the file would be (deduplication tools turn copies
    into hard links). Links that lead nowhere (dangling,
    or in a loop) and entries that are neither files nor folders (FIFOs,
    sockets) are not taken, and the summary counts them. An image file whose
    path under ``root`` is not valid UTF-8 is a bad record (its Item has
    ``error``, naming it with ``\\xNN`` escapes): a .bzna file stores names as
    UTF-8; a class folder's name that is not UTF-8 is refused.

    Args:
      root: the folder (``~`` is expanded).
      extensions: the file name endings that count as images (case-insensitive).
      allow_unlabelled: store image files beside the class folders as
        unlabelled images instead of refusing them.
      classes: the classes by target, instead of the class folders' sorted
        names: a list of class folder names, a path to a text file of them
        (one per line, UTF-8; a byte order mark and blank lines at the end
        ignored), or a path to a .bzna file whose stored class names are
        taken (``STEM.bzna`` also names its shards ``STEM-0000k-of-0000N.bzna``).
        A class folder's images get its name's position in the list (a
        folder whose name is a listed one in another Unicode form is that
        class's), and the whole list is stored as the class names: a split that lacks a class
        folder keeps the targets of the split the list comes from. A listed
        class without a folder has no images (the summary warns); a class
        folder not listed is refused. A string is always a path.

    Raises:
      SourceError: ``root`` is not a folder, holds no image, has image files
        beside its class folders without ``allow_unlabelled``, has a class
        folder whose name is not UTF-8 or (with ``classes``) not listed, or
        has an image that symbolic links put in a second class (or beside the
        class folders too), or has a folder that cannot be read (permission
        denied: named with its class; it is listed here, before the
        conversion, so ``on_error="skip"`` cannot leave it out); ``classes``
        lists a name twice, an empty name or none, or is a file that is not a
        list of names, or a .bzna file without a name for each of its targets.
      TypeError: ``classes`` is neither a path nor a list of strings.
    """

    kind = "folder"
    cli_help = "one folder with a sub-folder per class (images anywhere under it)"
    cli_options = ("allow_unlabelled", "classes")

    def __init__(self, root, *, extensions=IMAGE_EXTENSIONS, allow_unlabelled=False, classes=None):
        self.root = os.path.expanduser(os.fspath(root))
        if not os.path.isdir(self.root):
            raise SourceError(f"{escaped_name(self.root)}: not a folder")
        self.extensions = tuple(e.lower() for e in extensions)
        self.allow_unlabelled = bool(allow_unlabelled)
        # classes= is read (and refused) before the folder.
        listed = _Classes(classes, _WORDS) if classes is not None else None
        self._listed = listed is not None
        system = []
        try:
            with os.scandir(self.root) as it:
                top = _visible(it, system)
        except OSError as e:
            said = file_error(e, self.root, "cannot read this folder").strerror or str(e)
            raise SourceError(
                f"{escaped_name(self.root)}: {said}: make it readable (chmod u+rX), or convert as a user who "
                "can read it"
            ) from e
        kinds = {e.name: _kind(e) for e in top}
        folders = [e.name for e in top if kinds[e.name] == "dir"]
        unnamed = [c for c in folders if not _is_utf8(c)]
        if unnamed:
            # Skipping a class would shift the targets of the classes after it: the name must be fixed.
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(unnamed), 'class folder')} whose name is not valid "
                f"UTF-8 (shown with \\x escapes: {_few(unnamed)}); a .bzna file stores class names as UTF-8: "
                f"rename {'it' if len(unnamed) == 1 else 'them'}"
            )
        top_real = os.path.realpath(self.root)
        self._refuse_odd_class_folders(folders, top_real)
        if listed is not None:
            self._refuse_unlisted(folders, listed)
        else:
            self._refuse_split_folders(folders)
        self.classes = listed.names if listed is not None else folders
        # Each class's folder: its name, or (classes given) the folder of the name's Unicode NFC form.
        by_form = {_nfc(f): f for f in folders}
        self._folders = {n: by_form[_nfc(n)] for n in self.classes if _nfc(n) in by_form}
        self.class_names = list(self.classes) or None
        self.num_classes = len(self.classes) or None
        ignored = []
        strange = {kind: [] for kind in _STRANGE}  # entries that are neither files nor folders, by kind
        strange["system"] += [e.name for e in system]
        for name, kind in kinds.items():
            if kind in strange:
                strange[kind].append(name)
        beside = [e for e in top if kinds[e.name] == "file" and self._is_image(e.name)]
        ignored += [name for name, kind in kinds.items() if kind == "file" and not self._is_image(name)]
        self._files = []  # (target, path relative to root, '/'-separated)
        self._with_images = set()  # the class folders that hold images (check_output)
        empty = []
        # One file reached through symbolic links by several paths is one image: taken once within its
        # class; in two classes (or in one and beside them) it would have two labels, which is refused.
        owner = {}  # real path -> (target, rel) that took it
        again, clashes = [], []

        def take(target, rel, real):
            first = owner.setdefault(real, (target, rel))
            if first == (target, rel):
                self._files.append((target, rel))
            elif first[0] == target:
                again.append(rel)
            else:
                clashes.append((rel, target, *first))

        for target, name in enumerate(self.classes):
            # Within a class, a folder reached twice (a link back up, two links) is read once.
            folder = self._folders.get(name)
            found = self._walk(folder, name, {top_real}, ignored, strange) if folder is not None else []
            if not found:
                empty.append(f"{name!r} (target {target})")
            else:
                self._with_images.add(folder)
            for rel, real in found:
                take(target, rel, real)
        if folders and beside and not self.allow_unlabelled:
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(beside), 'image file')} beside the class folders "
                f"({_few([e.name for e in beside])}): an image belongs to the class folder it is in "
                f"({escaped_name(self.root)}/CLASS/...). Move "
                f"{'it' if len(beside) == 1 else 'them'} into a class folder, or pass --allow-unlabelled "
                "(allow_unlabelled=True) to store them as unlabelled images after the labelled ones"
            )
        for e in beside:
            take(None, e.name, _real_path(e, top_real))
        if clashes:

            def which(target):
                return "beside the class folders" if target is None else f"class {self.classes[target]!r}"

            shown = [
                f"{_few([rel])} ({which(t)}) is {_few([orig])} ({which(u)})" for rel, t, u, orig in clashes
            ]
            raise SourceError(
                f"{escaped_name(self.root)}: {count(len(clashes), 'image')} reached through symbolic links "
                f"in a second class ({', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''}): an image "
                "has one label. Remove the links that put an image in a second class; to store a picture in "
                "two classes, copy the file or make it a hard link (ln), which is a file of its own here"
            )
        if not self._files:
            raise SourceError(f"{escaped_name(self.root)}: no image files ({', '.join(self.extensions)})")
        notes = []
        if empty:
            n = count(len(empty), "class", "classes")
            notes.append(f"warning: {n} without images: {', '.join(empty)}")
        alike = {}
        for name in folders:
            alike.setdefault(_near(name), []).append(name)
        alike = [names for names in alike.values() if len(names) > 1]
        if alike:
            shown = "; ".join(_few(names) for names in alike[:3]) + ("; ..." if len(alike) > 3 else "")
            notes.append(
                f"warning: class folders whose names differ only in case or surrounding spaces, each its "
                f"own class: {shown} (merge them if they are one class)"
            )
        if again:
            notes.append(
                f"not taken: {count(len(again), 'path')} to an image already taken, through symbolic links "
                f"({_few(again, 3)})"
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
            if folders
            else "in a folder without class folders"
        )

    def _refuse_odd_class_folders(self, folders, top_real):
        """Refuses two class folders of one name in two Unicode forms (one class's images split in two
        classes), and a class folder that is a link to the root or a folder above it (a class of no images
        of its own, numbering the classes after it one higher)."""
        root = escaped_name(self.root)
        twins = {}
        for f in folders:
            twins.setdefault(_nfc(f), []).append(f)
        for same in twins.values():
            if len(same) > 1:
                raise SourceError(
                    f"{root}: the class folders {_forms(*same[:2])} are one name in two Unicode forms "
                    "(folders copied from macOS or unpacked from a zip file often come in NFD): as two "
                    "classes, one class's images would have two targets. Move the images of one into the "
                    "other and remove it; if they are two classes, rename one"
                )
        for f in folders:
            real = os.path.realpath(os.path.join(self.root, f))
            if os.path.commonpath([real, top_real]) == real:
                raise SourceError(
                    f"{root}: the class folder {_few([f])} is a symbolic link to {escaped_name(real)}, which "
                    f"holds {root} itself: it would be a class without images of its own, and the classes "
                    f"after it would be numbered one higher. Remove the link or move it out of {root}"
                )

    def _refuse_split_folders(self, folders):
        """Refuses a root whose class folders are one dataset's splits (train and val, train2017 and
        val2017, seg_train and seg_test; or one folder named as a split) and each hold folders: a
        download's splits, which as classes would label every image by its split (train 0, val 1) and
        store the splits in one file. Class names that merely hold a split word (test_positive,
        test_negative) are not: their other words differ. ``classes=`` given says they are the classes."""
        if not folders:
            return
        words = _TRAIN_WORDS | _HELD_OUT_WORDS
        shapes = set()
        for f in folders:
            tokens = _tokens(f)
            if sum(t in words for t in tokens) != 1:
                return
            shapes.add(tuple("" if t in words else t for t in tokens))
        if len(shapes) != 1:  # the splits of one dataset differ in their split word only
            return
        inner = {}
        for f in folders:
            try:
                with os.scandir(os.path.join(self.root, f)) as it:
                    inner[f] = next((e.name for e in _visible(it) if _kind(e) == "dir"), None)
            except OSError:  # _walk says why it cannot be read
                return
        if not all(inner.values()):
            return
        first = next((f for f in folders if set(_tokens(f)) & _TRAIN_WORDS), folders[0])
        held = next((f for f in folders if f != first), None)

        def command(split, *more):
            folder = shlex.quote(escaped_name(os.path.join(self.root, split)))
            return " ".join(["bzna-tf convert folder", folder, shlex.quote(f"{split}.bzna"), *more])

        then = (
            f", then {command(held, '--classes', shlex.quote(f'{first}.bzna'))} (numbered as the first "
            "split's classes)"
            if held is not None
            else ""
        )
        labels = ", ".join(f"{f} {t}" for t, f in enumerate(folders[:3])) + (
            ", ..." if len(folders) > 3 else ""
        )
        raise SourceError(
            f"{escaped_name(self.root)}: its class folders ({_few(folders)}) are named as splits of a "
            f"dataset, and each holds folders ({escaped_name(first)}/{escaped_name(inner[first])}/, ...): "
            f"taken as classes, every image would be labelled by its split ({labels}), the splits stored "
            f"together in one file. Convert each split on its own: {command(first)}{then}. If these folders "
            "are the classes, say so: list them in a text file, one per line, and pass --classes FILE "
            "(classes=[...])"
        )

    def _refuse_unlisted(self, folders, listed):
        """Refuses class folders that are not among the classes given: their images would have no target.
        A folder whose name is a listed one in another Unicode form (NFD, NFC) is that class's folder."""
        known = {_nfc(n) for n in listed.names}
        unknown = [f for f in folders if _nfc(f) not in known]
        if not unknown:
            return
        root = escaped_name(self.root)
        them = "it" if len(unknown) == 1 else "them"
        near = {_near(n): n for n in listed.names}
        alike = [f"{f!r} is listed as {near[_near(f)]!r}" for f in unknown if _near(f) in near]
        alike = f" ({'; '.join(alike[:3])}{'; ...' if len(alike) > 3 else ''})" if alike else ""
        renamed = (
            ". A file converted with --class-names (class_names=) stores those names, not its folders' "
            "names: then give the folder names by target in a text file (--classes FILE) and the stored "
            "names with --class-names"
            if listed.stored
            else ""
        )
        raise SourceError(
            f"{root}: {count(len(unknown), 'class folder')} not among {listed.where} "
            f"({count(len(listed.names), 'class', 'classes')}): {_few(unknown)}{alike}. An image of a class "
            f"that is not listed has no target: add {them} to the classes (at the end, to keep the others' "
            f"targets), or move {them} out of {root}{renamed}"
        )

    def check_output(self, output, class_names=None):
        """Refuses to write a held-out split whose classes its own folders would number unlike the
        training file beside ``output`` (called by :func:`~bzna_tf.convert.convert` before any work).

        A validation folder that lacks a class folder numbers the classes after
        it one lower than the training folder does: its images would be stored
        with the targets of other classes, without a word. Nothing is said when
        ``classes`` was given; else the rules are
        :func:`~bzna_tf.convert.sources.classes.check_beside_training`'s.

        Args:
          output: the conversion's output (a local path; a URL is not looked at).
          class_names: the class names the conversion stores (default: the folders').

        First, an ``output`` under ``root`` in a top-level folder of ``root``
        that holds no images (or that does not exist yet) is refused
        (:func:`check_output_place`): that folder would be a class of its own
        when the folder is listed again.

        Raises:
          SourceError: naming the class with two targets and how to choose (``classes``), or the folder
            of ``root`` the output would be written in.
        """
        check_output_place(self.root, output, self._with_images)
        if self._listed:
            return
        names = list(class_names) if class_names is not None else self.class_names
        check_beside_training(output, names, escaped_name(self.root), _WORDS)

    def _is_image(self, name):
        return name.lower().endswith(self.extensions)

    def _walk(self, rel, name, seen, ignored, strange):
        """(image path relative to root, its real path) under the folder ``rel`` of class ``name``, sorted
        level by level.

        Other files go to ``ignored``, entries that are neither files nor folders to ``strange``.

        Raises:
          SourceError: a folder that cannot be read (permission denied, ...), naming it and its class.
        """
        folder = os.path.join(self.root, rel)
        real = os.path.realpath(folder)
        if real in seen:  # a symbolic link back up, or to a folder already read
            return []
        seen.add(real)
        out = []
        system = []
        try:
            with os.scandir(folder) as it:
                entries = _visible(it, system)
        except OSError as e:
            # The folder is listed when the source is made, before the conversion and its on_error: leaving
            # it out would drop its images without a word, so it stops here (--on-error skip or not).
            where = f"the folder of class {name!r}" if "/" not in rel else f"in class {name!r}"
            said = file_error(e, folder, f"cannot read this folder ({where})").strerror or str(e)
            raise SourceError(
                f"{escaped_name(folder)}: {said}. Its images cannot be listed, and a folder is not a record "
                "that --on-error skip can leave out (folders are listed when the source is made, before the "
                "conversion; leaving one out would drop its images without a word): make it readable "
                f"(chmod -R u+rX), or move it out of {escaped_name(self.root)} to convert without its images"
            ) from e
        strange["system"] += [f"{rel}/{e.name}" for e in system]
        for e in entries:
            path = f"{rel}/{e.name}"
            kind = _kind(e)
            if kind == "dir":
                out += self._walk(path, name, seen, ignored, strange)
            elif kind == "file":
                if self._is_image(e.name):
                    out.append((path, _real_path(e, real)))
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

    def stored_names(self):
        """The names the images are stored under, in index order (read from the listing, not the files)."""
        return [escaped_name(rel) for _, rel in self._files]

    def _describe(self):
        return {
            # Only when given, so that the fingerprints of conversions made before the option still match.
            **({"classes": list(self.classes)} if self._listed else {}),
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
    def check_cli_output(cls, paths, output):
        """Refuses, before the folder is listed (and before the output's folder is made), an output in a
        folder of the source's folder that does not exist yet (:func:`check_output_place`)."""
        if len(paths) == 1 and os.path.isdir(os.path.expanduser(paths[0])):
            check_output_place(os.path.expanduser(paths[0]), output)

    @classmethod
    def from_cli(cls, paths, *, allow_unlabelled=False, classes=None):
        if len(paths) != 1:
            raise ValueError(f"Expected one folder. Received: {paths}")
        return cls(paths[0], allow_unlabelled=allow_unlabelled, classes=classes)
