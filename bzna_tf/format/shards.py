"""Several .bzna files read as one dataset, in the order given."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import itertools
import os
import re
import unicodedata
import warnings

import numpy as np

import bzna_tf.format.wording as wording  # the module itself, not through the package
from bzna_tf.format.atomic import final_path, partial_path
from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.hints import directory_hint, writing_note
from bzna_tf.format.reader import BznaFile, is_url
from bzna_tf.format.reader import local_path as _local_path
from bzna_tf.format.sample import ImageMp4

__all__ = [
    "BznaShards",
    "check_shard_sets",
    "describe_sets",
    "directory_files",
    "expand_paths",
    "expand_user",
    "file_numbers",
    "folder_hint",
    "folder_sets",
    "ListOrderWarning",
    "is_url",
    "open_bzna",
    "open_file",
    "shard_sets",
]

_GLOB_CHARS = frozenset("*?[")
# TFDS-style shard names, as the converter writes them: NAME-00003-of-00016.bzna
SHARD_NAME = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5,})-of-(?P<count>\d{5,})\.bzna$")


def _gfile():
    # Only URLs need TensorFlow's filesystems; local paths never import it.
    import tensorflow as tf

    return tf.io.gfile


def open_file(path, *, keep_open: bool = True, read_metadata: bool = False) -> BznaFile:
    """One .bzna file: a local path, or a URL read through TensorFlow's filesystems (``keep_open``,
    ``read_metadata``: as :class:`BznaFile`'s)."""
    return BznaFile(path, keep_open=keep_open, read_metadata=read_metadata)


def file_numbers(starts, indices):
    """Which file holds each global sample index, given each file's first index (and the total)."""
    return np.searchsorted(starts, indices, side="right") - 1


def _is_dir(p) -> bool:
    return _gfile().isdir(p) if is_url(p) else os.path.isdir(p)


def expand_user(p: str) -> str:
    """``~`` and ``~user`` expanded in a local path or pattern (URLs are kept as they are)."""
    return p if is_url(p) else os.path.expanduser(p)


def directory_files(p) -> list[str]:
    """Every .bzna file of a directory, sorted (hidden and partial files excluded)."""
    if is_url(p):
        matches = sorted(_gfile().glob(p.rstrip("/") + "/*.bzna"))
    else:
        matches = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".bzna"))
    matches = [m for m in matches if not os.path.basename(m).startswith(".")]
    if not matches:
        raise FileNotFoundError(f"{p} is a directory without .bzna files{folder_hint(p)}")
    return matches


def _pattern_hint(p) -> str:
    """``": PARTIAL exists: a conversion is writing it ..."`` where a conversion writes what a local
    pattern would match (its partial files match the same pattern in partial form), or ``""``."""
    partials = [] if is_url(p) else sorted(glob.glob(partial_path(p)))
    if not partials:
        return ""
    name = os.path.basename(final_path(partials[0]))
    return f": {writing_note(partials[0], name, len(partials) - 1)}"


def folder_hint(p) -> str:
    """``": what it holds (how to convert it)"`` for a local folder without .bzna files, or ``""``."""
    hint = None if is_url(p) else directory_hint(p)
    return f": {hint}" if hint else ""


def shard_sets(paths) -> dict:
    """The datasets among ``paths``: ``NAME-*-of-0000N.bzna`` sets and single files.

    Returns:
      {how to name it (``"train-*-of-00004.bzna"``, ``"val.bzna"``): its paths, in order}.
    """
    sets = {}
    for path in paths:
        m = SHARD_NAME.match(os.path.basename(path))
        name = f"{m['stem']}-*-of-{m['count']}.bzna" if m else os.path.basename(path)
        sets.setdefault(name, []).append(path)
    return sets


def folder_sets(paths) -> dict:
    """:func:`shard_sets` of files that may lie in several folders (files of two folders are two datasets;
    two spellings of one folder, ``./d`` and ``d``, are one): {its name, with its folder as first written
    where the files lie in several folders: its paths, in order}."""
    sets = {}
    for path in paths:
        sets.setdefault((_folder(path), next(iter(shard_sets([path])))), []).append(path)
    one_folder = len({folder for folder, _ in sets}) == 1
    return {
        name if one_folder else os.path.join(os.path.dirname(p[0]), name): p for (_, name), p in sets.items()
    }


def describe_sets(sets: dict) -> str:
    """ "train-*-of-00004.bzna (4 files), val.bzna": the datasets of :func:`shard_sets`."""
    return ", ".join(f"{name} ({len(p)} files)" if len(p) > 1 else name for name, p in sets.items())


