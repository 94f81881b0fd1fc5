"""The new conversion sources against the TFRecord source: peak memory and throughput per core, same images.

    python benchmarks/convert_sources.py [--images 2000] [--size 256] [--quality balanced] [--json]

The images are crops (``--size`` square, JPEG quality 90) of the original-tools
fixture's ImageNet photographs (``../shared/fixtures/benzina-original/sources``),
each at its own offset so that every image differs. The same images are
written as classic ImageNet TFRecords, as WebDataset tar shards (``.jpg`` +
``.cls``), and as Hugging Face-layout Parquet files with row groups of 100 rows
and with one row group of every row. Each conversion runs in its own process
(one x265 worker, ``--quality``), so its peak resident memory is its own.

A second TFRecord conversion at the end shows how much the machine drifted
during the run. Per conversion: wall images/s, images per CPU-second (the converting process
and its worker together, which other jobs on a shared machine disturb less than
wall time), and the peak resident memory of the converting process (the one
that reads the source; the worker only ever holds the few images in flight).
The ratios are against the TFRecord
source converted in the same run.

Separately, each source is read alone in the conversion's order (every image's
bytes, nothing decoded or encoded) in its own process: ``read_cpu_ms_per_image``
is what the source costs per image, to set beside the whole conversion's CPU
milliseconds per image (``1000 / img_per_cpu_s``). It varies far less from run to
run than the conversions, so it shows what a difference between sources comes
from.

Peak memory is the claim of the Parquet source: it reads one row group at a
time, so its peak grows with the row group's size, not with the file's. The
rows ``parquet, 100-row groups`` at half and at all the images, and ``parquet,
one row group`` show it, beside ``baseline_peak_mb``: a process that only
imports ``bzna_tf.convert`` and pyarrow.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PHOTOS = ROOT.parent / "shared" / "fixtures" / "benzina-original" / "sources"


def make_images(n, size):
    """``n`` distinct JPEGs: ``size`` x ``size`` crops of the fixture's photographs, labels i % 9."""
    from PIL import Image

    photos = sorted(p for p in PHOTOS.glob("*.JPEG"))
    if not photos:
        raise SystemExit(f"no photographs in {PHOTOS}")
    opened = [Image.open(p).convert("RGB") for p in photos]
    out = []
    for i in range(n):
        im = opened[i % len(opened)]
        w, h = im.size
        side = min(size, w, h)
        k = i // len(opened)
        x = (k * 7) % max(1, w - side + 1)
        y = (k * 5) % max(1, h - side + 1)
        buf = io.BytesIO()
        im.crop((x, y, x + side, y + side)).save(buf, format="JPEG", quality=90)
        out.append((f"{i:06d}.jpg", i % len(opened), buf.getvalue()))
    return out


def write_tfrecord(path, images):
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as w:
        for name, label, data in images:
            feature = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                "image/filename": tf.train.Feature(bytes_list=tf.train.BytesList(value=[name.encode()])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def write_parquet(path, images, row_group_size):
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.array([{"bytes": d, "path": n} for n, _, d in images],
                     pa.struct([("bytes", pa.binary()), ("path", pa.string())]))  # fmt: skip
    table = pa.table({"image": image, "label": pa.array([t for _, t, _ in images], pa.int64())})
    features = {
        "image": {"_type": "Image"},
        "label": {"names": [f"c{k}" for k in range(9)], "_type": "ClassLabel"},
    }
    table = table.replace_schema_metadata(
        {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    )
    pq.write_table(table, path, row_group_size=row_group_size)


def write_tar(path, images):
    import tarfile

    with tarfile.open(path, "w") as tf:
        for name, label, data in images:
            key = name.rsplit(".", 1)[0]
            for ext, payload in (("jpg", data), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))


def child(kind, src, out, quality, order):
    """One conversion in this process; prints its figures as JSON (kind "baseline": the imports only)."""
    from bzna_tf.convert import SOURCES, EncodeOptions, convert

    if kind == "baseline":
        import pyarrow.parquet  # noqa: F401

        print(json.dumps({"reader_peak_mb": peak_rss_mb()}))
        return

    source = SOURCES[kind].from_cli([src])
    if out == "READ":  # the source alone: every image read in the conversion's order, nothing encoded
        from bzna_tf.convert.plan import conversion_order

        labelled = source.labelled() if hasattr(source, "labelled") else None
        positions = conversion_order(len(source), order, 0, labelled)
        start = time.process_time()
        nbytes = sum(len(item.data) for item in source.items(positions))
        cpu = time.process_time() - start
        print(json.dumps({"read_cpu_ms_per_image": 1e3 * cpu / len(positions), "read_mb": nbytes / 1e6}))
        return
    start = time.perf_counter()
    summary = convert(source, out, encoding=EncodeOptions(quality=quality), workers=1, order=order,
                      progress=False, log=None)  # fmt: skip
    wall = time.perf_counter() - start
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "images": summary.images,
        "wall_s": wall,
        "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
        "reader_peak_mb": peak_rss_mb(),
    }))  # fmt: skip


