"""File size and CPU cost of the two per-image layouts, "benzina" and "compact".

    python benchmarks/layouts.py [--json] [--quality training | --crf 10 --preset medium] [--repeat 3]

Images: the twelve photographs of the original-tools fixture
(``../shared/fixtures/benzina-original/sources``: nine ImageNet JPEGs, hopper,
retina, rocket). The small sizes are real photo content, not noise: each
photo's centred square crop resized (bicubic) to 32 x 32, 64 x 64 and
256 x 256. The "imagenet" row is the nine ImageNet JPEGs at their own size
(333 x 500 to 600 x 535; the one over 512 gets a thumbnail).

For each size and layout the images are encoded with ``encode_image`` (one
x265 thread, the given CRF and preset, averaged chroma; or ``--quality NAME``,
a named quality's settings) and written by ``BznaWriter`` to a real
.bzna (target and name per image): ``bytes`` is that file's size over the
image count, so every per-picture and per-sample box is counted. ``encode_ms``
is the mean wall time of ``encode_image`` (RGB in, thumbnail resize included),
``decode_ms`` the mean of the best of ``--repeat`` FFmpeg decodes (one thread,
``bzna_tf.decode.decode_annexb``; process CPU time, which other jobs on a
shared machine disturb less than wall time) of the picture a training pipeline reads
(the ``bzna_thumb`` track), ``psnr_y`` the mean luma PSNR of that picture's
image rectangle against the BT.601 luma of what was encoded, and ``frames``
the distinct coded frame sizes of that track. ``png_bytes`` is the same RGB
images as PNG (FFmpeg's encoder, mixed prediction), for reference.

The ``rounding`` part codes the nine ImageNet photographs (input pictures) in
frames rounded to 512 (the benzina layout), 64 and 8 (with the compact
layout's 144 minimum and no x265 info SEI in all three), to choose the compact
layout's block: sample bytes, encode and decode ms, distinct frame sizes.

``--json`` prints one JSON object: ``{"settings", "sizes": {size: {layout:
{...}, "png_bytes"}}, "rounding": {block: {...}}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's bzna_tf, not another installed one
SOURCES = ROOT.parent / "shared" / "fixtures" / "benzina-original" / "sources"
LAYOUTS = ("benzina", "compact")
SQUARES = (32, 64, 256)


def load_photos():
    from bzna_tf.convert import decode_image

    paths = sorted(p for p in SOURCES.iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))
    if not paths:
        raise SystemExit(f"no photographs in {SOURCES} (shared/ must sit beside the repo)")
    return [(p.name, decode_image(p.read_bytes())) for p in paths]


def centre_square(rgb, side):
    from bzna_tf.convert import resize_rgb

    h, w = rgb.shape[:2]
    s = min(h, w)
    y, x = (h - s) // 2, (w - s) // 2
    return resize_rgb(np.ascontiguousarray(rgb[y : y + s, x : x + s]), (side, side))


def image_sets(photos):
    sets = {f"{s}x{s}": [(n, centre_square(rgb, s)) for n, rgb in photos] for s in SQUARES}
    sets["imagenet"] = [(n, rgb) for n, rgb in photos if n.startswith("n0")]
    return sets


def png_bytes(rgb) -> int:
    import av

    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = rgb.shape[1], rgb.shape[0], "rgb24"
    ctx.options = {"pred": "mixed"}
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    return sum(len(bytes(p)) for p in ctx.encode(frame) + ctx.encode(None))


def luma(rgb):
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    return np.clip(np.floor(0.299 * r + 0.587 * g + 0.114 * b + 0.5), 0, 255)


def psnr(a, b) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)


def best_decode_ms(annexb, repeat):
    from bzna_tf.decode import decode_annexb

    decode_annexb(annexb)  # warm the thread's decoder context
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        planes = decode_annexb(annexb)
        best = min(best, time.process_time() - t)
    return best * 1000, planes


def measure_layout(images, layout, args, folder):
    """Encode, write, read back, decode: the figures of one size and layout."""
    from bzna_tf.convert import encode_image, resize_rgb
    from bzna_tf.format import BznaFile, BznaWriter

    path = os.path.join(folder, f"{layout}.bzna")
    encode_s, thumbs = [], []
    with BznaWriter(path) as w:
        for i, (name, rgb) in enumerate(images):
            t = time.perf_counter()
            inp, thumb = encode_image(rgb, **args.options, threads=1, layout=layout)
            encode_s.append(time.perf_counter() - t)
            w.append(inp, thumb=thumb, target=i, filename=name)
            thumbs.append(rgb if thumb is None else resize_rgb(rgb, thumb.size))
    decode_ms, psnrs, frames = [], [], set()
    with BznaFile(path) as f:
        for i, source in enumerate(thumbs):
            track = f.sample(i).thumb
            ms, (y, _, _) = best_decode_ms(track.annexb(), args.repeat)
            decode_ms.append(ms)
            w_, h_ = track.size
            psnrs.append(psnr(y[:h_, :w_], luma(source)))
            frames.add(track.coded_size)
    return {
        "bytes": os.path.getsize(path) / len(images),
        "encode_ms": 1000 * float(np.mean(encode_s)),
        "decode_ms": float(np.mean(decode_ms)),
        "psnr_y": float(np.mean(psnrs)),
        "frames": sorted(frames),
    }


def measure_rounding(images, args):
    """Input pictures of the ImageNet photographs in frames rounded to 512, 64 and 8."""
    from bzna_tf.convert.encode import coded_size_for, compact_coded_size, encode_picture
    from bzna_tf.format import to_annexb

    out = {}
    for block in (512, 64, 8):
        sizes, enc, dec, pixels, frames = [], [], [], [], set()
        for _, rgb in images:
            size = (rgb.shape[1], rgb.shape[0])
            frame = coded_size_for(size) if block == 512 else compact_coded_size(size, block=block)
            t = time.perf_counter()
            p = encode_picture(rgb, coded_size=frame, **args.options, threads=1, layout="compact")
            enc.append(time.perf_counter() - t)
            sizes.append(len(p.sample))
            dec.append(best_decode_ms(to_annexb(p.sample, p.hvcc), args.repeat)[0])
            pixels.append(frame[0] * frame[1])
            frames.add(frame)
        out[str(block)] = {
            "sample_bytes": float(np.mean(sizes)),
            "encode_ms": 1000 * float(np.mean(enc)),
            "decode_ms": float(np.mean(dec)),
            "frame_pixels": float(np.mean(pixels)),
            "distinct_frames": len(frames),
        }
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--crf", type=float, default=10, help="x265 CRF (default 10, the package's default)")
    p.add_argument("--preset", default="medium", help="x265 preset (default medium)")
    p.add_argument("--quality", help="a named quality's settings instead of --crf and --preset")
    p.add_argument("--no-rounding", action="store_true", help="leave out the frame-rounding comparison")
    p.add_argument("--repeat", type=int, default=3, help="decodes per picture; the best one counts")
    args = p.parse_args()
    if args.quality:
        from bzna_tf.convert import quality_options

        args.options = quality_options(args.quality)
    else:
        args.options = {"crf": args.crf, "preset": args.preset}

    photos = load_photos()
    sets = image_sets(photos)
    result = {
        "settings": {
            "quality": args.quality,
            **args.options,
            "x265_threads": 1,
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "photos": [n for n, _ in photos],
        },
        "sizes": {},
    }
    for label, images in sets.items():
        row = {"images": len(images), "png_bytes": float(np.mean([png_bytes(rgb) for _, rgb in images]))}
        with tempfile.TemporaryDirectory() as folder:
            for layout in LAYOUTS:
                row[layout] = measure_layout(images, layout, args, folder)
        row["compact_over_benzina"] = row["compact"]["bytes"] / row["benzina"]["bytes"]
        result["sizes"][label] = row
        if not args.json:
            for layout in LAYOUTS:
                r = row[layout]
                print(
                    f"{label:>9} {layout:>8}: {r['bytes'] / 1000:8.2f} kB/picture "
                    f"(PNG {row['png_bytes'] / 1000:.2f} kB), encode {r['encode_ms']:6.1f} ms, "
                    f"decode {r['decode_ms']:5.2f} ms, Y PSNR {r['psnr_y']:.1f} dB, frames {r['frames'][:4]}"
                    f"{' ...' if len(r['frames']) > 4 else ''}",
                    flush=True,
                )
    if not args.no_rounding:
        result["rounding"] = measure_rounding(sets["imagenet"], args)
    if args.json:
        print(json.dumps(result))
    else:
        for block, r in result.get("rounding", {}).items():
            print(
                f"frames rounded to {block:>3}: {r['sample_bytes'] / 1000:7.2f} kB sample, encode "
                f"{r['encode_ms']:6.1f} ms, decode {r['decode_ms']:5.2f} ms, "
                f"{r['frame_pixels'] / 1000:.0f} kpixel frames, {r['distinct_frames']} distinct"
            )


if __name__ == "__main__":
    main()
