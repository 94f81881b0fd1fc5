"""The CPU warp's row path (custom_ops/lib/warp_rows.h) against the NumPy reference, bit for bit.

Axis-aligned matrices (resizes, crops, flips: what RandomResizedCrop and CenterResizedCrop make) are
warped a row at a time, each image's column and row weights computed once instead of at every pixel;
other matrices go pixel by pixel. Both must give exactly the reference's float32 values (the library
is built with -ffp-contract=off and sums in the reference's order), so these tests compare with
``assert_array_equal``: a weight computed for the wrong column, row, sample or plane, a footprint kept
from another image, a lost flip or a wrong edge renormalisation changes some pixel.
"""

import zlib

import numpy as np
import pytest
from _warp_reference import F, ref_rgb, ref_yuv420

from bzna_tf.ops.warp import decode_warp, warp_rgb, warp_yuv420

IN_HW = (61, 83)  # odd luma sizes: chroma planes of 31 x 42


def axis_matrix(sx, sy, tx=0.0, ty=0.0, w=1.0, zero=0.0):
    """X = sx x + tx, Y = sy y + ty, written with W' = w and off-diagonal zeros `zero` (0.0 or -0.0)."""
    return F([[sx * w, zero, tx * w], [zero, sy * w, ty * w], [zero, zero, w]])


def centred(sx, sy, out_hw, in_hw=IN_HW, shift=(0.0, 0.0), **kw):
    """Output centre onto the source centre (plus `shift` source pixels), scaled by sx, sy."""
    (h, wi), (ho, wo) = in_hw, out_hw
    tx = (wi - 1) / 2 + shift[0] - sx * (wo - 1) / 2
    ty = (h - 1) / 2 + shift[1] - sy * (ho - 1) / 2
    return axis_matrix(sx, sy, tx, ty, **kw)


def rotated(theta, s, out_hw, in_hw=IN_HW):
    """A turn by theta of an s-times reduction about the centres: the per-pixel path."""
    (h, w), (ho, wo) = in_hw, out_hw
    c, si = np.cos(theta), np.sin(theta)
    to_src = np.array([[1, 0, (w - 1) / 2], [0, 1, (h - 1) / 2], [0, 0, 1]])
    from_out = np.array([[1, 0, -(wo - 1) / 2], [0, 1, -(ho - 1) / 2], [0, 0, 1]])
    return (to_src @ np.array([[c * s, -si * s, 0], [si * s, c * s, 0], [0, 0, 1]]) @ from_out).astype(F)


