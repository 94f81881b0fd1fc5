"""The GPU kit's anchor sets: the benchmark images at three CRFs, each beside JPEGs of equal PSNR.

Issue 37, item 4: the decoders compared at matched quality. The first ``n``
ImageNet-like images of the benchmark set (``kit_bench.bench_image``, the
same seed) are encoded by bzna_tf's converter at the default quality's
settings (``training``: x265 superfast, least-squares chroma, psycho-visual
tuning off) at three CRFs, ``ANCHOR_CRFS``: the default's (30) and one 5 steps
either side, in the benzina layout (each picture in a 512 x 512 frame, what
``bench.bzna`` is). For each set, the JPEG quality whose RGB PSNR on the same
images is nearest the set's, found by bisection over qualities 1 to 100
(``match_jpeg_quality``), in 4:2:0 (what datasets store) unless even quality
100 falls short, then in 4:4:4 (``match_jpeg``: at CRF 25, JPEG's plain
chroma halving loses more than x265's least-squares chroma); those JPEGs are
the nvJPEG anchor's input at that CRF. Every PSNR is measured as ``kit_bench``
measures the benchmark set's: the mean over pictures of the RGB PSNR against
the generated image, the .bzna pictures as the loader makes them (FFmpeg
decode, ``warp_yuv420``), the JPEGs as TensorFlow decodes them
(libjpeg-turbo).

The runner (``kit_anchors.py``) times, at each CRF, the core's decode and
decode + warp, NVIDIA's own binding (PyNvVideoCodec) decoding the same
bitstreams, and nvJPEG decoding + resizing the matched JPEGs.

Sets are cached under ``cache_root() / "kit-anchors-<key>"`` as the
benchmark set is (the key hashes this module's code too).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from pathlib import Path

import numpy as np
from kit_bench import (
    BENCH_CRF,
    BENCH_QUALITY,
    BENCH_SEED,
    _bench_key,
    _bench_meta,
    _psnr,
    _quality,
    _source_photos,
    bench_image,
    cached_folder,
)

from bzna_tf.convert.encode import QUALITY_PRESETS

__all__ = ["ANCHOR_CRFS", "ANCHOR_IMAGES", "anchor_files", "anchor_sets", "match_jpeg", "match_jpeg_quality"]

# The default quality's CRF and one 5 steps either side: about 1.5 times the bytes each way (x265 halves
# the rate every 6 CRF steps; measured 1.5x on these images), so the comparison spans what a user would
# choose rather than one point. Measured at 26 / 31 / 36 (the default was 31 then): CRF 26 beyond JPEG
# 4:2:0's reach (4:4:4 matches it), CRF 31 at about JPEG quality 89, CRF 36 at about quality 71, where
# low-quality JPEG datasets sit.
ANCHOR_CRFS = tuple(BENCH_CRF + d for d in (-5, 0, 5))
# Images per set: the first of the benchmark set's ImageNet-like group. Three .bzna and three JPEG sets
# of this many take about 7 MiB: with the rest of the kit (48 MiB at CRF 30) and the checkout that each
# device call carries too (5 MiB), within a call's 64 MiB. A batch of 256 cycles through them.
ANCHOR_IMAGES = 32
ANCHOR_LAYOUT = "benzina"


def _log(log, message):
    if log is not None:
        print(f"gpu_kit: {message}", file=log, flush=True)


def set_name(crf) -> str:
    """The anchor set's name (its files: ``<name>.bzna``, ``<name>_meta.npz``, ``<name>_jpeg.npz``)."""
    return f"anchor_crf{crf:g}"


def anchor_files(crfs=ANCHOR_CRFS) -> tuple[str, ...]:
    """The files an anchor folder holds, besides ``anchors.json``."""
    return tuple(f"{set_name(c)}{suffix}" for c in crfs for suffix in (".bzna", "_meta.npz", "_jpeg.npz"))


