"""The catalog: ``Dataset``, the samples of .bzna files (``ClassificationDataset``, ``ImageNet`` extend it).

Opening a dataset reads the files' indices (in Python, no TensorFlow): files,
shards, splits, selections and sample lists live here.
:meth:`Dataset.as_dataset` checks its arguments (:mod:`.arguments`) and hands
the samples to read to the pipeline (:mod:`.pipeline`), which builds the
``tf.data`` graph.
"""

from __future__ import annotations

import copy
import inspect
import os

import numpy as np

import bzna_tf.format.wording as wording
from bzna_tf.datasets.arguments import HINTS, RENAMED, as_written
from bzna_tf.datasets.arguments import check as check_arguments
from bzna_tf.format.keywords import keywords
from bzna_tf.format.reader import is_url
from bzna_tf.format.samplelist import SampleList, SampleListError
from bzna_tf.format.shards import BznaShards, file_numbers, in_shard_order
from bzna_tf.format.splits import select_split

__all__ = ["Dataset"]

# Benzina's track names, and the source op's short names.
TRACKS = {"bzna_input": "input", "bzna_thumb": "thumb", "input": "input", "thumb": "thumb"}


def _track(track: str) -> str:
    if track not in TRACKS:
        raise ValueError(f"Expected the track to be one of {list(TRACKS)}. Received: {track!r}")
    return TRACKS[track]


