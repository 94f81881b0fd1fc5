"""Keras layer: CenterResizedCrop (a centred crop resized onto the output; ImageNet evaluation)."""

from __future__ import annotations

import keras

import bzna_tf.transforms as transforms
from bzna_tf.layers._warp_layer import WarpLayer, given_arguments


@keras.saving.register_keras_serializable(package="bzna_tf")
class CenterResizedCrop(WarpLayer):
    """Crops the centre of each image, ``scale`` times its sides, and resizes it onto (height, width).

    With ``keep_ratio`` (the default) both axes get one scale, chosen so the
    crop covers the output: ``CenterResizedCrop(224, 224, scale=224 / 256)``
    is ImageNet's evaluation recipe (resize the short side to 256, keep the
    centre 224 x 224). Without it, the crop is stretched onto the output.

    Training vs inference: the same (the layer is deterministic).

    Input shape: (N, H, W, 3) or (H, W, 3) (channels first: (N, 3, H, W) or
    (3, H, W)), uint8 or float. Shapes are (height, width).

    Output shape: (N, height, width, 3) (or channels first), float32, values
    in the input's range.

    Args:
      height: the output height.
      width: the output width.
      scale: the crop's side as a fraction of the image's side, > 0: up to 1 a crop, above 1 a zoom
        out. Default 1.
      keep_ratio: one scale for both axes (default), so nothing is distorted.
      fill_value: the value of output pixels whose source point is outside the image: a number or 3
        (R, G, B). A Normalize layer after this one normalises it; ``as_dataset`` does not (see
        "The fill and normalisation" in the layers guide).
      antialias: where the warp shrinks the image, average each output pixel's footprint instead of
        sampling a point (a triangle filter as wide as the reduction, up to 16x; torchvision's and DALI's
        default; see ``bzna_tf.ops.warp_rgb``). Default True; False is Benzina's point sampling.
      data_format: ``"channels_last"`` or ``"channels_first"``; default Keras' ``image_data_format()``.
      **kwargs: base layer arguments (``name``, ``dtype``).

    Example:

    ```python
    evaluate = bzna_tf.layers.CenterResizedCrop(224, 224, scale=224 / 256)
    batch = evaluate(images)  # (N, 224, 224, 3) float32
    ```
    """

    transform_class = transforms.CenterResizedCrop

    def __init__(
        self,
        height,
        width,
        scale=1.0,
        keep_ratio=True,
        fill_value=0.0,
        antialias=True,
        data_format=None,
        **kwargs,
    ):
        # Every argument, by name: the signature above is their only list.
        super().__init__(**given_arguments(locals()), random=False)
