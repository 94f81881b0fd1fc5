"""Keras 3 preprocessing layers for Benzina's transforms.

``SimilarityTransform``, ``RandomResizedCrop`` and ``CenterResizedCrop`` warp
a batch of images through the fused warp op (one pass: crop, resize, rotate,
flip); ``Normalize`` applies per-channel mean/std. They work in a model and in
``tf.data.Dataset.map``, save to ``.keras`` files, and the warp layers give
``as_dataset`` the per-sample matrices of the fused decode-warp path. Under
a Keras backend other than TensorFlow they work in ``tf.data`` and raise
``BackendError`` in a model.
"""

from bzna_tf.layers._backend import BackendError
from bzna_tf.layers.center_resized_crop import CenterResizedCrop
from bzna_tf.layers.decode_warp import DecodeWarp
from bzna_tf.layers.normalize import Normalize
from bzna_tf.layers.random_resized_crop import RandomResizedCrop
from bzna_tf.layers.similarity_transform import SimilarityTransform

__all__ = [
    "BackendError",
    "CenterResizedCrop",
    "DecodeWarp",
    "Normalize",
    "RandomResizedCrop",
    "SimilarityTransform",
]
