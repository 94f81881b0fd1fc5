"""LBANN sample lists (seed 003) for .bzna files: read, check, resolve, write.

A sample list is a human-editable text file naming the samples a run uses.
Its first line is the list type, the second the counts, the third the data's
base directory, and (for some types) the fourth a label file; then one line
per data file (one per sample for ``SINGLE-SAMPLE``). The .bzna files take
the place of LBANN's HDF5 files; a sample id is an index in its .bzna file
(all digits) or the filename stored for that sample.

=============================  ====================  ===========  ==========================================
type                           line 2                label line   body lines
=============================  ====================  ===========  ==========================================
SINGLE-SAMPLE                  samples               yes          ``FILE.bzna/ID`` (one sample per line)
MULTI-SAMPLE_INCLUSION         included excluded     yes          ``FILE included excluded ID...`` (used)
                               files
MULTI-SAMPLE_EXCLUSION         included excluded     yes          ``FILE included excluded ID...`` (unused)
                               files
MULTI-SAMPLE_INCLUSION_V2      included files        no           ``FILE included ID...`` (used)
CONDUIT_HDF5_INCLUSION         included excluded     no           ``FILE included excluded ID...`` (used)
                               files
CONDUIT_HDF5_EXCLUSION         included excluded     no           ``FILE included excluded ID...`` (unused)
                               files
=============================  ====================  ===========  ==========================================

In inclusion lines, index ids may use LBANN's range form ``a ... b`` (a to b,
both included). Pure Python: no TensorFlow.
"""

from __future__ import annotations

import os
import posixpath
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from bzna_tf.format.atomic import write_atomic
from bzna_tf.format.shards import file_numbers, is_url
from bzna_tf.format.sniff import not_bzna_reason, read_head, sniff
from bzna_tf.format.wording import count, user_stacklevel

__all__ = ["LIST_TYPES", "SampleList", "SampleListError", "FileEntry"]

SINGLE = "SINGLE-SAMPLE"
LIST_TYPES = (
    SINGLE,
    "MULTI-SAMPLE_INCLUSION",
    "MULTI-SAMPLE_EXCLUSION",
    "MULTI-SAMPLE_INCLUSION_V2",
    "CONDUIT_HDF5_INCLUSION",
    "CONDUIT_HDF5_EXCLUSION",
)
"""The six LBANN sample-list types (line 1 of a list), each read and written."""
_LABEL_LINE = {SINGLE, "MULTI-SAMPLE_INCLUSION", "MULTI-SAMPLE_EXCLUSION"}
RANGE = "..."
NO_LABEL_FILE = "-"  # what bzna-tf writes on the label line: labels are the .bzna targets
_DIGITS = re.compile(r"[0-9]+")


class SampleListError(ValueError):
    """A malformed sample list, or one that does not fit its data.

    The message starts with ``LIST, line N:``; the same facts are attributes.

    Attributes:
      path: the list's name (or None for a list built in memory).
      line: the 1-based line number, or None when the problem is not one line's.
      reason: what is wrong, without the location.
    """

    def __init__(self, reason: str, *, path=None, line: int | None = None):
        self.reason, self.path, self.line = reason, path, line
        where = [str(path) if path is not None else "sample list"]
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{', '.join(where)}: {reason}")


def _is_exclusion(kind: str) -> bool:
    return kind.endswith("_EXCLUSION")


def _has_excluded_field(kind: str) -> bool:
    return kind not in (SINGLE, "MULTI-SAMPLE_INCLUSION_V2")


def parse_id(token: str):
    """A sample id as written: an int (an index) when all digits, else a stored filename."""
    return int(token) if _DIGITS.fullmatch(token) else token


@dataclass(slots=True)  # a SINGLE-SAMPLE list holds one per sample
class FileEntry:
    """One body line: a data file and the ids it lists.

    For ``SINGLE-SAMPLE`` lists ``file`` is the whole line (``FILE.bzna/ID``)
    and ``ids`` is empty: the split between file and id is found against the
    data. ``ids`` are ints (indices) or strs (filenames), ranges expanded.
    """

    file: str
    included: int = 1
    excluded: int = 0
    ids: tuple = ()
    line: int | None = None


