"""Conversion speed and size: images/s with 1 and 2 worker processes, bytes per image, encoder presets.

    python benchmarks/convert.py [--json] [--repeat 5] [--crf 10 16 22] [--pareto] [--plot FILE.png]

The images are the nine ImageNet photographs of the original-tools fixture
(``../shared/fixtures/benzina-original/sources``), repeated, written as classic
ImageNet TFRecords and converted with Benzina's settings (CRF 10, preset
medium, averaged chroma; one x265 thread per worker). Each run is timed from
the call to ``convert`` to the renamed file, worker start-up included. The CRF
sweep reports the file size and the mean PSNR of the decoded thumbnails
against the resized sources (as the loader reconstructs them: bilinear
chroma, BT.601).

``--pareto`` adds the encoder sweep that chose the qualities of 2026-11-25
(the current ones, ``bzna_tf.convert.QUALITY_PRESETS``, come from
``benchmarks/quality.py``, against JPEG): every x265 preset of ``--presets``
times every CRF of ``--pareto-crf``, with Benzina's averaged 4:2:0 chroma and
with least-squares chroma, on the fixture's ten photographs at full size (the
nine ImageNet JPEGs and hopper.jpg), one pass each. Per point: bytes per
picture (sample + ``hvcC``), RGB PSNR of the picture as the loader
reconstructs it (FFmpeg decode, then ``warp_yuv420``: bilinear centred chroma,
BT.601 full range) against the decoded JPEG, Y-PSNR against the encoder's
luma, encode ms (one x265 thread, RGB -> YUV included) and decode ms (FFmpeg,
one thread), both in process CPU time, which other jobs on a shared machine
disturb far less than wall time. Points no other point beats on size, RGB
PSNR and encode time together are marked ``on_front``; those no point beats
on size and RGB PSNR alone, ``size_quality_front``. It also gives the 4:2:0
ceiling (no H.265) of both chroma modes and their cost in ms. Then each named quality
converts the same TFRecords with 2 workers: its images/s per worker process
(``img_s_per_core``) and the core-hours ImageNet's 1,281,167 training images
would take at that rate; beside it, the same per core in process CPU time
(JPEG decode + ``encode_image`` in this process, thumbnails included), which
other jobs on the machine disturb less.

``--plot FILE.png`` (implies ``--pareto``) draws the sweep: size against RGB PSNR, each preset
and chroma mode, the size/PSNR front, the named qualities and Benzina's settings (matplotlib, the
``docs`` extra). The docs' plot is made by

    python benchmarks/convert.py --plot docs/images/convert-pareto.png

``--json`` prints one JSON object with ``img_s_1_worker``, ``img_s_2_workers``,
``scaling`` and ``bytes_per_image`` (Benzina's settings), ``img_s_per_core`` and
``default_bytes_per_image`` (a 2-worker conversion with the default quality,
``default_quality``, per worker process), ``img_s_per_core_benzina`` (the same for
Benzina's settings) (and the sweep; ``pareto`` with
``--pareto``, its ``qualities`` keyed by name).
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


IMAGENET_TRAIN = 1_281_167
PARETO_PRESETS = ("ultrafast", "superfast", "veryfast", "fast", "medium", "slow")
PARETO_CRFS = (10, 14, 18, 22, 26)


def psnr(a, b):
    import numpy as np

    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def loader_rgb(y, cb, cr, size):
    """The top-left ``size`` = (w, h) of 4:2:0 planes in RGB, as the loader makes it (identity warp)."""
    import numpy as np

    from bzna_tf.ops.warp import warp_yuv420

    return warp_yuv420(y, cb, cr, np.eye(3), (size[1], size[0])).numpy()


def split_planes(planes, coded_size):
    cw, ch = coded_size
    return (
        planes[:ch],
        planes[ch : ch + ch // 4].reshape(ch // 2, cw // 2),
        planes[ch + ch // 4 :].reshape(ch // 2, cw // 2),
    )


SIZE_QUALITY = (("bytes_per_picture", 1), ("rgb_psnr_db", -1))


def mark_front(points, keys=SIZE_QUALITY + (("encode_ms", 1),), flag="on_front"):
    """Sets ``flag``: True when no other point is at least as good on every key and better on one."""

    def better_or_equal(a, b):
        return all(a[k] * s <= b[k] * s for k, s in keys)

    for p in points:
        p[flag] = not any(
            q is not p and better_or_equal(q, p) and any(q[k] != p[k] for k, _ in keys) for q in points
        )


def pareto_sweep(photos, presets, crfs, log):
    """Every (preset, CRF, chroma) on every photo, one pass; per-point means, the front marked."""
    import hashlib

    import numpy as np

    from bzna_tf.convert import decode_image, encode_picture
    from bzna_tf.convert.encode import CHROMA_MODES, coded_size_for, rgb_to_yuv420
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format.hevc import to_annexb

    images = [decode_image(p.read_bytes()) for p in photos]
    decode_annexb(to_annexb(*_tiny_picture()))  # FFmpeg's decoder context, opened once
    ceiling = {m: [] for m in CHROMA_MODES}
    chroma_ms = {m: [] for m in CHROMA_MODES}
    source_y = []
    for rgb in images:
        h, w = rgb.shape[:2]
        coded = coded_size_for((w, h))
        for mode in CHROMA_MODES:
            start = time.process_time()
            planes = rgb_to_yuv420(rgb, coded, mode)
            chroma_ms[mode].append(1e3 * (time.process_time() - start))
            ceiling[mode].append(psnr(loader_rgb(*split_planes(planes, coded), (w, h)), rgb))
        source_y.append(planes[:h, :w])  # luma is the same in both modes
    per_point = {}
    digests = {}
    for preset in presets:
        for crf in crfs:
            for mode in CHROMA_MODES:
                rows = []
                for rgb, y_ref in zip(images, source_y, strict=True):
                    h, w = rgb.shape[:2]
                    start = time.process_time()
                    pic = encode_picture(rgb, crf=crf, preset=preset, chroma=mode, threads=1)
                    encode_s = time.process_time() - start
                    data = to_annexb(pic.sample, pic.hvcc)
                    start = time.process_time()
                    y, cb, cr = decode_annexb(data)
                    decode_s = time.process_time() - start
                    rows.append(
                        (
                            len(pic.sample) + len(pic.hvcc.to_bytes()),
                            psnr(loader_rgb(y, cb, cr, (w, h)), rgb),
                            psnr(y[:h, :w], y_ref),
                            encode_s,
                            decode_s,
                        )
                    )
                    digests.setdefault((preset, crf, mode), hashlib.sha1()).update(pic.sample)
                b, rgb_db, y_db, enc, dec = (np.array(c, np.float64) for c in zip(*rows, strict=True))
                per_point[(preset, crf, mode)] = {
                    "preset": preset,
                    "crf": crf,
                    "chroma": mode,
                    "bytes_per_picture": round(float(b.mean()), 1),
                    "rgb_psnr_db": round(float(rgb_db.mean()), 2),
                    "rgb_psnr_min_db": round(float(rgb_db.min()), 2),
                    "y_psnr_db": round(float(y_db.mean()), 2),
                    "encode_ms": round(1e3 * float(enc.mean()), 1),
                    "decode_ms": round(1e3 * float(dec.mean()), 2),
                }
                log(per_point[(preset, crf, mode)])
    points = list(per_point.values())
    # x265's presets differ mostly in inter-frame tools: some give the very same intra picture.
    first = {}
    for key, d in digests.items():
        same = first.setdefault((key[1], key[2], d.hexdigest()), key[0])
        if same != key[0]:
            per_point[key]["same_bitstreams_as"] = same
    mark_front(points)
    mark_front(points, SIZE_QUALITY, "size_quality_front")
    gains = []
    for preset in presets:
        for crf in crfs:
            a, q = per_point[(preset, crf, "average")], per_point[(preset, crf, "lsq")]
            gains.append(
                {
                    "preset": preset,
                    "crf": crf,
                    "rgb_psnr_gain_db": round(q["rgb_psnr_db"] - a["rgb_psnr_db"], 2),
                    "bytes_ratio": round(q["bytes_per_picture"] / a["bytes_per_picture"], 3),
                }
            )
    ceiling_gain = np.array(ceiling["lsq"]) - np.array(ceiling["average"])
    return {
        "photos": [p.name for p in photos],
        "points": points,
        "ceiling_rgb_psnr_db": {m: round(float(np.mean(v)), 2) for m, v in ceiling.items()},
        "ceiling_lsq_gain_db": {
            "mean": round(float(ceiling_gain.mean()), 2),
            "min": round(float(ceiling_gain.min()), 2),
            "max": round(float(ceiling_gain.max()), 2),
        },
        "rgb_to_yuv420_ms": {m: round(float(np.mean(v)), 2) for m, v in chroma_ms.items()},
        "lsq_gain": gains,
    }


def _tiny_picture():
    import numpy as np

    from bzna_tf.convert import encode_picture

    pic = encode_picture(np.zeros((16, 16, 3), np.uint8), preset="ultrafast", threads=1)
    return pic.sample, pic.hvcc


def quality_runs(source, folder, photos):
    """Each named quality: a 2-worker conversion of ``source``, and one core's CPU time per image."""
    from bzna_tf.convert import EncodeOptions, convert, decode_image, encode_image
    from bzna_tf.convert.encode import DEFAULT_QUALITY, QUALITY_PRESETS, quality_options

    data = [p.read_bytes() for p in photos]
    out = {}
    for name in QUALITY_PRESETS:
        options = quality_options(name)
        start = time.perf_counter()
        summary = convert(
            source,
            os.path.join(folder, f"{name}.bzna"),
            encoding=EncodeOptions(quality=name),
            workers=2,
            order="source",
            progress=False,
        )
        per_core = len(source) / (time.perf_counter() - start) / 2
        start = time.process_time()
        for d in data:
            encode_image(decode_image(d), threads=1, **options)
        cpu_per_core = len(data) / (time.process_time() - start)
        out[name] = {
            **options,
            "default": name == DEFAULT_QUALITY,
            "img_s_per_core": round(per_core, 3),
            "bytes_per_image": round(summary.bytes_per_image, 1),
            "imagenet_core_hours": round(IMAGENET_TRAIN / per_core / 3600, 1),
            "cpu_img_s_per_core": round(cpu_per_core, 3),
            "cpu_imagenet_core_hours": round(IMAGENET_TRAIN / cpu_per_core / 3600, 1),
        }
    return out


