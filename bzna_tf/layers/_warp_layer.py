"""The base of the warp layers: a transform's matrices applied by the warp op."""

from __future__ import annotations

import inspect
import numbers
import random as _random

import keras
import numpy as np
import tensorflow as tf

from bzna_tf.format.keywords import flag
from bzna_tf.layers._backend import TensorFlowLayer
from bzna_tf.ops.warp import MAX_SIDE, warp_rgb

DATA_FORMATS = ("channels_last", "channels_first")


def standardize_data_format(data_format):
    """``data_format``, or Keras' ``image_data_format()`` for None, checked."""
    value = keras.backend.image_data_format() if data_format is None else data_format
    if value not in DATA_FORMATS:
        raise ValueError(f"Expected `data_format` in {DATA_FORMATS}. Received: data_format={data_format!r}")
    return value


def given_arguments(local_variables):
    """A constructor's arguments by name, from ``locals()`` taken on its first line (``**kwargs`` merged).

    How the warp layers hand their arguments to :class:`WarpLayer`: their
    signature is then the only place that lists them.
    """
    arguments = {k: v for k, v in local_variables.items() if k not in ("self", "__class__", "kwargs")}
    return {**arguments, **local_variables.get("kwargs", {})}


def _positive_int(value, arg):
    """``value`` as a Python int (NumPy's integers too, as Keras' layers take them) if it is one > 0 that
    the ops' int32 sizes hold."""
    bad = isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)
    if bad or not 0 < value <= MAX_SIDE:
        raise ValueError(f"Expected `{arg}` as an integer from 1 to {MAX_SIDE}. Received: {arg}={value!r}")
    return int(value)


def _number(value, arg):
    """``value`` as a Python int or float (NumPy's numbers too: the config is JSON), if it is a number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"Expected `{arg}` as a number. Received: {arg}={value!r}")
    return value.item() if isinstance(value, np.generic) else value


def _fill_value(value, arg="fill_value"):
    """A number, or 3 numbers (R, G, B) as a list: Python numbers, as the config is JSON."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    try:
        if not isinstance(value, (list, tuple)):
            return _number(value, arg)
        if len(value) == 3:
            return [_number(v, arg) for v in value]
    except ValueError:
        pass
    raise ValueError(f"Expected `{arg}` as a number or 3 numbers (R, G, B). Received: {arg}={value!r}")


def _image_dict(data: dict) -> dict:
    """Keras 3's dict input of image preprocessing layers, checked: "images", and "labels" passed through.

    Bounding boxes and segmentation masks would need the warp too: they are refused, not passed unchanged.
    """
    other = sorted(set(data) - {"images", "labels"})
    if "images" not in data or other:
        raise ValueError(
            "Expected a dict with 'images' and optionally 'labels' (passed through unchanged); bzna_tf's "
            f"warp layers do not warp {other or 'anything without images'}. Received: keys {sorted(data)}"
        )
    return data


