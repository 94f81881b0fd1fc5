"""The GPU kit's benchmark sets: ImageNet-like and small pictures, as .bzna in both layouts and as JPEG q90.

Two groups of images are made from a fixed seed: random crops, rescales,
flips and colour changes of the original-tools fixture's source photographs,
and procedural textures. ``imagenet``: ImageNet-like sizes (at most 512 on a
side, so each is one picture, its own thumbnail); ``small``: 32 to 96 pixels
(thumbnail datasets). Each image is encoded as JPEG quality 90 (the anchor's
input) and, from the same lossless image, by bzna_tf's converter (its parallel
workers, x265) at the library's default quality (``BENCH_QUALITY``) in each
layout (``BENCH_SETS``): ``benzina`` (every picture in a 512 x 512 frame) and
``compact`` (frames rounded to 64, at least 144). Beside each .bzna: each
picture's size, RandomResizedCrop matrices onto 224x224 for a few epochs (the
runner has no TensorFlow to compute them), and the MD5 of its CPU-decoded
planes. ``bench.json`` says each set's bytes per picture and RGB PSNR (the
picture as the loader makes it against the image), and the JPEGs', so that a
GPU run compares NVDEC and nvJPEG at known quality.

Encoding takes a minute or two on a few cores, so sets are cached under
``cache_root() / "kit-bench-<key>"``, the key hashing the generator's
parameters, code, inputs and encoder.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bzna_tf.convert.encode import DEFAULT_QUALITY, QUALITY_PRESETS
from bzna_tf.ops import _build

__all__ = [
    "BENCH_CRF",
    "BENCH_FILES",
    "BENCH_QUALITY",
    "BENCH_SEED",
    "BENCH_SETS",
    "bench_bytes",
    "bench_image",
    "bench_set",
]

BENCH_SEED = 20250
# The converter's default quality and its CRF; the kit raises the CRF only when its size budget forces it.
BENCH_QUALITY = DEFAULT_QUALITY
BENCH_CRF = QUALITY_PRESETS[BENCH_QUALITY]["crf"]
# ImageNet-like sizes (height, width), each <= 512 per side, so one 512x512 coded picture each.
BENCH_SIZES = (
    (375, 500),
    (500, 375),
    (333, 500),
    (500, 333),
    (512, 512),
    (336, 448),
    (448, 336),
    (400, 500),
    (281, 500),
    (500, 406),
    (427, 512),
    (256, 256),
    (384, 512),
    (512, 384),
    (300, 400),
    (500, 500),
)
# Small pictures (height, width): what a thumbnail dataset holds (CIFAR's 32, downsampled ImageNet's 64).
SMALL_SIZES = ((32, 32), (48, 48), (64, 64), (56, 80), (80, 56), (96, 96), (72, 96), (96, 72))
GROUPS = {"imagenet": BENCH_SIZES, "small": SMALL_SIZES}
# The .bzna sets: name -> (image group, layout). "bench" is the set the runner times in full.
BENCH_SETS = {
    "bench": ("imagenet", "benzina"),
    "bench_compact": ("imagenet", "compact"),
    "small": ("small", "benzina"),
    "small_compact": ("small", "compact"),
}
JPEG_FILES = {"imagenet": "bench_jpeg.npz", "small": "small_jpeg.npz"}
BENCH_EPOCHS = 4  # crop matrices per image, for cycled batches
BENCH_OUT = (224, 224)
JPEG_QUALITY = 90
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def _log(log, message):
    if log is not None:
        print(f"gpu_kit: {message}", file=log, flush=True)


def _source_photos(fixture: Path) -> list[np.ndarray]:
    from bzna_tf.convert import decode_image

    files = sorted(p for p in (fixture / "sources").iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))
    if not files:
        raise FileNotFoundError(f"no source photographs (*.jpg, *.jpeg) in {fixture / 'sources'}")
    return [decode_image(p.read_bytes()) for p in files]


def _photo_variant(rng, photo: np.ndarray, size) -> np.ndarray:
    """A random crop of a photograph, resized to ``size`` (h, w), maybe flipped, with colour changes."""
    from bzna_tf.convert import resize_rgb

    ph, pw = photo.shape[:2]
    h, w = size
    area = rng.uniform(0.3, 1.0) * ph * pw
    aspect = (w / h) * np.exp(rng.uniform(-0.15, 0.15))
    cw = int(min(pw, max(16, round(np.sqrt(area * aspect)))))
    ch = int(min(ph, max(16, round(np.sqrt(area / aspect)))))
    x0 = int(rng.integers(0, pw - cw + 1))
    y0 = int(rng.integers(0, ph - ch + 1))
    img = resize_rgb(np.ascontiguousarray(photo[y0 : y0 + ch, x0 : x0 + cw]), (w, h)).astype(np.float32)
    if rng.random() < 0.5:
        img = img[:, ::-1]
    if rng.random() < 0.1:
        img = img[::-1]
    grey = img.mean(axis=2, keepdims=True)
    img = grey + (img - grey) * rng.uniform(0.6, 1.3)  # saturation
    img = img * rng.uniform(0.85, 1.15, 3) + rng.uniform(-20, 20)  # white balance, brightness
    img = 255.0 * (np.clip(img, 0, 255) / 255.0) ** rng.uniform(0.8, 1.25)  # gamma
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def _texture(rng, size) -> np.ndarray:
    """A procedural texture of ``size`` (h, w): gradients, waves, a checkerboard or rings, mild noise."""
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.zeros((h, w, 3), np.float32)
    base = rng.uniform(40, 200, 3)
    gx, gy = rng.uniform(-0.25, 0.25, 2)
    for c in range(3):
        out[..., c] = base[c] + gx * (xx - w / 2) + gy * (yy - h / 2)
    for _ in range(int(rng.integers(2, 5))):
        theta = rng.uniform(0, np.pi)
        freq = rng.uniform(0.01, 0.12)
        phase = rng.uniform(0, 2 * np.pi)
        wave = np.sin(freq * (np.cos(theta) * xx + np.sin(theta) * yy) + phase)
        out += wave[..., None] * rng.uniform(-40, 40, 3)
    kind = rng.integers(0, 3)
    if kind == 0:
        cell = int(rng.integers(8, 48))
        checker = ((xx // cell + yy // cell) % 2)[..., None]
        out = out * (1 - 0.35 * checker) + 0.35 * checker * rng.uniform(0, 255, 3)
    elif kind == 1:
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rings = np.sin(np.hypot(xx - cx, yy - cy) * rng.uniform(0.05, 0.3))
        out += rings[..., None] * rng.uniform(-30, 30, 3)
    if rng.random() < 0.5:
        out += rng.normal(0, 2.0, out.shape)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def bench_image(seed: int, index: int, photos, group: str = "imagenet") -> np.ndarray:
    """Image ``index`` of a group (``GROUPS``): a photograph variant (80%) or a texture (20%)."""
    sizes = GROUPS[group]
    rng = np.random.default_rng([seed, index] if group == "imagenet" else [seed, index, len(sizes)])
    size = sizes[int(rng.integers(0, len(sizes)))]
    if rng.random() < 0.8:
        return _photo_variant(rng, photos[int(rng.integers(0, len(photos)))], size)
    return _texture(rng, size)


def _bench_key(n: int, seed: int, crf: float, fixture: Path) -> str:
    """A hash of the benchmark generator's parameters, code, inputs and encoder."""
    import av

    from bzna_tf.convert import encode, images

    h = hashlib.sha256()
    parts = [
        n,
        seed,
        crf,
        BENCH_QUALITY,
        QUALITY_PRESETS[BENCH_QUALITY],
        BENCH_SETS,
        GROUPS,
        BENCH_SIZES,
        BENCH_EPOCHS,
        BENCH_OUT,
        JPEG_QUALITY,
        av.__version__,
        *(inspect.getsource(f) for f in (_photo_variant, _texture, bench_image, _make_bench, _bench_meta)),
        inspect.getsource(_quality),
        inspect.getsource(encode),
        inspect.getsource(images),
    ]
    for part in parts:
        h.update(repr(part).encode() + b"\0")
    for p in sorted((fixture / "sources").iterdir()):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _make_bench(folder: Path, n: int, seed: int, crf: float, fixture: Path, workers, log) -> dict:
    """Generates each group's images, their JPEGs and a .bzna per set (the converter's workers) into folder.

    Returns:
      What ``bench.json`` says of the sets and the JPEGs: bytes per picture, RGB PSNR.
    """
    import tensorflow as tf

    from bzna_tf.convert import EncodeOptions, Item, convert

    photos = _source_photos(fixture)
    options = QUALITY_PRESETS[BENCH_QUALITY]
    what = f"quality {BENCH_QUALITY} (x265 {options['preset']}, CRF {crf:g}, {options['chroma']} chroma)"
    info = {"sets": {}, "jpeg": {}}
    for group in GROUPS:
        originals = [bench_image(seed, i, photos, group) for i in range(n)]
        jpegs = [tf.io.encode_jpeg(img, quality=JPEG_QUALITY).numpy() for img in originals]
        offsets = np.cumsum([0] + [len(j) for j in jpegs]).astype(np.int64)
        np.savez(folder / JPEG_FILES[group], data=np.frombuffer(b"".join(jpegs), np.uint8), offsets=offsets)
        decoded = [tf.io.decode_jpeg(j, channels=3).numpy() for j in jpegs]
        info["jpeg"][group] = {
            "quality": JPEG_QUALITY,
            "bytes_per_picture": round(float(offsets[-1]) / n, 1),
            "rgb_psnr_db": round(
                float(np.mean([_psnr(d, o) for d, o in zip(decoded, originals, strict=True)])), 2
            ),
        }
        # The converter encodes the same images losslessly given (PNG), not the JPEGs: each format's
        # loss is its own, measured against the same originals.
        pngs = [tf.io.encode_png(img).numpy() for img in originals]
        for name, (set_group, layout) in BENCH_SETS.items():
            if set_group != group:
                continue
            _log(log, f"benchmark set {name}: {n} {group} images, {layout} layout, {what}")
            items = [
                Item(filename=f"{name}_{i:05d}.png", target=i % 10, data=p, origin=f"{name} {i}")
                for i, p in enumerate(pngs)
            ]
            convert(
                items,
                folder / f"{name}.bzna",
                encoding=EncodeOptions(quality=BENCH_QUALITY, crf=crf, layout=layout),
                workers=workers,
                order="source",  # sample i is image i; an undecodable image stops it (on_error="raise")
                progress=log is not None,
                log=log,
            )
            info["sets"][name] = {
                "group": group,
                "layout": layout,
                "images": n,
                **_quality(folder / f"{name}.bzna", originals),
            }
            _bench_meta(folder, name, seed)
    return info


