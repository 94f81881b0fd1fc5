"""Images from TFRecord files of ``tf.train.Example`` (the classic ImageNet layout, TFDS's, or named keys)."""

from __future__ import annotations

import bisect
import os

import numpy as np

from bzna_tf.convert.sources.base import (
    ALLOW_UNLABELLED_HINT,
    Item,
    Source,
    SourceError,
    allow_unlabelled_fact,
    expand_patterns,
    file_facts,
    read_class_names,
    safe_basename,
)
from bzna_tf.convert.tfrecord import (
    TFRecordDataError,
    count_records,
    iter_records,
    parse_example,
    read_record,
    record_offsets,
)

__all__ = ["TFRecordSource", "labels_txt"]

# Feature layouts recognised without flags: (image, label, filename, class text).
CLASSIC_KEYS = ("image/encoded", "image/class/label", "image/filename", "image/class/text")
TFDS_KEYS = ("image", "label", "file_name", None)
AUTO = "auto"
# The classic layout's labels may start at 1 (build_imagenet_data.py) or at 0: the choice, in messages.
OFFSET_HINT = (
    "-1 for ImageNet's labels 1..1000 (build_imagenet_data.py keeps 0 for 'background'), which become "
    "targets 0..999; 0 for labels that start at 0"
)
# How many classic records are looked at for a label before the offset is asked for anyway.
OFFSET_SCAN = 1000
# The end of the name of the file of a TFDS ClassLabel's names, after the label's key.
LABELS_TXT = ".labels.txt"


