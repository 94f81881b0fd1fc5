"""Images from WebDataset tar shards: ``key.jpg`` + ``key.cls`` (or ``key.json``) members, one sample per key.

A WebDataset shard is a plain tar file whose members are grouped into
samples by key, as the ``webdataset`` package groups them: a member name is
split at the first '.' of its last path part (``a/b/0001.seg.png`` -> key
``a/b/0001``, extension ``seg.png``; extensions are compared lower-cased),
and consecutive members with the same key form one sample. Members that are
not regular files, names without an extension and top-level ``__meta__``
names are not samples.

Python's ``tarfile`` reads the member headers once (it seeks over the data,
so nothing is unpacked); each image is then read at its byte offset, in any
order, so a shuffled conversion reads each image once. The ``webdataset``
package is not used: it only streams shards from their start, which the
shuffled order, shards and resumed conversions cannot use.
"""

from __future__ import annotations

import json
import os
import re
import tarfile

import numpy as np

from bzna_tf.convert.sources.base import (
    ALLOW_UNLABELLED_HINT,
    IMAGE_EXTENSIONS,
    Item,
    LabelledSource,
    SourceError,
    allow_unlabelled_fact,
    expand_patterns,
    few,
    file_facts,
)
from bzna_tf.format.wording import count

__all__ = ["WebDatasetSource", "expand_braces"]

AUTO = "auto"
# Image extensions a sample's image member may have (lower-cased, without the dot).
IMAGE_KEYS = tuple(e[1:] for e in IMAGE_EXTENSIONS)
# Label members tried, in this order, by label_key="auto" (then the json member's "label" field).
AUTO_LABELS = ("cls", "cls.txt")
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
_BRACE = re.compile(r"\{([^{}]*)\}")


def expand_braces(pattern: str) -> list[str]:
    """``train-{000..002}.tar`` -> three names; ``{a,b}`` lists too (as WebDataset and the shell write them).

    A numeric range keeps the width of its first bound when that is
    zero-padded (``{000000..000146}``). Several braces expand left to right.
    """
    m = _BRACE.search(pattern)
    if m is None:
        return [pattern]
    body = m.group(1)
    rng = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if rng:
        a, b = rng.group(1), rng.group(2)
        if int(b) < int(a):
            raise SourceError(f"{pattern!r}: the range {{{body}}} goes down")
        width = len(a) if a.startswith("0") else 0
        choices = [f"{k:0{width}d}" for k in range(int(a), int(b) + 1)]
    elif "," in body:
        choices = body.split(",")
    else:
        raise SourceError(f"{pattern!r}: expected {{A..B}} or {{x,y,...}} in braces. Received: {{{body}}}")
    out = []
    for c in choices:
        out += expand_braces(pattern[: m.start()] + c + pattern[m.end() :])
    return out


def split_name(name: str):
    """(key, extension) of a member name as WebDataset splits it, or None for a name without extension."""
    m = re.fullmatch(r"((?:.*/|)[^./]+)\.([^/]*)", name)
    if m is None:
        return None
    return m.group(1), m.group(2).lower()


class _Sample:
    """One key of a shard: its members' (offset, size) by extension, and why it cannot be converted."""

    __slots__ = ("shard", "key", "members", "error")

    def __init__(self, shard, key):
        self.shard, self.key, self.members, self.error = shard, key, {}, None


