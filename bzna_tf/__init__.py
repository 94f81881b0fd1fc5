"""bzna_tf: Benzina datasets (.bzna) for TensorFlow and Keras.

This module holds the public surface only; it imports no TensorFlow and never
loads the native library.
"""

from bzna_tf.format import (
    IMAGENET_SPLITS,
    BznaFile,
    BznaFormatError,
    BznaShards,
    BznaWriter,
    HvcC,
    ImageMp4,
    Picture,
    imagenet_split,
    open_bzna,
    to_annexb,
)

__version__ = "0.1.0"

__all__ = [
    "IMAGENET_SPLITS",
    "BznaFile",
    "BznaFormatError",
    "BznaShards",
    "BznaWriter",
    "HvcC",
    "ImageMp4",
    "Picture",
    "__version__",
    "imagenet_split",
    "open_bzna",
    "to_annexb",
]