class TFRecordSource(Source):
    """Images from TFRecord files of ``tf.train.Example``.

    Two layouts are recognised from the first record, without any key given:

    - the classic ImageNet TFRecords (TensorFlow models' ``build_imagenet_data.py``):
      ``image/encoded``, ``image/class/label``, ``image/filename`` and the class
      names in ``image/class/text``;
    - TFDS's (``tfds.builder("imagenet2012")`` and most image datasets):
      ``image``, ``label``, ``file_name``, with the class names in the
      ``label.labels.txt`` TFDS writes beside the records (the label key's
      ``LABEL.labels.txt``: ``coarse_label.labels.txt`` with
      ``label_key="coarse_label"``).

    Records are read by their byte offsets (found from the record headers), so
    a shuffled conversion reads each image once, wherever it is. Compressed
    files can only be read from their start: they convert with
    ``order="source"`` only.

    Args:
      patterns: file names or glob patterns (``"imagenet/train-*"``, ``~``
        expanded), read in the order given, each pattern's matches in sorted
        order (``["b", "a"]`` reads b first: another order of the images than
        ``["a", "b"]``, shuffled or not, and another conversion).
      image_key: the bytes feature holding the encoded image; None: recognised
        from the first record (``image/encoded`` or ``image``).
      label_key: the int64 feature holding the label; a record without it (or
        with an empty list) is a bad record unless ``allow_unlabelled``, one
        with several values is an error. ``"auto"``: the recognised layout's
        (none for other layouts: the summary says so); None: every image is
        unlabelled.
      filename_key: the bytes feature holding the file name (default: the
        layout's; without one, the record's position); None for positions.
        Only the name's last part is stored (``a/b.jpg`` -> ``b.jpg``).
      class_text_key: a bytes feature holding each record's class name
        (``"auto"``: ``image/class/text`` in the classic layout), or None.
        The converter stores these names, and refuses records that name one
        class two ways, or otherwise than ``class_names`` (or the names
        file): None leaves the records' names out.
      label_offset: added to every label. The classic ImageNet TFRecords store
        labels 1..1000 with 0 for "background": pass -1 to get Benzina's 0..999 targets.
        None (default): 0, except for records recognised as the classic layout
        with its label key, where it must be given: the same keys hold 1-based
        labels (ImageNet's build_imagenet_data.py) and 0-based ones (other
        tools), and a wrong guess shifts every class by one without a word.
        Records of images alone need none: the first record with a label is
        looked for over the first 1,000 records, whichever record comes first
        (when none of them has one and more follow, it must be given too).
      compression: None, "GZIP" or "ZLIB", as the files were written.
      class_names: the class names, indexed by target (after ``label_offset``);
        default: the label key's ``LABEL.labels.txt`` beside the first file, if
        any (``label.labels.txt`` for TFDS's ``label``; none without a label
        key, or for a key with a ``/`` such as ``image/class/label``).
      allow_unlabelled: store a record without its label feature as an
        unlabelled image. By default such a record is a bad record: the
        conversion stops, naming its file and record, or skips it with
        ``on_error="skip"``.

    Raises:
      SourceError: no file matches, or the first record has no recognised image
        feature (the message lists the features it has and the flag to use).
    """

    kind = "tfrecord"
    cli_help = "TFRecord files or glob patterns (quote them)"
    cli_options = (
        "image_key",
        "label_key",
        "filename_key",
        "class_text_key",
        "label_offset",
        "compression",
        "allow_unlabelled",
    )

    def __init__(
        self,
        patterns,
        *,
        image_key=None,
        label_key=AUTO,
        filename_key=AUTO,
        class_text_key=AUTO,
        label_offset=None,
        compression=None,
        class_names=None,
        allow_unlabelled=False,
    ):
        self.paths = expand_patterns(patterns, "TFRecord file")
        self.allow_unlabelled = bool(allow_unlabelled)
        self.label_offset = 0 if label_offset is None else int(label_offset)
        self.compression = compression
        self.random_access = compression is None
        self.why_sequential = (
            ""
            if compression is None
            else f"{compression}-compressed TFRecord files can only be read from their start"
        )
        self._counts = None
        self._offsets = None
        layout = None
        if image_key is None or AUTO in (label_key, filename_key, class_text_key):
            layout, image_key = self._recognise(image_key)
        self.layout = layout or "custom"
        defaults = {"classic": CLASSIC_KEYS, "tfds": TFDS_KEYS}.get(layout, (None, None, None, None))
        self.image_key = image_key
        self.label_key = defaults[1] if label_key == AUTO else label_key
        self._no_label = "without a label (--label-key '', label_key=None)"
        if self.label_key is None and label_key == AUTO:
            self._no_label = (
                "without a label: the records are in neither the classic ImageNet nor the TFDS layout"
            )
            self.notes = (
                "no label: the records are in neither the classic ImageNet nor the TFDS layout, so no label "
                "feature is known; stored unlabelled (--label-key names it)",
            )
        if label_offset is None and layout == "classic" and self.label_key == CLASSIC_KEYS[1]:
            self._check_offset_given()
        self.filename_key = defaults[2] if filename_key == AUTO else filename_key
        self.class_text_key = defaults[3] if class_text_key == AUTO else class_text_key
        # Where the class names come from, for messages: a names file, or None (given, or none).
        self.class_names_from = None
        if class_names is None and self.label_key:
            class_names = labels_txt(os.path.dirname(os.path.abspath(self.paths[0])), self.label_key)
            if class_names is not None:
                folder = os.path.dirname(self.paths[0])
                self.class_names_from = os.path.join(folder, self.label_key + LABELS_TXT)
            if class_names is not None and self.label_offset:
                # label.labels.txt names the records' labels; class_names are indexed by target.
                off = self.label_offset
                class_names = [None] * off + list(class_names) if off > 0 else list(class_names)[-off:]
        self.class_names = list(class_names) if class_names is not None else None

    def __getstate__(self):
        # Record offsets are 8 bytes a record: each process finds them again rather than ship them.
        return {**self.__dict__, "_offsets": None}

    def _first_features(self):
        for path in self.paths:
            for index, offset, data in iter_records(path, self.compression):
                if isinstance(data, TFRecordDataError):  # corrupted: a bad record, when its turn comes
                    continue
                try:
                    return f"{path} record {index} (byte {offset})", parse_example(data)
                except ValueError as e:
                    raise SourceError(
                        f"{path} record {index} (byte {offset}): not a tf.train.Example: {e}"
                    ) from e
        return None, {}

    def _check_offset_given(self):
        """Refuses classic records with labels when no ``label_offset`` was given (they may start at 1 or 0).

        Records of images alone have no labels to shift: they need none. Which they are is decided from
        the first record that has a label, looked for over the first ``OFFSET_SCAN`` records (whichever
        record comes first: one without a label, skipped as a bad record or stored unlabelled, must not
        let the others through unshifted); past them, the records are taken to have labels further on.
        """
        seen = 0
        for path in self.paths:
            for index, offset, data in iter_records(path, self.compression):
                if seen == OFFSET_SCAN:
                    raise SourceError(
                        f"{self.paths[0]}: classic ImageNet TFRecords whose first {OFFSET_SCAN:,} records "
                        f"have no {CLASSIC_KEYS[1]!r} label: give --label-offset (label_offset=) for the "
                        f"labels of the records after them ({OFFSET_HINT}), or --label-key '' "
                        "(label_key=None) to convert every record unlabelled"
                    )
                seen += 1
                if isinstance(data, TFRecordDataError):
                    continue  # corrupted: a bad record, which the conversion reports
                try:
                    labels = parse_example(data, {CLASSIC_KEYS[1]}).get(CLASSIC_KEYS[1])
                except ValueError:
                    continue  # not an Example: a bad record, which the conversion reports
                if labels:
                    raise SourceError(
                        f"{path} record {index} (byte {offset}): classic ImageNet TFRecords "
                        f"({CLASSIC_KEYS[1]!r} labels): give --label-offset (label_offset=): {OFFSET_HINT}. "
                        "A wrong guess would shift every class by one without a word"
                    )

    def _recognise(self, image_key):
        """(layout, image key) from the first record: "classic", "tfds", or None with the given key."""
        origin, features = self._first_features()
        if origin is None:
            return None, image_key or CLASSIC_KEYS[0]
        for layout, keys in (("classic", CLASSIC_KEYS), ("tfds", TFDS_KEYS)):
            value = features.get(keys[0])
            if (image_key is None or image_key == keys[0]) and value and isinstance(value[0], bytes):
                return layout, keys[0]
        if image_key is not None:
            return None, image_key
        raise SourceError(
            f"{origin}: no image feature: neither {CLASSIC_KEYS[0]!r} (classic ImageNet TFRecords) nor "
            f"{TFDS_KEYS[0]!r} (TFDS). The record has the features {_describe_features(features)}: "
            "name the image's with --image-key (image_key=), and the label's and file name's with "
            "--label-key and --filename-key"
        )

    def _record_offsets(self):
        if self._offsets is None:
            self._offsets = [record_offsets(p) for p in self.paths]
            self._counts = [len(o) for o in self._offsets]
        return self._offsets

    def _record_counts(self):
        if self._counts is None:
            if self.compression is None:
                self._record_offsets()
            else:
                self._counts = [count_records(p, self.compression) for p in self.paths]
        return self._counts

    def __len__(self):
        return sum(self._record_counts())

    def _describe(self):
        return {
            "files": [file_facts(p) for p in self.paths],
            "keys": [self.image_key, self.label_key, self.filename_key, self.class_text_key],
            "label_offset": self.label_offset,
            "compression": self.compression,
            **allow_unlabelled_fact(self.allow_unlabelled),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The records at ``indices``, each read at its offset (compressed files: consecutive ones only)."""
        starts = np.cumsum([0, *self._record_counts()]).tolist()
        total = starts[-1]
        keys = {k for k in (self.image_key, self.label_key, self.filename_key, self.class_text_key) if k}
        if self.compression is not None:
            yield from self._sequential(indices, starts, keys)
            return
        offsets = self._record_offsets()
        handles = {}
        try:
            for i in indices:
                i = int(i)
                if not 0 <= i < total:
                    raise IndexError(f"record {i} out of range: the files hold {total}")
                k = bisect.bisect_right(starts, i) - 1
                path, local = self.paths[k], i - starts[k]
                f = handles.get(k)
                if f is None:
                    if len(handles) >= 64:  # a shuffled order visits every file: keep a few open
                        handles.pop(next(iter(handles))).close()
                    f = handles[k] = open(path, "rb")  # noqa: SIM115 (closed below)
                offset = int(offsets[k][local])
                try:
                    data = read_record(f, path, local, offset)
                except TFRecordDataError as e:
                    data = e
                yield self._item(path, local, offset, data, keys)
        finally:
            for f in handles.values():
                f.close()

    def _sequential(self, indices, starts, keys):
        indices = [int(i) for i in indices]
        if not indices:
            return
        first = indices[0]
        if indices != list(range(first, first + len(indices))):
            raise SourceError(f"{self.paths[0]}: {self.why_sequential}; convert with order='source'")
        stop = first + len(indices)
        for k, path in enumerate(self.paths):
            if starts[k + 1] <= first or starts[k] >= stop:
                continue
            skip = max(0, first - starts[k])
            for local, offset, data in iter_records(path, self.compression, start=skip):
                if starts[k] + local >= stop:
                    break
                yield self._item(path, local, offset, data, keys)

    def _item(self, path, index, offset, data, keys):
        origin = f"{path} record {index} (byte {offset})"
        name = f"{os.path.basename(path)}-{index:06d}"
        # A record that cannot be read is a bad record (on_error: stop naming it, or skip it).
        if isinstance(data, TFRecordDataError):
            return Item(name, None, data=b"", origin=origin, error=data.reason)
        try:
            features = parse_example(data, keys)
        except ValueError as e:
            return Item(name, None, data=b"", origin=origin, error=f"not a tf.train.Example: {e}")
        images = features.get(self.image_key)
        if not images or not isinstance(images[0], bytes):
            everything = parse_example(data)
            return Item(name, None, data=b"", origin=origin, error=(
                f"no bytes feature {self.image_key!r}; the record has the features "
                f"{_describe_features(everything)}: name the image's with --image-key (image_key=)"
            ))  # fmt: skip
        if len(images) > 1:
            raise SourceError(
                f"{origin}: feature {self.image_key!r} holds {len(images)} images; a .bzna file stores one "
                "picture per sample, and keeping the first would drop the others without a word: name a "
                "single-image feature with --image-key (image_key=), or write one record per image first"
            )
        target, unlabelled = None, None
        labels = features.get(self.label_key) if self.label_key else None
        if not self.label_key:
            unlabelled = self._no_label
        elif not labels:
            if not self.allow_unlabelled:
                has = _describe_features(parse_example(data))
                why = (
                    f"no label: no {self.label_key!r} feature, or an empty one (the record has the features "
                    f"{has}); {ALLOW_UNLABELLED_HINT}; --label-key '' (label_key=None) stores no labels"
                )
                return Item(f"{os.path.basename(path)}-{index:06d}", None, data=b"", origin=origin, error=why)
            unlabelled = f"without the {self.label_key!r} feature (--allow-unlabelled)"
        if labels:
            if not isinstance(labels[0], int):
                raise SourceError(
                    f"{origin}: feature {self.label_key!r} is not an int64 list; the record has the features "
                    f"{_describe_features(parse_example(data))}: name the label's with --label-key "
                    "(label_key=)"
                )
            if len(labels) > 1:
                shown = ", ".join(map(str, labels[:8])) + (", ..." if len(labels) > 8 else "")
                raise SourceError(
                    f"{origin}: feature {self.label_key!r} holds {len(labels)} labels [{shown}]; a .bzna "
                    "file stores one target per image (multi-label data does not fit it): name a "
                    "single-valued label with --label-key (label_key=), or convert without labels with "
                    "--label-key ''"
                )
            target = labels[0] + self.label_offset
        names = features.get(self.filename_key) if self.filename_key else None
        if names and isinstance(names[0], bytes):
            filename = safe_basename(names[0].decode("utf-8", "replace"))
        else:
            filename = f"{os.path.basename(path)}-{index:06d}"
        texts = features.get(self.class_text_key) if self.class_text_key else None
        class_name = texts[0].decode("utf-8", "replace") if texts and isinstance(texts[0], bytes) else None
        return Item(
            filename, target, data=images[0], origin=origin, class_name=class_name, unlabelled=unlabelled
        )

    @classmethod
    def from_cli(cls, paths, *, image_key=None, label_key=None, filename_key=None, class_text_key=None,
                 label_offset=None, compression=None, allow_unlabelled=False):  # fmt: skip
        return cls(
            paths,
            image_key=image_key,
            label_key=AUTO if label_key is None else (label_key or None),
            filename_key=AUTO if filename_key is None else (filename_key or None),
            class_text_key=AUTO if class_text_key is None else (class_text_key or None),
            label_offset=label_offset,
            compression=compression,
            allow_unlabelled=allow_unlabelled,
        )


def _describe_features(features):
    """``{'image': 'bytes', 'label': 'int64'}`` as a short string, for messages."""
    kinds = []
    for key in sorted(features):
        values = features[key]
        kind = "empty" if not values else {bytes: "bytes", int: "int64", float: "float"}[type(values[0])]
        kinds.append(f"{key!r} ({kind})")
    return "[" + ", ".join(kinds) + "]" if kinds else "[] (none)"


def labels_txt(folder, label_key="label"):
    """The class names TFDS writes beside its records for ``label_key`` (``LABEL.labels.txt``), or None.

    None too for a key that is no plain file name (``image/class/label``): its names would be in another
    folder, which TFDS does not write.
    """
    if not label_key or any(sep and sep in label_key for sep in ("/", "\\", os.sep, os.altsep)):
        return None
    path = os.path.join(folder, label_key + LABELS_TXT)
    return (read_class_names(path) or None) if os.path.isfile(path) else None