def jpeg_point(originals, quality: int, chroma: str = "4:2:0") -> dict:
    """JPEGs of ``originals`` at ``quality`` (TensorFlow's encoder, as the kit's q90 anchor; ``chroma``
    "4:2:0" or "4:4:4"): their bytes, the mean bytes per picture and the mean RGB PSNR of their
    TensorFlow decode against the originals."""
    import tensorflow as tf

    subsample = {"4:2:0": True, "4:4:4": False}[chroma]
    jpegs = [
        tf.io.encode_jpeg(img, quality=int(quality), chroma_downsampling=subsample).numpy()
        for img in originals
    ]
    psnr = [_psnr(tf.io.decode_jpeg(j, channels=3).numpy(), o) for j, o in zip(jpegs, originals, strict=True)]
    return {
        "quality": int(quality),
        "chroma": chroma,
        "jpegs": jpegs,
        "bytes_per_picture": round(sum(len(j) for j in jpegs) / len(jpegs), 1),
        "rgb_psnr_db": round(float(np.mean(psnr)), 2),
    }


def match_jpeg(originals, target_db: float) -> dict:
    """The JPEGs of equal PSNR: 4:2:0 (what datasets store) where its qualities reach ``target_db``, else
    4:4:4 (JPEG's chroma halving alone costs more than x265's least-squares chroma at low CRFs).

    Returns:
      ``match_jpeg_quality``'s result for the chroma used, with ``chroma`` and, where 4:4:4 was
      needed, ``4:2:0_best_db`` (4:2:0's PSNR at quality 100).
    """
    cache: dict = {}

    def measure(chroma):
        def at(q):
            if (chroma, q) not in cache:
                cache[chroma, q] = jpeg_point(originals, q, chroma)
            return cache[chroma, q]

        return at

    match = match_jpeg_quality(target_db, measure("4:2:0"))
    match["chroma"] = "4:2:0"
    if match["above"] is None:  # even quality 100 is below the target
        best = match["below"]["rgb_psnr_db"]
        full = match_jpeg_quality(target_db, measure("4:4:4"))
        if abs(full["chosen"]["rgb_psnr_db"] - target_db) < abs(best - target_db):
            match = {**full, "chroma": "4:4:4", "4:2:0_best_db": best}
    return match


def match_jpeg_quality(target_db: float, measure, lowest: int = 1, highest: int = 100) -> dict:
    """The JPEG quality whose PSNR is nearest ``target_db``: bisection for the lowest quality reaching it.

    Args:
      target_db: the PSNR to match (the H.265 set's).
      measure: quality -> a dict with at least ``rgb_psnr_db`` (``jpeg_point`` of the same images);
        each quality is measured once.
      lowest, highest: the qualities searched.

    Returns:
      ``chosen`` (the nearest of the two qualities around the target: its ``measure`` result),
      ``below`` and ``above`` (the qualities either side, ``above`` = ``below`` + 1: the lowest one
      reaching the target; None where the target lies beyond the range), ``bracketed`` (both
      exist), ``measured`` (quality -> PSNR of every quality tried).
    """
    seen: dict[int, dict] = {}

    def at(q):
        if q not in seen:
            seen[q] = measure(q)
        return seen[q]["rgb_psnr_db"]

    if at(highest) < target_db:  # even the best JPEG is below the target
        below, above = highest, None
    elif at(lowest) >= target_db:  # even the worst JPEG reaches it
        below, above = None, lowest
    else:
        lo, hi = lowest, highest  # at(lo) < target <= at(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if at(mid) >= target_db:
                hi = mid
            else:
                lo = mid
        below, above = lo, hi
    candidates = [q for q in (below, above) if q is not None]
    # PSNRs are rounded to 0.01 dB: so are the distances, and a tie goes to the higher quality.
    chosen = min(candidates, key=lambda q: (round(abs(at(q) - target_db), 2), -q))
    point = lambda q: None if q is None else {"quality": q, "rgb_psnr_db": at(q)}  # noqa: E731
    return {
        "target_db": target_db,
        "chosen": seen[chosen],
        "below": point(below),
        "above": point(above),
        "bracketed": below is not None and above is not None,
        "measured": {q: seen[q]["rgb_psnr_db"] for q in sorted(seen)},
    }


def _anchor_key(n: int, seed: int, crfs, fixture: Path) -> str:
    h = hashlib.sha256(_bench_key(n, seed, 0, fixture).encode())
    for part in (
        crfs,
        ANCHOR_LAYOUT,
        *(
            inspect.getsource(f)
            for f in (set_name, jpeg_point, match_jpeg, match_jpeg_quality, _make_anchors)
        ),
    ):
        h.update(repr(part).encode() + b"\0")
    return h.hexdigest()[:16]


