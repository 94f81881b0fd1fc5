"""Datasets of .bzna files for ``tf.data`` and Keras: ``Dataset``, ``ClassificationDataset``, ``ImageNet``.

Opening a dataset reads the files' indices (in Python, no TensorFlow);
:meth:`Dataset.as_dataset` builds the ``tf.data`` pipeline::

    stream positions p (tf.data.Dataset.range: splittable, so tf.data service
      hands them out; with initial_epoch=None, each iteration's range starts
      where the EpochState variable says)
      -> batch -> per batch: BznaEpochSchedule (p -> epoch p // per_epoch and
         the sample at that place of the epoch's permutation and shard)
      -> BznaReadSamples (H.265 pictures, sizes, targets)
      -> each sample's warp matrix from (seed, epoch, index)
      -> decode + warp + normalise (one fused op) -> prefetch

Every stage is a TensorFlow op: iterators checkpoint and restore mid-epoch,
and the pipeline (with an ``initial_epoch``) serialises to a graph.
"""

from __future__ import annotations

import copy
import math
import os
import random as _random
import re
import uuid as _uuid

import numpy as np

from bzna_tf.format import wording
from bzna_tf.format.samplelist import SampleList, SampleListError
from bzna_tf.format.shards import BznaShards, expand_paths, file_numbers, is_url
from bzna_tf.format.splits import IMAGENET_SPLITS, imagenet_size_error, imagenet_splits, select_split

__all__ = ["ClassificationDataset", "Dataset", "EpochState", "ImageNet"]

# Benzina's track names, and the source op's short names.
TRACKS = {"bzna_input": "input", "bzna_thumb": "thumb", "input": "input", "thumb": "thumb"}
LAYOUTS = ("NHWC", "NCHW")
DEVICES = ("auto", "cpu", "gpu")
SHARD_BY = ("samples", "files")
IMAGENET_FILENAMES = ("ilsvrc2012.bzna", "ilsvrc2012.mp4")
_SEED_MOD = 2**63


def _track(track: str) -> str:
    if track not in TRACKS:
        raise ValueError(f"Expected the track to be one of {list(TRACKS)}. Received: {track!r}")
    return TRACKS[track]


def _positive_int(value, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"Expected `{arg}` as a positive integer. Received: {arg}={value!r}")
    return int(value)


def _shape(shape, warp):
    """The output (height, width): from ``shape``, or from a warp layer's (height, width)."""
    layer_hw = (warp.height, warp.width) if _is_warp_layer(warp) else None
    if shape is None:
        if layer_hw is None:
            raise ValueError(
                "Expected `shape` = (height, width) of the output images (or a warp layer, which has one). "
                "Received: shape=None"
            )
        return layer_hw
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape, shape)
    try:
        hw = tuple(_positive_int(v, "shape") for v in shape)
    except TypeError as e:
        raise ValueError(f"Expected `shape` = (height, width). Received: shape={shape!r}") from e
    if len(hw) != 2:
        raise ValueError(f"Expected `shape` = (height, width). Received: shape={shape!r}")
    if layer_hw is not None and layer_hw != hw:
        raise ValueError(
            f"`shape` {hw} differs from the warp layer's (height, width) {layer_hw}: "
            "give one, or make them agree"
        )
    return hw


def _is_warp_layer(warp) -> bool:
    return hasattr(warp, "transform") and hasattr(warp, "height") and hasattr(warp, "matrices")


def _shard(shard, input_context):
    """(count, index) of this pipeline's shard."""
    if shard is not None and input_context is not None:
        raise ValueError("Give `shard` or `input_context`, not both")
    if input_context is not None:
        shard = (input_context.num_input_pipelines, input_context.input_pipeline_id)
    if shard is None:
        return 1, 0
    try:
        count, index = (int(v) for v in shard)
    except (TypeError, ValueError) as e:
        raise ValueError(f"Expected `shard` = (count, index). Received: shard={shard!r}") from e
    if count < 1 or not 0 <= index < count:
        raise ValueError(
            f"Expected `shard` = (count, index) with 0 <= index < count. Received: shard={shard!r}"
        )
    return count, index


def _nonnegative_int(value, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"Expected `{arg}` as a non-negative integer. Received: {arg}={value!r}")
    return int(value)


# The end of an endless pipeline's stream of positions, and the epochs between
# the starts of two iterations of an endless pipeline.
_ENDLESS = 2**62
_ENDLESS_STRIDE = 2**20


