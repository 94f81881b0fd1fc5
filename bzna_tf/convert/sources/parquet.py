"""Images from Parquet files with an image column (the Hugging Face ``datasets`` layout), by row group.

A Hugging Face image dataset's Parquet files (``data/train-00000-of-00004.parquet``)
hold an ``image`` column of ``{"bytes": ..., "path": ...}`` structs (the
``datasets.Image`` feature) and an integer ``label`` column, and carry the
dataset's features in the schema's ``huggingface`` metadata, with the class
names of a ``ClassLabel``. Plain Parquet files with a bytes column and an
integer column work too.

Files are read one row group at a time (only the image and label columns), so
memory is bounded by the row group's size, never by the file's. pyarrow is an
optional dependency (``pip install 'bzna-tf[parquet]'``); it is imported when a
source is made.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import os

import numpy as np

from bzna_tf.convert.sources.base import (
    ALLOW_OUTSIDE_PATHS_HINT,
    ALLOW_UNLABELLED_HINT,
    Item,
    LabelledSource,
    SourceError,
    allow_outside_paths_fact,
    allow_unlabelled_fact,
    expand_patterns,
    few,
    file_facts,
    inside,
    safe_basename,
)

__all__ = ["ParquetSource", "TableColumns", "pyarrow_or_error"]

AUTO = "auto"
# Row groups kept decoded: the one being read and the one before (a shuffled order comes back to it).
_CACHED_GROUPS = 2
# Parquet files kept open at once (a shuffled order visits every file).
_OPEN_FILES = 16


def pyarrow_or_error(what: str):
    """``pyarrow`` (with ``pyarrow.parquet`` loaded), or a SourceError saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ModuleNotFoundError as e:
        raise SourceError(
            f"{what} need pyarrow, which is not installed: pip install 'bzna-tf[parquet]' ({e})"
        ) from e
    except ImportError as e:  # installed, but refuses this environment
        # pyarrow 26 and later refuse NumPy 1.x, which TensorFlow 2.16 and 2.17 require
        hint = " (with NumPy 1.x, as TensorFlow 2.16 and 2.17 need: pip install 'pyarrow<26')"
        hint = hint if "NumPy" in str(e) else ""
        raise SourceError(f"{what} need pyarrow, which is installed but does not import: {e}{hint}") from e
    return pyarrow


