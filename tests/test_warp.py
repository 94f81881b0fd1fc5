"""The fused warp ops against a NumPy reference written from SPEC section 4.

The reference does the spec's float32 arithmetic in the spec's order, and the
library is built with -ffp-contract=off, so the two agree to rounding noise.
"""

import zlib

import numpy as np
import pytest
import tensorflow as tf
from _warp_reference import F, ref_bilinear, ref_oob, ref_points, ref_rgb, ref_yuv420  # noqa: F401

from bzna_tf.ops import warp as warp_module
from bzna_tf.ops.warp import decode_warp, warp_rgb, warp_yuv420
from bzna_tf.transforms.constant import bias_norm

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# --------------------------------------------------------------------------- inputs


def make_matrix(rng, kind, in_wh, out_wh):
    """A float32 output->source matrix of the given kind, about the image centres."""
    (wi, hi), (wo, ho) = in_wh, out_wh
    theta, sx, sy, tx, ty, px, py = 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0
    if kind == "rotation":
        theta = rng.uniform(-np.pi, np.pi)
    elif kind == "flip":
        sx, sy = rng.choice([-1.0, 1.0], 2)
    elif kind == "scale":
        sx, sy = rng.uniform(0.3, 2.5, 2)
    elif kind == "translate_oob":
        tx, ty = rng.uniform(-0.8, 0.8, 2) * (wi, hi)
    elif kind == "perspective":
        theta = rng.uniform(-0.3, 0.3)
        px, py = rng.uniform(-3e-3, 3e-3, 2)
    elif kind == "mixed":
        theta = rng.uniform(-np.pi, np.pi)
        sx, sy = rng.uniform(0.5, 1.5, 2) * rng.choice([-1.0, 1.0], 2)
        tx, ty = rng.uniform(-0.3, 0.3, 2) * (wi, hi)
    elif kind == "reduce":  # axis-aligned, 1.2 to 4.5 times smaller, flips
        sx, sy = rng.uniform(1.2, 4.5, 2) * rng.choice([-1.0, 1.0], 2)
    elif kind == "reduce_rotated":
        theta = rng.uniform(-np.pi, np.pi)
        sx, sy = rng.uniform(1.2, 3.0, 2)
    elif kind == "reduce_perspective":
        theta = rng.uniform(-0.3, 0.3)
        sx = sy = 2.0
        px, py = rng.uniform(-3e-3, 3e-3, 2)
    c, s = np.cos(theta), np.sin(theta)
    to_src = np.array([[1, 0, (wi - 1) / 2 + tx], [0, 1, (hi - 1) / 2 + ty], [0, 0, 1]])
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    scale = np.diag([sx, sy, 1.0])
    from_out = np.array([[1, 0, -(wo - 1) / 2], [0, 1, -(ho - 1) / 2], [0, 0, 1]])
    m = to_src @ rot @ scale @ from_out
    m[2, :2] = px, py
    m[2, 2] = 1.0 - px * (wo - 1) / 2 - py * (ho - 1) / 2  # keep the centre's W' near 1
    return m.astype(F)


