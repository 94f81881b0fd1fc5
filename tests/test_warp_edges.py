"""The picture's edges: a warp samples the whole area a picture covers, not a frame short of it.

A picture of W pixels covers [-0.5, W - 0.5] in pixel-centre coordinates. The
warps (CPU ops, their row path, the layers, ``as_dataset``, and through the GPU
kit the GPU core: all one header, custom_ops/lib/warp.h) sample a source point
inside that area with fetches clamped to the edge, as torchvision,
``tf.image.resize`` and Pillow do, and write the fill colour only beyond it.
Benzina's kernel (SPEC section 4) tests [0, W - 1] instead, which put a frame of
the fill colour around every upscaled picture; bzna_tf deviates on purpose
(README, "Differences from Benzina").
"""

import hashlib

import numpy as np
import pytest
import tensorflow as tf
from _warp_reference import F, ref_points, ref_rgb, ref_yuv420
from test_warp import resize_matrix  # the whole picture onto the whole output

from bzna_tf.ops.warp import decode_warp, warp_rgb, warp_yuv420

# Upscaling factors from barely (1.01) to far (20), and the picture sizes that give them exactly
# onto the outputs below: (input H, W), (output H, W).
UPSCALES = {
    "x1.01": ((100, 200), (101, 202)),
    "x1.5": ((22, 14), (33, 21)),
    "x2": ((9, 16), (18, 32)),
    "x3.7": ((10, 10), (37, 37)),
    "x7": ((4, 6), (28, 42)),
    "x20": ((3, 5), (60, 100)),
    "x20_1px": ((1, 1), (20, 20)),
    "x4_1px": ((1, 1), (4, 4)),
}
RGB = (200, 120, 60)


def per_pixel(m):
    """The same map through the per-pixel path: a shear so small that no source point moves.

    The CPU kernels run axis-aligned matrices a row at a time (lib/warp_rows.h) and the rest per
    pixel (lib/warp.h): a zero-that-is-not m[1] sends this one down the second path.
    """
    m = m.copy()
    m[0, 1] = F(1e-30)
    return m


def flat_yuv(rgb, h, w):
    """Constant 4:2:0 planes whose full-range BT.601 conversion is close to ``rgb``."""
    r, g, b = (float(v) for v in rgb)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb, cr = 128 + (b - y) / 1.772, 128 + (r - y) / 1.402
    ch, cw = (h + 1) // 2, (w + 1) // 2
    plane = lambda v, hh, ww: np.full((1, hh, ww), round(v), np.uint8)  # noqa: E731
    return plane(y, h, w), plane(cb, ch, cw), plane(cr, ch, cw)


def assert_constant(out, what):
    """Every pixel of each image of ``out`` (N, H, W, 3) equals that image's first pixel."""
    out = np.asarray(out)
    first = out[:, :1, :1, :]
    bad = np.any(out != first, axis=-1)
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {bad[0].size * len(out)} pixels differ from the picture's colour "
        f"{first[0, 0, 0].tolist()}, e.g. {out[np.nonzero(bad)][0].tolist()} at (n, y, x) "
        f"{[int(i[0]) for i in np.nonzero(bad)]}"
    )


# --------------------------------------------------------------------------- the ops


