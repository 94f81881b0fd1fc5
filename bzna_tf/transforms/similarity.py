"""Benzina's random warps: SimilarityTransform and its two aliases.

A warp transform turns, for every sample, its input shape, the output shape
and (seed, epoch, index) into the output->source matrix the warp ops apply
(see :mod:`bzna_tf.transforms.affine`). The random parameters of sample
``index`` depend on (seed, epoch, index) only (counter-based random numbers,
:mod:`bzna_tf.transforms._backend`), so the same seed gives the same crops
whatever the batching, the parallelism or the order, and after an iterator
restore; a new epoch gives new crops.

The sampling is SPEC section 5; shapes and pairs are (height, width) and
(y, x), as everywhere in TensorFlow.
"""

from __future__ import annotations

import inspect
import math
import numbers

import numpy as np
import tensorflow as tf

from bzna_tf.format.keywords import flag
from bzna_tf.transforms._backend import get_ops, sample_keys, uniform
from bzna_tf.transforms.affine import _affine

__all__ = [
    "AREA_SAMPLINGS",
    "CenterResizedCrop",
    "RandomResizedCrop",
    "SimilarityTransform",
    "WarpTransform",
]

AREA_SAMPLINGS = ("uniform", "log")
"""How the crop's area fraction is drawn: ``"uniform"`` (torchvision's, default) or ``"log"`` (Benzina's)."""
CROP_TRIES = 10

# Draw ids: number j of a sample's random stream is always used for the same
# thing, whatever the options (so switching one option does not reshuffle the
# others).
_AREA_DRAWS = range(0, CROP_TRIES)
_RATIO_DRAWS = range(CROP_TRIES, 2 * CROP_TRIES)
_CX, _CY, _DEGREES, _TY, _TX, _FLIP_H, _FLIP_V = range(2 * CROP_TRIES, 2 * CROP_TRIES + 7)
_DRAWS = 2 * CROP_TRIES + 7


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _pair_items(value):
    """The items of a pair: not the characters of a string nor the keys of a mapping (TypeError)."""
    if isinstance(value, (str, bytes, dict)):
        raise TypeError(value)
    return tuple(float(v) for v in value)


def _check_sizes(values, arg, received, *, empty):
    """Refuses known sizes that are negative, NaN or infinite, or 0 unless ``empty`` (NaN matrices).

    An image of 0 rows or columns (``empty``) has no area: whatever its matrix, every output pixel is
    the fill (SPEC section 4). Values known only when the graph runs (a ``tf.data`` map, a Keras layer in
    ``fit``) are not checked.
    """
    known = tf.get_static_value(values) if tf.is_tensor(values) else values
    if known is None:
        return
    known = np.asarray(known, dtype=np.float64)
    if not np.all(np.isfinite(known) & ((known >= 0) if empty else (known > 0))):
        what = "sizes of 0 or more" if empty else "positive sizes"
        raise ValueError(f"Expected `{arg}` as {what} (height, width). Received: {arg}={received!r}")


def _range(value, arg, *, scalar, positive=False):
    """A (low, high) pair from a pair or a scalar (``scalar`` maps it to a pair)."""
    if _is_number(value):
        if positive and not float(value) > 0:
            raise ValueError(
                f"Expected `{arg}` as a positive number or (low, high) pair. Received: {arg}={value!r}"
            )
        pair = scalar(float(value))
    else:
        try:
            pair = _pair_items(value)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"Expected `{arg}` as a number or a (low, high) pair. Received: {arg}={value!r}"
            ) from e
        if len(pair) != 2:
            raise ValueError(f"Expected `{arg}` as a number or a (low, high) pair. Received: {arg}={value!r}")
    if not all(math.isfinite(v) for v in pair) or pair[0] > pair[1] or (positive and pair[0] <= 0):
        kind = "positive, finite" if positive else "finite"
        raise ValueError(
            f"Expected `{arg}` as {kind} (low, high) with low <= high. Received: {arg}={value!r}"
        )
    return pair


