"""Fused warp ops: sample, colour-convert and normalise in one pass.

Both ops compute, for every output pixel (x, y) (integer indices, pixel centres
on integers), the source point ``(X, Y) = (X'/W', Y'/W')`` with
``(X', Y', W') = M @ (x, y, 1)``: the 3x3 matrix ``M`` maps OUTPUT pixel
indices to SOURCE pixel indices (the direction of
``tf.raw_ops.ImageProjectiveTransformV3``, not its inverse). A source point that
is NaN or outside the picture's area ``[-0.5, W - 0.5] x [-0.5, H - 0.5]`` (half
a pixel beyond the outer pixel centres) gives ``oob_color`` as is; otherwise
the image is sampled bilinearly (fetches clamped to the image, so the band
between the outer pixel centres and the picture's edge repeats the edge, as in
``tf.image.resize``, torchvision and Pillow), and each channel becomes
``(rgb - bias) * norm``. The full contract is SPEC section 4, whose bounds are
``[0, W - 1] x [0, H - 1]`` (Benzina's, which frame every upscaled picture
with ``oob_color``): bzna_tf widens them on purpose. For ``decode_warp`` the
picture is its ``picture_sizes`` at the top-left of the decoded frame: outside
the picture (its ``picture_sizes``, else the decoded frame) is ``oob_color``
on every side, and the frame's padding is never sampled. With
``antialias=True`` a pixel whose matrix shrinks the image is instead the mean
of its footprint under Pillow's triangle filter (custom_ops/lib/warp.h,
"Antialiasing"); the ops' default is False.

Normalisation: pass torchvision-style ``mean``/``std`` (per channel, in [0, 1]
units) and the wrappers compute ``bias = 255 * mean`` and
``norm = 1 / (255 * std)``. The original Benzina docs suggest
``norm = 255 * std``, which is wrong: the kernel multiplies by ``norm``.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from bzna_tf.ops.source import check_on_error
from bzna_tf.transforms.constant import bias_norm, per_channel

__all__ = ["decode_warp", "decode_warp_dataset", "warp_rgb", "warp_yuv420"]

MAX_SIDE = 2**31 - 1  # the ops' sizes are int32

DATA_FORMATS = ("NHWC", "NCHW")

# The warps sample integer images at data-dependent points: nothing to
# differentiate. Registering twice (a module reload) raises KeyError.
for _op_type in ("BznaWarpYuv420", "BznaWarpRgb", "BznaDecodeWarp", "BznaDecodeYuv420"):
    try:
        tf.no_gradient(_op_type)
    except KeyError:
        pass


def _ops():
    from bzna_tf.ops._load import load_library

    return load_library()


def _matrices(matrices):
    """Matrices as a float32 tensor (N, 3, 3) from (3, 3), (9,), (8,), (N, 3, 3), (N, 9) or (N, 8)."""
    m = tf.convert_to_tensor(matrices)
    if not (m.dtype.is_floating or m.dtype.is_integer):
        raise TypeError(f"Expected real-valued `matrices`. Received: matrices.dtype={m.dtype.name}")
    m = tf.cast(m, tf.float32)
    shape = tuple(m.shape.as_list()) if m.shape.rank is not None else None
    if shape is not None and len(shape) == 1 and shape[0] in (8, 9):
        m, shape = m[tf.newaxis], (1, *shape)
    if shape == (3, 3):
        return m[tf.newaxis]
    if shape is not None and len(shape) == 3 and shape[1:] == (3, 3):
        return m
    if shape is not None and len(shape) == 2 and shape[1] == 9:
        return tf.reshape(m, [-1, 3, 3])
    if shape is not None and len(shape) == 2 and shape[1] == 8:
        # TensorFlow's projective-transform convention: the last entry is 1.
        m = tf.concat([m, tf.ones_like(m[:, :1])], axis=1)
        return tf.reshape(m, [-1, 3, 3])
    raise ValueError(
        "Expected `matrices` of shape (3, 3), (N, 3, 3), (N, 9) or (N, 8) with a static rank and row "
        f"length. Received: matrices.shape={m.shape}"
    )


def _output_shape(output_shape):
    """(height, width) as an int32 tensor (2,); a constant when given as Python or NumPy values."""
    if isinstance(output_shape, (tf.Tensor, tf.Variable)):
        t = tf.cast(output_shape, tf.int32)
        if t.shape.rank != 1 or t.shape[0] not in (None, 2):
            raise ValueError(
                f"Expected `output_shape` = (height, width). Received: output_shape={output_shape!r}"
            )
        return t
    try:
        hw = np.asarray(output_shape)
    except (TypeError, ValueError):
        hw = np.asarray([])
    # Integers only: int() would truncate 4.7 and parse "4", and True is 1.
    if hw.dtype.kind not in "iu" or hw.ndim == 0:
        raise TypeError(
            "Expected `output_shape` = (height, width), two integers. "
            f"Received: output_shape={output_shape!r}"
        )
    if hw.shape != (2,) or hw.min() <= 0 or hw.max() > MAX_SIDE:  # int32 would wrap 2**32 + 4 to 4
        raise ValueError(
            f"Expected `output_shape` = (height, width), two integers from 1 to {MAX_SIDE}. "
            f"Received: output_shape={output_shape!r}"
        )
    return tf.constant(hw.astype(np.int64), dtype=tf.int32)


def _common(matrices, output_shape, bias, norm, mean, std, oob_color, data_format, batch):
    """Validated (matrices, output_shape, bias, norm, oob_color) tensors for a batch of `batch` (or None)."""
    if data_format not in DATA_FORMATS:
        raise ValueError(f"Expected `data_format` in {DATA_FORMATS}. Received: data_format={data_format!r}")
    m = _matrices(matrices)
    count = m.shape[0]
    if batch is not None and count is not None and count not in (1, batch):
        raise ValueError(
            f"Expected one matrix per image ({batch}) or a single matrix. Received: {count} matrices "
            f"(matrices.shape={m.shape})"
        )
    bias, norm = bias_norm(bias, norm, mean, std)
    # None: black, as in Benzina; NaN marks the pixels outside the picture.
    oob = tf.cast(per_channel(oob_color, "oob_color", default=0.0, finite=False), tf.float32)
    return m, _output_shape(output_shape), bias, norm, oob


def _antialias(antialias) -> bool:
    if not isinstance(antialias, (bool, np.bool_)):
        raise TypeError(f"Expected `antialias` as a bool. Received: antialias={antialias!r}")
    return bool(antialias)


def _picture_sizes(picture_sizes, single: bool, batch):
    """int32 (N, 2) (height, width) per picture, or (0,) for the decoded frames' sizes (None)."""
    if picture_sizes is None:
        return tf.zeros([0], tf.int32)
    sizes = tf.convert_to_tensor(picture_sizes)
    if not sizes.dtype.is_integer:
        raise TypeError(
            "Expected integer `picture_sizes` (height, width). "
            f"Received: picture_sizes.dtype={sizes.dtype.name}"
        )
    sizes = tf.cast(sizes, tf.int32)
    want = (2,) if single else (batch, 2)
    shape = tuple(sizes.shape.as_list()) if sizes.shape.rank is not None else None
    fits = shape is not None and len(shape) == len(want)
    fits = fits and all(s is None or w is None or s == w for s, w in zip(shape, want, strict=True))
    if not fits:
        expected = "(2,) for one picture" if single else f"(N, 2) with N = {batch} (the pictures)"
        raise ValueError(
            f"Expected `picture_sizes` of shape {expected}: (height, width) each. "
            f"Received: picture_sizes.shape={sizes.shape}"
        )
    return sizes[tf.newaxis] if single else sizes


