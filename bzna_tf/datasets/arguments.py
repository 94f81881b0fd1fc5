"""``as_dataset``'s arguments, checked and resolved before any graph is built.

:func:`check` turns the keywords into one :class:`Options` (or raises a
``ValueError``/``TypeError`` naming the argument, Keras style: what was
expected, then ``Received: arg=value``). The pipeline (:mod:`.pipeline`)
reads only the resolved options. This module imports no TensorFlow at import
time (``bzna_tf.blending`` and ``bzna_tf.previews`` use its small checkers).
"""

from __future__ import annotations

import json
import os
import random
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from bzna_tf.format.keywords import flag
from bzna_tf.format.wording import user_stacklevel

__all__ = [
    "DATA_FORMATS",
    "DEVICES",
    "HINTS",
    "MAX_BATCH_BYTES",
    "RENAMED",
    "SHARD_BY",
    "Options",
    "MAX_PARALLEL_CALLS",
    "MAX_PREFETCH",
    "MAX_PREFETCH_BYTES",
    "as_written",
    "check",
    "check_seed",
    "flag",
    "nonnegative_int",
    "positive_int",
]

# Keras' names of the two layouts, then the ops' (tf.nn's) names of the same, which as_dataset also takes.
DATA_FORMATS = ("channels_last", "channels_first")
_OP_DATA_FORMATS = {"NHWC": "channels_last", "NCHW": "channels_first"}
DEVICES = ("auto", "cpu", "gpu", "model")
SHARD_BY = ("samples", "files")
SEED_MOD = 2**63
# The largest batch as_dataset makes: batch_size x height x width x 3 float32 values. A mistyped
# `shape` (100000 for 100) must fail here, not in a 100 GiB allocation in a tf.data thread.
MAX_BATCH_BYTES = 4 * 2**30
"""The largest batch ``as_dataset`` makes, in bytes: ``batch_size x height x width x 3`` float32 values
(4 GiB). A larger one is refused when the pipeline is built, naming ``shape`` and ``batch_size``."""

MAX_PARALLEL_CALLS = 1024
"""The most batches ``as_dataset`` decodes at once (``num_parallel_calls``); ``AUTOTUNE`` (the default) lets
tf.data choose."""
MAX_PREFETCH = 1024
"""The most batches ``as_dataset`` prefetches (``prefetch``)."""
MAX_PREFETCH_BYTES = 16 * 2**30
"""The most bytes of images ``as_dataset``'s prefetch holds: ``prefetch`` x the bytes of one batch
(``batch_size x height x width x 3`` float32 values), 16 GiB. A larger one is refused when the pipeline is
built, naming ``prefetch``."""

RENAMED = {"layout": "data_format"}
"""``as_dataset``'s old keyword names -> the new ones: the old ones still work until the next release,
with a ``FutureWarning``."""

_SPLIT = (
    'the samples are chosen when the dataset is opened: bzna_tf.Dataset(path, split="all[:90%]") '
    '(ImageNet(root, split="train")), or ds.select(...); as_dataset reads them all'
)
HINTS = {
    # Keras' image_dataset_from_directory and ImageDataGenerator, tf.data, PyTorch's DataLoader
    "image_size": "shape",
    "target_size": "shape",
    "size": "shape",
    "output_shape": "shape",  # bzna_tf.ops.decode_warp's name
    "batch": "batch_size",
    "drop_last": "drop_remainder",
    "shuffle_files": "shuffle",  # TFDS
    "split": _SPLIT,  # TFDS' as_dataset(split=...)
    "validation_split": _SPLIT,
    "subset": _SPLIT,
    "as_supervised": (
        "ClassificationDataset.as_dataset yields (images, labels) already (Dataset.as_dataset: images)"
    ),
    "crop_to_aspect_ratio": "warp",
    "interpolation": (
        "the warp is bilinear; `antialias` chooses whether a shrinking warp averages each output "
        "pixel's footprint"
    ),
    "label_mode": (
        "labels are the stored int64 targets (Keras' label_mode='int'); for one-hot labels, "
        "ds.map(lambda x, y: (x, tf.one_hot(y, num_classes)))"
    ),
    "labels": "the labels are the targets stored in the file at conversion (`bzna-tf convert`)",
    "color_mode": (
        "images are RGB, 3 channels; for grayscale, ds.map(lambda x, y: (tf.image.rgb_to_grayscale(x), y))"
    ),
}
"""Keywords of Keras, TFDS or tf.data that ``as_dataset`` does not take -> the parameter meant (the
error says "did you mean `shape`?") or what to do instead."""


