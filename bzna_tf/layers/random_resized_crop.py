"""Keras layer: RandomResizedCrop (a random area and aspect ratio, resized onto the output)."""

from __future__ import annotations

import keras

import bzna_tf.transforms as transforms
from bzna_tf.layers._warp_layer import WarpLayer, given_arguments


@keras.saving.register_keras_serializable(package="bzna_tf")
class RandomResizedCrop(WarpLayer):
    """Crops a random area and aspect ratio of each image and resizes it onto (height, width).

    torchvision's (and Benzina's) RandomResizedCrop: for each image an area
    fraction in ``scale`` and an aspect ratio (width / height) log-uniform in
    ``ratio``, up to 10 tries for a crop that fits in the image, else the
    largest centred crop whose aspect ratio is clamped to ``ratio`` (for that
    image only); the crop is placed uniformly in the image and resized
    bilinearly (antialiased where it shrinks, by default), with optional
    flips, rotation and translation. See
    :class:`bzna_tf.transforms.SimilarityTransform` for the details and
    ``area_sampling``.

    Training vs inference: ``training=True`` draws new crops at every call;
    ``training=False`` takes the whole image (or, if its aspect ratio is
    outside ``ratio``, its largest centred crop with the nearest allowed
    ratio), resized onto the output, without flips (unless a probability is 1)
    or rotation.

    Input shape: (N, H, W, 3) or (H, W, 3) (channels first: (N, 3, H, W) or
    (3, H, W)), uint8 or float. Shapes and pairs are (height, width).

    Output shape: (N, height, width, 3) (or channels first), float32, values
    in the input's range.

    The same object gives ``as_dataset`` its per-sample matrices
    (:meth:`matrices`: a function of (seed, epoch, sample index) only).

    Args:
      height: the output height.
      width: the output width.
      scale: the area fraction range; default (0.08, 1).
      ratio: the aspect-ratio (width / height) range; default (3/4, 4/3).
      degrees: the rotation range in degrees (counter-clockwise on screen); a number d means (-d, d).
        Default 0.
      translate: the largest translations as fractions of the output (height, width). Default 0.
      flip_h: the probability of a left-right mirror (0.5 for the usual ImageNet recipe).
      flip_v: the probability of a top-bottom mirror.
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
    model = keras.Sequential([
        keras.Input((None, None, 3), dtype="uint8"),
        bzna_tf.layers.RandomResizedCrop(224, 224, flip_h=0.5, seed=1),
        bzna_tf.layers.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)),
        ...,
    ])
    ```
    """

    transform_class = transforms.RandomResizedCrop

    def __init__(
        self,
        height,
        width,
        scale=(0.08, 1.0),
        ratio=(3 / 4, 4 / 3),
        degrees=0.0,
        translate=0.0,
        flip_h=0.0,
        flip_v=0.0,
        area_sampling="uniform",
        fill_value=0.0,
        antialias=True,
        seed=None,
        data_format=None,
        **kwargs,
    ):
        # Every argument, by name: the signature above is their only list.
        super().__init__(**given_arguments(locals()))
