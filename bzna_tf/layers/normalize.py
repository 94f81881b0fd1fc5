"""Keras layer: Normalize (per-channel mean/std, or Benzina's bias/norm)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bzna_tf.layers._backend import TensorFlowLayer
from bzna_tf.layers._warp_layer import standardize_data_format
from bzna_tf.transforms.constant import are_numbers, bias_norm


def _as_list(value, arg):
    if value is None:
        return None
    if isinstance(value, (tf.Tensor, tf.Variable)):
        raise TypeError(
            f"Expected `{arg}` as Python or NumPy numbers (it is saved in the config). Received: "
            f"{arg}={value!r}"
        )
    if not are_numbers(value):
        raise TypeError(f"Expected `{arg}` as a number or 3 numbers. Received: {arg}={value!r}")
    return np.asarray(value, dtype=np.float64).tolist()


@keras.saving.register_keras_serializable(package="bzna_tf")
class Normalize(TensorFlowLayer):
    """Normalises RGB images in [0, 255] per channel: ``(x - bias) * norm``.

    Give ``mean`` and ``std`` in [0, 1] units, as torchvision and Keras users
    know them (ImageNet: ``mean=(0.485, 0.456, 0.406)``,
    ``std=(0.229, 0.224, 0.225)``): the layer computes ``bias = 255 * mean``
    and ``norm = 1 / (255 * std)``, so the output is ``(x / 255 - mean) / std``.
    Benzina users may give ``bias`` and ``norm`` directly, in the warp kernel's
    units; note that Benzina's documented ``norm = std * 255`` multiplies where
    it should divide. ``as_dataset(normalize=layer)`` fuses the layer into
    the decode-warp op. ``mean``/``std`` above 1 look like [0, 255] units: a
    ``UserWarning`` says so.

    Training vs inference: the same.

    Input shape: any shape whose channel axis (last, or axis 1 / 0 for
    channels first) has 3 entries, (N, H, W, 3) typically; any real dtype.

    Output shape: the input shape, in the layer's compute dtype (float32).

    Args:
      mean: per-channel mean in [0, 1] units, a number or 3 values; excludes ``bias``/``norm``.
      std: per-channel standard deviation in [0, 1] units; excludes ``bias``/``norm``.
      bias: subtracted, in [0, 255] units; a number or 3 values. Default 0.
      norm: multiplied after the bias; a number or 3 values. Default 1.
      data_format: ``"channels_last"`` or ``"channels_first"``; default Keras' ``image_data_format()``.
      **kwargs: base layer arguments (``name``, ``dtype``).

    Raises:
      ValueError: both mean/std and bias/norm, values that are not 1 or 3 per channel, or a zero std.

    Example:

    ```python
    normalize = bzna_tf.layers.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    ```
    """

    def __init__(self, mean=None, std=None, bias=None, norm=None, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.mean, self.std = _as_list(mean, "mean"), _as_list(std, "std")
        self.bias, self.norm = _as_list(bias, "bias"), _as_list(norm, "norm")
        b, n = bias_norm(self.bias, self.norm, self.mean, self.std)
        self._bias, self._norm = np.asarray(b), np.asarray(n)
        self.data_format = standardize_data_format(data_format)

    def kernel_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """``(bias, norm)``, float32 (3,): the layer as the warp kernel's ``(rgb - bias) * norm``.

        ``as_dataset(normalize=layer)`` fuses these into the decode-warp op.
        """
        return self._bias, self._norm

    def _channel_shape(self, rank):
        return [3] if self.data_format == "channels_last" or rank < 3 else [3, 1, 1]

    def _channel_axis(self, rank):
        return -3 if self.data_format == "channels_first" and rank >= 3 else -1

    def _check_channels(self, shape):
        """Raises ValueError unless the channel axis of ``shape`` has 3 entries (or is unknown).

        Three per-channel values would broadcast a 1-channel image to 3 channels, silently.
        """
        shape = tuple(shape)
        if not shape:
            raise ValueError(f"Expected images with a channel axis of 3 entries. Received: shape={shape}")
        channels = shape[self._channel_axis(len(shape))]
        if channels not in (None, 3):
            raise ValueError(
                f"Expected RGB images (3 channels) in {self.data_format} layout: Normalize has 3 values per "
                f"channel. Received: shape={shape}"
            )

    def call(self, inputs):
        x = tf.cast(inputs, self.compute_dtype)
        self._check_channels(x.shape)
        if x.shape[self._channel_axis(x.shape.rank)] is None:  # known only when it runs
            channels = tf.shape(x)[self._channel_axis(x.shape.rank)]
            message = f"Normalize: expected RGB images (3 channels) in {self.data_format} layout"
            with tf.control_dependencies([tf.debugging.assert_equal(channels, 3, message=message)]):
                x = tf.identity(x)
        shape = self._channel_shape(x.shape.rank)
        bias = tf.reshape(tf.constant(self._bias, self.compute_dtype), shape)
        norm = tf.reshape(tf.constant(self._norm, self.compute_dtype), shape)
        return (x - bias) * norm

    def compute_output_shape(self, input_shape):
        self._check_channels(input_shape)
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mean": self.mean,
                "std": self.std,
                "bias": self.bias,
                "norm": self.norm,
                "data_format": self.data_format,
            }
        )
        return config
