"""The picture inside its padded frame: the warp's picture is the track's size, not the coded frame.

The benzina layout codes each picture at the top-left of a frame padded right
and bottom to multiples of 512 (the padding repeats the last column and row).
The picture is ``frame[:height, :width]`` (the track's ``tkhd`` size, the source
op's ``"height"`` / ``"width"``): ``decode_warp(..., picture_sizes=...)``, and
``as_dataset`` and the ``DecodeWarp`` layer through it, warp that picture alone.
Beyond it is the fill colour on every side, and the half-pixel band at its
right and bottom edges clamps to its last column and row, never reading the
padding. ``picture_sizes=None`` keeps the decoded frames' own sizes.

The pictures here come in two kinds: a flat one as the encoder pads it (the
padding looks like the picture) and a "hostile" one whose frame holds another
colour right of and below the picture, so that any read of the padding shows.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from _warp_reference import F, ref_yuv420
from test_warp_edges import per_pixel, resize_matrix

import bzna_tf
from bzna_tf import BznaWriter
from bzna_tf.decode import decode_annexb
from bzna_tf.ops.warp import decode_warp, warp_yuv420

COLOUR = (200, 200, 200)
OTHER = (20, 60, 240)  # the hostile frame's padding
FILL = -100.0


def _picture(image, size=None):
    """``image`` encoded (coded 512 x 512), its track claiming ``size`` = (width, height) if given."""
    from bzna_tf.convert import encode_picture

    picture = encode_picture(image, preset="ultrafast")
    return picture if size is None else dataclasses.replace(picture, size=size)


def _annexb(picture):
    from bzna_tf.format.hevc import to_annexb

    return to_annexb(picture.sample, picture.hvcc)


def hostile(h, w, pad_h=18, pad_w=24):
    """A picture of h x w in COLOUR whose frame holds OTHER right of and below it (a track of w x h)."""
    image = np.broadcast_to(np.uint8(OTHER), (h + pad_h, w + pad_w, 3)).copy()
    image[:h, :w] = COLOUR
    return _picture(image, size=(w, h))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{"flat": a 40 x 30 flat picture, "hostile": the same in a frame of another colour}."""
    root = tmp_path_factory.mktemp("picture_sizes")
    paths = {}
    for name, picture in (
        ("flat", _picture(np.full((30, 40, 3), COLOUR, np.uint8))),
        ("hostile", hostile(30, 40)),
    ):
        paths[name] = str(root / f"{name}.bzna")
        with BznaWriter(paths[name]) as w:
            w.append(picture, target=0, filename=f"{name}.png")
    return paths


# --------------------------------------------------------------------------------------- as_dataset


@pytest.mark.parametrize("kind", ["flat", "hostile"])
@pytest.mark.parametrize("shape", [(30, 80), (70, 80)])
def test_as_dataset_fills_beyond_the_picture_on_every_side(files, kind, shape):
    """The 40 x 30 picture centred at scale 1: its own pixels, and the fill colour all around."""
    ds = bzna_tf.ClassificationDataset(files[kind]).as_dataset(
        batch_size=1, shape=shape, warp=bzna_tf.layers.SimilarityTransform(*shape), fill_value=FILL,
        shuffle=False,
    )  # fmt: skip
    images, _ = next(iter(ds))
    image = images.numpy()[0]
    top, left = (shape[0] - 30) // 2, (shape[1] - 40) // 2
    inside = np.zeros(shape, bool)
    inside[top : top + 30, left : left + 40] = True
    assert np.all(image[~inside] == FILL), f"{kind}: {np.unique(image[~inside], axis=0)[:4].tolist()}"
    assert not np.any(image[inside] == FILL)
    np.testing.assert_allclose(image[inside], np.broadcast_to(F(COLOUR), (inside.sum(), 3)), atol=3)


