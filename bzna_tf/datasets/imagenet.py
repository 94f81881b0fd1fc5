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
    expand_user,
    folder_hint,
    is_url,
    shard_sets,
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
      root: the ``.bzna`` file, or a directory holding ``ilsvrc2012.bzna``
        (or ``ilsvrc2012.mp4``, the original tools' name), or a directory of
        per-split files as ``bzna-tf convert`` writes them: ``train.bzna``,
        ``val.bzna`` (``test.bzna``), or shards ``train-00000-of-00064.bzna``
        ..., whose splits are their files (not counted from the end); a list
        of paths or patterns reads several files as one.
      split: None (every sample), ``"train"``, ``"val"`` (``"validation"``),
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
        (150,000 entries) when a named split is asked for; a directory that
        also holds .bzna files of no split, or two sets of files for one split.

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
        paths, self._groups = _imagenet_layout(root)
        super().__init__(paths, track=track, split=split)
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
        """Opens the one ImageNet file a sample list names and selects its samples."""
        lst = SampleList.of(sample_list)
        paths = lst.data_paths()
        if len(paths) != 1:
            raise ValueError(f"ImageNet is one file; the sample list names {len(paths)}: {paths}")
        return cls(paths[0], split=split, track=track).select(lst)

    def _named_splits(self) -> dict[str, range]:
        groups = getattr(self, "_groups", None)
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
        if groups:
            folder = os.path.dirname(self.paths[0]) or "."
            return {
                name: f"{folder} holds no {name} files (train/val/test *.bzna or shards of them)"
                for name in (*IMAGENET_SPLITS, "validation")
                if {"validation": "val"}.get(name, name) not in groups
            }
        reason = imagenet_size_error(len(self._index))
        return dict.fromkeys((*IMAGENET_SPLITS, "validation"), reason) if reason else {}


# Per-split files of a directory: train.bzna, val-00000-of-00004.bzna, ilsvrc2012-test.bzna, ...
_SPLIT_FILE = re.compile(r"^(?:.*[-_.])?(train|val|validation|test)(?:-\d{5,}-of-\d{5,})?\.bzna$")
_PER_SPLIT = "train.bzna, val.bzna, test.bzna, or shards such as train-00000-of-00004.bzna"


def _imagenet_layout(root):
    """(paths, split groups) of an ImageNet root.

    One file (or a directory holding ``ilsvrc2012.bzna``/``.mp4``): its path, no
    groups (the splits are counted from the end, SPEC section 3). A directory of
    per-split files or shards: the files in train, val, test order, and each
    split's (first file, end file) numbers.
    """
    if isinstance(root, (list, tuple)):
        return list(root), None
    root = expand_user(os.fspath(root))
    if is_url(root):
        import tensorflow as tf

        is_dir, exists = tf.io.gfile.isdir(root), tf.io.gfile.exists
    else:
        is_dir, exists = os.path.isdir(root), os.path.exists
    if not is_dir:
        return root, None
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
            return path, None
    return _per_split_files(root, found)


def _per_split_files(root, found):
    """(paths, groups) of a directory of per-split files: each split one shard set or one file."""
    by_split, strays = {}, []
    for path in found:
        m = _SPLIT_FILE.match(os.path.basename(path))
        if m:
            by_split.setdefault({"validation": "val"}.get(m[1], m[1]), []).append(path)
        else:
            strays.append(os.path.basename(path))
    if not by_split:
        raise FileNotFoundError(
            f"{root} is a directory without {' or '.join(IMAGENET_FILENAMES)} and without per-split files "
            f"({_PER_SPLIT}){'' if found else folder_hint(root)}"
        )
    if strays:
        raise ValueError(
            f"{root} holds .bzna files of no ImageNet split: {', '.join(strays[:5])}"
            f"{' ...' if len(strays) > 5 else ''}. A per-split folder holds only {_PER_SPLIT}: move the "
            "others out (or open the files you mean with bzna_tf.ClassificationDataset)"
        )
    paths, groups = [], {}
    for name in IMAGENET_SPLITS:
        files = sorted(by_split.get(name, []))
        if not files:
            continue
        sets = shard_sets(files)
        if len(sets) > 1:
            raise ValueError(
                f"{root} holds {len(sets)} datasets for the {name} split: {describe_sets(sets)}. Each split "
                "is one set of shards or one file: remove the others"
            )
        check_shard_sets(files, root)
        groups[name] = (len(paths), len(paths) + len(files))
        paths.extend(files)
    return paths, groups