def _fractions(value, arg):
    """A (height, width) pair of fractions >= 0 from a pair or a scalar (both): not a (low, high) range."""
    wrong = f"Expected `{arg}` as a fraction >= 0 of the output size, or (height, width) fractions. "
    wrong += "Received: "
    if _is_number(value):
        pair = (float(value), float(value))
    else:
        try:
            pair = _pair_items(value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{wrong}{arg}={value!r}") from e
    if len(pair) != 2 or not all(math.isfinite(v) and v >= 0 for v in pair):
        raise ValueError(f"{wrong}{arg}={value!r}")
    return pair


def _probability(value, arg):
    if not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"Expected `{arg}` as a probability in [0, 1]. Received: {arg}={value!r}")
    return float(value)


class WarpTransform:
    """A per-sample output->source matrix, from (input shape, output shape, seed, epoch, index).

    Subclasses implement :meth:`matrices`. Shapes are (height, width). In
    ``as_dataset``, a subclass's code runs in the pipeline's tf.data function
    converted by AutoGraph, as ``Dataset.map`` converts a function (a Python
    ``if`` on a tensor becomes a ``tf.cond``); bzna_tf's own transforms are
    plain graph code and skip that conversion.
    """

    def matrices(
        self, in_shapes, out_shape, *, seed=0, epoch=0, indices=None, training=True, backend="tensorflow"
    ):
        """The matrices of a batch of samples, (N, 3, 3): float32 tensors, or float64 NumPy arrays.

        Args:
          in_shapes: each sample's (height, width): shape (N, 2), or (2,) for all (then ``indices``
            gives N).
          out_shape: the output (height, width).
          seed: an integer; the random parameters of a sample depend on (seed, epoch, index) only.
          epoch: an integer, so that each epoch gets new random parameters.
          indices: the samples' indices, (N,) integers; default ``range(N)``.
          training: False for the deterministic (centre) behaviour.
          backend: ``"tensorflow"`` (tensors; usable in graphs and ``tf.data``) or ``"numpy"``.
        """
        raise NotImplementedError


