"""The .bzna container, in pure Python (NumPy, no TensorFlow).

Reading: :func:`open_bzna` / :class:`BznaFile` / :class:`BznaShards`. Writing:
:class:`BznaWriter` with :class:`Picture`. Per-image mp4s: :class:`ImageMp4`.
LBANN sample lists: :class:`SampleList`. H.265 configuration and Annex-B: :class:`HvcC`, :func:`to_annexb`.

The code cites the format's specification as "SPEC section N": section N of docs/reference/format.md.
"""

from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.hevc import HvcC, NalArray, split_nals, to_annexb
from bzna_tf.format.reader import BznaFile, FileIdentity
from bzna_tf.format.sample import Clap, ImageMp4, Picture, VideoTrack, parse_image_mp4
from bzna_tf.format.samplelist import LIST_TYPES, SampleList, SampleListError
from bzna_tf.format.shards import BznaShards, ListOrderWarning, expand_paths, open_bzna
from bzna_tf.format.splits import IMAGENET_SPLITS, imagenet_split, imagenet_splits, select_split
from bzna_tf.format.tracks import Trak
from bzna_tf.format.writer import BznaWriter

__all__ = [
    "IMAGENET_SPLITS",
    "LIST_TYPES",
    "BznaFile",
    "BznaFormatError",
    "BznaShards",
    "BznaWriter",
    "Clap",
    "FileIdentity",
    "HvcC",
    "ImageMp4",
    "ListOrderWarning",
    "NalArray",
    "Picture",
    "SampleList",
    "SampleListError",
    "Trak",
    "VideoTrack",
    "expand_paths",
    "imagenet_split",
    "imagenet_splits",
    "open_bzna",
    "parse_image_mp4",
    "select_split",
    "split_nals",
    "to_annexb",
]