class EpochState:
    """Where the next iteration of an ``as_dataset`` pipeline starts (``ds.bzna_epochs``).

    A pipeline built with ``initial_epoch=None`` yields, on its ``k``-th
    iteration (``iter(ds)``, each Keras epoch), the data epochs ``k *
    epochs .. (k + 1) * epochs - 1`` (``epochs`` per iteration: 1, or
    ``repeat``). The next iteration's ``k`` (and, for an endless pipeline,
    batches to skip at its start) live in a CPU variable: each iteration
    reads it when it starts and advances ``k`` by one. :meth:`set` moves it;
    :class:`bzna_tf.callbacks.SyncEpochs` sets it from Keras' epoch, so a
    restarted ``model.fit`` sees the data an uninterrupted one saw.

    Attributes:
      epochs: data epochs per iteration (None: endless).
      batches: batches per iteration (None: endless).
      variable: the int64 ``[iteration, skip]`` variable.
    """

    def __init__(self, epochs, per_epoch: int, batch_size: int, batches):
        import tensorflow as tf
        from tensorflow.python.ops import resource_variable_ops

        self.epochs = epochs
        self.per_epoch = per_epoch
        self.batch_size = batch_size
        self.batches = None if epochs is None else int(batches)
        # ResourceVariable itself, not tf.Variable: a distribution strategy in
        # scope would make a mirrored variable, which tf.data cannot capture.
        with tf.init_scope(), tf.device("/cpu:0"):
            self.variable = resource_variable_ops.ResourceVariable(
                [0, 0], dtype=tf.int64, trainable=False, name="bzna_epoch_state"
            )

    def set(self, iteration: int, skip: int = 0):
        """The next iteration is iteration ``iteration``, starting ``skip`` batches in (endless pipelines)."""
        iteration = _nonnegative_int(iteration, "iteration")
        skip = _nonnegative_int(skip, "skip")
        if skip and self.epochs is not None:
            raise ValueError("`skip` is for endless pipelines (repeat=True)")
        self.variable.assign([iteration, skip])

    def get(self) -> tuple[int, int]:
        """(iteration, skip) of the next iteration."""
        k, skip = self.variable.numpy().tolist()
        return int(k), int(skip)

    def positions(self):
        """The root: each iteration, the stream positions of its epochs (see ``epoch_schedule``)."""
        import tensorflow as tf

        state, per_epoch, batch_size = self.variable, self.per_epoch, self.batch_size
        endless = self.epochs is None
        stride = _ENDLESS_STRIDE if endless else self.epochs

        def start(_):
            v = state.read_value()
            first = v[0] * stride * per_epoch
            if endless:
                first, stop = first + v[1] * batch_size, tf.constant(_ENDLESS, tf.int64)
            else:
                stop = first + stride * per_epoch
            with tf.control_dependencies([state.assign(tf.stack([v[0] + 1, tf.constant(0, tf.int64)]))]):
                return tf.identity(first), tf.identity(stop)

        return tf.data.Dataset.range(1).map(start).flat_map(lambda a, b: tf.data.Dataset.range(a, b))


_warned_auto_shard = False


def _num_workers() -> int:
    """Workers of the multi-worker job this process belongs to (1 when none): from a
    distribution strategy in scope, else from ``$TF_CONFIG``."""
    import json

    import tensorflow as tf

    cluster = None
    if tf.distribute.has_strategy():
        resolver = getattr(tf.distribute.get_strategy(), "cluster_resolver", None)
        if resolver is not None:
            cluster = resolver.cluster_spec().as_dict()
    if cluster is None:
        try:
            cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
        except (ValueError, AttributeError):
            cluster = {}
    return sum(len(cluster.get(job) or ()) for job in ("chief", "worker")) or 1


def _warn_auto_shard(workers: int) -> None:
    """Once per process: an unsharded pipeline in a multi-worker job gets DATA auto-sharding."""
    global _warned_auto_shard
    if _warned_auto_shard:
        return
    _warned_auto_shard = True
    import warnings

    warnings.warn(
        f"as_dataset(...) without `input_context` or `shard` in a job of {workers} workers: "
        "tf.distribute's auto-sharding cannot split this pipeline by file (its source is not a "
        "TensorFlow file reader) and falls back to DATA, so every worker decodes every picture and "
        "keeps 1/N of the batches. Build it per worker instead: "
        "strategy.distribute_datasets_from_function(lambda ctx: ds.as_dataset(..., input_context=ctx)), "
        "or pass shard=(num_workers, worker_index).",
        stacklevel=3,
    )


