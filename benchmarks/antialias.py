"""The antialiased warp (``antialias=True``): quality against Pillow, aliasing on a zone plate, cost.

Three measurements, in one run:

- ``psnr``: reductions by 2, 3 and 4 of the fixture's twelve photographs
  (``../shared/fixtures/benzina-original/sources``: nine ImageNet JPEGs,
  hopper, retina, rocket), each centre-cropped to a multiple of 12 pixels,
  against Pillow's antialiased resize (``Image.resize(size, Image.BILINEAR,
  reducing_gap=None)``: the triangle filter torchvision's ``antialias=True``
  and ``tf.image.resize(antialias=True)`` also use). Ours through ``warp_rgb``
  (the RGB op) and through the loader's own path (RGB -> 4:2:0 with
  least-squares chroma, as ``convert`` writes it, or averaged chroma with
  ``--chroma average``, -> ``warp_yuv420``), antialias off
  (Benzina's point sampling) and on; ``tf.image.resize(antialias=True)``,
  rounded, as the ceiling (its only difference from Pillow is Pillow's 8-bit
  rounding between its two passes). PSNR in dB, mean (min) over the photos.
- ``zone_plate``: a 512 x 512 zone plate, 127.5 + 127.5 cos(pi r^2 / 512)
  (local frequency r / 512 cycles per pixel, 0.5 at r = 256), reduced 2, 3
  and 4 times. ``alias_db``: the power left where the plate's frequency is
  above the output's Nyquist frequency (source radius 1.15 r_N to 250,
  r_N = 256 / factor), where an ideal filter leaves a flat grey: all of it
  is aliasing, in dB relative to the plate's own power. ``passband``: the
  amplitude kept where the frequency is below half the output's Nyquist
  (radius <= r_N / 2), as a fraction of the plate's (1 = no blur).
- ``warp_ms``: ``warp_yuv420`` of 8 random 1024 x 1024 frames onto 224 x 224
  (a centred crop reduced by 1, 1.5, 2, 3 and 4), one TensorFlow thread,
  milliseconds of process CPU time per image, best of 5; off and on, and
  their ratio.

``--plot FILE.png`` draws the quality figures: the zone plate reduced 3 times, point-sampled,
antialiased and by Pillow, and the PSNR against Pillow at each reduction (matplotlib, the
``docs`` extra). The docs' plot is made by

    python benchmarks/antialias.py --plot docs/images/antialias.png

    python benchmarks/antialias.py [--json] [--fixture DIR] [--plot FILE.png]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT.parent / "shared" / "fixtures" / "benzina-original"
FACTORS = (2, 3, 4)
PLATE = 512


def resize_matrix(in_hw, out_hw):
    """Output -> source matrix of a plain resize (pixel centres as Pillow and tf.image.resize place them)."""
    sy, sx = in_hw[0] / out_hw[0], in_hw[1] / out_hw[1]
    return np.float32([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]])


def psnr(a, b) -> float:
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def photos(fixture: Path):
    from PIL import Image

    out = {}
    for path in sorted((fixture / "sources").iterdir()):
        if path.suffix.lower() not in (".jpg", ".jpeg"):
            continue
        rgb = np.asarray(Image.open(path).convert("RGB"))
        h, w = (s - s % 12 for s in rgb.shape[:2])
        top, left = (rgb.shape[0] - h) // 2, (rgb.shape[1] - w) // 2
        out[path.name] = np.ascontiguousarray(rgb[top : top + h, left : left + w])
    return out


def yuv_planes(rgb, chroma="lsq"):
    from bzna_tf.convert.encode import rgb_to_yuv420

    h, w = rgb.shape[:2]
    frame = rgb_to_yuv420(rgb, (w, h), chroma=chroma)
    cb = frame[h : h + h // 4].reshape(h // 2, w // 2)
    cr = frame[h + h // 4 :].reshape(h // 2, w // 2)
    return frame[:h], cb, cr


def measure_psnr(fixture: Path, chroma: str = "lsq") -> dict:
    import tensorflow as tf
    from PIL import Image

    from bzna_tf.ops import warp_rgb, warp_yuv420

    rows = {}
    for k in FACTORS:
        figures = {key: [] for key in ("rgb_off", "rgb_on", "yuv_off", "yuv_on", "tf_antialias")}
        for rgb in photos(fixture).values():
            h, w = rgb.shape[:2]
            out_hw = (h // k, w // k)
            m = resize_matrix((h, w), out_hw)
            pillow = np.asarray(Image.fromarray(rgb).resize(out_hw[::-1], Image.BILINEAR, reducing_gap=None))
            y, cb, cr = yuv_planes(rgb, chroma)
            for aa in (False, True):
                tag = "on" if aa else "off"
                figures[f"rgb_{tag}"].append(psnr(warp_rgb(rgb, m, out_hw, antialias=aa).numpy(), pillow))
                figures[f"yuv_{tag}"].append(
                    psnr(warp_yuv420(y, cb, cr, m, out_hw, antialias=aa).numpy(), pillow)
                )
            ref = tf.image.resize(rgb.astype(np.float32), out_hw, method="bilinear", antialias=True).numpy()
            figures["tf_antialias"].append(psnr(np.clip(np.round(ref), 0, 255), pillow))
        rows[str(k)] = {
            key: [round(float(np.mean(v)), 2), round(float(np.min(v)), 2)] for key, v in figures.items()
        }
    return rows


def zone_plate():
    yy, xx = np.mgrid[0:PLATE, 0:PLATE].astype(np.float64)
    c = (PLATE - 1) / 2
    return np.uint8(
        np.clip(np.round(127.5 + 127.5 * np.cos(np.pi * ((xx - c) ** 2 + (yy - c) ** 2) / PLATE)), 0, 255)
    )


def measure_zone_plate() -> dict:
    from PIL import Image

    from bzna_tf.ops import warp_rgb

    plate = zone_plate()
    rgb = np.repeat(plate[..., None], 3, axis=-1)
    power = 127.5**2 / 2
    c = (PLATE - 1) / 2
    rows = {}
    for k in FACTORS:
        n = PLATE // k
        m = resize_matrix((PLATE, PLATE), (n, n))
        src = (np.arange(n) + 0.5) * k - 0.5  # output pixel centres in the source
        radius = np.hypot(*np.meshgrid(src - c, src - c, indexing="ij"))
        r_nyquist = (PLATE / 2) / k
        alias = (radius >= 1.15 * r_nyquist) & (radius <= 250)
        passband = radius <= r_nyquist / 2
        ideal = 127.5 * np.cos(np.pi * radius**2 / PLATE)
        outputs = {
            "off": warp_rgb(rgb, m, (n, n)).numpy()[..., 0],
            "on": warp_rgb(rgb, m, (n, n), antialias=True).numpy()[..., 0],
            "pillow": np.asarray(Image.fromarray(plate).resize((n, n), Image.BILINEAR, reducing_gap=None)),
        }
        row = {}
        for name, out in outputs.items():
            ac = np.asarray(out, np.float64) - 127.5
            row[f"{name}_alias_db"] = round(float(10 * np.log10(np.mean(ac[alias] ** 2) / power)), 1)
            # The kept amplitude: least-squares gain of the output against the ideal samples.
            gain = np.sum(ac[passband] * ideal[passband]) / np.sum(ideal[passband] ** 2)
            row[f"{name}_passband"] = round(float(gain), 3)
        rows[str(k)] = row
    return rows


def measure_cost(repeats: int = 5) -> dict:
    from bzna_tf.ops import warp_yuv420

    rng = np.random.default_rng(0)
    n, side = 8, 1024
    y = rng.integers(0, 256, (n, side, side), dtype=np.uint8)
    cb = rng.integers(0, 256, (n, side // 2, side // 2), dtype=np.uint8)
    cr = rng.integers(0, 256, (n, side // 2, side // 2), dtype=np.uint8)
    rows = {}
    for s in (1.0, 1.5, 2.0, 3.0, 4.0):
        crop = 224 * s
        offset = (side - crop) / 2 + 0.5 * s - 0.5
        m = np.float32([[s, 0, offset], [0, s, offset], [0, 0, 1]])
        row = {}
        for aa in (False, True):
            warp_yuv420(y, cb, cr, m, (224, 224), antialias=aa).numpy()  # warm-up
            best = float("inf")
            for _ in range(repeats):
                t = time.process_time()
                warp_yuv420(y, cb, cr, m, (224, 224), antialias=aa).numpy()
                best = min(best, (time.process_time() - t) / n)
            row["on" if aa else "off"] = round(best * 1e3, 2)
        row["ratio"] = round(row["on"] / row["off"], 2)
        rows[str(s)] = row
    return rows


def plot_quality(out: dict, path: str, tensorflow: str) -> None:
    """The zone plate reduced 3x (off, on, Pillow) and the PSNR against Pillow per reduction."""
    import _plot
    from PIL import Image

    from bzna_tf.ops import warp_rgb

    plate = zone_plate()
    rgb = np.repeat(plate[..., None], 3, axis=-1)
    k = 3
    n = PLATE // k
    m = resize_matrix((PLATE, PLATE), (n, n))
    panels = {
        "point sampling (antialias=False)": warp_rgb(rgb, m, (n, n)).numpy()[..., 0],
        "antialias=True": warp_rgb(rgb, m, (n, n), antialias=True).numpy()[..., 0],
        "Pillow (BILINEAR, reducing_gap=None)": np.asarray(
            Image.fromarray(plate).resize((n, n), Image.BILINEAR, reducing_gap=None)
        ),
    }
    # 7 inches at 100 dpi: about the docs' page width, so that 9-point text reads at about 12 pixels.
    fig = _plot.figure(7, 6.6)
    zp = out["zone_plate"][str(k)]
    aliasing = {
        "point sampling (antialias=False)": zp["off_alias_db"],
        "antialias=True": zp["on_alias_db"],
        "Pillow (BILINEAR, reducing_gap=None)": zp["pillow_alias_db"],
    }
    fig.text(
        0.5, 0.965, f"a {PLATE} x {PLATE} zone plate reduced {k} times by warp_rgb", ha="center", fontsize=11
    )
    for i, (title, image) in enumerate(panels.items()):
        ax = fig.add_axes([0.02 + i * 0.33, 0.6, 0.3, 0.3])
        ax.imshow(
            np.clip(image, 0, 255).astype(np.uint8), cmap="gray", vmin=0, vmax=255, interpolation="nearest"
        )
        ax.set_title(title.replace(" (", "\n("), fontsize=9)
        ax.text(
            0.5,
            -0.04,
            f"aliased power {aliasing[title]} dB",
            transform=ax.transAxes,
            ha="center",
            va="top",
            fontsize=9,
        )
        ax.axis("off")
    ax = fig.add_axes([0.1, 0.13, 0.86, 0.36])
    factors = [int(f) for f in out["psnr"]]
    series = {
        "rgb_off": ("warp_rgb, off", "o--"),
        "rgb_on": ("warp_rgb, on", "o-"),
        "yuv_off": ("loader (4:2:0), off", "s--"),
        "yuv_on": ("loader (4:2:0), on", "s-"),
        "tf_antialias": ("tf.image.resize(antialias=True)", "^:"),
    }
    for key, (label, style) in series.items():
        ax.plot(factors, [out["psnr"][str(f)][key][0] for f in factors], style, label=label, ms=5)
    ax.set_xticks(factors)
    ax.set_xticklabels([f"{f}x" for f in factors])
    ax.tick_params(labelsize=9)
    ax.set_xlabel("reduction", fontsize=10)
    ax.set_ylabel("PSNR against Pillow, dB\n(mean of 12 photos)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc="center right")
    _plot.save(fig, path, tensorflow)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fixture", type=Path, default=FIXTURE, help="the original-tools fixture folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--chroma",
        choices=("lsq", "average"),
        default="lsq",
        help="the loader path's 4:2:0 chroma: lsq (default, as every named quality converts) or average",
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw the quality figures (matplotlib)")
    a = p.parse_args(argv)
    if not (a.fixture / "sources").is_dir():
        p.error(f"the fixture is not at {a.fixture} (give --fixture)")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from bzna_tf.ops import load_library

    load_library()  # build outside the timings
    out = {
        "psnr": measure_psnr(a.fixture, a.chroma),
        "chroma": a.chroma,
        "zone_plate": measure_zone_plate(),
        "warp_ms": measure_cost(),
        "tensorflow": tf.__version__,
    }
    if a.plot:
        plot_quality(out, a.plot, tf.__version__)
    if a.json:
        print(json.dumps(out))
        return 0
    print("PSNR against Pillow's antialiased bilinear, dB, mean (min) over the photos")
    print(f"{'factor':>6} {'rgb off':>14} {'rgb on':>14} {'yuv off':>14} {'yuv on':>14} {'tf aa':>14}")
    for k, row in out["psnr"].items():
        cells = [f"{v[0]:.2f} ({v[1]:.2f})" for v in row.values()]
        print(f"{k:>6} " + " ".join(f"{c:>14}" for c in cells))
    print("zone plate: aliasing power (dB of the plate's power) and passband gain")
    for k, row in out["zone_plate"].items():
        print(f"{k:>6} " + "  ".join(f"{name} {v}" for name, v in row.items()))
    print("warp_yuv420, 1024^2 -> 224^2, ms per image (one thread): off, on, ratio")
    for s, row in out["warp_ms"].items():
        print(f"{s:>6} {row['off']:>8} {row['on']:>8} {row['ratio']:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
