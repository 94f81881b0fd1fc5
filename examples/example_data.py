"""The small files the documentation's examples read, made under the names the pages use.

    python examples/example_data.py [DIR]       (default: example-data/; needs Pillow)

The guides are written for a user's data ("train.bzna", "imagenet/train-*", "shards/"); this
writes tiny versions of all of them into DIR, in a few seconds, so that every example can be run
as it is written from inside DIR. The docs' tests run each page in a copy of such a folder:

    images/{circles,squares,stripes}/*.jpg      an image folder, 3 classes x 4 JPEGs
    train.bzna, val.bzna                        20 and 10 labelled samples, 5 named classes
    shards/train-0000k-of-00003.bzna            7 + 5 + 9 samples (shard 1 holds n01440764_10026.JPEG)
    data/imagenet/train-0000k-of-00002.bzna     ImageNet's per-split layout: 6 + 6 train, 4 val
    data/imagenet/val.bzna
    damaged.bzna                                val.bzna with one byte of sample 2's picture changed
    photo.bzna                                  a JPEG with the wrong name
    imagenet/train-0000k-of-00002               classic ImageNet TFRecords (labels 1..5, class texts)
    imagenet/val/<synset>/*.JPEG                an image folder of 5 synsets
    gulp_chunks/data_0.gulp, meta_0.gmeta       a GulpIO chunk: 2 videos of 2 frames
    tensorflow_datasets/imagenet2012/5.1.0/     TFDS records and label.labels.txt (run the examples
                                                that read ~/tensorflow_datasets with HOME=DIR)

The pictures are stripes at one of 5 angles, one angle per class, 48 to 96 pixels on a side.
Nothing here imports TensorFlow: TFRecords are framed and serialised by hand (the converter's
own reader is tested against TensorFlow's elsewhere).
"""

from __future__ import annotations

import io
import json
import pathlib
import struct

import numpy as np

SYNSETS = ("n01440764", "n01443537", "n01484850", "n01491361", "n01494475")
NAMES = ("tench", "goldfish", "great white shark", "tiger shark", "hammerhead")


