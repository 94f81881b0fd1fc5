"""Size and quality against JPEG: the named qualities and an x265 sweep, beside JPEG copies of the pictures.

    python benchmarks/quality.py [--free] [--skimage] [--extra FILE_OR_DIR ...] [--json] [--plot FILE.png]
                                 [--crf ...]

The pictures are the original-tools fixture's twelve photographs
(``../shared/fixtures/benzina-original/sources``: nine ImageNet JPEGs, hopper,
retina, rocket), with ``--free`` the repository's sixteen freely licensed camera
photographs at ImageNet's sizes (``tests/fixtures/free-photos``: twelve from
Debian's mate-backgrounds, four of scikit-image's), with ``--skimage`` the five
colour photographs of scikit-image's data folder (``SKIMAGE_PHOTOS``;
scikit-image installed, not imported), and any given with ``--extra`` (files,
or folders of them). Each is decoded twice: by Pillow, the reference (what ``tf.io.decode_jpeg``, Keras and
torchvision give), and by ``bzna_tf.convert.decode_image``, what a conversion
stores. Everything is measured on the picture without its first 4 rows and
columns: the JPEG anchors re-encode that region with Pillow, so that their
8 x 8 blocks do not fall on the source JPEG's own (a source saved at quality 90
re-encodes at 90 almost losslessly on its own grid, which would flatter JPEG).

- JPEG quality 75, 85, 90 and 95 (Pillow, 4:2:0, its defaults): bytes per
  picture, RGB PSNR against the reference region, Pillow's decode in process
  CPU ms (best of 3).
- H.265, as ``bzna_input`` pictures (the benzina layout; sample + ``hvcC``
  bytes): each named quality (``QUALITY_PRESETS``), the deprecated ones, and
  Benzina's own settings; then the sweep: each variant of ``VARIANTS`` (x265
  preset, chroma, psycho-visual tuning on or off) at each CRF of ``--crf``.
  RGB PSNR of the picture as the loader makes it (FFmpeg decode, then
  ``warp_yuv420``: bilinear centred chroma, BT.601 full range) against the
  reference region; encode ms (one x265 thread, RGB -> YUV included) and
  FFmpeg's decode ms (one thread, best of 3), both process CPU time, which
  other jobs on a shared machine disturb far less than wall time.

For each named quality, the conversion's own cost on the nine ImageNet
photographs: JPEG decode (``decode_image``) + ``encode_image`` (one x265
thread, thumbnail included), process CPU ms per image, the images per
CPU-second that gives and the core-hours ImageNet's 1,281,167 training images
would take at that rate (``conversion``).

Per setting and picture set (``fixture``: the twelve; ``free``: the sixteen of
``--free``; ``all``: with the extras): the mean bytes per picture and their
ratio to JPEG quality 90's (total bytes over total bytes), the mean RGB PSNR
(and minimum) and its difference to JPEG quality 90's, the pictures below
their JPEG's PSNR, and the mean ms. Per variant of the sweep, picture by
picture, the bytes it needs at the JPEG quality-90 copy's own PSNR (log-bytes
interpolated between CRFs) over the JPEG's: the median, the range, and the
pictures whose JPEG PSNR even the sweep's highest CRF exceeds
(``equal_psnr``). ``--plot FILE.png`` draws bytes against RGB PSNR, one point
per setting (matplotlib, the ``docs`` extra). The docs' table and plot are
made by

    python benchmarks/quality.py --free --plot docs/images/quality-jpeg.png

``--json`` prints one JSON object: ``pictures``, ``jpeg`` and ``h265`` (lists
of settings, each with ``per_set`` figures), ``qualities`` (the named ones, by
name).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import platform
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's bzna_tf, not another installed one
SOURCES = ROOT.parent / "shared" / "fixtures" / "benzina-original" / "sources"
FREE_PHOTOS = ROOT / "tests" / "fixtures" / "free-photos"
SKIMAGE_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "motorcycle_left.png",
    "hubble_deep_field.jpg",
)
SHIFT = 4  # rows and columns left out, so that JPEG's 8 x 8 grid is not the source's
JPEG_QUALITIES = (75, 85, 90, 95)
SWEEP_CRFS = (22, 26, 28, 30, 31, 32, 34)
PSY_OFF = "psy-rd=0:psy-rdoq=0"
# The sweep's variants: name -> encode_picture keywords (the CRF varies).
VARIANTS = {
    "superfast, lsq, psy off": {"preset": "superfast", "chroma": "lsq", "x265_params": PSY_OFF},
    "superfast, lsq, psy on": {"preset": "superfast", "chroma": "lsq", "x265_params": ""},
    "superfast, average, psy off": {"preset": "superfast", "chroma": "average", "x265_params": PSY_OFF},
    "ultrafast, lsq, psy off": {"preset": "ultrafast", "chroma": "lsq", "x265_params": PSY_OFF},
    "medium, lsq, psy off": {"preset": "medium", "chroma": "lsq", "x265_params": PSY_OFF},
    # Chroma quantised 3 steps finer than luma: RGB PSNR leans on chroma more than luma PSNR does.
    "superfast, lsq, psy off, chroma QP -3": {
        "preset": "superfast",
        "chroma": "lsq",
        "x265_params": PSY_OFF + ":cbqpoffs=-3:crqpoffs=-3",
    },
}


def skimage_photos() -> list[pathlib.Path]:
    """scikit-image's colour photographs, from its installed package (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    if spec is None or spec.origin is None:
        sys.exit("--skimage needs scikit-image installed (pip install scikit-image)")
    data = pathlib.Path(spec.origin).parent / "data"
    missing = [n for n in SKIMAGE_PHOTOS if not (data / n).is_file()]
    if missing:
        sys.exit(f"--skimage: {', '.join(missing)} not in {data}")
    return [data / n for n in SKIMAGE_PHOTOS]


