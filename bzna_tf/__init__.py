"""bzna_tf: Benzina datasets (.bzna) for TensorFlow and Keras.

``ImageNet``, ``ClassificationDataset`` and ``Dataset`` open .bzna files and
build ``tf.data`` pipelines (``as_dataset``); ``SampleList`` reads and writes
LBANN sample lists; ``blend`` mixes datasets by weight; ``preview`` draws a
grid of augmented samples. This module holds the public
surface only; it imports no TensorFlow and never loads the native library.
The TensorFlow parts are submodules, imported on first use:
``bzna_tf.layers`` (Keras layers), ``bzna_tf.callbacks`` (Keras callbacks),
``bzna_tf.transforms`` (the affine math and samplers), ``bzna_tf.ops`` (the
native ops), ``bzna_tf.service`` (tf.data service servers), ``bzna_tf.decode`` and
``bzna_tf.verify`` (checksums and decoding of whole files). Once Keras is
imported too (before or after bzna_tf), the layers are registered with it, so
that ``keras.models.load_model`` finds them in saved models.
"""

import importlib

from bzna_tf._keras_registration import register_layers_with_keras
from bzna_tf.blending import blend
from bzna_tf.datasets import ClassificationDataset, Dataset, EpochState, ImageNet
from bzna_tf.format import (
    IMAGENET_SPLITS,
    LIST_TYPES,
    BznaFile,
    BznaFormatError,
    BznaShards,
    BznaWriter,
    HvcC,
    ImageMp4,
    ListOrderWarning,
    Picture,
    SampleList,
    SampleListError,
    imagenet_split,
    open_bzna,
    to_annexb,
)
from bzna_tf.previews import preview

__version__ = "0.1.0"  # the only place the version is written: pyproject.toml reads it from here
"""The version of the installed bzna_tf."""

register_layers_with_keras()

# Submodules loaded when first touched (TensorFlow's and the converter's), so that `import bzna_tf`
# stays light and `bzna_tf.layers.RandomResizedCrop` and `bzna_tf.convert.convert` work.
_LAZY_SUBMODULES = ("callbacks", "convert", "decode", "layers", "ops", "service", "transforms", "verify")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"bzna_tf.{name}")
    raise AttributeError(f"module 'bzna_tf' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))


__all__ = [
    "IMAGENET_SPLITS",
    "LIST_TYPES",
    "BznaFile",
    "BznaFormatError",
    "BznaShards",
    "BznaWriter",
    "ClassificationDataset",
    "Dataset",
    "EpochState",
    "HvcC",
    "ImageMp4",
    "ImageNet",
    "ListOrderWarning",
    "Picture",
    "SampleList",
    "SampleListError",
    "__version__",
    "blend",
    "imagenet_split",
    "open_bzna",
    "preview",
    "to_annexb",
]
