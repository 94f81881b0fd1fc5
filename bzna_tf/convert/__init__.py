"""Making .bzna files: the sources (TFRecord, folders, GulpIO, WebDataset, Parquet, TFDS, HF), the converter.

Nothing here imports TensorFlow: TFRecords are read with a small parser of
their framing and of tf.train.Example, so the worker processes start fast.
"""

from bzna_tf.convert.converter import (
    DEFAULT_MAX_IMAGE_BYTES,
    ConversionError,
    ConversionInterrupted,
    ConversionSummary,
    EncodeOptions,
    convert,
    default_workers,
)
from bzna_tf.convert.encode import (
    CHROMA_MODES,
    DEFAULT_CRF,
    DEFAULT_PRESET,
    DEFAULT_QUALITY,
    QUALITY_PRESETS,
    X265_PRESETS,
    coded_size_for,
    encode_image,
    encode_picture,
    quality_options,
    resize_rgb,
    thumbnail_size,
)
from bzna_tf.convert.images import (
    DEFAULT_MAX_PIXELS,
    PICTURE_FACTS,
    ImageDecodeError,
    decode_image,
    decode_picture,
)
from bzna_tf.convert.plan import DEFAULT_SEED, ORDERS, ShardSpec, conversion_order, plan_shards, shard_paths
from bzna_tf.convert.sources import (
    SOURCES,
    GulpSource,
    HFSource,
    ImageFolderSource,
    Item,
    ParquetSource,
    Source,
    SourceError,
    TFDSSource,
    TFRecordSource,
    WebDatasetSource,
)
from bzna_tf.convert.tfrecord import TFRecordError, parse_example

__all__ = [
    "CHROMA_MODES",
    "DEFAULT_CRF",
    "DEFAULT_MAX_IMAGE_BYTES",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_PRESET",
    "DEFAULT_QUALITY",
    "DEFAULT_SEED",
    "ConversionError",
    "ConversionInterrupted",
    "ConversionSummary",
    "EncodeOptions",
    "GulpSource",
    "HFSource",
    "ImageDecodeError",
    "ImageFolderSource",
    "ORDERS",
    "PICTURE_FACTS",
    "ParquetSource",
    "QUALITY_PRESETS",
    "SOURCES",
    "ShardSpec",
    "Item",
    "Source",
    "SourceError",
    "TFRecordError",
    "TFDSSource",
    "TFRecordSource",
    "WebDatasetSource",
    "X265_PRESETS",
    "coded_size_for",
    "conversion_order",
    "convert",
    "decode_image",
    "decode_picture",
    "default_workers",
    "encode_image",
    "encode_picture",
    "parse_example",
    "plan_shards",
    "quality_options",
    "resize_rgb",
    "shard_paths",
    "thumbnail_size",
]