def random_yuv(rng, n, h, w):
    y = rng.integers(0, 256, (n, h, w), dtype=np.uint8)
    cb = rng.integers(0, 256, (n, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    cr = rng.integers(0, 256, (n, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    return y, cb, cr


def mean_std_bias_norm():
    return np.asarray(IMAGENET_MEAN) * 255, 1 / (np.asarray(IMAGENET_STD) * 255)


KINDS = ["identity", "rotation", "flip", "scale", "translate_oob", "perspective", "mixed"]
# (input H, W), (output H, W): square, non-square both ways, odd plane sizes.
SIZES = [((32, 32), (24, 24)), ((37, 53), (29, 41)), ((51, 30), (17, 44))]


# --------------------------------------------------------------------------- agreement with the reference


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("sizes", SIZES, ids=["square", "wide", "tall_odd"])
@pytest.mark.parametrize("kind", KINDS)
def test_yuv420_matches_reference(kind, sizes, data_format):
    rng = np.random.default_rng(zlib.crc32(repr((kind, sizes)).encode()))
    (h, w), (ho, wo) = sizes
    y, cb, cr = random_yuv(rng, 3, h, w)
    mats = np.stack([make_matrix(rng, kind, (w, h), (wo, ho)) for _ in range(3)])
    oob_color = (-1.0, 0.5, 7.0)
    got = warp_yuv420(
        y,
        cb,
        cr,
        mats,
        (ho, wo),
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        oob_color=oob_color,
        data_format=data_format,
    ).numpy()
    bias, norm = mean_std_bias_norm()
    want = ref_yuv420(
        y, cb, cr, mats, (ho, wo), bias.astype(F), norm.astype(F), oob_color, data_format == "NCHW"
    )
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("kind", KINDS)
def test_rgb_matches_reference(kind, data_format, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((kind, data_format, dtype)).encode()))
    (h, w), (ho, wo) = SIZES[1]
    images = rng.integers(0, 256, (2, h, w, 3)).astype(dtype)
    if dtype == np.float32:
        images += rng.uniform(-0.5, 0.5, images.shape).astype(F)
    mats = np.stack([make_matrix(rng, kind, (w, h), (wo, ho)) for _ in range(2)])
    got = warp_rgb(
        images, mats, (ho, wo), mean=IMAGENET_MEAN, std=IMAGENET_STD, oob_color=3.0, data_format=data_format
    ).numpy()
    bias, norm = mean_std_bias_norm()
    want = ref_rgb(images, mats, (ho, wo), bias.astype(F), norm.astype(F), (3, 3, 3), data_format == "NCHW")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_matrix_broadcast_from_one():
    rng = np.random.default_rng(1)
    y, cb, cr = random_yuv(rng, 4, 20, 27)
    m = make_matrix(rng, "mixed", (27, 20), (19, 15))
    for mats in (m, m[None], m.reshape(1, 9), m.reshape(9)):
        got = warp_yuv420(y, cb, cr, mats, (15, 19)).numpy()
        np.testing.assert_allclose(got, ref_yuv420(y, cb, cr, m, (15, 19)), rtol=0, atol=1e-4)
    images = rng.integers(0, 256, (4, 20, 27, 3), dtype=np.uint8)
    np.testing.assert_allclose(
        warp_rgb(images, m, (15, 19)).numpy(), ref_rgb(images, m, (15, 19)), rtol=0, atol=1e-4
    )


def test_matrices_in_tf_projective_convention():
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (2, 16, 18, 3), dtype=np.uint8)
    mats = np.stack([make_matrix(rng, "perspective", (18, 16), (12, 10)) for _ in range(2)])
    mats /= mats[:, 2:, 2:]
    want = ref_rgb(images, mats, (10, 12))
    for form in (mats, mats.reshape(2, 9), mats.reshape(2, 9)[:, :8]):
        np.testing.assert_allclose(warp_rgb(images, form, (10, 12)).numpy(), want, rtol=0, atol=1e-4)


def test_nan_and_degenerate_matrices_give_the_oob_colour():
    rng = np.random.default_rng(3)
    y, cb, cr = random_yuv(rng, 3, 9, 11)
    mats = np.stack([np.eye(3, dtype=F)] * 3)
    mats[0, 0, 0] = np.nan  # X is NaN everywhere
    mats[1, 1, 2] = np.nan  # Y is NaN everywhere
    mats[2, 2, 2] = 0.0  # W' = 0 at pixel (0, 0): X = 0/0
    got = warp_yuv420(y, cb, cr, mats, (9, 11), bias=100, norm=0.5, oob_color=(1, 2, 3)).numpy()
    np.testing.assert_array_equal(got[0], np.broadcast_to(F([1, 2, 3]), (9, 11, 3)))
    np.testing.assert_array_equal(got[1], np.broadcast_to(F([1, 2, 3]), (9, 11, 3)))
    np.testing.assert_array_equal(got[2, 0, 0], F([1, 2, 3]))
    want = ref_yuv420(y, cb, cr, mats, (9, 11), (100,) * 3, (0.5,) * 3, (1, 2, 3))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


def test_identity_reproduces_the_image():
    rng = np.random.default_rng(4)
    images = rng.integers(0, 256, (2, 7, 9, 3), dtype=np.uint8)
    np.testing.assert_array_equal(warp_rgb(images, np.eye(3), (7, 9)).numpy(), images.astype(F))
    y, cb, cr = random_yuv(rng, 1, 7, 9)
    got = warp_yuv420(y, cb, cr, np.eye(3), (7, 9)).numpy()
    # Full-range BT.601 maps grey (Cb = Cr = 128) to R = G = B = Y.
    grey = np.full_like(cb, 128)
    np.testing.assert_array_equal(warp_yuv420(y, grey, grey, np.eye(3), (7, 9)).numpy()[..., 1], y.astype(F))
    np.testing.assert_allclose(got, ref_yuv420(y, cb, cr, np.eye(3), (7, 9)), rtol=0, atol=1e-4)


def test_bounds_are_the_pictures_area():
    # The band half a pixel beyond the outer pixel centres is inside: tests/test_warp_edges.py.
    images = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(1, 2, 3, 3) * 10
    # Shift right by 2.5: x = 0 reads X = 2.5 = W - 0.5 (inside: the last column), x = 1 reads X = 3.5.
    m = F([[1, 0, 2.5], [0, 1, 0], [0, 0, 1]])
    got = warp_rgb(images, m, (2, 2), oob_color=-1).numpy()
    np.testing.assert_array_equal(got[0, :, 0], images[0, :, 2].astype(F))
    np.testing.assert_array_equal(got[0, :, 1], np.full((2, 3), -1, F))
    # Just below -0.5 is outside, no clamping of the test itself.
    m = F([[1, 0, np.nextafter(F(-0.5), F(-1))], [0, 1, 0], [0, 0, 1]])
    assert np.all(warp_rgb(images, m, (2, 3), oob_color=-1).numpy()[0, :, 0] == -1)


# --------------------------------------------------------------------------- against TensorFlow's own op


def _tf_projective(images, mats, out_hw):
    transforms = (mats.reshape(-1, 9) / mats.reshape(-1, 9)[:, 8:])[:, :8]
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images,
        transforms=transforms,
        output_shape=list(out_hw),
        fill_value=0.0,
        interpolation="BILINEAR",
        fill_mode="CONSTANT",
    ).numpy()


def test_pixel_centres_match_image_projective_transform():
    # A half-pixel shift averages neighbours in both ops: same pixel-centre convention, no offset.
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, (1, 6, 8, 3)).astype(F)
    m = F([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]])[None]
    ours = warp_rgb(images, m, (5, 7)).numpy()
    theirs = _tf_projective(images, m, (5, 7))
    want = (images[0, :5, :7] + images[0, :5, 1:8] + images[0, 1:6, :7] + images[0, 1:6, 1:8]) / 4
    np.testing.assert_allclose(ours[0], want, rtol=0, atol=1e-4)
    np.testing.assert_allclose(theirs[0], want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("kind", ["crop_resize", "resize_up", "rotation", "perspective"])
def test_rgb_agrees_with_image_projective_transform(kind):
    rng = np.random.default_rng(6)
    n, (h, w), (ho, wo) = 3, (48, 64), (40, 36)
    images = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    mats = []
    for _ in range(n):
        if kind in ("crop_resize", "resize_up"):
            # Crop (x0, y0, cw, ch) resized to (wo, ho), half-pixel centres: X = x0 + (x + 0.5) cw/wo - 0.5.
            cw, ch = (rng.uniform(20, 60), rng.uniform(15, 45)) if kind == "crop_resize" else (20.0, 18.0)
            x0, y0 = rng.uniform(0, w - cw), rng.uniform(0, h - ch)
            sx, sy = cw / wo, ch / ho
            mats.append(F([[sx, 0, x0 + 0.5 * sx - 0.5], [0, sy, y0 + 0.5 * sy - 0.5], [0, 0, 1]]))
        else:
            mats.append(make_matrix(rng, kind, (w, h), (wo, ho)))
    mats = np.stack(mats)
    ours = warp_rgb(images, mats, (ho, wo)).numpy()
    theirs_u8 = _tf_projective(images, mats, (ho, wo)).astype(F)
    theirs_f = _tf_projective(images.astype(F), mats, (ho, wo))
    keep = []
    for m in mats:
        x, y = ref_points(m, ho, wo)
        keep.append((x >= 1.5) & (x <= w - 2.5) & (y >= 1.5) & (y <= h - 2.5))
    keep = np.stack(keep)
    assert keep.mean() > 0.3
    # TF truncates its uint8 results where we round: at most one grey level apart.
    assert np.abs(ours - theirs_u8)[keep].max() <= 1.0
    # Against its float results only our rounding differs (plus ~3e-3 where TF's perspective divide differs).
    assert np.abs(ours - theirs_f)[keep].max() <= 0.51
    # Unrounded float input: the same interpolation.
    ours_f = warp_rgb(images.astype(F), mats, (ho, wo)).numpy()
    assert np.abs(ours_f - theirs_f)[keep].max() <= 0.01


# --------------------------------------------------------------------------- antialiasing

AA_KINDS = ["reduce", "reduce_rotated", "reduce_perspective", "scale", "mixed"]
# (input H, W), (output H, W): the output several times smaller, odd plane sizes.
AA_SIZES = [((37, 53), (13, 16)), ((51, 30), (20, 9))]


def resize_matrix(in_hw, out_hw):
    """Output -> source matrix of a plain resize, pixel centres placed as tf.image.resize and Pillow do."""
    sy, sx = in_hw[0] / out_hw[0], in_hw[1] / out_hw[1]
    return F([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]])


