"""Benzina's transforms: the affine matrix and the per-sample random warps.

Everything here speaks TensorFlow's (height, width) order and produces
matrices that map OUTPUT pixel indices to SOURCE pixel indices, which the warp
ops (:mod:`bzna_tf.ops`) and the Keras layers (:mod:`bzna_tf.layers`) apply.
Random parameters are a function of (seed, epoch, sample index) only.
"""

from bzna_tf.transforms.affine import compute_affine_matrix, compute_affine_matrix_tf
from bzna_tf.transforms.constant import (
    ConstantBiasTransform,
    ConstantNormTransform,
    ConstantWarpTransform,
    bias_norm,
)
from bzna_tf.transforms.similarity import (
    AREA_SAMPLINGS,
    CenterResizedCrop,
    RandomResizedCrop,
    SimilarityTransform,
    WarpTransform,
)

__all__ = [
    "AREA_SAMPLINGS",
    "CenterResizedCrop",
    "ConstantBiasTransform",
    "ConstantNormTransform",
    "ConstantWarpTransform",
    "RandomResizedCrop",
    "SimilarityTransform",
    "WarpTransform",
    "bias_norm",
    "compute_affine_matrix",
    "compute_affine_matrix_tf",
]
