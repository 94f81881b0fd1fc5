"""Conversion speed and size: images/s with 1 and 2 worker processes, bytes per image.

    python benchmarks/convert.py [--json] [--repeat 5] [--crf 10 16 22]

The images are the nine ImageNet photographs of the original-tools fixture
(``../shared/fixtures/benzina-original/sources``), repeated, written as classic
ImageNet TFRecords and converted with the package's defaults (CRF 10, preset
medium, one x265 thread per worker). Each run is timed from the call to
``convert`` to the renamed file, worker start-up included. The CRF sweep
reports the file size and the mean PSNR of the decoded thumbnails against the
resized sources (as the loader reconstructs them: bilinear chroma, BT.601).

``--json`` prints one JSON object with ``img_s_1_worker``, ``img_s_2_workers``,
``scaling`` and ``bytes_per_image`` (and the sweep).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ROOT.parent / "shared" / "fixtures" / "benzina-original" / "sources"


def write_tfrecords(folder, photos, repeat):
    import tensorflow as tf

    path = os.path.join(folder, "bench-00000-of-00001")
    with tf.io.TFRecordWriter(path) as w:
        for k in range(repeat):
            for i, p in enumerate(photos):
                feature = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[p.read_bytes()])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[1 + i])),
                    "image/filename": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[f"{k}_{p.name}".encode()])
                    ),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return path


def thumbnail_psnr(path, photos):
    import numpy as np

    from bzna_tf.convert import decode_image, resize_rgb
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile
    from bzna_tf.ops.warp import warp_yuv420

    values = []
    with BznaFile(path) as f:
        for i, p in enumerate(photos):
            s = f.sample(i)
            src = decode_image(p.read_bytes())
            ref = resize_rgb(src, s.thumb.size) if s.has_separate_thumb else src
            y, cb, cr = decode_annexb(s.thumb.annexb())
            out = warp_yuv420(y, cb, cr, np.eye(3), (s.thumb.size[1], s.thumb.size[0])).numpy()
            mse = np.mean((out - ref.astype(np.float64)) ** 2)
            values.append(10 * np.log10(255.0**2 / mse))
    return float(np.mean(values)), float(np.min(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--repeat", type=int, default=5, help="times the nine photographs are repeated")
    p.add_argument("--crf", type=float, nargs="*", default=[10, 16, 22], help="CRF values of the size sweep")
    args = p.parse_args()
    if not SOURCES.is_dir():
        sys.exit(f"benchmarks/convert.py needs the fixture's photographs in {SOURCES}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from bzna_tf.convert import TFRecordSource, convert

    photos = sorted(SOURCES.glob("n*.JPEG"))
    with tempfile.TemporaryDirectory() as tmp:
        records = write_tfrecords(tmp, photos, args.repeat)
        source = TFRecordSource(records, label_offset=-1)
        n = len(source)
        runs = {}
        for workers in (1, 2):
            out = os.path.join(tmp, f"w{workers}.bzna")
            start = time.perf_counter()
            summary = convert(source, out, workers=workers, progress=False)
            runs[workers] = (time.perf_counter() - start, summary)
        sweep = []
        for crf in args.crf:
            out = os.path.join(tmp, f"crf{crf:g}.bzna")
            summary = convert(source, out, workers=2, crf=crf, progress=False)
            mean_psnr, min_psnr = thumbnail_psnr(out, photos)
            sweep.append(
                {
                    "crf": crf,
                    "bytes_per_image": summary.bytes_per_image,
                    "thumb_psnr_mean_db": round(mean_psnr, 2),
                    "thumb_psnr_min_db": round(min_psnr, 2),
                }
            )
    one, two = n / runs[1][0], n / runs[2][0]
    result = {
        "images": n,
        "img_s_1_worker": round(one, 3),
        "img_s_2_workers": round(two, 3),
        "scaling": round(two / one, 3),
        "bytes_per_image": round(runs[2][1].bytes_per_image, 1),
        "source_jpeg_bytes_per_image": round(sum(p.stat().st_size for p in photos) / len(photos), 1),
        "cores": os.cpu_count(),
        "crf_sweep": sweep,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{n} images (9 ImageNet photographs x {args.repeat}), CRF 10, preset medium")
    print(f"1 worker : {one:6.2f} images/s")
    print(f"2 workers: {two:6.2f} images/s  (x{two / one:.2f})")
    print(
        f"{result['bytes_per_image'] / 1e3:.1f} kB per image (source JPEGs: "
        f"{result['source_jpeg_bytes_per_image'] / 1e3:.1f} kB)"
    )
    for row in sweep:
        print(
            f"CRF {row['crf']:g}: {row['bytes_per_image'] / 1e3:.1f} kB/image, thumbnail PSNR mean "
            f"{row['thumb_psnr_mean_db']:.1f} dB, min {row['thumb_psnr_min_db']:.1f} dB"
        )


if __name__ == "__main__":
    main()
