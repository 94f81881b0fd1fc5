"""Convert ImageNet-style TFRecord files to one .bzna file.

    python examples/tfrecord_to_bzna.py 'imagenet/train-*' train.bzna [-j 8]
    python examples/tfrecord_to_bzna.py --demo demo.bzna      # makes a few TFRecords first

The TFRecords hold tf.train.Example records with the classic ImageNet keys:
``image/encoded`` (JPEG bytes), ``image/class/label`` (1..1000 in TensorFlow's
build_imagenet_data.py, hence ``label_offset=-1`` for Benzina's 0..999) and
``image/filename``. The same conversion from the command line:

    bzna-tf convert tfrecord 'imagenet/train-*' train.bzna --label-offset -1
"""

from __future__ import annotations

import argparse
import os
import tempfile

from bzna_tf.convert import TFRecordSource, convert


def make_demo_tfrecords(folder, count=40):
    """A few TFRecords of drawn images in the classic layout (needs TensorFlow)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    path = os.path.join(folder, "demo-00000-of-00001")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            h, w = (int(v) for v in rng.integers(200, 700, 2))
            image = (np.linspace(0, 255, w)[None, :, None] * rng.uniform(0.2, 1, 3)).astype(np.uint8)
            image = np.broadcast_to(image, (h, w, 3))
            features = {
                "image/encoded": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[tf.io.encode_jpeg(image).numpy()])
                ),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1 + i % 10])),
                "image/filename": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[f"demo_{i}.JPEG".encode()])
                ),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return os.path.join(folder, "demo-*")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tfrecords", nargs="?", help="TFRecord files: a glob pattern, quoted")
    p.add_argument("output", help="the .bzna file to write")
    p.add_argument("--demo", action="store_true", help="convert a few generated TFRecords")
    p.add_argument(
        "-j", "--processes", type=int, default=None, help="encoding processes (default: all usable cores)"
    )
    p.add_argument("--num-shards", type=int, default=None, help="write N shards OUTPUT-0000k-of-0000N.bzna")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pattern = make_demo_tfrecords(tmp) if args.demo else args.tfrecords
        if pattern is None:
            p.error("give TFRecord files, or --demo")
        source = TFRecordSource(pattern, label_offset=-1)
        print(f"{len(source)} images in {len(source.paths)} files")
        # Rerunning the same command skips the files it already finished.
        summary = convert(
            source, args.output, workers=args.processes, num_shards=args.num_shards, overwrite=args.overwrite
        )
        print(summary)


# Worker processes are started with "spawn": they import this file again, so
# the work must only start under this guard.
if __name__ == "__main__":
    main()