def _one_dataset(files, folder) -> None:
    """Refuses a directory holding more than one shard set or file: it would read them as one."""
    sets = shard_sets(files)
    if len(sets) <= 1:
        return
    example = next(iter(sets))
    pattern = example if is_url(folder) else os.path.join(folder, example)
    raise ValueError(
        f"{folder} holds {len(sets)} datasets, not one: {describe_sets(sets)}. A directory opens one set of "
        f"shards or one file; pick one with a pattern or a path (e.g. {pattern!r}), or list several "
        "explicitly to read them as one (ImageNet's per-split folders: bzna_tf.ImageNet(folder, "
        "split=...))"
    )


def _one_dataset_of_pattern(matches, pattern) -> None:
    """Refuses a pattern that matches more than one shard set or file (in one folder or several): it would
    read them as one (train shards and val.bzna, a file and the set it was converted again into)."""
    sets = folder_sets(matches)
    if len(sets) <= 1:
        return
    name, paths = next(iter(sets.items()))
    example = os.path.join(os.path.dirname(paths[0]), os.path.basename(name))  # its one file, or its pattern
    raise ValueError(
        f"the pattern {pattern!r} matches {len(sets)} datasets, not one: {describe_sets(sets)}. A pattern "
        "opens one set of shards or one file, as a directory does; pick one with a narrower pattern or a "
        f"path (e.g. {example!r}), or list several explicitly to read them as one, in a fixed order "
        f"(sorted(glob.glob({pattern!r})); ImageNet's per-split files: bzna_tf.ImageNet(pattern, split=...))"
    )


def _refuse_past_count(path, what=None) -> None:
    """Refuses a file named as shard k of a set of N (``NAME-0000k-of-0000N.bzna``) with k >= N."""
    m = SHARD_NAME.match(os.path.basename(path))
    if m and int(m["index"]) >= int(m["count"]):
        count = int(m["count"])
        numbered = f"numbered 0 to {count - 1}" if count else "none"
        raise ValueError(
            f"{what + ': ' if what else ''}{path} is named as shard {int(m['index'])} of a set of {count} "
            f"(its shards are {numbered}): a file left by another conversion, or misnamed? Remove it or "
            "rename it"
        )