@dataclass
class SampleList:
    """A sample list: its type, base directory, label-file line and file entries.

    Read one with :meth:`read` (or :meth:`parse`), make one for a dataset with
    :meth:`from_dataset`, write it with :meth:`write`, and turn it into sample
    indices of a set of files with :meth:`global_indices`.
    """

    type: str
    base: str
    entries: list[FileEntry] = field(default_factory=list)
    label_file: str | None = None
    path: str | None = None
    # (path, the list's folder as an absolute path when the list was read or written): a relative base
    # is taken from there, not from the working directory of a later use (a notebook's %cd).
    _anchor: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.type not in LIST_TYPES:
            raise ValueError(
                f"Expected the list type to be one of {list(LIST_TYPES)}. Received: {self.type!r}"
            )
        self._anchor_at(self.path)

    def _anchor_at(self, path) -> None:
        """Records ``path``'s folder, made absolute now (a local path only)."""
        self._anchor = None
        if path is not None and not is_url(os.fspath(path)):
            self._anchor = (path, os.path.dirname(os.path.abspath(os.fspath(path))))

    # ---------------------------------------------------------------- facts

    @property
    def exclusion(self) -> bool:
        return _is_exclusion(self.type)

    @property
    def num_included(self) -> int:
        return sum(e.included for e in self.entries)

    @property
    def num_excluded(self) -> int:
        return sum(e.excluded for e in self.entries)

    def __len__(self) -> int:
        """The number of samples the list uses."""
        return self.num_included

    def _error(self, reason, line=None):
        return SampleListError(reason, path=self.path, line=line)

    # ---------------------------------------------------------------- reading

    @classmethod
    def of(cls, sample_list) -> SampleList:
        """``sample_list`` itself if it is a :class:`SampleList`, else the list read from that path."""
        if isinstance(sample_list, SampleList):
            return sample_list
        if not isinstance(sample_list, (str, os.PathLike)):
            raise TypeError(
                "Expected `sample_list` as a bzna_tf.SampleList or the path of an LBANN sample list. "
                f"Received: sample_list={sample_list!r}"
            )
        return cls.read(sample_list)

    @classmethod
    def read(cls, path) -> SampleList:
        """Reads and checks a list file (a path, ``~`` expanded, or a URL of TensorFlow's filesystems).

        A relative base (line 3) is taken from the list file's folder as it is
        when the list is read: a later ``os.chdir`` does not move it."""
        path = os.fspath(path)
        if not is_url(path):
            path = os.path.expanduser(path)
        if is_url(path):
            import tensorflow as tf

            with tf.io.gfile.GFile(path, "r") as f:
                text = f.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        return cls.parse(text, path=path)

    @classmethod
    def parse(cls, text: str, *, path=None) -> SampleList:
        """Parses list text; ``path`` names the list in errors (and anchors a relative base)."""

        def error(reason, line):
            return SampleListError(reason, path=path, line=line)

        lines = text.splitlines()

        def header(number, what):
            if number > len(lines) or not lines[number - 1].strip():
                raise error(
                    f"expected {what}, found {'nothing' if number > len(lines) else 'an empty line'}", number
                )
            return lines[number - 1].split()

        header(1, f"the list type (one of {', '.join(LIST_TYPES)})")
        kind = _list_type(lines[0])
        if kind is None:
            raise error(
                f"unknown list type {lines[0].split()[0]!r}; expected one of {', '.join(LIST_TYPES)}", 1
            )
        fields = ["samples"] if kind == SINGLE else ["included samples"]
        if _has_excluded_field(kind):
            fields.append("excluded samples")
        if kind != SINGLE:
            fields.append("files")
        counts = header(2, "the counts: " + ", ".join(fields))
        if len(counts) != len(fields) or not all(_DIGITS.fullmatch(c) for c in counts):
            raise error(
                f"expected {len(fields)} non-negative integer{'s' if len(fields) > 1 else ''} "
                f"({', '.join(fields)}) for {kind}; found {lines[1].strip()!r}",
                2,
            )
        counts = [int(c) for c in counts]
        base = lines[2].strip() if len(lines) >= 3 else ""
        if not base:
            raise error("expected the base directory of the data files, found nothing", 3)
        label_file = None
        body_start = 3
        if kind in _LABEL_LINE:
            label_file = header(4, f"the label file line ({kind} has one; bzna-tf writes '-')")[0]
            body_start = 4

        if kind == SINGLE:
            num_files, inc_total, exc_total = counts[0], counts[0], 0
        elif _has_excluded_field(kind):
            inc_total, exc_total, num_files = counts
        else:
            (inc_total, num_files), exc_total = counts, 0

        body_line = "sample line" if kind == SINGLE else "file line"
        entries = []
        announced = exc_total if _is_exclusion(kind) else inc_total  # ids line 2 announces
        used = 0  # ids of the lines so far
        for number, raw in enumerate(lines[body_start:], start=body_start + 1):
            tokens = raw.split()
            if not tokens:
                continue
            if len(entries) == num_files:
                raise error(
                    f"the counts announce {count(num_files, body_line)}, "
                    f"but there are more (this is line {len(entries) + 1} of the body)",
                    number,
                )
            entries.append(cls._parse_line(kind, tokens, number, error, announced, used))
            used += entries[-1].excluded if _is_exclusion(kind) else entries[-1].included
        if len(entries) != num_files:
            raise error(
                f"the counts announce {count(num_files, body_line)}, found {len(entries)}",
                2,
            )
        out = cls(kind, base, entries, label_file, path)
        inc = out.num_included
        if inc != inc_total:
            raise error(
                f"the counts announce {count(inc_total, 'included sample')}, the file lines add up to {inc}",
                2,
            )
        if _has_excluded_field(kind) and out.num_excluded != exc_total:
            raise error(
                f"the counts announce {count(exc_total, 'excluded sample')}, the lines add up to "
                f"{out.num_excluded}",
                2,
            )
        return out

    @staticmethod
    def _parse_line(kind, tokens, number, error, announced, used) -> FileEntry:
        """One body line. ``announced`` ids (included, or excluded for exclusion lists) are what
        line 2 announces, ``used`` those of the lines before: a line past them is refused before
        its ranges are expanded."""
        if kind == SINGLE:
            if len(tokens) != 1:
                raise error(
                    f"expected one sample per line (FILE.bzna/ID), found {len(tokens)} fields", number
                )
            return FileEntry(tokens[0], 1, 0, (), number)
        n_counts = 2 if _has_excluded_field(kind) else 1
        counts = tokens[1 : 1 + n_counts]
        if len(counts) < n_counts or not all(_DIGITS.fullmatch(c) for c in counts):
            what = "included and excluded counts" if n_counts == 2 else "the included count"
            raise error(
                f"expected FILE then {what} (non-negative integers), found {' '.join(tokens)!r}", number
            )
        included = int(counts[0])
        excluded = int(counts[1]) if n_counts == 2 else 0
        listed = excluded if _is_exclusion(kind) else included
        which = "excluded" if _is_exclusion(kind) else "included"
        # Ranges are counted before they are expanded: a short line such as
        # "0 ... 99999999999" must not allocate what it does not announce.
        n_ids = _count_ids(tokens[1 + n_counts :], number, error)
        if n_ids != listed:
            raise error(
                f"{tokens[0]}: the line says {count(listed, which + ' sample')} but lists "
                f"{count(n_ids, 'id')}",
                number,
            )
        if used + listed > announced:
            raise error(
                f"the counts announce {count(announced, which + ' sample')}, the file lines add up to "
                f"more ({used + listed} by line {number})",
                2,
            )
        ids = _expand(tokens[1 + n_counts :], number, error)
        seen = set()
        for i in ids:
            if i in seen:
                raise error(f"{tokens[0]}: sample {i!r} is listed twice", number)
            seen.add(i)
        return FileEntry(tokens[0], included, excluded, tuple(ids), number)

    # ---------------------------------------------------------------- resolving

    def _base(self) -> str:
        # A NUL names no file (nor a user for "~user": expanduser raises): the base is then no folder here.
        base = self.base if is_url(self.base) or "\0" in self.base else os.path.expanduser(self.base)
        if is_url(base) or os.path.isabs(base) or self.path is None or is_url(self.path):
            return base
        if self._anchor is not None and self._anchor[0] == self.path:
            return os.path.join(self._anchor[1], base)  # the list's folder when it was read or written
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), base)  # a path set by hand

    def _join(self, rel: str) -> str:
        base = self._base()
        if is_url(base):
            return base.rstrip("/") + "/" + rel
        return os.path.join(base, rel)

    def data_paths(self) -> list[str]:
        """The data files the list names, in order of first mention (base joined).

        For ``SINGLE-SAMPLE`` lists the file part of each line ends at its
        first path component that is an existing file.
        """
        out = {}
        is_file = {}  # one filesystem query per directory prefix, not per line
        for e in self.entries:
            p = self._single_file(e, is_file) if self.type == SINGLE else self._join(e.file)
            out.setdefault(p, None)
        return list(out)

    def _single_file(self, e: FileEntry, is_file: dict) -> str:
        full = _norm(self._join(e.file))
        parts = full.split("/")
        for k in range(1, len(parts)):
            head = "/".join(parts[:k]) or "/"
            if head not in is_file:
                is_file[head] = _isfile(head)
            if is_file[head]:
                return head
        raise self._error(f"{e.file!r}: no data file found along {full!r} (expected FILE.bzna/ID)", e.line)

    def global_indices(self, paths, starts, filenames_of) -> np.ndarray:
        """The listed samples as indices into the concatenation of ``paths``.

        Args:
          paths: the data files, in dataset order.
          starts: each file's first global index, plus the total at the end.
          filenames_of: ``k -> list of file k's stored filenames`` (or None),
            called only when the list names samples by filename.

        Returns:
          int64 global indices: inclusion lists in list order, exclusion lists
          in file order.

        Raises:
          SampleListError: a file the data lacks, an id out of range, a
            filename not stored (or stored twice) in its file, a line whose
            included + excluded samples differ from its file's size (the
            types with an excluded count, inclusion lines too), each naming
            the line.
        """
        matcher = _FileMatcher(paths)
        names = {}

        def lookup(k, ident, e):
            size = int(starts[k + 1] - starts[k])
            if isinstance(ident, int):
                if ident >= size:
                    raise self._error(
                        f"{paths[k]}: sample index {ident} out of range: the file holds "
                        f"{count(size, 'sample')}",
                        e.line,
                    )
                return ident
            if k not in names:
                stored = filenames_of(k)
                table = defaultdict(list)
                for j, name in enumerate(stored or ()):
                    table[name].append(j)
                names[k] = table
            hits = names[k].get(ident, ())
            if len(hits) != 1:
                why = "is not a filename stored" if not hits else f"names {len(hits)} samples (use indices)"
                raise self._error(f"{paths[k]}: {ident!r} {why} in the file", e.line)
            return hits[0]

        out, lines = [], []
        if self.type == SINGLE:  # one array, not one per sample (a list of ImageNet's 1.28 M)
            single = np.empty(len(self.entries), np.int64)
            for j, e in enumerate(self.entries):
                k, ident = self._split_single(e, matcher)
                single[j] = int(starts[k]) + lookup(k, parse_id(ident), e)
            return self._unique([single], lambda: [e.line for e in self.entries])
        first_line = {}  # data file -> the line that named it first
        for e in self.entries:
            k = self._find(matcher, self._join(e.file), e)
            if k is None:
                raise self._error(
                    f"{e.file} ({self._join(e.file)}) is not one of the data files ({_few(paths)})", e.line
                )
            earlier = first_line.setdefault(k, e.line)
            if self.exclusion and earlier != e.line:
                # Each line's complement is the file's other samples: two lines would each keep most of them.
                raise self._error(
                    f"{e.file}: {paths[k]} is on line {earlier} too: an exclusion list names each data file "
                    "once, with all the samples it leaves out on that line (merge the two lines' ids and "
                    "counts)",
                    e.line,
                )
            size = int(starts[k + 1] - starts[k])
            if _has_excluded_field(self.type) and e.included + e.excluded != size:
                # These lines give the file's size (included + excluded), inclusion lines too: a list
                # made for another file of that name, or before the file was converted again, would
                # read other samples (by index) without a word.
                raise self._error(
                    f"{e.file}: {e.included} included + {e.excluded} excluded samples, but the data file "
                    f"{paths[k]} holds {count(size, 'sample')}: the list was made for another file or an "
                    "earlier conversion of this one (make the list again for this file)",
                    e.line,
                )
            # ids read from text are parsed already; lists built in memory (to_sample_list) hold strings
            ids = (parse_id(i) if isinstance(i, str) else i for i in e.ids)
            ids = list(ids)
            local = np.asarray([lookup(k, i, e) for i in ids], np.int64)
            if self.exclusion:
                # An inclusion list's repeats are found over the whole list (_unique); an exclusion
                # line's would shrink its complement below the line's counts without a word.
                values, counts = np.unique(local, return_counts=True)
                if (counts > 1).any():
                    j = int(values[counts > 1][0])
                    said = [ids[p] for p in np.flatnonzero(local == j)]
                    raise self._error(
                        f"{e.file}: sample {j} excluded {len(said)} times (as {', '.join(map(repr, said))})",
                        e.line,
                    )
                local = _complement(size, local)
            out.append(int(starts[k]) + local)
            lines.append(e.line)
        return self._unique(out, lines)

    def _unique(self, parts, lines) -> np.ndarray:
        """The concatenated indices; a sample listed twice (on two lines) is an error naming both.

        ``lines``: each part's line, or a function giving each index's line (called for the error only).
        """
        g = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        vals, counts = np.unique(g, return_counts=True)
        if (counts > 1).any():
            dup = int(vals[counts > 1][0])
            if callable(lines):
                line_of = np.asarray([x or 0 for x in lines()])
            else:
                line_of = np.repeat(np.asarray([x or 0 for x in lines]), [len(p) for p in parts])
            where = sorted({int(x) for x in line_of[g == dup]})
            raise self._error(
                f"global sample {dup} is listed more than once (lines {where})", where[-1] or None
            )
        return g

    def _find(self, matcher, path: str, e: FileEntry) -> int | None:
        """The data file ``path`` names, or None; a path that fits several is an error naming the line."""
        try:
            return matcher.find(path)
        except LookupError as err:
            raise self._error(str(err), e.line) from None

    def _split_single(self, e: FileEntry, matcher) -> tuple[int, str]:
        full = _norm(self._join(e.file))
        parts = full.split("/")
        # The id is the tail after the data file; it never reaches into the base.
        for cut in range(len(parts) - 1, max(len(parts) - len(e.file.split("/")), 1) - 1, -1):
            k = self._find(matcher, "/".join(parts[:cut]), e)
            if k is not None:
                return k, "/".join(parts[cut:])
        raise self._error(
            f"{e.file!r}: no data file found in {full!r} (expected FILE.bzna/ID under the base; "
            f"data files: {_few(matcher.paths)})",
            e.line,
        )

    # ---------------------------------------------------------------- writing

    @classmethod
    def from_indices(
        cls,
        paths,
        starts,
        indices,
        *,
        kind: str = "CONDUIT_HDF5_INCLUSION",
        ids: str = "indices",
        filenames_of=None,
        base: str | None = None,
    ) -> SampleList:
        """The list of the samples ``indices`` (global, over ``paths``) of these files.

        Args:
          kind: the list type (default ``CONDUIT_HDF5_INCLUSION``).
          ids: ``"indices"`` or ``"names"`` (each sample's stored filename;
            refused where a name could not be read back: missing, all digits,
            with spaces, or not unique in its file).
          filenames_of: ``k -> file k's filenames``, needed for ids="names".
          base: the base directory written on line 3; default: the files'
            common directory. A relative one is taken from the current
            directory and written absolute: a reader takes a relative line 3
            from the list file's folder, which may be another.
        """
        if kind not in LIST_TYPES:
            raise ValueError(f"Expected the list type to be one of {list(LIST_TYPES)}. Received: {kind!r}")
        if ids not in ("indices", "names"):
            raise ValueError(f"Expected `ids` to be 'indices' or 'names'. Received: ids={ids!r}")
        indices = np.asarray(indices, np.int64)
        starts = np.asarray(starts, np.int64)
        values, counts = np.unique(indices, return_counts=True)
        if (counts > 1).any():
            # A list names each sample once (a reader refuses repeats); an exclusion list cannot say them.
            j = int(np.argmax(counts))
            raise ValueError(
                f"a sample list names each sample once, and these samples repeat "
                f"{count(int((counts > 1).sum()), 'sample')} (global sample {int(values[j])} "
                f"{int(counts[j])} times: oversampling). Write the list of the samples once each "
                "(ds.select(np.unique(positions))) and repeat them when selecting"
            )
        if base is None:
            base = _common_dir(paths)
        elif not is_url(base):
            # "--base ." means this directory: written as it is, a reader would take it from the list's
            # folder and read another file of the same name (or none).
            base = os.path.abspath(os.path.expanduser(os.fspath(base)))
        rel = [_relative(p, base) for p in paths]
        file_of = file_numbers(starts, indices)

        names_of = {}  # file number -> (its names, how often each occurs): read once per file, not per id

        def names(k):
            if k not in names_of:
                stored = filenames_of(k) if filenames_of is not None else None
                if stored is None:
                    raise ValueError(f"{paths[k]} stores no filenames: write ids='indices'")
                names_of[k] = (stored, Counter(stored))
            return names_of[k]

        def id_strings(k, local):
            if ids == "indices":
                return [str(int(j)) for j in local]
            stored, counts = names(k)
            out = []
            for j in local:
                name = stored[int(j)]
                if (
                    not name
                    or _DIGITS.fullmatch(name)
                    or name == RANGE
                    or len(name.split()) != 1
                    or counts[name] != 1
                ):
                    raise ValueError(
                        f"{paths[k]}: sample {int(j)}'s filename {name!r} cannot serve as an id "
                        "(empty, all digits, with spaces or not unique): write ids='indices'"
                    )
                out.append(name)
            return out

        entries = []
        if kind == SINGLE:
            for k, g in zip(file_of.tolist(), indices.tolist(), strict=True):
                (ident,) = id_strings(k, [g - starts[k]])
                entries.append(FileEntry(f"{rel[k]}/{ident}", 1, 0, (ident,)))
            return cls(kind, base, entries, NO_LABEL_FILE)
        order = []
        per_file = defaultdict(list)
        for k, g in zip(file_of.tolist(), indices.tolist(), strict=True):
            if k not in per_file:
                order.append(k)
            per_file[k].append(g - int(starts[k]))
        for k in order:
            size = int(starts[k + 1] - starts[k])
            used = per_file[k]
            if _is_exclusion(kind):
                listed = id_strings(k, _complement(size, used))
            else:
                listed = id_strings(k, used)
            excluded = size - len(used)
            entries.append(
                FileEntry(rel[k], len(used), excluded if _has_excluded_field(kind) else 0, tuple(listed))
            )
        return cls(kind, base, entries, NO_LABEL_FILE if kind in _LABEL_LINE else None)

    def to_text(self, *, ranges: bool = True) -> str:
        """The list as text; ``ranges`` writes runs of >= 3 consecutive indices as ``a ... b``
        in inclusion lines (LBANN's form)."""
        kind = self.type
        lines = [kind]
        if kind == SINGLE:
            lines.append(str(len(self.entries)))
        elif _has_excluded_field(kind):
            lines.append(f"{self.num_included} {self.num_excluded} {len(self.entries)}")
        else:
            lines.append(f"{self.num_included} {len(self.entries)}")
        lines.append(self.base)
        if kind in _LABEL_LINE:
            lines.append(self.label_file or NO_LABEL_FILE)
        for e in self.entries:
            if any(c.isspace() for c in e.file):
                raise ValueError(
                    f"a sample list cannot name {e.file!r} (from the base {self.base}): list lines are split "
                    "at spaces, so no reader could read it back. Rename the file (where only a folder's name "
                    "holds the space, a base beneath that folder does too: --base, base=)"
                )
            if kind == SINGLE:
                lines.append(e.file)
                continue
            head = [e.file, str(e.included)] + ([str(e.excluded)] if _has_excluded_field(kind) else [])
            tokens = [str(i) for i in e.ids]
            if ranges and not self.exclusion:
                tokens = _with_ranges(tokens)
            lines.append(" ".join(head + tokens))
        return "\n".join(lines) + "\n"

    def write(self, path, *, ranges: bool = True) -> str:
        """Writes the list (atomically: a temporary file renamed into place). Returns the path.

        Raises:
          ValueError: ``path`` holds a file that is not a sample list (a data file named as the list,
            by a shell pattern left unquoted?), or a file name the list cannot hold.
        """
        _refuse_to_write_over_data(path)
        self.path = write_atomic(path, self.to_text(ranges=ranges).encode("utf-8"))
        self._anchor_at(self.path)
        return self.path