def as_written(func):
    """Marks ``func`` so that AutoGraph calls it as written inside a ``tf.function``.

    ``as_dataset`` and ``blend`` are Python over Python values: they build
    ``tf.data`` graphs and never branch on a tensor. Called inside a
    ``tf.function`` (ParameterServerStrategy's dataset function), AutoGraph
    would convert them and the ~50 functions they call first, about 5 s the
    first time in a process, to run the same code. The mark is the one
    AutoGraph puts on its own functions (``autograph_info__``); the functions
    given to ``Dataset.map`` inside are still converted, as in eager mode.
    This module imports no TensorFlow, hence the attribute rather than
    ``tf.autograph.experimental.do_not_convert``, which would also switch
    AutoGraph off for those map functions.
    """
    func.autograph_info__ = None
    return func


@dataclass(frozen=True)
class Options:
    """What ``as_dataset`` was asked for, checked and with its defaults filled in."""

    # output
    batch_size: int
    shape: tuple[int, int]
    data_format: str  # "channels_last" or "channels_first"
    drop_remainder: bool
    with_filenames: bool
    payloads: bool  # device="model": {"data", "matrices", "picture_sizes"} instead of images
    device: str  # where pictures are decoded: "cpu", "gpu" (ahead, by the dataset) or "model"
    on_error: str
    # order
    shuffle: bool
    seed: int
    seed_drawn: bool  # no seed was given nor TensorFlow's global one set: as_dataset drew this one at random
    epochs: int | None  # per iteration; None: endless
    initial_epoch: int | None
    # augmentation
    transform: object  # a bzna_tf.transforms WarpTransform
    training: bool
    fill_value: object  # per channel, (3,)
    antialias: bool
    # normalisation: the kernel's (rgb - bias) * norm
    bias: object
    norm: object
    # distribution
    shard: tuple[int, int]  # (count, index)
    shard_by: str
    sharded: bool  # asked for one shard of several (shard_by="files" reads its files as shard (1, 0))
    # tf.data tuning
    num_parallel_calls: int | None
    prefetch: int | None
    # shard_by="files": the (count, index) asked for, once `shard` is (1, 0) over that shard's files
    file_shard: tuple[int, int] | None = None
    # Built with an input_context: (num_input_pipelines, input_pipeline_id), and the replicas the pipeline
    # feeds, one batch each per step (num_replicas_in_sync // num_input_pipelines); else None and 1.
    input_pipeline: tuple[int, int] | None = None
    batches_per_step: int = 1

    @property
    def whole_step_batches(self) -> int:
        """The multiple of which an iteration's batch count is (1: any).

        ``distribute_datasets_from_function`` on one worker hands this pipeline's
        batches to its replicas in turn, one each per step. Of statically shaped
        batches (``drop_remainder=True``; ``on_error="skip"`` makes their first
        dimension None) tf.distribute takes no partial step: a last step that
        some replicas would get no batch for is cut off mid-step, its batches
        read and lost. Such an iteration therefore ends at a whole step. Across
        workers tf.distribute feeds the replicas without a batch an empty one
        instead, and an endless pipeline has no last step.
        """
        alone = self.input_pipeline is not None and self.input_pipeline[0] == 1
        if alone and self.drop_remainder and not self.skip and self.epochs is not None:
            return self.batches_per_step
        return 1

    @property
    def skip(self) -> bool:
        return self.on_error == "skip"

    @property
    def reproducible(self) -> bool:
        """Whether a rebuilt pipeline yields the same data: a seed was given, or nothing is drawn."""
        fixed = not self.training or _fixed_warp(self.transform)
        return not self.seed_drawn or (fixed and not self.shuffle)


