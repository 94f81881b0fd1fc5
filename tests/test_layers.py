"""bzna_tf.layers: Keras 3 layers over the warp op and the transforms."""

import inspect
import json
import re
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from bzna_tf import transforms
from bzna_tf.layers import CenterResizedCrop, Normalize, RandomResizedCrop, SimilarityTransform
from bzna_tf.layers._warp_layer import WarpLayer
from bzna_tf.ops.warp import warp_rgb

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


@pytest.fixture
def images():
    """Smooth-ish uint8 photos: 4 of 60 x 80 (height x width)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:60, 0:80]
    base = np.stack([(x * 3) % 256, (y * 4) % 256, (x + y) % 256], axis=-1)
    noise = rng.integers(0, 30, (4, 60, 80, 3))
    return np.clip(base[None] + noise, 0, 255).astype(np.uint8)


def all_layers():
    return [
        SimilarityTransform(
            32,
            48,
            scale=(0.5, 1),
            ratio=(0.8, 1.25),
            degrees=15,
            translate=(0.05, 0.1),
            flip_h=0.5,
            flip_v=0.2,
            random_crop=True,
            area_sampling="log",
            fill_value=7,
            seed=3,
        ),
        RandomResizedCrop(32, 48, flip_h=0.5, seed=4),
        CenterResizedCrop(32, 48, scale=0.875, antialias=False),
        Normalize(mean=MEAN, std=STD),
    ]


# --------------------------------------------------------------------------- what the layers compute


def test_layer_output_is_the_warp_of_its_transform_matrices(images):
    layer = SimilarityTransform(
        32, 48, scale=(0.3, 1), ratio=(0.5, 2), degrees=20, flip_h=0.5, random_crop=True, fill_value=9, seed=1
    )
    params = layer.get_random_transformation(images, training=True, seed=1234)
    out = layer.transform_images(images, params)
    m = transforms.SimilarityTransform(
        scale=(0.3, 1), ratio=(0.5, 2), degrees=20, flip_h=0.5, random_crop=True
    ).matrices([[60, 80]] * 4, (32, 48), seed=1234)
    np.testing.assert_array_equal(params["matrices"].numpy(), m.numpy())
    np.testing.assert_array_equal(
        out.numpy(),
        warp_rgb(images, m, (32, 48), oob_color=9, antialias=True).numpy(),  # the default
    )
    # The layer's own matrices, as as_dataset will ask for them, are the transform's.
    np.testing.assert_array_equal(
        layer.matrices([[60, 80]] * 4, seed=1234, indices=tf.range(4, dtype=tf.int64)).numpy(), m.numpy()
    )


def test_center_resized_crop_is_resize_then_centre_crop(images):
    # 48 x 64, scale 0.75: the 36 x 48 centre onto 18 x 24 = resize to 24 x 32, keep [3:21, 4:28].
    x = images[:, :48, :64]
    for antialias in (True, False):
        ours = CenterResizedCrop(18, 24, scale=0.75, antialias=antialias)(x).numpy()
        ref = tf.image.resize(x.astype(np.float32), (24, 32), method="bilinear", antialias=antialias).numpy()
        ref = ref[:, 3:21, 4:28]
        assert np.abs(ours - ref).max() <= 0.5 + 1e-3  # ours is rounded to integers, as uint8 input is


def test_random_resized_crop_at_inference_is_a_plain_resize(images):
    x = images[:, :45, :60]  # aspect 4/3: inside the default ratio range, so the whole image
    layer = RandomResizedCrop(20, 30, flip_h=0.5, seed=2)
    ours = layer(x, training=False).numpy()
    ref = tf.image.resize(x.astype(np.float32), (20, 30), method="bilinear", antialias=True).numpy()
    assert np.abs(ours - ref).max() <= 0.5 + 1e-3
    np.testing.assert_array_equal(layer(x, training=False).numpy(), ours)


def test_out_of_bounds_pixels_get_fill_value(images):
    # Rotating the whole image by 45 degrees leaves the corners outside it.
    layer = SimilarityTransform(60, 80, degrees=(45, 45), resize=True, fill_value=123, seed=0)
    out = layer(images, training=True).numpy()
    np.testing.assert_array_equal(out[:, 0, 0], np.full((4, 3), 123.0))
    np.testing.assert_array_equal(out[:, -1, -1], np.full((4, 3), 123.0))
    # Or one value per channel (R, G, B), saved in the config as a list.
    layer = SimilarityTransform(
        60, 80, degrees=(45, 45), resize=True, fill_value=np.array([1, 2.5, 3]), seed=0
    )
    np.testing.assert_array_equal(layer(images, training=True).numpy()[:, 0, 0], np.tile([1, 2.5, 3], (4, 1)))
    config = layer.get_config()
    assert config["fill_value"] == [1, 2.5, 3] and json.dumps(config)
    assert SimilarityTransform.from_config(config).fill_value == [1, 2.5, 3]


def test_training_draws_new_parameters_inference_does_not(images):
    layer = RandomResizedCrop(32, 48, flip_h=0.5, seed=5)
    a, b = layer(images, training=True).numpy(), layer(images, training=True).numpy()
    assert not np.array_equal(a, b)
    # Images of one batch get different crops.
    assert not np.array_equal(a[0], a[1])
    c, d = layer(images, training=False).numpy(), layer(images, training=False).numpy()
    np.testing.assert_array_equal(c, d)
    # Same seed, same sequence of crops.
    twin = RandomResizedCrop(32, 48, flip_h=0.5, seed=5)
    np.testing.assert_array_equal(twin(images, training=True).numpy(), a)
    np.testing.assert_array_equal(twin(images, training=True).numpy(), b)


def test_non_square_output_shapes_and_layouts(images):
    layer = SimilarityTransform(32, 48, scale=(0.5, 1), seed=8)
    out = layer(images)
    assert out.shape == (4, 32, 48, 3) and out.dtype == tf.float32
    assert layer.compute_output_shape((None, None, None, 3)) == (None, 32, 48, 3)
    assert layer(images[0]).shape == (32, 48, 3)
    first = SimilarityTransform(32, 48, scale=(0.5, 1), seed=8, data_format="channels_first")
    out_cf = first(np.transpose(images, (0, 3, 1, 2)))
    assert out_cf.shape == (4, 3, 32, 48)
    assert first.compute_output_shape((None, 3, None, None)) == (None, 3, 32, 48)
    np.testing.assert_array_equal(np.transpose(out_cf.numpy(), (0, 2, 3, 1)), out.numpy())


def test_input_dtypes(images):
    layer = CenterResizedCrop(30, 40)
    from_uint8 = layer(images).numpy()
    # float32 images are interpolated without rounding: within half a grey level.
    assert np.abs(layer(images.astype(np.float32)).numpy() - from_uint8).max() <= 0.5 + 1e-3
    assert np.abs(layer(images.astype(np.float64)).numpy() - from_uint8).max() <= 0.5 + 1e-3
    assert np.abs(layer(images.astype(np.int32)).numpy() - from_uint8).max() <= 0.5 + 1e-3
    half = CenterResizedCrop(30, 40, dtype="float16")(images)
    assert half.dtype == tf.float16


# --------------------------------------------------------------------------- Keras plumbing


@pytest.mark.parametrize("layer", all_layers(), ids=lambda layer: type(layer).__name__)
def test_config_round_trip(layer):
    config = layer.get_config()
    json.dumps(config)
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == f"bzna_tf>{type(layer).__name__}"
    assert type(keras.saving.deserialize_keras_object(serialized)) is type(layer)


WARP_LAYERS = [SimilarityTransform, RandomResizedCrop, CenterResizedCrop]


@pytest.mark.parametrize("layer_class", WARP_LAYERS, ids=lambda c: c.__name__)
def test_a_warp_layer_spells_out_its_transforms_parameters_and_returns_them_in_its_config(layer_class):
    """The transform's signature is the one list of its parameters: the layer's must agree with it."""
    layer_parameters = list(inspect.signature(layer_class).parameters.values())
    transform_parameters = list(inspect.signature(layer_class.transform_class).parameters.values())
    # (height, width), the transform's parameters (same names, order, defaults), the warp's, **kwargs.
    assert [p.name for p in layer_parameters[:2]] == ["height", "width"]
    ours = layer_parameters[2 : 2 + len(transform_parameters)]
    assert [(p.name, p.default) for p in ours] == [(p.name, p.default) for p in transform_parameters]
    own = layer_parameters[2 + len(transform_parameters) : -1]
    if layer_class is CenterResizedCrop:  # deterministic: no seed
        assert [p.name for p in own] == ["fill_value", "antialias", "data_format"]
    else:
        assert [p.name for p in own] == ["fill_value", "antialias", "seed", "data_format"]
    warp = inspect.signature(WarpLayer).parameters
    assert [p.default for p in own] == [warp[p.name].default for p in own]
    assert layer_parameters[-1].kind is inspect.Parameter.VAR_KEYWORD
    # Every argument under its own name in get_config (CenterResizedCrop's has seed too, always None).
    config = layer_class(10, 12).get_config()
    arguments = {p.name for p in layer_parameters[:-1]}
    assert set(config) - {"name", "trainable", "dtype"} == arguments | {"seed"}
    # ...and described in the layer's docstring, which the transform's points to.
    documented = set(re.findall(r"^ {2}(\w+):", inspect.cleandoc(layer_class.__doc__), re.M))  # any Python
    assert arguments <= documented, arguments - documented
    assert f"bzna_tf.layers.{layer_class.__name__}`" in layer_class.transform_class.__doc__


# The configs of all_layers()'s warp layers as the layers wrote them into .keras files before they took
# their parameter lists from their transforms (commit 7a15c8e), JSON as loaded.
_SHARED = {
    "trainable": True,
    "dtype": {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": "float32"},
        "registered_name": None,
    },
    "height": 32,
    "width": 48,
}
OLD_CONFIGS = {
    SimilarityTransform: {
        "name": "similarity_transform_1", **_SHARED, "fill_value": 7, "antialias": True, "seed": 3,
        "data_format": "channels_last", "scale": [0.5, 1], "ratio": [0.8, 1.25], "degrees": 15,
        "translate": [0.05, 0.1], "flip_h": 0.5, "flip_v": 0.2, "resize": False, "keep_ratio": False,
        "random_crop": True, "area_sampling": "log",
    },
    RandomResizedCrop: {
        "name": "random_resized_crop_1", **_SHARED, "fill_value": 0.0, "antialias": True, "seed": 4,
        "data_format": "channels_last", "scale": [0.08, 1.0], "ratio": [0.75, 1.3333333333333333],
        "degrees": 0.0, "translate": 0.0, "flip_h": 0.5, "flip_v": 0.0, "area_sampling": "uniform",
    },
    CenterResizedCrop: {
        "name": "center_resized_crop_1", **_SHARED, "fill_value": 0.0, "antialias": False, "seed": None,
        "data_format": "channels_last", "scale": 0.875, "keep_ratio": True,
    },
}  # fmt: skip


@pytest.mark.parametrize("made", all_layers()[:3], ids=lambda layer: type(layer).__name__)
def test_configs_saved_by_earlier_versions_still_load(made, images):
    old = OLD_CONFIGS[type(made)]
    serialized = {
        "module": type(made).__module__,
        "class_name": type(made).__name__,
        "config": old,
        "registered_name": f"bzna_tf>{type(made).__name__}",
    }
    loaded = keras.saving.deserialize_keras_object(serialized)  # what load_model does with each layer
    assert type(loaded) is type(made)
    assert loaded.get_config() == old
    assert json.loads(json.dumps(made.get_config())) == {**old, "name": made.name}
    for training in (True, False):
        np.testing.assert_array_equal(
            loaded(images, training=training).numpy(), made(images, training=training).numpy()
        )


def test_saved_model_reloads_with_identical_outputs(images, tmp_path):
    def build():
        return keras.Sequential(
            [keras.Input((None, None, 3), dtype="uint8"), *all_layers()[:2], all_layers()[3]]
        )

    model = build()
    path = tmp_path / "augment.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for training in (True, False):
        np.testing.assert_array_equal(
            loaded(images, training=training).numpy(), model(images, training=training).numpy()
        )
    # A model built again from the same seeds agrees too.
    np.testing.assert_array_equal(
        build()(images, training=True).numpy(), keras.models.load_model(path)(images, training=True).numpy()
    )


_LOAD = """
import sys
{imports}
model = keras.models.load_model(sys.argv[1])
print(*sorted(type(layer).__name__ for layer in model.layers))
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import keras\nimport bzna_tf",
        "import bzna_tf\nimport keras",
        "import bzna_tf\nfrom tensorflow import keras",
        # bzna_tf's own module imports TensorFlow (and Keras): the layers wait for it to finish.
        "import bzna_tf\nimport bzna_tf.ops\nimport keras",
        "import bzna_tf\nfrom bzna_tf.ops import decode_warp\nimport keras",
    ],
    ids=[
        "keras-then-bzna_tf",
        "bzna_tf-then-keras",
        "bzna_tf-then-tf.keras",
        "bzna_tf.ops-first",
        "from-ops",
    ],
)
def test_a_fresh_process_that_imports_bzna_tf_loads_the_layers(tmp_path, imports):
    """``import bzna_tf`` (not bzna_tf.layers), before or after Keras, is enough for load_model."""
    import subprocess
    import sys

    path = tmp_path / "augment.keras"
    keras.Sequential([keras.Input((None, None, 3), dtype="uint8"), *all_layers()[:2], all_layers()[3]]).save(
        path
    )
    run = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", _LOAD.format(imports=imports), str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "could not register" not in run.stderr
    assert run.stdout.split() == ["Normalize", "RandomResizedCrop", "SimilarityTransform"]