def _epochs(repeat):
    """How many epochs one iteration gives: an int, or None for endless."""
    if repeat is True:
        return None
    if repeat is False or repeat is None:
        return 1
    if isinstance(repeat, (int, np.integer)) and repeat > 0:
        return int(repeat)
    raise ValueError(
        f"Expected `repeat` as True, False or a positive number of epochs. Received: repeat={repeat!r}"
    )


class Dataset:
    """The pictures of one or more .bzna files, as a ``tf.data`` pipeline.

    Several files (a list, or glob patterns, expanded in sorted order) read as
    one dataset, concatenated in order: sample ``i`` of the second file is
    global sample ``len(first) + i``. Paths may be local or URLs of
    TensorFlow's filesystems (``gs://...``).

    Args:
      path_or_paths: a path, a glob pattern, or a list of them.
      track: ``"bzna_input"`` (default: the full-size picture) or
        ``"bzna_thumb"`` (the thumbnail, at most 512 x 512; the full
        picture for images that need none). ``"input"``/``"thumb"`` also work.
      split: a selection of the samples, TFDS style, over the whole file
        called ``all``: ``"all[:90%]"``, ``"[90%:]"`` (a nameless slice means
        ``all``), ``"[1000:2000]"``. Default: every sample.

    Raises:
      BznaFormatError: a file that is not a readable .bzna.
      FileNotFoundError: a missing file, or a pattern matching nothing.
      ValueError: an unknown track or a malformed split.

    Example:

    ```python
    ds = bzna_tf.Dataset("pictures.bzna")
    images = ds.as_dataset(batch_size=32, shape=(224, 224))  # (32, 224, 224, 3) float32 batches
    ```
    """

    def __init__(self, path_or_paths, track: str = "bzna_input", *, split: str | None = None):
        self.track = track
        self._track = _track(track)
        self._index = BznaShards(path_or_paths)
        self.split = split
        self._indices = self._select(split)
        self._indices.flags.writeable = False

    def _named_splits(self) -> dict[str, range]:
        return {"all": range(len(self._index))}

    def _unavailable_splits(self) -> dict[str, str]:
        """Split names this data lacks -> why."""
        return {}

    def _select(self, split) -> np.ndarray:
        if split is None:
            return np.arange(len(self._index), dtype=np.int64)
        try:
            return select_split(
                split, self._named_splits(), default="all", unavailable=self._unavailable_splits()
            )
        except ValueError as e:
            raise ValueError(f"{e} (in {self._describe_files()})") from None

    def _describe_files(self) -> str:
        paths = self.paths
        return paths[0] if len(paths) == 1 else f"{len(paths)} files, {paths[0]} ..."

    # ------------------------------------------------------------------ facts

    @property
    def paths(self) -> list[str]:
        """The files, in order."""
        return list(self._index.paths)

    @property
    def indices(self) -> np.ndarray:
        """The global sample indices this dataset reads, in order (int64, read-only)."""
        return self._indices

    def __len__(self) -> int:
        return len(self._indices)

    def __repr__(self):
        split = f", split={self.split!r}" if self.split is not None else ""
        return f"{type(self).__name__}({self._describe_files()!r}{split}, samples={len(self)})"

    @property
    def targets(self) -> np.ndarray:
        """Each selected sample's target (int64), -1 for samples without one."""
        return self._index.targets[self._indices]

    @property
    def filenames(self) -> list[str | None]:
        """Each selected sample's stored filename (None where a file has no name track)."""
        names = self._index.filenames()
        return [names[i] for i in self._indices.tolist()]

    def select(self, positions) -> Dataset:
        """A dataset of some of these samples.

        ``positions`` index this dataset (0 .. len - 1), or are a boolean mask
        of ``len(self)`` entries, or a :class:`bzna_tf.SampleList` (see
        :meth:`sample_list_positions`).

        Example: a random 10% held out for validation::

            perm = np.random.default_rng(0).permutation(len(ds))
            val, train = ds.select(perm[: len(ds) // 10]), ds.select(perm[len(ds) // 10 :])
        """
        if isinstance(positions, SampleList):
            positions = self.sample_list_positions(positions)
        p = np.asarray(positions)
        if p.dtype == bool:
            if p.shape != (len(self),):
                raise ValueError(f"Expected a boolean mask of {len(self)} entries. Received: shape {p.shape}")
            p = np.flatnonzero(p)
        if p.ndim != 1 or not (p.size == 0 or np.issubdtype(p.dtype, np.integer)):
            raise ValueError(
                f"Expected a vector of integer positions. Received: {p.dtype} array of shape {p.shape}"
            )
        if p.size == 0:
            raise ValueError("Expected at least one position. Received: an empty selection")
        if p.min() < -len(self) or p.max() >= len(self):
            raise IndexError(f"position out of range for a dataset of {wording.count(len(self), 'sample')}")
        out = copy.copy(self)
        out._indices = self._indices[p]
        out._indices.flags.writeable = False
        out.split = None
        return out

    def sample_list_positions(self, sample_list) -> np.ndarray:
        """The positions in this dataset of the samples a sample list uses.

        The list narrows the dataset: the result holds the samples that are
        both in this dataset (its split or selection) and used by the list,
        in the list's order (exclusion lists: file order). The list's files
        are matched to this dataset's files by path (base + file), or, for a
        list written on another machine, by their trailing path components.

        Args:
          sample_list: a :class:`bzna_tf.SampleList` or the path of a list file.

        Raises:
          SampleListError: a malformed list, or one that names a file, an
            index or a filename this dataset's files lack (naming the line);
            or no listed sample is in this dataset.
        """
        lst = SampleList.of(sample_list)
        files = self._index.files
        wanted = lst.global_indices(self.paths, self._index.starts, lambda k: files[k].filenames())
        sel = self._indices
        order = np.argsort(sel, kind="stable")
        at = np.searchsorted(sel[order], wanted).clip(max=max(len(sel) - 1, 0))
        found = sel[order][at] == wanted
        if not found.any():
            raise SampleListError(
                f"none of the listed samples ({wording.count(len(wanted), 'sample')}) is in this dataset "
                f"({self!r})",
                path=lst.path,
            )
        return order[at[found]]

    def to_sample_list(self, type: str = "CONDUIT_HDF5_INCLUSION", *, ids: str = "indices", base=None):
        """This dataset's samples (its split or selection) as a :class:`bzna_tf.SampleList`.

        Args:
          type: one of ``bzna_tf.LIST_TYPES``.
          ids: ``"indices"`` (each sample's index in its file) or ``"names"``
            (its stored filename; refused where a name could not be read back).
          base: line 3, the files' base directory (default: their common one).
        """
        files = self._index.files
        return SampleList.from_indices(
            self.paths,
            self._index.starts,
            self._indices,
            kind=type,
            ids=ids,
            filenames_of=lambda k: files[k].filenames(),
            base=base,
        )

    @classmethod
    def from_sample_list(cls, sample_list, **kwargs) -> Dataset:
        """Opens the files a sample list names and selects its samples.

        Args:
          sample_list: a :class:`bzna_tf.SampleList` or the path of a list file.
          **kwargs: the class's other arguments (``track``, ``input_label``, ...).
        """
        lst = SampleList.of(sample_list)
        return cls(lst.data_paths(), **kwargs).select(lst)

    def close(self):
        """Closes the files' index readers (the ``tf.data`` pipelines read on their own)."""
        self._index.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ tf.data

    def _outputs(self, images, element, with_filenames):
        return (images, element["filename"]) if with_filenames else images

    def _file_shard(self, sel, count, index, training) -> np.ndarray:
        """The samples of ``sel`` in the files of shard ``index`` (file k -> shard k % count)."""
        num_files = len(self._index.files)
        if num_files < count and training:
            raise ValueError(
                "shard_by='files' needs at least as many files as shards: "
                f"{wording.count(num_files, 'file')} for {count} shards (use more, smaller .bzna files, or "
                "shard_by='samples')"
            )
        return sel[file_numbers(self._index.starts, sel) % count == index]

    def _payload_mode(self, device, kwargs):
        """True for device="gpu" (the model decodes); checks that tf.data was asked for no image options."""
        if device != "gpu":
            return False
        given = [k for k, v in kwargs.items() if v is not None]
        if given:
            raise ValueError(
                f"With device='gpu' the images are made by the model's first layer, "
                f"bzna_tf.layers.DecodeWarp: pass {', '.join(given)} to it, not to as_dataset"
            )
        return True

    def as_dataset(
        self,
        *,
        batch_size: int,
        shape=None,
        shuffle: bool = False,
        seed: int | None = None,
        warp=None,
        mean=None,
        std=None,
        bias=None,
        norm=None,
        layout: str = "NHWC",
        drop_remainder: bool = False,
        repeat=False,
        with_filenames: bool = False,
        input_context=None,
        shard=None,
        shard_by: str = "samples",
        sample_list=None,
        device: str = "auto",
        training: bool = True,
        fill_value=None,
        antialias=None,
        initial_epoch=None,
        num_parallel_calls=None,
        prefetch=None,
        on_error: str = "raise",
    ):
        """A ``tf.data.Dataset`` of decoded, warped, normalised batches.

        Elements are float32 images (N, height, width, 3) (``layout="NCHW"``:
        (N, 3, height, width)); :class:`ClassificationDataset` adds the int64
        labels (N,): ``(images, labels)``, ready for ``model.fit``.

        Order: without ``shuffle``, the selection's order. With ``shuffle``,
        each epoch is a full random permutation (not a buffer), drawn from
        ``seed`` and the epoch: each iteration of the dataset (each Keras
        epoch) gets a new one, and the same seed gives the same sequence of
        batches, whatever the parallelism. Each sample's crop and flips depend
        on (seed, epoch, sample index) only: new each epoch, reproducible, and
        restored exactly with the iterator (``tf.train.Checkpoint``).

        Args:
          batch_size: images per batch (under ``tf.distribute``, per replica:
            ``input_context.get_per_replica_batch_size(global_batch)``).
          shape: the output (height, width), or one int for a square; default:
            the warp layer's.
          shuffle: permute the samples each epoch.
          seed: an integer for the permutations and the random warps. None
            draws one (then runs differ). Sharded shuffling needs one (every
            worker must draw the same permutation).
          warp: a ``bzna_tf.layers`` warp layer (``RandomResizedCrop(224, 224,
            flip_h=0.5)``, ``CenterResizedCrop(224, 224, 224 / 256)``, ...)
            or a ``bzna_tf.transforms`` transform. The layer's own seed is not
            used: ``seed`` is. Default: ``CenterResizedCrop(scale=1)``, the
            image scaled to cover ``shape`` and its centre kept.
          mean, std: normalisation in [0, 1] units, torchvision style
            (``(0.485, 0.456, 0.406)``, ``(0.229, 0.224, 0.225)``): images
            become ``(rgb / 255 - mean) / std``. Or:
          bias, norm: the kernel's own terms, ``(rgb - bias) * norm`` with rgb
            in [0, 255]. With none of the four, images are RGB in [0, 255].
          layout: ``"NHWC"`` (default) or ``"NCHW"``.
          drop_remainder: drop the last batch of an epoch when it is short, so
            the batch dimension is static. (Endless datasets always have it.)
          repeat: False (one epoch per iteration), True (endless: pass
            ``steps_per_epoch`` to ``model.fit``), or a number of epochs.
            Batches run across epoch boundaries.
          with_filenames: add each sample's stored filename (tf.string) as the
            last element of the tuple. (Not for ``model.fit``, which would
            take a third element as sample weights.)
          input_context: a ``tf.distribute.InputContext``: read shard
            ``input_pipeline_id`` of ``num_input_pipelines``.
          shard: ``(count, index)``: read only shard ``index`` of ``count``
            (workers, ranks). Shards are disjoint and together hold every
            sample once per epoch.
          shard_by: how samples go to shards. ``"samples"`` (default): every
            ``count``-th sample of each epoch's order; shards differ in size by
            at most one and, with ``shuffle``, are drawn from each epoch's
            permutation (so they change every epoch; needs a ``seed``).
            ``"files"``: whole .bzna files, file ``k`` of the dataset's files
            to shard ``k % count`` (Megatron-Energon's way: use many more
            files than shards); each shard reads only its own files, always
            the same ones, shuffled within the shard (no shared seed needed).
            Sizes follow the files'. A shard that gets no sample is an error,
            except with ``training=False`` (validation strided across
            workers: some may get less or nothing, and yield no batch).
          sample_list: a :class:`bzna_tf.SampleList` or the path of an LBANN
            sample list: only the samples it uses (and this dataset holds)
            are read, in the list's order (see :meth:`sample_list_positions`).
          device: where pictures are decoded and warped. ``"cpu"``: in
            ``tf.data`` (FFmpeg's HEVC decoder fused with the warp), elements
            are images. ``"gpu"``: in the model, whose first layer is
            :class:`bzna_tf.layers.DecodeWarp` (NVDEC + the CUDA warp when the
            model runs on a GPU); elements are ``{"data", "matrices"}``
            (pictures and each sample's matrix, still reproducible from the
            seed) instead of images, and mean/std/bias/norm/fill_value/
            antialias/layout belong to that layer. ``"auto"`` (default) is ``"cpu"``: the GPU
            path changes what the dataset yields, so it is asked for by name.
          training: False makes the warp deterministic (its centre values:
            use it to evaluate with a training warp).
          fill_value: the raw value of pixels that fall outside the picture
            (a scalar or 3 values); default: the warp layer's, or 0.
          antialias: where the warp shrinks the picture, average each output
            pixel's footprint (a triangle filter as wide as the reduction, as
            torchvision and DALI do) instead of sampling a point (Benzina's
            warp); see ``bzna_tf.ops.decode_warp``. Default: the warp layer's,
            or True.
          initial_epoch: None (default): iteration ``k`` of the dataset yields
            data epochs ``k * epochs ...`` (``epochs`` = 1 or ``repeat``), from
            a counter in ``ds.bzna_epochs`` (:class:`EpochState`) that
            :class:`bzna_tf.callbacks.SyncEpochs` keeps in step with Keras'
            epochs. An int: a stateless pipeline, every iteration yields epochs
            ``initial_epoch ...``; it serialises, as tf.data service needs.
          num_parallel_calls: batches decoded at once (default ``AUTOTUNE``;
            each batch is also spread over TensorFlow's CPU threads).
          prefetch: batches to prefetch (default ``AUTOTUNE``).
          on_error: what a sample that cannot be read or decoded does (a
            damaged or malformed sample, a checksum mismatch, a short or failed
            read). ``"raise"`` (default): the iteration fails with an error
            naming the file and the sample's index in it. ``"skip"``: the
            sample is dropped from its batch (the rest of the batch is kept, so
            batches can be shorter than ``batch_size`` and their first
            dimension is None), a warning names the file, the sample and the
            reason (the first 10 one by one, then a summary at most every 30
            s), and ``ds.bzna_skipped`` (:class:`bzna_tf.ops.SkippedSamples`)
            counts them. A file that cannot be opened or indexed still fails.
            With ``device="gpu"`` only reading errors are skipped here:
            pictures are decoded in the model, where a bad one fails the step.

        Returns:
          A ``tf.data.Dataset`` of known cardinality (infinite with ``repeat=True``).

        Raises:
          ValueError: bad arguments (each names the argument).
        """
        import tensorflow as tf

        from bzna_tf.ops.source import (
            SkippedSamples,
            check_on_error,
            epoch_schedule,
            read_samples,
            report_skips,
            sample_names,
        )
        from bzna_tf.ops.warp import decode_warp
        from bzna_tf.transforms import CenterResizedCrop, WarpTransform
        from bzna_tf.transforms.constant import bias_norm, per_channel

        batch_size = _positive_int(batch_size, "batch_size")
        if warp is None:
            warp = CenterResizedCrop(scale=1.0)
        if not (_is_warp_layer(warp) or isinstance(warp, WarpTransform)):
            raise TypeError(
                "Expected `warp` to be a bzna_tf.layers warp layer or a bzna_tf.transforms transform. "
                f"Received: warp={warp!r}"
            )
        out_hw = _shape(shape, warp)
        if layout not in LAYOUTS:
            raise ValueError(f"Expected `layout` in {LAYOUTS}. Received: layout={layout!r}")
        if device not in DEVICES:
            raise ValueError(f"Expected `device` in {DEVICES}. Received: device={device!r}")
        payloads = self._payload_mode(
            device,
            dict(
                mean=mean,
                std=std,
                bias=bias,
                norm=norm,
                fill_value=fill_value,
                antialias=antialias,
                layout=None if layout == "NHWC" else layout,
            ),
        )
        skip = check_on_error(on_error) == "skip"
        epochs = _epochs(repeat)
        count, index = _shard(shard, input_context)
        if shard is None and input_context is None and (workers := _num_workers()) > 1:
            _warn_auto_shard(workers)
        if shard_by not in SHARD_BY:
            raise ValueError(f"Expected `shard_by` in {SHARD_BY}. Received: shard_by={shard_by!r}")
        sel = self._indices if sample_list is None else self._indices[self.sample_list_positions(sample_list)]
        if shard_by == "files" and count > 1:
            sel = self._file_shard(sel, count, index, training)
            count, index = 1, 0
        if shuffle and count > 1 and seed is None:
            raise ValueError(
                "Sharded shuffling needs a `seed`: every shard must draw the same permutation "
                "for the shards to stay disjoint"
            )
        bias, norm = bias_norm(bias, norm, mean, std)
        if fill_value is None:
            fill_value = getattr(warp, "fill_value", 0.0)
        oob = per_channel(fill_value, "fill_value")
        if antialias is None:
            antialias = getattr(warp, "antialias", True)
        transform = warp.transform if _is_warp_layer(warp) else warp
        if seed is None:
            seed = _random.SystemRandom().randrange(_SEED_MOD)
        seed = int(seed) % _SEED_MOD
        autotune = tf.data.AUTOTUNE
        num_parallel_calls = autotune if num_parallel_calls is None else num_parallel_calls
        prefetch = autotune if prefetch is None else prefetch

        n = len(sel)
        per_epoch = len(range(index, n, count))
        if per_epoch == 0 and (training or epochs is None):
            raise ValueError(
                f"Shard {index} of {count} of {wording.count(n, 'sample')} is empty (training=False lets a "
                "validation shard be empty, when it is not repeated endlessly)"
            )
        files = self.paths
        track = self._track
        selection = tf.constant(sel, tf.int64)
        seed_t = tf.constant(seed, tf.int64)
        starts = self._index.starts
        counter = f"bzna_tf-{_uuid.uuid4().hex}" if skip else ""

        def keep_only(ok, images, el):
            """The samples where ok is true, of images and of el's per-sample vectors."""
            el = {k: tf.boolean_mask(v, ok) for k, v in el.items()}
            return tf.nest.map_structure(lambda t: tf.boolean_mask(t, ok), images), el

        def decode(positions):
            idx, epoch = epoch_schedule(positions, selection, seed_t, shuffle=shuffle, shard=(count, index))
            el = read_samples(files, idx, track=track, with_filename=with_filenames, on_error=on_error)
            in_shapes = tf.stack([el["height"], el["width"]], axis=-1)
            if skip:  # a sample that could not be read has sizes 0: any matrix will do
                in_shapes = tf.maximum(in_shapes, 1)
            m = transform.matrices(in_shapes, out_hw, seed=seed, epoch=epoch, indices=idx, training=training)
            if payloads:
                out = {"data": el["data"], "matrices": m}
                if skip:
                    out, el = keep_only(report_skips(el["errors"], counter), out, el)
                return self._outputs(out, el, with_filenames)
            images = decode_warp(
                el["data"],
                m,
                out_hw,
                bias=bias,
                norm=norm,
                oob_color=oob,
                data_format=layout,
                antialias=antialias,
                names=sample_names(files, starts, idx),
                on_error=on_error,
            )
            if skip:
                images, errors = images
                errors = tf.where(tf.strings.length(el["errors"]) > 0, el["errors"], errors)
                images, el = keep_only(report_skips(errors, counter), images, el)
            return self._outputs(images, el, with_filenames)

        if epochs is None:
            batches = tf.data.INFINITE_CARDINALITY
        else:
            total = epochs * per_epoch
            batches = total // batch_size if drop_remainder else math.ceil(total / batch_size)
        if initial_epoch is None:
            state = EpochState(epochs, per_epoch, batch_size, batches)
            positions = state.positions()
        else:
            state = None
            first = _nonnegative_int(initial_epoch, "initial_epoch") * per_epoch
            stop = _ENDLESS if epochs is None else first + epochs * per_epoch
            positions = tf.data.Dataset.range(first, stop)
        ds = positions.batch(batch_size, drop_remainder=drop_remainder or epochs is None)
        ds = ds.map(decode, num_parallel_calls=num_parallel_calls, deterministic=True)
        if state is not None or epochs is None:
            # flat_map (and an endless range) hide the count: state it (Keras then knows the steps per epoch).
            ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
        ds = ds.prefetch(prefetch)
        if state is not None or skip:
            # The root reads and advances the epoch variable once per iteration;
            # an iterator checkpoint need not (and cannot) hold that read: the
            # running iteration's start is in flat_map's saved state. Nor need
            # it hold the skip counter (reporting only).
            options = tf.data.Options()
            options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
            ds = ds.with_options(options)
        if state is not None:
            ds.bzna_epochs = state
        if skip:
            ds.bzna_skipped = SkippedSamples(counter)
        return ds