# -------------------------------------------------------------------------------- helpers


def _list_type(first_line: str) -> str | None:
    """The list type line 1 names (its first word, in any case: one of ``LIST_TYPES``), or None."""
    words = first_line.split()
    kind = words[0].upper() if words else None
    return kind if kind in LIST_TYPES else None


def _refuse_to_write_over_data(path) -> None:
    """Refuses to write a list at ``path`` where a file other than a sample list (or an empty one) is."""
    path = os.fspath(path)
    head = None if is_url(path) else read_head(path)  # None: no file (or one writing will say why)
    if not head:
        return
    if _list_type(head.decode("latin-1").splitlines()[0]) is not None:  # a list, as the parser reads one
        return
    what = "a .bzna file" if not_bzna_reason(head) is None else sniff(head) or "a file of another kind"
    raise ValueError(
        f"{path} is {what}, not a sample list: refusing to write a list over it (a data file named as the "
        "list, by a shell pattern left unquoted?). Give the list a name of its own"
    )


def _count_ids(tokens, number, error) -> int:
    """How many ids ``tokens`` hold with ranges expanded, checking the ranges, without expanding."""
    n = 0
    prev = None  # the previous id, when it is an index
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t == RANGE:
            if prev is None or i + 1 >= len(tokens) or not _DIGITS.fullmatch(tokens[i + 1]):
                raise error("'...' must stand between two indices (a ... b)", number)
            a, b = prev, int(tokens[i + 1])
            if b < a:
                raise error(f"the range {a} ... {b} runs backwards", number)
            n += b - a
            prev = b
            i += 2
            continue
        prev = int(t) if _DIGITS.fullmatch(t) else None
        n += 1
        i += 1
    return n


