"""A prepared TFDS dataset folder (``~/tensorflow_datasets/NAME/VERSION/``) and one of its splits.

``tfds.builder(NAME).download_and_prepare()`` writes, in ``NAME/VERSION/``:
``dataset_info.json`` (the splits, each with its shard lengths and file name
template), ``features.json`` (the feature types), ``LABEL.labels.txt`` (a
ClassLabel's names) and the records, ``NAME-SPLIT.tfrecord-00000-of-00004``
... These are read with the TFRecord source; the folder says which files make
the split, which features are the image and the label, and the class names,
and the shard lengths it records are checked against the files.
"""

from __future__ import annotations

import json
import os

from bzna_tf.convert.sources.base import SourceError, few, read_class_names
from bzna_tf.convert.sources.tfrecords import AUTO, TFRecordSource

__all__ = ["TFDSSource"]

INFO = "dataset_info.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"


def _own_file(folder, name, what):
    """``folder/name`` for a name that ``dataset_info.json`` gives; SourceError if it leads out of ``folder``.

    A prepared folder's files are in it: a template or key with ``..`` or an
    absolute path must not make a hostile dataset_info.json read other files.
    (Names are compared as written: a link the user put in the folder is followed.)
    """
    path = os.path.join(folder, name)
    top = os.path.abspath(folder)
    if os.path.commonpath([os.path.abspath(path), top]) != top:
        raise SourceError(f"{what}, {name!r}, lead out of the dataset folder {folder}: its files are in it")
    return path


def _find_folder(folder):
    """The folder with dataset_info.json: ``folder`` itself, or its one version sub-folder."""
    if os.path.isfile(os.path.join(folder, INFO)):
        return folder
    if not os.path.isdir(folder):
        raise SourceError(f"{folder}: not a folder")
    versions = sorted(
        e.name for e in os.scandir(folder) if e.is_dir() and os.path.isfile(os.path.join(e.path, INFO))
    )
    if len(versions) == 1:
        return os.path.join(folder, versions[0])
    if not versions:
        raise SourceError(
            f"{folder}: no {INFO} in it or in its sub-folders: expected a prepared TFDS dataset folder, "
            "~/tensorflow_datasets/NAME/VERSION (tfds.builder(NAME).download_and_prepare() writes it)"
        )
    raise SourceError(
        f"{folder}: several prepared versions ({', '.join(versions)}): name one, e.g. "
        f"{os.path.join(folder, versions[-1])}"
    )