def _require_dtype(t, arg, dtypes):
    if t.dtype not in dtypes:
        names = " or ".join(d.name for d in dtypes)
        raise TypeError(f"Expected `{arg}` of dtype {names}. Received: {arg}.dtype={t.dtype.name}")


def warp_yuv420(
    y,
    cb,
    cr,
    matrices,
    output_shape,
    *,
    bias=None,
    norm=None,
    mean=None,
    std=None,
    oob_color=(0, 0, 0),
    data_format="NHWC",
    antialias=False,
    name=None,
):
    """Warps decoded YUV 4:2:0 frames into normalised RGB, in one pass.

    For output pixel (x, y) the source point is ``(X'/W', Y'/W')`` with
    ``(X', Y', W') = M @ (x, y, 1)``: ``M`` maps OUTPUT pixel indices to SOURCE
    pixel indices, pixel centres on integers. A NaN source point, or one outside
    the picture's area ``[-0.5, W - 0.5] x [-0.5, H - 0.5]`` of the luma plane
    (the coded size), gives ``oob_color`` as is (no bias or norm). Otherwise luma is sampled bilinearly
    at (X, Y) and chroma at (X/2 - 0.25, Y/2 - 0.25), fetches clamped to each
    plane; full-range BT.601 converts to RGB, rounded half away from zero and
    clamped to [0, 255]; and channel c becomes ``(rgb[c] - bias[c]) * norm[c]``.
    With ``antialias=True`` luma and chroma are filtered where the matrix
    shrinks them (chroma's footprint columns are half the luma's, c texels of its half-size planes,
    lengthened to sqrt(c^2 + 1): the spread of the luma's filter over upsampled chroma).

    Normalise with ``mean``/``std``, torchvision style, in [0, 1] units: they
    become ``bias = 255 * mean`` and ``norm = 1 / (255 * std)``. Benzina's docs
    pass ``norm = 255 * std``, which is wrong (the kernel multiplies). With
    neither mean/std nor bias/norm the output is RGB in [0, 255].

    Args:
      y: uint8 luma planes, shape (N, H, W), or (H, W) for one frame.
      cb: uint8 blue-difference planes, shape (N, (H + 1) // 2, (W + 1) // 2), or without N.
      cr: uint8 red-difference planes, the shape of ``cb``.
      matrices: output->source matrices, row-major: (3, 3) for every frame, (N, 3, 3), (N, 9), or (N, 8)
        (TensorFlow's projective-transform convention, the ninth entry being 1).
      output_shape: the output (height, width), positive.
      bias: subtracted from each RGB channel, [0, 255] units; a scalar or 3 values. Default 0.
      norm: multiplies each channel after the bias; a scalar or 3 values. Default 1.
      mean: per-channel mean in [0, 1] units (e.g. ImageNet's (0.485, 0.456, 0.406)); excludes bias/norm.
      std: per-channel standard deviation in [0, 1] units (e.g. (0.229, 0.224, 0.225)).
      oob_color: the raw value of out-of-bounds pixels; a scalar or 3 values (None: 0, as in Benzina).
      data_format: ``"NHWC"`` (default) or ``"NCHW"``, the layout of the result.
      antialias: where the matrix shrinks the image (a column of the output->source map's Jacobian
        longer than one pixel), make each output pixel the mean of its footprint, weighted by
        Pillow's triangle filter laid along the Jacobian's columns (for resizes and crops up to a 16x
        reduction, exactly ``tf.image.resize(..., antialias=True)`` and Pillow's antialiased bilinear
        resize; past 16x the filter stops widening), instead of
        one bilinear sample. Out of bounds is still decided by the source point alone. Default False:
        one bilinear sample, SPEC section 4 (with the picture's area as bounds).
      name: name scope of the op.

    Returns:
      A float32 tensor (N, height, width, 3), or (N, 3, height, width) for NCHW; without N for one frame.

    Raises:
      TypeError: planes that are not uint8, or arguments of the wrong kind (``antialias`` not a bool).
      ValueError: shapes that do not fit together, both mean/std and bias/norm, a zero std, or an
        unknown data_format.
      tf.errors.InvalidArgumentError: shapes that do not fit together, found when the op runs.

    Example:

    ```python
    # y, cb, cr: one decoded frame's planes; a centre crop of 224 x 224.
    h, w = y.shape
    m = [[1, 0, (w - 224) / 2], [0, 1, (h - 224) / 2], [0, 0, 1]]
    rgb = warp_yuv420(y, cb, cr, m, (224, 224), mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    ```
    """
    with tf.name_scope(name or "warp_yuv420"):
        planes = [tf.convert_to_tensor(p) for p in (y, cb, cr)]
        for p, arg in zip(planes, ("y", "cb", "cr"), strict=True):
            _require_dtype(p, arg, (tf.uint8,))
        ranks = [p.shape.rank for p in planes]
        if ranks[0] not in (2, 3) or ranks[1] != ranks[0] or ranks[2] != ranks[0]:
            raise ValueError(
                "Expected y, cb and cr all of rank 3 (N, H, W) or all of rank 2 (H, W). Received: "
                f"y.shape={planes[0].shape}, cb.shape={planes[1].shape}, cr.shape={planes[2].shape}"
            )
        single = ranks[0] == 2
        if single:
            planes = [p[tf.newaxis] for p in planes]
        args = _common(
            matrices, output_shape, bias, norm, mean, std, oob_color, data_format, planes[0].shape[0]
        )
        out = _ops().bzna_warp_yuv420(
            *planes, *args, data_format=data_format, antialias=_antialias(antialias)
        )
        return out[0] if single else out