# name -> (output H, W), a function of the output size giving the batch's three matrices. Output
# widths are mostly not multiples of four (the row path works on four columns at a time).
CASES = {
    # Reductions, the filter's separable footprint; each sample of a batch its own scale.
    "reduce": ((17, 23), lambda o: [centred(2, 2, o), centred(3.1, 1.7, o), centred(1.3, 2.6, o)]),
    "flips": ((19, 13), lambda o: [centred(-2.4, 1.8, o), centred(1.8, -2.4, o), centred(-1.5, -3.3, o)]),
    # One axis reduced, the other enlarged (its footprint column stretched to one texel) or 1:1.
    "reduce_one_axis": (
        (21, 11),
        lambda o: [centred(2.7, 0.4, o), centred(0.6, 3.5, o), centred(1, -2.2, o)],
    ),
    # Around kMinReduction = 1.001: just above is filtered, just below is the point sample.
    "threshold": (
        (15, 9),
        lambda o: [centred(1.0011, 1, o), centred(1.0009, 0.99, o), centred(1, 1.0012, o)],
    ),
    # Enlargements and 1:1 (flipped): point samples, a row at a time.
    "point": ((23, 29), lambda o: [centred(0.6, 0.7, o), centred(-1, 1, o), centred(0.35, -0.45, o)]),
    # Past kMaxFootprint = 16 (the filter stops widening; the longest ring of texel rows).
    "beyond_16x": ((5, 7), lambda o: [centred(23, 19, o), centred(-17.5, 9, o), centred(12, 40, o)]),
    # Crops reaching past every edge: out-of-bounds columns and rows, footprints cut at the edges.
    "partly_outside": (
        (18, 22),
        lambda o: [
            centred(2.5, 2.5, o, shift=(30, -20)),
            centred(-3, 1.5, o, shift=(-35, 25)),
            centred(1.2, 4, o, shift=(10, 30)),
        ],
    ),
    # Other forms of an axis-aligned matrix: W' = -1 or 2.5 (not 1), negative zeros off the diagonal.
    "matrix_forms": (
        (14, 17),
        lambda o: [centred(2.2, 1.6, o, w=-1.0), centred(-1.9, 2.8, o, w=2.5), centred(3, 2, o, zero=-0.0)],
    ),
    # One output column or one output row.
    "one_column": ((16, 1), lambda o: [centred(2, 3, o), centred(-4, 1, o), centred(0.5, 2, o)]),
    "one_row": ((1, 25), lambda o: [centred(3, 2, o), centred(1, -4, o), centred(2, 0.5, o)]),
    # Many rows: the kernel's row bands (each with its own ring of texel rows) start mid-image.
    "tall": ((203, 6), lambda o: [centred(4.5, 0.3, o), centred(-12, 0.29, o), centred(9, -0.3, o)]),
    # Degenerate axis-aligned matrices: a zero, NaN, infinite or huge column; W' = 0.
    "degenerate": (
        (9, 11),
        lambda o: [
            axis_matrix(0.0, 2.0, 5.0, 3.0),
            axis_matrix(np.inf, 2.0, 5.0, 3.0),
            axis_matrix(1e20, 3.0, 0.0, 3.0),
        ],
    ),
    "degenerate_2": (
        (9, 11),
        lambda o: [axis_matrix(np.nan, 2.0), axis_matrix(2.0, 2.0, w=0.0), axis_matrix(2.0, 1e-30, 1.0, 7.0)],
    ),
    # Beside axis-aligned samples, rotated and perspective ones (the per-pixel path) in the same batch.
    "mixed_paths": (
        (17, 23),
        lambda o: [
            rotated(0.3, 2.5, o),
            centred(2.5, -2.5, o),
            rotated(np.pi / 2, 2, o) + F([[0, 0, 0], [0, 0, 0], [1e-3, -2e-3, 0]]),
        ],
    ),
}


