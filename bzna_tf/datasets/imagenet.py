"""``ImageNet``: ImageNet 2012 in Benzina's layout (one file) or as per-split files of a directory."""

from __future__ import annotations

import os
import re

from bzna_tf.datasets.classification import ClassificationDataset
from bzna_tf.format.keywords import keywords
from bzna_tf.format.samplelist import SampleList
from bzna_tf.format.shards import (
    check_shard_sets,
    describe_sets,
    directory_files,
    expand_paths,
    expand_user,
    folder_hint,
    folder_sets,
    in_shard_order,
    is_url,
)
from bzna_tf.format.splits import IMAGENET_SPLITS, imagenet_size_error, imagenet_splits

__all__ = ["IMAGENET_FILENAMES", "ImageNet"]

IMAGENET_FILENAMES = ("ilsvrc2012.bzna", "ilsvrc2012.mp4")


class ImageNet(ClassificationDataset):
    """ImageNet 2012 in Benzina's layout: train (1,281,167), val (50,000), test (100,000), in that order.

    The split ranges are counted from the end of the file (SPEC section 3),
    so a file missing a few training images still splits right. Targets are
    the class numbers 0..999; the test split has none (``as_dataset`` refuses
    it unless ``training=False, unlabelled="keep"``: labels -1).

    Args:
      root: one whole ``.bzna`` file, or a directory holding
        ``ilsvrc2012.bzna`` (or ``ilsvrc2012.mp4``, the original tools'
        name); or per-split files as ``bzna-tf convert`` writes them:
        ``train.bzna``, ``val.bzna`` (``test.bzna``), or shards
        ``train-00000-of-00064.bzna`` ..., as their directory, a pattern, a
        list of paths or patterns, or one such file, whose splits are their
        files, told by their names (not counted from the end). Several files
        not named by split have no named splits: the count from the end is
        for one whole file.
      split: None (every sample; as_dataset refuses to read several ImageNet
        splits together, unless positions are selected or a sample list is
        given: pass ``"all"`` to mean it), ``"train"``, ``"val"`` (``"validation"``),
        ``"test"``, ``"all"``, TFDS slices and sums of them:
        ``"train[:10%]"``, ``"val[1000:2000]"``, ``"train[-5%:]"``,
        ``"train+val"``. A percentage p of a split of n samples is the
        boundary ``round(p * n / 100)``, as TFDS rounds.
      track: the picture track: ``"bzna_thumb"`` (default) or
        ``"bzna_input"``, as for :class:`ClassificationDataset`. Formerly
        ``input_label``, which still works until the next release, with a
        ``FutureWarning``.

    Raises:
      FileNotFoundError: no such file, a directory without ilsvrc2012.bzna/.mp4 or
        per-split files, or an incomplete set of shards.
      ValueError: a malformed split, or a file too small to hold val and test
        (150,000 entries) when a named split is asked for; a named split of
        several files not named by split; a directory, pattern or list that
        also holds .bzna files of no split, or two sets of files for one
        split; files whose class names disagree (as for
        :class:`ClassificationDataset`).

    Example:

    ```python
    train = bzna_tf.ImageNet("data/ilsvrc2012.bzna", split="train").as_dataset(
        batch_size=256, shape=(224, 224), shuffle=True, seed=1234,
        warp=bzna_tf.layers.RandomResizedCrop(224, 224, flip_h=0.5),
        normalize=((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))
    ```
    """

    num_classes = 1000

    @keywords(renamed={"input_label": "track"})
    def __init__(self, root, split: str | None = None, track: str = "bzna_thumb"):
        paths, self._groups, self._where = _imagenet_layout(root)
        super().__init__(paths, track=track, split=split)
        if split is None:
            try:
                named = self._named_splits()
            except ValueError:  # a file too small to split: it names no split
                named = {}
            self._splits_read = tuple(s for s in IMAGENET_SPLITS if len(named.get(s, ())) > 0)
        top = int(self._index.targets.max(initial=-1))
        if top >= self.num_classes:  # 1-based labels (a model's 1000-way output would be off by one)
            raise ValueError(
                f"{root}: targets reach {top}, past ImageNet's 0..999: converted from the classic "
                "TFRecords' labels 1..1000 without --label-offset -1? Convert them again with it (or read "
                "the files with ClassificationDataset)"
            )

    @classmethod
    @keywords(renamed={"input_label": "track"})
    def from_sample_list(cls, sample_list, split: str | None = None, track: str = "bzna_thumb"):
        """Opens the ImageNet files a sample list names (one whole file, or per-split files and shards, as
        ``root`` takes them) and selects its samples."""
        lst = SampleList.of(sample_list)
        paths = in_shard_order(lst.data_paths())
        return cls(paths[0] if len(paths) == 1 else paths, split=split, track=track).select(lst)

    def _check_selection(self, selection, options, *, listed: bool) -> None:
        named = self._named_splits() if len(self._splits_read) > 1 and not listed else {}
        read = [s for s in self._splits_read if s in named and _within(selection, named[s]).any()]
        if len(read) > 1:
            raise ValueError(
                f"{self!r} holds the {' and '.join(read)} splits, and as_dataset would read them "
                "together (training on validation images, or evaluating on training ones). Open it with "
                "split='train' or split='val' (ImageNet(root, split=...)); to read every sample on purpose, "
                "split='all'"
            )
        super()._check_selection(selection, options, listed=listed)

    def _named_splits(self) -> dict[str, range]:
        groups = getattr(self, "_groups", None)
        if isinstance(groups, str):  # several files, not named by split
            return {"all": range(len(self._index))}
        if not groups:
            return imagenet_splits(len(self._index))
        starts = self._index.starts
        splits = {"all": range(len(self._index))}
        for name, (first, last) in groups.items():
            splits[name] = range(int(starts[first]), int(starts[last]))
        if "val" in splits:
            splits["validation"] = splits["val"]
        return splits

    def _unavailable_splits(self) -> dict[str, str]:
        groups = getattr(self, "_groups", None)
        if isinstance(groups, str):
            return dict.fromkeys((*IMAGENET_SPLITS, "validation"), groups)
        if groups:
            return {
                name: f"{self._where} holds no {name} files (train/val/test *.bzna or shards of them)"
                for name in (*IMAGENET_SPLITS, "validation")
                if {"validation": "val"}.get(name, name) not in groups
            }
        reason = imagenet_size_error(len(self._index))
        return dict.fromkeys((*IMAGENET_SPLITS, "validation"), reason) if reason else {}