def _jpegs(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))


def photo_paths(
    extra, skimage: bool = False, free: bool = False
) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
    """(the fixture's twelve photographs, the other pictures)."""
    fixture = _jpegs(SOURCES)
    more = _jpegs(FREE_PHOTOS) if free else []
    more += skimage_photos() if skimage else []
    for e in extra or ():
        e = pathlib.Path(e)
        more += sorted(p for p in e.iterdir() if p.is_file()) if e.is_dir() else [e]
    return fixture, more


def psnr(a, b) -> float:
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def cpu_ms(fn, repeat: int = 1):
    """(fn's result, the least process CPU ms of ``repeat`` calls)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, 1e3 * (time.process_time() - start))
    return out, best


def load(path: pathlib.Path):
    from PIL import Image

    from bzna_tf.convert import decode_image

    data = path.read_bytes()
    ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return {"name": path.name, "ref": ref, "stored": decode_image(data)}


def jpeg_point(pic, quality: int) -> dict:
    from PIL import Image

    region = np.ascontiguousarray(pic["ref"][SHIFT:, SHIFT:])
    buf = io.BytesIO()
    Image.fromarray(region).save(buf, "JPEG", quality=quality)
    data = buf.getvalue()
    decoded, ms = cpu_ms(lambda: np.asarray(Image.open(io.BytesIO(data)).convert("RGB")), 3)
    return {"bytes": len(data), "psnr": psnr(decoded, region), "decode_ms": ms}


def h265_point(pic, options: dict) -> dict:
    from bzna_tf.convert import encode_picture
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format.hevc import to_annexb
    from bzna_tf.ops.warp import warp_yuv420

    rgb = pic["stored"]
    h, w = rgb.shape[:2]
    p, encode_ms = cpu_ms(lambda: encode_picture(rgb, threads=1, **options))
    data = to_annexb(p.sample, p.hvcc)
    (y, cb, cr), decode_ms = cpu_ms(lambda: decode_annexb(data), 3)
    out = warp_yuv420(y, cb, cr, np.eye(3), (h, w)).numpy()
    return {
        "bytes": len(p.sample) + len(p.hvcc.to_bytes()),
        "psnr": psnr(out[SHIFT:, SHIFT:], pic["ref"][SHIFT:, SHIFT:]),
        "encode_ms": encode_ms,
        "decode_ms": decode_ms,
    }


def summarise(rows: list[dict], sets: dict, anchor: dict | None) -> dict:
    """Per picture set: mean bytes, bytes over the anchor's, mean/min PSNR and its difference, mean ms."""
    out = {}
    for name, index in sets.items():
        sub = [rows[i] for i in index]
        b = np.array([r["bytes"] for r in sub], np.float64)
        db = np.array([r["psnr"] for r in sub])
        s = {
            "bytes_per_picture": round(float(b.mean()), 1),
            "rgb_psnr_db": round(float(db.mean()), 2),
            "rgb_psnr_min_db": round(float(db.min()), 2),
        }
        for key in ("encode_ms", "decode_ms"):
            if key in sub[0]:
                s[key] = round(float(np.mean([r[key] for r in sub])), 2)
        if anchor is not None:
            ref = [anchor["rows"][i] for i in index]
            s["bytes_over_jpeg90"] = round(float(b.sum() / sum(r["bytes"] for r in ref)), 3)
            s["psnr_minus_jpeg90_db"] = round(s["rgb_psnr_db"] - float(np.mean([r["psnr"] for r in ref])), 2)
            s["pictures_below_jpeg90_psnr"] = int(
                sum(r["psnr"] < a["psnr"] for r, a in zip(sub, ref, strict=True))
            )
        out[name] = s
    return out