class WebDatasetSource(LabelledSource):
    """Images from WebDataset tar shards (``NNNNNN.tar`` of ``key.jpg`` + ``key.cls`` / ``key.json``).

    Samples are grouped by key as WebDataset groups them (consecutive members
    with the same key, see this module's notes); they are converted in shard
    order (shards sorted by name within each pattern), then member order. The
    stored file name of a sample is its key.

    Args:
      patterns: tar files, glob patterns (``"shards/train-*.tar"``) or brace
        patterns (``"train-{000000..000146}.tar"``); ``~`` is expanded.
      image_key: the extension of the image member (``"jpg"``, ``"png"``,
        ``"seg.png"``, ...); None: the sample's one member whose extension is an
        image's (jpg, jpeg, png, bmp, gif, webp, tif, tiff, ppm, pgm). A sample
        with several (``jpg`` and ``png``) is refused, naming them.
      label_key: where the label is: ``"auto"`` (default): the ``cls`` member
        if any sample has one, else ``cls.txt`` if any sample has one, else the
        ``"label"`` field of the ``json`` member if any sample's has one (else
        every image is unlabelled, and the summary says so); an extension
        (``"cls"``, ``"class.txt"``): that member, an integer as text;
        ``"json:FIELD"``: that field of the ``json`` member (``json:meta.label``
        for a nested one); None: every image is unlabelled.
      class_names: the class names indexed by target (default: none).
      allow_unlabelled: store a sample without its label member or field (or
        whose field is null) as an unlabelled image. By default such a sample
        is a bad record: the conversion stops, naming its shard and key, or
        skips it with ``on_error="skip"``.

    Raises:
      SourceError: a file that is not a tar file, a compressed one (decompress
        it first), a corrupt header that hides the rest of a shard, or no
        pattern match. A bad sample (no image member, a truncated member, a
        label that is not an integer or is missing) does not raise here: it is
        reported when converted (see ``convert``'s ``on_error``).
    """

    kind = "webdataset"
    cli_help = "WebDataset tar shards, glob or brace patterns (train-{000000..000146}.tar; quote them)"
    cli_options = ("image_key", "label_key", "allow_unlabelled")

    def __init__(self, patterns, *, image_key=None, label_key=AUTO, class_names=None, allow_unlabelled=False):
        if isinstance(patterns, (str, os.PathLike)):
            patterns = [patterns]
        expanded = [name for p in patterns for name in expand_braces(os.fspath(p))]
        self.paths = expand_patterns(expanded, "tar shard")
        self.image_key = image_key.lower().lstrip(".") if image_key else None
        self.class_names = list(class_names) if class_names is not None else None
        self.allow_unlabelled = bool(allow_unlabelled)
        self._samples = None
        self._index()
        self.label_key = self._resolve_label(label_key)
        notes = []
        if self._not_taken:
            notes.append(
                f"not taken: {count(len(self._not_taken), 'tar member')} without an extension "
                f"({few(self._not_taken, 3)})"
            )
        if self.label_key is None and label_key == AUTO:
            notes.append(
                "no label: no sample has a cls or cls.txt member or a json 'label' field; stored unlabelled "
                "(--label-key names the label's member or json:FIELD)"
            )
        self._no_label = (
            "without a label: no sample has a cls or cls.txt member or a json 'label' field"
            if label_key == AUTO
            else "without a label (--label-key '', label_key=None)"
        )
        self.notes = tuple(notes)

    def __getstate__(self):
        # The member index is rebuilt in each process from the headers rather than shipped.
        return {**self.__dict__, "_samples": None, "_starts": None}

    def _index(self):
        """Reads every member header of every shard (seeking over the data)."""
        samples, starts, not_taken = [], [0], []
        for k, path in enumerate(self.paths):
            self._read_headers(k, path, samples, not_taken)
            starts.append(len(samples))
        self._samples, self._starts, self._not_taken = samples, starts, not_taken

    def _read_headers(self, k, path, samples, not_taken):
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            magic = f.read(6)
        for prefix, what in _COMPRESSED.items():
            if magic.startswith(prefix):
                raise SourceError(
                    f"{path}: a {what}-compressed tar file; tar shards are read at their members' offsets, "
                    f"which needs an uncompressed tar: decompress it first (e.g. {what} -d)"
                )
        current = None
        last = None
        truncated = False
        try:
            tf = tarfile.open(path, "r:")
        except tarfile.TarError as e:
            raise SourceError(f"{path}: not a readable tar file: {e}") from e
        with tf:
            while True:
                try:
                    info = tf.next()
                except tarfile.TarError as e:
                    if truncated:  # tarfile's own complaint about the member flagged below
                        return
                    raise SourceError(
                        f"{path}: corrupt tar file at byte {tf.offset} (after member {last!r}): {e}; the "
                        "shard is damaged (re-download or re-create it, or leave it out)"
                    ) from e
                if info is None:
                    break
                last = info.name
                if not info.isreg():
                    continue
                name = info.name
                if "/" not in name and name.startswith("__") and name.endswith("__"):
                    continue
                parts = split_name(name)
                if parts is None:
                    not_taken.append(name)
                    continue
                key, ext = parts
                if current is None or current.key != key:
                    current = _Sample(k, key)
                    samples.append(current)
                if ext in current.members:
                    current.error = current.error or f"two members with the extension {ext!r} ({name})"
                current.members[ext] = (info.offset_data, info.size)
                if info.offset_data + info.size > size:
                    truncated = True
                    current.error = (
                        f"member {name!r} is truncated: it declares {info.size} bytes at byte "
                        f"{info.offset_data}, the file ends {size - info.offset_data} bytes after it starts"
                    )
            end = tf.offset
        if truncated:
            return
        # tarfile ends quietly at a header it cannot parse: anything but zeros after the last member is
        # a corrupt header hiding the rest of the shard.
        with open(path, "rb") as f:
            f.seek(end)
            pos = end
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                if block.count(0) != len(block):
                    at = pos + next(i for i, b in enumerate(block) if b)
                    after = f"after member {last!r}" if last is not None else "at its start"
                    raise SourceError(
                        f"{path}: corrupt tar header at byte {at} ({after}): the {size - end} bytes from "
                        f"byte {end} on cannot be read as members; the shard is damaged (re-download or "
                        "re-create it, or leave it out)"
                    )
                pos += len(block)

    def _read(self, f, path, sample, ext):
        offset, size = sample.members[ext]
        f.seek(offset)
        data = f.read(size)
        if len(data) != size:
            raise _BadSample(f"member {sample.key}.{ext} is truncated: {len(data)} of {size} bytes")
        return data

    def _any_json_label(self):
        """Whether some sample's json member has a "label" field (read in order, up to the first that has)."""
        with_json = [s for s in self._samples if "json" in s.members and not s.error]
        f, shard = None, None
        try:
            for sample in with_json:
                if sample.shard != shard:
                    if f is not None:
                        f.close()
                    shard = sample.shard
                    f = open(self.paths[shard], "rb")  # noqa: SIM115 (closed below)
                try:
                    meta = json.loads(self._read(f, self.paths[shard], sample, "json"))
                except (ValueError, _BadSample):
                    continue
                if isinstance(meta, dict) and "label" in meta:
                    return True
        finally:
            if f is not None:
                f.close()
        return False

    def _resolve_label(self, label_key):
        if label_key is None or label_key == "":
            return None
        if label_key != AUTO:
            if label_key.startswith("json:") and not label_key[5:]:
                raise ValueError(f"Expected json:FIELD as label_key. Received: label_key={label_key!r}")
            return label_key if label_key.startswith("json:") else label_key.lower().lstrip(".")
        # Every sample has a say: one sample without its label member must not decide the labels of all.
        for ext in AUTO_LABELS:
            if any(ext in s.members for s in self._samples):
                return ext
        return "json:label" if self._any_json_label() else None

    def __len__(self):
        if self._samples is None:
            self._index()
        return len(self._samples)

    def _reads_labels(self):
        return self.label_key is not None

    def labelled(self):
        if self.label_key is not None and self.label_key.startswith("json:"):
            return None  # known only once each json member is read
        return super().labelled()

    def _has_label(self):
        if self.label_key.startswith("json:"):
            return None  # known only once each json member is read
        if self._samples is None:
            self._index()
        return np.array([self.label_key in s.members for s in self._samples], bool)

    def _describe(self):
        return {
            "files": [file_facts(p) for p in self.paths],
            "image_key": self.image_key,
            "label_key": self.label_key,
            **allow_unlabelled_fact(self.allow_unlabelled),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The samples at ``indices`` (over all shards), each image read at its member's offset."""
        if self._samples is None:
            self._index()
        total = len(self._samples)
        handles = {}
        try:
            for i in indices:
                i = int(i)
                if not 0 <= i < total:
                    raise IndexError(f"sample {i} out of range: the shards hold {total}")
                sample = self._samples[i]
                path = self.paths[sample.shard]
                f = handles.get(sample.shard)
                if f is None:
                    if len(handles) >= 64:  # a shuffled order visits every shard: keep a few open
                        handles.pop(next(iter(handles))).close()
                    f = handles[sample.shard] = open(path, "rb")  # noqa: SIM115 (closed below)
                yield self._item(f, path, sample)
        finally:
            for f in handles.values():
                f.close()

    def _image_ext(self, sample):
        if self.image_key is not None:
            if self.image_key not in sample.members:
                raise _BadSample(
                    f"no {self.image_key!r} member (--image-key); the sample has {_exts(sample)}"
                )
            return self.image_key
        found = [ext for ext in sample.members if ext in IMAGE_KEYS]
        if not found:
            raise _BadSample(
                f"no image member; the sample has {_exts(sample)} and images are taken from "
                f"{', '.join(IMAGE_KEYS)} members: name another extension with --image-key (image_key=)"
            )
        if len(found) > 1:
            raise _BadSample(
                f"several image members ({', '.join(found)}): name the one to convert with --image-key "
                "(image_key=)"
            )
        return found[0]

    def _missing(self, why, unlabelled):
        """(None, why unlabelled) with ``allow_unlabelled``; else the sample is a bad record."""
        if self.allow_unlabelled:
            return None, f"{unlabelled} (--allow-unlabelled)"
        raise _BadSample(f"no label: {why}; {ALLOW_UNLABELLED_HINT}")

    def _target(self, f, path, sample):
        """(target, None), or (None, why the image is unlabelled)."""
        key = self.label_key
        if key is None:
            return None, self._no_label
        if key.startswith("json:"):
            field = key[5:]
            unlabelled = f"without a {field!r} field in a json member"
            if "json" not in sample.members:
                return self._missing(f"no json member (the sample has {_exts(sample)})", unlabelled)
            raw = self._read(f, path, sample, "json")
            try:
                value = json.loads(raw)
            except ValueError as e:
                raise _BadSample(f"member {sample.key}.json is not JSON: {e}") from e
            for part in field.split("."):
                if not isinstance(value, dict) or part not in value:
                    return self._missing(f"member {sample.key}.json has no field {field!r}", unlabelled)
                value = value[part]
            if value is None:
                return self._missing(f"field {field!r} of member {sample.key}.json is null", unlabelled)
            if isinstance(value, bool) or not isinstance(value, int):
                raise _BadSample(
                    f"field {key[5:]!r} of member {sample.key}.json is {value!r}, not an integer label "
                    "(a .bzna file stores one integer target per image)"
                )
            return value, None
        if key not in sample.members:
            return self._missing(
                f"no {key!r} member (the sample has {_exts(sample)})", f"without a {key!r} member"
            )
        raw = self._read(f, path, sample, key)
        text = raw.decode("utf-8", "replace").strip()
        try:
            return int(text), None
        except ValueError:
            shown = text if len(text) <= 40 else text[:40] + "..."
            raise _BadSample(
                f"member {sample.key}.{key} holds {shown!r}, not an integer label (a .bzna file stores one "
                "integer target per image; name another member with --label-key)"
            ) from None

    def _item(self, f, path, sample):
        origin = f"{path} key {sample.key!r}"
        try:
            if sample.error:
                raise _BadSample(sample.error)
            ext = self._image_ext(sample)
            target, unlabelled = self._target(f, path, sample)
            data = self._read(f, path, sample, ext)
        except _BadSample as e:
            return Item(sample.key, None, data=b"", origin=origin, error=str(e))
        return Item(sample.key, target, data=data, origin=origin, unlabelled=unlabelled)

    @classmethod
    def from_cli(cls, paths, *, image_key=None, label_key=None, allow_unlabelled=False):
        return cls(paths, image_key=image_key, label_key=AUTO if label_key is None else (label_key or None),
                   allow_unlabelled=allow_unlabelled)  # fmt: skip


class _BadSample(Exception):
    """A sample that cannot be converted (turned into an Item with ``error``)."""


def _exts(sample):
    return "members " + ", ".join(f"{sample.key}.{ext}" for ext in sample.members)