def _fixed_warp(transform) -> bool:
    """Whether a warp draws nothing (the same matrix for a picture in every epoch): CenterResizedCrop,
    ConstantWarpTransform, or a SimilarityTransform (RandomResizedCrop) of no random range."""
    from bzna_tf.transforms import (
        CenterResizedCrop,
        ConstantWarpTransform,
        RandomResizedCrop,
        SimilarityTransform,
    )

    if isinstance(transform, (CenterResizedCrop, ConstantWarpTransform)):
        return True
    if type(transform) not in (SimilarityTransform, RandomResizedCrop):  # a subclass may draw more
        return False
    t = transform
    return (
        t.scale[0] == t.scale[1]
        and (t.ratio is None or t.ratio[0] == t.ratio[1])
        and t.degrees[0] == t.degrees[1]
        and not any(t.translate)
        and t.flip_h in (0.0, 1.0)
        and t.flip_v in (0.0, 1.0)
        and not t.random_crop
    )


def check(
    *, batch_size, shape, shuffle, seed, repeat, initial_epoch, warp, training, fill_value, antialias,
    normalize, data_format, drop_remainder, with_filenames, device, on_error, input_context, shard, shard_by,
    num_parallel_calls, prefetch,
) -> Options:  # fmt: skip
    """Every argument of ``as_dataset`` but the sample list, checked, in one :class:`Options`."""
    from bzna_tf.ops.source import check_on_error

    batch_size = positive_int(batch_size, "batch_size")
    shuffle, training = flag(shuffle, "shuffle"), flag(training, "training")
    drop_remainder = flag(drop_remainder, "drop_remainder")
    with_filenames = flag(with_filenames, "with_filenames")
    layer, transform = _warp(warp)
    hw = _shape(shape, layer)
    _check_batch_bytes(batch_size, hw, shape)
    if device not in DEVICES:
        raise ValueError(f"Expected `device` in {DEVICES}. Received: device={device!r}")
    num_parallel_calls = _tuning(num_parallel_calls, "num_parallel_calls", 1, MAX_PARALLEL_CALLS)
    prefetch = _tuning(prefetch, "prefetch", 0, MAX_PREFETCH)
    if prefetch is not None and device != "model":
        _check_prefetch_bytes(prefetch, batch_size, hw)
    # device="model": as_dataset makes no images, so the warp layer's layout is not compared with Keras'
    # (the model's DecodeWarp has a layout of its own).
    layout = _data_format(data_format, None if device == "model" else layer)
    # A layout given for images as_dataset does not make (device="model") is a mistake; Keras' default is not.
    given = None if data_format is None or layout == "channels_last" else layout
    payloads = _payload_mode(device, normalize=normalize, fill_value=fill_value, antialias=antialias,
                             data_format=given)  # fmt: skip
    check_on_error(on_error)
    bias, norm = normalization(normalize)
    draws = shuffle or (training and not _fixed_warp(transform))
    seed_value, drawn = resolve_seed(seed, draws=draws)
    # The workers among which tf.distribute's DATA auto-sharding would split an unsharded pipeline (one of
    # shard=(1, 0) too: the whole dataset, its auto_shard_policy left as it is).
    unsharded = input_context is None and (shard is None or _shard(shard, None)[0] == 1)
    workers = _auto_sharded_workers() if unsharded else 1
    if workers > 1 and shuffle and seed is None:
        # DATA auto-sharding keeps every N-th batch of each worker's pipeline: of N orders when drawn apart.
        # A seed drawn from one global seed is no better: it depends on the random ops the process made
        # before (TensorFlow's op seed counter), which differ between a chief and the other workers.
        raise ValueError(
            f"as_dataset(shuffle=True) without a `seed` in a job of {workers} workers: each worker would "
            "draw its own order (one global seed too: the seed drawn from it depends on the random ops "
            "each process made before), and tf.distribute's auto-sharding (every N-th batch of each "
            "worker's pipeline) would read some samples twice and others never. Give every worker the "
            "same `seed`, or better, build the pipeline per worker: "
            "strategy.distribute_datasets_from_function(lambda ctx: ds.as_dataset(..., input_context=ctx, "
            "seed=...))"
        )
    shards = _distribution(shard, input_context, shard_by, shuffle, seed, workers)
    ctx = input_context
    input_pipeline = None if ctx is None else (int(ctx.num_input_pipelines), int(ctx.input_pipeline_id))
    batches_per_step = 1 if ctx is None else max(1, ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    if initial_epoch is None and _inside_function():
        raise ValueError(
            "as_dataset(initial_epoch=None) called in a tf.function (ParameterServerStrategy's "
            "create_per_worker_dataset traces the dataset function, say): its epoch counter is a variable "
            "of the process that builds the pipeline, which the workers that run the function cannot "
            "reach. Pass initial_epoch= (a stateless pipeline: every iteration yields the epochs from it; "
            "repeat=True for an endless stream)"
        )
    return Options(
        batch_size=batch_size,
        shape=hw,
        data_format=layout,
        drop_remainder=drop_remainder,
        with_filenames=with_filenames,
        payloads=payloads,
        device="cpu" if device == "auto" else device,
        on_error=on_error,
        shuffle=shuffle,
        seed=seed_value,
        seed_drawn=drawn,
        epochs=_epochs(repeat),
        initial_epoch=None if initial_epoch is None else nonnegative_int(initial_epoch, "initial_epoch"),
        transform=transform,
        training=training,
        fill_value=_fill_value(fill_value, layer),
        antialias=getattr(layer, "antialias", True) if antialias is None else antialias,
        bias=bias,
        norm=norm,
        shard=shards,
        shard_by=shard_by,
        sharded=shards[0] > 1,
        num_parallel_calls=num_parallel_calls,
        prefetch=prefetch,
        input_pipeline=input_pipeline,
        batches_per_step=batches_per_step,
    )


# ------------------------------------------------------------------ small checkers


def positive_int(value, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"Expected `{arg}` as a positive integer. Received: {arg}={value!r}")
    return int(value)


def _tuning(value, arg: str, least: int, most: int) -> int | None:
    """A tf.data tuning count: None for ``tf.data.AUTOTUNE`` (-1) or None, else an int in [least, most]."""
    if value is None or (_is_int(value) and value == -1):
        return None
    if not _is_int(value) or not least <= value <= most:
        raise ValueError(
            f"Expected `{arg}` as tf.data.AUTOTUNE (the default) or an integer from {least} to {most}. "
            f"Received: {arg}={value!r}"
        )
    return int(value)


def _batch_bytes(batch_size: int, hw) -> int:
    """The bytes of one batch of images: ``batch_size x height x width x 3`` float32 values."""
    return batch_size * hw[0] * hw[1] * 3 * 4


def _check_prefetch_bytes(prefetch: int, batch_size: int, hw) -> None:
    held = prefetch * _batch_bytes(batch_size, hw)
    if held > MAX_PREFETCH_BYTES:
        raise ValueError(
            f"as_dataset's prefetch holds at most {MAX_PREFETCH_BYTES / 2**30:g} GiB of images; "
            f"prefetch={prefetch} batches of {batch_size} {hw[0]} x {hw[1]} images would take "
            f"{held / 2**30:,.1f} GiB. "
            f"Prefetch fewer batches (tf.data.AUTOTUNE, the default, sizes it). Received: prefetch={prefetch}"
        )


def nonnegative_int(value, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"Expected `{arg}` as a non-negative integer. Received: {arg}={value!r}")
    return int(value)


def _integral(value):
    """``value`` as an int where it is one (an int, an integral float, "4", an eager tensor), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if hasattr(value, "numpy") and callable(value.numpy):  # an eager tensor (replica_id_in_sync_group, ...)
        try:
            value = value.numpy()
        except Exception:  # a symbolic tensor: not known here
            return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# ------------------------------------------------------------------ output


def _is_warp_layer(warp) -> bool:
    return hasattr(warp, "transform") and hasattr(warp, "height") and hasattr(warp, "matrices")


def _warp(warp):
    """(the warp layer or None, its transform): a layer, a transform, or None for the whole picture."""
    from bzna_tf.transforms import CenterResizedCrop, WarpTransform

    if warp is None:
        return None, CenterResizedCrop(scale=1.0)
    if _is_warp_layer(warp):
        return warp, warp.transform
    if isinstance(warp, WarpTransform):
        return None, warp
    raise TypeError(
        "Expected `warp` to be a bzna_tf.layers warp layer or a bzna_tf.transforms transform. "
        f"Received: warp={warp!r}"
    )


def _shape(shape, layer):
    """The output (height, width): from ``shape``, or from a warp layer's (height, width)."""
    layer_hw = (layer.height, layer.width) if layer is not None else None
    if shape is None:
        if layer_hw is None:
            raise ValueError(
                "Expected `shape` = (height, width) of the output images (or a warp layer, which has one). "
                "Received: shape=None"
            )
        return layer_hw
    if _is_int(shape):
        shape_hw = (shape, shape)
    elif isinstance(shape, (tuple, list, np.ndarray)) and len(shape) == 2 and all(_is_int(v) for v in shape):
        shape_hw = tuple(shape)
    else:
        raise ValueError(
            "Expected `shape` = (height, width), two positive integers, or one for a square. "
            f"Received: shape={shape!r}"
        )
    if min(shape_hw) <= 0:
        raise ValueError(f"Expected `shape` = (height, width) of positive sizes. Received: shape={shape!r}")
    hw = tuple(int(v) for v in shape_hw)
    if layer_hw is not None and layer_hw != hw:
        raise ValueError(
            f"`shape` {hw} differs from the warp layer's (height, width) {layer_hw}: "
            "give one, or make them agree"
        )
    return hw


def _data_format(data_format, layer=None) -> str:
    """Keras' name of the layout, from Keras' name (``"channels_last"``, ``"channels_first"``) or the ops'
    (``"NHWC"``, ``"NCHW"``); None is Keras' ``image_data_format()``, unless the warp layer says otherwise
    (then the choice is the caller's)."""
    if data_format is None:
        import keras

        chosen = keras.config.image_data_format()
        theirs = getattr(layer, "data_format", None)
        if theirs is not None and theirs != chosen:
            raise ValueError(
                f"The warp layer's data_format is {theirs!r} and Keras' image_data_format() is {chosen!r}: "
                "pass data_format='channels_last' or 'channels_first' to as_dataset to choose the layout "
                "of its images"
            )
        return chosen
    if isinstance(data_format, str) and data_format in DATA_FORMATS:
        return data_format
    if isinstance(data_format, str) and data_format in _OP_DATA_FORMATS:
        return _OP_DATA_FORMATS[data_format]
    raise ValueError(
        f"Expected `data_format` in {DATA_FORMATS} (or the ops' {tuple(_OP_DATA_FORMATS)}). "
        f"Received: data_format={data_format!r}"
    )


def _check_batch_bytes(batch_size: int, hw, shape) -> None:
    asked = _batch_bytes(batch_size, hw)
    if asked > MAX_BATCH_BYTES:
        raise ValueError(
            f"as_dataset makes batches of at most {MAX_BATCH_BYTES / 2**30:g} GiB (batch_size x height x "
            f"width x 3 float32); batch_size={batch_size} of {hw[0]} x {hw[1]} images would take "
            f"{asked / 2**30:,.1f} GiB. Check `shape` (the output (height, width)) and `batch_size`. "
            f"Received: shape={shape!r}, batch_size={batch_size}"
        )


def _payload_mode(device, **image_arguments) -> bool:
    """True for device="model" (the model decodes); checks that tf.data was asked for no image options."""
    if device != "model":
        return False
    given = [_LAYER_SPELLING.get(k, k) for k, v in image_arguments.items() if v is not None]
    if given:
        raise ValueError(
            f"With device='model' the images are made by the model's first layer, "
            f"bzna_tf.layers.DecodeWarp: give it {', '.join(given)}, not as_dataset"
        )
    return True


# How DecodeWarp spells as_dataset's image arguments.
_LAYER_SPELLING = {
    "normalize": "the normalisation (its mean= and std=, or bias= and norm=)",
    "data_format": "the layout (its data_format='channels_first')",
}


# ------------------------------------------------------------------ order


def _epochs(repeat):
    """How many epochs one iteration gives: an int, or None for endless."""
    if repeat is True:
        return None
    if repeat is False or repeat is None:
        return 1
    if _is_int(repeat) and repeat > 0:
        return int(repeat)
    raise ValueError(
        f"Expected `repeat` as True, False or a positive number of epochs. Received: repeat={repeat!r}"
    )


def resolve_seed(seed, draws: bool = True) -> tuple[int, bool]:
    """(the seed, reduced to [0, 2**63), whether it was drawn at random); None draws one where the
    pipeline ``draws`` anything (shuffles, or warps at random), else is 0: a pipeline that draws
    nothing takes no seed from TensorFlow (its other random ops' seeds stay as they were).

    As tf.data's ``shuffle(seed=None)`` does, a drawn seed follows TensorFlow's global seed
    (``tf.random.set_seed``, ``keras.utils.set_random_seed``) when one is set: the same for every run
    of the same program, another for each pipeline built; else it is random.
    """
    if seed is None and not draws:
        return 0, False
    if seed is None:
        from tensorflow.python.framework import random_seed

        global_seed, op_seed = random_seed.get_seed(None)
        if global_seed is None:
            return random.SystemRandom().randrange(SEED_MOD), True
        words = np.random.SeedSequence([int(global_seed), int(op_seed)]).generate_state(2, np.uint64)
        return (int(words[0]) << 64 | int(words[1])) % SEED_MOD, False
    return int(check_seed(seed)) % SEED_MOD, False


def check_seed(seed):
    """``seed`` as given if it is an integer (NumPy's too) or None; else a TypeError naming it."""
    if seed is not None and not _is_int(seed):
        raise TypeError(f"Expected `seed` as an integer or None. Received: seed={seed!r}")
    return seed


# ------------------------------------------------------------------ augmentation and normalisation


def _fill_value(fill_value, layer):
    from bzna_tf.transforms.constant import per_channel

    if fill_value is None:
        fill_value = getattr(layer, "fill_value", 0.0)
    return per_channel(fill_value, "fill_value", finite=False)


def normalization(normalize):
    """(bias, norm) float32 tensors (3,) for the kernel's ``(rgb - bias) * norm``, from ``normalize``.

    Args:
      normalize: None (RGB in [0, 255]), a ``bzna_tf.layers.Normalize`` layer,
        or a ``(mean, std)`` pair in [0, 1] units (each a number or 3).
    """
    from bzna_tf.transforms.constant import bias_norm

    layers = sys.modules.get("bzna_tf.layers.normalize")  # a Normalize exists only once it is imported
    if layers is not None and isinstance(normalize, layers.Normalize):
        return bias_norm(*normalize.kernel_terms())
    if normalize is None:
        return bias_norm()
    if not (isinstance(normalize, (tuple, list)) and len(normalize) == 2):
        raise TypeError(
            "Expected `normalize` as a (mean, std) pair in [0, 1] units, e.g. ((0.485, 0.456, 0.406), "
            "(0.229, 0.224, 0.225)), or a bzna_tf.layers.Normalize layer (Benzina's bias/norm: "
            f"Normalize(bias=..., norm=...)). Received: normalize={normalize!r}"
        )
    try:
        return bias_norm(mean=normalize[0], std=normalize[1])
    except (TypeError, ValueError) as e:
        raise type(e)(f"{e} (in `normalize` = (mean, std)). Received: normalize={normalize!r}") from None


# ------------------------------------------------------------------ distribution


def _distribution(shard, input_context, shard_by, shuffle, seed, workers) -> tuple[int, int]:
    """(count, index) of this pipeline's shard, checked with how samples go to shards; ``workers``: those
    that DATA auto-sharding splits it among (:func:`_auto_sharded_workers`; 1 for a sharded pipeline)."""
    count, index = _shard(shard, input_context)
    if workers > 1:
        _warn_auto_shard(workers)
    if shard_by not in SHARD_BY:
        raise ValueError(f"Expected `shard_by` in {SHARD_BY}. Received: shard_by={shard_by!r}")
    if shuffle and count > 1 and shard_by == "samples" and seed is None:
        raise ValueError(
            "Sharded shuffling needs a `seed`: every shard must draw the same permutation "
            "for the shards to stay disjoint"
        )
    return count, index


def _inside_function() -> bool:
    """Whether the caller is being traced into a tf.function (not TF1's graph mode)."""
    import tensorflow as tf

    return tf.inside_function()


def _shard(shard, input_context):
    """(count, index) of this pipeline's shard."""
    if shard is not None and input_context is not None:
        raise ValueError("Give `shard` or `input_context`, not both")
    if input_context is not None:
        ctx = input_context
        needs = ("num_input_pipelines", "input_pipeline_id", "num_replicas_in_sync")
        if not all(hasattr(ctx, a) for a in needs):
            raise TypeError(
                "Expected `input_context` as the tf.distribute.InputContext that "
                "strategy.distribute_datasets_from_function passes its function. "
                f"Received: input_context={ctx!r}"
            )
        count, index = _integral(ctx.num_input_pipelines), _integral(ctx.input_pipeline_id)
        if count is None or index is None or count < 1 or not 0 <= index < count:
            raise ValueError(
                "Expected `input_context` with 0 <= input_pipeline_id < num_input_pipelines. Received: "
                f"input_context with num_input_pipelines={ctx.num_input_pipelines!r}, "
                f"input_pipeline_id={ctx.input_pipeline_id!r}"
            )
        return count, index
    if shard is None:
        return 1, 0
    try:
        count, index = shard
    except (TypeError, ValueError) as e:
        raise ValueError(f"Expected `shard` = (count, index). Received: shard={shard!r}") from e
    count, index = _integral(count), _integral(index)
    if count is None or index is None:  # int() would take shard (2.9, 1.7) as (2, 1)
        raise ValueError(f"Expected `shard` = (count, index) as integers. Received: shard={shard!r}")
    if count < 1 or not 0 <= index < count:
        raise ValueError(
            f"Expected `shard` = (count, index) with 0 <= index < count. Received: shard={shard!r}"
        )
    return count, index


_warned_auto_shard = False


def _cluster() -> tuple[dict, str | None]:
    """(the jobs of the cluster this process belongs to, this process's task type): from the
    distribution strategy in scope (({}, None) for one without a cluster, such as MirroredStrategy),
    else from ``$TF_CONFIG``."""
    import tensorflow as tf

    if tf.distribute.has_strategy():
        resolver = getattr(tf.distribute.get_strategy(), "cluster_resolver", None)
        if resolver is None:
            return {}, None
        cluster = resolver.cluster_spec().as_dict()
        return (cluster if isinstance(cluster, dict) else {}), getattr(resolver, "task_type", None)
    try:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        cluster, task = config.get("cluster") or {}, (config.get("task") or {}).get("type")
    except (ValueError, AttributeError):
        return {}, None
    return (cluster if isinstance(cluster, dict) else {}), (task if isinstance(task, str) else None)


def _auto_sharded_workers() -> int:
    """The workers among which tf.distribute's DATA auto-sharding would split a pipeline built here (1
    where none would): those of the multi-worker job this process belongs to; not under
    ParameterServerStrategy (a "ps" job), which does not auto-shard, nor in a tf.function (its
    create_per_worker_dataset traces one, and a seed drawn there is a constant every worker runs)."""
    if _inside_function():
        return 1
    cluster, task = _cluster()
    if "ps" in cluster or task not in (None, "chief", "worker"):  # an evaluator reads its own data
        return 1
    return sum(len(cluster.get(job) or ()) for job in ("chief", "worker")) or 1


def _warn_auto_shard(workers: int) -> None:
    """Once per process: an unsharded pipeline in a multi-worker job gets DATA auto-sharding."""
    global _warned_auto_shard
    if _warned_auto_shard:
        return
    _warned_auto_shard = True
    warnings.warn(
        f"as_dataset(...) without `input_context` or `shard` (or with shard=(1, 0)) in a job of {workers} "
        "workers: "
        "tf.distribute's auto-sharding cannot split this pipeline by file (its source is not a "
        "TensorFlow file reader) and falls back to DATA, so every worker decodes every picture and "
        "keeps 1/N of the batches. Build it per worker instead: "
        "strategy.distribute_datasets_from_function(lambda ctx: ds.as_dataset(..., input_context=ctx)), "
        "or pass shard=(num_workers, worker_index).",
        stacklevel=user_stacklevel(),
    )
