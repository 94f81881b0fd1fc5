"""The ``tf.data`` graph of :meth:`bzna_tf.Dataset.as_dataset`, built in named steps::

    order      stream positions p (epochs.positions: a range, or each
               iteration's range from the EpochState variable), batched;
               per batch: BznaEpochSchedule (p -> epoch p // per_epoch and
               the sample at that place of the epoch's permutation and shard)
    read       BznaReadSamples: H.265 pictures, sizes, targets (filenames)
    matrices   each sample's warp matrix from (seed, epoch, index; an oversampled copy's own key)
    decode     decode + warp + normalise: one fused op, bounded by each
               picture's size (not its padded frame) (device="model": the
               pictures, matrices and picture sizes go to the model's
               DecodeWarp instead)
    skip       on_error="skip": samples that failed dropped from their batch
    count      the batches per iteration, stated (Keras reads it)
    counter    initial_epoch=None: BznaEpochCounterCheckpointDataset, which passes
               the batches on and puts the epoch counter in the iterator's
               checkpoints
    facts      BznaCheckpointFactsDataset: what a checkpoint must agree on to
               restore (the files, selection, shard, seed, batch size)
    prefetch   and the options every iterator needs
    ahead      device="gpu": decode and skip move here, after prefetch: the
               BznaDecodeWarpDataset op, placed on the GPU, decodes `depth`
               batches ahead with NVDEC (the stages above run on the CPU)

Every stage is a TensorFlow op: iterators checkpoint and restore mid-epoch,
and the pipeline (with an ``initial_epoch``) serialises to a graph.
"""

from __future__ import annotations

import hashlib
import math
import uuid
import warnings
from dataclasses import dataclass, replace

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

import bzna_tf.format.wording as wording
from bzna_tf.datasets.epochs import positions
from bzna_tf.format.wording import user_stacklevel
from bzna_tf.ops._load import load_library
from bzna_tf.ops.source import SkippedSamples, epoch_schedule, read_samples, report_skips, sample_names
from bzna_tf.ops.warp import decode_warp, decode_warp_dataset

__all__ = ["Source", "build"]


@dataclass(frozen=True)
class Source:
    """What the catalog hands the pipeline: the files and the samples to read.

    Attributes:
      files: the .bzna paths, in order.
      starts: each file's first global sample index, then the total.
      track: the source op's track name (``"input"`` or ``"thumb"``).
      selection: int64 global sample indices of one epoch (before sharding by samples).
      labels: whether elements carry the targets (ClassificationDataset).
      identities: each file's :attr:`~bzna_tf.format.BznaFile.identity`, the
        file its index was read from (the read op refuses another one), or
        None (no check).
    """

    files: list
    starts: np.ndarray
    track: str
    selection: np.ndarray
    labels: bool
    identities: list | None = None


def build(source: Source, options, input_context=None) -> tf.data.Dataset:
    """The pipeline for ``source`` as ``options`` (an :class:`~.arguments.Options`) ask.

    ``device="gpu"``: the decoding device is :func:`decoder_device`'s; where it
    finds none, the CPU pipeline (device="cpu": the same values), said once
    in a ``RuntimeWarning``.
    """
    if options.device != "gpu":
        return _per_step(_build(source, options), options)
    ahead, why = decoder_device(input_context)
    if ahead is None:
        _warn_cpu_fallback(why)
        options = replace(options, device="cpu")
    # The reading pipeline runs on the host's CPU also when the caller's scope
    # is a device (tf.distribute builds each replica's dataset in its scope):
    # its functions find the host's resources (the epoch counter) there.
    with tf.device(_host_of(_scope_device())):
        ds = _build(source, options)
    return _per_step(ds if ahead is None else _decode_ahead(ds, source, options, ahead), options)


def _per_step(ds, options):
    """``ds``, its epoch counter told how many of its batches a training step takes (SyncEpochs counts
    them: under ``distribute_datasets_from_function``, one per replica fed by this pipeline), which
    input pipeline it is and whether its batches are statically shaped."""
    state = getattr(ds, "bzna_epochs", None)
    if state is not None:
        state.batches_per_step = options.batches_per_step
        state.input_pipeline = options.input_pipeline
        state.static_batches = bool(options.drop_remainder) and not options.skip
    return ds