def _psnr(a, b) -> float:
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def _quality(path: Path, originals) -> dict:
    """A .bzna's bytes per picture (the file's; sample + hvcC) and RGB PSNR of the loader's pictures."""
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile
    from bzna_tf.ops.warp import warp_yuv420

    values, picture_bytes = [], 0
    with BznaFile(path) as f:
        for i, image in enumerate(originals):
            p = f.sample(i).thumb
            picture_bytes += len(p.sample) + len(p.hvcc.to_bytes())
            h, w = image.shape[:2]
            out = warp_yuv420(*decode_annexb(p.annexb()), np.eye(3), (h, w)).numpy()
            values.append(_psnr(out, image))
    return {
        "file_bytes_per_picture": round(path.stat().st_size / len(originals), 1),
        "picture_bytes_per_picture": round(picture_bytes / len(originals), 1),
        "rgb_psnr_db": round(float(np.mean(values)), 2),
    }


def _bench_meta(folder: Path, name: str, seed: int) -> None:
    """Sizes, RandomResizedCrop matrices (224 x 224, several epochs) and decoded-plane MD5s of a set."""
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile
    from bzna_tf.transforms import RandomResizedCrop

    with BznaFile(folder / f"{name}.bzna") as f:
        samples = [f.sample(i) for i in range(len(f))]
    shapes = np.array([[s.thumb.height, s.thumb.width] for s in samples], np.int64)
    coded = np.array([[s.thumb.coded_height, s.thumb.coded_width] for s in samples], np.int64)
    md5 = []
    for s in samples:
        y, cb, cr = decode_annexb(s.thumb.annexb())
        md5.append(hashlib.md5(y.tobytes() + cb.tobytes() + cr.tobytes()).hexdigest())
    rrc = RandomResizedCrop(flip_h=0.5)
    matrices = np.stack(
        [rrc.matrices(shapes, BENCH_OUT, seed=seed, epoch=e, backend="numpy") for e in range(BENCH_EPOCHS)]
    ).astype(np.float32)
    np.savez(
        folder / f"{name}_meta.npz",
        shapes=shapes,
        coded_shapes=coded,
        md5=np.array(md5),
        matrices=matrices,
        out_shape=np.array(BENCH_OUT),
        mean=np.array(MEAN),
        std=np.array(STD),
    )