@pytest.mark.parametrize("sizes", AA_SIZES, ids=["wide", "tall_odd"])
@pytest.mark.parametrize("kind", AA_KINDS)
def test_antialias_matches_reference(kind, sizes):
    rng = np.random.default_rng(zlib.crc32(repr(("aa", kind, sizes)).encode()))
    (h, w), (ho, wo) = sizes
    y, cb, cr = random_yuv(rng, 2, h, w)
    mats = np.stack([make_matrix(rng, kind, (w, h), (wo, ho)) for _ in range(2)])
    got = warp_yuv420(y, cb, cr, mats, (ho, wo), mean=0.5, std=0.25, oob_color=(1, 2, 3), antialias=True)
    bias, norm = F(127.5), F(1 / 63.75)
    want = ref_yuv420(y, cb, cr, mats, (ho, wo), (bias,) * 3, (norm,) * 3, (1, 2, 3), antialias=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-4)
    # The filter does something here: not the point samples.
    assert (
        np.abs(want - ref_yuv420(y, cb, cr, mats, (ho, wo), (bias,) * 3, (norm,) * 3, (1, 2, 3))).max() > 0.1
    )
    for dtype in (np.uint8, np.float32):
        images = rng.integers(0, 256, (2, h, w, 3)).astype(dtype)
        got = warp_rgb(images, mats, (ho, wo), oob_color=-1, data_format="NCHW", antialias=True).numpy()
        want = ref_rgb(images, mats, (ho, wo), oob_color=(-1, -1, -1), nchw=True, antialias=True)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("kind", ["identity", "flip", "translate_oob", "rotation", "upscale"])
