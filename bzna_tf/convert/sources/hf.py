"""A Hugging Face ``datasets`` dataset on this machine: a ``save_to_disk`` folder, or a cached NAME.

``Dataset.save_to_disk(DIR)`` writes ``state.json`` (the data files, in
order), ``dataset_info.json`` (the features: the ``Image`` column, the
``ClassLabel`` names) and Arrow stream files (``data-00000-of-00003.arrow``);
``DatasetDict.save_to_disk(DIR)`` writes one such folder per split and
``dataset_dict.json``. Both are read with pyarrow alone, memory-mapped, one
record batch at a time: the ``datasets`` package is not needed for them.

A NAME (a Hub dataset id already downloaded, or a local dataset folder of
data files that ``datasets.load_dataset`` reads) is opened with
``datasets.load_dataset(NAME, split=...)`` with the Hub offline for that call
(no network access); its Arrow cache files are then read as above. That needs the optional
``datasets`` package: ``pip install 'bzna-tf[hf]'``.
"""

from __future__ import annotations

import collections
import inspect
import json
import os
import re

from bzna_tf.convert.sources.base import (
    ALLOW_OUTSIDE_PATHS_HINT,
    SourceError,
    allow_outside_paths_fact,
    allow_unlabelled_fact,
    few,
    file_facts,
    inside,
    refuse_repeats,
)
from bzna_tf.convert.sources.parquet import (
    AUTO,
    ArrowLabelled,
    RowGroups,
    TableColumns,
    hf_features,
    pyarrow_or_error,
)

__all__ = ["HFSource"]

_OPEN_FILES = 16


def _open_arrow(path):
    """(memory map, record batches) of an Arrow IPC file (stream format, as ``datasets`` writes, or file)."""
    import pyarrow as pa

    source = pa.memory_map(path, "r")
    try:
        try:
            batches = list(pa.ipc.open_stream(source))
        except pa.ArrowInvalid:
            source.seek(0)
            reader = pa.ipc.open_file(source)
            batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except (pa.ArrowInvalid, OSError) as e:
        source.close()
        raise SourceError(f"{path}: not an Arrow file: {e}") from e
    return source, batches


def _no_scripts(datasets) -> dict:
    """``load_dataset``'s arguments that keep it from running a dataset's own Python loading script.

    Such a script is code that came with the data. ``datasets`` 4 and later
    run none; 2.16 to 3.x run one only with ``trust_remote_code=True``, so
    False is passed; older versions run it unasked, so they are refused.
    """
    if "trust_remote_code" in inspect.signature(datasets.load_dataset).parameters:
        return {"trust_remote_code": False}
    major, minor = (int(re.match(r"\d+", v).group()) for v in datasets.__version__.split(".")[:2])
    if (major, minor) < (2, 16):
        raise SourceError(
            f"datasets {datasets.__version__} runs a dataset's loading script without asking, and bzna_tf "
            "runs no code that comes with the data: pip install 'datasets>=2.16' (or pass the folder that "
            "Dataset.save_to_disk wrote, or its Parquet files to bzna-tf convert parquet)"
        )
    return {}