class ClassificationDataset(Dataset):
    """A labelled .bzna dataset: ``as_dataset`` yields ``(images, labels)``.

    Labels are the file's int64 targets; samples without one (the unlabelled
    tail, e.g. ImageNet's test split) get -1.

    Args:
      path_or_paths: a path, a glob pattern, or a list of them (URLs of
        TensorFlow's filesystems work).
      input_label: the picture track, ``"bzna_thumb"`` (default: at most
        512 x 512, what ImageNet training uses) or ``"bzna_input"``.
      split: a TFDS-style selection, as for :class:`Dataset`.
    """

    def __init__(self, path_or_paths, input_label: str = "bzna_thumb", *, split: str | None = None):
        super().__init__(path_or_paths, track=input_label, split=split)
        self.input_label = input_label

    @property
    def num_classes(self) -> int:
        """1 + the largest target in the files (0 when nothing is labelled)."""
        t = self._index.targets
        return int(t.max()) + 1 if t.size and t.max() >= 0 else 0

    @property
    def class_names(self) -> list[str | None] | None:
        """The class names the converter stored, indexed by target, or None when the files hold none.

        ``bzna-tf convert`` stores the class folders' names, TFRecords'
        ``image/class/text``, TFDS's ``label.labels.txt`` or ``--class-names``.
        Targets without a known name are None. Files of the original tools hold none.
        """
        return self._index.class_names

    def _outputs(self, images, element, with_filenames):
        if with_filenames:
            return images, element["target"], element["filename"]
        return images, element["target"]


