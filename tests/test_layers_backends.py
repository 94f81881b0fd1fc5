"""bzna_tf.layers against Keras' layer test harness, DecodeWarp's calling forms, and Keras backends.

Keras chooses its backend when it is imported, so the JAX (and torch, NumPy)
checks run tests/_backends.py in a child process with KERAS_BACKEND set, and
compare what it computed with what this process (TensorFlow backend) computes.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from _backends import MEAN, STD, images, pictures, pipeline_outputs
from conftest import gradient
from keras.src.testing import TestCase

from bzna_tf.layers import (
    BackendError,
    CenterResizedCrop,
    DecodeWarp,
    Normalize,
    RandomResizedCrop,
    SimilarityTransform,
)
from bzna_tf.ops.warp import decode_warp

HERE = Path(__file__).resolve().parent


@pytest.fixture
def harness():
    """Keras' own layer test case (keras.src.testing.TestCase), outside unittest."""
    case = TestCase()
    case.setUp()
    yield case
    case.doCleanups()


# --------------------------------------------------------------------------- Keras' run_layer_test


WARP_LAYERS = [
    (
        SimilarityTransform,
        dict(height=24, width=32, scale=(0.5, 1), degrees=10, flip_h=0.5, random_crop=True, seed=3),
    ),
    (RandomResizedCrop, dict(height=24, width=32, flip_h=0.5, seed=4)),
    (CenterResizedCrop, dict(height=24, width=32, scale=0.875)),
]


@pytest.mark.parametrize(("cls", "kwargs"), WARP_LAYERS, ids=[cls.__name__ for cls, _ in WARP_LAYERS])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_run_layer_test_warp_layers(harness, cls, kwargs, data_format):
    x = images()
    if data_format == "channels_first":
        x = np.transpose(x, (0, 3, 1, 2))
    random = cls is not CenterResizedCrop
    harness.run_layer_test(
        cls,
        init_kwargs={**kwargs, "data_format": data_format},
        input_data=x,
        expected_output_shape=(4, 24, 32, 3) if data_format == "channels_last" else (4, 3, 24, 32),
        expected_output_dtype="float32",
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
        expected_num_seed_generators=1 if random else 0,
    )


def test_run_layer_test_normalize(harness):
    x = images()
    harness.run_layer_test(
        Normalize,
        init_kwargs=dict(mean=MEAN, std=STD),
        input_data=x,
        expected_output=tf.constant((x / 255 - np.asarray(MEAN)) / np.asarray(STD), tf.float32),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
        expected_num_seed_generators=0,
    )


def test_run_layer_test_decode_warp(harness, original_path):
    data, matrices = pictures(original_path)
    init = dict(height=24, width=32, mean=MEAN, std=STD, fill_value=(1, 2, 3), antialias=False)
    harness.run_layer_test(
        DecodeWarp,
        init_kwargs=init,
        input_data={"data": data, "matrices": matrices},  # called as layer(**input_data)
        expected_output=decode_warp(data, matrices, (24, 32), mean=MEAN, std=STD, oob_color=(1, 2, 3)),
        expected_num_trainable_weights=0,
        expected_num_non_trainable_weights=0,
        expected_num_seed_generators=0,
    )


# --------------------------------------------------------------------------- DecodeWarp's calling forms