class _CounterCheckpoint(dataset_ops.UnaryUnchangedStructureDataset):
    """``input_dataset``'s elements; its iterators' checkpoints hold the epoch counter too.

    The BznaEpochCounterCheckpointDataset op: its iterator's state is the counter's
    value (explicit checkpoints: when saved; symbolic ones: after each
    element), and a restore moves the counter there unless it is there or
    further already. So a checkpoint of the iterator alone resumes the
    iterations after the restored one too: the root's own state, which
    names its iteration, is gone from a checkpoint once the iteration's
    positions are all read (batch lets go of its exhausted input), which the
    buffers do before the iteration's last batches are taken.
    """

    def __init__(self, input_dataset, counter, cardinality: int):
        self._input_dataset = input_dataset
        variant = load_library().bzna_epoch_counter_checkpoint_dataset(
            input_dataset._variant_tensor, counter, cardinality=cardinality, **input_dataset._flat_structure
        )
        super().__init__(input_dataset, variant)


class _CheckpointFacts(dataset_ops.UnaryUnchangedStructureDataset):
    """``input_dataset``'s elements; its iterators' checkpoints hold ``facts``, compared at a restore.

    The BznaCheckpointFactsDataset op: a restore into a pipeline whose facts differ
    (the files converted again, another selection, shard, seed, order or
    batch size: the saved positions would read other samples) fails with
    FailedPreconditionError naming each difference.
    """

    def __init__(self, input_dataset, facts):
        self._input_dataset = input_dataset
        variant = load_library().bzna_checkpoint_facts_dataset(
            input_dataset._variant_tensor, tf.constant(facts, tf.string), **input_dataset._flat_structure
        )
        super().__init__(input_dataset, variant)


def checkpoint_facts(source: Source, options, batches: int | None = None) -> list[str]:
    """What an iterator checkpoint of the pipeline must agree on to restore: each ``"name: value"``.

    The samples each stream position reads follow from them: the files (their
    sizes and stored index checksums, or modification times where they have
    none: not their paths, so that a staged copy restores), the selection, the
    shard, the order (with its seed when shuffled), and the batch size. And the epochs per
    iteration, its ``batches`` (None: endless) and the images' shape, which a
    restored iterator cannot change (it failed late, with TensorFlow's
    cardinality or shape error).
    """
    files = []
    for k, identity in enumerate(source.identities or [None] * len(source.files)):
        samples = int(source.starts[k + 1] - source.starts[k])
        if identity is None:
            files.append([samples])
        elif identity.moov != -1:  # the stored index checksums: a conversion's own, whatever the copy
            files.append([samples, identity.size, identity.moov, identity.targets, identity.names])
        else:
            files.append([samples, identity.size, identity.mtime_ns])
    digest = hashlib.sha256(repr(files).encode()).hexdigest()[:12]
    chosen = np.ascontiguousarray(source.selection, np.int64)
    picked = hashlib.sha256(chosen.tobytes()).hexdigest()[:12]
    count, index = options.shard
    drawn = " (drawn at random: give as_dataset a seed)" if options.seed_drawn else ""
    return [
        f"files: {wording.count(len(source.files), 'file')} of "
        f"{wording.count(int(source.starts[-1]), 'sample')} (identity {digest})",
        f"selection: {wording.count(len(chosen), 'sample')} ({picked})",
        f"shard: {index} of {count}",
        # The seed only where it orders the samples (else it draws the warps alone, which are not checked).
        f"order: {f'shuffled with seed {options.seed}{drawn}' if options.shuffle else 'as selected'}",
        f"batch size: {options.batch_size}",
        # Not a sample's place, but a restore into another fails late and unclearly: an explicit
        # checkpoint's buffered batches have the old shape; another count of epochs, another cardinality.
        f"epochs per iteration: {options.epochs if options.epochs is not None else 'endless'}",
        f"images: {options.shape[0]} x {options.shape[1]}, {options.data_format}",
        # shard_by="files": the shard asked for (the one above is then 0 of 1, over its files). A line of
        # its own: checkpoints saved before it was recorded lack it, and only lines both have are compared.
        *([f"file shard: {options.file_shard[1]} of {options.file_shard[0]}"] if options.file_shard else []),
        # The batches an iteration makes, where the lines above leave them open: a pipeline that several
        # replicas share ends each iteration at a whole step of theirs, another count with another
        # replica count (TensorFlow's "expected to contain 4 elements but contained only 6"). Its own
        # line, for the same reason.
        f"batches per iteration: {'endless' if batches is None or options.epochs is None else batches}",
    ]


