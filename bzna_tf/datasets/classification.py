"""``ClassificationDataset``: a catalog of labelled samples; ``as_dataset`` yields ``(images, labels)``."""

from __future__ import annotations

import copy
import warnings

import numpy as np

import bzna_tf.format.wording as wording
from bzna_tf.datasets.arguments import HINTS, RENAMED, as_written
from bzna_tf.datasets.catalog import _AS_DATASET_ARGUMENTS, Dataset
from bzna_tf.format.keywords import keywords
from bzna_tf.format.labels import is_labelled

__all__ = ["UNLABELLED", "ClassificationDataset"]

# What ClassificationDataset.as_dataset does with samples without a label.
UNLABELLED = ("raise", "keep")


class ClassificationDataset(Dataset):
    """A labelled .bzna dataset: ``as_dataset`` yields ``(images, labels)``.

    Labels are the file's int64 targets. A sample is labelled when its target
    is 0 or more (:mod:`bzna_tf.format.labels`); samples without one (the
    unlabelled tail, e.g. ImageNet's test split, or a stored negative target)
    are unlabelled: :meth:`as_dataset` refuses them unless asked, and
    :meth:`labelled` leaves them out.

    Args:
      path_or_paths: a path, a glob pattern, or a list of them (URLs of
        TensorFlow's filesystems work).
      track: the picture track, as for :class:`Dataset`, but by default
        ``"bzna_thumb"`` (at most 512 x 512: what Benzina's ImageNet
        training reads, and quicker to decode) where :class:`Dataset` reads
        ``"bzna_input"`` (the picture as stored). Formerly ``input_label``,
        which still works until the next release, with a ``FutureWarning``.
      split: a TFDS-style selection, as for :class:`Dataset`.

    Raises:
      BznaFormatError: files that name one target differently (their labels
        would mean two classes), naming both files; and as for :class:`Dataset`.
    """

    _labels = True

    @keywords(renamed={"input_label": "track"})
    def __init__(self, path_or_paths, track: str = "bzna_thumb", *, split: str | None = None):
        super().__init__(path_or_paths, track=track, split=split)
        # Files that number their classes differently are refused now, not when class_names is first read:
        # their labels would mean two classes (read at opening: no I/O).
        self._index.class_names  # noqa: B018

    @property
    def input_label(self) -> str:
        """Deprecated: :attr:`track` (the picture track read), under its former name."""
        warnings.warn(
            "ClassificationDataset.input_label is now called `track`; the old name will be removed in the "
            "next release",
            FutureWarning,
            stacklevel=wording.user_stacklevel(),
        )
        return self.track

    @property
    def num_classes(self) -> int:
        """The number of classes: 1 + the largest target in the files, or the number of stored class names
        where that is more (a last class without images, an empty class folder, still counts); 0 when
        nothing is labelled and no class is named."""
        t = self._index.targets
        named = len(self.class_names or ())
        return max(int(t.max()) + 1 if t.size and t.max() >= 0 else 0, named)

    @property
    def class_names(self) -> list[str | None] | None:
        """The class names the converter stored, indexed by target, or None when the files hold none.

        ``bzna-tf convert`` stores the class folders' names, TFRecords'
        ``image/class/text``, TFDS's ``label.labels.txt`` or ``--class-names``.
        Targets without a known name are None. Files of the original tools hold none.
        """
        return self._index.class_names

    def labelled(self) -> ClassificationDataset:
        """A dataset of this one's labelled samples (target >= 0), in order.

        Raises:
          ValueError: no sample is labelled.
        """
        mask = is_labelled(self.targets)
        if not mask.any():
            raise ValueError(f"{self!r} holds no labelled sample (every target is negative)")
        if mask.all():
            return self
        out = self.select(mask)
        out._splits_read = self._splits_read  # chosen by label, not by position: still the splits it read
        return out

    @as_written
    @keywords(renamed=RENAMED, hints=HINTS)
    def as_dataset(
        self,
        *,
        batch_size: int,
        shape=None,
        # order
        shuffle: bool = False,
        seed: int | None = None,
        repeat=False,
        initial_epoch: int | None = None,
        # augmentation
        warp=None,
        training: bool = True,
        fill_value=None,
        antialias: bool | None = None,
        # normalisation
        normalize=None,
        # output
        data_format: str | None = None,
        drop_remainder: bool = False,
        with_filenames: bool = False,
        device: str = "auto",
        on_error: str = "raise",
        # distribution
        input_context=None,
        shard=None,
        shard_by: str = "samples",
        sample_list=None,
        # tf.data tuning
        num_parallel_calls: int | None = None,
        prefetch: int | None = None,
        # labels
        unlabelled: str = "raise",
    ):
        """``(images, labels)`` batches: :meth:`Dataset.as_dataset` with the int64 labels (N,).

        Every argument but ``unlabelled`` is :meth:`Dataset.as_dataset`'s,
        with the same default and meaning: see there.

        Args:
          unlabelled: what samples without a label (target < 0) among those
            read do. ``"raise"`` (default): as_dataset refuses them, saying
            how many there are: ``model.fit`` would fail on their negative
            label (or, with some losses, train on it). Read only the labelled
            ones with :meth:`labelled` (or a split that holds none).
            ``"keep"``, with ``training=False``: they come with their label,
            -1 for a sample without a target (to predict on every sample). To
            read unlabelled pictures with a training warp, use
            :class:`Dataset` (images, no labels).

        Raises:
          ValueError, TypeError: bad arguments (as for :meth:`Dataset.as_dataset`).
          ValueError: unlabelled samples among those read.
        """
        # Dataset.as_dataset's arguments, by name: the signature is their only list here (autograph adds
        # names of its own to locals(), as_dataset called in a tf.function).
        arguments = {k: v for k, v in locals().items() if k in _AS_DATASET_ARGUMENTS}
        if unlabelled not in UNLABELLED:
            raise ValueError(f"Expected `unlabelled` in {UNLABELLED}. Received: unlabelled={unlabelled!r}")
        return self._reading_unlabelled(unlabelled)._as_dataset(sample_list, arguments)

    def _reading_unlabelled(self, unlabelled: str) -> ClassificationDataset:
        """A copy whose as_dataset does ``unlabelled`` with unlabelled samples ("show": previews,
        which caption them "-", whatever ``training``)."""
        out = copy.copy(self)
        out._unlabelled = unlabelled
        return out

    _unlabelled = "raise"

    def _check_selection(self, selection, options, *, listed: bool) -> None:
        missing = int(np.count_nonzero(~is_labelled(self._index.targets[selection])))
        if (
            missing == 0
            or self._unlabelled == "show"
            or (self._unlabelled == "keep" and not options.training)
        ):
            return
        read = f"{self!r}{' with its sample_list' if listed else ''}"
        what = (
            f"{read} reads {wording.count(missing, 'unlabelled sample')} (target < 0) of {len(selection):,}"
        )
        if self._unlabelled == "keep":
            raise ValueError(
                f"{what}: unlabelled='keep' is for training=False (model.predict, or an evaluation of your "
                "own that leaves negative labels out). To train on their pictures, read them with "
                "bzna_tf.Dataset (images, no labels). Received: unlabelled='keep', training=True"
            )
        raise ValueError(
            f"{what}: model.fit would get their negative labels (-1 where a sample has no target) as "
            "classes. Read only the labelled samples with "
            "ds.labelled() (or a split that holds only labelled ones); or, to predict on every sample (the "
            "unlabelled ones with their negative label), pass training=False, unlabelled='keep'"
        )