def _load_by_name(name, split, cache_dir):
    """The Arrow cache files, features and folders of ``datasets.load_dataset(name, split=split)``, offline.

    The folders are where the rows' image paths may lead: NAME when it is a
    folder here (``datasets`` records the absolute paths of its image files),
    else the caches ``datasets`` downloads and extracts the Hub's files into.
    """
    try:
        import datasets
    except ImportError as e:
        raise SourceError(
            f"{name!r} is not a folder written by save_to_disk, and reading a dataset by name needs the "
            f"datasets package, which is not installed: pip install 'bzna-tf[hf]' ({e}); or pass the "
            "folder that Dataset.save_to_disk wrote, or its Parquet files to bzna-tf convert parquet"
        ) from e
    if split is None:
        raise SourceError(f"Expected --split (split=) for the dataset {name!r}. Received: split=None")
    # The Hub stays offline for this call only (the flags are read at call time; the process's are restored).
    flags = [(datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE")]
    try:
        import huggingface_hub.constants as hub_constants

        flags.append((hub_constants, "HF_HUB_OFFLINE"))
    except ImportError:
        pass
    saved = [(module, attr, getattr(module, attr)) for module, attr in flags if hasattr(module, attr)]
    try:
        for module, attr, _ in saved:
            setattr(module, attr, True)
        ds = datasets.load_dataset(name, split=split, cache_dir=cache_dir, **_no_scripts(datasets))
    except Exception as e:  # datasets raises many kinds (FileNotFoundError, ConnectionError, ValueError, ...)
        raise SourceError(
            f"{name!r} (split {split!r}) cannot be loaded from this machine without network access: "
            f"{type(e).__name__}: {e}"
        ) from e
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)
    if not isinstance(ds, datasets.Dataset):
        raise SourceError(
            f"{name!r}: expected one split as a datasets.Dataset. Received: {type(ds).__name__}"
        )
    files = [f["filename"] for f in ds.cache_files]
    if not files or getattr(ds, "_indices", None) is not None:
        raise SourceError(
            f"{name!r} (split {split!r}): the dataset is not backed by Arrow cache files in their own order; "
            "save it with Dataset.save_to_disk(DIR) and convert DIR"
        )
    features = {}
    for key, feature in ds.features.items():
        if isinstance(feature, datasets.ClassLabel):
            features[key] = {"_type": "ClassLabel", "names": list(feature.names)}
        elif isinstance(feature, datasets.Image):
            features[key] = {"_type": "Image"}
    if os.path.isdir(name):
        roots = [name]
    else:
        roots = [cache_dir or datasets.config.HF_DATASETS_CACHE, datasets.config.DOWNLOADED_DATASETS_PATH,
                 datasets.config.EXTRACTED_DATASETS_PATH]  # fmt: skip
        try:
            import huggingface_hub.constants as hub_constants

            roots.append(hub_constants.HF_HUB_CACHE)
        except (ImportError, AttributeError):
            pass
    return files, features, [os.path.realpath(r) for r in roots]  # absolute: workers may run elsewhere


def _saved(folder, split, allow_outside_paths=False):
    """The data files and features of a save_to_disk folder (a Dataset, or a DatasetDict's split).

    The data files that ``state.json`` names must be inside ``folder`` once
    links are resolved, unless ``allow_outside_paths``.
    """
    top = folder
    dict_file = os.path.join(folder, "dataset_dict.json")
    if os.path.isfile(dict_file):
        try:
            with open(dict_file, encoding="utf-8") as f:
                splits = json.load(f).get("splits", [])
        except (OSError, ValueError, AttributeError) as e:
            raise SourceError(f"{dict_file}: not readable: {e}") from e
        if split not in splits:
            raise SourceError(
                f"Expected --split (split=) as one of the splits of {folder}: {few(splits)}. "
                f"Received: split={split!r}"
            )
        folder = os.path.join(folder, split)
        split = None  # the sub-folder is the split
    state_file = os.path.join(folder, "state.json")
    try:
        with open(state_file, encoding="utf-8") as f:
            state = json.load(f)
        names = [d["filename"] for d in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SourceError(f"{state_file}: not a datasets save_to_disk state: {e}") from e
    own = state.get("_split")
    if split is not None and own is not None and own != split:
        raise SourceError(f"{folder} holds the split {own!r}. Received: split={split!r}")
    features = {}
    info_file = os.path.join(folder, "dataset_info.json")
    if os.path.isfile(info_file):
        try:
            with open(info_file, encoding="utf-8") as f:
                features = json.load(f).get("features") or {}
        except (OSError, ValueError, AttributeError):
            features = {}
    if not all(isinstance(n, str) for n in names):
        raise SourceError(f"{state_file}: expected file names in _data_files. Received: {few(names)}")
    files = [os.path.join(folder, n) for n in names]
    outside = [n for n, p in zip(names, files, strict=True) if not inside(p, top)]
    if outside and not allow_outside_paths:
        # The data files are read whole: a hostile state.json must not make them any file of this machine.
        raise SourceError(
            f"{state_file}: its _data_files name files outside the dataset folder {os.path.realpath(top)} "
            f"({few(outside)}); a saved dataset's data files are its own; {ALLOW_OUTSIDE_PATHS_HINT}"
        )
    missing = [n for n, p in zip(names, files, strict=True) if not os.path.isfile(p)]
    if missing:
        raise SourceError(
            f"{folder}: {len(missing)} of its {len(files)} data files are missing ({few(missing)})"
        )
    # One file named twice (by two spellings, or two hard links) would give its rows twice.
    refuse_repeats(files, [state_file] * len(files), "data file", "Name each data file once in _data_files")
    return files, features


class HFSource(ArrowLabelled):
    """A Hugging Face ``datasets`` dataset on this machine: a ``save_to_disk`` folder or a cached NAME.

    Rows are converted in the dataset's order (its data files, then their
    record batches), read memory-mapped one record batch at a time. Columns
    and class names are chosen as :class:`ParquetSource` chooses them: the
    ``Image`` feature's column and the ``ClassLabel`` column with its names.

    Args:
      dataset: a folder written by ``Dataset.save_to_disk`` or
        ``DatasetDict.save_to_disk`` (then ``split`` names the split), or a NAME for
        ``datasets.load_dataset(NAME, split=split)`` from the local cache (needs the
        ``datasets`` package; the Hub is not contacted).
      split: the split (a DatasetDict folder, or a NAME).
      image_column, label_column, class_names, allow_unlabelled: as for :class:`ParquetSource`.
      cache_dir: the ``datasets`` cache to look a NAME up in (default: its own).
      allow_outside_paths: read files that the dataset names outside its own
        folder: the data files that a saved folder's ``state.json`` names, and
        the image files that rows name by ``path`` when their bytes are null.
        By default such a file must be inside the dataset's folder once links
        are resolved (a saved folder, or a NAME that is a folder here; for a
        Hub NAME, the caches ``datasets`` downloads into): a ``state.json``
        naming another file is refused, a row naming one is a bad record (see
        ``convert``'s ``on_error``). Saved folders embed their images' bytes
        (``datasets`` does so when it saves); one written by an old
        ``datasets`` may hold the absolute paths of the files it was made
        from, which this option reads when the dataset is trusted.

    Raises:
      SourceError: an unknown or missing split (the message lists them), missing data
        files or ones outside the folder, a NAME without the ``datasets`` package or not
        in the local cache, or columns that cannot be chosen.
    """

    kind = "hf"
    cli_help = "a folder written by datasets' save_to_disk, or a dataset NAME in the local Hugging Face cache"
    cli_options = ("split", "image_column", "label_column", "allow_unlabelled", "allow_outside_paths")

    def __init__(self, dataset, *, split=None, image_column=None, label_column=AUTO, class_names=None,
                 cache_dir=None, allow_unlabelled=False, allow_outside_paths=False):  # fmt: skip
        pyarrow_or_error("Hugging Face datasets")
        path = os.path.expanduser(os.fspath(dataset))
        saved = os.path.isdir(path) and any(
            os.path.isfile(os.path.join(path, n)) for n in ("state.json", "dataset_dict.json")
        )
        self.dataset = path if saved else os.fspath(dataset)
        self.split = split
        self.allow_outside_paths = bool(allow_outside_paths)
        if saved:
            self.files, features = _saved(path, split, self.allow_outside_paths)
            self._roots = [os.path.realpath(path)]
        else:
            self.files, features, self._roots = _load_by_name(self.dataset, split, cache_dir)
        self._units, unit_rows = [], []
        columns = None
        for k, file in enumerate(self.files):
            mm, batches = _open_arrow(file)
            try:
                schema = batches[0].schema if batches else None
                if schema is not None:
                    if columns is None:
                        meta = hf_features(schema.metadata) or features
                        columns = TableColumns(schema, meta, file, image_column, label_column)
                    else:
                        columns.check(schema, hf_features(schema.metadata) or features, file)
                first = 0
                for b, batch in enumerate(batches):
                    self._units.append((k, b, first))
                    unit_rows.append(batch.num_rows)
                    first += batch.num_rows
            finally:
                del batches
                mm.close()
        if columns is None:
            raise SourceError(f"{self.dataset}: the dataset holds no rows")
        columns.finish()
        self.image_column, self.label_column = columns.image, columns.label
        self.allow_unlabelled = bool(allow_unlabelled)
        self.class_names = list(class_names) if class_names is not None else columns.class_names
        self.num_classes = len(columns.class_names) if columns.class_names else None
        self.notes = tuple(columns.notes)
        self._columns, self._unit_rows = columns, unit_rows
        self._rows = self._open = None

    def __getstate__(self):
        return {**self.__dict__, "_rows": None, "_open": None}

    def _groups(self):
        if self._rows is None:
            self._rows = RowGroups(self._columns, self._unit_rows, self.allow_unlabelled, self._roots,
                                   self.allow_outside_paths)  # fmt: skip
            self._open = collections.OrderedDict()
        return self._rows

    def _batches(self, k):
        got = self._open.get(k)
        if got is None:
            if len(self._open) >= _OPEN_FILES:
                self._open.popitem(last=False)[1][0].close()
            got = self._open[k] = _open_arrow(self.files[k])
        else:
            self._open.move_to_end(k)
        return got[1]

    def _load(self, u):
        import pyarrow as pa

        k, b, _ = self._units[u]
        return pa.Table.from_batches([self._batches(k)[b]])

    def __len__(self):
        return sum(self._unit_rows)

    def _reads_labels(self):
        return self.label_column is not None

    def _label_columns(self):
        """The label column of each record batch, in order (as the Parquet source's, per file)."""
        self._groups()
        for k in range(len(self.files)):
            for batch in self._batches(k):
                yield batch.column(self.label_column)

    def _describe(self):
        return {
            "files": [file_facts(p) for p in self.files],
            "split": self.split,
            "image_column": self.image_column,
            "label_column": self.label_column,
            **allow_unlabelled_fact(self.allow_unlabelled),
            **allow_outside_paths_fact(self.allow_outside_paths),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The rows at ``indices``, each from its record batch (memory-mapped)."""
        yield from self._groups().items(indices, self._load, self._units, self.files, "record batch")

    @classmethod
    def from_cli(cls, paths, *, split=None, image_column=None, label_column=None, allow_unlabelled=False,
                 allow_outside_paths=False):  # fmt: skip
        if len(paths) != 1:
            raise ValueError(f"Expected one dataset folder or name. Received: {paths}")
        return cls(paths[0], split=split, image_column=image_column,
                   label_column=AUTO if label_column is None else (label_column or None),
                   allow_unlabelled=allow_unlabelled, allow_outside_paths=allow_outside_paths)  # fmt: skip