def warp_rgb(
    images,
    matrices,
    output_shape,
    *,
    bias=None,
    norm=None,
    mean=None,
    std=None,
    oob_color=(0, 0, 0),
    data_format="NHWC",
    antialias=False,
    name=None,
):
    """Warps RGB images and normalises them, in one pass.

    For output pixel (x, y) the source point is ``(X'/W', Y'/W')`` with
    ``(X', Y', W') = M @ (x, y, 1)``: ``M`` maps OUTPUT pixel indices to SOURCE
    pixel indices, pixel centres on integers (as in
    ``tf.raw_ops.ImageProjectiveTransformV3``). A NaN source point, or one
    outside the picture's area ``[-0.5, W - 0.5] x [-0.5, H - 0.5]``, gives
    ``oob_color`` as is (no bias or norm). Otherwise each channel is sampled
    bilinearly, fetches clamped to the image; uint8 images are then rounded
    half away from zero and clamped to [0, 255] (float32 images are not); and
    channel c becomes
    ``(value[c] - bias[c]) * norm[c]``.

    Normalise with ``mean``/``std``, torchvision style, in [0, 1] units: they
    become ``bias = 255 * mean`` and ``norm = 1 / (255 * std)`` (so float32
    images are expected in [0, 255] for these to mean what they say). Benzina's
    docs pass ``norm = 255 * std``, which is wrong (the kernel multiplies).

    Args:
      images: uint8 or float32 images, shape (N, H, W, 3), or (H, W, 3) for one image.
      matrices: output->source matrices, row-major: (3, 3) for every image, (N, 3, 3), (N, 9), or (N, 8)
        (TensorFlow's projective-transform convention, the ninth entry being 1).
      output_shape: the output (height, width), positive.
      bias: subtracted from each channel; a scalar or 3 values. Default 0.
      norm: multiplies each channel after the bias; a scalar or 3 values. Default 1.
      mean: per-channel mean in [0, 1] units; excludes bias/norm.
      std: per-channel standard deviation in [0, 1] units.
      oob_color: the raw value of out-of-bounds pixels; a scalar or 3 values (None: 0, as in Benzina).
      data_format: ``"NHWC"`` (default) or ``"NCHW"``, the layout of the result.
      antialias: as for :func:`warp_yuv420` (chroma aside).
      name: name scope of the op.

    Returns:
      A float32 tensor (N, height, width, 3), or (N, 3, height, width) for NCHW; without N for one image.

    Raises:
      TypeError: images neither uint8 nor float32, or arguments of the wrong kind.
      ValueError: shapes that do not fit together, both mean/std and bias/norm, a zero std, or an
        unknown data_format.
      tf.errors.InvalidArgumentError: shapes that do not fit together, found when the op runs.
    """
    with tf.name_scope(name or "warp_rgb"):
        images = tf.convert_to_tensor(images)
        _require_dtype(images, "images", (tf.uint8, tf.float32))
        rank = images.shape.rank
        if rank not in (3, 4) or images.shape[-1] not in (None, 3):
            raise ValueError(
                f"Expected `images` of shape (N, H, W, 3) or (H, W, 3). Received: images.shape={images.shape}"
            )
        single = rank == 3
        if single:
            images = images[tf.newaxis]
        args = _common(matrices, output_shape, bias, norm, mean, std, oob_color, data_format, images.shape[0])
        out = _ops().bzna_warp_rgb(images, *args, data_format=data_format, antialias=_antialias(antialias))
        return out[0] if single else out