def test_antialias_leaves_warps_that_do_not_shrink_unchanged(kind):
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    (h, w), (ho, wo) = SIZES[1]
    if kind == "upscale":
        mats = np.stack([resize_matrix((h, w), (2 * h + 1, 3 * w)) for _ in range(2)])
        ho, wo = 2 * h + 1, 3 * w
    else:
        mats = np.stack([make_matrix(rng, kind, (w, h), (wo, ho)) for _ in range(2)])
    y, cb, cr = random_yuv(rng, 2, h, w)
    np.testing.assert_array_equal(
        warp_yuv420(y, cb, cr, mats, (ho, wo), antialias=True).numpy(),
        warp_yuv420(y, cb, cr, mats, (ho, wo)).numpy(),
    )
    images = rng.uniform(0, 255, (2, h, w, 3)).astype(F)
    np.testing.assert_array_equal(
        warp_rgb(images, mats, (ho, wo), antialias=True).numpy(), warp_rgb(images, mats, (ho, wo)).numpy()
    )


@pytest.mark.parametrize("out_hw", [(24, 30), (16, 20), (12, 15), (19, 24), (40, 50), (48, 20)])
def test_antialias_resize_is_the_triangle_filter_of_tf_image_resize_and_pillow(out_hw):
    """Axis-aligned reductions, integer or not, edges included: tf.image.resize(antialias=True)'s
    triangle exactly, and Pillow's BILINEAR within its 8-bit rounding."""
    from PIL import Image

    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (48, 60, 3), dtype=np.uint8)
    m = resize_matrix((48, 60), out_hw)
    ours = warp_rgb(image.astype(F), m, out_hw, antialias=True).numpy()
    theirs = tf.image.resize(image.astype(F), out_hw, method="bilinear", antialias=True).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-3)
    pillow = Image.fromarray(image).resize(out_hw[::-1], Image.BILINEAR, reducing_gap=None)
    assert np.abs(warp_rgb(image, m, out_hw, antialias=True).numpy() - np.asarray(pillow)).max() <= 1


def test_antialias_footprint_turns_with_the_matrix():
    # A quarter turn of a 2x reduction (a footprint along the texel axes, but with u along y and v
    # along x: the general path) is the reduction turned.
    rng = np.random.default_rng(12)
    image = rng.uniform(0, 255, (1, 20, 28, 3)).astype(F)
    straight = warp_rgb(image, resize_matrix((20, 28), (10, 14)), (10, 14), antialias=True).numpy()
    # Output (x, y) of the turned 14 x 10 result reads where output (13 - y, x) of the straight one does.
    turn = F([[0, -1, 13], [1, 0, 0], [0, 0, 1]])
    turned = warp_rgb(image, resize_matrix((20, 28), (10, 14)) @ turn, (14, 10), antialias=True).numpy()
    np.testing.assert_allclose(turned[0], np.rot90(straight[0], 1), rtol=0, atol=1e-3)


def test_antialias_bounds_are_the_centre_point_and_footprints_are_cut_at_the_edge():
    image = np.arange(8, dtype=F)[None, None, :, None] * np.ones((1, 8, 1, 3), F)  # X in every channel
    # 4x narrower, output x = 0 reads X = 0: inside, its footprint half outside the image.
    m = F([[4, 0, 0], [0, 1, 0], [0, 0, 1]])
    got = warp_rgb(image, m, (8, 2), oob_color=-1, antialias=True).numpy()
    w = 1 - np.arange(4) / 4  # Pillow's triangle over texels 0..3, renormalised without the outside half
    np.testing.assert_allclose(got[0, :, 0, 0], (w * np.arange(4)).sum() / w.sum(), rtol=1e-6)
    np.testing.assert_allclose(got[0, :, 1, 0], (np.r_[w[:0:-1], w] * np.arange(1, 8)).sum() / 4, rtol=1e-6)
    # A centre just outside the picture's area is out of bounds, whatever its footprint covers.
    m = F([[4, 0, np.nextafter(F(-0.5), F(-1))], [0, 1, 0], [0, 0, 1]])
    assert np.all(warp_rgb(image, m, (8, 1), oob_color=-1, antialias=True).numpy() == -1)