@pytest.mark.parametrize("antialias", [False, True])
def test_as_dataset_upscaling_never_reads_the_padding(files, antialias):
    """The whole picture onto a larger output (x3, x2.2): flat to its four edges, no fill, no padding."""
    for shape in ((90, 120), (66, 88)):
        ds = bzna_tf.ClassificationDataset(files["hostile"]).as_dataset(
            batch_size=1, shape=shape, warp=bzna_tf.layers.CenterResizedCrop(*shape), fill_value=FILL,
            antialias=antialias,
        )  # fmt: skip
        images, _ = next(iter(ds))
        images = images.numpy()
        assert not np.any(images == FILL)
        # The picture's colour to the codec's error beside the edge it shares with the padding.
        worst = np.abs(images - F(COLOUR)).max(axis=(0, 3))
        assert worst.max() <= 3, (
            f"{shape}: {worst.max()} off at (y, x) {np.unravel_index(worst.argmax(), worst.shape)}"
        )


def test_gpu_payloads_carry_the_picture_sizes(files):
    ds = bzna_tf.ClassificationDataset(files["hostile"]).as_dataset(batch_size=1, shape=16, device="model")
    payload, _ = next(iter(ds))
    assert payload["picture_sizes"].dtype == tf.int32
    np.testing.assert_array_equal(payload["picture_sizes"].numpy(), [[30, 40]])


# --------------------------------------------------------------------------------------- the DecodeWarp layer


def test_decode_warp_layer_bounds_by_the_picture_sizes_it_is_given(files, tmp_path):
    import keras

    shape = (70, 80)
    warp = bzna_tf.layers.SimilarityTransform(*shape)
    d = bzna_tf.ClassificationDataset(files["hostile"])
    images, _ = next(iter(d.as_dataset(batch_size=1, shape=shape, warp=warp, fill_value=FILL)))
    payload, _ = next(iter(d.as_dataset(batch_size=1, shape=shape, warp=warp, device="model")))
    layer = bzna_tf.layers.DecodeWarp(*shape, fill_value=FILL)
    np.testing.assert_array_equal(layer(payload).numpy(), images.numpy())
    np.testing.assert_array_equal(layer(**payload).numpy(), images.numpy())
    # Without picture_sizes: the decoded frame's bounds (the padding shows right of the picture).
    frame = {"data": payload["data"], "matrices": payload["matrices"]}
    got = layer(frame).numpy()
    want = decode_warp(payload["data"], payload["matrices"], shape, oob_color=FILL).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got[0, 35, -1], OTHER, atol=3)
    # A model with the three inputs, saved and loaded.
    inputs = {
        "data": keras.Input((), dtype="string", name="data"),
        "matrices": keras.Input((3, 3), name="matrices"),
        "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes"),
    }
    model = keras.Model(inputs, bzna_tf.layers.DecodeWarp(*shape, fill_value=FILL)(inputs))
    assert model.output_shape == (None, *shape, 3)
    np.testing.assert_array_equal(model(payload).numpy(), images.numpy())
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(again(payload).numpy(), images.numpy())
    with pytest.raises(ValueError, match=r"unknown keys \['picture_size'\]"):
        layer({**frame, "picture_size": payload["picture_sizes"]})


def test_decode_warp_layer_checks_picture_sizes():
    layer = bzna_tf.layers.DecodeWarp(8, 8)
    with pytest.raises(ValueError, match=r"'picture_sizes' \(N, 2\)"):
        layer.build({"data": (4,), "matrices": (4, 3, 3), "picture_sizes": (4, 3)})
    with pytest.raises(ValueError, match=r"'picture_sizes' \(N, 2\)"):
        layer.build({"data": (4,), "matrices": (4, 3, 3), "picture_sizes": (5, 2)})
    layer.build({"data": (None,), "matrices": (None, 3, 3), "picture_sizes": (None, 2)})
    assert layer.compute_output_shape({"data": (4,), "matrices": (4, 3, 3), "picture_sizes": (4, 2)}) == (
        4,
        8,
        8,
        3,
    )


# --------------------------------------------------------------------------------------- decode_warp


