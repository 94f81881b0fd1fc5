"""The main job: train a Keras CNN with ``model.fit`` on a .bzna dataset through ``as_dataset``.

    python examples/train_keras.py                  # makes its own small dataset first
    python examples/train_keras.py --data my.bzna   # any labelled .bzna (10% held out for validation)
    python examples/train_keras.py --data train.bzna --val-data val.bzna

With no arguments it draws a few hundred labelled pictures of five texture
classes (horizontal stripes, vertical stripes, checkerboards, rings, dots:
random sizes, colours, periods and noise), JPEG-encodes them into TFRecords
with the classic ImageNet keys (``image/encoded``, ``image/class/label``,
``image/filename``), converts those to .bzna with the package's converter,
and trains a small CNN for a few epochs with random resized crops and flips,
decoded and warped by the fused op. The last line printed is
``val_accuracy: X``.

It takes a few minutes: measured, 1 min 45 s of CPU time, 5 to 9 minutes on a 2-core machine shared
with other jobs, about half of it converting; the first use of bzna_tf also builds its native ops
(once, 1 to 6 minutes). The conversions show their progress: a bar on a terminal, plain lines in a
log.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

CLASSES = ("horizontal stripes", "vertical stripes", "checkerboard", "rings", "dots")


def draw(label: int, rng: np.random.Generator) -> np.ndarray:
    """One RGB picture (uint8, random size, 64 to 128 a side) of texture class ``label``."""
    h, w = (int(v) for v in rng.integers(64, 129, 2))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    period = rng.uniform(10, 22)
    phase = rng.uniform(0, 2 * np.pi)
    k = 2 * np.pi / period
    if label == 0:
        wave = np.sin(k * y + phase)
    elif label == 1:
        wave = np.sin(k * x + phase)
    elif label == 2:
        wave = np.sin(k * x + phase) * np.sin(k * y + rng.uniform(0, 2 * np.pi))
    elif label == 3:
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        wave = np.sin(k * np.hypot(y - cy, x - cx) + phase)
    else:
        # A grid of round dots on a plain background.
        dy, dx = (
            (y + rng.uniform(0, period)) % period - period / 2,
            (x + rng.uniform(0, period)) % period - period / 2,
        )
        wave = np.where(np.hypot(dy, dx) < period / 4, 1.0, -1.0)
    mask = (wave > 0).astype(np.float32)[..., None]
    fg, bg = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    while np.abs(fg - bg).sum() < 150:  # keep the two colours apart
        fg, bg = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    image = mask * fg + (1 - mask) * bg + rng.normal(0, 12, (h, w, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def make_tfrecords(path: str, count: int, seed: int) -> None:
    """``count`` drawn pictures, classes in turn, as one TFRecord file of tf.train.Example records."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def feature(value):
        if isinstance(value, bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            label = i % len(CLASSES)
            jpeg = tf.io.encode_jpeg(draw(label, rng), quality=90).numpy()
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "image/encoded": feature(jpeg),
                        # build_imagenet_data.py's convention: labels from 1 (0 is "background").
                        "image/class/label": feature(label + 1),
                        "image/filename": feature(f"{os.path.basename(path)}_{i:05d}.JPEG".encode()),
                    }
                )
            )
            writer.write(example.SerializeToString())


def make_data(
    workdir: str, train_count: int, val_count: int, processes: int | None, layout: str
) -> tuple[str, str]:
    """The demo's train.bzna and val.bzna in ``workdir`` (made once; reused when present)."""
    from bzna_tf.convert import EncodeOptions, TFRecordSource, convert

    paths = []
    for split, count, seed in (("train", train_count, 1), ("val", val_count, 2)):
        bzna = os.path.join(workdir, f"{split}.bzna")
        paths.append(bzna)
        if os.path.exists(bzna):
            print(f"using {bzna}")
            continue
        record = os.path.join(workdir, f"{split}.tfrecord")
        t = time.perf_counter()
        make_tfrecords(record, count, seed)
        print(f"drew {count} {split} pictures into {record} in {time.perf_counter() - t:.1f} s")
        source = TFRecordSource(record, label_offset=-1)
        print(f"converting {record} to {bzna} ...", flush=True)
        # The pictures are small: a fast x265 preset is plenty for them. The progress goes to stderr: a
        # bar on a terminal, else a plain line at each 10% (at least 5 s apart) and at least one a minute.
        options = EncodeOptions(preset="fast", layout=layout)
        summary = convert(source, bzna, encoding=options, workers=processes)
        print(f"converted: {summary}")
    return paths[0], paths[1]