def _build(source: Source, options) -> tf.data.Dataset:
    count, index = options.shard
    per_epoch = len(range(index, len(source.selection), count))
    if per_epoch == 0 and (options.training or options.epochs is None):
        raise ValueError(
            f"Shard {index} of {count} of {wording.count(len(source.selection), 'sample')} is empty "
            "(training=False lets a validation shard be empty, when it is not repeated endlessly)"
        )
    made = batches = _batches(options, per_epoch)
    if options.drop_remainder and options.epochs is not None and count > 1:
        # Every shard the same number of batches, the smallest shard's (one sample fewer, at most): ranks
        # that train in lockstep (tf.distribute's replicas, an allreduce per batch) end the pass together.
        smallest = len(source.selection) // count
        batches = min(batches, options.epochs * smallest // options.batch_size)
        # Refused on every shard where any would have had a batch (the largest's), not on those alone:
        # one worker refusing while its peers build would leave them waiting for it.
        largest = -(-len(source.selection) // count)
        if batches == 0 < options.epochs * largest // options.batch_size:
            raise ValueError(
                f"This pipeline (shard {index} of {count}) makes "
                f"{wording.count(made, 'batch', 'batches') + ', but' if made else 'no batch, and'} the "
                f"smallest of the {count} shards reads {wording.count(smallest, 'sample')} an epoch, "
                f"fewer than batch_size={options.batch_size} with drop_remainder=True. Every shard makes as "
                "many batches as the smallest (workers that train in step end each pass together), so "
                f"{'training' if options.training else 'evaluation'} would read none of them. Use a smaller "
                "batch_size, fewer workers, or drop_remainder=False"
            )
    step = options.whole_step_batches
    whole = batches - batches % step  # what tf.distribute would train on (see whole_step_batches)
    if whole == 0 < batches:
        total = options.epochs * per_epoch
        raise ValueError(
            f"This pipeline makes {wording.count(batches, 'batch', 'batches')} of {options.batch_size} an "
            f"iteration ({wording.count(total, 'sample')}, drop_remainder=True), fewer than one step of its "
            f"{step} replicas takes: distribute_datasets_from_function hands each replica a batch per step "
            "and cuts off a step that not all of them get one for, so "
            f"{'training' if options.training else 'evaluation'} would read none of them, without an error. "
            f"Use a batch_size of at most {total // step}, or drop_remainder=False"
        )
    batches = whole
    if batches == 0 and options.training:
        where = f" (shard {index} of {count})" if count > 1 else ""
        raise ValueError(
            f"This pipeline{where} reads {wording.count(per_epoch, 'sample')} an epoch, fewer than "
            f"batch_size={options.batch_size} with drop_remainder=True: it has no batch, so training would "
            "read none of them, without an error. Use a smaller batch_size or drop_remainder=False (or, "
            "with shard_by='files', fewer workers or shard_by='samples')"
        )
    # Samples an iteration leaves out with drop_remainder (an endless pipeline leaves none out).
    dropped = options.epochs * per_epoch - batches * options.batch_size if options.epochs is not None else 0
    if dropped and options.drop_remainder and not options.training:
        shards, shard = options.file_shard or (count, index)  # shard_by="files": its shard, read as one
        where = f" (shard {shard} of {shards})" if shards > 1 else ""
        if batches == 0 and shards == 1:
            raise ValueError(
                f"This pipeline reads {wording.count(per_epoch, 'sample')} an epoch, fewer than "
                f"batch_size={options.batch_size} with drop_remainder=True: it has no batch, so evaluation "
                "or prediction would read none of them. Use drop_remainder=False (the default) or a smaller "
                "batch_size"
            )
        steps = f", whole steps of {step} replicas" if step > 1 else ""
        warnings.warn(
            f"as_dataset(training=False, drop_remainder=True) leaves out the last "
            f"{wording.count(dropped, 'sample')} of each iteration{where} (batches of "
            f"{options.batch_size}{steps}): evaluation or prediction would not see them. "
            "drop_remainder=False (the default) keeps them in a short last batch",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    root, state = positions(options, per_epoch, batches)
    counter = f"bzna_tf-{uuid.uuid4().hex}" if options.skip else ""
    autotune = tf.data.AUTOTUNE
    ds = root.batch(options.batch_size, drop_remainder=options.drop_remainder or options.epochs is None)
    if batches < made:
        ds = ds.take(batches)  # before loading: the batches left out are not even read
    ds = ds.map(
        _load_batch(source, options, counter),
        num_parallel_calls=autotune if options.num_parallel_calls is None else options.num_parallel_calls,
        deterministic=True,
    )
    if state is not None:
        # Under the prefetch, which keeps its input to the end (and stays last:
        # tf.data appends a prefetch of its own to a pipeline ending otherwise).
        # The home check's filter hides the count: the op states it (Keras then knows the steps per
        # epoch), where TensorFlow's assert_cardinality did: that one, a batch failing, fails at the end
        # of every later call too, and after ignore_errors() the pipeline never ended.
        ds = _CounterCheckpoint(ds, state.variable.handle, batches)
    elif options.epochs is None:
        # An endless range's count is finite: state the endless one (there is no end to assert at).
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    ds = _CheckpointFacts(ds, checkpoint_facts(source, options, batches))  # under the prefetch too, as above
    ds = ds.prefetch(autotune if options.prefetch is None else options.prefetch)
    tf_options = tf.data.Options()
    if state is not None or options.skip:
        # The root reads and advances the epoch variable once per iteration;
        # an iterator checkpoint need not (and cannot) hold that read: the
        # running iteration's range is in the root's saved state, and the
        # variable's value in BznaEpochCounterCheckpointDataset's. Nor need it hold
        # the skip counter (reporting only).
        tf_options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    if options.sharded:
        # This pipeline is already its worker's shard: tf.distribute's
        # auto-sharding (experimental_distribute_dataset, and so model.fit
        # under MultiWorkerMirroredStrategy) would keep 1/N of it again.
        tf_options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    if tf_options != tf.data.Options():
        ds = ds.with_options(tf_options)
    ds.bzna_sharded = bool(options.sharded)  # blend tells a pipeline built unsharded from one sharded by hand
    if state is not None:
        ds.bzna_epochs = state
    else:
        ds.bzna_initial_epoch = options.initial_epoch  # SyncEpochs says why it has nothing to set
    if options.skip:
        ds.bzna_skipped = SkippedSamples(counter)
    return ds


def _batches(options, per_epoch: int):
    """Batches per iteration (``tf.data.INFINITE_CARDINALITY`` for an endless pipeline)."""
    if options.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    total = options.epochs * per_epoch
    return total // options.batch_size if options.drop_remainder else math.ceil(total / options.batch_size)


def warp_keys(selection: np.ndarray, total: int) -> np.ndarray:
    """Each selection entry's key for its random warp: the sample's global index for its first entry,
    ``index + k * total`` for its k-th repeat (k = 1, 2, ... in the selection's order).

    An oversampled sample's copies (a position given several times to ``select``) are read in the
    same epoch; keyed by the index alone, they would all get the same crop and flips.
    """
    selection = np.asarray(selection, np.int64)
    order = np.argsort(selection, kind="stable")
    ordered = selection[order]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # where each run of one index starts
    run_start = np.repeat(first, np.diff(np.r_[first, ordered.size]))
    repeat = np.empty_like(selection)
    repeat[order] = np.arange(ordered.size) - run_start
    return selection + repeat * np.int64(total)


def _load_batch(source: Source, options, counter: str):
    """The per-batch function: stream positions -> the batch's elements."""
    total = int(source.starts[-1])
    keys = warp_keys(source.selection, total)
    repeats = bool((keys != source.selection).any())
    # The schedule maps positions to entries of this vector; an entry's sample is its key modulo the total.
    selection = tf.constant(keys if repeats else source.selection, tf.int64)
    seed = tf.constant(options.seed, tf.int64)

    ahead = options.device == "gpu"  # decoding happens after the pipeline, in BznaDecodeWarpDataset

    def load(positions):
        # order
        key, epoch = epoch_schedule(positions, selection, seed, shuffle=options.shuffle, shard=options.shard)
        idx = tf.math.floormod(key, total) if repeats else key
        # read
        el = read_samples(
            source.files, idx, track=source.track, with_filenames=options.with_filenames,
            on_error=options.on_error, identities=source.identities,
        )  # fmt: skip
        # matrices
        sizes = tf.stack([el["height"], el["width"]], axis=-1)  # the pictures', without the frames' padding
        in_shapes = sizes
        if options.skip:  # a sample that could not be read has sizes 0: any matrix will do
            in_shapes = tf.maximum(in_shapes, 1)
        m = options.transform.matrices(
            in_shapes, options.shape, seed=options.seed, epoch=epoch, indices=key, training=options.training
        )
        # decode + warp + normalise
        if ahead:
            names = sample_names(source.files, source.starts, idx)
            rest = _pass_through(el, source.labels, options.with_filenames)
            return (el["data"], m, sizes, names, el["errors"], *rest)
        if options.payloads:
            images, errors = {"data": el["data"], "matrices": m, "picture_sizes": sizes}, el["errors"]
        else:
            images, errors = _decode_warp(el, m, sizes, idx, source, options)
        # skip
        if options.skip:
            images, el = _keep_only(report_skips(errors, counter), images, el)
        return _elements(images, el, source.labels, options.with_filenames)

    if _all_ours(options.transform):
        # Graph code as written: AutoGraph's conversion of it (and of every function it calls) took
        # seconds of a pipeline's first build. A transform of the user's own class keeps AutoGraph.
        return tf.autograph.experimental.do_not_convert(load)
    return load


def _all_ours(transform) -> bool:
    """Whether every class of ``transform``'s type is bzna_tf's (no method of a user's subclass)."""
    return all(c is object or c.__module__.startswith("bzna_tf.") for c in type(transform).__mro__)


def _warp_arguments(options) -> dict:
    """The decode-warp ops' output arguments from as_dataset's options (both ops take the same)."""
    return {
        "bias": options.bias,
        "norm": options.norm,
        "oob_color": options.fill_value,
        "data_format": "NCHW" if options.data_format == "channels_first" else "NHWC",
        "antialias": options.antialias,
    }


def _decode_warp(el, matrices, sizes, idx, source: Source, options):
    """(images, errors): the fused decode-warp-normalise op; errors are reading's, then decoding's.

    The warp's picture is ``sizes`` (N, 2), the tracks' (height, width), not the padded frame. A
    sample that could not be read (on_error="skip") has empty data and sizes 0: the op decodes
    before it checks a size, so it fails as undecodable, and its reading error is the one reported.
    """
    out = decode_warp(
        el["data"],
        matrices,
        options.shape,
        **_warp_arguments(options),
        names=sample_names(source.files, source.starts, idx),
        on_error=options.on_error,
        picture_sizes=sizes,
    )
    if not options.skip:
        return out, None
    images, errors = out
    return images, tf.where(tf.strings.length(el["errors"]) > 0, el["errors"], errors)


def _keep_only(ok, images, el):
    """The samples where ok is true, of images and of el's per-sample vectors."""
    el = {k: tf.boolean_mask(v, ok) for k, v in el.items()}
    return tf.nest.map_structure(lambda t: tf.boolean_mask(t, ok), images), el


def _elements(images, el, labels: bool, with_filenames: bool):
    """The element: images, then the labels (ClassificationDataset), then the filenames."""
    out = (images, *_pass_through(el, labels, with_filenames))
    return out if len(out) > 1 else images


def _pass_through(el, labels: bool, with_filenames: bool) -> tuple:
    """What follows the images in an element: the labels, then the filenames, as asked."""
    out = ()
    if labels:
        out += (el["target"],)
    if with_filenames:
        out += (el["filename"],)
    return out


# ------------------------------------------------------------------ device="gpu"

_warned = set()  # the reasons already given for decoding on the CPU


def _warn_cpu_fallback(why: str) -> None:
    if why in _warned:
        return
    _warned.add(why)
    warnings.warn(
        f"as_dataset(device='gpu') decodes on the CPU, as device='cpu' does (the same values): {why}",
        RuntimeWarning,
        stacklevel=user_stacklevel(),
    )


def decoder_device(input_context=None) -> tuple[str | None, str | None]:
    """(the device that decodes device="gpu"'s batches, None) or (None, why there is none).

    A GPU, where TensorFlow sees one and bzna_tf's NVDEC kernels loaded
    (:func:`bzna_tf.ops.gpu_error` is None): the GPU of the current device
    scope (``tf.distribute``'s per-replica datasets are built in their
    replica's scope), else GPU ``input_context.input_pipeline_id`` (modulo the
    GPUs), else the first GPU.
    """
    gpus = tf.config.list_logical_devices("GPU")
    if not gpus:
        return None, "TensorFlow sees no GPU"
    from bzna_tf.ops._load import gpu_error, load_library

    load_library()  # loads the GPU kernels where they can run
    error = gpu_error()
    if error is not None:
        return None, error
    from tensorflow.python.framework import kernels

    registered = kernels.get_registered_kernels_for_op("BznaDecodeWarpDataset").kernel
    registered = {k.device_type for k in registered}
    if "GPU" not in registered:  # GPU libraries built before the op (a $BZNA_TF_GPU_LIBRARY_DIR of old)
        return None, "bzna_tf's GPU library has no BznaDecodeWarpDataset kernel: rebuild it"
    scope = tf.DeviceSpec.from_string(_scope_device())
    if scope.device_type == "GPU":
        return scope.to_string(), None
    k = 0 if input_context is None else input_context.input_pipeline_id % len(gpus)
    return gpus[k].name, None


def _scope_device() -> str:
    """The device the enclosing ``tf.device`` names ("" for none)."""
    if tf.executing_eagerly():
        from tensorflow.python.eager import context

        return context.context().device_name or ""
    return tf.constant(0).device


def _host_of(device: str) -> str:
    """The CPU of ``device``'s task (the input pipeline's device)."""
    spec = tf.DeviceSpec.from_string(device)
    return spec.replace(device_type="CPU", device_index=0).to_string()


DEFAULT_DEPTH = 2  # batches decoded ahead by device="gpu" when as_dataset's prefetch is AUTOTUNE
MAX_GPU_DEPTH = 64  # the most the GPU kernel takes


def _decode_ahead(ds, source: Source, options, device: str) -> tf.data.Dataset:
    """The batches of ``ds`` (pictures, matrices, ...) decoded on ``device``, ``depth`` batches ahead."""
    data_spec = ds.element_spec[0]
    n = None if options.skip else data_spec.shape[0]
    h, w = options.shape
    shape = (n, 3, h, w) if options.data_format == "channels_first" else (n, h, w, 3)
    spec = (tf.TensorSpec(shape, tf.float32), *(_rows(s, n) for s in ds.element_spec[5:]))
    depth = options.prefetch if options.prefetch not in (None, tf.data.AUTOTUNE) else DEFAULT_DEPTH
    # The decoding stage always holds one batch in flight (prefetch=0: the CPU pipeline prefetches
    # none), and the GPU kernel at most MAX_GPU_DEPTH.
    depth = min(max(depth, 1), MAX_GPU_DEPTH)
    counter = getattr(ds, "bzna_skipped", None)
    with tf.device(device):
        out = decode_warp_dataset(
            ds,
            spec if len(spec) > 1 else spec[0],
            options.shape,
            **_warp_arguments(options),
            on_error=options.on_error,
            counter=counter.counter if counter is not None else "",
            depth=depth,
        )
    for name in ("bzna_epochs", "bzna_skipped", "bzna_initial_epoch", "bzna_sharded"):
        if hasattr(ds, name):
            setattr(out, name, getattr(ds, name))
    return out


def _rows(spec: tf.TensorSpec, n) -> tf.TensorSpec:
    """``spec`` with ``n`` (None: unknown) rows."""
    return tf.TensorSpec([n, *spec.shape[1:]], spec.dtype)