def hf_features(metadata) -> dict:
    """The ``datasets`` features {column: {"_type": ...}} stored in an Arrow schema's metadata, or {}."""
    raw = (metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        return {}
    features = info.get("info", {}).get("features") if isinstance(info, dict) else None
    return features if isinstance(features, dict) else {}


def _is_bytes(t) -> bool:
    import pyarrow as pa

    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_image(t) -> bool:
    """Bytes, or a struct with a bytes field (the ``datasets`` Image feature)."""
    import pyarrow as pa

    if _is_bytes(t):
        return True
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        return "bytes" in names and _is_bytes(t.field("bytes").type)
    return False


def _class_label_names(features, column):
    """The ``ClassLabel`` names ``features`` give ``column``, or None."""
    feature = features.get(column) if column else None
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel":
        names = feature.get("names")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return list(names)
    return None


class TableColumns:
    """The image and label columns of an Arrow schema, chosen by name or recognised, and the class names.

    Attributes:
      image: the image column's name.
      image_struct: True for ``{"bytes", "path"}`` structs (``datasets.Image``), False for plain bytes
        (in the first file: other files may store the column either way).
      label: the label column's name, or None (unlabelled).
      no_label: why the images are unlabelled when ``label`` is None (for the summary).
      class_names: the ``ClassLabel`` names of the label column (``datasets`` features) of the first file
        that names them (each later file that names them must agree: :meth:`check`), or None.
      notes: lines for the conversion summary.
    """

    def __init__(self, schema, features, where, image_column=None, label_column=AUTO):
        import pyarrow as pa

        self.notes = []
        types = {f.name: f.type for f in schema}

        def listing():
            return "[" + ", ".join(f"{n!r} ({t})" for n, t in types.items()) + "]"

        is_image = _is_image

        def is_label(t):
            return pa.types.is_integer(t)

        def is_label_or_null(t):
            # A column of nulls only (pyarrow and pandas type it null): every row of this file without a
            # label; another file may hold them (finish() refuses one that is null in every file).
            return pa.types.is_integer(t) or pa.types.is_null(t)

        def named(column, option, fits, unlike):
            """A column the user named: it must exist and be of a type ``fits`` takes."""
            if column not in types:
                raise SourceError(f"{where}: no column {column!r} ({option}); it has {listing()}")
            if not fits(types[column]):
                raise SourceError(
                    f"{where}: column {column!r} is {types[column]}, {unlike}; the columns are {listing()}"
                )
            return column

        if image_column is not None:
            self.image = named(
                image_column,
                "--image-column",
                is_image,
                "not bytes nor a struct with a bytes field (the datasets Image feature)",
            )
        else:
            tagged = [n for n, f in features.items() if isinstance(f, dict) and f.get("_type") == "Image"]
            tagged = [n for n in tagged if n in types and is_image(types[n])]
            candidates = tagged or [n for n, t in types.items() if is_image(t)]
            if len(candidates) != 1:
                what = "no image column" if not candidates else f"several image columns ({few(candidates)})"
                raise SourceError(
                    f"{where}: {what}: the columns are {listing()}; name the column of encoded images "
                    "(bytes, or the datasets Image feature's {bytes, path} struct) with --image-column "
                    "(image_column=)"
                )
            self.image = candidates[0]
        self.image_struct = pa.types.is_struct(types[self.image])
        self.image_type = types[self.image]

        self.class_names = None
        self.no_label = "without a label (--label-column '', label_column=None)"
        if label_column is None or label_column == "":
            self.label = None
        elif label_column != AUTO:
            self.label = named(
                label_column,
                "--label-column",
                is_label_or_null,
                "not integers (a .bzna file stores one integer target per image)",
            )
        else:
            kinds = {n: f.get("_type") for n, f in features.items() if isinstance(f, dict)}
            tagged = [n for n, k in kinds.items() if k == "ClassLabel" and is_label(types.get(n, pa.null()))]
            named_label = [n for n in types if n.lower() in _LABEL_NAMES and n != self.image]
            if not tagged and not any(is_label(types[n]) for n in named_label):
                # A column named label must not be passed over (or another integer column taken in its
                # place) because pandas made it floats (one NaN) or it holds names: that is refused,
                # unless another column of those names is integers.
                odd = [n for n in named_label if not is_label_or_null(types[n])]
                if odd:
                    raise SourceError(_label_not_integers(where, odd[0], types[odd[0]], listing()))
            # One of nulls only counts as integers (every label of this file missing), as in check().
            candidates = tagged or [
                n
                for n, t in types.items()
                if n != self.image and (is_label(t) or (n in named_label and is_label_or_null(t)))
            ]
            if len(candidates) > 1:
                raise SourceError(
                    f"{where}: several integer columns could be the label ({few(candidates)}); the columns "
                    f"are {listing()}: name it with --label-column (label_column=), or '' for no label"
                )
            self.label = candidates[0] if candidates else None
            if self.label is None:
                self.notes.append(f"no integer column to take as the label: stored unlabelled ({listing()})")
                self.no_label = "without a label: no integer column to take as the label"
        self.label_type = types[self.label] if self.label is not None else None
        self.class_names = _class_label_names(features, self.label)
        self._names_from = where  # the file class_names come from (check() takes a later one's, when None)
        # Whether some file's label column is integers (not nulls only), and the first file's facts for
        # finish()'s refusal.
        self._label_values = self.label is not None and not pa.types.is_null(self.label_type)
        self._first, self._listing, self._files = where, listing(), 1

    def columns(self):
        return [self.image] + ([self.label] if self.label else [])

    def check(self, schema, features, where):
        """Raises SourceError unless another file (``schema``, its ``features``) is read as the first one.

        It must have the image and label columns, the image column of the same
        kind (bytes, or the {bytes, path} struct), the label column of integers,
        and, where its features give the label column ``ClassLabel`` names, the
        names of the first file that gives them (taken from this one when it is
        that file): a label's meaning must not change from file to file. A file
        whose features name no classes is taken as it is.
        """
        import pyarrow as pa

        first = {f.name: f.type for f in schema}
        for name in self.columns():
            if name not in first:
                raise SourceError(
                    f"{where}: no column {name!r}, which the first file has; every file must have the same "
                    f"columns (this one has {few(list(first))})"
                )
        image = first[self.image]
        if not _is_image(image):  # bytes or the {bytes, path} struct, in any file (RowGroups.rows)
            raise SourceError(
                f"{where}: column {self.image!r} is {image}, where the first file's is {self.image_type}: "
                "not bytes nor a struct with a bytes field (the datasets Image feature)"
            )
        label = first.get(self.label)
        self._files += 1
        self._label_values = self._label_values or (self.label is not None and pa.types.is_integer(label))
        # A column of nulls only (pyarrow and pandas type it null): every row of this file without a label.
        if self.label is not None and not (pa.types.is_integer(label) or pa.types.is_null(label)):
            raise SourceError(
                f"{where}: column {self.label!r} is {first[self.label]}, not integers as in the first file "
                f"({self.label_type}): a .bzna file stores one integer target per image, and a label is "
                "never rounded"
            )
        names = _class_label_names(features, self.label)
        if names is not None and self.class_names is None:  # the first file that names the classes
            self.class_names, self._names_from = names, where
        elif names is not None and names != self.class_names:
            pairs = itertools.zip_longest(names, self.class_names)
            differ = next(i for i, (a, b) in enumerate(pairs) if a != b)
            those = "the first file's" if self._names_from == self._first else f"those of {self._names_from}"
            raise SourceError(
                f"{where}: the class names of the label column {self.label!r} differ from {those} (label "
                f"{differ}: {_nth(names, differ)} here, {_nth(self.class_names, differ)} there): the same "
                "label would mean two classes. Convert the files separately, or rewrite their labels to one "
                "list of names"
            )

    def finish(self):
        """Raises SourceError when the label column is nulls only in every file (after :meth:`check` of
        each file but the first): it holds no label at all, which is no label column."""
        if self.label is not None and not self._label_values:
            raise SourceError(
                _label_not_integers(self._first, self.label, self.label_type, self._listing, self._files)
            )


# Column names taken to hold the labels (compared lower-cased): such a column that is not integers is refused.
_LABEL_NAMES = frozenset(("label", "labels"))


def _label_not_integers(where, column, t, listing, files=1):
    """The refusal of a label column that is not integers, with how to go on (``files``: how many files
    hold it as ``t``, for a column of nulls)."""
    import pyarrow as pa

    if pa.types.is_floating(t):
        hint = (
            "If its values are whole numbers with NaN for missing labels (pandas stores an integer column "
            f"with a missing value as floats), write it as integers: df[{column!r}] = "
            f"df[{column!r}].astype('Int64') keeps the missing ones as nulls, missing labels (see "
            "--allow-unlabelled). "
        )
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        hint = (
            "If it holds class names, write them as integers, one per class (--class-names FILE names them). "
        )
    elif pa.types.is_null(t):
        hint = "It holds no value at all" + (f", in any of the {files} files" if files > 1 else "") + ". "
    else:
        hint = ""
    return (
        f"{where}: column {column!r} is {t}, not integers: a .bzna file stores one integer target per "
        f"image, and a label is never rounded, nor a class name numbered (the columns are {listing}). "
        f"{hint}Name an integer column with --label-column (label_column=), or store every image unlabelled "
        "with --label-column '' (label_column=None)"
    )


def _negative(labels) -> np.ndarray:
    """True where an Arrow integer column's value is negative (False for nulls)."""
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(pc.less(labels, 0), False), bool)