def check_shard_sets(paths, what, pattern=None) -> None:
    """Refuses an incomplete set of ``NAME-0000k-of-0000N.bzna`` shards among ``paths``, a shard
    numbered past its set's count, or two sets of one name with different counts (a conversion redone
    with another number of shards).

    A conversion that has not finished (or a copy that lost files) must not
    silently read as a smaller dataset, nor two conversions as one. With
    ``pattern`` (the glob ``paths`` are its matches), only the shards whose
    names it covers must be there: ``train-0000[0-3]-of-01024.bzna`` picks
    four shards on purpose, ``train-*`` the whole set.

    Raises:
      FileNotFoundError: naming the missing shards.
      ValueError: naming the two sets, or the shard past the count.
    """
    sets, counts = {}, {}
    for path in paths:
        _refuse_past_count(path, what)
        m = SHARD_NAME.match(os.path.basename(path))
        if m:
            stem = os.path.join(os.path.dirname(path), m["stem"])
            key = (stem, int(m["count"]), len(m["index"]))
            sets.setdefault(key, set()).add(int(m["index"]))
            counts.setdefault(stem, {})[m["count"]] = None
    for stem, seen in counts.items():
        if len(seen) > 1:
            name = os.path.basename(stem)
            listed = " and ".join(f"{name}-*-of-{c}.bzna" for c in seen)
            raise ValueError(
                f"{what}: two sets of shards named {name}: {listed} (a conversion redone with another "
                f"number of shards?): pick one with a pattern ending in -of-{next(iter(seen))}.bzna, or "
                "remove the other"
            )
    base = os.path.basename(pattern) if pattern is not None else None
    for (stem, count, width), found in sets.items():
        name = os.path.basename(stem)

        def shard(k, name=name, count=count, width=width):
            return f"{name}-{k:0{width}d}-of-{count:0{width}d}.bzna"

        missing = sorted(set(range(count)) - found)
        if base is not None:  # only the shards the pattern covers
            missing = [k for k in missing if fnmatch.fnmatchcase(shard(k), base)]
        if missing:
            names = ", ".join(shard(k) for k in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            whole = f"{name}-*-of-{count:0{width}d}.bzna"
            why = "an unfinished conversion? Rerun it to finish them"
            if not is_url(stem):  # a conversion writing them leaves their partial files
                shards = [os.path.join(os.path.dirname(stem), shard(k)) for k in missing]
                partials = [(partial_path(s), os.path.basename(s)) for s in shards]
                partials = [pair for pair in partials if os.path.exists(pair[0])]
                if partials:
                    why = writing_note(*partials[0], len(partials) - 1)
            raise FileNotFoundError(
                f"{what}: {len(missing)} of the {count} shards {whole} are missing ({names}{more}): {why}"
            )


def file_identity(path):
    """What makes two local paths one file: (device, inode), which hard links share too; the real path
    (symbolic links resolved) where the file cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return os.path.realpath(path)
    return st.st_dev, st.st_ino


def _identity(p: str):
    """What makes two spellings of a path the same file: :func:`file_identity` (a ``file://`` URL is its
    local path); another URL is itself."""
    local = _local_path(p) if is_url(p) else p
    return p if local is None else file_identity(local)


def _folder(p: str):
    """What makes two spellings of a file's folder the same folder (``./shards`` and ``shards``): its real
    path, for a local path or a ``file://`` URL; another URL's folder as it is written."""
    local = _local_path(p) if is_url(p) else p
    return os.path.dirname(p) if local is None else os.path.realpath(os.path.dirname(local))


def _refuse_duplicates(paths) -> None:
    seen = {}
    for k, p in enumerate(paths):
        j = seen.setdefault(_identity(p), k)
        if j != k:
            first = paths[j]
            same = f"{p!r} twice" if first == p else f"{first!r} and {p!r}, the same file"
            raise ValueError(
                f"a file is listed twice: {same} (each file is read once; a sample twice in an epoch "
                "would be a silent mistake): remove one of the paths or patterns"
            )


def _refuse_shards_out_of_order(paths) -> None:
    """Refuses shards of one set listed out of their order (shard 2 before shard 0).

    Files are read in the order given, and that order numbers the samples: a split, a ``select`` and
    each worker's share of a sharded shuffle take samples by number. Shards of one set out of order
    come from a listing with no fixed order (``glob.glob``, ``os.listdir``), which another process may
    get in another order: the same numbers would then be other samples there (some read twice, others
    never). Shards of one set picked on purpose keep their order (0, 3, 7 is fine).
    """
    last = {}
    for p in paths:
        m = SHARD_NAME.match(os.path.basename(p))
        if not m:
            continue
        key = _dataset(p)  # (its real folder, its set's pattern)
        k = int(m["index"])
        if key in last and k < last[key][0]:
            j, earlier = last[key]
            raise ValueError(
                f"shards of one set listed out of order: {earlier} (shard {j}) comes before {p} (shard {k}). "
                "Files are read in the order given and that order numbers the samples (splits, select, "
                "each worker's share); a listing from glob.glob or os.listdir has no fixed order. Pass "
                f"sorted(paths), the pattern {os.path.join(os.path.dirname(p), key[1])!r} or the folder."
            )
        last[key] = (k, p)
    _warn_numbered_files_out_of_order([p for p in paths if not SHARD_NAME.match(os.path.basename(p))])


_DIGIT_RUNS = re.compile(r"[0-9]+")


class ListOrderWarning(UserWarning):
    """Files numbered alike listed in neither their names' nor their numbers' order (an unsorted listing?)."""


def _numbered_groups(paths) -> dict:
    """{(real folder, name without its numbers): [(numbers, name, path), ...] in list order} of the files
    whose names hold numbers (``part-2.bzna``: ``("part-", ".bzna")``)."""
    groups = {}
    for p in paths:
        name = os.path.basename(p)
        numbers = _DIGIT_RUNS.findall(name)
        if numbers:
            key = (_folder(p), tuple(_DIGIT_RUNS.split(name)))
            groups.setdefault(key, []).append((tuple(int(n) for n in numbers), name, p))
    return groups


def _warn_numbered_files_out_of_order(paths) -> None:
    """Warns of files of one folder numbered alike (``part-2.bzna`` before ``part-0.bzna``: names that differ
    only in their numbers) listed in neither their names' order nor their numbers' order.

    Such a list may come from ``glob.glob`` or ``os.listdir``, whose order another process may not share
    (the samples' numbers would then differ there). Unlike shards of one set, such files may be listed in
    an order chosen on purpose (the newest first; ``cifar100`` before ``cifar10``): a warning, not an error.
    ``sorted(paths)`` (``part-10`` before ``part-2``) and the numbers' order are both accepted.
    """
    for members in _numbered_groups(paths).values():
        if len(members) < 2:
            continue
        by_number = all(a[0] <= b[0] for a, b in itertools.pairwise(members))
        by_name = all(a[1] <= b[1] for a, b in itertools.pairwise(members))
        if by_number or by_name:
            continue
        a, b = next((a, b) for a, b in itertools.pairwise(members) if a[0] > b[0])
        warnings.warn(
            f"files numbered alike listed out of order: {a[2]} comes before {b[2]}. Files are read in the "
            "order given and that order numbers the samples (splits, select, each worker's share); if the "
            "list comes from glob.glob or os.listdir, which have no fixed order, another process may get "
            "another one: pass sorted(paths). If the order is chosen on purpose, ignore this warning "
            "(warnings.filterwarnings('ignore', category=bzna_tf.ListOrderWarning))",
            ListOrderWarning,
            stacklevel=wording.user_stacklevel(),
        )
        return


def in_shard_order(paths) -> list[str]:
    """``paths`` with the shards of each set in their order (and files of one folder numbered alike,
    ``part-0.bzna``, ``part-1.bzna``, in their numbers' order), each group where the list first names one
    of its files.

    For the files a sample list names (in the order the list first mentions them): the list picks the
    samples by file, so the order of its files is no order of the user's, and opening them as listed
    would refuse a list that names shard 2 before shard 0 (:func:`_refuse_shards_out_of_order`).
    """
    paths = [os.fspath(p) for p in paths]
    group_of, members = {}, {}
    for p in paths:
        m = SHARD_NAME.match(os.path.basename(p))
        if m:
            group_of[p] = ("set", _dataset(p))
            members.setdefault(group_of[p], []).append(((int(m["index"]),), p))
    plain = [p for p in paths if p not in group_of]
    for key, found in _numbered_groups(plain).items():
        for numbers, _, p in found:
            group_of[p] = ("numbered", key)
            members.setdefault(group_of[p], []).append((numbers, p))
    out, done = [], set()
    for p in paths:
        key = group_of.get(p)
        if key is None:
            out.append(p)
        elif key not in done:
            done.add(key)
            out.extend(q for _, q in sorted(members[key], key=lambda nq: nq[0]))
    return out


def near_name(name: str) -> str:
    """A class name as its two spellings may both give it: no surrounding spaces, NFC, case folded."""
    return unicodedata.normalize("NFC", name.strip()).casefold()


_WORDNET_ID = re.compile(r"n[0-9]{8}")


def _wordnet_and_words(a, b) -> bool:
    """Whether one list of class names is all WordNet ids (n01440764) and the other none, of one length."""
    a, b = [n for n in a if n is not None], [n for n in b if n is not None]

    def ids(names):
        return sum(bool(_WORDNET_ID.fullmatch(n)) for n in names)

    return bool(a) and len(a) == len(b) and sorted((ids(a), ids(b))) == [0, len(a)]


def merge_class_names(name_lists, clash):
    """Class name lists (None: one that names none) merged by target: (merged, named_by), or None where
    none names any. ``named_by[t]``: the index of the list that named target ``t`` first (-1: none did).

    Two names of one target call ``clash(t, earlier, here, merged, names)`` (``earlier``, ``here``: the
    two lists' indices; ``merged``, ``names``: NumPy object arrays of the names merged so far and of the
    list ``here``), which raises. Elementwise in NumPy: the files of a large set are merged when it is
    opened.
    """
    merged = named_by = None
    for k, names in enumerate(name_lists):
        if names is None:
            continue
        here = np.empty(len(names), dtype=object)
        here[:] = names
        if merged is None:
            merged, named_by = np.full(0, None, dtype=object), np.full(0, -1)
        if len(here) > len(merged):
            merged = np.concatenate([merged, np.full(len(here) - len(merged), None, dtype=object)])
            named_by = np.concatenate([named_by, np.full(len(here) - len(named_by), -1)])
        known, new = merged[: len(here)], here != None  # noqa: E711 (elementwise)
        clashes = np.flatnonzero(new & (known != None) & (known != here))  # noqa: E711
        if clashes.size:
            t = int(clashes[0])
            clash(t, int(named_by[t]), k, merged, here)
        fill = np.flatnonzero(new & (known == None))  # noqa: E711
        merged[fill], named_by[fill] = here[fill], k
    return None if merged is None else (merged.tolist(), named_by.tolist())


def _merged_class_names(files) -> list[str | None] | None:
    """The class names of ``files`` merged by target (None: no file names any), refusing two names of
    one target (:func:`merge_class_names`)."""

    def clash(t, earlier, k, merged, here):
        a, b = merged[t], here[t]
        if near_name(a) == near_name(b):  # they may print alike
            why = (
                f"two spellings of one name ({ascii(a)} and {ascii(b)}: case, spaces or Unicode form), "
                "which the files' labels cannot be matched by"
            )
        elif _wordnet_and_words(merged, here):
            # ImageNet's two vocabularies (WordNet ids from its class folders, words from its TFRecords),
            # which may number the same classes alike; nothing here can tell.
            why = (
                "one file names its classes by WordNet ids and the other by words (from class folders "
                "and from TFRecords?): if they are the same classes, numbered alike, no label can show "
                "it by name. Give one file the other's names (convert it again with --class-names FILE, "
                "one name per target); if they are not, a label would mean one class in one file and "
                "another in the other"
            )
        else:
            why = (
                "the files number their classes differently (converted apart from folders that hold "
                "other classes?), so a label would mean one class in one file and another in the other"
            )
        raise BznaFormatError(
            f"class {t} is named {a!r} in an earlier file ({files[earlier].name}) and {b!r} here: "
            f"{why}. Convert them again with the same classes (the same class folders, an empty one for "
            "a class a folder lacks, or one --class-names list), or read them apart (each file or set "
            "alone; ImageNet's splits by a pattern of one split's files, ImageNet('DIR/train-*.bzna', "
            "split='train'))",
            path=files[k].name,
        )

    out = merge_class_names([f.class_names for f in files], clash)
    return None if out is None else out[0]


# What every shard of one conversion records alike (its conversion facts, docs/reference/format.md): the
# order and the seed of the permutation that the shards' ranges cut. The fingerprint may differ per shard
# (it holds the source files' mtimes: each task of an array job may read its own copy of them); the
# sibling fingerprint, the same without them, is compared where both shards record it.
_SAME_IN_A_SET = ("order", "seed")


def _facts(f) -> dict | None:
    facts = f.metadata.get("conversion")
    return facts if isinstance(facts, dict) else None


def _positions(facts) -> tuple[int, int] | None:
    start, stop = facts.get("start"), facts.get("stop")
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop))
    return (start, stop) if ok and 0 <= start <= stop else None