def test_antialias_degenerate_and_extreme_matrices():
    rng = np.random.default_rng(13)
    y, cb, cr = random_yuv(rng, 5, 40, 44)
    mats = np.stack([np.eye(3, dtype=F)] * 5)
    mats[0, :2, 0] = 0  # a zero column: no footprint, the point sample
    mats[1] = F([[100, 0, 3], [0, 0.01, 20], [0, 0, 1]])  # 100x along x: the filter stops at 16
    mats[2] = F([[1, 30, 0], [1, 30.001, 0], [0, 0, 1]])  # nearly parallel columns: an extreme shear
    mats[3] = F([[2, 0, 0], [0, 2, 0], [0.03, 0.03, 1]])  # perspective running to a horizon
    mats[4, 0, 0] = np.nan
    got = warp_yuv420(y, cb, cr, mats, (9, 11), oob_color=(1, 2, 3), antialias=True).numpy()
    assert np.isfinite(got).all()
    want = ref_yuv420(y, cb, cr, mats, (9, 11), oob_color=(1, 2, 3), antialias=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(got[0], warp_yuv420(y[:1], cb[:1], cr[:1], mats[0], (9, 11)).numpy()[0])
    np.testing.assert_array_equal(got[4], np.broadcast_to(F([1, 2, 3]), (9, 11, 3)))


def test_antialias_filters_chroma_by_its_own_reduction():
    # Grey chroma, luma of alternating columns: a 2x reduction averages luma to mid-grey where the
    # point sample keeps the stripes; chroma is filtered at 2x too (its columns lengthened to
    # sqrt(c^2 + 1) texels: the luma's triangle over upsampled chroma), and at 4x.
    rng = np.random.default_rng(14)
    y = np.tile(np.uint8([0, 200]), (1, 24, 16))
    cb, cr = random_yuv(rng, 1, 24, 32)[1:]
    for factor, chroma_filtered in ((2, True), (4, True)):
        m = resize_matrix((24, 32), (24 // factor, 32 // factor))
        got = warp_yuv420(y, cb, cr, m, (24 // factor, 32 // factor), antialias=True).numpy()
        want = ref_yuv420(y, cb, cr, m, (24 // factor, 32 // factor), antialias=True)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
        grey = warp_yuv420(y, np.full_like(cb, 128), np.full_like(cr, 128), m, got.shape[1:3], antialias=True)
        assert np.abs(grey.numpy()[0, 1:-1, 1:-1] - 100).max() <= 1
        chroma_point = ref_yuv420(np.full_like(y, 100), cb, cr, m, got.shape[1:3])
        chroma_aa = ref_yuv420(np.full_like(y, 100), cb, cr, m, got.shape[1:3], antialias=True)
        assert np.array_equal(chroma_point, chroma_aa) != chroma_filtered


def test_antialiased_chroma_is_filtered_as_a_resize_of_the_rgb_picture_filters_it():
    # Colour stripes a chroma texel wide (red, blue, ... over grey luma): a resize of the RGB picture
    # (warp_rgb's filter is tf.image.resize's) averages them. Chroma filtered with half the luma's
    # footprint was a point sample at 2x: stripes of full red and full blue, 11 dB from the resize.
    h, w = 32, 48
    y = np.full((1, h, w), 110, np.uint8)
    cb = np.tile(np.uint8([60, 200]), (1, h // 2, w // 4))
    cr = np.tile(np.uint8([200, 60]), (1, h // 2, w // 4))
    rgb = ref_yuv420(y, cb, cr, np.eye(3, dtype=F), (h, w))[0]  # the picture a decoder shows (float RGB)
    for factor in (1.5, 2, 2.5, 3):
        out_hw = (round(h / factor), round(w / factor))
        m = resize_matrix((h, w), out_hw)
        got = warp_yuv420(y, cb, cr, m, out_hw, antialias=True).numpy()[0]
        want = warp_rgb(rgb[None], m, out_hw, antialias=True).numpy()[0]
        inner = (slice(2, -2), slice(2, -2))
        psnr = 10 * np.log10(255**2 / np.mean((got[inner] - want[inner]) ** 2))
        assert psnr > 32, f"{factor}x: {psnr:.1f} dB from the resize of the RGB picture"


def test_decode_warp_antialias_equals_decode_then_warp(original_path):
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile

    with BznaFile(original_path) as f:
        data = [f.sample(i).thumb.annexb() for i in range(3)]
    planes = [decode_annexb(d) for d in data]
    m = np.stack([resize_matrix(p[0].shape, (48, 64)) for p in planes])
    got = decode_warp(data, m, (48, 64), mean=0.5, std=0.25, antialias=True).numpy()
    for k, (y, cb, cr) in enumerate(planes):
        want = warp_yuv420(y, cb, cr, m[k], (48, 64), mean=0.5, std=0.25, antialias=True).numpy()
        np.testing.assert_array_equal(got[k], want)
    assert not np.array_equal(got, decode_warp(data, m, (48, 64), mean=0.5, std=0.25).numpy())


def test_as_dataset_and_preview_take_antialias_default_from_the_warp_layer(original_path):
    import bzna_tf

    d = bzna_tf.ClassificationDataset(original_path).select(np.arange(3))

    def images(**kwargs):
        return next(iter(d.as_dataset(batch_size=3, shape=(24, 32), **kwargs)))[0].numpy()

    on, off = images(), images(antialias=False)
    assert not np.array_equal(on, off)  # 512-pixel thumbnails onto 24 x 32: reduced ~16x
    np.testing.assert_array_equal(images(warp=bzna_tf.layers.CenterResizedCrop(24, 32, antialias=False)), off)
    grid = bzna_tf.preview(d, 3, shape=(24, 32), shuffle=False, antialias=False)
    for i in range(3):
        np.testing.assert_array_equal(grid.tile(i), np.clip(np.rint(off[i]), 0, 255).astype(np.uint8))
    with pytest.raises(ValueError, match="give it antialias, not as_dataset"):
        d.as_dataset(batch_size=3, shape=(24, 32), device="model", antialias=False)


def test_antialias_argument_errors():
    images = np.zeros((1, 4, 4, 3), np.uint8)
    with pytest.raises(TypeError, match=r"Expected `antialias` as a bool. Received: antialias='yes'"):
        warp_rgb(images, np.eye(3), (4, 4), antialias="yes")
    with pytest.raises(TypeError, match=r"antialias=1"):
        warp_yuv420(
            images[..., 0], images[:, :2, :2, 0], images[:, :2, :2, 0], np.eye(3), (4, 4), antialias=1
        )
    # The op's attribute defaults to SPEC section 4's point sampling.
    images = np.arange(48, dtype=F).reshape(1, 4, 4, 3)
    m = resize_matrix((4, 4), (2, 2))
    raw = warp_module._ops().bzna_warp_rgb(
        images=images,
        matrices=m[None],
        output_shape=np.int32([2, 2]),
        bias=F([0, 0, 0]),
        norm=F([1, 1, 1]),
        oob_color=F([0, 0, 0]),
    )
    np.testing.assert_array_equal(raw.numpy(), warp_rgb(images, m, (2, 2)).numpy())
    assert not np.array_equal(raw.numpy(), warp_rgb(images, m, (2, 2), antialias=True).numpy())


# --------------------------------------------------------------------------- normalisation arguments


def test_mean_std_become_bias_and_inverse_norm():
    bias, norm = bias_norm(None, None, IMAGENET_MEAN, IMAGENET_STD)
    np.testing.assert_allclose(bias.numpy(), np.asarray(IMAGENET_MEAN) * 255, rtol=1e-6)
    np.testing.assert_allclose(norm.numpy(), 1 / (np.asarray(IMAGENET_STD) * 255), rtol=1e-6)
    bias, norm = bias_norm(None, None, 0.5, None)
    np.testing.assert_allclose(bias.numpy(), [127.5] * 3)
    np.testing.assert_allclose(norm.numpy(), [1 / 255] * 3, rtol=1e-6)
    bias, norm = bias_norm(None, 2.0, None, None)
    np.testing.assert_array_equal(bias.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(norm.numpy(), [2, 2, 2])
    bias, norm = bias_norm(tf.constant(IMAGENET_MEAN), tf.constant(0.5), None, None)
    np.testing.assert_allclose(bias.numpy(), IMAGENET_MEAN)
    np.testing.assert_array_equal(norm.numpy(), [0.5] * 3)


def test_mean_std_normalise_like_torchvision():
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (2, 5, 6, 3), dtype=np.uint8)
    got = warp_rgb(images, np.eye(3), (5, 6), mean=IMAGENET_MEAN, std=IMAGENET_STD).numpy()
    want = (images / 255.0 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    raw = warp_rgb(images, np.eye(3), (5, 6)).numpy()
    np.testing.assert_array_equal(raw, images.astype(F))  # default: [0, 255], no normalisation


def test_normalisation_argument_errors():
    images = np.zeros((1, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="not both"):
        warp_rgb(images, np.eye(3), (4, 4), mean=0.5, norm=2.0)
    with pytest.raises(ValueError, match="positive `std`"):
        warp_rgb(images, np.eye(3), (4, 4), std=(1, 0, 1))
    for given in (dict(std=(1, 1e-50, 1)), dict(std=1e-39), dict(norm=1e39)):  # every pixel was inf
        with pytest.raises(ValueError, match=r"keeps pixels finite in float32"):
            warp_rgb(images, np.eye(3), (4, 4), **given)
    assert np.isfinite(warp_rgb(images + 255, np.eye(3), (4, 4), std=1e-36).numpy()).all()
    with pytest.raises(ValueError, match=r"scalar or 3 values.*Received: bias="):
        warp_rgb(images, np.eye(3), (4, 4), bias=(1, 2))
    with pytest.raises(TypeError, match="Received: oob_color="):
        warp_rgb(images, np.eye(3), (4, 4), oob_color="red")


# --------------------------------------------------------------------------- shapes, layouts, graph mode


def test_nchw_is_the_transpose_of_nhwc():
    rng = np.random.default_rng(8)
    y, cb, cr = random_yuv(rng, 2, 13, 17)
    mats = np.stack([make_matrix(rng, "mixed", (17, 13), (11, 9)) for _ in range(2)])
    nhwc = warp_yuv420(y, cb, cr, mats, (9, 11), mean=0.5, std=0.25).numpy()
    nchw = warp_yuv420(y, cb, cr, mats, (9, 11), mean=0.5, std=0.25, data_format="NCHW").numpy()
    assert nchw.shape == (2, 3, 9, 11)
    np.testing.assert_array_equal(nchw, nhwc.transpose(0, 3, 1, 2))


def test_single_images():
    rng = np.random.default_rng(9)
    y, cb, cr = random_yuv(rng, 1, 10, 12)
    m = make_matrix(rng, "rotation", (12, 10), (8, 6))
    got = warp_yuv420(y[0], cb[0], cr[0], m, (6, 8), data_format="NCHW")
    assert got.shape == (3, 6, 8)
    np.testing.assert_allclose(got.numpy(), ref_yuv420(y, cb, cr, m, (6, 8), nchw=True)[0], rtol=0, atol=1e-4)
    images = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    assert warp_rgb(images, m.reshape(9), (6, 8)).shape == (6, 8, 3)


def test_empty_batch():
    y, cb, cr = random_yuv(np.random.default_rng(0), 0, 6, 8)
    assert warp_yuv420(y, cb, cr, np.zeros((0, 3, 3)), (4, 5)).shape == (0, 4, 5, 3)
    assert warp_yuv420(y, cb, cr, np.eye(3), (4, 5), data_format="NCHW").shape == (0, 3, 4, 5)
    assert warp_rgb(np.zeros((0, 6, 8, 3), F), np.eye(3), (4, 5)).shape == (0, 4, 5, 3)


def test_empty_planes_are_all_out_of_bounds():
    y, cb, cr = np.zeros((2, 0, 5), np.uint8), np.zeros((2, 0, 3), np.uint8), np.zeros((2, 0, 3), np.uint8)
    got = warp_yuv420(y, cb, cr, np.eye(3), (2, 3), oob_color=(4, 5, 6)).numpy()
    np.testing.assert_array_equal(got, np.broadcast_to(F([4, 5, 6]), (2, 2, 3, 3)))


def test_graph_mode_static_output_shape():
    spec = [tf.TensorSpec([None, 20, 30], tf.uint8), tf.TensorSpec([None, 10, 15], tf.uint8)]

    @tf.function(input_signature=[spec[0], spec[1], spec[1], tf.TensorSpec([None, 3, 3], tf.float32)])
    def yuv(y, cb, cr, m):
        out = warp_yuv420(y, cb, cr, m, (7, 9), mean=IMAGENET_MEAN, std=IMAGENET_STD)
        assert out.shape.as_list() == [None, 7, 9, 3]
        nchw = warp_yuv420(y, cb, cr, m, (7, 9), data_format="NCHW")
        assert nchw.shape.as_list() == [None, 3, 7, 9]
        return out

    @tf.function(input_signature=[tf.TensorSpec([4, None, None, 3], tf.uint8), tf.TensorSpec([2], tf.int32)])
    def rgb(images, size):
        out = warp_rgb(images, tf.eye(3), size)
        assert out.shape.as_list() == [4, None, None, 3]  # output_shape not a constant
        return out

    rng = np.random.default_rng(10)
    y, cb, cr = random_yuv(rng, 2, 20, 30)
    assert yuv(y, cb, cr, np.stack([np.eye(3, dtype=F)] * 2)).shape == (2, 7, 9, 3)
    assert rgb(np.zeros((4, 5, 5, 3), np.uint8), tf.constant([3, 2])).shape == (4, 3, 2, 3)


def test_no_gradient():
    images = tf.constant(np.ones((1, 4, 4, 3), F))
    with tf.GradientTape() as tape:
        tape.watch(images)
        out = warp_rgb(images, np.eye(3), (4, 4))
    assert tape.gradient(out, images) is None


# --------------------------------------------------------------------------- errors


def _yuv_inputs(n=2, h=6, w=7):
    y, cb, cr = random_yuv(np.random.default_rng(0), n, h, w)
    return dict(
        y=y,
        cb=cb,
        cr=cr,
        matrices=np.stack([np.eye(3, dtype=F)] * n),
        output_shape=np.int32([4, 5]),
        bias=F([0, 0, 0]),
        norm=F([1, 1, 1]),
        oob_color=F([0, 0, 0]),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(y=np.zeros((6, 7), np.uint8)), r"expected y of shape \[N, H, W\]. Received shape \[6,7\]"),
        (
            dict(cb=np.zeros((2, 3, 3), np.uint8)),
            r"expected cb of shape \[2, 3, 4\].*Received shape \[2,3,3\]",
        ),
        (
            dict(cr=np.zeros((2, 4, 4), np.uint8)),
            r"expected cr of shape \[2, 3, 4\].*Received shape \[2,4,4\]",
        ),
        (dict(cr=np.zeros((1, 3, 4), np.uint8)), r"expected cr of shape.*Received shape \[1,3,4\]"),
        (dict(matrices=np.zeros((3, 3, 3), F)), r"matrices of shape \[N, 3, 3\] or \[1, 3, 3\] with N = 2"),
        (dict(matrices=np.zeros((2, 9), F)), r"expected matrices.*Received shape \[2,9\]"),
        (dict(output_shape=np.int32([4, 5, 6])), r"expected output_shape of shape \[2\]"),
        (dict(output_shape=np.int32([0, 5])), r"positive output_shape.*Received \[0, 5\]"),
        (dict(output_shape=np.int32([4, -1])), r"positive output_shape.*Received \[4, -1\]"),
        (dict(output_shape=np.int32([1 << 25, 1])), r"output height of at most 16777216"),
        (dict(bias=F([0, 0])), r"expected bias of shape \[3\].*Received shape \[2\]"),
        (dict(norm=F([[1, 1, 1]])), r"expected norm of shape \[3\].*Received shape \[1,3\]"),
        (dict(oob_color=F(0)), r"expected oob_color of shape \[3\].*Received shape \[\]"),
    ],
)
def test_yuv420_kernel_errors(change, message):
    ops = warp_module._ops()
    inputs = {**_yuv_inputs(), **change}
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        ops.bzna_warp_yuv420(**inputs)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(images=np.zeros((2, 6, 7), np.uint8)), r"expected images of shape \[N, H, W, 3\]"),
        (dict(images=np.zeros((2, 6, 7, 4), F)), r"expected images of shape.*Received shape \[2,6,7,4\]"),
        (dict(matrices=np.zeros((3, 3, 3), F)), r"with N = 2 \(the batch size\)"),
        (dict(output_shape=np.int32([5, 0])), r"positive output_shape"),
        (dict(norm=F([1, 1, 1, 1])), r"expected norm of shape \[3\]"),
    ],
)
def test_rgb_kernel_errors(change, message):
    inputs = dict(
        images=np.zeros((2, 6, 7, 3), np.uint8),
        matrices=np.zeros((1, 3, 3), F),
        output_shape=np.int32([4, 5]),
        bias=F([0, 0, 0]),
        norm=F([1, 1, 1]),
        oob_color=F([0, 0, 0]),
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        warp_module._ops().bzna_warp_rgb(**{**inputs, **change})


def test_python_argument_errors():
    y, cb, cr = random_yuv(np.random.default_rng(0), 2, 6, 7)
    eye = np.eye(3)
    with pytest.raises(TypeError, match=r"Expected `cb` of dtype uint8. Received: cb.dtype=float32"):
        warp_yuv420(y, cb.astype(F), cr, eye, (4, 4))
    with pytest.raises(ValueError, match=r"all of rank 3 .* or all of rank 2"):
        warp_yuv420(y, cb[0], cr, eye, (4, 4))
    with pytest.raises(ValueError, match=r"one matrix per image \(2\) or a single matrix. Received: 3"):
        warp_yuv420(y, cb, cr, np.zeros((3, 3, 3)), (4, 4))
    with pytest.raises(ValueError, match=r"Expected `matrices` of shape.*Received: matrices.shape=\(2, 7\)"):
        warp_yuv420(y, cb, cr, np.zeros((2, 7)), (4, 4))
    with pytest.raises(TypeError, match=r"real-valued `matrices`"):
        warp_yuv420(y, cb, cr, [["a"] * 3] * 3, (4, 4))
    with pytest.raises(ValueError, match=r"from 1 to 2147483647. Received: output_shape=\(0, 4\)"):
        warp_yuv420(y, cb, cr, eye, (0, 4))
    with pytest.raises(ValueError, match=r"from 1 to 2147483647. Received: output_shape=\(4, 4, 4\)"):
        warp_yuv420(y, cb, cr, eye, (4, 4, 4))
    with pytest.raises(TypeError, match=r"two integers. Received: output_shape=4"):
        warp_yuv420(y, cb, cr, eye, 4)
    with pytest.raises(ValueError, match=r"Expected `data_format` in .*Received: data_format='NWHC'"):
        warp_yuv420(y, cb, cr, eye, (4, 4), data_format="NWHC")
    with pytest.raises(TypeError, match=r"uint8 or float32. Received: images.dtype=float64"):
        warp_rgb(np.zeros((1, 4, 4, 3)), eye, (4, 4))
    with pytest.raises(ValueError, match=r"Received: images.shape=\(1, 4, 4, 4\)"):
        warp_rgb(np.zeros((1, 4, 4, 4), np.uint8), eye, (4, 4))


def test_an_empty_image_is_all_out_of_bounds_whatever_the_matrix():
    # A plane of 0 rows or columns took the point -0.5 as inside: a resize (every row sampled at -0.5)
    # read the texel before the image (heap bytes as pixels), and CenterResizedCrop on a (1, 0, 50, 3)
    # batch was a segmentation fault. It has no area: every pixel is the OOB colour (SPEC section 4).
    from bzna_tf.layers import CenterResizedCrop

    squash = np.float32([[0, 0, -0.5], [0, 0, -0.5], [0, 0, 1]])  # every output pixel to (-0.5, -0.5)
    for images in (np.zeros((2, 0, 5, 3), np.uint8), np.zeros((2, 4, 0, 3), F)):
        for m in (np.eye(3), squash):
            got = warp_rgb(images, m, (3, 4), oob_color=(4, 5, 6)).numpy()
            np.testing.assert_array_equal(got, np.broadcast_to(F([4, 5, 6]), (2, 3, 4, 3)))
    y, cb, cr = np.zeros((1, 0, 5), np.uint8), np.zeros((1, 0, 3), np.uint8), np.zeros((1, 0, 3), np.uint8)
    got = warp_yuv420(y, cb, cr, squash, (2, 3), oob_color=(4, 5, 6), antialias=True).numpy()
    np.testing.assert_array_equal(got, np.broadcast_to(F([4, 5, 6]), (1, 2, 3, 3)))
    out = CenterResizedCrop(3, 3, fill_value=7)(tf.zeros((1, 0, 50, 3)), training=False).numpy()
    np.testing.assert_array_equal(out, np.full((1, 3, 3, 3), 7, F))