def _expand(tokens, number, error) -> list:
    """Ids with ``a ... b`` ranges expanded (indices only)."""
    out = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t == RANGE:
            if (
                not out
                or i + 1 >= len(tokens)
                or not isinstance(out[-1], int)
                or not _DIGITS.fullmatch(tokens[i + 1])
            ):
                raise error("'...' must stand between two indices (a ... b)", number)
            a, b = out[-1], int(tokens[i + 1])
            if b < a:
                raise error(f"the range {a} ... {b} runs backwards", number)
            out.extend(range(a + 1, b + 1))
            i += 2
            continue
        out.append(parse_id(t))
        i += 1
    return out


def _complement(size: int, local) -> np.ndarray:
    """The indices 0 .. size - 1 not in ``local``, in order."""
    keep = np.ones(size, bool)
    keep[np.asarray(local, np.int64)] = False
    return np.flatnonzero(keep)


def _with_ranges(tokens: list[str]) -> list[str]:
    out = []
    i = 0
    while i < len(tokens):
        j = i
        if _DIGITS.fullmatch(tokens[i]):
            while (
                j + 1 < len(tokens)
                and _DIGITS.fullmatch(tokens[j + 1])
                and int(tokens[j + 1]) == int(tokens[j]) + 1
            ):
                j += 1
        if j - i >= 2:
            out += [tokens[i], RANGE, tokens[j]]
        else:
            out += tokens[i : j + 1]
        i = j + 1
    return out