def test_a_fresh_process_without_bzna_tf_cannot_load_the_layers(tmp_path):
    """The control of the test above: Keras imports no module outside Keras, so without ``import bzna_tf``
    load_model cannot find the layers (the docs say to import it)."""
    import subprocess
    import sys

    path = tmp_path / "augment.keras"
    keras.Sequential([keras.Input((None, None, 3), dtype="uint8"), all_layers()[0]]).save(path)
    run = subprocess.run(
        [sys.executable, "-c", _LOAD.format(imports="import keras"), str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "Could not locate class 'SimilarityTransform'" in run.stderr


def test_layers_in_tf_data_map(images):
    layer = RandomResizedCrop(32, 48, flip_h=0.5, seed=6)
    normalize = Normalize(mean=MEAN, std=STD)
    ds = tf.data.Dataset.from_tensor_slices(images).batch(2).map(lambda x: normalize(layer(x)))
    assert ds.element_spec.shape.as_list() == [None, 32, 48, 3]
    first, second = [np.concatenate(list(ds.as_numpy_iterator())) for _ in range(2)]
    assert first.shape == (4, 32, 48, 3) and np.isfinite(first).all()
    assert not np.array_equal(first, second)  # a new epoch, new crops
    # Unbatched elements of different sizes.
    ragged = tf.data.Dataset.from_generator(
        lambda: (images[0, : 30 + 10 * i, : 40 + 5 * i] for i in range(3)),
        output_signature=tf.TensorSpec((None, None, 3), tf.uint8),
    ).map(lambda x: CenterResizedCrop(16, 16)(x))
    assert [e.shape for e in ragged.as_numpy_iterator()] == [(16, 16, 3)] * 3


def test_model_fit_with_augmentation_layers(images):
    labels = np.array([0, 1, 0, 1])
    model = keras.Sequential(
        [
            keras.Input((None, None, 3), dtype="uint8"),
            RandomResizedCrop(24, 24, scale=(0.5, 1), flip_h=0.5, seed=1),
            Normalize(mean=MEAN, std=STD),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(2)
    history = model.fit(ds, epochs=2, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"]).all()
    assert np.isfinite(model.evaluate(ds, verbose=0))
    assert model.predict(ds, verbose=0).shape == (4, 2)


# --------------------------------------------------------------------------- Normalize


def test_normalize_mean_std_and_bias_norm(images):
    x = images.astype(np.float32)
    want = (x / 255 - np.asarray(MEAN)) / np.asarray(STD)
    np.testing.assert_allclose(Normalize(mean=MEAN, std=STD)(images).numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Normalize(bias=10, norm=(1, 2, 3))(x).numpy(), (x - 10) * [1, 2, 3])
    cf = Normalize(mean=MEAN, std=STD, data_format="channels_first")(np.transpose(images, (0, 3, 1, 2)))
    np.testing.assert_allclose(np.transpose(cf.numpy(), (0, 2, 3, 1)), want, rtol=1e-5, atol=1e-5)
    assert Normalize().compute_output_shape((None, 5, 6, 3)) == (None, 5, 6, 3)


def test_normalize_errors():
    with pytest.raises(ValueError, match="not both"):
        Normalize(mean=MEAN, bias=1)
    with pytest.raises(ValueError, match="positive `std`"):
        Normalize(std=0)
    with pytest.raises(TypeError, match="saved in the config"):
        Normalize(mean=tf.constant(MEAN))
    with pytest.raises(ValueError, match="data_format"):
        Normalize(data_format="NHWC")


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_normalize_takes_three_channels_only(images, data_format):
    # Three per-channel values used to broadcast a 1-channel image to 3 channels (the output then
    # disagreed with compute_output_shape), and 4 channels gave TensorFlow's "Incompatible shapes".
    layer = Normalize(mean=0.5, std=0.25, data_format=data_format)
    axis = 1 if data_format == "channels_first" else 3
    rgb = images if axis == 3 else tf.transpose(images, [0, 3, 1, 2])
    assert layer(rgb).shape == rgb.shape
    for channels in (1, 4):
        wrong = tf.repeat(rgb[:, :1] if axis == 1 else rgb[..., :1], channels, axis=axis)
        with pytest.raises(ValueError, match=rf"Expected RGB images \(3 channels\) in {data_format} layout"):
            layer(wrong)
        with pytest.raises(ValueError, match="3 channels"):
            layer.compute_output_shape(wrong.shape)
        # Channels known only when it runs: checked then.
        unknown = [None] * 4
        run = tf.function(layer.call, input_signature=[tf.TensorSpec(unknown, wrong.dtype)])
        with pytest.raises(tf.errors.InvalidArgumentError, match="Normalize: expected RGB images"):
            run(wrong)
        np.testing.assert_array_equal(run(rgb).numpy(), layer(rgb).numpy())


def test_numpy_numbers_are_taken_as_keras_layers_take_them(images):
    layer = RandomResizedCrop(np.int64(8), np.int32(6), fill_value=np.float32(1.0), seed=2)
    config = layer.get_config()
    assert (config["height"], config["width"], config["fill_value"]) == (8, 6, 1.0)
    json.dumps(config)  # Python numbers: the config is JSON
    assert layer(images).shape == (images.shape[0], 8, 6, 3)
    with pytest.raises(ValueError, match="height"):
        RandomResizedCrop(np.True_, 8)


def test_numpy_arrays_for_the_ranges_are_saved_as_json_numbers_and_load_back(images, tmp_path):
    layers = [
        RandomResizedCrop(8, 8, scale=np.array([0.5, 1.0]), ratio=np.array([0.75, 1.33]), seed=1),
        RandomResizedCrop(8, 8, degrees=np.array([-10.0, 10.0]), flip_h=np.float32(0.5), seed=1),
        SimilarityTransform(8, 8, translate=np.array([0.1, 0.2]), scale=(np.float64(0.5), 1), seed=1),
    ]
    for layer in layers:
        json.dumps(layer.get_config())
        model = keras.Sequential([keras.Input((None, None, 3), dtype="uint8"), layer])
        model.save(tmp_path / "m.keras")
        loaded = keras.models.load_model(tmp_path / "m.keras")
        np.testing.assert_array_equal(loaded(images, training=False), model(images, training=False))


def test_a_saved_model_loads_in_a_process_that_loaded_the_ops(images, tmp_path):
    """model.export holds bzna_tf's ops: bzna_tf.ops.load_library() registers them (layers.md says so)."""
    import subprocess
    import sys

    model = keras.Sequential([keras.Input((None, None, 3), dtype="uint8"), CenterResizedCrop(16, 16)])
    model.export(tmp_path / "exported", verbose=False)
    want = model(images, training=False).numpy()
    np.save(tmp_path / "images.npy", np.asarray(images))
    script = (
        "import sys, numpy as np, tensorflow as tf, bzna_tf\n"
        "try:\n"
        "    tf.saved_model.load(sys.argv[1])\n"
        "except Exception as e:\n"
        "    print('without:', type(e).__name__, 'BznaWarpRgb' in str(e))\n"
        "bzna_tf.ops.load_library()\n"
        "out = tf.saved_model.load(sys.argv[1]).serve(tf.constant(np.load(sys.argv[2])))\n"
        "np.save(sys.argv[3], out.numpy())\n"
    )
    args = [str(tmp_path / "exported"), str(tmp_path / "images.npy"), str(tmp_path / "out.npy")]
    run = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["without:", "RuntimeError", "True"], run.stdout  # not registered
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want)


def test_warp_layers_take_keras_dict_input_and_pass_labels_through(images):
    # Keras 3's image preprocessing layers take {"images": x, "labels": y} and return the dict.
    labels = tf.range(images.shape[0])
    for layer in (RandomResizedCrop(8, 6, seed=2), CenterResizedCrop(8, 6)):
        out = layer({"images": images, "labels": labels}, training=False)
        assert sorted(out) == ["images", "labels"] and out["labels"] is labels
        np.testing.assert_array_equal(out["images"].numpy(), layer(images, training=False).numpy())
        shapes = layer.compute_output_shape({"images": (None, 20, 30, 3), "labels": (None,)})
        assert shapes == {"images": (None, 8, 6, 3), "labels": (None,)}
    ds = tf.data.Dataset.from_tensor_slices({"images": images, "labels": labels}).batch(2)
    crop = RandomResizedCrop(8, 6, seed=1)
    batch = next(iter(ds.map(lambda d: crop(d))))
    assert batch["images"].shape == (2, 8, 6, 3) and batch["labels"].numpy().tolist() == [0, 1]
    boxes = {"boxes": tf.zeros((images.shape[0], 1, 4)), "labels": tf.zeros((images.shape[0], 1))}
    with pytest.raises(ValueError, match=r"do not warp \['bounding_boxes'\]"):
        CenterResizedCrop(8, 6)({"images": images, "bounding_boxes": boxes})  # not passed unchanged
    with pytest.raises(ValueError, match="Expected a dict with 'images'"):
        CenterResizedCrop(8, 6)({"labels": labels})


def test_an_export_with_training_false_serves_the_inference_graph(images, tmp_path):
    """layers.md: model.export would serve random crops (Keras calls the model without `training`, and the
    random layers default to True, like Keras' RandomFlip); an ExportArchive endpoint with training=False
    serves what predict gives."""
    inputs = keras.Input((None, None, 3), dtype="uint8")
    model = keras.Model(inputs, RandomResizedCrop(12, 10, flip_h=0.5, seed=3)(inputs))
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        name="serve",
        fn=lambda x: model(x, training=False),
        input_signature=[keras.InputSpec(shape=(None, None, None, 3), dtype="uint8")],
    )
    archive.write_out(str(tmp_path / "served"))
    serve = tf.saved_model.load(str(tmp_path / "served")).serve
    want = model.predict(np.asarray(images), verbose=0)
    for _ in range(2):
        np.testing.assert_array_equal(serve(tf.constant(images)).numpy(), want)
    assert not np.array_equal(model(images, training=True).numpy(), want)  # the training graph crops


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: RandomResizedCrop(0, 10), "height"),
        (lambda: RandomResizedCrop(10, 2.5), "width"),
        (lambda: RandomResizedCrop(10, 10, data_format="NCHW"), "data_format"),
        (lambda: RandomResizedCrop(10, 10, scale=(1, 0.5)), "scale"),
        (lambda: SimilarityTransform(10, 10, fill_value="black"), "fill_value"),
        (lambda: SimilarityTransform(10, 10, fill_value=(1, 2)), r"a number or 3 numbers \(R, G, B\)"),
        (lambda: SimilarityTransform(10, 10, fill_value=(1, 2, True)), "fill_value"),
        (lambda: CenterResizedCrop(10, 10, scale=0), "scale"),
        (lambda: CenterResizedCrop(10, 10, antialias="yes"), "antialias"),
    ],
)
def test_layer_argument_errors(make, fragment):
    with pytest.raises(ValueError, match=fragment):
        make()