def decode_warp(
    data,
    matrices,
    output_shape,
    *,
    bias=None,
    norm=None,
    mean=None,
    std=None,
    oob_color=(0, 0, 0),
    data_format="NHWC",
    antialias=False,
    names=None,
    on_error="raise",
    picture_sizes=None,
    name=None,
):
    """Decodes H.265 pictures on the CPU and warps them, fused: no plane is copied.

    Each picture (Annex-B bytes, ``BznaDataset``'s ``"data"``) is decoded by
    FFmpeg's HEVC decoder (the libavcodec PyAV ships, loaded at run time) and
    warped exactly as :func:`warp_yuv420` warps the picture's planes: ``M``
    maps OUTPUT pixel indices to SOURCE pixel indices of the picture, which is
    the top-left ``height x width`` of the decoded frame given by
    ``picture_sizes`` (the benzina layout pads each picture to a frame of
    multiples of 512), else the whole frame. A source point outside the
    picture (its ``picture_sizes``, else the decoded frame) gives
    ``oob_color`` on every side, and fetches clamp to the picture's last row
    and column: the frame's padding is never read. A batch is spread over
    TensorFlow's CPU threads, one picture per thread at a time. Everything is
    a TensorFlow op, so pipelines holding it checkpoint and serialise
    (tf.data service).

    Args:
      data: tf.string pictures, shape (N,), or a scalar for one picture.
      matrices, output_shape, bias, norm, mean, std, oob_color, data_format, antialias: as
        for :func:`warp_yuv420` (``mean``/``std`` in [0, 1] units give
        ``bias = 255 * mean``, ``norm = 1 / (255 * std)``).
      names: how error messages name each picture: a string per picture
        (``"train.bzna, sample 17"``; as_dataset passes the file and the
        sample's index in it). Default: its position in the batch.
      on_error: ``"raise"`` (default): a picture that cannot be decoded fails
        the op. ``"skip"``: it becomes ``oob_color`` everywhere, and the op
        returns ``(images, errors)``: a tf.string vector, ``""`` where the
        picture decoded, else the reason.
      picture_sizes: each picture's ``(height, width)``, integers, shape (N, 2) (or (2,) for a
        scalar ``data``): ``BznaDataset``'s ``"height"`` and ``"width"``, the track's size without
        the frame's padding. Checked once the picture is decoded: a size below 1 or larger than the
        decoded frame is an error about that picture (named, and skipped with ``on_error="skip"``,
        as an undecodable one). Default None: the decoded frames' own sizes.
      name: name scope of the op.

    Returns:
      A float32 tensor (N, height, width, 3), or (N, 3, height, width) for NCHW; without N for a scalar.
      With ``on_error="skip"``: ``(images, errors)``.

    Raises:
      ValueError, TypeError: as for :func:`warp_yuv420`.
      tf.errors.InvalidArgumentError: a picture FFmpeg cannot decode or whose ``picture_sizes`` do
        not fit its decoded frame (the message starts with its name, see ``names``), or shapes that
        do not fit together.
      tf.errors.FailedPreconditionError: no usable libavcodec (see ``bzna_tf.ops.ffmpeg_error()``).
    """
    with tf.name_scope(name or "decode_warp"):
        data = tf.convert_to_tensor(data)
        _require_dtype(data, "data", (tf.string,))
        if data.shape.rank not in (0, 1):
            raise ValueError(
                f"Expected `data` as a scalar or a vector of pictures. Received: data.shape={data.shape}"
            )
        single = data.shape.rank == 0
        if single:
            data = data[tf.newaxis]
        check_on_error(on_error)
        if names is None:
            names = tf.zeros([0], tf.string)
        names = tf.convert_to_tensor(names, tf.string)
        if single and names.shape.rank == 0:
            names = names[tf.newaxis]
        args = _common(matrices, output_shape, bias, norm, mean, std, oob_color, data_format, data.shape[0])
        sizes = _picture_sizes(picture_sizes, single, data.shape[0])
        out, errors = _ops().bzna_decode_warp(
            data,
            *args,
            names,
            sizes,
            data_format=data_format,
            antialias=_antialias(antialias),
            on_error=on_error,
        )
        if single:
            out, errors = out[0], errors[0]
        return (out, errors) if on_error == "skip" else out


