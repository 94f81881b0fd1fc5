"""The ``tf.data`` graph of :meth:`bzna_tf.Dataset.as_dataset`, built in named steps::

    order      stream positions p (epochs.positions: a range, or each
               iteration's range from the EpochState variable), batched;
               per batch: BznaEpochSchedule (p -> epoch p // per_epoch and
               the sample at that place of the epoch's permutation and shard)
    read       BznaReadSamples: H.265 pictures, sizes, targets (filenames)
    matrices   each sample's warp matrix from (seed, epoch, index)
    decode     decode + warp + normalise: one fused op, bounded by each
               picture's size (not its padded frame) (device="gpu": the
               pictures, matrices and picture sizes go to the model's
               DecodeWarp instead)
    skip       on_error="skip": samples that failed dropped from their batch
    count      the batches per iteration, stated (Keras reads it)
    prefetch   and the options every iterator needs

Every stage is a TensorFlow op: iterators checkpoint and restore mid-epoch,
and the pipeline (with an ``initial_epoch``) serialises to a graph.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

import bzna_tf.format.wording as wording
from bzna_tf.datasets.epochs import positions
from bzna_tf.ops.source import SkippedSamples, epoch_schedule, read_samples, report_skips, sample_names
from bzna_tf.ops.warp import decode_warp

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
    """

    files: list
    starts: np.ndarray
    track: str
    selection: np.ndarray
    labels: bool


def build(source: Source, options) -> tf.data.Dataset:
    """The pipeline for ``source`` as ``options`` (an :class:`~.arguments.Options`) ask."""
    count, index = options.shard
    per_epoch = len(range(index, len(source.selection), count))
    if per_epoch == 0 and (options.training or options.epochs is None):
        raise ValueError(
            f"Shard {index} of {count} of {wording.count(len(source.selection), 'sample')} is empty "
            "(training=False lets a validation shard be empty, when it is not repeated endlessly)"
        )
    batches = _batches(options, per_epoch)
    root, state = positions(options, per_epoch, batches)
    counter = f"bzna_tf-{uuid.uuid4().hex}" if options.skip else ""
    autotune = tf.data.AUTOTUNE
    ds = root.batch(options.batch_size, drop_remainder=options.drop_remainder or options.epochs is None)
    ds = ds.map(
        _load_batch(source, options, counter),
        num_parallel_calls=autotune if options.num_parallel_calls is None else options.num_parallel_calls,
        deterministic=True,
    )
    if state is not None or options.epochs is None:
        # flat_map (and an endless range) hide the count: state it (Keras then knows the steps per epoch).
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    ds = ds.prefetch(autotune if options.prefetch is None else options.prefetch)
    if state is not None or options.skip:
        # The root reads and advances the epoch variable once per iteration;
        # an iterator checkpoint need not (and cannot) hold that read: the
        # running iteration's start is in flat_map's saved state. Nor need
        # it hold the skip counter (reporting only).
        tf_options = tf.data.Options()
        tf_options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
        ds = ds.with_options(tf_options)
    if state is not None:
        ds.bzna_epochs = state
    if options.skip:
        ds.bzna_skipped = SkippedSamples(counter)
    return ds


def _batches(options, per_epoch: int):
    """Batches per iteration (``tf.data.INFINITE_CARDINALITY`` for an endless pipeline)."""
    if options.epochs is None:
        return tf.data.INFINITE_CARDINALITY
    total = options.epochs * per_epoch
    return total // options.batch_size if options.drop_remainder else math.ceil(total / options.batch_size)


def _load_batch(source: Source, options, counter: str):
    """The per-batch function: stream positions -> the batch's elements."""
    selection = tf.constant(source.selection, tf.int64)
    seed = tf.constant(options.seed, tf.int64)

    def load(positions):
        # order
        idx, epoch = epoch_schedule(positions, selection, seed, shuffle=options.shuffle, shard=options.shard)
        # read
        el = read_samples(
            source.files, idx, track=source.track, with_filenames=options.with_filenames,
            on_error=options.on_error,
        )  # fmt: skip
        # matrices
        sizes = tf.stack([el["height"], el["width"]], axis=-1)  # the pictures', without the frames' padding
        in_shapes = sizes
        if options.skip:  # a sample that could not be read has sizes 0: any matrix will do
            in_shapes = tf.maximum(in_shapes, 1)
        m = options.transform.matrices(
            in_shapes, options.shape, seed=options.seed, epoch=epoch, indices=idx, training=options.training
        )
        # decode + warp + normalise
        if options.payloads:
            images, errors = {"data": el["data"], "matrices": m, "picture_sizes": sizes}, el["errors"]
        else:
            images, errors = _decode_warp(el, m, sizes, idx, source, options)
        # skip
        if options.skip:
            images, el = _keep_only(report_skips(errors, counter), images, el)
        return _elements(images, el, source.labels, options.with_filenames)

    return load


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
        bias=options.bias,
        norm=options.norm,
        oob_color=options.fill_value,
        data_format="NCHW" if options.data_format == "channels_first" else "NHWC",
        antialias=options.antialias,
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
    out = (images,)
    if labels:
        out += (el["target"],)
    if with_filenames:
        out += (el["filename"],)
    return out if len(out) > 1 else images