def test_layer_input_errors(images):
    layer = CenterResizedCrop(8, 8)
    with pytest.raises(ValueError, match="3 channels"):
        layer(images[..., :1])
    with pytest.raises(ValueError, match="rank-3 or rank-4|shape"):
        layer(images[0, :, :, 0])


def test_layers_reachable_from_the_package_without_a_heavy_import():
    import subprocess
    import sys

    code = (
        "import sys, bzna_tf; light = 'tensorflow' not in sys.modules; "
        "layer = bzna_tf.layers.RandomResizedCrop(8, 8, seed=1); "
        "print(light, type(bzna_tf.transforms.CenterResizedCrop()).__name__, 'layers' in dir(bzna_tf))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["True", "CenterResizedCrop", "True"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = __import__("bzna_tf").nope


def test_legacy_keras_tensors_are_refused_by_name(monkeypatch):
    # With TF_USE_LEGACY_KERAS=1, tf.keras is tf_keras (Keras 2): its Input tensors dissolved bzna_tf's
    # layers into its op layers, or failed on an int64/int32 stack deep inside. The layers now say what
    # is wrong. (tf_keras is not a test dependency: its classes are told apart by their module, as here.)
    monkeypatch.setitem(sys.modules, "tf_keras", types.ModuleType("tf_keras"))
    legacy_tensor = type("KerasTensor", (), {"__module__": "tf_keras.src.engine.keras_tensor"})
    for layer, value in [
        (RandomResizedCrop(8, 8), legacy_tensor()),
        (Normalize(mean=0.5, std=0.25), legacy_tensor()),
        (RandomResizedCrop(8, 8), {"images": legacy_tensor()}),
    ]:
        with pytest.raises(TypeError, match=rf"{type(layer).__name__} is a Keras 3 .* KerasTensor of legacy"):
            layer(value)
    # Plain TensorFlow values and Keras 3's own tensors pass as before, tf_keras imported or not.
    assert RandomResizedCrop(8, 8, seed=1)(np.zeros((1, 12, 12, 3), np.uint8)).shape == (1, 8, 8, 3)
    assert Normalize(mean=0.5, std=0.25)(keras.Input((4, 4, 3))).shape == (None, 4, 4, 3)