def peak_rss_mb():
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, it starts afresh at exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def run(kind, src, out, quality, order):
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        str(src),
        str(out),
        "--quality",
        quality,
        "--order",
        order,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--quality", default="balanced")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", nargs=3, metavar=("KIND", "SRC", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--order", default="shuffle", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child, args.quality, args.order)
        return
    images = make_images(args.images, args.size)
    half = images[: len(images) // 2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        write_tfrecord(tmp / "train-00000-of-00001", images)
        write_tar(tmp / "train-000000.tar", images)
        write_parquet(tmp / "rg100.parquet", images, 100)
        write_parquet(tmp / "rg100-half.parquet", half, 100)
        write_parquet(tmp / "one-group.parquet", images, len(images))
        sizes = {"parquet_mb": os.path.getsize(tmp / "rg100.parquet") / 1e6}
        n, rg100 = len(images), tmp / "rg100.parquet"
        cases = [
            ("tfrecord", "tfrecord", tmp / "train-00000-of-00001", "shuffle", n),
            ("webdataset", "webdataset", tmp / "train-000000.tar", "shuffle", n),
            ("parquet, 100-row groups", "parquet", rg100, "shuffle", n),
            ("parquet, 100-row groups, source order", "parquet", rg100, "source", n),
            (
                "parquet, 100-row groups, half the images",
                "parquet",
                tmp / "rg100-half.parquet",
                "source",
                n // 2,
            ),
            ("parquet, one row group", "parquet", tmp / "one-group.parquet", "source", n),
            ("tfrecord, again (the machine's drift)", "tfrecord", tmp / "train-00000-of-00001", "shuffle", n),
        ]
        rows = []
        for k, (label, kind, src, order, count) in enumerate(cases):
            r = run(kind, src, tmp / f"out{k}.bzna", args.quality, order)
            assert r["images"] == count, (label, r)
            r.update(run(kind, src, "READ", args.quality, order))
            r.update(case=label, order=order, img_s=count / r["wall_s"], img_per_cpu_s=count / r["cpu_s"])
            rows.append(r)
        baseline = run("baseline", tmp, tmp, args.quality, "source")["reader_peak_mb"]
    base = rows[0]
    for r in rows:
        r["throughput_vs_tfrecord"] = r["img_s"] / base["img_s"]
        r["per_cpu_vs_tfrecord"] = r["img_per_cpu_s"] / base["img_per_cpu_s"]
    result = {"images": len(images), "size": args.size, "quality": args.quality, **sizes,
              "baseline_peak_mb": baseline, "runs": rows}  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{len(images)} JPEGs of {args.size}x{args.size}, quality {args.quality}, one worker; "
          f"the Parquet file is {sizes['parquet_mb']:.1f} MB; a process that only imports "
          f"bzna_tf.convert and pyarrow peaks at {baseline:.0f} MB")  # fmt: skip
    print(f"{'case':42s} {'img/s':>7s} {'x tfr':>6s} {'img/cpu-s':>9s} {'x tfr':>6s} {'read ms':>8s} "
          f"{'cpu ms':>7s} {'peak MB':>8s}")  # fmt: skip
    for r in rows:
        speed = f"{r['img_s']:7.1f} {r['throughput_vs_tfrecord']:6.2f}"
        per_cpu = f"{r['img_per_cpu_s']:9.1f} {r['per_cpu_vs_tfrecord']:6.2f}"
        costs = f"{r['read_cpu_ms_per_image']:8.2f} {1e3 / r['img_per_cpu_s']:7.1f}"
        print(f"{r['case']:42s} {speed} {per_cpu} {costs} {r['reader_peak_mb']:8.0f}")


if __name__ == "__main__":
    main()
