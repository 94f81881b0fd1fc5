"""Making .bzna files: sources (TFRecord, image folders, GulpIO), H.265 encoding, the parallel converter.

Nothing here imports TensorFlow: TFRecords are read with a small parser of
their framing and of tf.train.Example, so the worker processes start fast.
"""

from bzna_tf.convert.converter import (
    ConversionError,
    ConversionSummary,
    EncodeOptions,
    convert,
    default_workers,
)
from bzna_tf.convert.encode import (
    DEFAULT_CRF,
    DEFAULT_PRESET,
    coded_size_for,
    encode_image,
    encode_picture,
    resize_rgb,
    thumbnail_size,
)
from bzna_tf.convert.images import ImageDecodeError, decode_image
from bzna_tf.convert.sources import GulpSource, ImageFolderSource, Item, SourceError, TFRecordSource
from bzna_tf.convert.tfrecord import TFRecordError, parse_example

__all__ = [
    "DEFAULT_CRF",
    "DEFAULT_PRESET",
    "ConversionError",
    "ConversionSummary",
    "EncodeOptions",
    "GulpSource",
    "ImageDecodeError",
    "ImageFolderSource",
    "Item",
    "SourceError",
    "TFRecordError",
    "TFRecordSource",
    "coded_size_for",
    "convert",
    "decode_image",
    "default_workers",
    "encode_image",
    "encode_picture",
    "parse_example",
    "resize_rgb",
    "thumbnail_size",
]