@pytest.mark.parametrize("path", ["rows", "per_pixel"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("case", list(UPSCALES))
def test_a_constant_picture_upscaled_stays_constant(case, antialias, path):
    in_hw, out_hw = UPSCALES[case]
    m = resize_matrix(in_hw, out_hw)
    m = per_pixel(m) if path == "per_pixel" else m
    image = np.broadcast_to(np.uint8(RGB), (1, *in_hw, 3))
    got = warp_rgb(image, m, out_hw, oob_color=-1, antialias=antialias).numpy()
    assert_constant(got, f"warp_rgb uint8 {case}")
    np.testing.assert_array_equal(got[0, 0, 0], RGB)
    # Float pictures are not rounded: (1 - a) v + a v is v to float32 rounding, never the fill.
    got = warp_rgb(image.astype(F) + F(0.25), m, out_hw, oob_color=-1, antialias=antialias).numpy()
    np.testing.assert_allclose(got, np.broadcast_to(F(RGB) + F(0.25), got.shape), rtol=1e-6, atol=0)
    y, cb, cr = flat_yuv(RGB, *in_hw)
    got = warp_yuv420(y, cb, cr, m, out_hw, oob_color=-1, antialias=antialias).numpy()
    assert_constant(got, f"warp_yuv420 {case}")
    np.testing.assert_allclose(got[0, 0, 0], RGB, atol=2)


def test_the_band_half_a_pixel_beyond_the_outer_centres_samples_the_edge():
    images = (np.arange(2 * 3 * 3, dtype=np.uint8).reshape(1, 2, 3, 3) + 1) * 10  # H 2, W 3
    below, above = np.nextafter(F(-0.5), F(-1)), np.nextafter(F(2.5), F(3))
    for antialias in (False, True):
        for route in (lambda m: m, per_pixel):

            def shifted(tx, ty, out_hw=(2, 3), route=route, antialias=antialias):
                m = F([[1, 0, tx], [0, 1, ty], [0, 0, 1]])
                return warp_rgb(images, route(m), out_hw, oob_color=-1, antialias=antialias).numpy()[0]

            # X = W - 0.5 exactly: inside, the last column; the next float32 up: outside.
            got = shifted(2.5, 0, (2, 2))
            np.testing.assert_array_equal(got[:, 0], images[0, :, 2].astype(F))
            np.testing.assert_array_equal(got[:, 1], np.full((2, 3), -1, F))
            assert np.all(shifted(above, 0, (2, 1)) == -1)
            # X = -0.5: inside, the first column (x = 1 reads X = 0.5: columns 0 and 1 evenly).
            got = shifted(-0.5, 0)
            np.testing.assert_array_equal(got[:, 0], images[0, :, 0].astype(F))
            np.testing.assert_array_equal(
                got[:, 1], np.round((images[0, :, 0] + images[0, :, 1].astype(F)) / 2)
            )
            assert np.all(shifted(below, 0, (2, 1)) == -1)
            # The same along y: Y = H - 0.5 = 1.5 and Y = -0.5 are inside, beyond them outside.
            np.testing.assert_array_equal(shifted(0, 1.5, (1, 3))[0], images[0, 1].astype(F))
            np.testing.assert_array_equal(shifted(0, -0.5, (1, 3))[0], images[0, 0].astype(F))
            assert np.all(shifted(0, np.nextafter(F(1.5), F(2)), (1, 3)) == -1)
            assert np.all(shifted(0, below, (1, 3)) == -1)


@pytest.mark.parametrize("in_hw", [(7, 9), (8, 10), (1, 3)])
def test_yuv420_band_is_the_luma_planes(in_hw):
    # Odd and even sizes: chroma planes are half the luma's, rounded up; the band is decided on luma.
    rng = np.random.default_rng(sum(in_hw))
    h, w = in_hw
    y = rng.integers(0, 256, (1, h, w), dtype=np.uint8)
    cb = rng.integers(0, 256, (1, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    cr = rng.integers(0, 256, (1, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8)
    for route in (lambda m: m, per_pixel):
        # Output (x, y) reads (x - 0.5, y - 0.5): from the top-left corner of the band to beyond the
        # bottom-right one.
        m = route(F([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]]))
        got = warp_yuv420(y, cb, cr, m, (h + 2, w + 2), oob_color=-1).numpy()
        want = ref_yuv420(y, cb, cr, m, (h + 2, w + 2), oob_color=(-1, -1, -1))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
        # Rows and columns 0 .. H and 0 .. W are inside (the last reads H - 0.5, W - 0.5); the next
        # reads H + 0.5, W + 0.5, beyond the band.
        inside = got[0, : h + 1, : w + 1]
        assert np.all(inside >= 0) and np.all(got[0, h + 1] == -1) and np.all(got[0, :, w + 1] == -1)
        # The band's corner (-0.5, -0.5) is the corner pixel: what the identity gives at (0, 0).
        corner = warp_yuv420(y, cb, cr, np.eye(3, dtype=F), (1, 1)).numpy()
        np.testing.assert_array_equal(got[0, 0, 0], corner[0, 0, 0])


@pytest.mark.parametrize("factor", [1.01, 1.7, 4.0, 20.0])
def test_whole_picture_upscale_equals_tf_image_resize(factor):
    # tf.image.resize (bilinear, half-pixel centres, no antialias) clamps at the edges: the same
    # interpolation everywhere, borders included.
    rng = np.random.default_rng(int(factor * 100))
    in_hw = (12, 17) if factor > 1.1 else (100, 150)
    out_hw = (round(in_hw[0] * factor), round(in_hw[1] * factor))
    images = rng.uniform(0, 255, (2, *in_hw, 3)).astype(F)
    for antialias in (False, True):
        ours = warp_rgb(images, resize_matrix(in_hw, out_hw), out_hw, antialias=antialias).numpy()
        theirs = tf.image.resize(images, out_hw, method="bilinear", antialias=antialias).numpy()
        # TensorFlow works out the scale in its own float32 steps: coordinates a few ulps apart.
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=0.01)


def test_whole_picture_upscale_equals_pillow():
    from PIL import Image

    rng = np.random.default_rng(8)
    image = rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    out_hw = (40, 31)
    ours = warp_rgb(image[None], resize_matrix(image.shape[:2], out_hw), out_hw).numpy()[0]
    theirs = np.asarray(Image.fromarray(image).resize(out_hw[::-1], Image.Resampling.BILINEAR), F)
    assert np.abs(ours - theirs).max() <= 1  # Pillow's fixed-point arithmetic: a grey level at most


def test_agrees_with_the_reference_around_every_edge():
    # Random maps that put output pixels in the band on every side, through both CPU paths.
    rng = np.random.default_rng(34)
    h, w = 11, 14
    images = rng.integers(0, 256, (4, h, w, 3), dtype=np.uint8)
    y = rng.integers(0, 256, (4, h, w), dtype=np.uint8)
    cb, cr = (rng.integers(0, 256, (4, (h + 1) // 2, (w + 1) // 2), dtype=np.uint8) for _ in range(2))
    mats = []
    for k in range(4):
        s = rng.uniform(0.05, 0.9, 2) if k < 2 else rng.uniform(1.5, 4.0, 2)  # enlarged, then reduced
        mats.append(F([[s[0], 0, rng.uniform(-1.5, 0.5)], [0, s[1], rng.uniform(-1.5, 0.5)], [0, 0, 1]]))
    mats = np.stack(mats)
    flipped = mats @ F([[-1, 0, 18], [0, -1, 15], [0, 0, 1]])  # from the far edges
    routes = (
        mats,
        flipped,
        np.stack([per_pixel(k) for k in mats]),
        np.stack([per_pixel(k) for k in flipped]),
    )
    for m in routes:
        x, yy = ref_points(m[0], 16, 19)
        band = ((x >= -0.5) & (x < 0)) | ((x > w - 1) & (x <= w - 0.5))
        band |= ((yy >= -0.5) & (yy < 0)) | ((yy > h - 1) & (yy <= h - 0.5))
        assert band.any()
        for antialias in (False, True):
            got = warp_rgb(images, m, (16, 19), oob_color=-1, antialias=antialias).numpy()
            want = ref_rgb(images, m, (16, 19), oob_color=(-1, -1, -1), antialias=antialias)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
            got = warp_yuv420(y, cb, cr, m, (16, 19), oob_color=-1, antialias=antialias).numpy()
            want = ref_yuv420(y, cb, cr, m, (16, 19), oob_color=(-1, -1, -1), antialias=antialias)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)


# --------------------------------------------------------------------------- downscales: unchanged


def downscale_outputs():
    """Warps whose every source point lies within [0, W - 1] x [0, H - 1]: (name, points, output).

    Random resized crops that shrink (the row path), the same through the per-pixel path, and
    a rotated centre crop; RGB uint8 and float32, and 4:2:0, with and without antialiasing. Their
    outputs were the same before the edge band was added (Benzina's bounds): the SHA-256 of each is
    in DOWNSCALE_SHA256, computed by the ops as they were (the antialiased 4:2:0 ones since chroma's
    footprint was lengthened to sqrt(c^2 + 1) texels).
    """
    from bzna_tf.transforms import RandomResizedCrop, compute_affine_matrix

    rng = np.random.default_rng(2034)
    h, w = 96, 128
    out_hw = (16, 20)
    images = rng.integers(0, 256, (6, h, w, 3), dtype=np.uint8)
    y = rng.integers(0, 256, (6, h, w), dtype=np.uint8)
    cb, cr = (rng.integers(0, 256, (6, h // 2, w // 2), dtype=np.uint8) for _ in range(2))
    shapes = np.array([[h, w]] * 6)
    rrc = RandomResizedCrop(scale=(0.3, 1.0), flip_h=0.5).matrices(shapes, out_hw, seed=5, backend="numpy")
    rrc = rrc.astype(F)
    turned = compute_affine_matrix(
        shapes,
        np.array(out_hw),
        crop=np.tile([[0.0, 0.0, w * 0.4, h * 0.4]], (6, 1)),
        degrees=25.0,
        resize=True,
    ).astype(F)
    matrices = {"rrc": rrc, "rrc_per_pixel": np.stack([per_pixel(m) for m in rrc]), "turned": turned}
    for name, m in matrices.items():
        points = [ref_points(k, *out_hw) for k in m]
        for antialias in (False, True):
            tag = f"{name}{'_aa' if antialias else ''}"
            kw = dict(oob_color=-1, antialias=antialias)
            yield f"rgb_u8_{tag}", points, warp_rgb(images, m, out_hw, **kw).numpy()
            yield f"rgb_f32_{tag}", points, warp_rgb(images.astype(F) / 3, m, out_hw, **kw).numpy()
            yield f"yuv_{tag}", points, warp_yuv420(y, cb, cr, m, out_hw, **kw).numpy()


DOWNSCALE_SHA256 = {
    "rgb_u8_rrc": "ad576bdcf4ca389b1252a4ab4a67ad31fd25c2319c8161cdc4f4e160fabe37bf",
    "rgb_f32_rrc": "885e038eaa9cca18d2cc09b7857e609a47b0caacb79b85799b53ac5a5a50ec98",
    "yuv_rrc": "84201c1f9f9009fe47e4b93dacbc21612a25dd82ff30cdf173577860b645aba6",
    "rgb_u8_rrc_aa": "4cf3a2dacacfe56e3593f6daed8dcc0716682a5a3173f549e3b653fd4992966e",
    "rgb_f32_rrc_aa": "75e6b31bab6ea61aef0bebca74381602c8d320ce9471f7d72870e44ec3eef3bc",
    "yuv_rrc_aa": "901738a9b07382e7e23920f8e088e83812e074ca7fb41524f55112c1aa3262d2",
    "rgb_u8_rrc_per_pixel": "ad576bdcf4ca389b1252a4ab4a67ad31fd25c2319c8161cdc4f4e160fabe37bf",
    "rgb_f32_rrc_per_pixel": "885e038eaa9cca18d2cc09b7857e609a47b0caacb79b85799b53ac5a5a50ec98",
    "yuv_rrc_per_pixel": "84201c1f9f9009fe47e4b93dacbc21612a25dd82ff30cdf173577860b645aba6",
    "rgb_u8_rrc_per_pixel_aa": "89050e0e25d2ccd91529936e9e6e2bc8b9a64166799e468bfd522c1a9fb3709e",
    "rgb_f32_rrc_per_pixel_aa": "7c5b9dca2ff7d77fb57cb18ebc4ee33eed4a9716df6383b0cefeb1ef5cf696e4",
    "yuv_rrc_per_pixel_aa": "901738a9b07382e7e23920f8e088e83812e074ca7fb41524f55112c1aa3262d2",
    "rgb_u8_turned": "7c1d05e5c1949c23f8b875cc0da691788984870916a24a7e187b87f60ff3deeb",
    "rgb_f32_turned": "ca03535507aad7dfc8230d9f2e939fed186a2d3c9f408fd20a18130afc458dd1",
    "yuv_turned": "5cf8b893883b1ef6717577da3a9f98a77e9556a23a61cf4468ee92c2379d444b",
    "rgb_u8_turned_aa": "4ae8c5e5ab1545415bea7cf9d388388108442f5891f8b387d6b22e719bd94d3c",
    "rgb_f32_turned_aa": "9c64626fbeb61e416b7bf461147e98631cc974ca646593fe96551fd39d13e5c1",
    "yuv_turned_aa": "b64138947fa325bbf163d52381000743a2826934cebb65e497b2e960a7a3ce7a",
}


def test_a_downscale_is_unchanged_bit_for_bit():
    seen = {}
    for name, points, out in downscale_outputs():
        for x, y in points:
            assert x.min() >= 0 and x.max() <= 127 and y.min() >= 0 and y.max() <= 95, name
        seen[name] = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
    assert seen == DOWNSCALE_SHA256


# --------------------------------------------------------------------------- decode_warp


def test_decode_warp_of_a_constant_picture_upscaled_stays_constant():
    from bzna_tf.convert import encode_picture
    from bzna_tf.format.hevc import to_annexb

    image = np.broadcast_to(np.uint8(RGB), (30, 42, 3)).copy()
    picture = encode_picture(image, preset="ultrafast")
    data = tf.constant([to_annexb(picture.sample, picture.hvcc)] * 3)
    m = np.stack([resize_matrix((30, 42), (60, 84)), resize_matrix((30, 42), (45, 63)), np.eye(3, dtype=F)])
    for antialias in (False, True):
        got = decode_warp(data, m, (60, 84), oob_color=-1, antialias=antialias).numpy()
        assert_constant(got[:2, :45, :63], "decode_warp")
        assert_constant(got[:1], "decode_warp x2")
        np.testing.assert_allclose(got[0, 0, 0], RGB, atol=3)


# --------------------------------------------------------------------------- layers and as_dataset


@pytest.mark.parametrize("size", [32, 100, 221])
def test_layers_upscaling_a_constant_picture_keep_it_constant(size):
    from bzna_tf import layers

    x = np.full((2, size, size, 3), RGB, np.uint8)
    cases = {
        "CenterResizedCrop": (layers.CenterResizedCrop(224, 224), {}),
        "CenterResizedCrop(224/256)": (layers.CenterResizedCrop(224, 224, scale=224 / 256), {}),
        "RandomResizedCrop training=False": (layers.RandomResizedCrop(224, 224), {"training": False}),
        "RandomResizedCrop training=True": (layers.RandomResizedCrop(224, 224, flip_h=0.5, seed=3), {}),
        "SimilarityTransform": (layers.SimilarityTransform(224, 224, resize=True, flip_v=0.5), {}),
    }
    for name, (layer, kw) in cases.items():
        got = layer(x, **kw).numpy()
        assert_constant(got, f"{name} of a {size} x {size} picture")
        np.testing.assert_array_equal(got[0, 0, 0], RGB)


def test_as_dataset_upscaling_keeps_every_border(flat_shards):
    from conftest import shard_colour, shard_sample

    from bzna_tf import ClassificationDataset

    # Flat pictures of 24 to 63 pixels a side, read larger: every pixel is the picture's colour
    # (to the codec's error), none the fill.
    for shape, warp in ((64, None), (100, None), ((40, 120), "rrc")):
        kw = {} if warp is None else {"warp": __import__("bzna_tf").layers.RandomResizedCrop(*shape)}
        ds = ClassificationDataset(flat_shards).as_dataset(
            batch_size=8, shape=shape, fill_value=-100, seed=1, **kw
        )
        seen = 0
        for images, _ in ds.take(2):
            assert images.shape[1:3] == ((shape, shape) if isinstance(shape, int) else shape)
            images = images.numpy()
            assert not np.any(images == -100), f"fill colour at shape={shape}"
            spread = images.max(axis=(1, 2)) - images.min(axis=(1, 2))
            assert spread.max() <= 4, f"shape={shape}: a picture is not flat: {spread.max()}"
            seen += len(images)
        assert seen == 16
    # And the colour is the picture's own (names say which picture each is).
    ds = ClassificationDataset(flat_shards).as_dataset(batch_size=4, shape=96, shuffle=False, fill_value=-100)
    names = ClassificationDataset(flat_shards).filenames[:4]
    images, _ = next(iter(ds))
    for image, name in zip(images.numpy(), names, strict=True):
        np.testing.assert_allclose(image[0, 0], shard_colour(*shard_sample(name)), atol=3)
        np.testing.assert_allclose(image[-1, -1], shard_colour(*shard_sample(name)), atol=3)