def _norm(p: str) -> str:
    p = os.fspath(p)
    if is_url(p):
        scheme, rest = p.split("://", 1)
        return f"{scheme}://{posixpath.normpath(rest)}"
    return os.path.normpath(os.path.abspath(p)).replace(os.sep, "/")


def _isfile(p: str) -> bool:
    if is_url(p):
        import tensorflow as tf

        return tf.io.gfile.exists(p) and not tf.io.gfile.isdir(p)
    return os.path.isfile(p)


def _few(paths) -> str:
    paths = list(paths)
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _common_dir(paths) -> str:
    if all(is_url(p) for p in paths):
        dirs = [p.rsplit("/", 1)[0] for p in paths]
        common = os.path.commonprefix(dirs)
        return (
            common
            if all(d == common or d.startswith(common + "/") for d in dirs)
            else common.rsplit("/", 1)[0]
        )
    return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])


def _relative(p: str, base: str) -> str:
    if is_url(p) or is_url(base):
        prefix = base.rstrip("/") + "/"
        if not p.startswith(prefix):
            raise ValueError(f"{p} is not under the base {base}")
        return p[len(prefix) :]
    rel = os.path.relpath(os.path.abspath(p), os.path.abspath(base))
    if rel.startswith(".."):
        raise ValueError(f"{p} is not under the base {base}")
    return rel.replace(os.sep, "/")


