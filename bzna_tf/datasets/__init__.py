"""Datasets of .bzna files for ``tf.data`` and Keras: ``Dataset``, ``ClassificationDataset``, ``ImageNet``.

The catalog opens files and chooses samples (in Python, no TensorFlow):
:mod:`.catalog` (``Dataset``: files, shards, splits, selections, sample
lists), :mod:`.classification` (``ClassificationDataset``: labels) and
:mod:`.imagenet` (``ImageNet``: its splits and folder layouts).
``as_dataset`` checks its arguments (:mod:`.arguments`) and builds the
``tf.data`` graph (:mod:`.pipeline`, whose root is :mod:`.epochs`).
"""

from bzna_tf.datasets.arguments import MAX_BATCH_BYTES
from bzna_tf.datasets.catalog import Dataset
from bzna_tf.datasets.classification import ClassificationDataset
from bzna_tf.datasets.epochs import EpochState
from bzna_tf.datasets.imagenet import ImageNet

__all__ = ["MAX_BATCH_BYTES", "ClassificationDataset", "Dataset", "EpochState", "ImageNet"]