def _within(indices, span: range):
    """Which of ``indices`` are in ``span`` (a split's range of global indices)."""
    return (indices >= span.start) & (indices < span.stop)


# Per-split files: train.bzna, val-00000-of-00004.bzna, ilsvrc2012-test.bzna, ...
_SPLIT_FILE = re.compile(r"^(?:.*[-_.])?(train|val|validation|test)(?:-\d{5,}-of-\d{5,})?\.bzna$")
_PER_SPLIT = "train.bzna, val.bzna, test.bzna, or shards such as train-00000-of-00004.bzna"


# The words of a file's name that name a split, and the splits they name.
_SPLIT_WORDS = {"train": ("train",), "training": ("train",), "trainval": ("train", "val"), "val": ("val",)}
_SPLIT_WORDS.update(valid=("val",), validation=("val",), test=("test",), testing=("test",))


def _split_of(path) -> str | None:
    """The ImageNet split a file's name gives it (``val`` for ``validation``), or None.

    Raises:
      ValueError: a name whose split word follows another split's (``train_val.bzna``, the union of two
        splits; ``val-test.bzna``): read as its last word's split, it would mix them. A split word
        elsewhere in the name (``my_test_set-val.bzna``) is the dataset's name.
    """
    name = os.path.basename(path)
    m = _SPLIT_FILE.match(name)
    if not m:
        return None
    split = {"validation": "val"}.get(m[1], m[1])
    before = re.findall(r"[a-z]+|[0-9]+", name[: m.start(1)].lower())[-1:]  # the word before it
    words = {split, *(s for w in before for s in _SPLIT_WORDS.get(w, ()))}
    if len(words) > 1:
        raise ValueError(
            f"{path}: its name names the {' and '.join(sorted(words))} splits, so it may hold more than one "
            f"(a union of {' and '.join(sorted(words))} for a final fit?): read by its last word as the "
            f"{split} split, it would mix them. Rename it to name one split ({split}.bzna) if it holds only "
            f"that one, else move it out of the files ImageNet reads and open it with "
            "bzna_tf.ClassificationDataset"
        )
    return split


