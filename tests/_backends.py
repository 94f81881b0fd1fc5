"""bzna_tf's layers under the Keras backend that KERAS_BACKEND names (for test_layers_backends.py).

The test process (TensorFlow backend) calls :func:`pipeline_outputs` for the
reference; a child process started with another backend runs this file:

    KERAS_BACKEND=jax python tests/_backends.py OUT PICTURES.bzna

which writes OUT.npz (the same pipelines' outputs, DecodeWarp's on the first
three pictures of PICTURES.bzna among them) and OUT.json (the error
each way of putting a layer in a model raised, and a JAX/torch model's
training losses on a tf.data pipeline of the layers).
"""

import json
import sys

import numpy as np

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def images():
    """4 uint8 images of 60 x 80 (height x width)."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:60, 0:80]
    base = np.stack([(x * 3) % 256, (y * 4) % 256, (x + y) % 256], axis=-1)
    return np.clip(base[None] + rng.integers(0, 30, (4, 60, 80, 3)), 0, 255).astype(np.uint8)


def pictures(path, indices=(1, 9, 11)):
    """(data, matrices): three pictures of a .bzna and a warp matrix for each.

    The default indices pick three of the original-tools fixture.
    """
    import tensorflow as tf

    from bzna_tf.ops import BznaDataset

    data = tf.stack([e["data"] for e in BznaDataset(str(path), list(indices))])
    matrices = np.tile(np.eye(3, dtype=np.float32), (3, 1, 1))
    matrices[:, :2, :2] *= [[[2.0]], [[3.0]], [[1.5]]]
    matrices[:, :2, 2] = [[10, 5], [0, 40], [30, 0]]
    return data, tf.constant(matrices)


def pipeline_outputs(bzna):
    """Every layer in tf.data.Dataset.map, under whichever backend Keras loaded: {name: array}.

    DecodeWarp decodes the first three pictures of the .bzna file ``bzna``.
    """
    import tensorflow as tf

    from bzna_tf.layers import (
        CenterResizedCrop,
        DecodeWarp,
        Normalize,
        RandomResizedCrop,
        SimilarityTransform,
    )

    x = images()
    crop = RandomResizedCrop(24, 32, degrees=10, flip_h=0.5, seed=4)
    similarity = SimilarityTransform(
        24, 32, scale=(0.5, 1), ratio=(0.8, 1.25), flip_v=0.5, random_crop=True, fill_value=7, seed=3
    )
    center = CenterResizedCrop(24, 32, scale=0.875)
    normalize = Normalize(mean=MEAN, std=STD)
    batches = tf.data.Dataset.from_tensor_slices(x).batch(2)
    out = {}
    train = batches.map(lambda b: (normalize(crop(b)), similarity(b, training=True)))
    for epoch in range(2):  # the generators' state moves on: new crops each epoch
        a, b = zip(*train.as_numpy_iterator(), strict=True)
        out[f"crop_normalize_{epoch}"], out[f"similarity_{epoch}"] = np.concatenate(a), np.concatenate(b)
    infer = batches.map(lambda b: (crop(b, training=False), similarity(b, training=False), center(b)))
    for name, parts in zip(
        ("crop_infer", "similarity_infer", "center"), zip(*infer, strict=True), strict=True
    ):
        out[name] = np.concatenate(parts)
    # An explicit training=None (a preprocess(x, training=None) function passing its own on) reaches call
    # as Keras' TensorFlow backend passes it: inference, under every backend.
    out["crop_training_none"] = np.concatenate(list(batches.map(lambda b: crop(b, training=None))))
    # One image at a time, of varying sizes.
    sizes = tf.data.Dataset.from_generator(
        lambda: (x[0, : 30 + 10 * i, : 40 + 5 * i] for i in range(3)),
        output_signature=tf.TensorSpec((None, None, 3), tf.uint8),
    ).map(CenterResizedCrop(16, 16))
    out["center_sizes"] = np.stack(list(sizes.as_numpy_iterator()))
    # Eager TensorFlow values work too.
    out["eager"] = normalize(center(tf.constant(x))).numpy()
    data, matrices = pictures(bzna, (0, 1, 2))
    decode = DecodeWarp(24, 32, mean=MEAN, std=STD)
    payloads = tf.data.Dataset.from_tensor_slices({"data": data, "matrices": matrices}).batch(3)
    out["decode_warp_keywords"] = next(iter(payloads.map(lambda p: decode(**p)))).numpy()
    out["decode_warp_dict"] = next(iter(payloads.map(decode))).numpy()
    return out


def _error(make):
    try:
        make()
    except Exception as e:  # noqa: BLE001 - the test checks which
        return {"type": type(e).__name__, "message": str(e)}
    return None


def model_errors():
    """What each way of putting a layer in a model raises: {case: {"type", "message"} or None}."""
    import keras

    from bzna_tf.layers import CenterResizedCrop, DecodeWarp, Normalize, RandomResizedCrop

    x = images()

    def functional():
        inputs = keras.Input((None, None, 3), dtype="uint8")
        return keras.Model(inputs, Normalize(mean=MEAN, std=STD)(inputs))

    def sequential():  # built on its first call: symbolically too
        model = keras.Sequential([CenterResizedCrop(16, 16), keras.layers.Flatten(), keras.layers.Dense(2)])
        return model.predict(x, verbose=0)

    def decode_warp():
        inputs = {"data": keras.Input((), dtype="string"), "matrices": keras.Input((3, 3))}
        return DecodeWarp(8, 8)(**inputs)

    class Augmented(keras.Model):  # a subclassed model runs call() on the backend's own arrays
        def __init__(self):
            super().__init__()
            self.augment = RandomResizedCrop(16, 16, seed=1)
            self.head = keras.layers.Dense(2)

        def call(self, images):
            return self.head(keras.ops.mean(self.augment(images), axis=(1, 2)))

    cases = {"functional": functional, "sequential": sequential, "decode_warp": decode_warp}
    if keras.backend.backend() in ("jax", "torch"):
        cases["subclassed"] = lambda: Augmented().predict(x.astype("float32"), verbose=0)
    return {name: _error(make) for name, make in cases.items()}


def fit_losses():
    """A small model of the backend trained on a tf.data pipeline of the layers: the losses."""
    import keras
    import tensorflow as tf

    from bzna_tf.layers import Normalize, RandomResizedCrop

    augment = RandomResizedCrop(16, 16, scale=(0.5, 1), flip_h=0.5, seed=1)
    normalize = Normalize(mean=MEAN, std=STD)
    ds = (
        tf.data.Dataset.from_tensor_slices((images(), np.array([0, 1, 0, 1])))
        .batch(2)
        .map(lambda x, y: (normalize(augment(x)), y))
    )
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model.fit(ds, epochs=2, verbose=0).history["loss"]


def main(out, bzna):
    import keras

    report = {"backend": keras.backend.backend(), "errors": model_errors()}
    np.savez(out + ".npz", **pipeline_outputs(bzna))
    if report["backend"] in ("jax", "torch"):
        report["losses"] = [float(v) for v in fit_losses()]
    with open(out + ".json", "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
