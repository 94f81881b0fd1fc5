"""Keras layer: DecodeWarp, the fused H.265 decode + warp as a model's first layer (the GPU path)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bzna_tf.layers._backend import TensorFlowLayer
from bzna_tf.layers._warp_layer import _fill_value, _positive_int, standardize_data_format
from bzna_tf.layers.normalize import _as_list
from bzna_tf.ops.warp import decode_warp
from bzna_tf.transforms.constant import bias_norm, per_channel

# The inputs, by name: what as_dataset(device="model") yields ("picture_sizes" optional).
INPUTS = ("data", "matrices", "picture_sizes")


@keras.saving.register_keras_serializable(package="bzna_tf")
class DecodeWarp(TensorFlowLayer):
    """Decodes H.265 pictures and warps them, in the model: where the model runs (NVDEC + CUDA on a GPU).

    ``as_dataset(device="model")`` yields ``{"data", "matrices",
    "picture_sizes"}`` batches (the pictures' bytes, each sample's warp matrix,
    reproducible from the seed, computed in ``tf.data`` on the CPU, and each
    picture's (height, width) within its padded frame); this layer turns them
    into images with the fused ``decode_warp`` op. Placed first in a model, it runs on
    the model's device: on a GPU, NVDEC decodes each picture into GPU memory
    and the CUDA warp kernel writes the normalised image there, so no pixel
    crosses the PCIe bus and the CPU only reads bytes. On a CPU it runs the
    CPU kernels (FFmpeg), with identical results to ``device="cpu"``.

    Input: the pictures, their matrices and, optionally, their sizes as
    keywords, Keras' convention for several inputs, ``layer(data=tf.string
    (N,), matrices=float32 (N, 3, 3), picture_sizes=int32 (N, 2))``, or the
    batch's dict as it comes, ``layer({"data": ..., "matrices": ...,
    "picture_sizes": ...})`` (then ``layer(**batch)`` and ``layer(batch)`` are
    the same call). With ``picture_sizes`` the warp's picture is that
    (height, width) at the top-left of the decoded frame: beyond it is
    ``fill_value`` on every side, the frame's padding never read. Without it
    (a dict of ``"data"`` and ``"matrices"`` only) the picture is the whole
    decoded frame, padding included.

    Output: images (N, height, width, 3), or (N, 3, height, width) with
    ``data_format="channels_first"``, in the layer's compute dtype (float32;
    float16 under ``mixed_float16``). The warp itself runs in float32 under
    any dtype policy: the layer does not autocast its inputs (Keras would
    round the matrices, moving every pixel), and only the images are cast.

    Args:
      height, width: the output size (the warp's).
      mean, std: normalisation in [0, 1] units (``(rgb / 255 - mean) / std``); exclude ``bias``/``norm``.
      bias, norm: the kernel's own terms, ``(rgb - bias) * norm`` with rgb in [0, 255].
      fill_value: the raw value of output pixels outside the picture (its ``picture_sizes``, else
        the decoded frame; a number or 3).
      antialias: average each output pixel's footprint where the warp shrinks the picture (default;
        as ``as_dataset(device="cpu")`` does); False samples a point (Benzina's warp).
      data_format: ``"channels_last"`` or ``"channels_first"``; default Keras' ``image_data_format()``.
      **kwargs: base layer arguments (``name``, ``dtype``; ``autocast=True`` is refused).

    Example:

    ```python
    train = ds.as_dataset(batch_size=256, device="model", warp=RandomResizedCrop(224, 224), seed=0)
    inputs = {"data": keras.Input((), dtype="string", name="data"),
              "matrices": keras.Input((3, 3), name="matrices"),
              "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes")}
    x = bzna_tf.layers.DecodeWarp(224, 224, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))(**inputs)
    model = keras.Model(inputs, backbone(x))
    model.fit(train, epochs=90)
    ```
    """

    def __init__(
        self,
        height,
        width,
        mean=None,
        std=None,
        bias=None,
        norm=None,
        fill_value=0.0,
        antialias=True,
        data_format=None,
        **kwargs,
    ):
        # The matrices are geometry: Keras' autocast would round them to a mixed policy's float16 or
        # bfloat16 (a translation of 57.3 to 57.25) and move every pixel. The warp runs in float32 on
        # the inputs as given; only the images are cast to the compute dtype.
        if kwargs.get("autocast", False):
            raise ValueError(
                "DecodeWarp does not autocast its inputs: its matrices stay float32 under any dtype "
                "policy, and its images are cast to the compute dtype. Received: autocast=True"
            )
        super().__init__(**{**kwargs, "autocast": False})
        self.height = _positive_int(height, "height")
        self.width = _positive_int(width, "width")
        self.mean, self.std = _as_list(mean, "mean"), _as_list(std, "std")
        self.bias, self.norm = _as_list(bias, "bias"), _as_list(norm, "norm")
        b, n = bias_norm(self.bias, self.norm, self.mean, self.std)
        self._bias, self._norm = np.asarray(b), np.asarray(n)
        self.fill_value = _fill_value(fill_value)
        self._fill = per_channel(fill_value, "fill_value", finite=False)
        if not isinstance(antialias, bool):
            raise ValueError(f"Expected `antialias` as a bool. Received: antialias={antialias!r}")
        self.antialias = antialias
        self.data_format = standardize_data_format(data_format)
        self.supports_jit = False

    @staticmethod
    def _parts(inputs, data, matrices, picture_sizes):
        """(data, matrices, picture_sizes or None) from the call's arguments (or their shapes, for build)."""
        if inputs is not None:
            if not isinstance(inputs, dict) or any(v is not None for v in (data, matrices, picture_sizes)):
                raise ValueError(
                    "Expected a dict {'data': ..., 'matrices': ..., 'picture_sizes': ... (optional)} or the "
                    f"keywords data=..., matrices=..., picture_sizes=... Received: {inputs!r}"
                )
            unknown = sorted(set(inputs) - set(INPUTS))
            if unknown:
                raise ValueError(
                    f"Expected a dict of {', '.join(repr(k) for k in INPUTS)} (the last optional), as "
                    f"as_dataset(device='model') yields it. Received unknown keys {unknown}"
                )
            data, matrices, picture_sizes = (inputs.get(k) for k in INPUTS)
        if data is None or matrices is None:
            raise ValueError(
                "Expected 'data' (tf.string pictures) and 'matrices' (N, 3, 3), as "
                f"as_dataset(device='model') yields them. Received: data={data!r}, matrices={matrices!r}"
            )
        return data, matrices, picture_sizes

    def call(self, inputs=None, *, data=None, matrices=None, picture_sizes=None):
        data, matrices, picture_sizes = self._parts(inputs, data, matrices, picture_sizes)
        out = decode_warp(
            data,
            tf.cast(matrices, tf.float32),
            (self.height, self.width),
            bias=self._bias,
            norm=self._norm,
            oob_color=self._fill,
            data_format="NCHW" if self.data_format == "channels_first" else "NHWC",
            antialias=self.antialias,
            picture_sizes=None if picture_sizes is None else tf.cast(picture_sizes, tf.int32),
        )
        return out if self.compute_dtype == "float32" else tf.cast(out, self.compute_dtype)

    def build(
        self, inputs_shape=None, data_shape=None, matrices_shape=None, picture_sizes_shape=None, **shapes
    ):
        """Checks the inputs' shapes, which Keras passes as ``<call argument>_shape``.

        Keras' layer tests build a layer called with keywords by passing their
        shapes under the call's own names (``data=``, ``matrices=``,
        ``picture_sizes=``): taken too.
        """
        unknown = set(shapes) - set(INPUTS)
        if unknown:
            raise TypeError(f"DecodeWarp.build() got unexpected arguments {sorted(unknown)}")
        data_shape = shapes.get("data", data_shape)
        matrices_shape = shapes.get("matrices", matrices_shape)
        picture_sizes_shape = shapes.get("picture_sizes", picture_sizes_shape)
        given = (inputs_shape, data_shape, matrices_shape, picture_sizes_shape)
        if any(v is not None for v in given):
            data_shape, matrices_shape, sizes_shape = self._parts(*given)
            d, m = tuple(data_shape), tuple(matrices_shape)
            one_for_all = len(m) == 2
            one_each = len(d) == 1 and len(m) == 3 and (None in (d[0], m[0]) or d[0] == m[0])
            if len(d) > 1 or m[-2:] != (3, 3) or not (one_for_all or one_each):
                raise ValueError(
                    "Expected 'data' of shape (N,) and 'matrices' (N, 3, 3) (or one (3, 3) for all), or () "
                    f"and (3, 3) for one picture. Received: data shape {d}, matrices shape {m}"
                )
            if sizes_shape is not None:
                p = tuple(sizes_shape)
                fits = len(p) == len(d) + 1 and p[-1] == 2
                if not fits or (len(p) == 2 and None not in (d[0], p[0]) and d[0] != p[0]):
                    raise ValueError(
                        "Expected 'picture_sizes' (N, 2), (height, width) per picture of 'data' (N,), "
                        f"or (2,) for one picture. Received: picture_sizes shape {p}, data shape {d}"
                    )
        self.built = True

    def compute_output_shape(self, input_shape):
        # A dict's shapes (one positional input), or the first keyword's: data (N,) or matrices (N, 3, 3).
        if isinstance(input_shape, dict):
            input_shape = input_shape["data"]
        batch = tuple(input_shape)[:1] if len(input_shape) in (1, 3) else ()
        if self.data_format == "channels_first":
            return (*batch, 3, self.height, self.width)
        return (*batch, self.height, self.width, 3)

    def get_config(self):
        config = super().get_config()
        config.update(
            height=self.height,
            width=self.width,
            mean=self.mean,
            std=self.std,
            bias=self.bias,
            norm=self.norm,
            fill_value=self.fill_value,
            antialias=self.antialias,
            data_format=self.data_format,
        )
        return config