def check_conversions(files) -> None:
    """Refuses shards of one set (``NAME-0000k-of-0000N.bzna``) that two conversions wrote.

    A file whose conversion facts say it is shard k of N, as its name says,
    is one of its set's shards: each holds the positions [start, stop) of
    the one order (``order``, ``seed``) in which its conversion cut the
    source. Shards of two conversions (a rerun with another seed that
    finished only some shards, an array task run on other sources) would
    read some images twice and others not at all. Files that record no
    conversion (the original tools', other writers') are not checked, unless
    their set also holds shards that do.

    Args:
      files: opened :class:`BznaFile` objects (their metadata is read).

    Raises:
      ValueError: naming two shards of a set and what differs between them.
    """
    sets = {}
    for f in files:
        m = SHARD_NAME.match(os.path.basename(f.name))
        if m:
            key = (_folder(f.name), m["stem"], int(m["count"]))
            sets.setdefault(key, []).append((int(m["index"]), f))
    for (_, _, num_shards), members in sets.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda kf: kf[0])
        claims = []
        for k, f in members:
            facts = _facts(f)
            if facts is not None and facts.get("num_shards") == num_shards and facts.get("shard") == k:
                claims.append((k, f, facts))
        if not claims:
            continue
        if len(claims) < len(members):
            _, first, _ = claims[0]
            other = next(f for k, f in members if not any(f is g for _, g, _ in claims))
            facts = _facts(other)
            says = (
                "records no conversion"
                if facts is None
                else f"records shard {facts.get('shard')!r} of {facts.get('num_shards')!r}"
            )
            _mixed_set(first, other, f"one records its shard of the conversion, the other {says}")
        _, f0, a = claims[0]
        for _, f, b in claims[1:]:
            for key in _SAME_IN_A_SET:
                if a.get(key) != b.get(key):
                    _mixed_set(f0, f, f"{key} {a.get(key)!r} and {key} {b.get(key)!r}")
        sibling = [
            (f, facts["sibling_fingerprint"]) for _, f, facts in claims if facts.get("sibling_fingerprint")
        ]
        for f, fp in sibling[1:]:
            if fp != sibling[0][1]:
                _mixed_set(sibling[0][0], f, "other sources or options")
        ranges = [(k, f, _positions(facts)) for k, f, facts in claims]
        if any(r is None for _, _, r in ranges):
            continue  # malformed positions: nothing to compare
        k, f, (start, stop) = ranges[0]
        if k == 0 and start != 0:
            _mixed_set(
                f, ranges[1][1], f"shard 0 holds positions [{start}, {stop}) of its conversion, not from 0"
            )
        for j, g, (gstart, gstop) in ranges[1:]:
            if gstart < stop or (j == k + 1 and gstart != stop):
                left = f"position {stop}" if gstart == stop + 1 else f"positions {stop} to {gstart - 1}"
                what = "overlap" if gstart < stop else f"leave {left} out"
                _mixed_set(f, g, f"positions [{start}, {stop}) and [{gstart}, {gstop}), which {what}")
            k, f, start, stop = j, g, gstart, gstop


