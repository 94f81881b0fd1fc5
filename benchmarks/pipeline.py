"""Throughput of the CPU pipeline: read + decode + warp to 224x224 + batch 64.

Three figures, measured in one run on the same images and the same number of
threads (all cores by default):

- ``pipeline_img_s``: ``BznaDataset`` -> map(``decode_warp``: FFmpeg HEVC
  decode of the thumbnail fused with the warp to 224x224, mean/std
  normalised) -> batch(64) -> prefetch.
- ``as_dataset_img_s``: the user story, ``ClassificationDataset(...).as_dataset(
  batch_size=64, shape=(224, 224), shuffle=True, warp=RandomResizedCrop(224,
  224, flip_h=0.5), mean/std)``: a per-epoch permutation, random crops, and
  the fused decode-warp run once per batch (the batch spread over the
  threads), antialiased (the default).
- ``as_dataset_no_antialias_img_s``: the same with ``antialias=False``
  (Benzina's point sampling); ``antialias_over_no_antialias`` is the ratio of
  the two throughputs (1 = free), ``antialias_cpu_on_over_off`` that of their
  process CPU time per image (``as_dataset_no_antialias_cpu_ms_per_img``),
  which the machine's other jobs disturb less.
- ``decode_limit_img_s``: the raw decoder limit, a decode-only loop over the
  same Annex-B payloads held in memory: the same libavcodec (PyAV's, through
  ``bzna_tf.decode.decode_annexb``, which releases the GIL while FFmpeg works)
  called from as many Python threads; ``decode_limit_cpu_ms_per_img`` its
  process CPU time per image. ``pipeline_over_decode_limit`` and
  ``as_dataset_over_decode_limit`` are the two pipelines' images/s over the
  decoder's (``as_dataset`` antialiased); ``as_dataset_over_decode_limit_cpu``
  is the decoder's CPU time per image over ``as_dataset``'s (the same fraction
  for a CPU-bound machine, and less disturbed by other jobs).
- ``jpeg_img_s``: the tf.data JPEG baseline, tf.io.decode_jpeg + the same
  crop/resize with tf.image (bilinear resize to 224x224) + batch(64), on the
  source JPEGs of the same images; ``jpeg_cpu_ms_per_img`` its process CPU
  time per image, and ``as_dataset_over_jpeg_cpu`` ``as_dataset``'s images
  per CPU-second over its (its CPU ms over ``as_dataset``'s).

The cost of the per-picture checksums (the benchmark file is written with
them, as every new file is), each pair in the same run, interleaved:

- ``as_dataset_no_checksums_img_s``: ``as_dataset_img_s`` with verification
  off (``bzna_tf.ops.verify_checksums(False)``); ``checksums_on_over_off`` is
  the ratio of the two.
- ``read_img_s`` / ``read_no_checksums_img_s``: reading alone, no decoding
  (``read_samples`` of batches of 64 thumbnails, in parallel), with and
  without verification: the checksum's own cost, ``read_checksums_on_over_off``.
- ``*_cpu_ms_per_img`` of those four: process CPU time per image, which the
  machine's other jobs disturb less than wall time; their ratios are
  ``checksums_cpu_on_over_off`` and ``read_checksums_cpu_on_over_off``.
- ``verify_ms_per_sample``: ``bzna-tf verify`` (``bzna_tf.verify.verify``,
  all threads) per sample, both pictures checked and decoded;
  ``verify_checksums_only_ms_per_sample`` with ``decode=False``.

The images are the original-tools fixture (real ImageNet photos encoded by
Benzina's own tools, ``../shared/fixtures/benzina-original``), cycled to
``--samples`` entries: the .bzna repeats their per-image mp4s, the JPEG list
repeats their files. ``--quality NAME`` converts the fixture's source JPEGs
with that named quality instead (``--quality training``: the default
conversion), so that the pictures decoded are the ones a conversion writes
today; ``thumb_bytes_per_image`` is the mean size of the pictures decoded.

With ``--device gpu`` (an NVIDIA GPU and bzna_tf's GPU kernels needed), a
fifth figure and the CPU use of each:

- ``gpu_img_s``: ``as_dataset(device="model")`` (pictures and matrices from
  tf.data) -> ``bzna_tf.layers.DecodeWarp`` on the GPU (NVDEC decode + the
  CUDA warp, normalised, into GPU memory), same crops and sizes, antialiased;
  ``gpu_no_antialias_img_s`` without (``gpu_antialias_over_no_antialias``);
- ``*_cpu_cores``: process CPU time / wall time during each pass (how many
  cores the input pipeline keeps busy).

``--sweep-threads 1 2 4`` measures, instead, throughput against the thread count: for each T,
``as_dataset`` (antialiased, and with ``antialias=False``), the decoder limit and the JPEG
baseline on T threads: images/s, and process CPU ms per image, which other jobs on a shared
machine disturb less (interleaved, the best of ``--repeats``); ``--plot FILE.png`` draws both
(matplotlib, the ``docs`` extra). The docs' plot is made by

    python benchmarks/pipeline.py --sweep-threads 1 2 4 --plot docs/images/pipeline-threads.png

    python benchmarks/pipeline.py [--samples N] [--threads T] [--device cpu|gpu] [--json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT.parent / "shared" / "fixtures" / "benzina-original"


def make_inputs(directory: Path, samples: int, fixture: Path, quality: str | None = None):
    """(.bzna path, list of JPEG bytes, list of Annex-B thumbnails), all `samples` long.

    ``quality``: the fixture's source JPEGs converted with this named quality
    instead of the original tools' own pictures (Benzina's settings).
    """
    from bzna_tf import BznaFile, BznaWriter

    src = BznaFile(fixture / "benzina_original_mini.bzna")
    names = src.filenames()
    if quality is not None:
        from bzna_tf.convert import EncodeOptions, Item, convert

        items = [Item(n, i, data=(fixture / "sources" / n).read_bytes()) for i, n in enumerate(names)]
        converted = directory / f"{quality}.bzna"
        convert(items, converted, encoding=EncodeOptions(quality=quality), order="source", progress=False)
        src = BznaFile(converted)
    mp4s = [src.sample_bytes(i) for i in range(len(src))]
    thumbs = [src.sample(i).thumb.annexb() for i in range(len(src))]
    jpegs = [(fixture / "sources" / n).read_bytes() for n in names]
    path = directory / "bench.bzna"
    with BznaWriter(path) as w:
        for k in range(samples):
            w.append_mp4(mp4s[k % len(mp4s)], target=k % 1000, filename=f"{k}_{names[k % len(names)]}")
    cyc = lambda xs: [xs[k % len(xs)] for k in range(samples)]  # noqa: E731
    return path, cyc(jpegs), cyc(thumbs)


def resize_matrix(width, height, out_h, out_w):
    """Output -> source matrix of a plain resize of the image rectangle (half-pixel centres)."""
    import tensorflow as tf

    sx = tf.cast(width, tf.float32) / out_w
    sy = tf.cast(height, tf.float32) / out_h
    return tf.stack([[sx, 0.0, 0.5 * sx - 0.5], [0.0, sy, 0.5 * sy - 0.5], [0.0, 0.0, 1.0]])


def bzna_pipeline(path, batch, size, threads):
    import tensorflow as tf

    from bzna_tf.ops import BznaDataset, decode_warp

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

    def load(e):
        m = resize_matrix(e["width"], e["height"], size, size)
        hw = tf.stack([e["height"], e["width"]])  # the picture, not its padded frame
        return decode_warp(e["data"], m, (size, size), mean=mean, std=std, picture_sizes=hw), e["target"]

    ds = BznaDataset(str(path)).map(load, num_parallel_calls=threads, deterministic=False)
    return _options(ds.batch(batch).prefetch(2), threads)


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def as_dataset_pipeline(path, batch, size, threads, **kwargs):
    """The user story: shuffled random resized crops; normalised images, or payloads for the GPU."""
    import bzna_tf

    if kwargs.get("device") != "model":
        kwargs.update(normalize=(MEAN, STD))
    ds = bzna_tf.ClassificationDataset(str(path)).as_dataset(
        batch_size=batch,
        shuffle=True,
        seed=0,
        warp=bzna_tf.transforms.RandomResizedCrop(flip_h=0.5),
        shape=(size, size),
        **kwargs,
    )
    return _options(ds, threads)


def jpeg_pipeline(jpegs, batch, size, threads):
    import tensorflow as tf

    mean = tf.constant([0.485, 0.456, 0.406]) * 255
    std = tf.constant([0.229, 0.224, 0.225]) * 255

    def load(data):
        img = tf.io.decode_jpeg(data, channels=3)
        img = tf.image.resize(img, (size, size), method="bilinear")
        return (img - mean) / std

    ds = tf.data.Dataset.from_tensor_slices(jpegs).map(load, num_parallel_calls=threads, deterministic=False)
    return _options(ds.batch(batch).prefetch(2), threads)


def read_pipeline(path, batch, threads, samples):
    """Reading alone: read_samples of each batch of thumbnails, batches in parallel."""
    import tensorflow as tf

    from bzna_tf.ops import read_samples

    def read(idx):
        return read_samples(str(path), idx, track="thumb")["width"]

    ds = (
        tf.data.Dataset.range(samples).batch(batch).map(read, num_parallel_calls=threads, deterministic=False)
    )
    return _options(ds.prefetch(2), threads)


def time_verify(path, threads, samples, decode=True) -> float:
    """Milliseconds of wall time per sample of bzna_tf.verify.verify on all threads."""
    from bzna_tf.verify import verify

    t = time.perf_counter()
    report = verify(str(path), workers=threads, decode=decode)
    dt = time.perf_counter() - t
    assert report.ok and report.samples == samples, report.to_json()
    return 1e3 * dt / samples


class checksums_off:
    """Verification of the checksums off inside the block."""

    def __enter__(self):
        from bzna_tf.ops import verify_checksums

        self.before = verify_checksums(False)

    def __exit__(self, *exc):
        from bzna_tf.ops import verify_checksums

        verify_checksums(self.before)


def _options(ds, threads):
    import tensorflow as tf

    opt = tf.data.Options()
    opt.threading.private_threadpool_size = threads
    return ds.with_options(opt)


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_dataset(ds, samples: int, step=None) -> float:
    """Images per second over one pass, after the first batch (warm-up); `step` consumes each batch."""
    global _last_cpu_cores, _last_cpu_ms_per_img
    it = iter(ds)
    first = next(it)
    if step is not None:
        step(first[0]).numpy()
    n = int(first[1].shape[0]) if isinstance(first, tuple) else int(first.shape[0])
    t, cpu = time.perf_counter(), _cpu_seconds()
    done = 0
    last = None
    for b in it:
        done += int(b[1].shape[0]) if isinstance(b, tuple) else int(b.shape[0])
        if step is not None:
            last = step(b[0])
    if last is not None:
        last.numpy()  # waits for the GPU
    dt = time.perf_counter() - t
    _last_cpu_cores = (_cpu_seconds() - cpu) / dt
    _last_cpu_ms_per_img = 1e3 * _last_cpu_cores * dt / done
    assert n + done == samples, (n, done, samples)
    return done / dt


_last_cpu_cores = 0.0
_last_cpu_ms_per_img = 0.0


def gpu_pipeline(path, batch, size, threads, antialias=True):
    """(payload dataset, step): DecodeWarp on the GPU, reduced to one number per batch."""
    import tensorflow as tf

    import bzna_tf

    layer = bzna_tf.layers.DecodeWarp(size, size, mean=MEAN, std=STD, antialias=antialias)

    @tf.function
    def step(payload):
        with tf.device("/GPU:0"):
            return tf.reduce_sum(layer(payload))

    return as_dataset_pipeline(path, batch, size, threads, device="model"), step


def decode_limit(thumbs, threads: int) -> float:
    """Images per second of the decode-only loop (its CPU time per image in _last_cpu_ms_per_img)."""
    global _last_cpu_ms_per_img
    from bzna_tf.decode import decode_annexb

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(decode_annexb, thumbs[: threads * 2]))  # each thread opens its decoder
        t, cpu = time.perf_counter(), _cpu_seconds()
        for _ in pool.map(decode_annexb, thumbs):
            pass
        dt = time.perf_counter() - t
        _last_cpu_ms_per_img = 1e3 * (_cpu_seconds() - cpu) / len(thumbs)
        return len(thumbs) / dt


SWEEP = {
    "as_dataset_img_s": "as_dataset (random resized crops, antialiased)",
    "as_dataset_no_antialias_img_s": "as_dataset, antialias=False",
    "decode_limit_img_s": "decoder limit (decode only, PyAV)",
    "jpeg_img_s": "tf.data JPEG (decode_jpeg + resize)",
}


def sweep_threads(a, path, jpeg_t, thumbs) -> list[dict]:
    """Images/s (and CPU ms per image) of each SWEEP pipeline on each thread count.

    Interleaved, the best of the repeats: the most images/s, the fewest CPU ms (the decoder
    limit's loop runs in Python threads, whose CPU time is not measured per image).
    """
    best = {
        t: {**dict.fromkeys(SWEEP, 0.0), **dict.fromkeys(_cpu_keys(), float("inf"))} for t in a.sweep_threads
    }
    for _ in range(a.repeats):
        for t in a.sweep_threads:
            row = best[t]
            row["decode_limit_img_s"] = max(row["decode_limit_img_s"], decode_limit(thumbs, t))
            for key, ds in (
                ("as_dataset_img_s", as_dataset_pipeline(path, a.batch, a.size, t)),
                (
                    "as_dataset_no_antialias_img_s",
                    as_dataset_pipeline(path, a.batch, a.size, t, antialias=False),
                ),
                ("jpeg_img_s", jpeg_pipeline(jpeg_t, a.batch, a.size, t)),
            ):
                row[key] = max(row[key], time_dataset(ds, a.samples))
                cpu = key.replace("_img_s", "_cpu_ms_per_img")
                row[cpu] = min(row[cpu], _last_cpu_ms_per_img)
    return [{"threads": t, **{k: round(v, 2) for k, v in best[t].items()}} for t in a.sweep_threads]


def _cpu_keys():
    return [k.replace("_img_s", "_cpu_ms_per_img") for k in SWEEP if k != "decode_limit_img_s"]


def plot_sweep(rows, path, tensorflow: str) -> None:
    import _plot

    # 7 inches at 100 dpi: about the docs' page width, so that 9-point text reads at about 12 pixels.
    fig = _plot.figure(7, 7.6)
    threads = [r["threads"] for r in rows]
    top = fig.add_axes([0.12, 0.6, 0.85, 0.35])
    bottom = fig.add_axes([0.12, 0.13, 0.85, 0.35])
    for (key, label), marker in zip(SWEEP.items(), "osD^", strict=True):
        top.plot(threads, [r[key] for r in rows], marker=marker, label=label)
        cpu = key.replace("_img_s", "_cpu_ms_per_img")
        if cpu in rows[0]:
            bottom.plot(threads, [r[cpu] for r in rows], marker=marker, label=label)
        else:
            bottom.plot([], [])  # keep the colours of the first panel
    top.set_ylabel("images/s (224 x 224,\nbatches of 64)", fontsize=10)
    top.set_title("throughput (wall clock)", fontsize=11)
    top.legend(loc="upper left", fontsize=9)
    bottom.set_ylabel("process CPU ms per image", fontsize=10)
    bottom.set_title("cost (CPU time, less disturbed by other jobs)", fontsize=11)
    for ax in (top, bottom):
        ax.set_xlabel("threads", fontsize=10)
        ax.set_xticks(threads)
        ax.tick_params(labelsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    _plot.save(fig, path, tensorflow)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=768, help="images per pass (default 768)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads (default: all cores)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--repeats", type=int, default=3, help="passes of each; the best is reported")
    p.add_argument("--fixture", type=Path, default=FIXTURE, help="the original-tools fixture folder")
    p.add_argument(
        "--quality",
        help="convert the fixture's source JPEGs with this named quality (e.g. training, the default) "
        "instead of reading the original tools' pictures (Benzina's settings, CRF 10)",
    )
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: add the NVDEC + CUDA path")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--sweep-threads",
        type=int,
        nargs="+",
        metavar="T",
        help="measure throughput against these thread counts",
    )
    p.add_argument("--plot", metavar="FILE.png", help="with --sweep-threads: draw it (matplotlib)")
    a = p.parse_args(argv)
    if a.plot and not a.sweep_threads:
        p.error("--plot draws the thread sweep: give --sweep-threads too (e.g. --sweep-threads 1 2 4)")
    if not (a.fixture / "benzina_original_mini.bzna").exists():
        p.error(f"the fixture is not at {a.fixture} (give --fixture)")
    import tensorflow as tf

    from bzna_tf.ops import load_library

    load_library()  # build outside the timings
    if a.device == "gpu":
        from bzna_tf.ops import gpu_error

        if not tf.config.list_physical_devices("GPU") or gpu_error():
            p.error(f"--device gpu needs an NVIDIA GPU and bzna_tf's GPU kernels: {gpu_error() or 'no GPU'}")
    with tempfile.TemporaryDirectory() as tmp:
        path, jpegs, thumbs = make_inputs(Path(tmp), a.samples, a.fixture, a.quality)
        thumb_bytes = round(sum(len(t) for t in thumbs) / len(thumbs), 1)
        jpeg_t = tf.constant(jpegs)
        if a.sweep_threads:
            rows = sweep_threads(a, path, jpeg_t, thumbs)
            for r in rows:  # images per CPU-second of as_dataset over tf.data JPEG's
                r["as_dataset_over_jpeg_cpu"] = round(
                    r["jpeg_cpu_ms_per_img"] / r["as_dataset_cpu_ms_per_img"], 3
                )
            out = {"sweep": rows, "samples": a.samples, "batch": a.batch, "size": a.size}
            out.update(quality=a.quality, thumb_bytes_per_image=thumb_bytes)
            out.update(tensorflow=tf.__version__, cores=os.cpu_count())
            if a.plot:
                plot_sweep(rows, a.plot, tf.__version__)
            if a.json:
                print(json.dumps(out))
            else:
                keys = [k for k in rows[0] if k != "threads"]
                for r in rows:
                    print(f"threads {r['threads']}: " + ", ".join(f"{k} {r[k]}" for k in keys))
            return 0
        runs = {"pipeline_img_s": [], "as_dataset_img_s": [], "decode_limit_img_s": [], "jpeg_img_s": []}
        runs["decode_limit_cpu_ms_per_img"] = []
        runs.update(as_dataset_no_checksums_img_s=[], read_img_s=[], read_no_checksums_img_s=[])
        runs.update(verify_ms_per_sample=[], verify_checksums_only_ms_per_sample=[])
        for k in ("as_dataset", "as_dataset_no_checksums", "read", "read_no_checksums", "jpeg"):
            runs[f"{k}_cpu_ms_per_img"] = []  # process CPU time: less disturbed by other jobs than wall time
        cores = {}
        runs["as_dataset_no_antialias_img_s"] = []
        runs["as_dataset_no_antialias_cpu_ms_per_img"] = []
        if a.device == "gpu":
            runs["gpu_img_s"] = []
            runs["gpu_no_antialias_img_s"] = []
        for _ in range(a.repeats):  # interleaved, so drifting machine load hits them all alike
            runs["decode_limit_img_s"].append(decode_limit(thumbs, a.threads))
            runs["decode_limit_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            runs["pipeline_img_s"].append(
                time_dataset(bzna_pipeline(path, a.batch, a.size, a.threads), a.samples)
            )
            runs["as_dataset_img_s"].append(
                time_dataset(as_dataset_pipeline(path, a.batch, a.size, a.threads), a.samples)
            )
            cores["as_dataset_cpu_cores"] = round(_last_cpu_cores, 2)
            runs["as_dataset_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            runs["as_dataset_no_antialias_img_s"].append(
                time_dataset(
                    as_dataset_pipeline(path, a.batch, a.size, a.threads, antialias=False), a.samples
                )
            )
            runs["as_dataset_no_antialias_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            with checksums_off():
                runs["as_dataset_no_checksums_img_s"].append(
                    time_dataset(as_dataset_pipeline(path, a.batch, a.size, a.threads), a.samples)
                )
            runs["as_dataset_no_checksums_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            runs["read_img_s"].append(
                time_dataset(read_pipeline(path, a.batch, a.threads, a.samples), a.samples)
            )
            runs["read_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            with checksums_off():
                runs["read_no_checksums_img_s"].append(
                    time_dataset(read_pipeline(path, a.batch, a.threads, a.samples), a.samples)
                )
            runs["read_no_checksums_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            runs["verify_ms_per_sample"].append(time_verify(path, a.threads, a.samples))
            runs["verify_checksums_only_ms_per_sample"].append(time_verify(path, a.threads, a.samples, False))
            runs["jpeg_img_s"].append(
                time_dataset(jpeg_pipeline(jpeg_t, a.batch, a.size, a.threads), a.samples)
            )
            cores["jpeg_cpu_cores"] = round(_last_cpu_cores, 2)
            runs["jpeg_cpu_ms_per_img"].append(_last_cpu_ms_per_img)
            if a.device == "gpu":
                ds, step = gpu_pipeline(path, a.batch, a.size, a.threads)
                runs["gpu_img_s"].append(time_dataset(ds, a.samples, step))
                cores["gpu_cpu_cores"] = round(_last_cpu_cores, 2)
                ds, step = gpu_pipeline(path, a.batch, a.size, a.threads, antialias=False)
                runs["gpu_no_antialias_img_s"].append(time_dataset(ds, a.samples, step))
    # The best of the repeats: the most images/s, the fewest milliseconds.
    out = {k: round(min(v), 3) if "_ms_per_" in k else round(max(v), 1) for k, v in runs.items()}
    out["checksums_on_over_off"] = round(out["as_dataset_img_s"] / out["as_dataset_no_checksums_img_s"], 3)
    out["checksums_cpu_on_over_off"] = round(
        out["as_dataset_cpu_ms_per_img"] / out["as_dataset_no_checksums_cpu_ms_per_img"], 3
    )
    out["read_checksums_cpu_on_over_off"] = round(
        out["read_cpu_ms_per_img"] / out["read_no_checksums_cpu_ms_per_img"], 3
    )
    out["read_checksums_on_over_off"] = round(out["read_img_s"] / out["read_no_checksums_img_s"], 3)
    out["pipeline_over_decode_limit"] = round(out["pipeline_img_s"] / out["decode_limit_img_s"], 3)
    out["as_dataset_over_decode_limit"] = round(out["as_dataset_img_s"] / out["decode_limit_img_s"], 3)
    out["as_dataset_over_decode_limit_cpu"] = round(
        out["decode_limit_cpu_ms_per_img"] / out["as_dataset_cpu_ms_per_img"], 3
    )
    out["antialias_over_no_antialias"] = round(
        out["as_dataset_img_s"] / out["as_dataset_no_antialias_img_s"], 3
    )
    out["antialias_cpu_on_over_off"] = round(
        out["as_dataset_cpu_ms_per_img"] / out["as_dataset_no_antialias_cpu_ms_per_img"], 3
    )
    out["pipeline_over_jpeg"] = round(out["pipeline_img_s"] / out["jpeg_img_s"], 3)
    out["as_dataset_over_jpeg_cpu"] = round(out["jpeg_cpu_ms_per_img"] / out["as_dataset_cpu_ms_per_img"], 3)
    out["as_dataset_over_pipeline"] = round(out["as_dataset_img_s"] / out["pipeline_img_s"], 3)
    if a.device == "gpu":
        out["gpu_over_as_dataset"] = round(out["gpu_img_s"] / out["as_dataset_img_s"], 3)
        out["gpu_over_jpeg"] = round(out["gpu_img_s"] / out["jpeg_img_s"], 3)
        out["gpu_antialias_over_no_antialias"] = round(out["gpu_img_s"] / out["gpu_no_antialias_img_s"], 3)
        out["gpu"] = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
            "device_name", "GPU"
        )
    out.update(cores)
    out.update(samples=a.samples, threads=a.threads, batch=a.batch, size=a.size, tensorflow=tf.__version__)
    out.update(quality=a.quality, thumb_bytes_per_image=thumb_bytes)
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