def _nth(names, i):
    return repr(names[i]) if i < len(names) else f"none ({len(names)} names)"


def _one_array(column):
    """A column as one Arrow array (its chunk, not a copy, when it has one: a memory-mapped one stays so)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


class RowGroups:
    """Rows of an image column and a label column, in units (row groups, record batches) read one at a time.

    ``load(unit)`` gives an Arrow table of the unit's rows with the image (and
    label) columns; :meth:`item` turns a row into an :class:`Item`.

    A row whose image is only a ``path`` (null bytes) names a file of this
    machine: it is read only when its real path (links resolved) is inside
    ``roots``, the dataset's folders (None: the folder of the row's own file),
    unless ``allow_outside_paths``; else the row is a bad record naming the path.
    """

    def __init__(self, columns: TableColumns, unit_rows, allow_unlabelled=False, roots=None,
                 allow_outside_paths=False):  # fmt: skip
        self.columns = columns
        self.allow_unlabelled = allow_unlabelled
        self.roots = None if roots is None else [os.path.realpath(r) for r in roots]
        self.allow_outside_paths = allow_outside_paths
        self.starts = np.cumsum([0, *unit_rows]).tolist()
        self._cache = collections.OrderedDict()

    def locate(self, index):
        total = self.starts[-1]
        if not 0 <= index < total:
            raise IndexError(f"row {index} out of range: the files hold {total}")
        u = bisect.bisect_right(self.starts, index) - 1
        return u, index - self.starts[u]

    def rows(self, u, load):
        """(images, paths, labels) of unit ``u`` as Arrow arrays, from a small cache of decoded units."""
        import pyarrow as pa

        got = self._cache.get(u)
        if got is None:
            table = load(u)
            image = _one_array(table.column(self.columns.image))
            if pa.types.is_struct(image.type):  # per unit: files may differ (TableColumns.check)
                names = [image.type.field(i).name for i in range(image.type.num_fields)]
                data = image.field("bytes")
                paths = image.field("path") if "path" in names else None
                valid = image.is_valid()
            else:
                data, paths, valid = image, None, None
            labels = _one_array(table.column(self.columns.label)) if self.columns.label else None
            got = self._cache[u] = (data, paths, valid, labels)
            while len(self._cache) > _CACHED_GROUPS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(u)
        return got

    def items(self, indices, load, units, files, unit):
        """The rows at ``indices`` (over all units) as :class:`Item` objects.

        ``units[u]`` is (file number, the unit's number in its file, its first
        row there), ``files`` the file names, ``unit`` what a unit is called in
        messages ("row group", "record batch").
        """
        for i in indices:
            u, r = self.locate(int(i))
            k, number, first = units[u]
            file = files[k]
            row = first + r
            origin = f"{file} row {row} ({unit} {number})"
            name = f"{os.path.basename(file)}-{row:06d}"
            yield self.item(self.rows(u, load), r, origin, name, os.path.dirname(file))

    def _root(self, local, folder):
        """(the dataset folder that holds the file ``local``, None) or (None, why it may not be read).

        (None, None) with ``allow_outside_paths``: the file is read wherever it is.
        """
        if self.allow_outside_paths:
            return None, None
        # A hostile dataset must not pull this machine's other files (a private picture, a key saved
        # as .jpg) into a .bzna that is shared later: only the dataset's own files are read.
        roots = self.roots if self.roots is not None else [os.path.realpath(folder)]
        for root in roots:
            if inside(local, root):
                return root, None
        where = f"folder {roots[0]}" if len(roots) == 1 else f"folders ({', '.join(roots)})"
        try:
            real = os.path.realpath(local)
        except ValueError:  # a NUL in the name
            real = None
        to = f" (it resolves to {real})" if real and real != os.path.abspath(local) else ""
        return None, (
            f"is outside the dataset {where}{to}: a dataset's rows may name only its own files; "
            f"{ALLOW_OUTSIDE_PATHS_HINT}"
        )

    def item(self, arrays, r, origin, default_name, folder):
        data, paths, valid, labels = arrays
        target, unlabelled = None, None
        if labels is None:
            unlabelled = self.columns.no_label
        elif labels[r].is_valid:
            target = int(labels[r].as_py())
        elif self.allow_unlabelled:
            unlabelled = f"with a null label (column {self.columns.label!r}, --allow-unlabelled)"
        else:
            return Item(default_name, None, data=b"", origin=origin,
                        error=f"no label: its label is null (column {self.columns.label!r}); "
                        f"{ALLOW_UNLABELLED_HINT}")  # fmt: skip
        path = paths[r].as_py() if paths is not None and (valid is None or valid[r].as_py()) else None
        name = safe_basename(path) if path else default_name
        if (valid is None or valid[r].as_py()) and data[r].is_valid:
            return Item(name, target, data=data[r].as_py(), origin=origin, unlabelled=unlabelled)
        if path:  # datasets' Image feature without embedded bytes: a file of the machine that made it
            local = path if os.path.isabs(path) else os.path.join(folder, path)
            root, outside = self._root(local, folder)
            if outside:
                return Item(name, None, data=b"", origin=origin,
                            error=f"null image bytes, and its path {path!r} {outside}")  # fmt: skip
            if os.path.isfile(local):
                return Item(name, target, path=local, origin=origin, unlabelled=unlabelled, root=root)
            return Item(name, None, data=b"", origin=origin,
                        error=f"null image bytes, and its path {path!r} is not a file here")  # fmt: skip
        return Item(name, None, data=b"", origin=origin, error=f"null image (column {self.columns.image!r})")


class ArrowLabelled(LabelledSource):
    """A source whose labels are an Arrow column read on its own: which rows have one, which are negative.

    Subclasses give ``label_column`` and ``_label_columns()``, that column's arrays in row order.
    """

    def _has_label(self):
        """True where a row's label is not null, from the label column alone."""
        out = [np.asarray(labels.is_valid()) for labels in self._label_columns()]
        return np.concatenate(out).astype(bool) if out else np.zeros(0, bool)

    def negative_labels(self):
        if self.label_column is None:
            return None
        out = [_negative(labels) for labels in self._label_columns()]
        return np.concatenate(out) if out else np.zeros(0, bool)