def _mixed_set(a, b, what: str):
    raise ValueError(
        f"{a.name} and {b.name} are shards of one set written by two conversions ({what}): read as one set, "
        "some images would be read twice and others not at all. Convert the whole set again with "
        "--overwrite (overwrite=True; every shard: in an array job, every task)"
    )


_TAIL_BYTES = 1 << 20  # a .bzna file's index (moov) is at its end


def _moov_digest(f) -> bytes:
    return hashlib.blake2b(f.moov.raw(), digest_size=16).digest()


def _tail_digest(f) -> bytes:
    """A digest of the last MiB: the index, the metadata and the checksum box (the pictures' checksums)."""
    n = min(f.file_size, _TAIL_BYTES)
    return hashlib.blake2b(f._src.read(f.file_size - n, n), digest_size=16).digest()


def _labels_digest(f) -> bytes:
    names = f.filenames()
    h = hashlib.blake2b(np.ascontiguousarray(f.targets).tobytes(), digest_size=16)
    h.update(repr(names).encode())
    return h.digest()


# What tells two files apart, cheapest first: each is computed only for the files that every earlier one
# left alike, so opening a set of distinct files (whose sizes differ) reads nothing more.
_SAME_CONTENT = (
    lambda f: (f.file_size, len(f)),
    _moov_digest,
    lambda f: f._checksum_head,  # read with the index
    _tail_digest,
    _labels_digest,
)