class SimilarityTransform(WarpTransform):
    """Random crop, resize, rotation, translation and flips (Benzina's SimilarityTransform).

    For each sample (SPEC section 5; shapes (height, width), pairs (y, x)):

    1. With ``resize``: an area fraction s in ``scale``, drawn uniformly or
       log-uniformly (``area_sampling``; "log" draws it once, "uniform" on
       each try). With ``ratio``: up to 10 tries of
       an aspect ratio ar (width / height) log-uniform in ``ratio``, crop
       width sqrt(s W H ar) and height sqrt(s W H / ar), the first that fits
       in the image is taken; if none fits, the sample gets the centre
       fallback: the largest centred crop whose aspect ratio is the image's,
       clamped to ``ratio``, its clamped side rounded to whole pixels as
       Benzina and torchvision round it (``round(H * ratio[1])`` or
       ``round(W / ratio[0])``). (Only that sample: the next one tries again.)
       Without ``ratio``, the crop is the image scaled by sqrt(s). Without
       ``resize`` the crop has the output's size (a centre crop, one source
       pixel per output pixel).
    2. With ``random_crop``, the crop centre moves uniformly within the
       image (by up to (H - ch) / 2 and (W - cw) / 2); else it is centred.
    3. A rotation angle uniform in ``degrees``, a translation uniform in
       +-``translate`` times the output (height, width), and flips with
       probabilities ``flip_h`` and ``flip_v``.

    ``training=False`` is deterministic: each range gives its value closest
    to the identity (the area fraction closest to 1, the angle closest to 0,
    the aspect ratio closest to the image's own, fitted in the image), the
    crop is centred, nothing is translated, and a flip happens only when its
    probability is 1.

    Area sampling: ``"uniform"`` (the default) draws s uniformly on each of
    the tries, as torchvision and KerasCV do, and as the published ImageNet
    recipes that use RandomResizedCrop were tuned; ``"log"`` draws it
    log-uniformly once per sample and retries only the aspect, as the
    original Benzina did (more small crops: with scale (0.08, 1) and ratio
    (3/4, 4/3) on a 4:3 image the crops' median area fraction is 0.28
    instead of 0.42).

    The parameters are those of the Keras layer
    :class:`bzna_tf.layers.SimilarityTransform`, with the same names,
    defaults and meanings, and are described there, one by one (the layer
    adds its output size and the warp's ``fill_value``, ``antialias``,
    ``seed`` and ``data_format``).

    Raises:
      ValueError, TypeError: arguments out of range or of the wrong kind.

    Example:

    ```python
    t = SimilarityTransform(scale=(0.25, 1), ratio=(3 / 4, 4 / 3), flip_h=0.5, random_crop=True)
    m = t.matrices([[375, 500], [480, 640]], (224, 224), seed=7, epoch=0, indices=[10, 11])
    ```
    """

    def __init__(
        self,
        scale=(1.0, 1.0),
        ratio=None,
        degrees=0.0,
        translate=0.0,
        flip_h=0.0,
        flip_v=0.0,
        resize=False,
        keep_ratio=False,
        random_crop=False,
        area_sampling="uniform",
    ):
        self.scale = _range(scale, "scale", scalar=lambda s: (min(s, 1 / s), max(s, 1 / s)), positive=True)
        self.ratio = (
            None
            if ratio is None
            else _range(ratio, "ratio", scalar=lambda r: tuple(sorted((r, 1 / r))), positive=True)
        )
        self.degrees = _range(degrees, "degrees", scalar=lambda d: (-abs(d), abs(d)))
        self.translate = _fractions(translate, "translate")
        self.flip_h = _probability(flip_h, "flip_h")
        self.flip_v = _probability(flip_v, "flip_v")
        if area_sampling not in AREA_SAMPLINGS:
            raise ValueError(
                f"Expected `area_sampling` in {AREA_SAMPLINGS}. Received: area_sampling={area_sampling!r}"
            )
        self.area_sampling = area_sampling
        self.resize = flag(resize, "resize") or self.scale != (1.0, 1.0) or self.ratio is not None
        self.keep_ratio = flag(keep_ratio, "keep_ratio")
        self.random_crop = flag(random_crop, "random_crop")

    def __repr__(self):
        # SimilarityTransform's parameters whatever the subclass: each is an attribute of every instance.
        fields = inspect.signature(SimilarityTransform).parameters
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in fields)})"

    # ------------------------------------------------------------------ sampling

    def _area(self, xp, u):
        low, high = self.scale
        if self.area_sampling == "log":
            return xp.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        return low + u * (high - low)

    def _identity_area(self):
        return min(max(1.0, self.scale[0]), self.scale[1])

    def _centre_crop(self, xp, h, w, area_fraction):
        """(height, width) of the largest centred crop of that area whose aspect is the image's,
        clamped to ``ratio``, shrunk to fit."""
        aspect = xp.clip(w / h, self.ratio[0], self.ratio[1])
        area = area_fraction * w * h
        cw, ch = xp.sqrt(area * aspect), xp.sqrt(area / aspect)
        fit = xp.minimum(1.0, xp.minimum(w / cw, h / ch))
        return ch * fit, cw * fit

    def _crop_size(self, xp, h, w, out_h, out_w, u):
        """(height, width) of each sample's crop, and 1 where it may move (0 for the fallback).

        ``u``: the uniform numbers, None at inference.
        """
        if not self.resize:
            return out_h + xp.zeros_like(h), out_w + xp.zeros_like(w), 1.0
        if self.ratio is None:
            s = self._area(xp, u[..., _AREA_DRAWS[0]]) if u is not None else self._identity_area()
            k = xp.sqrt(s + xp.zeros_like(h))
            return h * k, w * k, 1.0
        if u is None:
            return (*self._centre_crop(xp, h, w, self._identity_area()), 1.0)
        if self.area_sampling == "log":
            # Benzina's sampler (SPEC section 5): one area per sample; only the aspect is retried.
            s = self._area(xp, u[..., _AREA_DRAWS.start : _AREA_DRAWS.start + 1])
        else:
            # torchvision's: area and aspect both drawn again on each try.
            s = self._area(xp, u[..., _AREA_DRAWS.start : _AREA_DRAWS.stop])
        low, high = math.log(self.ratio[0]), math.log(self.ratio[1])
        aspect = xp.exp(low + u[..., _RATIO_DRAWS.start : _RATIO_DRAWS.stop] * (high - low))
        area = (w * h)[..., None] * s
        tries_w, tries_h = xp.sqrt(area * aspect), xp.sqrt(area / aspect)
        fits = (tries_w > 0) & (tries_w <= w[..., None]) & (tries_h > 0) & (tries_h <= h[..., None])
        first, found = xp.first_true(fits)
        # Benzina's fallback (and torchvision's): the whole picture clamped to the ratio range, its clamped
        # side rounded to whole pixels (int(round(W / ratio[0])) or int(round(H * ratio[1]))).
        fallback_h, fallback_w = (xp.round(v) for v in self._centre_crop(xp, h, w, 1.0))
        return (
            xp.where(found, xp.take(tries_h, first), fallback_h),
            xp.where(found, xp.take(tries_w, first), fallback_w),
            xp.where(found, 1.0, 0.0),
        )

    def get_random_transformation(
        self, in_shapes, out_shape, *, seed=0, epoch=0, indices=None, training=True, backend="tensorflow"
    ):
        """Each sample's parameters, as :func:`compute_affine_matrix` takes them.

        Arguments as for :meth:`matrices`.

        Returns:
          A dict of float64 arrays (NumPy or TensorFlow): ``in_shape`` (N, 2), ``crop`` (N, 4) as
          (offset_y, offset_x, height, width), ``degrees`` (N,), ``translate`` (N, 2) as (ty, tx),
          ``flip_h`` (N,) and ``flip_v`` (N,) (0 or 1).
        """
        xp = get_ops(backend)
        shapes = xp.f64(in_shapes)
        if len(shapes.shape) not in (1, 2) or shapes.shape[-1] not in (None, 2):
            raise ValueError(
                "Expected `in_shapes` of shape (N, 2) or (2,), (height, width). "
                f"Received: in_shapes={in_shapes!r}"
            )
        if indices is None:
            if len(shapes.shape) != 2:
                raise ValueError("Expected `indices` when `in_shapes` is a single (height, width).")
            indices = xp.row_indices(shapes)
        keys = sample_keys(xp, seed, epoch, indices)
        zero = xp.zeros_like(keys)
        if len(zero.shape) != 1:
            raise ValueError(f"Expected `indices` of shape (N,). Received: indices={indices!r}")
        h, w = shapes[..., 0] + zero, shapes[..., 1] + zero
        out = xp.f64(out_shape)
        _check_sizes(shapes, "in_shapes", in_shapes, empty=True)
        _check_sizes(out, "out_shape", out_shape, empty=False)
        out_h, out_w = out[0], out[1]
        u = uniform(xp, keys, range(_DRAWS)) if training else None

        ch, cw, movable = self._crop_size(xp, h, w, out_h, out_w, u)
        if training and self.random_crop:
            # The fallback crop stays centred, as torchvision's does.
            cy = (2.0 * u[..., _CY] - 1.0) * xp.maximum(0.0, (h - ch) / 2.0) * movable
            cx = (2.0 * u[..., _CX] - 1.0) * xp.maximum(0.0, (w - cw) / 2.0) * movable
        else:
            cy = cx = zero
        if training:
            d0, d1 = self.degrees
            degrees = d0 + u[..., _DEGREES] * (d1 - d0)
            ty = (2.0 * u[..., _TY] - 1.0) * (self.translate[0] * out_h)
            tx = (2.0 * u[..., _TX] - 1.0) * (self.translate[1] * out_w)
            flip_h = xp.where(u[..., _FLIP_H] < self.flip_h, 1.0, 0.0)
            flip_v = xp.where(u[..., _FLIP_V] < self.flip_v, 1.0, 0.0)
        else:
            degrees = zero + min(max(0.0, self.degrees[0]), self.degrees[1])
            ty = tx = zero
            flip_h = zero + float(self.flip_h >= 1.0)
            flip_v = zero + float(self.flip_v >= 1.0)
        return {
            "in_shape": xp.stack([h, w]),
            "crop": xp.stack([cy, cx, ch, cw]),
            "degrees": degrees,
            "translate": xp.stack([ty, tx]),
            "flip_h": flip_h,
            "flip_v": flip_v,
        }

    def matrices(
        self, in_shapes, out_shape, *, seed=0, epoch=0, indices=None, training=True, backend="tensorflow"
    ):
        xp = get_ops(backend)
        p = self.get_random_transformation(
            in_shapes, out_shape, seed=seed, epoch=epoch, indices=indices, training=training, backend=backend
        )
        m = _affine(
            xp,
            p["in_shape"],
            out_shape,
            p["crop"],
            p["degrees"],
            p["translate"],
            p["flip_h"],
            p["flip_v"],
            self.resize,
            self.keep_ratio,
        )
        return xp.to_float32(m)

    matrices.__doc__ = WarpTransform.matrices.__doc__