class ImageNet(ClassificationDataset):
    """ImageNet 2012 in Benzina's layout: train (1,281,167), val (50,000), test (100,000), in that order.

    The split ranges are counted from the end of the file (SPEC section 3),
    so a file missing a few training images still splits right. Targets are
    the class numbers 0..999; the test split has none (labels -1).

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
      input_label: ``"bzna_thumb"`` (default) or ``"bzna_input"``.

    Raises:
      FileNotFoundError: no such file, a directory without ilsvrc2012.bzna/.mp4 or
        per-split files, or an incomplete set of shards.
      ValueError: a malformed split, or a file too small to hold val and test
        (150,000 entries) when a named split is asked for.

    Example:

    ```python
    train = bzna_tf.ImageNet("data/ilsvrc2012.bzna", split="train").as_dataset(
        batch_size=256, shape=(224, 224), shuffle=True, seed=1234,
        warp=bzna_tf.layers.RandomResizedCrop(224, 224, flip_h=0.5),
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    ```
    """

    num_classes = 1000

    def __init__(self, root, split: str | None = None, input_label: str = "bzna_thumb"):
        paths, self._groups = _imagenet_layout(root)
        super().__init__(paths, input_label=input_label, split=split)

    @classmethod
    def from_sample_list(cls, sample_list, split: str | None = None, input_label: str = "bzna_thumb"):
        """Opens the one ImageNet file a sample list names and selects its samples."""
        lst = SampleList.of(sample_list)
        paths = lst.data_paths()
        if len(paths) != 1:
            raise ValueError(f"ImageNet is one file; the sample list names {len(paths)}: {paths}")
        return cls(paths[0], split=split, input_label=input_label).select(lst)

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