def _imagenet_layout(root):
    """(paths, split groups, where) of an ImageNet root.

    The groups are None for one whole file (a file, or a directory holding
    ``ilsvrc2012.bzna``/``.mp4``, not named by split): its splits are counted
    from its end (SPEC section 3). Files named by split (a directory of
    per-split files or shards, a pattern or a list of them, or one such
    file): the files in train, val, test order, and the groups are each
    split's (first file, end file) numbers. Several files not named by split:
    the groups are why they have no named splits (the count from the end is
    for one whole file). ``where``: how to name the files in messages.
    """
    if isinstance(root, (list, tuple)):
        return _named_by_split(expand_paths(root), "the list of files")
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(
            "Expected `root` as a path, directory or pattern (a str or os.PathLike), or a list of them. "
            f"Received: root={root!r}"
        )
    root = expand_user(os.fspath(root))
    if is_url(root):
        import tensorflow as tf

        is_dir, exists = tf.io.gfile.isdir(root), tf.io.gfile.exists
    else:
        is_dir, exists = os.path.isdir(root), os.path.exists
    if not is_dir:
        pattern = set("*?[") & set(root) and not exists(root)
        return _named_by_split(expand_paths(root), f"the pattern {root!r}" if pattern else root)
    try:
        found = directory_files(root)
    except FileNotFoundError:
        found = []
    for name in IMAGENET_FILENAMES:
        path = root.rstrip("/") + "/" + name if is_url(root) else os.path.join(root, name)
        if exists(path):
            others = [os.path.basename(p) for p in found if os.path.basename(p) != name]
            if others:
                raise ValueError(
                    f"{root} holds {name} and other .bzna files ({', '.join(others[:5])}"
                    f"{' ...' if len(others) > 5 else ''}): open the one you mean by its path"
                )
            return path, None, root
    return (*_per_split_files(root, found), root)


def _named_by_split(files, where):
    """:func:`_imagenet_layout` of the files a path, a pattern or a list gives."""
    splits = [_split_of(p) for p in files]
    if all(splits):
        return (*_grouped(files, splits, where), where)
    if len(files) == 1:
        return files[0], None, where
    if any(splits):
        strays = [os.path.basename(p) for p, s in zip(files, splits, strict=True) if s is None]
        named = next(os.path.basename(p) for p, s in zip(files, splits, strict=True) if s)
        raise ValueError(
            f"{where}: files named by split ({named}) and files of no ImageNet split ({', '.join(strays[:5])}"
            f"{' ...' if len(strays) > 5 else ''}): ImageNet reads several files as per-split files, "
            f"{_PER_SPLIT}. Leave the others out (or read the files you mean with "
            "bzna_tf.ClassificationDataset)"
        )
    names = ", ".join(os.path.basename(p) for p in files[:3]) + (" ..." if len(files) > 3 else "")
    reason = (
        f"{len(files)} files named by no ImageNet split ({names}): ImageNet counts the splits from the end "
        "of one whole file only (SPEC section 3); several files take their splits from their names, "
        f"{_PER_SPLIT}. Name the files by split, or read them with bzna_tf.ClassificationDataset (its one "
        "split, 'all', slices as '[:80%]')"
    )
    return files, reason, where


def _per_split_files(root, found):
    """(paths, groups) of a directory of per-split files: each split one shard set or one file."""
    splits = [_split_of(p) for p in found]
    if not any(splits):
        raise FileNotFoundError(
            f"{root} is a directory without {' or '.join(IMAGENET_FILENAMES)} and without per-split files "
            f"({_PER_SPLIT}){'' if found else folder_hint(root)}"
        )
    strays = [os.path.basename(p) for p, s in zip(found, splits, strict=True) if s is None]
    if strays:
        raise ValueError(
            f"{root} holds .bzna files of no ImageNet split: {', '.join(strays[:5])}"
            f"{' ...' if len(strays) > 5 else ''}. A per-split folder holds only {_PER_SPLIT}: move the "
            "others out (or open the files you mean with bzna_tf.ClassificationDataset)"
        )
    paths, groups = _grouped(found, splits, root)
    check_shard_sets(paths, root)
    return paths, groups


def _grouped(files, splits, where):
    """(the files in train, val, test order, each split's (first file, end file) numbers), refusing a
    split of more than one shard set or file."""
    by_split = {}
    for path, split in zip(files, splits, strict=True):
        by_split.setdefault(split, []).append(path)
    paths, groups = [], {}
    for name in IMAGENET_SPLITS:
        members = in_shard_order(sorted(by_split.get(name, [])))  # ./d/x-00001 sorts before d/x-00000
        if not members:
            continue
        sets = folder_sets(members)
        if len(sets) > 1:
            raise ValueError(
                f"{where} holds {len(sets)} datasets for the {name} split: {describe_sets(sets)}. Each "
                "split is one set of shards or one file: remove the others"
            )
        groups[name] = (len(paths), len(paths) + len(members))
        paths.extend(members)
    return paths, groups