IMAGENET_TRAIN = 1_281_167


def conversion_cost(paths, options: dict) -> dict:
    """Process CPU time of decode_image + encode_image per image (one x265 thread, thumbnails included)."""
    from bzna_tf.convert import decode_image, encode_image

    data = [p.read_bytes() for p in paths]
    start = time.process_time()
    for d in data:
        encode_image(decode_image(d), threads=1, **options)
    ms = 1e3 * (time.process_time() - start) / len(data)
    return {
        "images": len(data),
        "cpu_ms_per_image": round(ms, 1),
        "images_per_cpu_second": round(1e3 / ms, 2),
        "imagenet_core_hours": round(IMAGENET_TRAIN * ms / 3.6e6, 1),
    }


def equal_psnr(points: list[dict], anchor: dict, index: list[int]) -> dict:
    """Picture by picture, a variant's bytes at the anchor's PSNR over the anchor's bytes."""
    ratios, beyond = [], 0
    for i in index:
        db = np.array([p["rows"][i]["psnr"] for p in points])
        log_bytes = np.log([p["rows"][i]["bytes"] for p in points])
        target = anchor["rows"][i]["psnr"]
        if target < db.min():  # even the highest CRF is sharper than the JPEG
            beyond += 1
            continue
        if target > db.max():
            continue
        order = np.argsort(db)
        needed = float(np.exp(np.interp(target, db[order], log_bytes[order])))
        ratios.append(needed / anchor["rows"][i]["bytes"])
    if not ratios:
        return {"pictures": 0, "beyond_sweep": beyond}
    return {
        "pictures": len(ratios),
        "median": round(float(np.median(ratios)), 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
        "beyond_sweep": beyond,
    }


def named_settings() -> dict:
    from bzna_tf.convert.encode import DEFAULT_CRF, DEFAULT_PRESET, DEPRECATED_QUALITIES, QUALITY_PRESETS

    named = {name: dict(v) for name, v in QUALITY_PRESETS.items()}
    named.update({f"{name} (deprecated)": dict(v) for name, v in DEPRECATED_QUALITIES.items()})
    named["Benzina's settings"] = {
        "preset": DEFAULT_PRESET,
        "crf": DEFAULT_CRF,
        "chroma": "average",
        "x265_params": "",
    }
    return named


def run(args, log) -> dict:
    from bzna_tf.convert.encode import DEFAULT_QUALITY

    fixture, extra = photo_paths(args.extra, args.skimage, args.free)
    pictures = [load(p) for p in fixture + extra]
    sets = {"fixture": list(range(len(fixture)))}
    if args.free:
        free = {p.resolve() for p in _jpegs(FREE_PHOTOS)}
        sets["free"] = [i for i, p in enumerate(fixture + extra) if p.resolve() in free]
    if extra:
        sets["all"] = list(range(len(pictures)))
    jpeg = []
    for q in JPEG_QUALITIES:
        rows = [jpeg_point(pic, q) for pic in pictures]
        jpeg.append({"format": "JPEG", "quality": q, "rows": rows})
    anchor = next(j for j in jpeg if j["quality"] == 90)
    for j in jpeg:
        j["per_set"] = summarise(j["rows"], sets, anchor)
        log(f"JPEG q{j['quality']}: {j['per_set']}")
    h265 = []
    settings = [(name, None, o) for name, o in named_settings().items()]
    settings += [(None, variant, {**o, "crf": crf}) for variant, o in VARIANTS.items() for crf in args.crf]
    imagenet = [p for p in fixture if p.name.startswith("n0")]
    for name, variant, options in settings:
        rows = [h265_point(pic, options) for pic in pictures]
        point = {"format": "H.265", "name": name, "variant": variant, **options, "rows": rows}
        point["per_set"] = summarise(rows, sets, anchor)
        if name is not None:
            point["conversion"] = conversion_cost(imagenet, options)
        h265.append(point)
        log(f"{name or variant} CRF {options['crf']:g}: {point['per_set']}")
    for point in jpeg + h265:
        for r, pic in zip(point["rows"], pictures, strict=True):
            r["picture"] = pic["name"]
            r["psnr"] = round(r["psnr"], 3)
            for key in ("encode_ms", "decode_ms"):
                if key in r:
                    r[key] = round(r[key], 2)
    variants = {
        v: {
            name: equal_psnr([p for p in h265 if p["variant"] == v], anchor, index)
            for name, index in sets.items()
        }
        for v in VARIANTS
        if any(p["variant"] == v for p in h265)
    }
    return {
        "pictures": {name: [pictures[i]["name"] for i in index] for name, index in sets.items()},
        "equal_psnr": variants,
        "shift": SHIFT,
        "default_quality": DEFAULT_QUALITY,
        "jpeg": jpeg,
        "h265": h265,
        "qualities": {p["name"]: p for p in h265 if p["name"] is not None},
        "machine": {
            "cores": os.cpu_count(),
            "platform": platform.machine(),
            "load_average": os.getloadavg()[0],
        },
    }


# Where each named quality's label goes (points from the star), so that close stars stay readable.
LABEL_OFFSETS = {
    "training": (-95, 18),
    "quick": (10, -26),
    "archival": (-75, 10),
    "balanced (deprecated)": (-150, 6),
    "fast (deprecated)": (-135, -30),
    "Benzina's settings": (-120, -30),
}


def plot(result: dict, path: str, picture_set: str) -> None:
    """Bytes against RGB PSNR, one point per setting: JPEG, the sweep's variants, the named qualities."""
    import _plot
    import tensorflow as tf
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = _plot.figure(9, 5.6)
    ax = fig.add_axes([0.08, 0.16, 0.9, 0.76])

    def xy(point):
        s = point["per_set"][picture_set]
        return s["bytes_per_picture"] / 1e3, s["rgb_psnr_db"]

    jx, jy = zip(*(xy(j) for j in result["jpeg"]), strict=True)
    ax.plot(jx, jy, "k-o", lw=1.6, ms=6, label="JPEG (Pillow), quality 75 / 85 / 90 / 95", zorder=4)
    for j, x, y in zip(result["jpeg"], jx, jy, strict=True):
        ax.annotate(f"JPEG q{j['quality']}", (x, y), xytext=(6, -4), textcoords="offset points", fontsize=8)
    markers = dict(zip(VARIANTS, "osv^DP", strict=True))
    for variant, marker in markers.items():
        pts = sorted((xy(p) for p in result["h265"] if p["variant"] == variant), key=lambda t: t[0])
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, marker=marker, ms=4, lw=0.8, alpha=0.8, label=f"x265 {variant}")
    for p in result["h265"]:
        if p["name"] is None:
            continue
        x, y = xy(p)
        ax.scatter([x], [y], marker="*", s=130, color="tab:red", zorder=5)
        ax.annotate(
            f"{p['name']}\n({p['preset']}, CRF {p['crf']:g})",
            (x, y),
            xytext=LABEL_OFFSETS.get(p["name"], (6, 4)),
            textcoords="offset points",
            fontsize=7.5,
            arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.6},
        )
    ax.scatter([], [], marker="*", s=110, color="tab:red", label="named qualities, Benzina's settings")
    ax.set_xscale("log")
    top = max(xy(p)[1] for p in result["h265"])
    ax.set_ylim(top=top + 1.3)  # room for the labels above the highest star
    low, high = ax.get_xlim()
    ticks = [t for t in (20, 30, 40, 50, 60, 80, 100, 150, 200, 300, 400) if low < t < high]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("kB per picture (log scale; H.265: sample + hvcC of bzna_input)")
    ax.set_ylabel("RGB PSNR against Pillow's decode, dB")
    n = len(result["pictures"][picture_set])
    ax.set_title(
        f"H.265 (CRF {result['crfs']}) and JPEG on {n} photographs: higher and further left is better",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=7)
    _plot.save(fig, path, tf.__version__)