BENCH_FILES = (
    *(f for name in BENCH_SETS for f in (f"{name}.bzna", f"{name}_meta.npz")),
    *JPEG_FILES.values(),
)


def bench_set(
    n: int,
    *,
    seed: int = BENCH_SEED,
    crf: float = BENCH_CRF,
    fixture: Path,
    workers=None,
    regenerate: bool = False,
    log=None,
) -> Path:
    """The cached benchmark set's folder (generated when missing); one builder at a time."""

    def make(tmp: Path) -> None:
        start = time.perf_counter()
        made = _make_bench(tmp, n, seed, crf, fixture, workers, log)
        info = {
            "images": n,
            "seed": seed,
            "quality": BENCH_QUALITY,
            **QUALITY_PRESETS[BENCH_QUALITY],
            "crf": crf,
            "key": key,
            **made,
            "seconds": time.perf_counter() - start,
        }
        (tmp / "bench.json").write_text(json.dumps(info, indent=1))
        _log(log, f"benchmark set: {n} images in {info['seconds']:.0f} s")

    key = _bench_key(n, seed, crf, fixture)
    return cached_folder(f"kit-bench-{key}", BENCH_FILES, make, regenerate, log, "benchmark set")


def cached_folder(name: str, files, make, regenerate: bool, log, what: str) -> Path:
    """``cache_root() / name``, made by ``make(tmp)`` in a temporary folder renamed into place when it
    lacks one of ``files`` (or with ``regenerate``), so that only complete sets appear under the
    final name; one builder at a time (a lock file beside it)."""
    folder = _build.cache_root() / name
    if not regenerate and all((folder / f).is_file() for f in files):
        _log(log, f"{what}: cached in {folder}")
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not regenerate and all((folder / f).is_file() for f in files):
            return folder
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{name}-"))
        try:
            make(tmp)
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    _log(log, f"{what}: cached in {folder}")
    return folder


def bench_bytes(folder: Path) -> int:
    """The bytes the set's files take."""
    return sum((folder / f).stat().st_size for f in BENCH_FILES)
