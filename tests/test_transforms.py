"""bzna_tf.transforms against SPEC section 5: the matrix, the samplers, their statistics.

The reference matrix below multiplies SPEC's five matrices in SPEC's own
(width, height) order; the library writes the product out in closed form and
takes (height, width), so agreeing is a real check of both the algebra and the
reordering.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from bzna_tf.transforms import (
    CenterResizedCrop,
    ConstantBiasTransform,
    ConstantNormTransform,
    ConstantWarpTransform,
    RandomResizedCrop,
    SimilarityTransform,
    bias_norm,
    compute_affine_matrix,
    compute_affine_matrix_tf,
)
from bzna_tf.transforms._backend import NumpyOps, TensorFlowOps, sample_keys, uniform
from bzna_tf.transforms.constant import per_channel

N = 10_000


def spec_matrix(
    in_wh,
    out_wh,
    crop=None,
    degrees=0.0,
    translate=(0.0, 0.0),
    flip_h=False,
    flip_v=False,
    resize=False,
    keep_ratio=False,
):
    """SPEC section 5, literally: (width, height) order, crop (cx, cy, cw, ch), translate (tx, ty)."""
    wi, hi = in_wh
    wo, ho = out_wh
    cx, cy, cw, ch = (0.0, 0.0, wi, hi) if crop is None else crop
    tx, ty = translate
    t = math.radians(degrees)
    c, s = math.cos(t), math.sin(t)
    fh, fv = (-1.0 if flip_h else 1.0), (-1.0 if flip_v else 1.0)
    if resize:
        cw2, ch2 = abs(cw * c - ch * s), abs(cw * s + ch * c)
        sx, sy = cw2 / wo, ch2 / ho
        if keep_ratio:
            sx = sy = min(sx, sy)
    else:
        sx = sy = 1.0
    mats = [
        [[fh, 0, (wi - 1) / 2], [0, fv, (hi - 1) / 2], [0, 0, 1]],
        [[1, 0, cx], [0, 1, cy], [0, 0, 1]],
        [[c, -s, 0], [s, c, 0], [0, 0, 1]],
        [[sx, 0, 0], [0, sy, 0], [0, 0, 1]],
        [[1, 0, tx - (wo - 1) / 2], [0, 1, ty - (ho - 1) / 2], [0, 0, 1]],
    ]
    out = np.eye(3)
    for m in mats:
        out = out @ np.asarray(m, dtype=np.float64)
    return out


def both(in_shape, out_shape, **kwargs):
    """compute_affine_matrix on NumPy and TensorFlow."""
    return compute_affine_matrix(in_shape, out_shape, **kwargs), compute_affine_matrix_tf(
        in_shape, out_shape, dtype=tf.float64, **kwargs
    ).numpy()


# --------------------------------------------------------------------------- the matrix


def test_spec_reference_values():
    # in (256, 144) and out (224, 126) in SPEC's (width, height): (144, 256) and (126, 224) here.
    for m in both((144, 256), (126, 224)):
        np.testing.assert_allclose(m[:2, 2], [16, 9])
    for m in both((144, 256), (72, 128), flip_h=True):
        np.testing.assert_allclose(m[0], [-1, 0, 191])
    # SPEC's crop (cx, cy, cw, ch) = (10, -10, 40, 20) is (offset_y, offset_x, height, width)
    # = (-10, 10, 20, 40) here.
    for m in both((144, 256), (72, 128), crop=(-10, 10, 20, 40)):
        np.testing.assert_allclose(m[:2, 2], [74, 26])
    for m in both((144, 256), (256, 144), crop=(-10, 10, 20, 40), degrees=90):
        np.testing.assert_allclose(m @ [0, 0, 1], [265, -10, 1], atol=1e-9)


def test_matches_spec_product_over_random_parameters():
    rng = np.random.default_rng(1)
    for _ in range(300):
        hi, wi, ho, wo = (int(v) for v in rng.integers(1, 700, 4))
        crop = (rng.normal() * 50, rng.normal() * 50, rng.uniform(1, 600), rng.uniform(1, 600))
        degrees = rng.uniform(-180, 180)
        translate = (rng.normal() * 20, rng.normal() * 20)
        flip_h, flip_v, resize, keep_ratio = (bool(b) for b in rng.integers(0, 2, 4))
        want = spec_matrix(
            (wi, hi),
            (wo, ho),
            (crop[1], crop[0], crop[3], crop[2]),
            degrees,
            translate[::-1],
            flip_h,
            flip_v,
            resize,
            keep_ratio,
        )
        kwargs = dict(
            crop=crop,
            degrees=degrees,
            translate=translate,
            flip_h=flip_h,
            flip_v=flip_v,
            resize=resize,
            keep_ratio=keep_ratio,
        )
        ours, theirs = both((hi, wi), (ho, wo), **kwargs)
        np.testing.assert_allclose(ours, want, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(theirs, want, rtol=1e-12, atol=1e-9)


def test_non_square_resize_is_half_pixel_on_each_axis():
    # 90 x 160 (height x width) onto 30 x 64: the two axes scale differently.
    for m in both((90, 160), (30, 64), resize=True):
        x, y = np.meshgrid(np.arange(64.0), np.arange(30.0))
        src = np.einsum("ij,jhw->ihw", m, np.stack([x, y, np.ones_like(x)]))
        np.testing.assert_allclose(src[0], (x + 0.5) * 160 / 64 - 0.5, atol=1e-9)
        np.testing.assert_allclose(src[1], (y + 0.5) * 90 / 30 - 0.5, atol=1e-9)


def test_batched_arguments_broadcast():
    crops = np.array([[0, 0, 10, 20], [5, -5, 30, 40], [1, 2, 3, 4]], np.float64)
    degrees = np.array([0.0, 30.0, -45.0])
    batched = compute_affine_matrix((50, 60), (20, 10), crop=crops, degrees=degrees, resize=True)
    assert batched.shape == (3, 3, 3)
    for i in range(3):
        one = compute_affine_matrix((50, 60), (20, 10), crop=crops[i], degrees=degrees[i], resize=True)
        np.testing.assert_allclose(batched[i], one)
    tf_batched = compute_affine_matrix_tf(
        tf.constant([[50, 60]] * 3), (20, 10), crop=crops, degrees=degrees, resize=True
    )
    assert tf_batched.dtype == tf.float32
    np.testing.assert_allclose(tf_batched.numpy(), batched, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"in_shape": (1, 2, 3)}, "in_shape"),
        ({"in_shape": 5}, "in_shape"),
        ({"out_shape": (1, 2, 3)}, "out_shape"),
        ({"crop": (1, 2, 3)}, "offset_y, offset_x, height, width"),
        ({"translate": (1, 2, 3)}, "translate"),
    ],
)
def test_matrix_argument_errors(kwargs, fragment):
    args = {"in_shape": (10, 10), "out_shape": (5, 5), **kwargs}
    for fn in (compute_affine_matrix, compute_affine_matrix_tf):
        with pytest.raises(ValueError, match=fragment):
            fn(**args)


# --------------------------------------------------------------------------- random numbers


def test_counter_based_numbers_are_identical_on_both_backends_and_uniform():
    idx = np.arange(N, dtype=np.int64)
    a = uniform(NumpyOps, sample_keys(NumpyOps, 1234, 3, idx), range(5))
    b = uniform(TensorFlowOps, sample_keys(TensorFlowOps, 1234, 3, tf.constant(idx)), range(5)).numpy()
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1
    for column in a.T:
        assert ks_statistic(column, lambda v: v) < ks_bound(N)
    # Different draws of one sample, and neighbouring samples, are uncorrelated.
    assert abs(np.corrcoef(a[:, 0], a[:, 1])[0, 1]) < 0.05
    assert abs(np.corrcoef(a[:-1, 0], a[1:, 0])[0, 1]) < 0.05
    # Negative seeds and huge values wrap instead of failing.
    uniform(NumpyOps, sample_keys(NumpyOps, -1, 2**40, idx[:3]), range(2))


def ks_statistic(samples, cdf):
    x = np.sort(np.asarray(samples, np.float64))
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


def ks_bound(n, c=1.95):
    """Kolmogorov-Smirnov critical value at alpha = 0.001."""
    return c / math.sqrt(n)


# --------------------------------------------------------------------------- samplers


def draw(transform, in_shapes, out_shape=(224, 224), seed=11, epoch=0, training=True, backend="numpy"):
    in_shapes = np.broadcast_to(np.asarray(in_shapes, np.int64), (N, 2))
    return transform.get_random_transformation(
        in_shapes, out_shape, seed=seed, epoch=epoch, training=training, backend=backend
    )


@pytest.mark.parametrize("area_sampling", ["uniform", "log"])
def test_area_fraction_distribution(area_sampling):
    low, high = 0.08, 1.0
    t = SimilarityTransform(scale=(low, high), resize=True, area_sampling=area_sampling)
    p = draw(t, (300, 400))
    area = p["crop"][:, 2] * p["crop"][:, 3] / (300 * 400)
    assert area.min() >= low - 1e-12 and area.max() <= high + 1e-12
    if area_sampling == "uniform":
        cdf = lambda s: (s - low) / (high - low)  # noqa: E731
    else:
        cdf = lambda s: np.log(s / low) / math.log(high / low)  # noqa: E731
    assert ks_statistic(area, cdf) < ks_bound(N)
    # And the other law is rejected: the test can tell them apart.
    other = (
        (lambda s: np.log(s / low) / math.log(high / low))
        if area_sampling == "uniform"
        else (lambda s: (s - low) / (high - low))
    )
    assert ks_statistic(area, other) > 10 * ks_bound(N)
    # Without a ratio the crop keeps the image's aspect.
    np.testing.assert_allclose(p["crop"][:, 3] / p["crop"][:, 2], 400 / 300)


@pytest.mark.parametrize("area_sampling", ["uniform", "log"])
def test_random_resized_crop_ratio_and_area_with_every_try_fitting(area_sampling):
    # Small areas on a large square image: the first try always fits, so the laws are exact.
    t = RandomResizedCrop(scale=(0.05, 0.3), ratio=(3 / 4, 4 / 3), area_sampling=area_sampling)
    p = draw(t, (1000, 1000))
    ch, cw = p["crop"][:, 2], p["crop"][:, 3]
    ratio = cw / ch
    lo, hi = math.log(3 / 4), math.log(4 / 3)
    assert ks_statistic(np.log(ratio), lambda v: (v - lo) / (hi - lo)) < ks_bound(N)
    area = cw * ch / 1e6
    if area_sampling == "uniform":
        assert ks_statistic(area, lambda s: (s - 0.05) / 0.25) < ks_bound(N)
    else:
        assert ks_statistic(area, lambda s: np.log(s / 0.05) / math.log(6)) < ks_bound(N)


def test_random_resized_crop_aspect_in_range_and_crops_inside_image():
    rng = np.random.default_rng(3)
    shapes = rng.integers(20, 900, (N, 2))
    t = RandomResizedCrop(flip_h=0.5)
    p = t.get_random_transformation(shapes, (224, 224), seed=5, backend="numpy")
    cy, cx, ch, cw = p["crop"].T
    h, w = shapes[:, 0], shapes[:, 1]
    ratio = cw / ch
    inside = (ratio >= 3 / 4 - 1e-9) & (ratio <= 4 / 3 + 1e-9)
    # Outside the range only by the fallback's rounding to whole pixels (Benzina's int(round(...))).
    out = ~inside
    assert np.all(cw[out] == np.round(cw[out])) and np.all(ch[out] == np.round(ch[out]))
    assert np.all((np.abs(cw - ch * 4 / 3) <= 0.5) | (np.abs(ch - cw * 4 / 3) <= 0.5) | inside)
    assert out.sum() > 0  # such shapes (20-900 a side) fall back often
    eps = 1e-9
    assert np.all(np.abs(cx) + cw / 2 <= w / 2 + eps) and np.all(np.abs(cy) + ch / 2 <= h / 2 + eps)
    # The crop's corners, through the matrix, land inside the image (pixel edges at -0.5 and W - 0.5).
    m = t.matrices(shapes, (224, 224), seed=5, backend="numpy")
    for x, y in [(-0.5, -0.5), (223.5, -0.5), (-0.5, 223.5), (223.5, 223.5)]:
        src = m @ np.array([x, y, 1.0])
        assert np.all(src[:, 0] >= -0.5 - 1e-6) and np.all(src[:, 0] <= w - 0.5 + 1e-6)
        assert np.all(src[:, 1] >= -0.5 - 1e-6) and np.all(src[:, 1] <= h - 0.5 + 1e-6)
    # Offsets use the room they have: uniform within +-(W - cw) / 2 (fallback crops stay centred).
    room = (w - cw) / 2
    moved = (room > 1) & (cx != 0)
    assert moved.sum() > 0.8 * N
    frac = cx[moved] / room[moved]
    assert ks_statistic(frac, lambda v: (v + 1) / 2) < ks_bound(len(frac))


def test_flip_probabilities_degrees_and_translation_bounds():
    t = SimilarityTransform(degrees=(-20, 35), translate=(0.1, 0.25), flip_h=0.3, flip_v=0.75)
    p = draw(t, (100, 200), out_shape=(48, 64))
    sigma = math.sqrt(0.25 / N)
    assert abs(p["flip_h"].mean() - 0.3) < 5 * sigma
    assert abs(p["flip_v"].mean() - 0.75) < 5 * sigma
    assert set(np.unique(p["flip_h"])) == {0.0, 1.0}
    assert ks_statistic(p["degrees"], lambda d: (d + 20) / 55) < ks_bound(N)
    ty, tx = p["translate"].T
    assert np.all(np.abs(ty) <= 0.1 * 48) and np.all(np.abs(tx) <= 0.25 * 64)
    assert ks_statistic(ty, lambda v: (v + 4.8) / 9.6) < ks_bound(N)
    assert ks_statistic(tx, lambda v: (v + 16) / 32) < ks_bound(N)
    # No resize, no random crop: a centred crop of the output's size.
    np.testing.assert_array_equal(p["crop"], np.broadcast_to([0, 0, 48, 64], (N, 4)))
    # (height, width) fractions, not a (low, high) range: a larger height fraction, or a vertical-only one.
    for fractions in [(0.3, 0.1), (0.3, 0.0)]:
        ty, tx = draw(SimilarityTransform(translate=fractions), (100, 200), out_shape=(48, 64))["translate"].T
        assert np.all(np.abs(ty) <= 0.3 * 48) and np.abs(ty).max() > 0.25 * 48
        assert np.all(np.abs(tx) <= fractions[1] * 64) and (fractions[1] > 0) == bool(np.any(tx))


def test_a_failed_sample_gets_the_centre_fallback_and_the_next_sample_tries_again():
    # Even samples: 10 x 1000 (height x width): no crop of area >= 8% with ratio <= 4/3 fits.
    # Odd samples: 500 x 500, where crops fit.
    shapes = np.where((np.arange(N) % 2 == 0)[:, None], [10, 1000], [500, 500])
    t = RandomResizedCrop()
    p = t.get_random_transformation(shapes, (224, 224), seed=9, backend="numpy")
    cy, cx, ch, cw = p["crop"].T
    even, odd = slice(0, None, 2), slice(1, None, 2)
    # Benzina's fallback: the whole picture, its clamped side rounded to whole pixels (int(round(H * 4/3)):
    # 13, not 13.33), in both backends; a tall picture the same way (int(round(W / (3/4)))).
    np.testing.assert_array_equal(ch[even], 10)
    np.testing.assert_array_equal(cw[even], 13)
    np.testing.assert_array_equal(cx[even], 0)
    np.testing.assert_array_equal(cy[even], 0)
    in_tf = t.get_random_transformation(shapes, (224, 224), seed=9, backend="tensorflow")
    np.testing.assert_array_equal(in_tf["crop"].numpy()[even], p["crop"][even])
    tall = t.get_random_transformation(shapes[:, ::-1], (224, 224), seed=9, backend="numpy")["crop"]
    np.testing.assert_array_equal(tall[even, 2:], np.broadcast_to([13, 10], (N // 2, 2)))
    # Every odd sample still crops at random: different sizes and offsets.
    assert np.mean(np.abs(cx[odd]) > 0) > 0.99
    assert len(np.unique(np.round(cw[odd], 6))) > 0.9 * (N // 2)
    # A natural case: some samples fall back, and their successors are random again.
    # (100 x 100 with areas >= 90%: a try fits about 1 time in 5, so about 1 sample in 7 falls back.)
    shapes = np.broadcast_to([100, 100], (N, 2))
    p = RandomResizedCrop(scale=(0.9, 1)).get_random_transformation(shapes, (64, 64), seed=2, backend="numpy")
    fell_back = np.isclose(p["crop"][:, 2], 100) & np.isclose(p["crop"][:, 3], 100)
    assert 0.05 * N < fell_back.sum() < 0.3 * N
    after = np.flatnonzero(fell_back[:-1]) + 1
    assert np.mean(~fell_back[after]) > 0.2


def test_same_seed_epoch_index_same_parameters_whatever_the_batch():
    t = RandomResizedCrop(degrees=10, flip_h=0.5)
    shapes = np.random.default_rng(0).integers(50, 500, (64, 2))
    idx = np.arange(1000, 1064)
    full = t.matrices(shapes, (96, 128), seed=42, epoch=3, indices=idx, backend="numpy")
    order = np.random.default_rng(1).permutation(64)
    shuffled = t.matrices(shapes[order], (96, 128), seed=42, epoch=3, indices=idx[order], backend="numpy")
    np.testing.assert_array_equal(shuffled, full[order])
    parts = [
        t.matrices(shapes[i : i + 7], (96, 128), seed=42, epoch=3, indices=idx[i : i + 7], backend="numpy")
        for i in range(0, 64, 7)
    ]
    np.testing.assert_array_equal(np.concatenate(parts), full)
    other_epoch = t.matrices(shapes, (96, 128), seed=42, epoch=4, indices=idx, backend="numpy")
    other_seed = t.matrices(shapes, (96, 128), seed=43, epoch=3, indices=idx, backend="numpy")
    assert not np.any(np.all(np.isclose(other_epoch, full), axis=(1, 2)))
    assert not np.any(np.all(np.isclose(other_seed, full), axis=(1, 2)))


def test_both_backends_take_any_integer_seed_wrapped_to_64_bits():
    # The TensorFlow backend refused seeds of 2**63 and more (no int64 tensor holds them), which NumPy took.
    t = RandomResizedCrop(degrees=10, flip_h=0.5)
    shapes, idx = np.array([[60, 80], [90, 40]]), np.array([3, 7])
    for seed, same in [(2**63 + 5, 2**63 + 5 - 2**64), (2**64 + 9, 9), (-1, 2**64 - 1)]:
        want = t.matrices(shapes, (16, 16), seed=same, epoch=2, indices=idx, backend="numpy")
        for backend in ("numpy", "tensorflow"):
            got = np.asarray(t.matrices(shapes, (16, 16), seed=seed, epoch=2, indices=idx, backend=backend))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "transform",
    [
        SimilarityTransform(),
        SimilarityTransform(
            scale=(0.5, 2),
            degrees=30,
            translate=(0.1, 0.2),
            flip_h=0.5,
            flip_v=0.5,
            random_crop=True,
            area_sampling="log",
        ),
        SimilarityTransform(scale=0.5, keep_ratio=True, random_crop=True),
        RandomResizedCrop(degrees=5, flip_h=0.5),
        CenterResizedCrop(224 / 256),
        ConstantWarpTransform([1, 0, 3, 0, 1, 4, 0, 0, 1]),
    ],
    ids=["vanilla", "everything", "keep_ratio", "rrc", "centre", "constant"],
)
@pytest.mark.parametrize("training", [True, False])
def test_numpy_and_tensorflow_samplers_agree(transform, training):
    shapes = np.random.default_rng(4).integers(1, 800, (2000, 2))
    idx = np.arange(2000, dtype=np.int64) * 7
    kwargs = dict(seed=77, epoch=2, indices=idx, training=training)
    a = transform.matrices(shapes, (160, 224), backend="numpy", **kwargs)
    b = transform.matrices(tf.constant(shapes), (160, 224), **kwargs)
    assert a.dtype == np.float64 and b.dtype == tf.float32 and b.shape == (2000, 3, 3)
    np.testing.assert_allclose(b.numpy(), a, rtol=1e-5, atol=1e-3)

    # Inside a graph too, with tensors for everything.
    @tf.function
    def graph(shapes, seed, epoch, indices):
        return transform.matrices(
            shapes, (160, 224), seed=seed, epoch=epoch, indices=indices, training=training
        )

    c = graph(tf.constant(shapes), tf.constant(77, tf.int64), tf.constant(2), tf.constant(idx))
    np.testing.assert_array_equal(c.numpy(), b.numpy())


def test_inference_is_deterministic_and_centred():
    t = RandomResizedCrop(degrees=(5, 10), translate=0.2, flip_h=0.5, flip_v=1.0)
    shapes = np.array([[300, 400], [300, 300], [100, 1000], [1000, 100]])
    p = t.get_random_transformation(shapes, (224, 224), seed=1, training=False, backend="numpy")
    q = t.get_random_transformation(shapes, (224, 224), seed=2, epoch=5, training=False, backend="numpy")
    for key in p:
        np.testing.assert_array_equal(p[key], q[key])
    np.testing.assert_array_equal(p["crop"][:, :2], 0)
    np.testing.assert_array_equal(p["translate"], 0)
    np.testing.assert_array_equal(p["degrees"], 5)  # the value of (5, 10) closest to 0
    np.testing.assert_array_equal(p["flip_h"], 0)
    np.testing.assert_array_equal(p["flip_v"], 1)  # probability 1 is not random
    # Whole images when the aspect is allowed; else the largest centred crop of the nearest ratio.
    np.testing.assert_allclose(p["crop"][:, 2:], [[300, 400], [300, 300], [100, 400 / 3], [400 / 3, 100]])


def test_center_resized_crop_is_resize_short_side_then_centre_crop():
    # 375 x 500 (height x width), scale 224/256 onto 224 x 224: short side -> 256, keep the centre 224.
    m = CenterResizedCrop(224 / 256).matrices([375, 500], (224, 224), indices=[0], backend="numpy")[0]
    k = 375 / 256  # source pixels per output pixel
    want = [[k, 0, 249.5 - 111.5 * k], [0, k, 187 - 111.5 * k], [0, 0, 1]]
    np.testing.assert_allclose(m, want, rtol=1e-12)
    # Without keep_ratio: both axes stretched to the crop.
    m = CenterResizedCrop(0.5, keep_ratio=False).matrices(
        [300, 400], (100, 50), indices=[0], backend="numpy"
    )[0]
    np.testing.assert_allclose(np.diag(m)[:2], [200 / 50, 150 / 100])


def test_vanilla_similarity_is_a_centre_crop_of_the_output_size():
    m = SimilarityTransform().matrices([[144, 256]], (126, 224), backend="numpy")[0]
    np.testing.assert_allclose(m, [[1, 0, 16], [0, 1, 9], [0, 0, 1]])


def test_scalar_arguments_become_ranges():
    t = SimilarityTransform(scale=2, ratio=2, degrees=10, translate=0.1)
    assert t.scale == (0.5, 2.0) and t.ratio == (0.5, 2.0)
    assert t.degrees == (-10.0, 10.0) and t.translate == (0.1, 0.1)
    assert t.resize  # forced on by scale and ratio
    assert not SimilarityTransform().resize and SimilarityTransform(ratio=(1, 1)).resize
    assert CenterResizedCrop(0.5).scale == (0.25, 0.25)
    assert "area_sampling='uniform'" in repr(RandomResizedCrop())


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"scale": (0.5, 0.1)}, ValueError, "Received: scale="),
        ({"scale": 0}, ValueError, "positive"),
        ({"scale": (0.1, 0.2, 0.3)}, ValueError, "pair"),
        ({"scale": "big"}, TypeError, "scale"),
        ({"ratio": (0, 1)}, ValueError, "ratio"),
        ({"degrees": (10, -10)}, ValueError, "degrees"),
        ({"translate": -0.1}, ValueError, "translate"),
        ({"translate": (0.1, -0.1)}, ValueError, r"\(height, width\) fractions"),
        ({"translate": (0.1, float("inf"))}, ValueError, "translate"),
        ({"translate": (0.1, 0.2, 0.3)}, ValueError, "translate"),
        ({"flip_h": 1.5}, ValueError, "flip_h"),
        ({"flip_v": "yes"}, ValueError, "flip_v"),
        ({"area_sampling": "sqrt"}, ValueError, "area_sampling"),
        ({"scale": (float("nan"), 1)}, ValueError, "finite"),
    ],
)
def test_sampler_argument_errors(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        SimilarityTransform(**kwargs)


def test_sampler_input_errors():
    t = RandomResizedCrop()
    with pytest.raises(ValueError, match="indices"):
        t.matrices([100, 100], (10, 10), backend="numpy")
    with pytest.raises(ValueError, match="in_shapes"):
        t.matrices([[1, 2, 3]], (10, 10), backend="numpy")
    with pytest.raises(ValueError, match="backend"):
        t.matrices([[1, 2]], (10, 10), backend="torch")
    with pytest.raises(TypeError, match="integer"):
        t.matrices([[1, 2]], (10, 10), seed=1.5, backend="numpy")
    with pytest.raises(ValueError, match="scale"):
        CenterResizedCrop(-1)


def test_constant_transforms_and_bias_norm():
    m = ConstantWarpTransform([[2, 0, 1], [0, 2, 1], [0, 0, 1]])
    out = m.matrices([[10, 10]] * 4, (5, 5))
    assert out.shape == (4, 3, 3)
    np.testing.assert_array_equal(out.numpy()[3], [[2, 0, 1], [0, 2, 1], [0, 0, 1]])
    np.testing.assert_array_equal(m.matrices([10, 10], (5, 5), indices=[1, 2], backend="numpy")[1], m.matrix)
    with pytest.raises(ValueError, match="9 numbers"):
        ConstantWarpTransform([1, 2, 3])
    bias, norm = bias_norm(ConstantBiasTransform([10, 20, 30]), ConstantNormTransform(0.5))
    np.testing.assert_array_equal(bias.numpy(), [10, 20, 30])
    np.testing.assert_array_equal(norm.numpy(), [0.5] * 3)
    with pytest.raises(ValueError, match="not both"):
        bias_norm(ConstantBiasTransform(1), None, mean=0.5)
    with pytest.raises(ValueError, match="positive `std`"):
        bias_norm(std=(1, 0, 1))
    with pytest.raises(ValueError, match="3 values"):
        ConstantBiasTransform([1, 2])


def test_benzinas_none_is_the_neutral_value_and_nan_is_refused():
    # Benzina's Constant*Transform(None) and warp(oob=None) mean the default; np.asarray(None, float)
    # made them NaN, and every pixel of the warp NaN.
    from bzna_tf.ops import warp_yuv420

    np.testing.assert_array_equal(ConstantBiasTransform(None).bias, [0, 0, 0])
    np.testing.assert_array_equal(ConstantNormTransform(None).norm, [1, 1, 1])
    np.testing.assert_array_equal(ConstantWarpTransform(None).matrix, np.eye(3))
    y, c = np.full((1, 8, 8), 128, np.uint8), np.full((1, 4, 4), 128, np.uint8)
    shift = np.array([[1, 0, 100], [0, 1, 0], [0, 0, 1]], np.float32)  # every point out of bounds
    for bias, norm in ((ConstantBiasTransform(None), ConstantNormTransform(None)), (None, None)):
        out = warp_yuv420(y, c, c, np.eye(3, dtype=np.float32), (4, 4), bias=bias, norm=norm).numpy()
        np.testing.assert_array_equal(out, np.full((1, 4, 4, 3), 128.0))
    np.testing.assert_array_equal(warp_yuv420(y, c, c, shift, (4, 4), oob_color=None).numpy(), 0.0)
    for bad in (float("nan"), (0, float("inf"), 0)):
        with pytest.raises(ValueError, match="finite"):
            ConstantBiasTransform(bad)
    for given in (
        ConstantBiasTransform,
        ConstantNormTransform,
        lambda v: warp_yuv420(y, c, c, shift, (4, 4), oob_color=v),
    ):
        with pytest.raises(TypeError, match=r"Received: .*=\[None, 0, 0\]"):
            given([None, 0, 0])  # not NaN
    with pytest.raises(TypeError, match="fill_value=None"):
        per_channel(None, "fill_value")
    # A NaN fill colour is a mask of the pixels outside the picture, on purpose: taken.
    masked = warp_yuv420(
        y, c, c, np.array([[1, 0, 6], [0, 1, 0], [0, 0, 1]], np.float32), (4, 4), oob_color=np.nan
    )
    assert np.isnan(masked.numpy()[0, :, 2:]).all() and (masked.numpy()[0, :, :2] == 128).all()


# --------------------------------------------------------------------------- Benzina's log sampler


def _ks_two_sample(a, b):
    """Two-sample Kolmogorov-Smirnov statistic and its asymptotic p-value (NumPy only)."""
    a, b = np.sort(a), np.sort(b)
    both = np.concatenate([a, b])
    d = np.max(
        np.abs(np.searchsorted(a, both, "right") / a.size - np.searchsorted(b, both, "right") / b.size)
    )
    en = np.sqrt(a.size * b.size / (a.size + b.size))
    lam = (en + 0.12 + 0.11 / en) * d
    j = np.arange(1, 101)
    return d, float(np.clip(2 * np.sum((-1.0) ** (j - 1) * np.exp(-2 * j**2 * lam**2)), 0, 1))


def _spec_crops(n, w, h, scale, ratio, rng, area_once=True):
    """Crop (width, height) of SPEC section 5, written from the text: area log-uniform once per sample,
    up to 10 aspect tries log-uniform, else the centred crop of the image's aspect clamped to ``ratio``."""
    out = np.empty((n, 2))
    for k in range(n):
        s = np.exp(rng.uniform(np.log(scale[0]), np.log(scale[1])))
        for _ in range(10):
            if not area_once:
                s = np.exp(rng.uniform(np.log(scale[0]), np.log(scale[1])))
            ar = np.exp(rng.uniform(np.log(ratio[0]), np.log(ratio[1])))
            cw, ch = np.sqrt(s * w * h * ar), np.sqrt(s * w * h / ar)
            if 0 < cw <= w and 0 < ch <= h:
                out[k] = cw, ch
                break
        else:
            aspect = min(max(w / h, ratio[0]), ratio[1])
            cw, ch = np.sqrt(w * h * aspect), np.sqrt(w * h / aspect)
            fit = min(1.0, w / cw, h / ch)
            out[k] = cw * fit, ch * fit
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_area_sampling_draws_what_benzina_drew(seed):
    """Two-sample KS tests of area and aspect against SPEC section 5's sampler (the area drawn once)."""
    w, h, scale, ratio, n = 500, 375, (0.08, 1.0), (3 / 4, 4 / 3), 5000
    t = SimilarityTransform(scale=scale, ratio=ratio, resize=True, random_crop=True, area_sampling="log")
    crop = t.get_random_transformation(np.tile([[h, w]], (n, 1)), (224, 224), seed=seed, backend="numpy")[
        "crop"
    ]
    ours_area, ours_aspect = crop[:, 2] * crop[:, 3] / (w * h), crop[:, 3] / crop[:, 2]
    ref = _spec_crops(n, w, h, scale, ratio, np.random.default_rng(100 + seed))
    ref_area, ref_aspect = ref[:, 0] * ref[:, 1] / (w * h), ref[:, 0] / ref[:, 1]
    for what, a, b in [("area", ours_area, ref_area), ("aspect", ours_aspect, ref_aspect)]:
        d, p = _ks_two_sample(a, b)
        assert p > 1e-3, f"{what}: KS D={d:.4f}, p={p:.2e} against SPEC section 5's sampler"
    # The test has the power to see the old mistake (a new area on every try): rejected.
    wrong = _spec_crops(n, w, h, scale, ratio, np.random.default_rng(200 + seed), area_once=False)
    assert _ks_two_sample(ours_area, wrong[:, 0] * wrong[:, 1] / (w * h))[1] < 1e-6
    # Realised medians on a 4:3 image: the figures docs/guides/layers.md gives.
    assert abs(np.median(ours_area) - 0.28) < 0.015