class _FileMatcher:
    """Finds a list's file among the data files: by full path (or the same
    file by another path), or, for a list written elsewhere, by the longest
    common tail of path components (at least the file name), when that is
    unique. A path that is a file here matches by its tail only a copy of it
    (same size and index: a staged copy), never another file of that name.
    Two of the list's files never match one data file."""

    def __init__(self, paths):
        self.paths = list(paths)
        self.norm = [_norm(p) for p in self.paths]
        self.exact = {n: k for k, n in enumerate(self.norm)}
        self.by_name = defaultdict(list)
        for k, n in enumerate(self.norm):
            self.by_name[n.rsplit("/", 1)[-1]].append(k)
        self.claimed: dict[int, str] = {}  # data file -> the list's path that matched it
        self._identities = None  # (st_dev, st_ino) -> data file, made on first need
        self._matched: dict[str, int | None | LookupError] = {}  # each path once: a list names a file often

    def find(self, full: str) -> int | None:
        """The data file's number, or None; LookupError when several fit equally well, or when
        another of the list's files matched it already."""
        k = self._match(full)
        if k is not None:
            n = _norm(full)
            other = self.claimed.setdefault(k, n)
            if other != n and not _same_file(other, n):  # two spellings of one file are one file
                raise LookupError(
                    f"{full} and {other} both fit the data file {self.paths[k]}: the list names two "
                    "files, and the dataset holds one of them (open the dataset on every file the "
                    "list names, or write the list again for these files)"
                )
        return k

    def _match(self, full: str) -> int | None:
        n = _norm(full)
        if n in self.exact:
            return self.exact[n]
        if n not in self._matched:
            try:
                self._matched[n] = self._match_elsewhere(full, n)
            except LookupError as e:
                self._matched[n] = e
        found = self._matched[n]
        if isinstance(found, LookupError):
            raise found
        return found

    def _match_elsewhere(self, full: str, n: str) -> int | None:
        here = not is_url(n) and os.path.isfile(n)
        if here:
            k = self._by_identity().get(_identity(n))
            if k is not None:  # the same file by another path (a symlink, a bind mount)
                return k
        k = self._by_tail(full, n)
        if k is not None and here and not _same_content(n, self.paths[k]):
            # Another file of that name here (say val/data.bzna for train/data.bzna): its tail fits,
            # but its samples are not these.
            raise LookupError(
                f"{full} is a file here, and not the data file {self.paths[k]} (nor a copy of it), "
                "whose path ends the same: open the dataset on the list's file, or write the list "
                "again for this one"
            )
        return k

    def _by_identity(self) -> dict:
        """(st_dev, st_ino) -> the data file: each local data file stat'ed once."""
        if self._identities is None:
            self._identities = {}
            for k, p in enumerate(self.paths):
                ident = None if is_url(p) else _identity(p)
                if ident is not None:
                    self._identities.setdefault(ident, k)
        return self._identities

    def _by_tail(self, full: str, n: str) -> int | None:
        parts = n.split("/")
        cands = self.by_name.get(parts[-1], [])
        if not cands:
            return None
        scores = [_common_tail(parts, self.norm[k].split("/")) for k in cands]
        best = max(scores)
        winners = [k for k, s in zip(cands, scores, strict=True) if s == best]
        if len(winners) > 1:
            raise LookupError(
                f"{full} fits several data files equally: {_few(self.paths[k] for k in winners)}"
            )
        if best == 1 and winners[0] not in self.claimed:  # the file name alone: say so, once per file
            warnings.warn(
                f"Sample list: {full} is not a file here; it is matched to the data file "
                f"{self.paths[winners[0]]} by its file name alone (their folders differ). Check that "
                "the list was made for this file (a list made for val/data.bzna also fits train/data.bzna)",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        return winners[0]


def _same_file(a: str, b: str) -> bool:
    ident = _identity(a)
    return ident is not None and ident == _identity(b)


def _identity(path: str):
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in a path read from a list
        return None
    return st.st_dev, st.st_ino


_TAIL_BYTES = 1 << 20  # a .bzna file's index (moov) is at its end


def _same_content(a: str, b: str) -> bool:
    """Whether ``b`` (a data file, maybe a URL) is a copy of the local file ``a``: the same size and
    the same last MiB, which holds the index (every sample's offset, size, target and name)."""
    from bzna_tf.format.errors import BznaFormatError
    from bzna_tf.format.reader import Source

    unreadable = (OSError, ValueError, BznaFormatError)
    if is_url(b):  # read through tf.io.gfile, whose errors are TensorFlow's
        import tensorflow as tf

        unreadable += (tf.errors.OpError,)
    other = None
    try:
        with open(a, "rb") as fa:
            other = Source(b)
            size = os.fstat(fa.fileno()).st_size
            if other.size != size:
                return False
            n = min(size, _TAIL_BYTES)
            fa.seek(size - n)
            return fa.read(n) == other.read(size - n, n)
    except unreadable:  # not a copy of it, as far as can be told
        return False
    finally:
        if other is not None:
            other.close()


def _common_tail(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n