def texture(label: int, rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A small RGB picture whose pattern depends on its class: stripes at one of 5 angles."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = np.pi * label / 5
    wave = np.sin((x * np.cos(angle) + y * np.sin(angle)) * 2 * np.pi / rng.uniform(8, 16))
    fg, bg = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    img = np.where((wave > 0)[..., None], fg, bg) + rng.normal(0, 8, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def jpeg(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


# --------------------------------------------------------------------------- TFRecords by hand


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:  # a length-delimited protobuf field
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def example(features: dict) -> bytes:
    """A serialised tf.train.Example of bytes and int features."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, bytes):
            feature = _field(1, _field(1, value))  # Feature.bytes_list = BytesList{value}
        else:
            feature = _field(3, _field(1, _varint(value)))  # Feature.int64_list, packed
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))  # map entry
    return _field(1, entries)  # Example.features = Features{feature: map}


def write_tfrecord(path: pathlib.Path, records: list[bytes]) -> None:
    from bzna_tf.format.checksums import masked_crc32c

    with open(path, "wb") as f:
        for data in records:
            length = struct.pack("<Q", len(data))
            f.write(length + struct.pack("<I", masked_crc32c(length)))
            f.write(data + struct.pack("<I", masked_crc32c(data)))


# --------------------------------------------------------------------------- the workspace


def build(root: pathlib.Path) -> None:
    """Writes every file listed in the module docstring under ``root`` (an empty folder)."""
    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    rng = np.random.default_rng(27)
    pictures = []  # (rgb, class)
    for i in range(24):
        h, w = (int(v) for v in rng.integers(48, 97, 2))
        pictures.append((texture(i % 5, rng, h, w), i % 5))
    encoded = [encode_image(rgb, preset="ultrafast", crf=20) for rgb, _ in pictures]

    def write(path, first, count, *, names=None, labelled=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        with BznaWriter(path, metadata={"class_names": list(NAMES)}) as w:
            for j in range(count):
                k = (first + j) % len(pictures)
                inp, thumb = encoded[k]
                name = names[j] if names else f"{SYNSETS[pictures[k][1]]}_{1000 + first + j}.JPEG"
                w.append(inp, thumb=thumb, target=pictures[k][1] if labelled else None, filename=name)

    write(root / "train.bzna", 0, 20)
    write(root / "val.bzna", 20, 10)
    for k, (first, n) in enumerate(((0, 7), (7, 5), (12, 9))):
        names = [f"{SYNSETS[pictures[(first + j) % 24][1]]}_{10020 + first + j}.JPEG" for j in range(n)]
        if k == 1:
            names[2] = "n01440764_10026.JPEG"
        write(root / "shards" / f"train-{k:05d}-of-00003.bzna", first, n, names=names)
    write(root / "data" / "imagenet" / "train-00000-of-00002.bzna", 0, 6)
    write(root / "data" / "imagenet" / "train-00001-of-00002.bzna", 6, 6)
    write(root / "data" / "imagenet" / "val.bzna", 12, 4)

    # damaged.bzna: one byte of sample 2's thumbnail picture changed (its checksum no longer matches).
    from bzna_tf import open_bzna

    with open_bzna(root / "val.bzna") as f:
        track = f.tracks["bzna_thumb"]
        offset, size = int(track.offsets[2]), int(track.sizes[2])
    data = bytearray((root / "val.bzna").read_bytes())
    data[offset + size // 2] ^= 0x55
    (root / "damaged.bzna").write_bytes(bytes(data))

    (root / "photo.bzna").write_bytes(jpeg(pictures[0][0]))

    for c, cls in enumerate(("circles", "squares", "stripes")):
        folder = root / "images" / cls
        folder.mkdir(parents=True)
        for i in range(4):
            (folder / f"{cls}_{i}.jpg").write_bytes(jpeg(pictures[(c * 4 + i) % 24][0]))

    imagenet = root / "imagenet"
    for k in range(2):
        records = []
        for j in range(6):
            rgb, label = pictures[k * 6 + j]
            records.append(
                example(
                    {
                        "image/encoded": jpeg(rgb),
                        "image/class/label": label + 1,  # build_imagenet_data.py's 1..1000
                        "image/class/text": NAMES[label].encode(),
                        "image/filename": f"{SYNSETS[label]}_{k * 6 + j}.JPEG".encode(),
                    }
                )
            )
        imagenet.mkdir(exist_ok=True)
        write_tfrecord(imagenet / f"train-{k:05d}-of-00002", records)
    for label, synset in enumerate(SYNSETS):
        folder = imagenet / "val" / synset
        folder.mkdir(parents=True)
        (folder / f"ILSVRC2012_val_{label + 1:08d}.JPEG").write_bytes(jpeg(pictures[12 + label][0]))

    tfds = root / "tensorflow_datasets" / "imagenet2012" / "5.1.0"
    tfds.mkdir(parents=True)
    (tfds / "label.labels.txt").write_text("".join(f"{s}\n" for s in SYNSETS))
    for k in range(2):
        records = [
            example(
                {"image": jpeg(rgb), "label": label, "file_name": f"{SYNSETS[label]}_{k}{j}.JPEG".encode()}
            )
            for j, (rgb, label) in enumerate(pictures[k * 4 : k * 4 + 4])
        ]
        write_tfrecord(tfds / f"imagenet2012-train.tfrecord-{k:05d}-of-00002", records)

    gulp = root / "gulp_chunks"
    gulp.mkdir()
    data, meta, offset = bytearray(), {}, 0
    for vid, label in (("v01", "walking"), ("v02", "running")):
        info = []
        for f in range(2):
            j = jpeg(pictures[len(meta) * 2 + f][0])
            pad = (4 - len(j) % 4) % 4
            data += j + b"\0" * pad
            info.append([offset, pad, len(j) + pad])
            offset += len(j) + pad
        meta[vid] = {"frame_info": info, "meta_data": [{"label": label}]}
    (gulp / "data_0.gulp").write_bytes(bytes(data))
    (gulp / "meta_0.gmeta").write_text(json.dumps(meta))


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder", nargs="?", default="example-data", help="where to write (default example-data)")
    a = p.parse_args(argv)
    try:
        import PIL  # noqa: F401 - the JPEGs are written with Pillow
    except ImportError:
        p.error("writing the JPEGs needs Pillow: pip install pillow")
    root = pathlib.Path(a.folder)
    if root.exists() and any(root.iterdir()):
        p.error(f"{root} is not empty: give a new folder")
    root.mkdir(parents=True, exist_ok=True)
    build(root)
    print(f"wrote the examples' files into {root}/: cd there to run the guides' examples")
    return 0


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # a checkout's bzna_tf
    sys.exit(main())
