"""What every conversion source is: :class:`Source`, the :class:`Item` it gives, and shared helpers.

A source is a fixed number of images, each reachable by its index, that can
describe itself. The converter decides the order (shuffled with a recorded
seed, or the source's own) and which indices go to which shard
(:mod:`bzna_tf.convert.plan`), then asks the source for those indices. A
source never orders, shuffles or shards anything itself, so every source is
converted, resumed and spread over workers in the same way.

Adding a source (say, a new file format) takes one module in this package:

1. a subclass of :class:`Source` with ``kind`` (its name on the command
   line), ``__len__``, ``_describe`` (what its output depends on: file names
   relative to the source, sizes, mtimes, keys) and ``item(index)`` (or
   ``items(indices)``, when reading several at once is cheaper than one by
   one); ``class_names``, ``num_classes``, ``labelled()``, ``missing_labels()``,
   ``bad_records()``, ``notes`` and ``random_access`` where the source knows them;
2. ``cli_help``, ``cli_options`` and ``from_cli`` for ``bzna-tf convert KIND``
   (the flags themselves are declared once, in :mod:`bzna_tf.cli`);
3. an entry in ``SOURCES`` in this package's ``__init__``.

Sources read in the main process; decoding and encoding happen in worker
processes, so an :class:`Item` carries the encoded image (or the path of one).
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import hashlib
import os
import re
import stat
import zlib
from dataclasses import dataclass

import numpy as np

from bzna_tf.format.shards import file_identity
from bzna_tf.format.wording import count

__all__ = [
    "ALLOW_OUTSIDE_PATHS_HINT",
    "ALLOW_UNLABELLED_HINT",
    "IMAGE_EXTENSIONS",
    "Item",
    "LabelledSource",
    "NAME_NOT_UTF8",
    "Source",
    "SourceError",
    "allow_outside_paths_fact",
    "allow_unlabelled_fact",
    "escaped_name",
    "expand_patterns",
    "file_facts",
    "inside",
    "open_inside",
    "read_class_names",
    "safe_basename",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")


# How to go on from a missing label, at the end of a missing-label error (the converter adds --on-error skip).
ALLOW_UNLABELLED_HINT = (
    "--allow-unlabelled (allow_unlabelled=True) stores such images unlabelled, after the labelled ones"
)


# How to read a file that a dataset names outside its own folder, at the end of the refusal.
ALLOW_OUTSIDE_PATHS_HINT = (
    "--allow-outside-paths (allow_outside_paths=True) reads such files when the dataset is trusted"
)

# The error of an Item whose file name cannot be stored: a .bzna file stores names as UTF-8.
NAME_NOT_UTF8 = (
    "its name is not valid UTF-8 (shown with \\x escapes), and a .bzna file stores names as UTF-8: rename it"
)


class SourceError(ValueError):
    """A source that cannot be read: names the file, the record and what is wrong."""


@dataclass(frozen=True)
class Item:
    """One image to convert.

    Attributes:
      filename: the name stored in the .bzna file: for a folder, the image's
        path relative to the folder (``"cat/sub/1.jpg"``, '/'-separated);
        for records, the name they carry (a base name).
      target: the class index, or None when unlabelled.
      data: the encoded image (JPEG, PNG, ...), or None when ``path`` is set.
      path: a file to read the encoded image from (in the worker), or None.
      origin: where the image comes from, for messages ("train-00001 record 17").
      class_name: the name of the target's class when the source gives one per
        image (TFRecords' ``image/class/text``), else None.
      error: why this record cannot give an image (a truncated tar member, a
        row with a null image, a label that is not an integer, a label that
        is missing without ``allow_unlabelled``), or None. The converter stops
        with ``origin: error`` unless ``on_error="skip"``, which skips the
        record and counts it in the summary. A source reports a bad record
        this way rather than by raising, so that the records after it can
        still be read.
      unlabelled: why ``target`` is None, for the summary's count of unlabelled
        images ("without a 'cls' member (--allow-unlabelled)"), or None
        ("without a label"). The same words for every image of one reason.
      root: the folder ``path`` must stay inside when the data named the file
        (a Parquet row's image path), or None. The source checked it; the
        worker checks again what it opens (:func:`open_inside`), since a link
        could be put in the way between the two.
      offset, size: with ``path``, where the encoded image is inside that file
        (a tar member's data: ``size`` bytes from byte ``offset``), so that
        the worker that decodes it reads it, and only it; None: the whole file.
      member: the name of that part of the file, for messages ("0001.jpg").
    """

    filename: str
    target: int | None
    data: bytes | None = None
    path: str | None = None
    origin: str = ""
    class_name: str | None = None
    error: str | None = None
    unlabelled: str | None = None
    root: str | None = None
    offset: int | None = None
    size: int | None = None
    member: str | None = None

    def read(self, max_bytes: int | None = None) -> bytes:
        """The encoded image: ``data``, or the bytes of ``path`` (``size`` bytes from ``offset``, or all).

        Args:
          max_bytes: the largest encoded image read, in bytes: a larger one is
            refused before it is read (a file by its size when opened; and no
            more than ``max_bytes + 1`` bytes are read, in case it grows).
            None: no limit.

        Raises:
          ValueError: an image over ``max_bytes``, saying its size.
          OSError: a file that cannot be read, or that ends before ``offset + size``.
          SourceError: with ``root``, a file outside that folder (:func:`open_inside`).
        """
        what = f"member {self.member!r}" if self.member is not None else "the file"
        if self.data is not None:
            if max_bytes is not None and len(self.data) > max_bytes:
                raise ValueError(_too_large("the encoded image", len(self.data), max_bytes))
            return self.data
        # A file the data named must still be inside the dataset's folder when opened.
        with open_inside(self.path, self.root) if self.root is not None else open(self.path, "rb") as f:
            if self.offset is not None:
                if max_bytes is not None and self.size > max_bytes:
                    raise ValueError(_too_large(what, self.size, max_bytes))
                f.seek(self.offset)
                data = f.read(self.size)
                if len(data) != self.size:
                    raise OSError(f"{what} is truncated: {len(data)} of {self.size} bytes")
                return data
            if max_bytes is None:
                return f.read()
            size = os.fstat(f.fileno()).st_size
            if size > max_bytes:
                raise ValueError(_too_large(what, size, max_bytes))
            data = f.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise ValueError(_too_large(what, None, max_bytes))
            return data


def _bytes(n: int) -> str:
    """``"6,442,450,944 bytes (6.0 GiB)"``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n:,} bytes ({n / (1 << shift):.1f} {unit})"
    return f"{n:,} bytes"


def _too_large(what: str, size: int | None, limit: int) -> str:
    """Why an image is refused for its size (None: it grew past the limit while it was read)."""
    was = f"is {_bytes(size)}" if size is not None else "grew while it was read"
    return f"{what} {was}, over the limit of {_bytes(limit)} on an encoded image (--max-image-bytes)"


class Source:
    """Base class of the conversion sources: a fixed number of images, read by index.

    Subclasses set ``kind`` and define ``__len__``, ``_describe`` and
    ``item`` (see this module's notes). The rest has working defaults.

    Attributes:
      kind: the source's name (``bzna-tf convert KIND``; the fingerprint's ``"kind"``).
      class_names: the class names indexed by target, or None.
      num_classes: how many classes the source itself defines (class folders,
        string labels), or None when only the data can tell.
      notes: lines for the conversion summary (``"warning: ..."``): what the
        user should know but that does not stop the conversion.
      random_access: False when images can only be read in order (then
        ``why_sequential`` says why); such a source converts only with
        ``order="source"``.
    """

    kind = "source"
    cli_help = ""
    cli_options: tuple[str, ...] = ()
    class_names: list | None = None
    num_classes: int | None = None
    notes: tuple[str, ...] = ()
    random_access = True
    why_sequential = ""

    def __len__(self) -> int:
        raise NotImplementedError

    def _describe(self) -> dict:
        """What the output depends on (JSON-serialisable): files, sizes, mtimes, keys."""
        raise NotImplementedError

    def item(self, index: int) -> Item:
        """The image at ``index`` (0 .. len - 1)."""
        raise NotImplementedError

    def items(self, indices):
        """The items at ``indices``, in that order (any order; a ``range`` is the common sequential case)."""
        for i in indices:
            yield self.item(int(i))

    def __iter__(self):
        return self.items(range(len(self)))

    def labelled(self):
        """A bool array, True where the image has a label, when known without reading the images; else None.

        With it, a shuffled conversion keeps the unlabelled images after the
        labelled ones (the format stores targets for a prefix of each file).
        """
        return None

    def negative_labels(self):
        """A bool array, True where the image's label is negative, when known without reading the images;
        else None.

        With ``convert(negative_labels="unlabelled")`` those images are
        unlabelled: a shuffled conversion then keeps them after the labelled
        ones too (Hugging Face datasets mark a missing label with -1).
        """
        return None

    def missing_labels(self):
        """The indices of the images whose label is missing, when known without reading the images; else None.

        An image whose label is missing (a WebDataset sample without its
        ``cls`` member, a null in a Parquet label column) is a bad record
        unless the source was made with ``allow_unlabelled``: the array is then
        empty. With ``on_error="raise"`` the converter stops at the first of
        them before any image is encoded, rather than wherever the order puts it.
        """
        return None

    def bad_records(self):
        """The indices of the images whose :class:`Item` has ``error``, known without reading them, or None.

        With ``on_error="raise"`` the converter stops at the first of them
        before any image is encoded (a folder's file whose name is not UTF-8),
        rather than wherever the order puts it.
        """
        return None

    def describe(self) -> dict:
        """``_describe()``, computed once per source object and kept (it travels when pickled).

        A folder source stats every file: a Beam or array job must not redo that per shard.
        """
        cached = getattr(self, "_description", None)
        if cached is None:
            cached = self._description = {"kind": self.kind, **self._describe()}
        return cached

    @classmethod
    def from_cli(cls, paths: list[str], **options) -> Source:
        """The source for ``bzna-tf convert KIND PATHS...``; ``options``: the flags in ``cli_options``."""
        raise NotImplementedError


class LabelledSource(Source):
    """A source whose images' labels may be missing, a bad record unless ``allow_unlabelled``.

    Gives :meth:`labelled` and :meth:`missing_labels` (WebDataset, GulpIO,
    Parquet, Hugging Face) from two answers of the subclass, which also sets
    ``allow_unlabelled``: ``_reads_labels()`` (False: every image is
    unlabelled by choice, ``label_key=None``) and ``_has_label()`` (a bool per
    image, True where its label is there; None when only reading the images
    tells).
    """

    allow_unlabelled: bool

    def _reads_labels(self) -> bool:
        raise NotImplementedError

    def _has_label(self):
        raise NotImplementedError

    def labelled(self):
        if not self._reads_labels():
            return np.zeros(len(self), bool)
        if not self.allow_unlabelled:  # a missing label is a bad record, not an unlabelled image
            return np.ones(len(self), bool)
        return self._has_label()

    def missing_labels(self):
        if not self._reads_labels() or self.allow_unlabelled:
            return np.zeros(0, np.int64)
        has = self._has_label()
        return None if has is None else np.flatnonzero(~has)


def allow_unlabelled_fact(allow_unlabelled: bool) -> dict:
    """``_describe()``'s entry for ``allow_unlabelled``: present only when set, so that the fingerprints
    of conversions made before the option existed still match."""
    return {"allow_unlabelled": True} if allow_unlabelled else {}


def allow_outside_paths_fact(allow_outside_paths: bool) -> dict:
    """``_describe()``'s entry for ``allow_outside_paths``: present only when set (see the one above)."""
    return {"allow_outside_paths": True} if allow_outside_paths else {}


def expand_patterns(patterns, what: str) -> list[str]:
    """File names and glob patterns (``~`` expanded) -> existing paths, each pattern's matches sorted.

    An argument that names an existing file is that file, even when it holds
    glob characters (``part[1].tfrecord``), as a shell passes such a name; it
    is refused when, read as a pattern, it would also match other files (which
    is meant cannot be told). A pattern's matches leave out .bzna files and a
    conversion's partial files (:func:`conversion_output`): an output written
    beside the records (``imagenet/train-*`` with ``imagenet/train.bzna``)
    is never read as one of them, so the same command resumes. A name given
    as it is stays as given.

    Raises:
      SourceError: a pattern that matches nothing (or only .bzna files), a
        name that does not exist, a name that is both a file and a pattern
        matching others, a pattern over two sets or splits (see
        ``_check_shard_sets``), a file given twice or a copy of another one
        given, or no name at all.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    paths, named_by = [], []
    for p in patterns:
        p = os.path.expanduser(os.fspath(p))
        pattern = glob.has_magic(p) and not _literal(p, what)
        matches = sorted(glob.glob(p)) if pattern else [p]
        outputs = [m for m in matches if conversion_output(m)] if pattern else []
        if outputs:
            matches = [m for m in matches if not conversion_output(m)]
        if not matches:
            only = (
                f": it matches only {count(len(outputs), 'conversion output')} ({few(outputs, 3)}), which a "
                f"pattern leaves out: a .bzna file is never a {what}"
                if outputs
                else ""
            )
            raise SourceError(f"no {what} matches {p!r}{only}")
        for m in matches:
            if not os.path.exists(m):
                raise SourceError(f"{m}: no such {what}")
        if pattern:
            _check_shard_sets(p, matches, what)
        paths.extend(matches)
        named_by.extend([p] * len(matches))
    if not paths:
        raise SourceError(f"Expected at least one {what}. Received: none")
    refuse_repeats(paths, named_by, what)
    refuse_copies(paths, what)
    return paths


def _literal(p, what) -> bool:
    """Whether ``p``, which holds glob characters, names an existing file and is to be read as that name.

    Raises SourceError when it names a file and, as a pattern, also matches other files.
    """
    if not os.path.exists(p):
        return False
    others = [m for m in sorted(glob.glob(p)) if m != p and not conversion_output(m)]
    if others:
        raise SourceError(
            f"{p!r} names an existing {what}, and read as a glob pattern it matches {few(others, 3)} "
            f"instead: which is meant cannot be told. Name that file alone with its glob characters "
            f"escaped ({glob.escape(p)!r}), or the files the pattern matches by their own names"
        )
    return True


# A conversion's output (NAME.bzna), or its partial file: .NAME.bzna.partial (a resumable conversion's),
# .NAME.bzna.1a2b3c4d.partial (BznaWriter's own).
_OUTPUT = re.compile(r"(?i:.*\.bzna)|\..*\.(?i:bzna)(\.[0-9a-f]{8})?\.partial", re.DOTALL)


def conversion_output(path) -> bool:
    """Whether ``path`` names a .bzna file or a conversion's partial file: never a record file of a source
    (TFRecord, tar, Parquet, GulpIO), so a pattern's matches leave it out (:func:`expand_patterns`)."""
    return _OUTPUT.fullmatch(os.path.basename(os.fspath(path))) is not None


# NAME-00003-of-00016[.ext]: a file of a set of shards (TFRecords, TFDS, Parquet, tar shards); also
# unpadded (train-3-of-16), as some tools write them.
_SHARD = re.compile(r"^(?P<stem>.*)-(?P<index>\d+)-of-(?P<count>\d+)(?P<ext>(\.[A-Za-z0-9]+)*)$")


def _check_shard_sets(pattern, matches, what):
    """Refuses a pattern that matches two sets of shards, or a set with shards missing that it covers,
    or files of different splits (:func:`_check_splits`).

    ``train-*`` over a folder holding ``train-*-of-00004`` and ``validation-*-of-00002`` would
    mix two splits; a set of ``-of-00004`` shards missing one (a download cut short) would convert
    as a smaller dataset without a word, where reading refuses such a set of .bzna files. A pattern
    that picks some shards on purpose (``train-0000[0-3]-of-01024``) is not refused.
    """
    sets = {}
    for m in matches:
        folder, name = os.path.split(m)
        s = _SHARD.match(name)
        if s:
            key = (folder, s["stem"], s["count"], s["ext"])
            sets.setdefault(key, set()).add(s["index"])
    if len(sets) > 1:
        shown = ", ".join(f"{stem}-*-of-{n}{ext}" for _, stem, n, ext in sorted(sets)[:4])
        raise SourceError(
            f"{pattern!r} matches {len(sets)} sets of shards ({shown}{', ...' if len(sets) > 4 else ''}): "
            f"one pattern, one set (two would mix, say, a training and a validation split). Give a pattern "
            "per set to convert them together"
        )
    _check_splits(pattern, matches)
    for (folder, stem, n, ext), indices in sets.items():
        base = os.path.basename(pattern)
        have = {int(i) for i in indices}
        # The shards' names as the set writes them: zero-padded to the count's width, or not padded.
        width = len(n) if all(len(i) == len(n) for i in indices) else 0
        covered = [i for i in range(int(n)) if fnmatch.fnmatchcase(f"{stem}-{i:0{width}d}-of-{n}{ext}", base)]
        missing = [i for i in covered if i not in have]
        if missing:
            names = ", ".join(f"{stem}-{i:0{width}d}-of-{n}{ext}" for i in missing[:3])
            raise SourceError(
                f"{pattern!r}: {len(missing)} of the {int(n)} shards of {stem}-*-of-{n}{ext} in "
                f"{folder or '.'} {'is' if len(missing) == 1 else 'are'} missing ({names}"
                f"{', ...' if len(missing) > 3 else ''}): a download or copy cut short? Fetch "
                f"{'it' if len(missing) == 1 else 'them'}, or name the {what}s to convert without a "
                "pattern that covers the whole set"
            )


# Words that name a split of a dataset, when whole words of a file's path (split at anything but letters).
_SPLIT_WORDS = frozenset(
    ("train", "training", "trainval", "val", "valid", "validation", "dev", "eval", "test", "testing")
)


def _split_words(path) -> frozenset:
    """The split words in a path: ``imagenet-train-000001.tar`` -> {train}; ``val2017/x.tar`` -> {val}."""
    return frozenset(w for w in re.findall(r"[a-z]+", path.lower()) if w in _SPLIT_WORDS)


def _check_splits(pattern, matches):
    """Refuses a pattern whose matches name different splits: ``wds/*.tar`` over ``imagenet-train-*.tar``
    and ``imagenet-val-*.tar`` would mix training and validation images.

    Only the words below the folder that holds every match count (``runs/test/imagenet-*.tar`` is not
    a test split for it), and files whose words are the same (or none) are one set.
    """
    if len(matches) < 2:
        return
    common = len(os.path.commonpath([os.path.dirname(m) for m in matches]))
    first = {}
    for m in matches:
        words = _split_words(m[common:])
        if words:
            first.setdefault(words, m)
    if len(first) > 1:
        (a, wa), (b, wb) = [(m, w) for w, m in first.items()][:2]
        raise SourceError(
            f"{pattern!r} matches files of different splits, such as {a} ({'/'.join(sorted(wa))}) and {b} "
            f"({'/'.join(sorted(wb))}): one pattern, one split (converting them together would mix, say, "
            "training and validation images). Give a narrower pattern per split, or name the files to "
            "convert explicitly"
        )


# How to go on from a file named twice, at the end of refuse_repeats' refusal.
_NAME_EACH_ONCE = "Name each file once (patterns that overlap match a file twice)"


def refuse_repeats(paths, named_by, what: str, fix: str = _NAME_EACH_ONCE):
    """Raises SourceError when two of ``paths`` are one file (:func:`file_identity`): it would be read twice.

    ``named_by[i]`` is the argument (a name or pattern) that gave ``paths[i]``; ``fix`` ends the message.
    """
    first = {}
    for path, arg in zip(paths, named_by, strict=True):
        key = file_identity(path)
        if key in first:
            other_path, other_arg = first[key]
            by = f"by {other_arg!r} and by {arg!r}" if other_arg != arg else f"twice by {arg!r}"
            if other_path == path:
                same = ""
            elif os.path.realpath(other_path) == os.path.realpath(path):
                same = f" (as {other_path} and {path})"
            else:
                same = f" (as {other_path} and {path}, two names of one file: hard links)"
            raise SourceError(
                f"{path}: the {what} is named {by}{same}: its images would be stored twice. {fix}"
            )
        first[key] = (path, arg)


def _digest(path, limit=None):
    """(the SHA-256 of a file's first ``limit`` bytes (None: all), whether those bytes are all zeros)."""
    h, zeros, left = hashlib.sha256(), True, limit
    with open(path, "rb") as f:
        while left is None or left > 0:
            block = f.read(1 << 20 if left is None else min(left, 1 << 20))
            if not block:
                break
            h.update(block)
            zeros = zeros and block.count(0) == len(block)
            if left is not None:
                left -= len(block)
    return h.digest(), zeros


# Files compared further only where their first bytes are equal: a tar's first 512 bytes are the
# first member's header (its name and mtime), so distinct shards of one size (Python's tarfile pads to
# 10,240 bytes) mostly cost one small read each.
_COPY_STAGES = (1 << 12, 1 << 16, None)
# A file smaller than this that is a copy may hold no record at all (see _holds_nothing).
_SMALL_FILE = 1 << 16


def _holds_nothing(path, size) -> bool:
    """True for a small file that stores no record: a GZIP or ZLIB stream of nothing (an empty compressed
    TFRecord shard: always the same 20 or 8 bytes), a Parquet file of 0 rows (its metadata says so; only
    with pyarrow). ``size``: the file's size (a larger file is never read here)."""
    if size >= _SMALL_FILE:
        return False
    try:
        with open(path, "rb") as f:
            data = f.read(_SMALL_FILE)
    except OSError:
        return False
    if not data or len(data) >= _SMALL_FILE:
        return False
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data) == b""
        except (OSError, EOFError, zlib.error):
            return False
    if data[:4] == b"PAR1" and data[-4:] == b"PAR1":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            return False
        try:
            return pq.read_metadata(path).num_rows == 0
        except Exception:  # not readable as Parquet (pyarrow's errors vary): compared as bytes
            return False
    try:
        z = zlib.decompressobj()
        out = z.decompress(data) + z.flush()
    except zlib.error:
        return False
    return z.eof and not z.unused_data and out == b""


def refuse_copies(paths, what: str):
    """Raises SourceError when two of ``paths`` are files of the same bytes: a copy, whose images would be
    stored twice.

    Only files of equal size are compared: first their first 4 KiB, then, where those are equal, their
    first 64 KiB, then all their bytes. Files that store nothing are not copies of anything: empty files,
    files of zeros only (an empty tar shard), and small ones holding an empty GZIP or ZLIB stream (an
    empty compressed TFRecord shard) or a Parquet file of 0 rows (:func:`_holds_nothing`).
    """
    by_size = {}
    for i, path in enumerate(paths):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size > 0:
            by_size.setdefault(st.st_size, []).append(i)
    found = None  # (the later file, the earlier one): the first pair in the order given
    for size, group in by_size.items():
        # A stage that would read the whole file is the last one.
        stages = [n for n in _COPY_STAGES if n is not None and n < size] + [None]
        for limit in stages:
            if len(group) < 2:
                break
            seen, alike = {}, set()
            for i in group:
                digest, zeros = _digest(paths[i], limit)
                if zeros and limit is None:
                    continue
                if digest in seen:
                    if limit is None and _holds_nothing(paths[i], size):  # the same bytes as seen[digest]'s
                        continue
                    alike |= {seen[digest], i}
                    if limit is None and (found is None or i < found[0]):
                        found = (i, seen[digest])
                else:
                    seen[digest] = i
            group = sorted(alike)
    if found is not None:
        later, earlier = found
        raise SourceError(
            f"{paths[later]}: the {what} holds the same {_bytes(os.path.getsize(paths[later]))} as "
            f"{paths[earlier]}: a copy of one file, whose images would be stored twice. Leave one of them "
            "out (to read its images twice on purpose, oversampling them, convert the file once and select "
            "its samples twice when reading: Dataset.select)"
        )


def inside(path, root) -> bool:
    """True when the real path of ``path`` (links resolved) is the real path of ``root`` or below it.

    False for a name that is no path (a NUL in it).
    """
    try:
        real, top = os.path.realpath(path), os.path.realpath(root)
    except ValueError:  # an embedded NUL: no file has that name
        return False
    return os.path.commonpath([real, top]) == top


def open_inside(path, root):
    """The file ``path`` opened for reading, which must be inside the folder ``root`` once links are resolved.

    Checks the file actually opened, not only the name: the name is resolved
    and checked, opened without following a last link, and (where
    ``/proc/self/fd`` exists) the opened file's own path is checked again, so
    a link put in the way after the source's check does not lead out.

    Raises:
      SourceError: the file is outside ``root``.
      OSError: the file cannot be opened (named).
    """
    real = os.path.realpath(path)
    if not inside(real, root):
        raise SourceError(f"{path} resolves to {real}, outside the dataset folder {root}")
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    f = open(fd, "rb")
    opened = f"/proc/self/fd/{fd}"
    if os.path.islink(opened) and not inside(os.readlink(opened), root):
        f.close()
        raise SourceError(f"{path} was replaced by a link out of the dataset folder {root} while read")
    return f


class FileFacts(list):
    """[name, size, mtime, ...] of a file (:func:`file_facts`): a list that :func:`without_mtimes` knows
    (its third item is the mtime)."""


def file_facts(path, root=None) -> list:
    """[name, size, mtime] of a file for a source's fingerprint.

    The name is relative to ``root`` (the base name without one), so the same
    data mounted at another place on another host has the same fingerprint.
    """
    st = os.stat(path)
    name = os.path.relpath(path, root) if root is not None else os.path.basename(path)
    return FileFacts([name.replace(os.sep, "/"), st.st_size, int(st.st_mtime)])


def without_mtimes(description):
    """A source's description with its files' mtimes left out: one that a copy of the files matches."""
    if isinstance(description, FileFacts):
        return [*description[:2], *description[3:]]
    if isinstance(description, dict):
        return {k: without_mtimes(v) for k, v in description.items()}
    if isinstance(description, (list, tuple)):
        return [without_mtimes(v) for v in description]
    return description


def escaped_name(name: str) -> str:
    """A name that prints and stores as UTF-8: a file name's bytes that are not UTF-8 as ``\\xNN`` escapes.

    ``os.listdir`` gives such bytes as lone surrogates (``'bad\\udcff.jpg'``),
    which cannot be written as UTF-8; this gives ``'bad\\xff.jpg'``. Other
    names are returned as they are.
    """
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # a lone surrogate that no file name gave: shown as \udXXX
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def safe_basename(name: str) -> str:
    """The last '/'- or '\\'-separated part of a name carried by a record, without NULs."""
    base = re.split(r"[/\\]", name)[-1].replace("\0", "")
    return base or "image"


def read_class_names(path) -> list[str]:
    """Class names from a UTF-8 text file, one per line by target (trailing empty lines dropped).

    A byte-order mark at its start (Windows Notepad saves "UTF-8" with one) is
    not part of the first name; Windows line ends are read as line ends.
    """
    with open(os.path.expanduser(os.fspath(path)), encoding="utf-8-sig") as f:
        names = [line.rstrip("\n") for line in f]
    while names and not names[-1]:
        names.pop()
    return names


def few(names, limit: int = 5) -> str:
    """``'a', 'b', ... (12 in all)`` for messages."""
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")