class ParquetSource(ArrowLabelled):
    """Images from Parquet files: an image column (bytes, or ``datasets``' Image struct) and a label column.

    Rows are converted in file order (files sorted by name within each
    pattern), then row order; each file is read one row group at a time (only
    the image and label columns), so memory stays bounded by the row-group
    size. A shuffled order reads each image's row group when it needs it (two
    are kept decoded): files with large row groups convert faster with
    ``order="source"``, which reads each row group once.

    Args:
      patterns: Parquet files or glob patterns (``"data/train-*.parquet"``), ``~`` expanded.
      image_column: the column of encoded images: bytes, or a struct with a
        ``bytes`` field (and ``path``) as the ``datasets`` Image feature writes
        it. None: recognised (the ``datasets`` Image column, else the one bytes
        column); several candidates are refused, listing them.
      label_column: the integer label column; ``"auto"`` (default): the
        ``datasets`` ClassLabel column, else the one integer column (none:
        unlabelled; several: refused, listing them); None: unlabelled. A row
        whose label is null is a bad record unless ``allow_unlabelled``.
      class_names: the class names by target; default: the ClassLabel names
        stored in the schema's ``huggingface`` metadata, if any.
      allow_unlabelled: store a row whose label is null as an unlabelled image.
        By default such a row is a bad record: the conversion stops, naming
        its file and row, or skips it with ``on_error="skip"``.
      allow_outside_paths: read the file that a row's image ``path`` names
        (when its bytes are null) wherever it is. By default only a file
        inside the folder of the Parquet file that names it is read (a
        relative path is taken from that folder; links are resolved first),
        so that a dataset cannot pull other files of this machine into the
        output; a row naming any other file is a bad record.

    Each sample's stored name is the base name of the struct's ``path`` when
    there is one, else ``FILE-ROW`` (the file's base name and the row's number
    in it). A row whose image is null (or whose ``path`` names no local file,
    or one outside the dataset's folder, when its bytes are null) is a bad
    record: see ``convert``'s ``on_error``.

    Raises:
      SourceError: no file matches, pyarrow is missing, a file is not Parquet,
        or the columns cannot be chosen (the message lists them).
    """

    kind = "parquet"
    cli_help = "Parquet files or glob patterns (an image bytes column; Hugging Face's data/*.parquet)"
    cli_options = ("image_column", "label_column", "allow_unlabelled", "allow_outside_paths")

    def __init__(
        self,
        patterns,
        *,
        image_column=None,
        label_column=AUTO,
        class_names=None,
        allow_unlabelled=False,
        allow_outside_paths=False,
    ):
        pyarrow_or_error("Parquet sources")
        import pyarrow.parquet as pq

        self.paths = expand_patterns(patterns, "Parquet file")
        unit_rows, self._units = [], []
        columns = None
        for k, path in enumerate(self.paths):
            try:
                meta = pq.read_metadata(path)
                schema = pq.read_schema(path)
            except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
                raise SourceError(f"{path}: not a readable Parquet file: {e}") from e
            if columns is None:
                columns = TableColumns(schema, hf_features(schema.metadata), path, image_column, label_column)
            else:
                columns.check(schema, hf_features(schema.metadata), path)
            first = 0  # the row group's first row in its file
            for g in range(meta.num_row_groups):
                self._units.append((k, g, first))
                unit_rows.append(meta.row_group(g).num_rows)
                first += unit_rows[-1]
        columns.finish()
        self.image_column, self.label_column = columns.image, columns.label
        self.allow_unlabelled = bool(allow_unlabelled)
        self.allow_outside_paths = bool(allow_outside_paths)
        self.class_names = list(class_names) if class_names is not None else columns.class_names
        self.num_classes = len(columns.class_names) if columns.class_names else None
        self.notes = tuple(columns.notes)
        self._columns, self._unit_rows = columns, unit_rows
        self._rows = None
        self._files = None

    def __getstate__(self):
        # Open files and decoded row groups stay in their process.
        return {**self.__dict__, "_rows": None, "_files": None}

    def _groups(self):
        if self._rows is None:
            self._rows = RowGroups(self._columns, self._unit_rows, self.allow_unlabelled,
                                   allow_outside_paths=self.allow_outside_paths)  # fmt: skip
            self._files = collections.OrderedDict()
        return self._rows

    def _load(self, u):
        import pyarrow.parquet as pq

        k, g, _ = self._units[u]
        f = self._files.get(k)
        if f is None:
            if len(self._files) >= _OPEN_FILES:
                self._files.popitem(last=False)[1].close()
            f = self._files[k] = pq.ParquetFile(self.paths[k])
        else:
            self._files.move_to_end(k)
        try:
            # One thread: a row group is a few MB, and pyarrow's thread pool costs more CPU than it saves.
            return f.read_row_group(g, columns=self._columns.columns(), use_threads=False)
        except (OSError, ValueError) as e:
            raise SourceError(f"{self.paths[k]} row group {g}: cannot be read: {e}") from e

    def __len__(self):
        return sum(self._unit_rows)

    def _reads_labels(self):
        return self.label_column is not None

    def _label_columns(self):
        """Each file's label column (the column alone: ParquetFile, without pyarrow.dataset's machinery)."""
        import pyarrow.parquet as pq

        for path in self.paths:
            with pq.ParquetFile(path) as f:
                yield f.read(columns=[self.label_column], use_threads=False).column(0)

    def _describe(self):
        return {
            "files": [file_facts(p) for p in self.paths],
            "image_column": self.image_column,
            "label_column": self.label_column,
            **allow_unlabelled_fact(self.allow_unlabelled),
            **allow_outside_paths_fact(self.allow_outside_paths),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The rows at ``indices``, each from its row group (decoded once for consecutive rows)."""
        yield from self._groups().items(indices, self._load, self._units, self.paths, "row group")

    @classmethod
    def from_cli(cls, paths, *, image_column=None, label_column=None, allow_unlabelled=False,
                 allow_outside_paths=False):  # fmt: skip
        return cls(paths, image_column=image_column,
                   label_column=AUTO if label_column is None else (label_column or None),
                   allow_unlabelled=allow_unlabelled, allow_outside_paths=allow_outside_paths)  # fmt: skip