def _refuse_copies(files) -> None:
    """Refuses two files that are copies of one another (a file copied under another name), whose
    samples would be read twice: the same size, index (moov), checksums, last MiB, targets and names."""
    groups = [list(files)]
    for key in _SAME_CONTENT:
        refined = []
        for group in groups:
            alike = {}
            for f in group:
                alike.setdefault(key(f), []).append(f)
            refined.extend(g for g in alike.values() if len(g) > 1)
        groups = refined
        if not groups:
            return
    a, b = groups[0][:2]
    raise ValueError(
        f"two files are copies of one another: {a.name!r} and {b.name!r} (the same size, index, targets, "
        "filenames and last MiB; each sample would be read twice an epoch, a silent mistake): remove one of "
        "them (to read samples twice on purpose, select them twice with Dataset.select)"
    )


def _dataset(path: str):
    """Which dataset a file is of: its shard set (``NAME-*-of-0000N.bzna``), or the file alone, in its
    folder (two spellings of one folder are one)."""
    return _folder(path), next(iter(shard_sets([path])))


def _refuse_conversions_of_one_source(files) -> None:
    """Refuses two datasets (shard sets or files, in one folder or two) that are two conversions of one
    source: their conversion facts record the same source fingerprint (the same sources, options and count
    of images; not the count of shards, the order, the seed nor the sources' mtimes), or, in files written
    before it was recorded, the same sibling fingerprint (the same, with the count of shards).

    Read as one, each image would be read twice an epoch. Pieces of one order (one seed, positions that do
    not overlap) read no image twice wherever they lie, a set whose shards are in two folders included, and
    so do pieces of two shard counts (the order does not depend on it); the shards of one set are
    :func:`check_conversions`' to compare.

    Raises:
      ValueError: naming a file of each.
    """
    groups = {}
    for f in files:
        facts = _facts(f)
        for key in ("source_fingerprint", "sibling_fingerprint"):
            fp = facts.get(key) if facts is not None else None
            if isinstance(fp, str) and fp:
                groups.setdefault((key, fp), []).append((_dataset(f.name), f, facts))
    for group in groups.values():
        if len({d for d, _, _ in group}) < 2:
            continue
        runs = {}  # (order, seed) -> its files: positions of one order
        for d, f, facts in group:
            runs.setdefault((repr(facts.get("order")), repr(facts.get("seed"))), []).append((d, f, facts))
        if len(runs) > 1:  # two orders of one source: they share images wherever they lie
            firsts = {}  # (run, dataset) -> its first file
            for run, members in runs.items():
                for d, f, _ in members:
                    firsts.setdefault((run, d), f)
            for (run, d), f in firsts.items():
                for (other_run, e), g in firsts.items():
                    if run != other_run and d != e:
                        _two_conversions(f, g, files)
        members = next(iter(runs.values()))
        spans = []
        for d, f, facts in members:
            start, stop = _positions(facts) or (0, float("inf"))  # unknown positions: as if all
            if start < stop:
                spans.append((start, stop, d, f))
        spans.sort(key=lambda s: s[:2])
        reach = []  # the two largest stops so far of two datasets: (stop, dataset, file)
        for start, stop, d, f in spans:
            for far, e, g in reach:
                if e != d and far > start:
                    _two_conversions(g, f, files)
            best = []
            for item in sorted([(stop, d, f), *reach], key=lambda r: -r[0]):
                if all(item[1] != b[1] for b in best):
                    best.append(item)
            reach = best[:2]