def test_decode_warp_keywords_dict_and_model(original_path, tmp_path):
    data, matrices = pictures(original_path)
    layer = DecodeWarp(24, 32, mean=MEAN, std=STD)
    want = decode_warp(data, matrices, (24, 32), mean=MEAN, std=STD, antialias=True).numpy()  # the default
    np.testing.assert_array_equal(layer(data=data, matrices=matrices).numpy(), want)
    np.testing.assert_array_equal(layer({"data": data, "matrices": matrices}).numpy(), want)
    # One picture, and one matrix for every picture.
    np.testing.assert_array_equal(layer(data=data[0], matrices=matrices[0]).numpy(), want[0])
    assert layer(data=data, matrices=tf.eye(3)).shape == (3, 24, 32, 3)
    # A functional model called with keywords, saved and loaded.
    inputs = {
        "data": keras.Input((), dtype="string", name="data"),
        "matrices": keras.Input((3, 3), name="matrices"),
    }
    out = DecodeWarp(24, 32, mean=MEAN, std=STD, data_format="channels_first")(**inputs)
    assert out.shape == (None, 3, 24, 32)
    model = keras.Model(inputs, out)
    np.testing.assert_array_equal(
        model({"data": data, "matrices": matrices}).numpy(), want.transpose(0, 3, 1, 2)
    )
    model.save(tmp_path / "m.keras")
    again = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(
        again({"data": data, "matrices": matrices}).numpy(), want.transpose(0, 3, 1, 2)
    )
    half = DecodeWarp(24, 32, dtype="float16")(data=data, matrices=matrices)
    assert half.dtype == tf.float16


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16", "float16"])
def test_decode_warp_keeps_its_matrices_float32_under_any_policy(original_path, policy):
    # Keras' autocast rounded the matrices to the compute dtype before call(): a translation of 57.3
    # became 57.25 (bfloat16) and pixels moved by up to 10 levels. Only the images are cast.
    data, _ = pictures(original_path)
    m = tf.constant([[0.8734, 0.0, 57.3], [0.0, 0.8734, 21.7], [0.0, 0.0, 1.0]], tf.float32)
    matrices = tf.tile(m[None], [len(data), 1, 1])
    want = decode_warp(data, matrices, (24, 32), antialias=True)
    out = DecodeWarp(24, 32, dtype=policy)(data=data, matrices=matrices)
    compute = keras.DTypePolicy(policy).compute_dtype
    assert out.dtype == compute
    np.testing.assert_array_equal(out.numpy(), tf.cast(want, compute).numpy())
    inputs = {
        "data": keras.Input((), dtype="string", name="data"),
        "matrices": keras.Input((3, 3), name="matrices"),
    }
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = keras.Model(inputs, DecodeWarp(24, 32)(inputs))
    finally:
        keras.config.set_dtype_policy(previous)
    got = model({"data": data, "matrices": matrices})
    np.testing.assert_array_equal(got.numpy(), tf.cast(want, compute).numpy())
    with pytest.raises(ValueError, match="does not autocast"):
        DecodeWarp(24, 32, autocast=True)


def test_decode_warp_argument_errors():
    layer = DecodeWarp(8, 8)
    pics = tf.constant([b"", b""])
    m = tf.zeros([2, 3, 3])
    with pytest.raises(ValueError, match="Expected a dict"):
        layer({"data": pics, "matrices": m}, matrices=m)
    with pytest.raises(ValueError, match="'data' .* and 'matrices'"):
        layer(data=pics)
    with pytest.raises(ValueError, match="'data' .* and 'matrices'"):
        DecodeWarp(8, 8)({"matrices": m})
    with pytest.raises(ValueError, match=r"matrices shape \(2, 3, 4\)"):
        DecodeWarp(8, 8)(data=pics, matrices=tf.zeros([2, 3, 4]))
    with pytest.raises(ValueError, match=r"data shape \(2,\), matrices shape \(3, 3, 3\)"):
        DecodeWarp(8, 8)(data=pics, matrices=tf.zeros([3, 3, 3]))
    with pytest.raises(ValueError, match=r"data shape \(1, 2\)"):
        DecodeWarp(8, 8)(data=tf.reshape(pics, [1, 2]), matrices=m)
    with pytest.raises(TypeError, match="unexpected arguments"):
        DecodeWarp(8, 8).build(images=(2, 8, 8, 3))


# --------------------------------------------------------------------------- other Keras backends


@pytest.fixture(scope="module")
def three_pictures(tmp_path_factory):
    """A .bzna of three pictures, written here: DecodeWarp is compared with no fixture from shared/."""
    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("backends") / "three.bzna"
    with BznaWriter(path) as w:
        for i, (h, width) in enumerate([(96, 128), (300, 700), (620, 200)]):
            inp, thumb = encode_image(gradient(h, width, i), preset="ultrafast")
            w.append(inp, thumb=thumb, target=i, filename=f"{i}.png")
    return path


@pytest.fixture(scope="module")
def reference(three_pictures):
    """The pipelines' outputs under the TensorFlow backend, in this process."""
    assert keras.backend.backend() == "tensorflow", "the reference needs this process on Keras' TF backend"
    want = pipeline_outputs(three_pictures)
    assert {"decode_warp_keywords", "decode_warp_dict"} <= set(want)
    return three_pictures, want


