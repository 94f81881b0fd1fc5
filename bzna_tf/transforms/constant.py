"""Constant transforms (Benzina's ConstantWarp/Bias/NormTransform) and normalisation.

The warp kernels compute ``out[c] = (rgb[c] - bias[c]) * norm[c]`` on RGB in
[0, 255]. torchvision and Keras users know normalisation as ``mean``/``std``
in [0, 1] units; :func:`bias_norm` turns them into ``bias = 255 * mean`` and
``norm = 1 / (255 * std)``. Benzina's documentation passes
``norm = 255 * std``, which multiplies where it should divide: with
``mean``/``std`` that mistake cannot be made.
"""

from __future__ import annotations

import warnings

import numpy as np
import tensorflow as tf

from bzna_tf.format.wording import user_stacklevel
from bzna_tf.transforms._backend import get_ops
from bzna_tf.transforms.similarity import WarpTransform

__all__ = ["ConstantBiasTransform", "ConstantNormTransform", "ConstantWarpTransform", "bias_norm"]


def are_numbers(value) -> bool:
    """Whether ``value`` is a number or an array of them (integers or floats): not text, True/False,
    None, a mapping or other objects, which ``np.asarray(value, float64)`` would take or fail on unclearly."""
    try:
        return np.asarray(value).dtype.kind in "iuf"
    except ValueError:  # ragged
        return False


def per_channel(value, arg, default=None, finite=True):
    """A scalar or 3 values, as a float64 NumPy array (3,) or a float32 tensor (3,).

    ``None`` is ``default`` where one is given (Benzina's None: the neutral value), else an error; a
    None among 3 values is an error. With ``finite``, NaN and infinite values are refused (a NaN bias
    or norm makes every pixel NaN); a fill colour may be NaN on purpose (it marks the pixels outside
    the picture).
    """
    if value is None:
        if default is None:
            raise TypeError(f"Expected `{arg}` to be a number or 3 numbers. Received: {arg}=None")
        value = default
    if isinstance(value, (list, tuple)) and any(v is None for v in value):
        raise TypeError(f"Expected `{arg}` to be a number or 3 numbers. Received: {arg}={value!r}")
    if isinstance(value, (tf.Tensor, tf.Variable)):
        t = tf.cast(value, tf.float32)
        if t.shape.rank == 0:
            return tf.broadcast_to(t, [3])
        if t.shape.rank != 1 or t.shape[0] not in (None, 3):
            raise ValueError(
                f"Expected `{arg}` to be a scalar or 3 values (R, G, B). Received: {arg}={value!r}"
            )
        return t
    try:
        if not are_numbers(value):
            raise TypeError(value)
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Expected `{arg}` to be a number or 3 numbers. Received: {arg}={value!r}") from e
    if finite and not np.all(np.isfinite(a)):
        raise ValueError(f"Expected `{arg}` as finite numbers. Received: {arg}={value!r}")
    if a.ndim == 0:
        return np.full(3, a, dtype=np.float64)
    if a.shape != (3,):
        raise ValueError(f"Expected `{arg}` to be a scalar or 3 values (R, G, B). Received: {arg}={value!r}")
    return a


class ConstantBiasTransform:
    """The same bias for every sample, subtracted from RGB in [0, 255] units (Benzina's name).

    Args:
      bias: a scalar or 3 values (R, G, B), e.g. ``255 * mean``; None is 0, as in Benzina.
    """

    def __init__(self, bias=None):
        self.bias = per_channel(bias, "bias", default=0.0)

    def __repr__(self):
        return f"ConstantBiasTransform({np.asarray(self.bias).tolist()})"


class ConstantNormTransform:
    """The same factor for every sample, multiplied after the bias (Benzina's name).

    The kernel multiplies: for torchvision-style ``std`` (in [0, 1] units)
    pass ``1 / (255 * std)``, not Benzina's documented ``255 * std``, or use
    ``mean``/``std`` where they are accepted.

    Args:
      norm: a scalar or 3 values (R, G, B); None is 1, as in Benzina.
    """

    def __init__(self, norm=None):
        self.norm = per_channel(norm, "norm", default=1.0)

    def __repr__(self):
        return f"ConstantNormTransform({np.asarray(self.norm).tolist()})"