def build_model(size: int, num_classes: int, steps: int):
    """A small CNN, Adam with a cosine learning-rate decay over ``steps``."""
    import keras

    inputs = keras.Input((size, size, 3))
    x = inputs
    for filters in (24, 48, 96):
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(num_classes)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(3e-3, steps)),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def main(argv=None):
    from bzna_tf.convert import EncodeOptions
    from bzna_tf.convert.encode import LAYOUTS

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="a labelled .bzna file (or pattern) to train on instead of the demo data")
    p.add_argument("--val-data", help="the validation .bzna (default: 10%% of --data, held out at random)")
    p.add_argument(
        "--workdir", help="where the demo data goes (kept and reused); default: a temporary folder"
    )
    p.add_argument("--train-images", type=int, default=800, help="demo training pictures (default 800)")
    p.add_argument("--val-images", type=int, default=150, help="demo validation pictures (default 150)")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=64, help="the square input side of the network (default 64)")
    p.add_argument("--track", default="bzna_thumb", choices=("bzna_thumb", "bzna_input"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "-j", "--processes", type=int, default=None, help="encoding processes (default: all usable cores)"
    )
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=EncodeOptions().layout,
        help="the demo data's frame layout (default: the converter's, %(default)s; compact encodes small "
        "pictures faster)",
    )
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        if args.data is None:
            workdir = args.workdir or tmp
            os.makedirs(workdir, exist_ok=True)
            train_path, val_path = make_data(
                workdir, args.train_images, args.val_images, args.processes, args.layout
            )
        else:
            train_path, val_path = args.data, args.val_data
        train(train_path, val_path, args)


def train(train_path, val_path, args):
    import keras

    import bzna_tf

    keras.utils.set_random_seed(args.seed)
    # Only the labelled samples: as_dataset refuses unlabelled ones (model.fit would train on label -1).
    train_set = bzna_tf.ClassificationDataset(train_path, track=args.track).labelled()
    if val_path is None:
        # Hold out a random 10% of the labelled samples.
        perm = np.random.default_rng(args.seed).permutation(len(train_set))
        cut = max(1, len(perm) // 10)
        val_set, train_set = train_set.select(np.sort(perm[:cut])), train_set.select(np.sort(perm[cut:]))
    else:
        val_set = bzna_tf.ClassificationDataset(val_path, track=args.track).labelled()
    num_classes = int(max(train_set.targets.max(), val_set.targets.max())) + 1
    print(f"train: {len(train_set)} samples, val: {len(val_set)} samples, {num_classes} classes")

    size = args.size
    mean, std = (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)
    train_ds = train_set.as_dataset(
        batch_size=args.batch_size,
        shuffle=True,
        seed=args.seed,
        warp=bzna_tf.layers.RandomResizedCrop(size, size, scale=(0.4, 1.0), flip_h=0.5, flip_v=0.5),
        normalize=(mean, std),
    )
    val_ds = val_set.as_dataset(
        batch_size=args.batch_size,
        warp=bzna_tf.layers.CenterResizedCrop(size, size),
        normalize=(mean, std),
    )
    model = build_model(size, num_classes, steps=args.epochs * len(train_ds))
    t = time.perf_counter()
    # The dataset shuffles itself (a new permutation each epoch): Keras has nothing to shuffle.
    history = model.fit(train_ds, validation_data=val_ds, epochs=args.epochs, shuffle=False, verbose=2)
    seconds = time.perf_counter() - t
    images = args.epochs * (len(train_set) + len(val_set))
    print(f"trained {args.epochs} epochs in {seconds:.1f} s ({images / seconds:.0f} images/s)")
    print(f"val_accuracy: {history.history['val_accuracy'][-1]:.4f}")
    sys.stdout.flush()


# The converter's worker processes are started with "spawn": they import this
# file again, so the work must only start under this guard.
if __name__ == "__main__":
    main()