def _child(backend, tmp_path, bzna):
    needs = "jax" if backend == "numpy" else backend  # Keras' NumPy backend imports jax
    if importlib.util.find_spec(needs) is None:
        pytest.skip(
            f"{needs} is not installed, so Keras' {backend} backend is not tested (the test-full extra "
            "installs it; .ci/extras runs this test)"
        )
    out = str(tmp_path / backend)
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, str(HERE / "_backends.py"), out, str(bzna)]
    r = subprocess.run(cmd, env=env, cwd=HERE.parent, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    with open(out + ".json") as f:
        report = json.load(f)
    with np.load(out + ".npz") as z:
        outputs = dict(z)
    return report, outputs


@pytest.mark.parametrize("backend", ["jax", "torch", "numpy"])
def test_layers_under_another_backend(backend, reference, tmp_path):
    bzna, want = reference
    report, got = _child(backend, tmp_path, bzna)
    assert report["backend"] == backend
    # In tf.data the layers compute with TensorFlow: the TF backend's values, random crops included
    # (the same seed draws the same keys), new ones each epoch.
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert not np.array_equal(got["crop_normalize_0"], got["crop_normalize_1"])
    assert not np.array_equal(got["similarity_0"], got["similarity_1"])
    # In a model of that backend: one error, which says what is needed.
    for case, error in report["errors"].items():
        assert error is not None, f"{case}: no error under the {backend} backend"
        assert error["type"] == "BackendError", (case, error)
        assert "needs Keras' TensorFlow backend" in error["message"], (case, error)
        assert "KERAS_BACKEND=tensorflow" in error["message"] and "tf.data" in error["message"]
        assert f"Keras' backend is '{backend}'" in error["message"]
    assert len(report["errors"]) == (4 if backend in ("jax", "torch") else 3)
    if backend in ("jax", "torch"):
        # A model of that backend trains on a tf.data pipeline of the layers.
        losses = report["losses"]
        assert len(losses) == 2 and np.isfinite(losses).all()


def test_backend_error_names_the_layer_and_the_fix(monkeypatch):
    # The check itself, in this process: what it accepts and what it refuses.
    layer = CenterResizedCrop(8, 8)
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    x = images()
    np.testing.assert_array_equal(layer(x).numpy(), CenterResizedCrop(8, 8)(tf.constant(x)).numpy())
    with pytest.raises(
        BackendError,
        match=r"CenterResizedCrop runs TensorFlow ops.*received a value of type "
        r"KerasTensor \(a model being built\)",
    ):
        layer(keras.KerasTensor((None, 60, 80, 3), dtype="uint8"))
    # Keras' automatic build of a subclassed model re-raises a ValueError unchanged (others it wraps in a
    # RuntimeError of its own, which `except BackendError` missed).
    assert issubclass(BackendError, ValueError) and issubclass(BackendError, RuntimeError)
    # A preprocess(x, training) function passing `training` on to every layer: Keras' Layer.__call__
    # drops it for a call that does not take it (Normalize's); under JAX it raised TypeError.
    normalize = Normalize(mean=MEAN, std=STD)
    for training in (None, False, True):
        np.testing.assert_array_equal(normalize(x, training=training).numpy(), normalize(x).numpy())
    np.testing.assert_array_equal(layer(x, training=True).numpy(), layer(x).numpy())


@pytest.mark.parametrize(("policy", "bound"), [("mixed_float16", 0.0625), ("mixed_bfloat16", 0.5)])
def test_warp_layers_round_a_float_picture_once_under_a_mixed_policy(policy, bound):
    # layers.md: a warped float picture in [0, 255] is within 0.0625 (float16) or 0.5 (bfloat16) of the
    # float32 one. Keras cast the images to the compute dtype before the warp as well as after it: 0.089
    # and 0.687 measured. Rounded once (the output's cast), the warp is float32's to the last bit.
    images = (np.random.default_rng(0).random((4, 67, 91, 3)) * 255).astype(np.float32)
    for make in (
        lambda **k: CenterResizedCrop(33, 41, **k),
        lambda **k: RandomResizedCrop(33, 41, seed=3, **k),
    ):
        want = make()(images, training=False).numpy()
        got = make(dtype=policy)(images, training=False)
        compute = keras.DTypePolicy(policy).compute_dtype
        assert got.dtype == compute
        np.testing.assert_array_equal(got.numpy(), tf.cast(want, compute).numpy())
        assert np.abs(got.numpy().astype(np.float32) - want).max() <= bound
