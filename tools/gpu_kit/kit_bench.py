"""The GPU kit's benchmark set: ImageNet-like pictures, as .bzna (512x512-coded H.265) and as JPEG q90.

Images of ImageNet-like sizes (at most 512 on a side, so each is one
512x512-coded picture, its own thumbnail) are made from a fixed seed: random
crops, rescales, flips and colour changes of the original-tools fixture's
source photographs, and procedural textures. Each is encoded as JPEG quality
90 (the anchor's input), and the JPEGs go through bzna_tf's converter (its
parallel workers, x265): the .bzna holds exactly the images the JPEGs hold.
Beside them: each picture's size, RandomResizedCrop matrices onto 224x224 for
a few epochs (the runner has no TensorFlow to compute them), and the MD5 of
its CPU-decoded planes.

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

from bzna_tf.ops import _build

__all__ = ["BENCH_CRF", "BENCH_FILES", "BENCH_SEED", "bench_bytes", "bench_image", "bench_set"]

BENCH_SEED = 20250
BENCH_CRF = 10  # the converter's default (Benzina's); the kit raises it only when its size budget forces it
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


def bench_image(seed: int, index: int, photos) -> np.ndarray:
    """Image ``index`` of the benchmark set: a photograph variant (80%) or a texture (20%)."""
    rng = np.random.default_rng([seed, index])
    size = BENCH_SIZES[int(rng.integers(0, len(BENCH_SIZES)))]
    if rng.random() < 0.8:
        return _photo_variant(rng, photos[int(rng.integers(0, len(photos)))], size)
    return _texture(rng, size)


def _bench_key(n: int, seed: int, crf: float, fixture: Path) -> str:
    """A hash of the benchmark generator's parameters, code, inputs and encoder."""
    import av

    from bzna_tf.convert import encode

    h = hashlib.sha256()
    parts = [
        n,
        seed,
        crf,
        BENCH_SIZES,
        BENCH_EPOCHS,
        BENCH_OUT,
        JPEG_QUALITY,
        av.__version__,
        *(inspect.getsource(f) for f in (_photo_variant, _texture, bench_image, _make_bench, _bench_meta)),
        inspect.getsource(encode),
    ]
    for part in parts:
        h.update(repr(part).encode() + b"\0")
    for p in sorted((fixture / "sources").iterdir()):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _make_bench(folder: Path, n: int, seed: int, crf: float, fixture: Path, workers, log) -> None:
    """Generates the images, their JPEGs and the .bzna (the converter's parallel workers) into folder."""
    import tensorflow as tf

    from bzna_tf.convert import DEFAULT_PRESET, EncodeOptions, Item, convert

    photos = _source_photos(fixture)
    jpegs = []
    for i in range(n):
        img = bench_image(seed, i, photos)
        jpegs.append(tf.io.encode_jpeg(img, quality=JPEG_QUALITY).numpy())
    _log(
        log,
        f"benchmark set: {n} images generated; encoding with x265 CRF {crf:g}, preset {DEFAULT_PRESET}, "
        "averaged chroma",
    )
    # The converter decodes each JPEG and encodes it: the .bzna holds exactly the images the JPEGs hold.
    items = [
        Item(filename=f"bench_{i:05d}.jpg", target=i % 10, data=j, origin=f"bench {i}")
        for i, j in enumerate(jpegs)
    ]
    convert(
        items,
        folder / "bench.bzna",
        encoding=EncodeOptions(crf=crf, preset=DEFAULT_PRESET, chroma="average"),  # Benzina's, as logged
        workers=workers,
        order="source",  # sample i is JPEG i; an image that does not decode stops it (on_error="raise")
        progress=log is not None,
        log=log,
    )
    offsets = np.cumsum([0] + [len(j) for j in jpegs]).astype(np.int64)
    np.savez(folder / "bench_jpeg.npz", data=np.frombuffer(b"".join(jpegs), np.uint8), offsets=offsets)
    _bench_meta(folder, seed)


def _bench_meta(folder: Path, seed: int) -> None:
    """Sizes, RandomResizedCrop matrices (224 x 224, several epochs) and decoded-plane MD5s of the set."""
    from bzna_tf.decode import decode_annexb
    from bzna_tf.format import BznaFile
    from bzna_tf.transforms import RandomResizedCrop

    with BznaFile(folder / "bench.bzna") as f:
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
        folder / "bench_meta.npz",
        shapes=shapes,
        coded_shapes=coded,
        md5=np.array(md5),
        matrices=matrices,
        out_shape=np.array(BENCH_OUT),
        mean=np.array(MEAN),
        std=np.array(STD),
    )


BENCH_FILES = ("bench.bzna", "bench_jpeg.npz", "bench_meta.npz")


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
    key = _bench_key(n, seed, crf, fixture)
    folder = _build.cache_root() / f"kit-bench-{key}"
    if not regenerate and all((folder / f).is_file() for f in BENCH_FILES):
        _log(log, f"benchmark set: cached in {folder}")
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".kit-bench-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not regenerate and all((folder / f).is_file() for f in BENCH_FILES):
            return folder
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".kit-bench-"))
        try:
            _make_bench(tmp, n, seed, crf, fixture, workers, log)
            info = {"images": n, "seed": seed, "crf": crf, "key": key, "seconds": time.perf_counter() - start}
            (tmp / "bench.json").write_text(json.dumps(info, indent=1))
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)  # complete sets only appear under the final name
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    _log(log, f"benchmark set: {n} images in {time.perf_counter() - start:.0f} s, cached in {folder}")
    return folder


def bench_bytes(folder: Path) -> int:
    """The bytes the set's files take."""
    return sum((folder / f).stat().st_size for f in BENCH_FILES)