def _features(folder):
    """{feature key: TFDS class name} of the top-level features in features.json, or {}."""
    path = os.path.join(folder, "features.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        features = spec["featuresDict"]["features"]
        return {k: str(v.get("pythonClassName", "")) for k, v in features.items() if isinstance(v, dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _supervised_keys(info):
    """(image key, label key) from dataset_info.json's supervisedKeys, or (None, None)."""
    keys = info.get("supervisedKeys")
    if not isinstance(keys, dict):
        return None, None
    if "input" in keys and "output" in keys:  # older TFDS
        return keys["input"], keys["output"]
    items = keys.get("tuple", {}).get("items", []) if isinstance(keys.get("tuple"), dict) else []
    names = [i.get("featureKey") for i in items if isinstance(i, dict)]
    if len(names) == 2 and all(isinstance(n, str) for n in names):
        return names[0], names[1]
    return None, None


class TFDSSource(TFRecordSource):
    """One split of a prepared TFDS dataset folder, read from its TFRecord files.

    The image and label features are ``dataset_info.json``'s supervised keys
    when it has them, else ``features.json``'s one Image and one ClassLabel
    feature, else TFDS's usual ``image`` and ``label``; the class names are the
    label's ``LABEL.labels.txt``. Records are read in the split's shard order
    (TFDS shuffled them when it wrote them).

    Args:
      folder: ``~/tensorflow_datasets/NAME/VERSION`` (or ``NAME`` with one version in it).
      split: the split's name ("train", "test", ...), whole (no ``[:10%]`` slices).
      image_key, label_key: the image and label features, when the folder's are not wanted
        (``label_key=None``: unlabelled).
      class_names: the class names by target (default: the folder's).
      allow_unlabelled: store a record without its label feature as an unlabelled
        image (by default a bad record: see :class:`TFRecordSource`).

    Raises:
      SourceError: no dataset_info.json, a missing or unknown split (the message lists
        them), a file format other than TFRecord, a missing shard file, or a shard whose
        record count is not the one dataset_info.json records.
    """

    kind = "tfds"
    cli_help = "a prepared TFDS folder (~/tensorflow_datasets/NAME/VERSION) with --split"
    cli_options = ("split", "image_key", "label_key", "allow_unlabelled")

    def __init__(
        self, folder, *, split, image_key=None, label_key=AUTO, class_names=None, allow_unlabelled=False
    ):
        self.folder = _find_folder(os.path.expanduser(os.fspath(folder)))
        info_path = os.path.join(self.folder, INFO)
        try:
            with open(info_path, encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError) as e:
            raise SourceError(f"{info_path}: not readable as JSON: {e}") from e
        splits = {s.get("name"): s for s in info.get("splits", []) if isinstance(s, dict)}
        names = sorted(n for n in splits if isinstance(n, str))
        if split not in splits:
            raise SourceError(
                f"Expected --split (split=) as one of the splits of {self.folder}: {few(names)}. "
                f"Received: split={split!r}"
            )
        self.split = split
        file_format = info.get("fileFormat") or "tfrecord"
        if file_format != "tfrecord":
            raise SourceError(
                f"{info_path}: the records are in {file_format!r} files; only TFRecord folders are read "
                "(prepare the dataset with file_format='tfrecord')"
            )
        lengths = [int(n) for n in splits[split].get("shardLengths", [])]
        if not lengths:
            raise SourceError(f"{info_path}: split {split!r} has no shardLengths")
        template = splits[split].get("filepathTemplate") or DEFAULT_TEMPLATE
        dataset = info.get("name") or os.path.basename(os.path.dirname(self.folder))
        paths = []
        for k in range(len(lengths)):
            name = (
                template.replace("{DATASET}", dataset)
                .replace("{SPLIT}", split)
                .replace("{FILEFORMAT}", file_format)
                .replace("{SHARD_X_OF_Y}", f"{k:05d}-of-{len(lengths):05d}")
                .replace("{SHARD_INDEX}", f"{k:05d}")
            )
            paths.append(_own_file(self.folder, name, f"{info_path}: split {split!r}'s files"))
        missing = [os.path.basename(p) for p in paths if not os.path.isfile(p)]
        if missing:
            raise SourceError(
                f"{self.folder}: {len(missing)} of the {len(paths)} files of split {split!r} "
                f"{'is' if len(missing) == 1 else 'are'} missing ({few(missing)}); the download or "
                "preparation did not finish: prepare the dataset again"
            )
        self.shard_lengths = lengths
        features = _features(self.folder)
        sup_image, sup_label = _supervised_keys(info)
        if image_key is None:
            images = [k for k, cls in features.items() if cls.endswith(".Image")]
            image_key = sup_image or (images[0] if len(images) == 1 else None)
        if label_key == AUTO:
            labels = [k for k, cls in features.items() if cls.endswith(".ClassLabel")]
            label_key = sup_label or (labels[0] if len(labels) == 1 else AUTO)
        names_from = None
        if class_names is None and label_key not in (None, AUTO):
            path = _own_file(self.folder, f"{label_key}.labels.txt", f"{info_path}: the label's names")
            class_names = (read_class_names(path) or None) if os.path.isfile(path) else None
            names_from = path if class_names is not None else None
        super().__init__(
            paths,
            image_key=image_key,
            label_key=label_key,
            class_names=class_names,
            allow_unlabelled=allow_unlabelled,
        )
        self.class_names_from = names_from or self.class_names_from

    def _record_counts(self):
        checked = self._counts is not None
        counts = super()._record_counts()
        if not checked and counts != self.shard_lengths:
            bad = [
                f"{os.path.basename(p)} holds {n}, not {want}"
                for p, n, want in zip(self.paths, counts, self.shard_lengths, strict=True)
                if n != want
            ]
            self._counts = None
            raise SourceError(
                f"{self.folder}: the files of split {self.split!r} do not hold the records "
                f"{INFO} records ({'; '.join(bad[:3])}): a file is damaged or was replaced; prepare the "
                "dataset again"
            )
        return counts

    def _describe(self):
        return {**super()._describe(), "split": self.split}

    @classmethod
    def from_cli(cls, paths, *, split=None, image_key=None, label_key=None, allow_unlabelled=False):
        if len(paths) != 1:
            raise ValueError(f"Expected one TFDS folder. Received: {paths}")
        return cls(paths[0], split=split, image_key=image_key,
                   label_key=AUTO if label_key is None else (label_key or None),
                   allow_unlabelled=allow_unlabelled)  # fmt: skip
