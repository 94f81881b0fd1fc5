"""The affine matrix of SPEC section 5: crop, rotate, flip, translate, resize.

The matrix maps OUTPUT pixel indices to SOURCE pixel indices, pixel centres on
integers, in the (x, y) column convention the warp ops and
``tf.raw_ops.ImageProjectiveTransformV3`` use: for output pixel (x, y) the
source point is ``M @ (x, y, 1)``. Every *shape* and *pair* argument here is
in TensorFlow's order, (height, width) and (y, x); SPEC section 5 writes its formula
in (width, height) order, Benzina's own order, and these functions reorder.

With (Hi, Wi) the input shape, (Ho, Wo) the output shape, the crop centred
at offset (cy, cx) from the image centre with size (ch, cw), t the angle,
fh = -1 when flipped horizontally (else 1), fv likewise, (ty, tx) the
translation, and (sy, sx) the scale (1 unless ``resize``)::

    M = [[fh, 0, (Wi-1)/2], [0, fv, (Hi-1)/2], [0, 0, 1]]
      . [[1, 0, cx], [0, 1, cy], [0, 0, 1]]
      . [[cos t, -sin t, 0], [sin t, cos t, 0], [0, 0, 1]]
      . diag(sx, sy, 1)
      . [[1, 0, tx - (Wo-1)/2], [0, 1, ty - (Ho-1)/2], [0, 0, 1]]

With ``resize``, sx = |cw cos t - ch sin t| / Wo and
sy = |cw sin t + ch cos t| / Ho (SPEC section 5, Benzina's formula: the
rotated half-diagonal (cw, ch), not the rotated crop's bounding box),
both their minimum when ``keep_ratio``. A plain resize is the half-pixel
convention, X = (x + 0.5) Wi / Wo - 0.5. With a rotation the two scales
therefore differ (the output is stretched along one axis, which axis
following the angle's sign), and sx or sy reaches 0 where the angle is
the crop's diagonal (45 degrees for a square crop): the output collapses
to a line (to a point with ``keep_ratio``). Keep rotations with ``resize``
to a few degrees.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bzna_tf.transforms._backend import NumpyOps, TensorFlowOps

__all__ = ["compute_affine_matrix", "compute_affine_matrix_tf"]


def _pair(xp, value, arg):
    """The two components of a (..., 2) value, as float64 arrays."""
    v = xp.f64(value)
    if len(v.shape) == 0 or v.shape[-1] not in (None, 2):
        raise ValueError(
            f"Expected `{arg}` as (..., 2) values in (height, width) order. Received: {arg}={value!r}"
        )
    return v[..., 0], v[..., 1]


def _not_text(value, arg):
    """Refuses text and mappings where numbers or flags go (``flip_h="no"`` would fail as a float)."""
    text = isinstance(value, (str, bytes, dict))
    if not text and isinstance(value, (list, tuple, np.ndarray)):
        try:
            text = np.asarray(value).dtype.kind in "US"
        except Exception:  # symbolic tensors inside: TensorFlow checks those
            text = False
    if text:
        raise TypeError(f"Expected `{arg}` as numbers (or True/False). Received: {arg}={value!r}")


def _affine(xp, in_shape, out_shape, crop, degrees, translate, flip_h, flip_v, resize, keep_ratio):
    """The matrices, (..., 3, 3) float64, every argument broadcast against the others."""
    named = dict(in_shape=in_shape, out_shape=out_shape, crop=crop, degrees=degrees, translate=translate)
    named.update(flip_h=flip_h, flip_v=flip_v, resize=resize, keep_ratio=keep_ratio)
    for arg, value in named.items():
        _not_text(value, arg)
    in_h, in_w = _pair(xp, in_shape, "in_shape")
    out_h, out_w = _pair(xp, out_shape, "out_shape")
    if crop is None:
        cy, cx, ch, cw = 0.0, 0.0, in_h, in_w
    else:
        c = xp.f64(crop)
        if c.shape[-1] not in (None, 4):
            raise ValueError(
                "Expected `crop` as (..., 4) values (offset_y, offset_x, height, width), the offset of the "
                f"crop's centre from the image centre and its size. Received: crop={crop!r}"
            )
        cy, cx, ch, cw = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
    ty, tx = _pair(xp, translate, "translate")
    t = xp.f64(degrees) * (xp.pi / 180.0)
    cos, sin = xp.cos(t), xp.sin(t)
    fh = xp.where(xp.f64(flip_h) != 0, -1.0, 1.0)
    fv = xp.where(xp.f64(flip_v) != 0, -1.0, 1.0)

    rot_w = xp.abs(cw * cos - ch * sin)
    rot_h = xp.abs(cw * sin + ch * cos)
    sx, sy = rot_w / out_w, rot_h / out_h
    fit = xp.minimum(sx, sy)
    keep = xp.f64(keep_ratio) != 0
    sx, sy = xp.where(keep, fit, sx), xp.where(keep, fit, sy)
    do_resize = xp.f64(resize) != 0
    sx, sy = xp.where(do_resize, sx, 1.0), xp.where(do_resize, sy, 1.0)

    # The product of the five matrices, written out (see the module docstring).
    u = tx - (out_w - 1.0) / 2.0
    v = ty - (out_h - 1.0) / 2.0
    m00, m01 = fh * cos * sx, -fh * sin * sy
    m10, m11 = fv * sin * sx, fv * cos * sy
    m02 = fh * (cos * sx * u - sin * sy * v + cx) + (in_w - 1.0) / 2.0
    m12 = fv * (sin * sx * u + cos * sy * v + cy) + (in_h - 1.0) / 2.0
    zero = xp.zeros_like(m00 + m01 + m02 + m10 + m11 + m12)
    rows = [
        xp.stack([m00 + zero, m01 + zero, m02 + zero]),
        xp.stack([m10 + zero, m11 + zero, m12 + zero]),
        xp.stack([zero, zero, zero + 1.0]),
    ]
    return xp.stack(rows, axis=-2)


def compute_affine_matrix(
    in_shape,
    out_shape,
    crop=None,
    degrees=0.0,
    translate=(0.0, 0.0),
    flip_h=False,
    flip_v=False,
    resize=False,
    keep_ratio=False,
):
    """The output->source matrix of a crop, rotation, flip, translation and resize (NumPy).

    The matrix maps OUTPUT pixel indices (x, y) to SOURCE pixel indices,
    ``(X, Y, 1) ~ M @ (x, y, 1)``, pixel centres on integers, which is what
    :func:`bzna_tf.ops.warp_rgb` and friends take. Shapes are
    (height, width) and pairs (y, x), as everywhere in TensorFlow (SPEC section 5
    writes (width, height)). Every argument may carry leading batch
    dimensions; they broadcast together.

    The crop is centred on the image centre plus its offset and rotated by
    ``degrees`` about its own centre (its frame turns clockwise in the source
    as displayed, x right and y down, so the picture's content turns
    counter-clockwise in the output); the output centre lands on the crop
    centre, then moves by ``translate``. Without ``resize`` one output pixel
    is one source pixel (the crop's size only matters for ``resize``); with
    it, the scales are those of SPEC section 5 (see the module's docstring:
    with a rotation they differ, and they reach 0 at the crop's diagonal),
    one for both axes (the smaller) when ``keep_ratio``.

    Args:
      in_shape: the source (height, width), shape (..., 2).
      out_shape: the output (height, width), shape (..., 2).
      crop: (offset_y, offset_x, height, width), shape (..., 4): the crop's centre relative to the
        image centre, and its size, in source pixels. Default: the whole image.
      degrees: the rotation angle in degrees, shape (...).
      translate: (ty, tx), shape (..., 2): a shift of the output centre, in output pixels, with or
        without ``resize``.
      flip_h: whether to mirror left-right, shape (...).
      flip_v: whether to mirror top-bottom, shape (...).
      resize: whether to scale the crop onto the output; without it, a centre crop of the output's size.
      keep_ratio: with ``resize``, one scale for both axes, the smaller (the crop covers the output).

    Returns:
      float64 array (..., 3, 3).

    Raises:
      ValueError: shapes that are not pairs, or a crop that is not four values.

    Example:

    ```python
    # A 126x224 centre crop of a 144x256 (height x width) image: output (0, 0) is source (16, 9).
    m = compute_affine_matrix((144, 256), (126, 224))
    # The same region of the image, resized onto 112x112 (half-pixel centres).
    m = compute_affine_matrix((144, 256), (112, 112), crop=(0, 0, 126, 224), resize=True)
    ```
    """
    return _affine(
        NumpyOps, in_shape, out_shape, crop, degrees, translate, flip_h, flip_v, resize, keep_ratio
    )


def compute_affine_matrix_tf(
    in_shape,
    out_shape,
    crop=None,
    degrees=0.0,
    translate=(0.0, 0.0),
    flip_h=False,
    flip_v=False,
    resize=False,
    keep_ratio=False,
    dtype=tf.float32,
):
    """:func:`compute_affine_matrix` on TensorFlow tensors (graphs, ``tf.data``, Keras layers).

    Same arguments, same (height, width) order, same output->source
    direction; computed in float64 and returned as ``dtype`` (default
    float32, what the warp ops take), shape (..., 3, 3).
    """
    return tf.cast(
        _affine(
            TensorFlowOps, in_shape, out_shape, crop, degrees, translate, flip_h, flip_v, resize, keep_ratio
        ),
        dtype,
    )
