"""Where images come from: TFRecord files, image folders and GulpIO chunks.

A source is an iterable of :class:`Item` (an encoded image, or the path of
one, with its target and file name) that knows its length, so the converter
can show progress and an ETA, and can describe itself, so an interrupted
conversion is only resumed onto the same inputs. Sources read in the main
process; decoding and encoding happen in the worker processes.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass

from bzna_tf.convert.tfrecord import count_records, iter_records, parse_example

__all__ = ["GulpSource", "ImageFolderSource", "Item", "SourceError", "TFRecordSource", "IMAGE_EXTENSIONS"]

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
    """

    filename: str
    target: int | None
    data: bytes | None = None
    path: str | None = None
    origin: str = ""


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


def _stat(path):
    st = os.stat(path)
    return [os.path.abspath(path), st.st_size, int(st.st_mtime)]


def _basename(name):
    base = re.split(r"[/\\]", name)[-1].replace("\0", "")
    return base or "image"


class TFRecordSource:
    """Images from TFRecord files of ``tf.train.Example`` (the classic ImageNet layout by default).

    Args:
      patterns: file names or glob patterns (``"imagenet/train-*"``), read in sorted order.
      image_key: the bytes feature holding the encoded image.
      label_key: the int64 feature holding the label; a record without it is unlabelled.
        None: every image is unlabelled.
      filename_key: the bytes feature holding the file name; default the record's position.
      label_offset: added to every label. The classic ImageNet TFRecords (TensorFlow models'
        ``build_imagenet_data.py``) store labels 1..1000 with 0 for "background": pass -1 to get
        Benzina's 0..999 targets.
      compression: None, "GZIP" or "ZLIB", as the files were written.
    """

    def __init__(
        self,
        patterns,
        *,
        image_key="image/encoded",
        label_key="image/class/label",
        filename_key="image/filename",
        label_offset=0,
        compression=None,
    ):
        self.paths = _expand(patterns, "TFRecord file")
        self.image_key, self.label_key, self.filename_key = image_key, label_key, filename_key
        self.label_offset = int(label_offset)
        self.compression = compression
        self._len = None

    def __len__(self):
        if self._len is None:
            self._len = sum(count_records(p, self.compression) for p in self.paths)
        return self._len

    def describe(self):
        return {
            "kind": "tfrecord",
            "files": [_stat(p) for p in self.paths],
            "keys": [self.image_key, self.label_key, self.filename_key],
            "label_offset": self.label_offset,
        }

    def __iter__(self):
        keys = {k for k in (self.image_key, self.label_key, self.filename_key) if k}
        for path in self.paths:
            stem = os.path.basename(path)
            for index, offset, data in iter_records(path, self.compression):
                origin = f"{path} record {index} (byte {offset})"
                try:
                    features = parse_example(data, keys)
                except ValueError as e:
                    raise SourceError(f"{origin}: not a tf.train.Example: {e}") from e
                images = features.get(self.image_key)
                if not images or not isinstance(images[0], bytes):
                    raise SourceError(
                        f"{origin}: no bytes feature {self.image_key!r} (features read: {sorted(features)})"
                    )
                target = None
                labels = features.get(self.label_key) if self.label_key else None
                if labels:
                    if not isinstance(labels[0], int):
                        raise SourceError(f"{origin}: feature {self.label_key!r} is not an int64 list")
                    target = labels[0] + self.label_offset
                names = features.get(self.filename_key) if self.filename_key else None
                if names and isinstance(names[0], bytes):
                    filename = _basename(names[0].decode("utf-8", "replace"))
                else:
                    filename = f"{stem}-{index:06d}"
                yield Item(filename, target, data=images[0], origin=origin)


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
        return {
            "kind": "folder",
            "root": os.path.abspath(self.root),
            "files": [_stat(p) for _, p in self._files],
        }

    def __iter__(self):
        for target, path in self._files:
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
        for _, vid, _, raw in self._videos:
            if isinstance(raw, str) and raw not in self.label_map:
                raise SourceError(f"video {vid!r}: label {raw!r} is not in label_map")
            if raw is not None and not isinstance(raw, (str, int)):
                raise SourceError(f"video {vid!r}: label {raw!r} is neither an integer nor a string")

    def __len__(self):
        return sum(len(frames) for _, _, frames, _ in self._videos)

    def describe(self):
        return {
            "kind": "gulp",
            "files": [_stat(p) for chunk in self.chunks for p in chunk],
            "label_key": self.label_key,
            "label_map": self.label_map,
        }

    def __iter__(self):
        handles = {}
        try:
            for data_path, vid, frames, raw in self._videos:
                f = handles.get(data_path)
                if f is None:
                    f = handles[data_path] = open(data_path, "rb")  # noqa: SIM115 (closed below)
                target = self.label_map[raw] if isinstance(raw, str) else raw
                for j, (offset, pad, total) in enumerate(frames):
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