def _make_anchors(folder: Path, n: int, seed: int, crfs, fixture: Path, workers, log) -> dict:
    """Encodes each CRF's .bzna, finds and writes its matched JPEGs into folder; anchors.json's dict."""
    import tensorflow as tf

    from bzna_tf.convert import EncodeOptions, Item, convert

    photos = _source_photos(fixture)
    originals = [bench_image(seed, i, photos, "imagenet") for i in range(n)]
    pngs = [tf.io.encode_png(img).numpy() for img in originals]
    options = QUALITY_PRESETS[BENCH_QUALITY]
    sets = []
    for crf in crfs:
        name = set_name(crf)
        _log(
            log,
            f"anchor set {name}: {n} images, x265 {options['preset']} CRF {crf:g}, {ANCHOR_LAYOUT} layout",
        )
        items = [
            Item(filename=f"{name}_{i:05d}.png", target=i % 10, data=p, origin=f"{name} {i}")
            for i, p in enumerate(pngs)
        ]
        convert(
            items,
            folder / f"{name}.bzna",
            encoding=EncodeOptions(quality=BENCH_QUALITY, crf=crf, layout=ANCHOR_LAYOUT),
            workers=workers,
            order="source",
            progress=log is not None,
            log=log,
        )
        _bench_meta(folder, name, seed)
        quality = _quality(folder / f"{name}.bzna", originals)
        match = match_jpeg(originals, quality["rgb_psnr_db"])
        chosen = match["chosen"]
        offsets = np.cumsum([0] + [len(j) for j in chosen["jpegs"]]).astype(np.int64)
        data = np.frombuffer(b"".join(chosen["jpegs"]), np.uint8)
        np.savez(folder / f"{name}_jpeg.npz", data=data, offsets=offsets)
        _log(
            log,
            f"anchor set {name}: {quality['picture_bytes_per_picture'] / 1e3:.1f} kB, "
            f"{quality['rgb_psnr_db']} dB; "
            f"JPEG q{chosen['quality']} {chosen['chroma']}: {chosen['bytes_per_picture'] / 1e3:.1f} kB, "
            f"{chosen['rgb_psnr_db']} dB",
        )
        sets.append(
            {
                "name": name,
                "crf": crf,
                "images": n,
                "layout": ANCHOR_LAYOUT,
                **quality,
                "jpeg": {
                    "file": f"{name}_jpeg.npz",
                    "quality": chosen["quality"],
                    "chroma": chosen["chroma"],
                    "bytes_per_picture": chosen["bytes_per_picture"],
                    "rgb_psnr_db": chosen["rgb_psnr_db"],
                    "below": match["below"],
                    "above": match["above"],
                    "bracketed": match["bracketed"],
                    "qualities_tried": {str(q): v for q, v in match["measured"].items()},
                    **({"best_4:2:0_db": match["4:2:0_best_db"]} if "4:2:0_best_db" in match else {}),
                },
            }
        )
    return {
        "images": n,
        "seed": seed,
        "quality": BENCH_QUALITY,
        **options,
        "crfs": list(crfs),
        "jpeg_encoder": "tf.io.encode_jpeg (libjpeg-turbo): 4:2:0, or 4:4:4 where 4:2:0 cannot reach it",
        "psnr": "mean over pictures of the RGB PSNR against the generated image; the .bzna pictures as the "
        "loader makes them (FFmpeg, warp_yuv420), the JPEGs as tf.io.decode_jpeg decodes them",
        "sets": sets,
    }


def anchor_sets(
    n: int = ANCHOR_IMAGES,
    *,
    seed: int = BENCH_SEED,
    crfs=ANCHOR_CRFS,
    fixture: Path,
    workers=None,
    regenerate: bool = False,
    log=None,
) -> Path:
    """The cached anchor sets' folder (generated when missing); one builder at a time."""

    def make(tmp: Path) -> None:
        start = time.perf_counter()
        info = _make_anchors(tmp, n, seed, crfs, fixture, workers, log)
        info.update(key=key, seconds=round(time.perf_counter() - start, 1))
        (tmp / "anchors.json").write_text(json.dumps(info, indent=1))
        _log(log, f"anchor sets: {len(crfs)} CRFs of {n} images in {info['seconds']:.0f} s")

    key = _anchor_key(n, seed, crfs, fixture)
    files = (*anchor_files(crfs), "anchors.json")
    return cached_folder(f"kit-anchors-{key}", files, make, regenerate, log, "anchor sets")