def _imagenet_layout(root):
    """(paths, split groups) of an ImageNet root.

    One file (or a directory holding ``ilsvrc2012.bzna``/``.mp4``): its path, no
    groups (the splits are counted from the end, SPEC section 3). A directory of
    per-split files or shards: the files in train, val, test order, and each
    split's (first file, end file) numbers.
    """
    if isinstance(root, (list, tuple)):
        return list(root), None
    root = os.fspath(root)
    if is_url(root):
        import tensorflow as tf

        is_dir = tf.io.gfile.isdir(root)
        exists = tf.io.gfile.exists
    else:
        is_dir = os.path.isdir(root)
        exists = os.path.exists
    if not is_dir:
        return root, None
    for name in IMAGENET_FILENAMES:
        path = root.rstrip("/") + "/" + name if is_url(root) else os.path.join(root, name)
        if exists(path):
            return path, None
    try:
        found = expand_paths(root)
    except FileNotFoundError as e:
        if "without .bzna files" not in str(e):
            raise  # an incomplete set of shards
        found = []
    by_split = {}
    for path in found:
        m = _SPLIT_FILE.match(os.path.basename(path))
        if m:
            by_split.setdefault({"validation": "val"}.get(m[1], m[1]), []).append(path)
    if not by_split:
        raise FileNotFoundError(
            f"{root} is a directory without {' or '.join(IMAGENET_FILENAMES)} and without per-split files "
            "(train.bzna, val.bzna, test.bzna, or shards such as train-00000-of-00004.bzna)"
        )
    paths, groups = [], {}
    for name in IMAGENET_SPLITS:
        files = sorted(by_split.get(name, []))
        if files:
            groups[name] = (len(paths), len(paths) + len(files))
            paths.extend(files)
    return paths, groups