def _two_conversions(f, g, files):
    a, b = sorted((f, g), key=lambda x: next(k for k, y in enumerate(files) if y is x))  # as listed
    raise ValueError(
        f"{a.name} and {b.name} are of two conversions of one source (their conversion facts record one "
        "source fingerprint: the same sources and options): read as one dataset, each "
        "image would be read twice an epoch, a silent mistake. Read one of them (its folder, a pattern or "
        "a path); to read samples twice on purpose, select them twice with Dataset.select"
    )


def expand_paths(paths, *, every_file: bool = False, one_per_pattern: bool = False) -> list[str]:
    """A path, a directory, a glob pattern, or a list of them -> the list of files.

    A pattern expands to its matches in sorted order; a pattern that matches
    nothing is an error, so a typo never yields an empty dataset. A directory
    gives its one dataset: one set of ``NAME-0000k-of-0000N.bzna`` shards, or
    one file (several are an error listing them); with ``one_per_pattern``,
    so does a pattern (a list names several datasets to read as one). Shards
    found through a directory must be complete, those found through a
    pattern the ones it covers (``x-0000[0-3]-of-00064.bzna`` picks four),
    and one name must not come with two shard counts; a file named as shard
    k of N with k >= N is an error.
    ``~`` is expanded. A file reached twice (listed twice, matched by two
    patterns, or spelled two ways, a ``file://`` URL and its path included)
    is an error.

    Args:
      paths: a path, directory or pattern, or a list of them.
      every_file: a directory gives every .bzna file in it (``bzna-tf info``
        and ``verify`` look at files, not at one dataset).
      one_per_pattern: a pattern that matches several datasets (shard sets
        or files, in one folder or several) is an error listing them, as a
        directory holding several is: what readers ask (:class:`BznaShards`),
        where ``dir/*.bzna`` over train shards and ``val.bzna`` would read
        train and val as one. ImageNet sorts a pattern's files by split
        itself, and ``bzna-tf info`` and ``verify`` look at files.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if isinstance(paths, (bytes, dict)) or not hasattr(paths, "__iter__"):  # bytes: a list of ints
        raise TypeError(
            "Expected a path, directory or pattern (a str or os.PathLike), or a list of them. "
            f"Received: {paths!r}"
        )
    out = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(
                f"Expected each path as a str or os.PathLike (a path, directory or pattern). Received: {p!r}"
            )
        p = expand_user(os.fspath(p))
        if _GLOB_CHARS & set(p) and (is_url(p) or not os.path.exists(p)):
            matches = sorted(_gfile().glob(p) if is_url(p) else glob.glob(p))
            if not matches:
                raise FileNotFoundError(f"no file matches the pattern {p!r}{_pattern_hint(p)}")
            check_shard_sets(matches, p, pattern=p)
            if one_per_pattern:
                _one_dataset_of_pattern(matches, p)
            out.extend(matches)
        elif _is_dir(p):
            matches = directory_files(p)
            if not every_file:
                _one_dataset(matches, p)
            check_shard_sets(matches, p)
            out.extend(matches)
        else:
            _refuse_past_count(p)
            out.append(p)
    if not out:
        raise ValueError("expected at least one .bzna file. Received: an empty list")
    _refuse_duplicates(out)
    return out


class BznaShards:
    """Several .bzna files presented as one concatenated dataset.

    Sample ``i`` of the whole is sample ``i - start[k]`` of file ``k``. Each
    file keeps its own unlabelled tail, so ``targets`` holds -1 wherever a
    file's sample has no target.

    Opening reads each file's index, one file at a time, and keeps no file
    open: each later read opens its file for its duration (its ``files`` are
    :class:`BznaFile` objects of ``keep_open=False``), so a thousand shards
    take no descriptor between reads. :meth:`close` (or the end of a ``with``
    block) ends the reading: later reads raise a ``ValueError``.

    Opening also reads each file's metadata box (in the same opening), and
    refuses what would read samples twice or miss some: the shards of one set
    written by two conversions (``check_conversions``), and two files
    that are copies of one another (the same size, index, last MiB, targets
    and names; only files of one size and sample count are compared), and two
    conversions of one source: two datasets (shard sets, files, or sets in
    two folders) whose conversion facts record one source fingerprint, unless
    they are pieces of one order that share no image. Files are read in the
    order given, so shards of one set listed out of their order (shard 2
    before shard 0: an unsorted listing; one folder however spelled) are
    refused; files of one folder numbered alike (``part-2.bzna`` before
    ``part-0.bzna``) listed in neither their names' nor their numbers' order
    get a :class:`ListOrderWarning`. A pattern, like a folder, opens one dataset (one set of shards or
    one file); a list reads several as one.

    Args:
      paths: a list of paths, folders or glob patterns (patterns expand sorted).

    Raises:
      ValueError: as :func:`expand_paths` (with ``one_per_pattern``); shards of
        one set out of order; shards of two conversions; a copy; two
        conversions of one source.
    """

    def __init__(self, paths):
        self.paths = expand_paths(paths, one_per_pattern=True)
        _refuse_shards_out_of_order(self.paths)
        self.files: list[BznaFile] = []
        try:
            for p in self.paths:
                # The metadata box (class names, conversion facts) in the same opening as the index.
                self.files.append(open_file(p, keep_open=False, read_metadata=True))
            check_conversions(self.files)
            _refuse_copies(self.files)
            _refuse_conversions_of_one_source(self.files)
        except BaseException:
            self.close()
            raise
        sizes = np.array([len(f) for f in self.files], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)])
        self._targets = None
        self._class_names = False  # not merged yet

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __repr__(self):
        return f"BznaShards({len(self.files)} files, samples={len(self)})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for f in self.files:
            f.close()

    @property
    def num_labelled(self) -> int:
        return sum(f.num_labelled for f in self.files)

    def locate(self, i: int) -> tuple[int, int]:
        """(file number, index in that file) of global sample i."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(
                f"sample index {i} out of range: {wording.holds(f.name for f in self.files)} "
                f"{wording.count(n, 'sample')}"
            )
        i = i + n if i < 0 else i
        k = int(file_numbers(self.starts, i))
        return k, i - int(self.starts[k])

    def target(self, i: int) -> int:
        k, j = self.locate(i)
        return self.files[k].target(j)

    @property
    def targets(self) -> np.ndarray:
        if self._targets is None:
            self._targets = np.concatenate([f.targets for f in self.files])
            self._targets.flags.writeable = False
        return self._targets

    @property
    def class_names(self) -> list[str | None] | None:
        """The class names stored in the files, merged (by target), or None when none stores any.

        Raises:
          BznaFormatError: two files name one target differently.
        """
        if self._class_names is False:
            self._class_names = _merged_class_names(self.files)
        return None if self._class_names is None else list(self._class_names)

    def filename(self, i: int) -> str | None:
        k, j = self.locate(i)
        return self.files[k].filename(j)

    def filenames(self) -> list[str | None]:
        out = []
        for f in self.files:
            names = f.filenames()
            out.extend(names if names is not None else [None] * len(f))
        return out

    def sample_bytes(self, i: int) -> bytes:
        k, j = self.locate(i)
        return self.files[k].sample_bytes(j)

    def sample(self, i: int) -> ImageMp4:
        k, j = self.locate(i)
        return self.files[k].sample(j)

    def __getitem__(self, i: int) -> ImageMp4:
        return self.sample(i)


def open_bzna(source):
    """Open .bzna data: one file, or several as one dataset.

    Args:
      source: a path or binary file object (-> :class:`BznaFile`), or a glob
        pattern, a directory of .bzna files or a list of paths and patterns
        (-> :class:`BznaShards`).
        Paths may be URLs of TensorFlow's filesystems (``gs://...``): those
        are read through ``tf.io.gfile``.
    """
    if isinstance(source, (str, os.PathLike)):
        p = expand_user(os.fspath(source))
        if _is_dir(p):
            return BznaShards([p])
        if not (_GLOB_CHARS & set(p)) or (not is_url(p) and os.path.exists(p)):
            return open_file(p)
        return BznaShards([p])
    if isinstance(source, (list, tuple)):
        return BznaShards(source)
    return BznaFile(source)