def bias_norm(bias=None, norm=None, mean=None, std=None):
    """(bias, norm) as float32 tensors (3,), from bias/norm or from mean/std.

    ``mean``/``std`` above 1 cannot be statistics of images in [0, 1] (their
    mean lies in [0, 1], their standard deviation at most 0.5): they look like
    [0, 255] units (``mean=(123.7, 116.3, 103.5)``), and a ``UserWarning`` says so.

    Args:
      bias: [0, 255] units, subtracted; a scalar, 3 values or a :class:`ConstantBiasTransform`.
      norm: multiplied after the bias; a scalar, 3 values or a :class:`ConstantNormTransform`.
      mean: per-channel mean in [0, 1] units (torchvision/Keras style); excludes ``bias``/``norm``.
      std: per-channel standard deviation in [0, 1] units; excludes ``bias``/``norm``.

    Returns:
      ``(bias, norm)``: ``(255 * mean, 1 / (255 * std))`` from mean/std (a missing one is 0 or 1),
      else bias (default 0) and norm (default 1).

    Raises:
      ValueError: both mean/std and bias/norm, values that are not 1 or 3 per channel, a std that is
        not positive, or a zero norm.
      TypeError: values that are not numbers.
    """
    if isinstance(bias, ConstantBiasTransform):
        bias = bias.bias
    if isinstance(norm, ConstantNormTransform):
        norm = norm.norm
    if (mean is not None or std is not None) and (bias is not None or norm is not None):
        raise ValueError(
            "Expected either `mean`/`std` (in [0, 1] units) or `bias`/`norm` (in [0, 255] units), not both. "
            f"Received: mean={mean!r}, std={std!r}, bias={bias!r}, norm={norm!r}"
        )
    if mean is not None or std is not None:
        mean = per_channel(0.0 if mean is None else mean, "mean")
        std = per_channel(1.0 if std is None else std, "std")
        if isinstance(std, np.ndarray) and not np.all(std > 0):  # NaN fails too (checked again below)
            raise ValueError(
                "Expected a positive `std` (a standard deviation) for every channel. "
                f"Received: std={std.tolist()}"
            )
        _warn_255_units(mean, std)
        bias, norm = mean * 255.0, 1.0 / (std * 255.0)
        given = ("std", std)
    else:
        bias = per_channel(0.0 if bias is None else bias, "bias")
        norm = per_channel(1.0 if norm is None else norm, "norm")
        if isinstance(norm, np.ndarray) and not np.all(norm != 0):
            raise ValueError(
                "Expected a nonzero `norm` for every channel (a zero one makes every pixel 0). "
                f"Received: norm={norm.tolist()}"
            )
        given = ("norm", norm)
    if isinstance(bias, np.ndarray) and isinstance(norm, np.ndarray):  # not tensors, which may be symbolic
        # std=1e-50 passed the zero test and made every pixel inf: (v - bias) * norm must stay finite in
        # float32 for every v in [0, 255].
        reach = (255.0 + np.abs(bias.astype(np.float64))) * np.abs(norm.astype(np.float64))
        if not np.all(reach <= np.finfo(np.float32).max):
            raise ValueError(
                "Expected a normalisation that keeps pixels finite in float32 ((255 + |bias|) * |norm| at "
                f"most 3.4e38: a std of at least about 1e-38). Received: {given[0]}={given[1].tolist()}"
            )
    return tf.cast(bias, tf.float32), tf.cast(norm, tf.float32)


def _warn_255_units(mean, std) -> None:
    big = [
        f"{name}={np.asarray(v).tolist()}"
        for name, v in (("mean", mean), ("std", std))
        if isinstance(v, np.ndarray) and np.any(np.abs(v) > 1)
    ]
    if big:
        warnings.warn(
            f"{' and '.join(big)} {'look' if len(big) > 1 else 'looks'} like [0, 255] units, but `mean` and "
            "`std` are in [0, 1] units (images become (rgb / 255 - mean) / std): divide them by 255 "
            "(ImageNet's are mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)), or keep [0, 255] "
            "units with bzna_tf.layers.Normalize(bias=mean, norm=1 / std): (rgb - bias) * norm",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


_IDENTITY = (1, 0, 0, 0, 1, 0, 0, 0, 1)


class ConstantWarpTransform(WarpTransform):
    """The same output->source matrix for every sample (Benzina's ConstantWarpTransform).

    :meth:`matrices` takes shapes as (height, width), like every transform, and
    ignores them: the matrix is used as given.

    Args:
      matrix: 9 values (row-major 3x3) or a (3, 3) array, mapping OUTPUT pixel indices (x, y, 1) to
        SOURCE pixel indices; default (and None, as in Benzina) the identity (a top-left crop of the
        output's size).
    """

    def __init__(self, matrix=_IDENTITY):
        if matrix is None:
            matrix = _IDENTITY
        try:
            m = np.asarray(matrix, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"Expected `matrix` as 9 numbers. Received: matrix={matrix!r}") from e
        if m.size != 9 or m.shape not in ((9,), (3, 3)):
            raise ValueError(f"Expected `matrix` as 9 numbers or (3, 3). Received: matrix={matrix!r}")
        self.matrix = m.reshape(3, 3)

    def __repr__(self):
        return f"ConstantWarpTransform({self.matrix.ravel().tolist()})"

    def matrices(
        self, in_shapes, out_shape, *, seed=0, epoch=0, indices=None, training=True, backend="tensorflow"
    ):
        xp = get_ops(backend)
        rows = xp.f64(indices if indices is not None else xp.row_indices(xp.f64(in_shapes)))
        return xp.to_float32(xp.zeros_like(rows)[..., None, None] + self.matrix)

    matrices.__doc__ = WarpTransform.matrices.__doc__
