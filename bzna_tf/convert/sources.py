"""Where images come from: TFRecord files, image folders and GulpIO chunks.

A source is an iterable of :class:`Item` (an encoded image, or the path of
one, with its target and file name) that knows its length, so the converter
can show progress and an ETA, and can describe itself, so an interrupted
conversion is only resumed onto the same inputs. Sources read in the main
process; decoding and encoding happen in the worker processes.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
from dataclasses import dataclass

from bzna_tf.convert.tfrecord import count_records, iter_records, parse_example

__all__ = [
    "IMAGE_EXTENSIONS",
    "GulpSource",
    "ImageFolderSource",
    "Item",
    "SourceError",
    "TFRecordSource",
    "iter_items",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm")


class SourceError(ValueError):
    """A source that cannot be read: names the file, the record and what is wrong."""


@dataclass(frozen=True)
class Item:
    """One image to convert.

    Attributes:
      filename: the base name stored in the .bzna file.
      target: the class index, or None when unlabelled.
      data: the encoded image (JPEG, PNG, ...), or None when ``path`` is set.
      path: a file to read the encoded image from (in the worker), or None.
      origin: where the image comes from, for messages ("train-00001 record 17").
      class_name: the name of the target's class when the source gives one per
        image (TFRecords' ``image/class/text``), else None.
    """

    filename: str
    target: int | None
    data: bytes | None = None
    path: str | None = None
    origin: str = ""
    class_name: str | None = None


def iter_items(source, start: int = 0, stop: int | None = None):
    """The items ``start`` (inclusive) to ``stop`` (exclusive) of a source, in order.

    Sources of this module read only what they need (a TFRecord range skips
    the records before it by their headers); any other iterable is iterated
    from its beginning.
    """
    if hasattr(source, "items"):
        return source.items(start, stop)
    return itertools.islice(iter(source), start, stop)


def _expand(patterns, what):
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    paths = []
    for p in patterns:
        p = os.fspath(p)
        matches = sorted(glob.glob(p)) if glob.has_magic(p) else [p]
        if not matches:
            raise SourceError(f"no {what} matches {p!r}")
        for m in matches:
            if not os.path.exists(m):
                raise SourceError(f"{m}: no such {what}")
        paths.extend(matches)
    if not paths:
        raise SourceError(f"Expected at least one {what}. Received: none")
    return paths


def _stat(path, root=None):
    """[name, size, mtime] of a file for a source's fingerprint.

    The name is relative to ``root`` (the base name without one), so the same
    data mounted at another place on another host has the same fingerprint.
    """
    st = os.stat(path)
    name = os.path.relpath(path, root) if root is not None else os.path.basename(path)
    return [name.replace(os.sep, "/"), st.st_size, int(st.st_mtime)]


def _cached_description(source):
    """``source._describe()``, computed once per source object and kept (it travels when pickled).

    A folder source stats every file: a Beam or array job must not redo that per shard.
    """
    cached = getattr(source, "_description", None)
    if cached is None:
        cached = source._description = source._describe()
    return cached


def _basename(name):
    base = re.split(r"[/\\]", name)[-1].replace("\0", "")
    return base or "image"


# Feature layouts recognised without flags: (image, label, filename, class text).
CLASSIC_KEYS = ("image/encoded", "image/class/label", "image/filename", "image/class/text")
TFDS_KEYS = ("image", "label", "file_name", None)
AUTO = "auto"


class TFRecordSource:
    """Images from TFRecord files of ``tf.train.Example``.

    Two layouts are recognised from the first record, without any key given:

    - the classic ImageNet TFRecords (TensorFlow models' ``build_imagenet_data.py``):
      ``image/encoded``, ``image/class/label``, ``image/filename`` and the class
      names in ``image/class/text``;
    - TFDS's (``tfds.builder("imagenet2012")`` and most image datasets):
      ``image``, ``label``, ``file_name``, with the class names in the
      ``label.labels.txt`` TFDS writes beside the records.

    Args:
      patterns: file names or glob patterns (``"imagenet/train-*"``), read in sorted order.
      image_key: the bytes feature holding the encoded image; None: recognised
        from the first record (``image/encoded`` or ``image``).
      label_key: the int64 feature holding the label; a record without it is
        unlabelled. ``"auto"``: the recognised layout's; None: every image is unlabelled.
      filename_key: the bytes feature holding the file name (default: the
        layout's; without one, the record's position); None for positions.
      class_text_key: a bytes feature holding each record's class name
        (``"auto"``: ``image/class/text`` in the classic layout), or None.
      label_offset: added to every label. The classic ImageNet TFRecords store
        labels 1..1000 with 0 for "background": pass -1 to get Benzina's 0..999 targets.
      compression: None, "GZIP" or "ZLIB", as the files were written.
      class_names: the class names, indexed by target (after ``label_offset``);
        default: a ``label.labels.txt`` beside the first file, if any.

    Raises:
      SourceError: no file matches, or the first record has no recognised image
        feature (the message lists the features it has and the flag to use).
    """

    def __init__(
        self,
        patterns,
        *,
        image_key=None,
        label_key=AUTO,
        filename_key=AUTO,
        class_text_key=AUTO,
        label_offset=0,
        compression=None,
        class_names=None,
    ):
        self.paths = _expand(patterns, "TFRecord file")
        self.label_offset = int(label_offset)
        self.compression = compression
        self._counts = None
        layout = None
        if image_key is None or AUTO in (label_key, filename_key, class_text_key):
            layout, image_key = self._recognise(image_key)
        self.layout = layout or "custom"
        defaults = {"classic": CLASSIC_KEYS, "tfds": TFDS_KEYS}.get(layout, (None, None, None, None))
        self.image_key = image_key
        self.label_key = defaults[1] if label_key == AUTO else label_key
        self.filename_key = defaults[2] if filename_key == AUTO else filename_key
        self.class_text_key = defaults[3] if class_text_key == AUTO else class_text_key
        if class_names is None:
            class_names = _labels_txt(os.path.dirname(os.path.abspath(self.paths[0])))
        self.class_names = list(class_names) if class_names is not None else None

    def _first_features(self):
        for path in self.paths:
            for index, offset, data in iter_records(path, self.compression):
                try:
                    return f"{path} record {index} (byte {offset})", parse_example(data)
                except ValueError as e:
                    raise SourceError(
                        f"{path} record {index} (byte {offset}): not a tf.train.Example: {e}"
                    ) from e
        return None, {}

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

    def _record_counts(self):
        if self._counts is None:
            self._counts = [count_records(p, self.compression) for p in self.paths]
        return self._counts

    def __len__(self):
        return sum(self._record_counts())

    def describe(self):
        return _cached_description(self)

    def _describe(self):
        return {
            "kind": "tfrecord",
            "files": [_stat(p) for p in self.paths],
            "keys": [self.image_key, self.label_key, self.filename_key, self.class_text_key],
            "label_offset": self.label_offset,
            "compression": self.compression,
        }

    def __iter__(self):
        return self.items(0, None)

    def items(self, start=0, stop=None):
        """The items ``start`` to ``stop`` (exclusive), skipping earlier files and records unread."""
        keys = {k for k in (self.image_key, self.label_key, self.filename_key, self.class_text_key) if k}
        first = 0
        for path, count in zip(self.paths, self._record_counts(), strict=True):
            if stop is not None and first >= stop:
                return
            if first + count <= start:
                first += count
                continue
            stem = os.path.basename(path)
            skip = max(0, start - first)
            for index, offset, data in iter_records(path, self.compression, start=skip):
                if stop is not None and first + index >= stop:
                    return
                yield self._item(path, stem, index, offset, data, keys)
            first += count

    def _item(self, path, stem, index, offset, data, keys):
        origin = f"{path} record {index} (byte {offset})"
        try:
            features = parse_example(data, keys)
        except ValueError as e:
            raise SourceError(f"{origin}: not a tf.train.Example: {e}") from e
        images = features.get(self.image_key)
        if not images or not isinstance(images[0], bytes):
            everything = parse_example(data)
            raise SourceError(
                f"{origin}: no bytes feature {self.image_key!r}; the record has the features "
                f"{_describe_features(everything)}: name the image's with --image-key (image_key=)"
            )
        target = None
        labels = features.get(self.label_key) if self.label_key else None
        if labels:
            if not isinstance(labels[0], int):
                raise SourceError(
                    f"{origin}: feature {self.label_key!r} is not an int64 list; the record has the features "
                    f"{_describe_features(parse_example(data))}: name the label's with --label-key "
                    "(label_key=)"
                )
            target = labels[0] + self.label_offset
        names = features.get(self.filename_key) if self.filename_key else None
        if names and isinstance(names[0], bytes):
            filename = _basename(names[0].decode("utf-8", "replace"))
        else:
            filename = f"{stem}-{index:06d}"
        texts = features.get(self.class_text_key) if self.class_text_key else None
        class_name = texts[0].decode("utf-8", "replace") if texts and isinstance(texts[0], bytes) else None
        return Item(filename, target, data=images[0], origin=origin, class_name=class_name)


def _describe_features(features):
    """``{'image': 'bytes', 'label': 'int64'}`` as a short string, for messages."""
    kinds = []
    for key in sorted(features):
        values = features[key]
        kind = "empty" if not values else {bytes: "bytes", int: "int64", float: "float"}[type(values[0])]
        kinds.append(f"{key!r} ({kind})")
    return "[" + ", ".join(kinds) + "]" if kinds else "[] (none)"


def read_class_names(path) -> list[str]:
    """Class names from a text file, one per line by target (trailing empty lines dropped)."""
    with open(path, encoding="utf-8") as f:
        names = [line.rstrip("\n") for line in f]
    while names and not names[-1]:
        names.pop()
    return names


def _labels_txt(folder):
    """The class names TFDS writes beside its records (``label.labels.txt``), or None."""
    path = os.path.join(folder, "label.labels.txt")
    return (read_class_names(path) or None) if os.path.isfile(path) else None


class ImageFolderSource:
    """Images from a folder: one sub-folder per class (sorted names -> targets 0, 1, ...).

    A folder without sub-folders gives unlabelled images (a test set). Files are
    taken in sorted order within each class; other files are ignored.

    Args:
      root: the folder.
      extensions: the file name endings that count as images (case-insensitive).
    """

    def __init__(self, root, *, extensions=IMAGE_EXTENSIONS):
        self.root = os.fspath(root)
        if not os.path.isdir(self.root):
            raise SourceError(f"{self.root}: not a folder")
        self.extensions = tuple(e.lower() for e in extensions)
        subdirs = sorted(
            d
            for d in os.listdir(self.root)
            if not d.startswith(".") and os.path.isdir(os.path.join(self.root, d))
        )
        self.classes = subdirs
        self.class_names = list(subdirs) or None
        folders = [(i, os.path.join(self.root, d)) for i, d in enumerate(subdirs)] or [(None, self.root)]
        self._files = []
        for target, folder in folders:
            for name in sorted(os.listdir(folder)):
                if name.lower().endswith(self.extensions) and os.path.isfile(os.path.join(folder, name)):
                    self._files.append((target, os.path.join(folder, name)))
        if not self._files:
            raise SourceError(f"{self.root}: no image files ({', '.join(self.extensions)})")

    def __len__(self):
        return len(self._files)

    def describe(self):
        return _cached_description(self)

    def _describe(self):
        return {
            "kind": "folder",
            "extensions": list(self.extensions),
            "files": [[*_stat(p, self.root), t] for t, p in self._files],
        }

    def __iter__(self):
        return self.items(0, None)

    def items(self, start=0, stop=None):
        """The items ``start`` to ``stop`` (exclusive)."""
        for target, path in self._files[start:stop]:
            yield Item(_basename(path), target, path=path, origin=path)


class GulpSource:
    """Frames from GulpIO chunks (``.gulp`` data + ``.gmeta`` JSON meta data), one sample per frame.

    A chunk is ``data_<k>.gulp`` with ``meta_<k>.gmeta`` (or ``<stem>.gulp`` with
    ``<stem>.gmeta``): the data file is JPEG frames back to back, each padded to
    a multiple of 4 bytes; the meta file maps each video id to
    ``{"frame_info": [[offset, padding, total_length], ...], "meta_data": [{...}]}``.
    Every frame of a video gets the video's label, read from its first
    ``meta_data`` dict under ``label_key``: integers are taken as they are,
    strings are numbered in sorted order over all chunks (or through
    ``label_map``). Frames are named ``<id>_<frame>.jpg``.

    Args:
      paths: chunk folders (every chunk in them, in numeric order), ``.gmeta`` or ``.gulp`` files.
      label_key: the meta_data key of the label; None for unlabelled frames.
      label_map: optional {label: target} for string labels.
    """

    def __init__(self, paths, *, label_key="label", label_map=None):
        chunks = []
        for p in _expand(paths, "GulpIO chunk or folder"):
            if os.path.isdir(p):
                metas = glob.glob(os.path.join(p, "*.gmeta"))
                chunks.extend(sorted(metas, key=_chunk_order))
            else:
                chunks.append(p)
        if not chunks:
            raise SourceError(f"no .gmeta files in {paths!r}")
        self.chunks = [_chunk_files(c) for c in chunks]
        self.label_key = label_key
        self._videos = []  # (data_path, video_id, frame_info, raw_label)
        for meta, data in self.chunks:
            try:
                with open(meta, encoding="utf-8") as f:
                    table = json.load(f)
            except (OSError, ValueError) as e:
                raise SourceError(f"{meta}: not a GulpIO meta file: {e}") from e
            if not isinstance(table, dict):
                raise SourceError(f"{meta}: expected a JSON object of videos, found {type(table).__name__}")
            size = os.path.getsize(data)
            for vid, entry in table.items():
                frames = entry.get("frame_info") if isinstance(entry, dict) else None
                if not isinstance(frames, list):
                    raise SourceError(f"{meta}: video {vid!r} has no frame_info list")
                for j, fi in enumerate(frames):
                    ok = isinstance(fi, list) and len(fi) == 3 and all(isinstance(v, int) for v in fi)
                    if not ok or not (0 <= fi[1] < fi[2] and fi[0] >= 0 and fi[0] + fi[2] <= size):
                        raise SourceError(
                            f"{meta}: video {vid!r} frame {j}: bad frame_info {fi!r} for a {size}-byte {data}"
                        )
                meta_data = entry.get("meta_data") or [{}]
                raw = meta_data[0].get(label_key) if label_key and isinstance(meta_data[0], dict) else None
                self._videos.append((data, str(vid), frames, raw))
        strings = sorted({r for *_, r in self._videos if isinstance(r, str)})
        self.label_map = dict(label_map) if label_map is not None else {s: i for i, s in enumerate(strings)}
        self.class_names = None
        if self.label_map and all(isinstance(t, int) and t >= 0 for t in self.label_map.values()):
            self.class_names = [None] * (max(self.label_map.values()) + 1)
            for name, t in self.label_map.items():
                self.class_names[t] = str(name)
        for _, vid, _, raw in self._videos:
            if isinstance(raw, str) and raw not in self.label_map:
                raise SourceError(f"video {vid!r}: label {raw!r} is not in label_map")
            if raw is not None and not isinstance(raw, (str, int)):
                raise SourceError(f"video {vid!r}: label {raw!r} is neither an integer nor a string")

    def __len__(self):
        return sum(len(frames) for _, _, frames, _ in self._videos)

    def describe(self):
        return _cached_description(self)

    def _describe(self):
        return {
            "kind": "gulp",
            "files": [_stat(p) for chunk in self.chunks for p in chunk],
            "label_key": self.label_key,
            "label_map": self.label_map,
        }

    def __iter__(self):
        return self.items(0, None)

    def items(self, start=0, stop=None):
        """The frames ``start`` to ``stop`` (exclusive), over all videos in order."""
        handles = {}
        first = 0
        try:
            for data_path, vid, frames, raw in self._videos:
                if stop is not None and first >= stop:
                    return
                if first + len(frames) <= start:
                    first += len(frames)
                    continue
                f = handles.get(data_path)
                if f is None:
                    f = handles[data_path] = open(data_path, "rb")  # noqa: SIM115 (closed below)
                target = self.label_map[raw] if isinstance(raw, str) else raw
                lo = max(0, start - first)
                hi = len(frames) if stop is None else min(len(frames), stop - first)
                first += len(frames)
                for j in range(lo, hi):
                    offset, pad, total = frames[j]
                    f.seek(offset)
                    data = f.read(total - pad)
                    name = _basename(f"{vid}_{j:04d}.jpg")
                    yield Item(name, target, data=data, origin=f"{data_path} video {vid} frame {j}")
        finally:
            for f in handles.values():
                f.close()


def _chunk_order(path):
    m = re.search(r"(\d+)\.gmeta$", os.path.basename(path))
    return (int(m.group(1)) if m else -1, path)


def _chunk_files(path):
    """(meta, data) paths of the chunk named by its .gmeta or .gulp file."""
    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    if ext not in (".gmeta", ".gulp"):
        raise SourceError(f"{path}: expected a .gmeta or .gulp file, or a folder of them")
    number = re.fullmatch(r"(?:meta|data)_(\d+)", stem)
    candidates = ([(f"meta_{number.group(1)}.gmeta", f"data_{number.group(1)}.gulp")] if number else []) + [
        (stem + ".gmeta", stem + ".gulp")
    ]
    for meta, data in candidates:
        meta, data = os.path.join(folder, meta), os.path.join(folder, data)
        if os.path.isfile(meta) and os.path.isfile(data):
            return meta, data
    raise SourceError(f"{path}: no matching .gmeta/.gulp pair beside it")