def order_ratio(source, folder, pairs=3):
    """Images/s of a shuffled conversion over the source order's: medians of alternating 2-worker runs.

    x265's fastest preset, so that reading (records at their offsets, in a
    random order) weighs as much as it can against encoding.
    """
    import statistics

    from bzna_tf.convert import EncodeOptions, convert

    encoding = EncodeOptions(preset="ultrafast", crf=22, chroma="average")
    seconds = {"source": [], "shuffle": []}
    for k in range(pairs):
        for order in seconds:
            start = time.perf_counter()
            out = os.path.join(folder, f"order-{order}-{k}.bzna")
            convert(source, out, encoding=encoding, workers=2, order=order, progress=False)
            seconds[order].append(time.perf_counter() - start)
    return round(statistics.median(seconds["source"]) / statistics.median(seconds["shuffle"]), 3)


def plot_pareto(pareto, path) -> None:
    """Size against RGB PSNR of every sweep point; the front; the named qualities and Benzina's."""
    import _plot

    from bzna_tf.convert.encode import DEFAULT_CRF, DEFAULT_PRESET, QUALITY_PRESETS

    fig = _plot.figure(8, 5)
    ax = fig.add_axes([0.09, 0.17, 0.88, 0.75])
    presets = list(dict.fromkeys(q["preset"] for q in pareto["points"]))
    markers = dict(zip(presets, "os^vDP*Xh", strict=False))
    colours = {"average": "tab:orange", "lsq": "tab:blue"}
    for q in pareto["points"]:
        ax.scatter(
            q["bytes_per_picture"] / 1e3,
            q["rgb_psnr_db"],
            marker=markers[q["preset"]],
            color=colours[q["chroma"]],
            s=28,
            alpha=0.85,
        )
    front = sorted(
        (q for q in pareto["points"] if q["size_quality_front"]), key=lambda q: q["bytes_per_picture"]
    )
    ax.plot(
        [q["bytes_per_picture"] / 1e3 for q in front],
        [q["rgb_psnr_db"] for q in front],
        color="0.4",
        lw=1,
        ls="--",
        label="size / PSNR front",
    )
    named = {name: (o["preset"], o["crf"], o["chroma"]) for name, o in QUALITY_PRESETS.items()}
    named["Benzina's settings"] = (DEFAULT_PRESET, DEFAULT_CRF, "average")
    for name, (preset, crf, chroma) in named.items():
        for q in pareto["points"]:
            if (q["preset"], q["crf"], q["chroma"]) == (preset, crf, chroma):
                x, y = q["bytes_per_picture"] / 1e3, q["rgb_psnr_db"]
                ax.annotate(
                    f"{name}\n({preset}, CRF {crf:g})",
                    (x, y),
                    xytext=(8, -22),
                    textcoords="offset points",
                    fontsize=8,
                    arrowprops={"arrowstyle": "-", "color": "0.5"},
                )
    for preset, marker in markers.items():
        ax.scatter([], [], marker=marker, color="0.3", label=f"x265 {preset}")
    for chroma, colour in colours.items():
        ax.scatter(
            [],
            [],
            marker="s",
            color=colour,
            label={"average": "averaged chroma (Benzina's)", "lsq": "least-squares chroma"}[chroma],
        )
    ax.set_xlabel("kB per picture (sample + hvcC)")
    ax.set_ylabel("RGB PSNR as the loader decodes it, dB")
    ax.set_title(
        f"x265 presets x CRFs on {len(pareto['photos'])} photographs (higher and further left is better)"
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7, ncol=2)
    _plot.save(fig, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--repeat", type=int, default=5, help="times the nine photographs are repeated")
    p.add_argument("--crf", type=float, nargs="*", default=[10, 16, 22], help="CRF values of the size sweep")
    p.add_argument("--pareto", action="store_true", help="also sweep x265 presets x CRFs x chroma modes")
    p.add_argument("--presets", nargs="+", default=list(PARETO_PRESETS), help="x265 presets of --pareto")
    p.add_argument("--pareto-crf", type=float, nargs="+", default=list(PARETO_CRFS), help="CRFs of --pareto")
    p.add_argument(
        "--plot", metavar="FILE.png", help="draw the --pareto sweep (implies --pareto; matplotlib)"
    )
    args = p.parse_args()
    args.pareto = args.pareto or bool(args.plot)
    if not SOURCES.is_dir():
        sys.exit(f"benchmarks/convert.py needs the fixture's photographs in {SOURCES}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from bzna_tf.convert import (
        DEFAULT_CRF,
        DEFAULT_PRESET,
        DEFAULT_QUALITY,
        EncodeOptions,
        TFRecordSource,
        convert,
    )

    benzina = {"crf": DEFAULT_CRF, "preset": DEFAULT_PRESET, "chroma": "average"}
    photos = sorted(SOURCES.glob("n*.JPEG"))
    with tempfile.TemporaryDirectory() as tmp:
        records = write_tfrecords(tmp, photos, args.repeat)
        source = TFRecordSource(records, label_offset=-1)
        n = len(source)
        runs = {}
        for workers in (1, 2):
            out = os.path.join(tmp, f"w{workers}.bzna")
            start = time.perf_counter()
            # order="source": sample i is photograph i % 9 (thumbnail_psnr compares them in order)
            summary = convert(
                source,
                out,
                encoding=EncodeOptions(**benzina),
                workers=workers,
                order="source",
                progress=False,
            )
            runs[workers] = (time.perf_counter() - start, summary)
        shuffled = order_ratio(source, tmp)
        # The package's default quality (convert() without encoder arguments), 2 workers.
        start = time.perf_counter()
        default_summary = convert(
            source, os.path.join(tmp, "default.bzna"), workers=2, order="source", progress=False
        )
        default_seconds = time.perf_counter() - start
        sweep = []
        for crf in args.crf:
            out = os.path.join(tmp, f"crf{crf:g}.bzna")
            encoding = EncodeOptions(**{**benzina, "crf": crf})
            summary = convert(source, out, encoding=encoding, workers=2, order="source", progress=False)
            mean_psnr, min_psnr = thumbnail_psnr(out, photos)
            sweep.append(
                {
                    "crf": crf,
                    "bytes_per_image": summary.bytes_per_image,
                    "thumb_psnr_mean_db": round(mean_psnr, 2),
                    "thumb_psnr_min_db": round(min_psnr, 2),
                }
            )
        if args.pareto:
            log = (lambda point: None) if args.json else (lambda point: print(point, flush=True))
            pareto = pareto_sweep(photos + [SOURCES / "hopper.jpg"], args.presets, args.pareto_crf, log)
            pareto["qualities"] = quality_runs(source, tmp, photos)
    one, two = n / runs[1][0], n / runs[2][0]
    result = {
        "images": n,
        "img_s_1_worker": round(one, 3),
        "img_s_2_workers": round(two, 3),
        "scaling": round(two / one, 3),
        # images/s in the default order (shuffled: each record read at its offset) over the source order
        "shuffled_over_source": shuffled,
        # 2-worker runs per worker process (each one x265 thread, on a core of its own when cores >= 2):
        # the default quality, and Benzina's settings.
        "default_quality": DEFAULT_QUALITY,
        "img_s_per_core": round(n / default_seconds / 2, 3),
        "default_bytes_per_image": round(default_summary.bytes_per_image, 1),
        "img_s_per_core_benzina": round(two / 2, 3),
        "bytes_per_image": round(runs[2][1].bytes_per_image, 1),
        "source_jpeg_bytes_per_image": round(sum(p.stat().st_size for p in photos) / len(photos), 1),
        "cores": os.cpu_count(),
        "crf_sweep": sweep,
    }
    if args.pareto:
        result["pareto"] = pareto
    if args.plot:
        plot_pareto(pareto, args.plot)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{n} images (9 ImageNet photographs x {args.repeat}), CRF 10, preset medium, averaged chroma")
    print(f"1 worker : {one:6.2f} images/s")
    print(f"2 workers: {two:6.2f} images/s  (x{two / one:.2f})")
    print(f"2 workers, shuffled order: x{result['shuffled_over_source']:.2f} the source order's images/s")
    print(
        f"default quality ({DEFAULT_QUALITY}), 2 workers: {result['img_s_per_core']:.2f} images/s "
        f"per worker, {result['default_bytes_per_image'] / 1e3:.1f} kB per image"
    )
    print(
        f"{result['bytes_per_image'] / 1e3:.1f} kB per image (source JPEGs: "
        f"{result['source_jpeg_bytes_per_image'] / 1e3:.1f} kB)"
    )
    for row in sweep:
        print(
            f"CRF {row['crf']:g}: {row['bytes_per_image'] / 1e3:.1f} kB/image, thumbnail PSNR mean "
            f"{row['thumb_psnr_mean_db']:.1f} dB, min {row['thumb_psnr_min_db']:.1f} dB"
        )
    if args.pareto:
        print_pareto(result["pareto"])


def print_pareto(pareto):
    print(f"\nx265 presets x CRFs on {len(pareto['photos'])} photographs at full size (one pass each)")
    print("preset     CRF chroma    kB/pic  RGB dB (min)   Y dB  enc ms  dec ms  front (3-D, size/PSNR)")
    for q in pareto["points"]:
        same = f"  = {q['same_bitstreams_as']}" if "same_bitstreams_as" in q else ""
        print(
            f"{q['preset']:10s} {q['crf']:3g} {q['chroma']:8s} {q['bytes_per_picture'] / 1e3:7.1f} "
            f"{q['rgb_psnr_db']:7.2f} ({q['rgb_psnr_min_db']:5.2f}) {q['y_psnr_db']:6.2f} "
            f"{q['encode_ms']:7.0f} {q['decode_ms']:7.1f}  {'*' if q['on_front'] else ' '} "
            f"{'+' if q['size_quality_front'] else ' '}{same}"
        )
    c, g, ms = pareto["ceiling_rgb_psnr_db"], pareto["ceiling_lsq_gain_db"], pareto["rgb_to_yuv420_ms"]
    print(
        f"4:2:0 ceiling (no H.265): average {c['average']:.2f} dB, lsq {c['lsq']:.2f} dB; lsq gain per photo "
        f"{g['min']:+.2f} to {g['max']:+.2f} dB (mean {g['mean']:+.2f}); RGB -> YUV {ms['average']:.1f} ms "
        f"(average), {ms['lsq']:.1f} ms (lsq)"
    )
    for name, q in pareto["qualities"].items():
        print(
            f"{name}{' (default)' if q['default'] else ''}: {q['preset']} CRF {q['crf']:g} {q['chroma']}: "
            f"{q['bytes_per_image'] / 1e3:.1f} kB/image; {q['img_s_per_core']:.2f} images/s per worker "
            f"(ImageNet {q['imagenet_core_hours']:.0f} core-hours), {q['cpu_img_s_per_core']:.2f} per "
            f"CPU-second ({q['cpu_imagenet_core_hours']:.0f})"
        )


if __name__ == "__main__":
    main()
