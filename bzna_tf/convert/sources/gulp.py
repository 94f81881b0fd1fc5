"""Frames from GulpIO chunks (``.gulp`` data + ``.gmeta`` JSON meta data), one sample per frame."""

from __future__ import annotations

import glob
import json
import os
import re

import numpy as np

from bzna_tf.convert.sources.base import (
    ALLOW_UNLABELLED_HINT,
    Item,
    LabelledSource,
    SourceError,
    allow_unlabelled_fact,
    escaped_name,
    expand_patterns,
    file_facts,
    refuse_repeats,
    safe_basename,
)
from bzna_tf.convert.sources.classes import ClassList, ClassWords, check_beside_training, few_names, nfc
from bzna_tf.format.shards import near_name
from bzna_tf.format.wording import count

__all__ = ["GulpSource"]

AUTO = "auto"

# How messages name the names string labels are numbered by (classes=, check_output).
_WORDS = ClassWords(
    name="label",
    numbers="the videos' labels",
    one="the label of its videos",
    own="numbered by the sorted labels of its videos",
    lacks="no video here is labelled",
    these="these videos' labels",
)


class GulpSource(LabelledSource):
    """Frames from GulpIO chunks (``.gulp`` data + ``.gmeta`` JSON meta data), one sample per frame.

    A chunk is ``data_<k>.gulp`` with ``meta_<k>.gmeta`` (or ``<stem>.gulp`` with
    ``<stem>.gmeta``): the data file is JPEG frames back to back, each padded to
    a multiple of 4 bytes; the meta file maps each video id to
    ``{"frame_info": [[offset, padding, total_length], ...], "meta_data": [{...}]}``.
    Every frame of a video gets the video's label, read from its first
    ``meta_data`` dict under ``label_key``: integers are taken as they are,
    strings are numbered in sorted order over all chunks (or by ``classes``,
    or through ``label_map``). Frames are named ``<id>_<frame>.jpg``.

    Numbered in sorted order, a split converted on its own that lacks a
    label (a validation split without ``"dog"``) numbers the labels after it
    one lower than the training split: ``classes`` (``--classes
    train.bzna``) numbers them as the training file does, and
    :meth:`check_output` refuses to write such a held-out split beside the
    training file without it.

    Args:
      paths: chunk folders (every chunk in them, in numeric order), ``.gmeta`` or ``.gulp`` files
        (``~`` expanded, glob patterns allowed).
      label_key: the meta_data key of the label; ``"auto"`` (default): ``"label"`` when any video's
        meta_data has it (else every frame is unlabelled, and the summary says so); None for
        unlabelled frames.
      label_map: optional {label: target} for string labels.
      classes: the string labels by target, instead of their sorted order: a
        list of labels, a path to a text file of them (one per line, UTF-8),
        or a path to a .bzna file whose stored class names are taken
        (``STEM.bzna`` also names its shards), as
        :class:`~bzna_tf.convert.ImageFolderSource`'s ``classes``. The whole
        list is stored as the class names (a label matches a listed name in
        either Unicode form, NFC or NFD); a string label not listed is
        refused, naming its video and chunk; integer labels (targets already)
        and ``label_map`` with it are refused.
      allow_unlabelled: store the frames of a video whose meta_data lacks the label (or holds
        null) as unlabelled images. By default they are bad records: the conversion stops,
        naming the video, or skips them with ``on_error="skip"``.
    """

    kind = "gulp"
    cli_help = "GulpIO chunk folders or .gmeta files"
    cli_options = ("label_key", "allow_unlabelled", "classes")

    def __init__(self, paths, *, label_key=AUTO, label_map=None, allow_unlabelled=False, classes=None):
        if classes is not None and label_map is not None:
            raise ValueError(
                "Expected classes= or label_map=, not both: each numbers the string labels. Received: "
                f"classes={classes!r}, label_map={label_map!r}"
            )
        listed = ClassList(classes, _WORDS) if classes is not None else None  # read (and refused) first
        chunks, named_by = [], []
        for p in expand_patterns(paths, "GulpIO chunk or folder"):
            if os.path.isdir(p):
                metas = glob.glob(os.path.join(p, "*.gmeta"))
                chunks.extend(sorted(metas, key=_chunk_order))
                named_by.extend([p] * len(metas))
            else:
                chunks.append(p)
                named_by.append(p)
        refuse_repeats(chunks, named_by, "GulpIO chunk")  # a folder and a chunk in it
        if not chunks:
            raise SourceError(f"no .gmeta files in {paths!r}")
        self.chunks = [_chunk_files(c) for c in chunks]
        self._subject = ", ".join(escaped_name(p) for p in dict.fromkeys(named_by))  # for check_output
        self.allow_unlabelled = bool(allow_unlabelled)
        key = "label" if label_key == AUTO else label_key
        self._videos = []  # (data_path, video_id, frame_info, raw_label)
        for meta, data in self.chunks:
            self._read_meta(meta, data, key)
        self._no_label = "without a label (--label-key '', label_key=None)"
        if label_key == AUTO and all(raw is None for *_, raw in self._videos):
            key = None
            self._no_label = "without a label: no video's meta_data has a 'label'"
            self.notes = (
                "no label: no video's meta_data has a 'label'; stored unlabelled (--label-key names it)",
            )
        self.label_key = key
        kinds = {type(r): (vid, data) for data, vid, _, r in self._videos if r is not None}
        if str in kinds and int in kinds:
            # Strings are numbered 0, 1, ... (or by label_map) and integers taken as they are: "cat" and 0
            # would share a target. Which numbering the integers follow is the user's to say.
            (s_vid, s_data), (i_vid, i_data) = kinds[str], kinds[int]
            raise SourceError(
                f"the {key!r} labels mix strings (video {s_vid!r} in {s_data}) and integers (video "
                f"{i_vid!r} in {i_data}): a string becomes a target by its rank (or label_map) "
                "and an integer is one already, so two classes could share a target. Give every video a "
                "label of one kind"
            )
        if listed is not None and int in kinds:
            data, vid = next((d, v) for d, v, _, r in self._videos if isinstance(r, int))  # the first
            raise SourceError(
                f"the {key!r} labels are integers (video {vid!r} in {data}), targets already: classes "
                "(--classes) numbers string labels. Leave it out; to store class names for the integers, "
                "give them with --class-names (class_names=), one per target"
            )
        strings = sorted({r for *_, r in self._videos if isinstance(r, str)})
        # Numbered here by their sorted order: check_output compares the training file beside the output.
        self._numbered = bool(strings) and label_map is None and listed is None
        self.classes = listed.names if listed is not None else None
        if listed is not None:
            self.label_map = self._listed_targets(listed)
        elif label_map is not None:
            self.label_map = dict(label_map)
        else:
            self.label_map = {s: i for i, s in enumerate(strings)}
        self.class_names = None
        if listed is not None:
            self.class_names = list(listed.names)
            self.num_classes = len(self.class_names)
        elif self.label_map and all(isinstance(t, int) and t >= 0 for t in self.label_map.values()):
            self.class_names = [None] * (max(self.label_map.values()) + 1)
            for name, t in self.label_map.items():
                self.class_names[t] = str(name)
            self.num_classes = len(self.class_names)
        for _, vid, _, raw in self._videos:
            if isinstance(raw, str) and raw not in self.label_map:
                raise SourceError(f"video {vid!r}: label {raw!r} is not in label_map")
        # Frame i is frame i - starts[v] of video v.
        self._starts = np.cumsum([0, *(len(frames) for _, _, frames, _ in self._videos)])

    def _listed_targets(self, listed):
        """{string label: its target in ``listed``} (a label matches a listed name in either Unicode form).

        Raises:
          SourceError: a label that is not listed, naming its video and chunk.
        """
        by_form = {nfc(n): t for t, n in enumerate(listed.names)}
        unknown = {}  # label -> (video, data file) of its first video
        for data, vid, _, raw in self._videos:
            if isinstance(raw, str) and nfc(raw) not in by_form:
                unknown.setdefault(raw, (vid, data))
        if unknown:
            shown = ", ".join(
                f"{few_names([s])} (video {v!r} in {d})" for s, (v, d) in list(unknown.items())[:3]
            )
            more = ", ..." if len(unknown) > 3 else ""
            near = {near_name(n): n for n in listed.names}
            alike = [f"{s!r} is listed as {near[near_name(s)]!r}" for s in unknown if near_name(s) in near]
            alike = f" ({'; '.join(alike[:3])}{'; ...' if len(alike) > 3 else ''})" if alike else ""
            them = "it" if len(unknown) == 1 else "them"
            renamed = (
                ". A file converted with --class-names (class_names=) stores those names, not its videos' "
                "labels: then give the labels by target in a text file (--classes FILE) and the stored "
                "names with --class-names"
                if listed.stored
                else ""
            )
            raise SourceError(
                f"{self._subject}: {count(len(unknown), 'label')} not among {listed.where} "
                f"({count(len(listed.names), 'class', 'classes')}): {shown}{more}{alike}. A video whose "
                f"label is not listed has no target: add {them} to the classes (at the end, to keep the "
                f"others' targets){renamed}"
            )
        return {raw: by_form[nfc(raw)] for *_, raw in self._videos if isinstance(raw, str)}

    def check_output(self, output, class_names=None):
        """Refuses to write a held-out split whose string labels, numbered in sorted order, would get other
        targets than in the training file beside ``output`` (called by :func:`~bzna_tf.convert.convert`
        before any work): a ``val.bzna`` whose videos lack a label of ``train.bzna``'s. Nothing is said
        when ``classes`` or ``label_map`` was given, or the labels are integers; else the rules are
        :func:`~bzna_tf.convert.sources.classes.check_beside_training`'s.

        Args:
          output: the conversion's output (a local path; a URL is not looked at).
          class_names: the class names the conversion stores (default: the sorted labels).

        Raises:
          SourceError: naming the label with two targets and how to choose (``classes``).
        """
        if not self._numbered:
            return
        names = list(class_names) if class_names is not None else self.class_names
        check_beside_training(output, names, self._subject, _WORDS)

    def _read_meta(self, meta, data, label_key):
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
            if raw is not None and (isinstance(raw, bool) or not isinstance(raw, (str, int))):
                raise SourceError(
                    f"{meta}: video {vid!r}: label {raw!r} ({label_key!r}) is neither an integer nor a "
                    "string; a .bzna file stores one target per image"
                )
            self._videos.append((data, str(vid), frames, raw))

    def __len__(self):
        return int(self._starts[-1])

    def _has_label(self):
        return np.repeat([raw is not None for *_, raw in self._videos], np.diff(self._starts)).astype(bool)

    def _reads_labels(self):
        return self.label_key is not None

    def _describe(self):
        return {
            "files": [file_facts(p) for chunk in self.chunks for p in chunk],
            "label_key": self.label_key,
            "label_map": self.label_map,
            # Only when given, so that the fingerprints of conversions made before the option still match.
            **({"classes": list(self.classes)} if self.classes is not None else {}),
            **allow_unlabelled_fact(self.allow_unlabelled),
        }

    def item(self, index):
        return next(iter(self.items([index])))

    def items(self, indices):
        """The frames at ``indices`` (over all videos, in chunk and video order)."""
        handles = {}
        try:
            for i in indices:
                i = int(i)
                if not 0 <= i < len(self):
                    raise IndexError(f"frame {i} out of range: the chunks hold {len(self)}")
                v = int(np.searchsorted(self._starts, i, side="right")) - 1
                data_path, vid, frames, raw = self._videos[v]
                j = i - int(self._starts[v])
                f = handles.get(data_path)
                if f is None:
                    if len(handles) >= 64:
                        handles.pop(next(iter(handles))).close()
                    f = handles[data_path] = open(data_path, "rb")  # noqa: SIM115 (closed below)
                offset, pad, total = frames[j]
                f.seek(offset)
                data = f.read(total - pad)
                target = self.label_map[raw] if isinstance(raw, str) else raw
                name = safe_basename(f"{vid}_{j:04d}.jpg")
                origin = f"{data_path} video {vid} frame {j}"
                unlabelled = None
                if self.label_key is None:
                    unlabelled = self._no_label
                elif raw is None and self.allow_unlabelled:
                    unlabelled = f"whose video's meta_data has no {self.label_key!r} (--allow-unlabelled)"
                elif raw is None:
                    yield Item(name, None, data=b"", origin=origin,
                               error=f"no label: video {vid!r} has no {self.label_key!r} in its meta_data; "
                               f"{ALLOW_UNLABELLED_HINT}")  # fmt: skip
                    continue
                yield Item(name, target, data=data, origin=origin, unlabelled=unlabelled)
        finally:
            for f in handles.values():
                f.close()

    @classmethod
    def from_cli(cls, paths, *, label_key=None, allow_unlabelled=False, classes=None):
        return cls(paths, label_key=AUTO if label_key is None else (label_key or None),
                   allow_unlabelled=allow_unlabelled, classes=classes)  # fmt: skip


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