@pytest.fixture(scope="module")
def textured():
    """A 61 x 75 noisy picture (odd sides: chroma planes of (h + 1) / 2) in a frame of other noise."""
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (90, 110, 3), dtype=np.uint8)
    picture = _picture(image, size=(75, 61))
    data = _annexb(picture)
    return data, decode_annexb(data)


def cropped(planes, h, w):
    """The planes of the picture h x w at the frame's top-left, with a batch axis."""
    y, cb, cr = planes
    ch, cw = (h + 1) // 2, (w + 1) // 2
    return y[None, :h, :w].copy(), cb[None, :ch, :cw].copy(), cr[None, :ch, :cw].copy()


def matrices(h, w):
    """Axis-aligned maps reaching past every edge of an h x w picture onto a 40 x 50 output."""
    zoom_out = np.array([[1.6 * w / 50, 0, -0.3 * w], [0, 1.6 * h / 40, -0.3 * h], [0, 0, 1]], F)
    return {
        "upscale": resize_matrix((h, w), (3 * h, 3 * w)),  # onto the top-left of the output
        "zoom_out": zoom_out,
        "edge_corner": np.array([[0.2, 0, w - 6], [0, 0.2, h - 5], [0, 0, 1]], F),  # x5 at the bottom right
    }


@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("path", ["rows", "per_pixel"])
def test_decode_warp_with_picture_sizes_is_the_cropped_picture(textured, path, antialias):
    data, planes = textured
    names = ["t.bzna, sample 0"]
    for h, w in ((61, 75), (61, 74), (60, 75), (1, 1), (512, 512)):
        crop = cropped(planes, h, w)
        for name, m in matrices(h, w).items():
            m = per_pixel(m) if path == "per_pixel" else m
            kw = dict(oob_color=(FILL, -2.0, 3.0), antialias=antialias)
            got = decode_warp([data], m, (40, 50), picture_sizes=[[h, w]], names=names, **kw).numpy()
            # Bit for bit the warp of the cropped planes (one code path), and the NumPy reference's.
            np.testing.assert_array_equal(got, warp_yuv420(*crop, m, (40, 50), **kw).numpy(), (h, w, name))
            want = ref_yuv420(*crop, m, (40, 50), oob_color=kw["oob_color"], antialias=antialias)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4, err_msg=f"{(h, w)} {name}")
    # One picture (a scalar) takes one (height, width).
    single = decode_warp(data, np.eye(3), (8, 9), picture_sizes=(5, 6), oob_color=FILL).numpy()
    np.testing.assert_array_equal(
        single, warp_yuv420(*cropped(planes, 5, 6), np.eye(3), (8, 9), oob_color=FILL)[0]
    )


def test_decode_warp_without_picture_sizes_is_the_frame(textured):
    data, (y, cb, cr) = textured
    for name, m in matrices(61, 75).items():
        for antialias in (False, True):
            kw = dict(oob_color=FILL, antialias=antialias)
            got = decode_warp([data], m, (40, 50), **kw).numpy()
            np.testing.assert_array_equal(got, warp_yuv420(y, cb, cr, m, (40, 50), **kw)[None].numpy(), name)
            framed = decode_warp([data], m, (40, 50), picture_sizes=[y.shape], **kw).numpy()
            np.testing.assert_array_equal(got, framed, name)
    # The picture's size changes what lies beyond it: the frame's own pixels, or the fill colour.
    m = matrices(61, 75)["zoom_out"]
    assert not np.array_equal(
        decode_warp([data], m, (40, 50)).numpy(),
        decode_warp([data], m, (40, 50), picture_sizes=[[61, 75]]).numpy(),
    )


