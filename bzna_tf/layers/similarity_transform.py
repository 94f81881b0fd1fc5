"""Keras layer: Benzina's SimilarityTransform (crop, resize, rotate, translate, flip)."""

from __future__ import annotations

import keras

import bzna_tf.transforms as transforms
from bzna_tf.layers._warp_layer import WarpLayer, given_arguments


@keras.saving.register_keras_serializable(package="bzna_tf")
class SimilarityTransform(WarpLayer):
    """Randomly crops, resizes, rotates, translates and flips a batch of images, in one warp.

    Each image gets its own random parameters (SPEC section 5, see
    :class:`bzna_tf.transforms.SimilarityTransform` for the sampling): an area
    fraction in ``scale`` and an aspect ratio in ``ratio`` choose the crop
    (with ``resize``), ``random_crop`` moves it, then an angle in ``degrees``,
    a translation within +-``translate`` of the output size and flips with
    probabilities ``flip_h``/``flip_v``. The image is sampled bilinearly by
    the fused warp op (``bzna_tf.ops.warp_rgb``), averaging a footprint where
    the warp shrinks it (``antialias``); points outside the image get
    ``fill_value``. With the defaults it is a centre crop of the output size.

    Training vs inference: with ``training=True`` (``model.fit``, or a direct
    call) every call draws new parameters from ``seed``. With
    ``training=False`` (``predict``/``evaluate``) the layer is deterministic:
    the area fraction closest to 1, the aspect ratio closest to the image's
    own (fitted in the image), the angle closest to 0, a centred crop, no
    translation, and flips only where their probability is 1.

    Input shape: (N, H, W, 3) or (H, W, 3) (channels first: (N, 3, H, W) or
    (3, H, W)), uint8 or float; the images in a batch share their size, and
    H and W may differ between calls. Shapes and pairs are (height, width).

    Output shape: (N, height, width, 3) (or channels first), float32 (the
    layer's compute dtype), values in the input's range ([0, 255] for uint8),
    not normalised (see :class:`bzna_tf.layers.Normalize`).

    The same object gives ``as_dataset`` its per-sample matrices
    (:meth:`matrices`), where the random parameters of sample ``index`` depend
    on (seed, epoch, index) only and the fused decode-warp op applies them.
    In a model it needs Keras' TensorFlow backend (in ``tf.data``, any
    backend: see :class:`bzna_tf.layers.BackendError`); not XLA-compilable
    (``supports_jit=False``).

    Args:
      height: the output height.
      width: the output width.
      scale: the area fraction range (low, high); a number s means (min(s, 1/s), max(s, 1/s)).
      ratio: the aspect-ratio (width / height) range, or None; a number r means (r, 1/r) sorted.
      degrees: the rotation range in degrees (counter-clockwise on screen); a number d means (-d, d).
      translate: the largest translations as fractions of the output (height, width); a number means
        both.
      flip_h: the probability of a left-right mirror.
      flip_v: the probability of a top-bottom mirror.
      resize: whether the crop is scaled onto the output; forced on when ``scale`` is not (1, 1) or
        ``ratio`` is given.
      keep_ratio: with ``resize``, one scale for both axes (the crop then covers the output), so the
        output is not distorted.
      random_crop: whether the crop's centre is random.
      area_sampling: ``"uniform"`` (default, torchvision's) or ``"log"`` (Benzina's).
      fill_value: the value of output pixels whose source point is outside the image: a number or 3
        (R, G, B). A Normalize layer after this one normalises it; ``as_dataset`` does not (see
        "The fill and normalisation" in the layers guide).
      antialias: where the warp shrinks the image, average each output pixel's footprint instead of
        sampling a point (a triangle filter as wide as the reduction, up to 16x; torchvision's and DALI's
        default; see ``bzna_tf.ops.warp_rgb``). Default True; False is Benzina's point sampling.
      seed: an integer seed; default a random one (recorded in ``get_config``).
      data_format: ``"channels_last"`` or ``"channels_first"``; default Keras' ``image_data_format()``.
      **kwargs: base layer arguments (``name``, ``dtype``).

    Example:

    ```python
    augment = bzna_tf.layers.SimilarityTransform(
        224, 224, scale=(0.5, 1), ratio=(3 / 4, 4 / 3), degrees=10, flip_h=0.5, random_crop=True, seed=1)
    batch = augment(images)  # (N, 224, 224, 3) float32
    ```
    """

    transform_class = transforms.SimilarityTransform

    def __init__(
        self,
        height,
        width,
        scale=(1.0, 1.0),
        ratio=None,
        degrees=0.0,
        translate=0.0,
        flip_h=0.0,
        flip_v=0.0,
        resize=False,
        keep_ratio=False,
        random_crop=False,
        area_sampling="uniform",
        fill_value=0.0,
        antialias=True,
        seed=None,
        data_format=None,
        **kwargs,
    ):
        # Every argument, by name: the signature above is their only list.
        super().__init__(**given_arguments(locals()))