def print_tables(result: dict) -> None:
    print("bytes at the JPEG q90 copy's own PSNR, picture by picture, over the JPEG's: median (range)")
    for variant, per_set in result["equal_psnr"].items():
        text = "; ".join(
            f"{name}: {e['median']:.2f} ({e['min']:.2f} to {e['max']:.2f}), {e['beyond_sweep']} beyond"
            for name, e in per_set.items()
            if e["pictures"]
        )
        print(f"  {variant:40s} {text}")
    print(
        "conversion (nine ImageNet photographs): CPU ms per image, images per CPU-second, ImageNet core-hours"
    )
    for name, p in result["qualities"].items():
        c = p["conversion"]
        print(
            f"  {name:28s} {c['cpu_ms_per_image']:7.1f} {c['images_per_cpu_second']:6.2f} "
            f"{c['imagenet_core_hours']:6.1f}"
        )
    for picture_set, names in result["pictures"].items():
        print(f"\n{picture_set}: {len(names)} pictures")
        print(f"{'setting':40s} kB/pic  x JPEG90  RGB dB (min)   - JPEG90  enc ms  dec ms")
        for p in result["jpeg"] + result["h265"]:
            s = p["per_set"][picture_set]
            label = (
                f"JPEG q{p['quality']}"
                if p["format"] == "JPEG"
                else (
                    f"{p['name']}: {p['preset']} CRF {p['crf']:g} {p['chroma']}"
                    if p["name"]
                    else f"{p['variant']}, CRF {p['crf']:g}"
                )
            )
            print(
                f"{label:40s} {s['bytes_per_picture'] / 1e3:7.1f} {s['bytes_over_jpeg90']:8.3f} "
                f"{s['rgb_psnr_db']:6.2f} ({s['rgb_psnr_min_db']:5.2f}) {s['psnr_minus_jpeg90_db']:+7.2f} "
                f"{s.get('encode_ms', float('nan')):7.1f} {s['decode_ms']:7.2f}"
            )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--free",
        action="store_true",
        help="add the repository's free photographs (tests/fixtures/free-photos)",
    )
    p.add_argument("--skimage", action="store_true", help="add scikit-image's five colour photographs")
    p.add_argument("--extra", nargs="+", default=[], help="more pictures: files, or folders of them")
    p.add_argument("--crf", type=float, nargs="+", default=list(SWEEP_CRFS), help="CRFs of the sweep")
    p.add_argument("--no-sweep", action="store_true", help="only JPEG and the named qualities")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", help="draw bytes against RGB PSNR (matplotlib)")
    p.add_argument("--plot-set", choices=("fixture", "free", "all"), help="the pictures plotted")
    args = p.parse_args(argv)
    if not SOURCES.is_dir():
        sys.exit(f"benchmarks/quality.py needs the fixture's photographs in {SOURCES}")
    if args.no_sweep:
        args.crf = []
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    log = (lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    result = run(args, log)
    result["crfs"] = ", ".join(f"{c:g}" for c in args.crf)
    if args.plot:
        plot(result, args.plot, args.plot_set or ("all" if "all" in result["pictures"] else "fixture"))
    if args.json:
        print(json.dumps(result))
    else:
        print_tables(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