def test_decode_warp_picture_sizes_errors(textured):
    data, (y, _, _) = textured
    eye = np.eye(3, dtype=F)
    batch = [data, data, data]
    names = ["t.bzna, sample 4", "t.bzna, sample 5", "t.bzna, sample 6"]
    with pytest.raises(ValueError, match=r"`picture_sizes` of shape \(N, 2\) with N = 3"):
        decode_warp(batch, eye, (4, 4), picture_sizes=[[30, 40]] * 2)
    with pytest.raises(ValueError, match=r"`picture_sizes` of shape \(N, 2\)"):
        decode_warp(batch, eye, (4, 4), picture_sizes=[30, 40, 50])
    with pytest.raises(ValueError, match=r"\(2,\) for one picture"):
        decode_warp(data, eye, (4, 4), picture_sizes=[[30, 40]])
    with pytest.raises(TypeError, match="integer `picture_sizes`"):
        decode_warp(batch, eye, (4, 4), picture_sizes=np.full((3, 2), 30.0))
    # The op's own checks (a graph of unknown shapes): its shape, then each picture's size.
    op = bzna_tf.ops.load_library().bzna_decode_warp
    args = (eye[None], [4, 4], [0.0] * 3, [1.0] * 3, [0.0] * 3, names)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected `picture_sizes` of shape \[3, 2\]"):
        op(batch, *args, tf.zeros([3, 3], tf.int32))
    frame = f"the decoded frame's \\[{y.shape[0]}, {y.shape[1]}\\]"
    for sizes, bad in (
        ([[30, 40], [513, 40], [30, 40]], r"\[513, 40\]"),
        ([[30, 40], [30, 0], [30, 40]], r"\[30, 0\]"),
    ):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=rf"t\.bzna, sample 5: expected a picture size .*{frame}. Received {bad}",
        ):
            decode_warp(batch, eye, (4, 4), names=names, picture_sizes=sizes)
        # With on_error="skip" such a picture is skipped as an undecodable one: fill colour, its reason.
        images, errors = decode_warp(
            batch, eye, (4, 4), names=names, picture_sizes=sizes, on_error="skip", oob_color=(-1, -2, -3)
        )
        errors = errors.numpy()
        assert errors[0] == errors[2] == b"" and errors[1].startswith(
            b"t.bzna, sample 5: expected a picture size"
        )
        np.testing.assert_array_equal(images[1], np.broadcast_to(F([-1, -2, -3]), (4, 4, 3)))
        np.testing.assert_array_equal(images[2], decode_warp(data, eye, (4, 4), picture_sizes=(30, 40)))


def test_unread_samples_fail_to_decode_before_their_sizes_are_checked(textured):
    """What as_dataset(on_error="skip") hands the op for a sample it could not read: b"", sizes 0."""
    data, _ = textured
    images, errors = decode_warp(
        [b"", data], np.eye(3), (4, 4), picture_sizes=[[0, 0], [30, 40]], on_error="skip", oob_color=-1
    )
    errors = errors.numpy()
    assert errors[0].endswith(b"expected an H.265 picture. Received 0 bytes"), errors[0]
    assert errors[1] == b"" and np.all(images[0].numpy() == -1)


def test_the_op_s_shape_function_checks_picture_sizes():
    op = bzna_tf.ops.load_library().bzna_decode_warp

    def trace(data_shape, sizes_shape):
        spec = [tf.TensorSpec(data_shape, tf.string), tf.TensorSpec(sizes_shape, tf.int32)]

        @tf.function(input_signature=spec, autograph=False)
        def f(data, sizes):
            return op(data, tf.zeros([1, 3, 3]), [4, 5], [0.0] * 3, [1.0] * 3, [0.0] * 3, [""][:0], sizes)

        out, errors = f.get_concrete_function().structured_outputs
        return out.shape.as_list(), errors.shape.as_list()

    assert trace([3], [3, 2]) == ([3, 4, 5, 3], [3])
    assert trace([None], [3, 2]) == ([3, 4, 5, 3], [3])  # the batch from picture_sizes
    assert trace([3], [0]) == ([3, 4, 5, 3], [3])
    assert trace([3], None) == ([3, 4, 5, 3], [3])
    for sizes, message in (
        ([4, 2], "Dimensions must be equal, but are 3 and 4"),
        ([3, 3], "Dimension must be 2 but is 3"),
        ([2], "Dimension must be 0 but is 2"),
        ([3, 2, 1], "at most rank 2"),
        ([], "at least rank 1"),
    ):
        with pytest.raises(ValueError, match=message):
            trace([3], sizes)
