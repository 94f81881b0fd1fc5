"""Where images come from: TFRecord files, image folders, GulpIO chunks, WebDataset tar shards,
Parquet files, TFDS folders, Hugging Face datasets.

Every source is a :class:`Source` (see :mod:`bzna_tf.convert.sources.base`
for what one defines, and how to add one): a fixed number of images read by
index, which knows its length (for progress, an ETA and shards) and can
describe itself (so an interrupted conversion is only resumed onto the same
inputs). The converter decides the order and the shards, the same way for
every source. Sources read in the main process; decoding and encoding happen
in the worker processes.
"""

from bzna_tf.convert.sources.base import (
    IMAGE_EXTENSIONS,
    Item,
    Source,
    SourceError,
    expand_patterns,
    read_class_names,
)
from bzna_tf.convert.sources.folder import ImageFolderSource
from bzna_tf.convert.sources.gulp import GulpSource
from bzna_tf.convert.sources.hf import HFSource
from bzna_tf.convert.sources.parquet import ParquetSource
from bzna_tf.convert.sources.tfds import TFDSSource
from bzna_tf.convert.sources.tfrecords import TFRecordSource
from bzna_tf.convert.sources.webdataset import WebDatasetSource

__all__ = [
    "IMAGE_EXTENSIONS",
    "SOURCES",
    "GulpSource",
    "HFSource",
    "ImageFolderSource",
    "Item",
    "ParquetSource",
    "Source",
    "SourceError",
    "TFDSSource",
    "TFRecordSource",
    "WebDatasetSource",
    "expand_patterns",
    "read_class_names",
]

SOURCES = {
    cls.kind: cls
    for cls in (
        TFRecordSource,
        ImageFolderSource,
        GulpSource,
        WebDatasetSource,
        ParquetSource,
        TFDSSource,
        HFSource,
    )
}
"""The sources of ``bzna-tf convert KIND``, by kind, in the order ``--help`` lists them."""