def _inputs(name, out_hw):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    h, w = IN_HW
    y = rng.integers(0, 256, (3, h, w), dtype=np.uint8)
    cb = rng.integers(0, 256, (3, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    cr = rng.integers(0, 256, (3, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    rgb = rng.integers(0, 256, (3, h, w, 3), dtype=np.uint8)
    rgb_float = rgb.astype(F) + rng.uniform(-0.5, 0.5, rgb.shape).astype(F)
    return y, cb, cr, rgb, rgb_float


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
BIAS = tuple(F(m * 255) for m in MEAN)
NORM = tuple(F(1 / (s * 255)) for s in STD)
OOB = (-1.0, 0.5, 7.0)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the reference's NaN matrices
@pytest.mark.parametrize("antialias", [True, False], ids=["antialias", "point"])
@pytest.mark.parametrize("name", list(CASES))
def test_yuv420_rows_equal_the_reference(name, antialias):
    out_hw, make = CASES[name]
    mats = np.stack(make(out_hw)).astype(F)
    y, cb, cr, _, _ = _inputs(name, out_hw)
    for data_format in ("NHWC", "NCHW"):
        got = warp_yuv420(
            y,
            cb,
            cr,
            mats,
            out_hw,
            mean=MEAN,
            std=STD,
            oob_color=OOB,
            data_format=data_format,
            antialias=antialias,
        ).numpy()
        want = ref_yuv420(y, cb, cr, mats, out_hw, BIAS, NORM, OOB, data_format == "NCHW", antialias)
        np.testing.assert_array_equal(got, want)
    # Each matrix alone, broadcast over the batch: the same images as in the mixed batch.
    for k, m in enumerate(mats):
        alone = warp_yuv420(y, cb, cr, m, out_hw, mean=MEAN, std=STD, oob_color=OOB, antialias=antialias)
        np.testing.assert_array_equal(alone.numpy()[k], got.transpose(0, 2, 3, 1)[k])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("antialias", [True, False], ids=["antialias", "point"])
@pytest.mark.parametrize("name", list(CASES))
def test_rgb_rows_equal_the_reference(name, antialias, dtype):
    out_hw, make = CASES[name]
    mats = np.stack(make(out_hw)).astype(F)
    _, _, _, rgb, rgb_float = _inputs(name, out_hw)
    images = rgb if dtype == np.uint8 else rgb_float
    for data_format in ("NHWC", "NCHW"):
        got = warp_rgb(
            images,
            mats,
            out_hw,
            mean=MEAN,
            std=STD,
            oob_color=OOB,
            data_format=data_format,
            antialias=antialias,
        ).numpy()
        want = ref_rgb(images, mats, out_hw, BIAS, NORM, OOB, data_format == "NCHW", antialias)
        np.testing.assert_array_equal(got, want)


def test_cases_take_the_paths_they_are_meant_to():
    """The cases above exercise the filter, its 16-texel cap, edges, bounds and the point sample."""
    y, cb, cr, _, _ = _inputs("reduce", (17, 23))
    for name in ("reduce", "flips", "reduce_one_axis", "beyond_16x", "partly_outside", "tall"):
        out_hw, make = CASES[name]
        mats = np.stack(make(out_hw)).astype(F)
        on = ref_yuv420(y, cb, cr, mats, out_hw, antialias=True)
        off = ref_yuv420(y, cb, cr, mats, out_hw)
        for k in range(3):
            assert not np.array_equal(on[k], off[k]), (name, k)  # every sample filtered
    out_hw, make = CASES["threshold"]
    mats = np.stack(make(out_hw)).astype(F)
    on = ref_yuv420(y, cb, cr, mats, out_hw, antialias=True)
    off = ref_yuv420(y, cb, cr, mats, out_hw)
    assert [np.array_equal(on[k], off[k]) for k in range(3)] == [False, True, False]
    out_hw, make = CASES["partly_outside"]
    oob = np.all(ref_yuv420(y, cb, cr, np.stack(make(out_hw)), out_hw, oob_color=OOB) == OOB, axis=-1)
    assert all(0.1 < oob[k].mean() < 0.9 for k in range(3))
    assert oob.all(axis=2).any() and oob.all(axis=1).any()  # whole rows and whole columns out


def test_decode_warp_rows_equal_the_reference(original_path):
    """The fused decode + warp (one whole image per call) on real pictures, random resized crops."""
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile

    with BznaFile(original_path) as f:
        data = [f.sample(i).thumb.annexb() for i in range(4)]
    planes = [decode_annexb(d) for d in data]
    rng = np.random.default_rng(25)
    out_hw = (37, 45)
    mats = []
    for y, _, _ in planes:
        h, w = y.shape
        cw, ch = rng.uniform(0.3, 1.0) * w, rng.uniform(0.3, 1.0) * h
        x0, y0 = rng.uniform(0, w - cw), rng.uniform(0, h - ch)
        sx, sy = cw / out_hw[1] * rng.choice([-1, 1]), ch / out_hw[0]
        mats.append(axis_matrix(sx, sy, x0 + cw / 2 - sx * (out_hw[1] - 1) / 2, y0 + 0.5 * sy - 0.5))
    mats = np.stack(mats)
    for antialias in (True, False):
        got = decode_warp(data, mats, out_hw, mean=MEAN, std=STD, antialias=antialias).numpy()
        for k, (y, cb, cr) in enumerate(planes):
            want = ref_yuv420(y[None], cb[None], cr[None], mats[k], out_hw, BIAS, NORM, antialias=antialias)
            np.testing.assert_array_equal(got[k], want[0])
