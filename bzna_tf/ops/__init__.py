"""The native TensorFlow ops: the .bzna source dataset and the fused warp.

The C++ under ``custom_ops/`` is compiled for the installed TensorFlow on first
use (or with ``python -m bzna_tf.ops build``) and cached; see
:mod:`bzna_tf.ops._build`. Importing this module imports TensorFlow but does
not build or load anything.
"""

from bzna_tf.ops._build import BuildError, build, build_gpu, gpu_toolchain_error
from bzna_tf.ops._load import ffmpeg_error, gpu_error, load_gpu_library, load_library
from bzna_tf.ops.checksums import verify_checksums
from bzna_tf.ops.source import (
    BznaDataset,
    SkippedSamples,
    epoch_positions,
    epoch_schedule,
    num_samples,
    read_samples,
)
from bzna_tf.ops.warp import decode_warp, decode_warp_dataset, warp_rgb, warp_yuv420

__all__ = [
    "BuildError",
    "BznaDataset",
    "SkippedSamples",
    "build",
    "build_gpu",
    "decode_warp",
    "decode_warp_dataset",
    "epoch_positions",
    "epoch_schedule",
    "ffmpeg_error",
    "gpu_error",
    "gpu_toolchain_error",
    "load_gpu_library",
    "load_library",
    "num_samples",
    "read_samples",
    "verify_checksums",
    "warp_rgb",
    "warp_yuv420",
]