def _plain(value):
    """``value`` with NumPy arrays and numbers as Python lists and numbers (tuples and lists kept)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    return value


class WarpLayer(TensorFlowLayer):
    """Warps a batch of images through a :class:`bzna_tf.transforms.WarpTransform`.

    A subclass names its transform class in ``transform_class`` and spells
    out its constructor: (height, width), then the transform's parameters
    (same names, order and defaults), then this class's keyword arguments,
    then ``**kwargs`` for Keras' base layer; it hands them all on by name
    (:func:`given_arguments`). The transform's signature is thus the one list
    of those parameters: this class builds the transform from the arguments
    of the same names, keeps them as given as attributes, and returns them
    from ``get_config`` (tests/test_layers.py checks that each subclass's
    signature agrees with its transform's).

    The random part of a call is one 62-bit key drawn from the layer's
    ``SeedGenerator``; the transform turns (key, position in the batch) into
    each image's matrix, and ``bzna_tf.ops.warp_rgb`` applies them all in one
    op. A deterministic layer (``random=False``) has no generator, so it
    holds no variable and can be made anywhere, a ``tf.data`` function included.

    Under a backend other than TensorFlow the layer computes in ``tf.data``
    only (see :class:`TensorFlowLayer`), where the backend's ``SeedGenerator``
    cannot go: the keys then come from a ``tf.Variable`` of its own, drawn as
    ``keras.random.randint`` draws them under the TensorFlow backend, so one
    seed gives the same crops whichever backend is loaded.
    """

    transform_class = None
    """The :class:`bzna_tf.transforms.WarpTransform` subclass the layer applies (set by each subclass)."""

    def __init__(
        self,
        height,
        width,
        *,
        random=True,
        fill_value=0.0,
        antialias=True,
        seed=None,
        data_format=None,
        **kwargs,
    ):
        # kwargs: the transform's arguments (named as transform_class's parameters), then Keras' base
        # layer's. (A comment, not a docstring: help() would show it for the subclasses' __init__.)
        random = flag(random, "random")  # "False" would be random
        integral = isinstance(seed, numbers.Integral) and not isinstance(seed, (bool, np.bool_))
        if seed is not None and not integral:
            raise TypeError(f"Expected `seed` as an integer or None. Received: seed={seed!r}")
        transform_arguments = {name: kwargs.pop(name) for name in self.transform_parameters()}
        transform = self.transform_class(**transform_arguments)  # checks them
        # The images reach the warp as given (uint8 or float32, else cast to float32), not first cast to
        # the policy's compute dtype (autocast, unless asked for): under mixed_float16 that rounding and
        # the output's would add up (a picture within 0.125 of float32's, not 0.0625; bfloat16 1.0, not 0.5).
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.transform = transform
        # As given, not as the transform normalised them: get_config returns what the user wrote (NumPy
        # values as Python's, so that a .keras file holds JSON numbers its loading takes back).
        for name, value in transform_arguments.items():
            setattr(self, name, _plain(value))
        self.height = _positive_int(height, "height")
        self.width = _positive_int(width, "width")
        self.fill_value = _fill_value(fill_value)
        if not isinstance(antialias, bool):
            raise ValueError(f"Expected `antialias` as a bool. Received: antialias={antialias!r}")
        self.antialias = antialias
        self.data_format = standardize_data_format(data_format)
        # Like Keras' own layers: without a seed, a random one that get_config records.
        self.seed = seed if seed is not None or not random else _random.randint(1, 2**31 - 1)
        self.generator = keras.random.SeedGenerator(self.seed) if random else None
        self._tf_state = None
        if random and keras.backend.backend() != "tensorflow":
            with tf.init_scope():  # made eagerly, even by a layer made in a tf.data function
                self._tf_state = tf.Variable([self.seed, 0], dtype=tf.int64, trainable=False)
        self.supports_jit = False

    @classmethod
    def transform_parameters(cls):
        """The names of ``transform_class``'s parameters: the layer's arguments after (height, width)."""
        return tuple(inspect.signature(cls.transform_class).parameters)

    # ------------------------------------------------------------------ the per-sample matrices

    def matrices(self, in_shapes, *, seed, epoch=0, indices=None, training=True, backend="tensorflow"):
        """Each sample's output->source matrix onto this layer's (height, width).

        What ``as_dataset`` feeds the fused decode-warp op: sample ``index``'s
        matrix depends on (seed, epoch, index) only. Arguments as for
        :meth:`bzna_tf.transforms.WarpTransform.matrices` (``in_shapes`` as
        (height, width)).

        Returns:
          (N, 3, 3): float32 tensors, or float64 NumPy arrays with ``backend="numpy"``.
        """
        return self.transform.matrices(
            in_shapes,
            (self.height, self.width),
            seed=seed,
            epoch=epoch,
            indices=indices,
            training=training,
            backend=backend,
        )

    def _draw_key(self):
        if self._tf_state is None:
            halves = keras.random.randint((2,), 0, 2**31 - 1, dtype="int32", seed=self.generator)
        else:
            # SeedGenerator's state and step, and the TensorFlow backend's randint on it: the
            # state (seed, counter) is read, then its counter moves on; int64 seeds enter the
            # stateless op modulo 2**31 - 2, as int32.
            state = tf.identity(self._tf_state.read_value())
            with tf.control_dependencies([state]):
                self._tf_state.assign_add(tf.constant([0, 1], tf.int64), read_value=False)
            seed = tf.cast(tf.math.floormod(state, 2**31 - 2), tf.int32)
            halves = tf.random.stateless_uniform((2,), seed, minval=0, maxval=2**31 - 1, dtype=tf.int32)
        halves = tf.cast(halves, tf.int64)
        return halves[0] * 2**31 + halves[1]

    def _checked(self, images):
        """The images as a tensor of rank 3 or 4 with 3 channels, in the layer's layout."""
        images = tf.convert_to_tensor(images)
        if images.shape.rank not in (3, 4):
            raise ValueError(
                "Expected images of shape (N, H, W, C) or (H, W, C) (channels first: (N, C, H, W) or "
                f"(C, H, W)). Received: images.shape={images.shape}"
            )
        channels = images.shape[-3] if self.data_format == "channels_first" else images.shape[-1]
        if channels not in (None, 3):
            raise ValueError(
                f"Expected RGB images (3 channels) in {self.data_format} layout. Received: images.shape="
                f"{images.shape}"
            )
        return images

    def _nhwc(self, images):
        """Checked images, channels last, uint8 or float32: what the warp op takes."""
        images = self._checked(images)
        if self.data_format == "channels_first":
            images = tf.transpose(images, [1, 2, 0] if images.shape.rank == 3 else [0, 2, 3, 1])
        if images.dtype not in (tf.uint8, tf.float32):
            images = tf.cast(images, tf.float32)
        return images

    # ------------------------------------------------------------------ Keras' split: decide, then do

    def get_random_transformation(self, data, training=True, seed=None):
        """The matrices for a batch: ``{"matrices": (N, 3, 3)}`` (N = 1 for one image).

        Args:
          data: the images, or a dict holding them under ``"images"``.
          training: False for the deterministic behaviour.
          seed: an integer key; default a fresh one from the layer's ``SeedGenerator``.
        """
        images = self._checked(data["images"] if isinstance(data, dict) else data)
        shape = tf.shape(images, out_type=tf.int64)
        count = shape[0] if images.shape.rank == 4 else tf.constant(1, tf.int64)
        if training and seed is None and self.generator is not None:
            seed = self._draw_key()
        height_width = shape[-2:] if self.data_format == "channels_first" else shape[-3:-1]
        in_shapes = tf.broadcast_to(height_width, tf.stack([count, 2]))
        return {
            "matrices": self.matrices(
                in_shapes, seed=0 if seed is None else seed, indices=tf.range(count), training=training
            )
        }

    def transform_images(self, images, transformation, training=True):
        images = self._nhwc(images)
        out = warp_rgb(
            images,
            transformation["matrices"],
            (self.height, self.width),
            oob_color=self.fill_value,
            data_format="NCHW" if self.data_format == "channels_first" else "NHWC",
            antialias=self.antialias,
        )
        return out if self.compute_dtype == "float32" else tf.cast(out, self.compute_dtype)

    def call(self, images, training=True):
        if isinstance(images, dict):  # Keras 3's {"images": ..., "labels": ...}: labels pass unchanged
            data = _image_dict(images)
            transformation = self.get_random_transformation(data, training=training)
            warped = self.transform_images(data["images"], transformation, training=training)
            return {**data, "images": warped}
        transformation = self.get_random_transformation(images, training=training)
        return self.transform_images(images, transformation, training=training)

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, dict):
            return {**_image_dict(input_shape), "images": self.compute_output_shape(input_shape["images"])}
        shape = list(input_shape)
        if len(shape) not in (3, 4):
            raise ValueError(f"Expected a rank-3 or rank-4 input shape. Received: input_shape={input_shape}")
        if self.data_format == "channels_first":
            shape[-2], shape[-1] = self.height, self.width
        else:
            shape[-3], shape[-2] = self.height, self.width
        return tuple(shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "height": self.height,
                "width": self.width,
                "fill_value": self.fill_value,
                "antialias": self.antialias,
                "seed": self.seed,
                "data_format": self.data_format,
                **{name: getattr(self, name) for name in self.transform_parameters()},
            }
        )
        return config