class _DecodeWarpDataset(dataset_ops.UnaryDataset):
    """The dataset of the BznaDecodeWarpDataset op (see :func:`decode_warp_dataset`)."""

    def __init__(self, input_dataset, element_spec, variant):
        self._spec = element_spec
        super().__init__(input_dataset, variant)

    @property
    def element_spec(self):
        return self._spec


# The input elements decode_warp_dataset takes: their first five components.
BATCH_SPEC = (tf.string, tf.float32, tf.int32, tf.string, tf.string)


def decode_warp_dataset(
    batches,
    element_spec,
    output_shape,
    *,
    bias=None,
    norm=None,
    oob_color=(0, 0, 0),
    data_format="NHWC",
    antialias=False,
    on_error="raise",
    counter="",
    depth=2,
):
    """Decodes and warps a dataset's batches ahead of their use: ``as_dataset(device="gpu")``'s last stage.

    Each element of ``batches`` is a tuple ``(data, matrices, picture_sizes, names,
    errors, *rest)``: ``N`` pictures (tf.string), their output->source matrices
    (float32 (N, 3, 3)), their (height, width) (int32 (N, 2)), how errors name them
    (tf.string, ``"<file>, sample <i>"``), reading's errors (tf.string, ``""`` where
    read), then components passed through (labels, filenames), each with ``N``
    rows. Each output element is the batch's images, decoded and warped as
    :func:`decode_warp` makes them, then ``rest``. The dataset's iterator keeps
    ``depth`` batches decoding in the background while earlier ones are used.

    Where it decodes is where the op is placed: build it under
    ``tf.device("/gpu:0")`` for NVDEC and the CUDA warp (elements in that GPU's
    memory; needs bzna_tf's GPU kernels, see :func:`bzna_tf.ops.gpu_error`), or on
    the CPU for FFmpeg's decoder and the CPU warp. ``batches`` runs on the CPU
    of the same task either way. On the CPU kernel, iterators checkpoint with the
    batches in flight; an iterator placed on a GPU cannot be saved by TensorFlow
    (``SerializeIterator`` has CPU kernels only, tensorflow/tensorflow#62959):
    resume at epoch boundaries with :class:`bzna_tf.callbacks.SyncEpochs`
    instead, which needs no iterator state.

    Args:
      batches: a ``tf.data.Dataset`` of such tuples.
      element_spec: the output's spec: a ``tf.TensorSpec`` of the images, or a
        tuple of it and the specs of ``rest``.
      output_shape, bias, norm, oob_color, data_format, antialias: as for :func:`decode_warp`.
      on_error: ``"raise"`` (default): a sample that cannot be read (its
        ``errors`` entry) or decoded fails the iteration, named. ``"skip"``: it is
        dropped from its batch and counted under ``counter`` (a
        :class:`~bzna_tf.ops.SkippedSamples` counter name, required).
      counter: the counter skipped samples are counted in.
      depth: batches decoded ahead (>= 1).

    Returns:
      A ``tf.data.Dataset`` whose elements ``element_spec`` describes.
    """
    check_on_error(on_error)
    if on_error == "skip" and not counter:
        raise ValueError("Expected a `counter` with on_error='skip' (the skipped samples are counted there)")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"Expected `depth` as a positive integer. Received: depth={depth!r}")
    specs = tf.nest.flatten(batches.element_spec)
    types = tuple(s.dtype for s in specs[: len(BATCH_SPEC)])
    if types != BATCH_SPEC:
        raise TypeError(
            "Expected batches of (data: string, matrices: float32, picture_sizes: int32, names: string, "
            f"errors: string, ...). Received: {batches.element_spec}"
        )
    out_specs = tf.nest.flatten(element_spec)
    if [s.dtype for s in out_specs[1:]] != [s.dtype for s in specs[len(BATCH_SPEC) :]]:
        raise TypeError(
            "Expected `element_spec` to be the images then the components after the first five of "
            f"`batches`. Received: {element_spec} for batches of {batches.element_spec}"
        )
    m = tf.zeros([1, 3, 3])  # matrices come with each batch: _common checks the rest
    _, size, bias, norm, oob = _common(m, output_shape, bias, norm, None, None, oob_color, data_format, None)
    variant = _ops().bzna_decode_warp_dataset(
        batches._variant_tensor,  # pylint: disable=protected-access
        size,
        bias,
        norm,
        oob,
        data_format=data_format,
        antialias=_antialias(antialias),
        on_error=on_error,
        depth=int(depth),
        counter=counter,
        output_types=[s.dtype for s in out_specs],
        output_shapes=[s.shape for s in out_specs],
    )
    return _DecodeWarpDataset(batches, element_spec, variant)