class RandomResizedCrop(SimilarityTransform):
    """A random crop of random area and aspect ratio, resized onto the output (torchvision's recipe).

    ``SimilarityTransform(scale, ratio, resize=True, random_crop=True)`` plus
    any flips, rotation or translation; see :class:`SimilarityTransform` for
    the sampling, the fallback and ``training=False`` (the whole image, or
    its largest centred crop with an aspect ratio in ``ratio``, resized).
    Shapes are (height, width). The parameters are those of the Keras layer
    :class:`bzna_tf.layers.RandomResizedCrop` (same names, defaults and
    meanings), described there.
    """

    def __init__(
        self,
        scale=(0.08, 1.0),
        ratio=(3 / 4, 4 / 3),
        degrees=0.0,
        translate=0.0,
        flip_h=0.0,
        flip_v=0.0,
        area_sampling="uniform",
    ):
        # Every argument, by name: the signature above is their only list.
        arguments = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__(**arguments, resize=True, random_crop=True)


class CenterResizedCrop(SimilarityTransform):
    """A centred crop of ``scale`` times the image's sides, resized onto the output.

    ``SimilarityTransform(scale=(scale**2, scale**2), resize=True,
    keep_ratio=keep_ratio)``. ``CenterResizedCrop(224 / 256)`` onto 224 x 224
    is ImageNet's evaluation recipe: resize the short side to 256, centre-crop
    224. Deterministic (``training`` changes nothing). Shapes are
    (height, width). The parameters are those of the Keras layer
    :class:`bzna_tf.layers.CenterResizedCrop` (same names, defaults and
    meanings), described there.
    """

    def __init__(self, scale=1.0, keep_ratio=True):
        # (scale**2 must be finite too: the crop's area fraction)
        if not _is_number(scale) or not 0 < float(scale) or not float(scale) * float(scale) < math.inf:
            raise ValueError(f"Expected `scale` as a positive, finite number. Received: scale={scale!r}")
        self.side_scale = float(scale)
        super().__init__(scale=(self.side_scale**2,) * 2, resize=True, keep_ratio=keep_ratio)