class Dataset:
    """The pictures of one or more .bzna files, as a ``tf.data`` pipeline.

    Several files (a list, or glob patterns, expanded in sorted order) read as
    one dataset, concatenated in order: sample ``i`` of the second file is
    global sample ``len(first) + i``. Paths may be local or URLs of
    TensorFlow's filesystems (``gs://...``).

    Opening reads each file's index (sizes, targets, names), one file at a
    time, and keeps none of them open: a dataset of a thousand shards holds
    no file descriptor, and one that is dropped leaves nothing open. What
    reads the files later (``filenames``, sample lists) opens each for the
    time of the read, and refuses a file that changed since. ``with`` (or
    :meth:`close`) is optional.

    Args:
      path_or_paths: a path, a glob pattern, or a list of them (a pattern,
        like a folder, opens one dataset; a list reads several as one).
      track: ``"bzna_input"`` (default: the full-size picture) or
        ``"bzna_thumb"`` (the thumbnail, at most 512 x 512; the full
        picture for images that need none). ``"input"``/``"thumb"`` also work.
      split: a selection of the samples, TFDS style, over the whole file
        called ``all``: ``"all[:90%]"``, ``"[90%:]"`` (a nameless slice means
        ``all``), ``"[1000:2000]"``. Default: every sample.

    Raises:
      BznaFormatError: a file that is not a readable .bzna.
      FileNotFoundError: a missing file, or a pattern matching nothing.
      ValueError: an unknown track or a malformed split; files that would
        read samples twice, miss some or mix datasets: a folder or a pattern
        of several datasets, an incomplete set of shards, a file reached twice
        or a copy of one, shards of one set written by two conversions, two
        conversions of one source.

    Example:

    ```python
    ds = bzna_tf.Dataset("pictures.bzna")
    images = ds.as_dataset(batch_size=32, shape=(224, 224))  # (32, 224, 224, 3) float32 batches
    ```
    """

    @keywords(hints={"input_label": "track"})
    def __init__(self, path_or_paths, track: str = "bzna_input", *, split: str | None = None):
        self.track = track
        self._track = _track(track)
        self._index = BznaShards(path_or_paths)
        self.split = split
        self._indices = self._select(split)
        self._indices.flags.writeable = False

    # The named splits an unsplit dataset reads together (ImageNet without a split), for as_dataset to refuse.
    _splits_read = ()

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
        """Every file opened, in order, those no selected sample is in too (an ImageNet split opens the
        other splits' files): ``indices`` count over all of them. Pass these with ``indices`` to the
        native ops, never alone (that would read every file); ``to_sample_list`` names only the files
        read."""
        return list(self._index.paths)

    def _opened_paths(self) -> list[str]:
        """The files the dataset opened: each path as given (errors name it so) while it still leads
        there, else (a relative one, the working directory changed since) the absolute path opened; URLs
        as they are. Whatever reads or names the files later (pipelines, sample lists) takes these: a
        later ``os.chdir`` leads none of them to another file of that name."""
        return [
            p if is_url(p) or f.path is None or os.path.abspath(p) == f.path else f.path
            for p, f in zip(self.paths, self._index.files, strict=True)
        ]

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
        """Each selected sample's stored filename (None where a file has no name track).

        Every name of every file is read on each access (seconds for ImageNet): keep the list, or take
        one name with :meth:`filename`.
        """
        names = self._index.filenames()
        return [names[i] for i in self._indices.tolist()]

    def filename(self, i: int) -> str | None:
        """Sample ``i``'s stored filename (``i`` a position in this dataset, negative from the end; None
        where its file has no name track), read alone: ``ds.filename(0)``, not ``ds.filenames[0]``.

        Raises:
          IndexError: ``i`` out of range.
          BznaFormatError: names that differ from the index's checksum of them.
        """
        n = len(self._indices)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
            raise IndexError(f"Expected a position in [-{n}, {n}). Received: {i!r}")
        return self._index.filename(int(self._indices[int(i)]))

    def select(self, positions) -> Dataset:
        """A dataset of some of these samples.

        ``positions`` index this dataset (0 .. len - 1; negative ones are
        refused), or are a boolean mask of ``len(self)`` entries, or a
        :class:`bzna_tf.SampleList` (see :meth:`sample_list_positions`).
        Positions may repeat: a position given k times is read k times an
        epoch (oversampling), each copy with its own random crop. One integer
        0 or 1 per sample is refused as ambiguous (a mask that lost its
        boolean dtype): pass a mask as booleans.

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
            raise ValueError(
                "Expected at least one position. Received: an empty selection (a mask that matched no "
                "sample?)"
            )
        if p.min() < 0 or p.max() >= len(self):
            raise IndexError(
                f"position {int(p.min() if p.min() < 0 else p.max())} out of range for a dataset of "
                f"{wording.count(len(self), 'sample')}: positions run from 0 to {len(self) - 1}"
            )
        if len(self) > 2 and p.size == len(self) and p.max() <= 1:
            # Integers 0 and 1, one per sample: a mask that lost its dtype (np.where(..., 1, 0), a 0/1
            # column) would read samples 0 and 1 over and over.
            read = "samples 0 and 1" if p.min() == 0 and p.max() == 1 else f"sample {int(p[0])}"
            raise ValueError(
                f"Expected positions or a boolean mask. Received: {len(self)} integers, all 0 or 1, one per "
                f"sample: as positions they read {read} only. For a mask, pass it as booleans "
                f"(np.asarray(mask, bool)); to oversample {read}, select them first: "
                "ds.select([0, 1]).select(positions)"
            )
        out = copy.copy(self)
        out._indices = self._indices[p]
        out._indices.flags.writeable = False
        out.split = None
        out._splits_read = ()  # positions chosen: whatever splits they come from
        return out

    def sample_list_positions(self, sample_list) -> np.ndarray:
        """The positions in this dataset of the samples a sample list uses.

        The list narrows the dataset: the result holds the samples that are
        both in this dataset (its split or selection) and used by the list,
        in the list's order (exclusion lists: file order). The list's files
        are matched to this dataset's files by path (base + file), or, for a
        list written on another machine, by their trailing path components.
        This dataset's files are those it opened: a relative path stays the
        file it led to then, whatever the working directory is now.

        Args:
          sample_list: a :class:`bzna_tf.SampleList` or the path of a list file.

        Raises:
          SampleListError: a malformed list, or one that names a file, an
            index or a filename this dataset's files lack (naming the line);
            or no listed sample is in this dataset.
        """
        lst = SampleList.of(sample_list)
        files = self._index.files
        wanted = lst.global_indices(self._opened_paths(), self._index.starts, lambda k: files[k].filenames())
        sel = self._indices
        order = np.argsort(sel, kind="stable")
        ordered = sel[order]
        # Every position of each listed sample: a selection that repeats a sample (oversampling) keeps
        # its repeats, in selection order.
        left = np.searchsorted(ordered, wanted, "left")
        counts = np.searchsorted(ordered, wanted, "right") - left
        if not counts.any():
            raise SampleListError(
                f"none of the listed samples ({wording.count(len(wanted), 'sample')}) is in this dataset "
                f"({self!r})",
                path=lst.path,
            )
        starts = np.repeat(left, counts)
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return order[starts + within]

    def to_sample_list(self, type: str = "CONDUIT_HDF5_INCLUSION", *, ids: str = "indices", base=None):
        """This dataset's samples (its split or selection) as a :class:`bzna_tf.SampleList`.

        Args:
          type: one of ``bzna_tf.LIST_TYPES``.
          ids: ``"indices"`` (each sample's index in its file) or ``"names"``
            (its stored filename; refused where a name could not be read back).
          base: line 3, the files' base directory (default: their common one).

        The list names the files this dataset opened (a relative path as it
        led when the dataset was opened, whatever the working directory is now).
        Its lines group the samples by file (but ``SINGLE-SAMPLE``'s, one per
        sample): a selection in another order comes back from the list in
        file order.
        """
        files = self._index.files
        return SampleList.from_indices(
            self._opened_paths(),
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
          **kwargs: the class's other arguments (``track``, ``split``, ...).
        """
        lst = SampleList.of(sample_list)
        return cls(in_shard_order(lst.data_paths()), **kwargs).select(lst)

    def close(self):
        """Ends this dataset's reading of its files in Python (and its selections', which share them).

        A dataset holds no file open between reads, so closing it is not needed
        to free descriptors; after it, what reads the files (``filenames``,
        sample lists, and ``targets`` or ``class_names`` when not yet read)
        raises a ``ValueError``. Pipelines made by :meth:`as_dataset` open the
        files on their own, and keep working.
        """
        self._index.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ tf.data

    _labels = False  # elements are images (and filenames), no labels

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
    ):
        """A ``tf.data.Dataset`` of decoded, warped, normalised batches.

        Elements are float32 images (N, height, width, 3) (``data_format="channels_first"``:
        (N, 3, height, width)); :class:`ClassificationDataset` adds the int64
        labels (N,): ``(images, labels)``, ready for ``model.fit``.

        Each epoch is the selection's order, or with ``shuffle`` a full random
        permutation (not a buffer) drawn from ``seed`` and the epoch. Each
        sample's crop and flips depend on (seed, epoch, sample index) only:
        new each epoch, reproducible whatever the parallelism, and restored
        exactly with the iterator (``tf.train.Checkpoint``). The copies of an
        oversampled sample (a position given several times to :meth:`select`)
        each get their own.

        The arguments come in groups, in this order below: the output's size
        (``batch_size``, ``shape``); **order** (``shuffle``, ``seed``,
        ``repeat``, ``initial_epoch``); **augmentation** (``warp``,
        ``training``, ``fill_value``, ``antialias``); **normalisation**
        (``normalize``); the output's form (``data_format``, ``drop_remainder``,
        ``with_filenames``, ``device``, ``on_error``); **distribution**
        (``input_context``, ``shard``, ``shard_by``, ``sample_list``); and
        **tf.data tuning** (``num_parallel_calls``, ``prefetch``).

        Args:
          batch_size: images per batch (under ``tf.distribute``, per replica:
            ``input_context.get_per_replica_batch_size(global_batch)``).
          shape: the output (height, width), or one int for a square; default:
            the warp layer's. A batch may take at most
            ``bzna_tf.datasets.MAX_BATCH_BYTES`` (4 GiB) of float32 values.
          shuffle: permute the samples each epoch; each iteration of the
            dataset (each Keras epoch) gets a new permutation.
          seed: an integer for the permutations and the random warps, taken
            modulo 2**63 (seeds that differ by a multiple of 2**63 give the
            same data; a negative seed is a fixed seed like any other). None
            draws one, as tf.data's ``shuffle(seed=None)`` does: from
            TensorFlow's global seed when one is set
            (``keras.utils.set_random_seed``), else at random (then runs
            differ). Sharded shuffling needs one (every worker must draw the
            same permutation), and so does an unsharded shuffle in a job of
            several workers (tf.distribute's auto-sharding splits the
            batches of each worker's own order).
          repeat: False (one epoch per iteration), True (endless: pass
            ``steps_per_epoch`` to ``model.fit``), or a number of epochs per
            iteration. Batches run across epoch boundaries.
          initial_epoch: None (default): iteration ``k`` of the dataset yields
            data epochs ``k * epochs ...`` (``epochs`` = 1 or ``repeat``), from
            a counter in ``ds.bzna_epochs`` (:class:`EpochState`) that
            :class:`bzna_tf.callbacks.SyncEpochs` keeps in step with Keras'
            epochs; the counter lives in this process, so such a pipeline
            cannot be sent to tf.data service, nor built in a
            ``tf.function`` (ParameterServerStrategy's
            ``create_per_worker_dataset``). An int: a stateless pipeline,
            every iteration yields epochs ``initial_epoch ...``; it
            serialises, as tf.data service needs.
          warp: a ``bzna_tf.layers`` warp layer (``RandomResizedCrop(224, 224,
            flip_h=0.5)``, ``CenterResizedCrop(224, 224, 224 / 256)``, ...)
            or a ``bzna_tf.transforms`` transform. The layer's own seed is not
            used: ``seed`` is. Default: ``CenterResizedCrop(scale=1)``, the
            image scaled to cover ``shape`` and its centre kept.
          training: False makes the warp deterministic (its centre values:
            use it to evaluate with a training warp).
          fill_value: the raw value of pixels that fall outside the picture
            (a scalar or 3 values); default: the warp layer's, or 0.
          antialias: where the warp shrinks the picture, average each output
            pixel's footprint (a triangle filter as wide as the reduction, as
            torchvision and DALI do) instead of sampling a point (Benzina's
            warp); see ``bzna_tf.ops.decode_warp``. Default: the warp layer's,
            or True.
          normalize: None (default: RGB in [0, 255]); a ``(mean, std)`` pair
            in [0, 1] units, torchvision style (``((0.485, 0.456, 0.406),
            (0.229, 0.224, 0.225))``; each a number or 3): images become
            ``(rgb / 255 - mean) / std``; or a
            :class:`bzna_tf.layers.Normalize` layer (Benzina's own terms:
            ``Normalize(bias=..., norm=...)``, ``(rgb - bias) * norm``; the
            layer's ``data_format`` is not used: as_dataset's is). It is fused
            into the decode-warp op. A mean or std above 1 looks like [0, 255]
            units: a ``UserWarning`` says so.
          data_format: ``"channels_last"`` ((N, height, width, 3)) or
            ``"channels_first"`` ((N, 3, height, width)), Keras' names; the
            ops' ``"NHWC"`` and ``"NCHW"`` mean the same. None (default):
            Keras' ``image_data_format()``, as ``image_dataset_from_directory``
            follows it; a warp layer whose ``data_format`` differs from it is
            refused until one is given.
            Formerly ``layout``, which still works until the next release,
            with a ``FutureWarning``.
          drop_remainder: drop the last batch of an epoch when it is short, so
            the batch dimension is static. (Endless datasets always have it.)
            A pipeline that several replicas share (``input_context`` of one
            input pipeline and ``num_replicas_in_sync`` replicas: one machine
            of several GPUs) also ends each iteration at a whole step: a
            multiple of ``num_replicas_in_sync`` batches (tf.distribute would
            cut a partial step off mid-step, its batches read and lost),
            unless ``on_error="skip"`` (its batches' dimension is not static:
            tf.distribute gives a short step's spare replicas empty batches).
          with_filenames: add each sample's stored filename (tf.string) as the
            last element of the tuple. (Not for ``model.fit``, which would
            take a third element as sample weights.)
          device: where pictures are decoded and warped. ``"cpu"``: in
            ``tf.data`` (FFmpeg's HEVC decoder fused with the warp), elements
            are images. ``"gpu"``: the same elements (dtypes, shapes and
            values for the same seed), decoded by NVDEC and warped by CUDA
            into GPU memory ``prefetch`` batches ahead of their use, by the
            dataset's last stage (placed on the GPU of the current device
            scope, else GPU ``input_context.input_pipeline_id``, else the
            first): a model written for ``"cpu"`` trains on it unchanged.
            Apply no transformation after it (its elements are in GPU
            memory). Where no GPU decoder is usable (no GPU, bzna_tf's GPU
            kernels not loadable, no NVDEC) it is the ``"cpu"`` pipeline,
            and a ``RuntimeWarning`` says why, once. TensorFlow cannot save
            an iterator placed on a GPU (tensorflow/tensorflow#62959): resume
            at epoch boundaries with ``SyncEpochs``. ``"model"``: in the
            model, whose first layer is :class:`bzna_tf.layers.DecodeWarp`
            (NVDEC + the CUDA warp when the model runs on a GPU); elements
            are ``{"data", "matrices", "picture_sizes"}`` (pictures, each
            sample's matrix, still reproducible from the seed, and each
            picture's (height, width)) instead of images, and
            normalize/fill_value/antialias/data_format belong to that layer.
            ``"auto"`` (default) is ``"cpu"``.
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
            With ``device="gpu"`` the samples that fail to decode on the GPU
            are skipped alike. With ``device="model"`` only reading errors are
            skipped here: pictures are decoded in the model, where a bad one
            fails the step.
          input_context: a ``tf.distribute.InputContext``: read shard
            ``input_pipeline_id`` of ``num_input_pipelines``.
          shard: ``(count, index)``: read only shard ``index`` of ``count``
            (workers, ranks). Shards are disjoint and together hold every
            sample once per epoch. A sharded pipeline (and one built with
            ``input_context``) turns tf.data's auto-sharding off
            (``auto_shard_policy`` ``OFF``): ``experimental_distribute_dataset``
            does not shard it again.
          shard_by: how samples go to shards. ``"samples"`` (default): every
            ``count``-th sample of each epoch's order; shards differ in size by
            at most one and, with ``shuffle``, are drawn from each epoch's
            permutation (so they change every epoch; needs a ``seed``). With
            ``drop_remainder=True`` every shard makes as many batches as the
            smallest (one fewer per data epoch, at most), so workers in step end
            together.
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
          num_parallel_calls: batches decoded at once, ``AUTOTUNE`` (default)
            or 1 to 1024; each batch is also spread over TensorFlow's CPU
            threads.
          prefetch: batches to prefetch, ``AUTOTUNE`` (default) or 0 to 1024,
            holding at most 16 GiB of images; with ``device="gpu"`` also the
            batches decoded ahead on the GPU (default 2, at most 64).

        Returns:
          A ``tf.data.Dataset`` of known cardinality (infinite with ``repeat=True``).

        Raises:
          ValueError, TypeError: bad arguments (each names the argument). A
            keyword of Keras or TFDS that as_dataset spells otherwise
            (``image_size``, ``batch``, ``split``) is a ``TypeError`` saying
            which to use.
          ValueError: an unsharded shuffle without a seed in a job of several
            workers; ``initial_epoch=None`` in a ``tf.function``.
        """
        # Every argument but self and the sample list, by name: the signature is their only list (and
        # the only names taken from locals(): autograph adds its own, as_dataset called in a tf.function).
        arguments = {k: v for k, v in locals().items() if k in _AS_DATASET_ARGUMENTS}
        return self._as_dataset(sample_list, arguments)

    def _as_dataset(self, sample_list, arguments):
        from bzna_tf.datasets.pipeline import build

        options = check_arguments(**arguments)
        ds = build(*self._source(sample_list, options), input_context=arguments["input_context"])
        names = getattr(self, "class_names", None)  # a ClassificationDataset's: blend compares them
        if names is not None:
            ds.bzna_class_names = (list(names), repr(self))
        return ds

    def _source(self, sample_list, options):
        """(the files and samples the pipeline reads, the options): the selection, narrowed by the
        sample list, and for ``shard_by="files"`` to this shard's files (then read as one shard)."""
        from dataclasses import replace

        from bzna_tf.datasets.pipeline import Source

        sel = self._indices if sample_list is None else self._indices[self.sample_list_positions(sample_list)]
        self._check_selection(sel, options, listed=sample_list is not None)
        count, index = options.shard
        if options.shard_by == "files" and count > 1:
            sel = self._file_shard(sel, count, index, options.training, options.epochs is None)
            options = replace(options, shard=(1, 0), file_shard=(count, index))
        identities = [f.identity for f in self._index.files]  # the read op refuses other files
        if options.with_filenames:
            for f in self._index.files:
                f.check_names()  # the op carries the names as stored: damaged ones are refused here
        source = Source(self._opened_paths(), self._index.starts, self._track, sel, self._labels, identities)
        return source, options

    def _check_selection(self, selection, options, *, listed: bool) -> None:
        """Refuses a selection the elements cannot carry (ClassificationDataset: unlabelled samples)."""

    def _file_shard(self, sel, count, index, training, endless) -> np.ndarray:
        """The samples of ``sel`` in the files of shard ``index`` (file k -> shard k % count).

        An empty shard is an error when training or repeated endlessly, named here, where the shard
        asked for is known (the pipeline then reads this one as its only shard).
        """
        files = file_numbers(self._index.starts, sel)
        # The files that hold the selection: a split of ImageNet's per-split files is in its own files.
        holding = np.unique(files).tolist()
        num_files = len(holding)
        if num_files < count and training:
            held = "" if num_files == len(self._index.files) else " holding the samples selected"
            raise ValueError(
                f"shard_by='files' needs at least as many files as shards: {wording.count(num_files, 'file')}"
                f"{held} for {count} shards (use more, smaller .bzna files, or shard_by='samples')"
            )
        mine = sel[files % count == index]
        if not len(mine) and (training or endless):
            plural = "s" if len(holding) > 1 else ""
            raise ValueError(
                f"Shard {index} of {count} (shard_by='files': file k goes to shard k % {count}) is empty: "
                f"the {wording.count(len(sel), 'sample')} selected are in file{plural} "
                f"{', '.join(map(str, holding[:8]))}{', ...' if len(holding) > 8 else ''}, none of this "
                "shard's. Use shard_by='samples', or a selection spread over the files (training=False lets "
                "a validation shard be empty, when it is not repeated endlessly)"
            )
        return mine


# Dataset.as_dataset's arguments that check() takes, by name.
_AS_DATASET_ARGUMENTS = frozenset(inspect.signature(Dataset.as_dataset).parameters) - {"self", "sample_list"}
