"""The GPU kit: a self-contained folder that proves the GPU core on a machine with a GPU and no TensorFlow.

Tooling, not runtime: it lives in the checkout (``tools/gpu_kit/``), not in
the installed package. ``python tools/gpu_kit OUT_DIR``, from a checkout whose
bzna_tf is importable (``pip install -e .``), writes, in at most 64 MiB::

    OUT_DIR/
      run.sh                 the one command on the GPU machine: bash OUT_DIR/run.sh
      README.txt             what the kit is, how to run it, what it prints
      kit.json               what was built, from what, with which settings
      kit/run_kit.py         the runner (tools/gpu_kit/run_kit.py): standard library + NumPy
      kit/kit_anchors.py     the runner's anchors at matched quality (tools/gpu_kit/kit_anchors.py)
      src/custom_ops/        the core's sources (lib/warp.h, gpu/core/*), compiled there by nvcc
      include/ffnvcodec/     nv-codec-headers (build time only; fetched as the GPU build does)
      py/bzna_tf/            format/ + ops/_build.py + ops/gpu_core.py, no __init__.py above them
      data/fixture/          the original-tools .bzna (as original.bzna) and its manifest (decoded-frame MD5s)
      data/reference.npz     CPU (TensorFlow op) outputs of named warp cases, CPU-decoded planes
                             (one case warps each thumbnail within its picture size, not its frame)
      data/reference.json    the cases' parameters
      data/bench.bzna        the benchmark set: ImageNet-like H.265 pictures, 512x512-coded (the benzina
                             layout), at the library's default quality (this library's converter)
      data/bench_compact.bzna  the same images in the compact layout (frames rounded to 64)
      data/small.bzna, data/small_compact.bzna  small pictures (32 to 96 px), in both layouts
      data/*_meta.npz        each set's sizes, crop matrices and decoded-plane MD5s
      data/bench_jpeg.npz, data/small_jpeg.npz  the same images as JPEG q90 (the torchvision/nvJPEG anchor)
      data/anchor_crf*.bzna, data/anchor_crf*_meta.npz, data/anchor_crf*_jpeg.npz, data/anchors.json
                             the anchors at matched quality (kit_anchor_sets.py): the first benchmark images
                             at the default CRF and 5 either side, with JPEGs of equal PSNR; timed by
                             kit/kit_anchors.py
      wheels/                PyNvVideoCodec's wheel (--pynvvideocodec-wheel) where it fits; else it goes
                             to OUT_DIR-wheels/ beside the kit (with install.sh), carried by another call

Here (with TensorFlow) the builder computes the references with the CPU ops
and encodes the benchmark set; there, the runner compiles the core, checks it
against the references and times it (see ``run_kit.py`` beside this file). The
benchmark set is generated from a fixed seed and cached under
``cache_root() / "kit-bench-<key>"``, the key hashing the generator's
parameters and code, so a second build is fast and every build is the same.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from kit_anchor_sets import ANCHOR_IMAGES, anchor_files, anchor_sets
from kit_bench import (
    BENCH_CRF,
    BENCH_FILES,
    BENCH_OUT,
    BENCH_QUALITY,
    BENCH_SEED,
    JPEG_QUALITY,
    MEAN,
    STD,
    bench_bytes,
    bench_set,
)
from run_kit import checkout_bytes, warp_pictures  # the runner's: the reference cuts the planes as it does

from bzna_tf.ops import _build

__all__ = ["KitError", "build_kit", "main", "BENCH_IMAGES", "SIZE_LIMIT"]

SIZE_LIMIT = 64 * 1024 * 1024
MAX_CRF = BENCH_CRF + 8  # the highest CRF the benchmark sets are re-encoded at to fit the size limit
BENCH_IMAGES = 384  # per group: 1.5 batches of 256; the kit: about 56 MiB, anchors included
REF_OUT = (64, 96)

HERE = Path(__file__).resolve().parent  # tools/gpu_kit
REPO = HERE.parent.parent
PACKAGE = REPO / "bzna_tf"
KIT_FIXTURE = "original.bzna"  # the fixture's .bzna in the kit (data/fixture/), whichever fixture it is


class KitError(RuntimeError):
    """The kit cannot be built: a missing input, or a kit over the size limit."""


def _log(log, message):
    if log is not None:
        print(f"gpu_kit: {message}", file=log, flush=True)


def fixture_dir() -> Path:
    """The folder of an original-tools fixture: one .bzna, its manifest.json and its sources/.

    $BZNA_TF_FIXTURES where set; else ``shared/fixtures/benzina-original`` beside the checkout
    (ImageNet photographs, the benchmark set's realistic source); else the repository's own
    ``tests/fixtures/benzina-original-free`` (freely licensed pictures), so that a clone builds a kit.
    """
    env = os.environ.get("BZNA_TF_FIXTURES")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "fixtures" / "benzina-original")
    candidates.append(REPO / "tests" / "fixtures" / "benzina-original-free")
    for c in candidates:
        if fixture_bzna(c) is not None and (c / "manifest.json").is_file():
            return c
    raise KitError(
        "no original-tools fixture (one .bzna + manifest.json) in "
        + ", ".join(str(c) for c in candidates)
        + " (set $BZNA_TF_FIXTURES to a fixture folder)"
    )


def fixture_bzna(folder: Path) -> Path | None:
    """The one .bzna of a fixture folder, or None."""
    found = sorted(folder.glob("*.bzna")) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None


def check_checkout() -> None:
    """The imported bzna_tf is this checkout's: the kit ships this checkout's sources and the
    references must come from the same code.

    Raises:
      KitError: bzna_tf comes from elsewhere (another checkout, or an installed wheel).
    """
    import bzna_tf

    found = Path(bzna_tf.__file__).resolve().parent
    if found != PACKAGE:
        raise KitError(
            f"the kit is built from the checkout it lives in ({REPO}), but bzna_tf is imported from {found}: "
            f"run it with that checkout's bzna_tf (pip install -e {REPO}, or from a Python whose bzna_tf "
            "is that checkout)"
        )


def _tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _check_size(out: Path, size_limit: int, after: str) -> None:
    size = _tree_size(out)
    if size > size_limit:
        raise KitError(
            f"the kit would exceed {size_limit / 2**20:.1f} MiB: it holds {size / 2**20:.2f} MiB "
            f"after {after}"
        )


def _copy(src: Path, dst: Path):
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    dst.chmod(0o644)  # readable wherever the kit is carried (the converter writes 0600 files)


# ------------------------------------------------------------------------------------------- sources etc.


def copy_sources(out: Path, source_root: Path | None = None) -> list[str]:
    """lib/warp.h and gpu/core/* into out/src/custom_ops (same layout); the relative paths copied."""
    root = Path(source_root) if source_root else _build.source_dir()
    core = root / "gpu" / "core"
    files = (
        [root / "lib" / "warp.h", *sorted(p for p in core.iterdir() if p.is_file())] if core.is_dir() else []
    )
    if not (root / "lib" / "warp.h").is_file() or not (core / "bzna_gpu.h").is_file():
        raise KitError(
            f"the GPU core's sources are missing: expected {root}/lib/warp.h and {core}/bzna_gpu.h"
        )
    copied = []
    for f in files:
        rel = f.relative_to(root)
        _copy(f, out / "src" / "custom_ops" / rel)
        copied.append(str(rel))
    return copied


def copy_ffnvcodec(out: Path, include: str | None, log=None) -> list[str]:
    """nv-codec-headers into out/include/ffnvcodec; the names copied.

    ``include`` None: the GPU build's own (``_build.ffnvcodec_include(fetch=True)``):
    installed ones, else Debian's package fetched without root into the cache.
    """
    if include is None:
        try:
            include = _build.ffnvcodec_include(fetch=True, log=log)
        except _build.BuildError as e:
            raise KitError(
                f"the kit needs nv-codec-headers to ship: {e} (or pass --ffnvcodec-include)"
            ) from None
    if not (Path(include) / "ffnvcodec" / "dynlink_loader.h").is_file():
        raise KitError(
            "the kit needs nv-codec-headers to ship: "
            + _build.FFNVCODEC_HINT
            + f", or pass --ffnvcodec-include. Received: ffnvcodec_include={include!r}"
        )
    names = []
    for f in sorted((Path(include) / "ffnvcodec").glob("*.h")):
        _copy(f, out / "include" / "ffnvcodec" / f.name)
        names.append(f.name)
    return names


def copy_python(out: Path) -> None:
    """format/ (NumPy only), ops/_build.py, ops/gpu_core.py; no bzna_tf/__init__.py nor ops/__init__.py."""
    py = out / "py" / "bzna_tf"
    for f in sorted((PACKAGE / "format").glob("*.py")):
        _copy(f, py / "format" / f.name)
    for name in ("_build.py", "gpu_core.py"):
        _copy(PACKAGE / "ops" / name, py / "ops" / name)
    for name in ("run_kit.py", "kit_anchors.py"):
        _copy(HERE / name, out / "kit" / name)


IMPORT_CHECK = """
import sys
sys.path[:0] = {paths!r}
import bzna_tf.format, bzna_tf.ops.gpu_core, bzna_tf.ops._build
for m in (bzna_tf.format, bzna_tf.ops.gpu_core, bzna_tf.ops._build):
    assert m.__file__.startswith({py!r}), m.__file__
assert "tensorflow" not in sys.modules
print("ok")
"""


def check_imports(out: Path, python: str | None = None) -> None:
    """The kit's Python imports in an isolated interpreter (-I) that cannot import TensorFlow.

    A ``tensorflow.py`` raising ImportError comes first on the path, so an import of TensorFlow
    anywhere in the kit's modules fails the check.

    Raises:
      KitError: the import failed (the interpreter's output is in the message).
    """
    py = str(out / "py")
    with tempfile.TemporaryDirectory() as shim:
        Path(shim, "tensorflow.py").write_text(
            "raise ImportError('the GPU kit must not import TensorFlow')\n"
        )
        code = IMPORT_CHECK.format(paths=[shim, py], py=py)
        r = subprocess.run([python or sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True)
    if r.returncode or r.stdout.strip() != "ok":
        raise KitError(f"the kit's Python does not import without TensorFlow:\n{r.stdout}{r.stderr}")


# ------------------------------------------------------------------------------------------- references


def _fixture_thumbs(path: Path):
    """(Annex-B thumbnails, (height, width) image sizes) of every sample of the fixture."""
    from bzna_tf.format import BznaFile

    with BznaFile(path) as f:
        samples = [f.sample(i) for i in range(len(f))]
    pictures = [s.thumb.annexb() for s in samples]
    shapes = np.array([[s.thumb.height, s.thumb.width] for s in samples], dtype=np.int64)
    return pictures, shapes


def reference_cases(shapes: np.ndarray) -> dict:
    """The named warp cases for images of ``shapes`` (N, 2) (height, width): matrices and parameters."""
    from bzna_tf.transforms import RandomResizedCrop, compute_affine_matrix

    n = len(shapes)
    bias = [255 * m for m in MEAN]
    norm = [1 / (255 * s) for s in STD]
    normed = {"bias": bias, "norm": norm}
    raw = {"bias": [0.0, 0.0, 0.0], "norm": [1.0, 1.0, 1.0]}

    def affine(out_shape=REF_OUT, **kw):
        return compute_affine_matrix(shapes, np.array(out_shape), resize=True, **kw).astype(np.float32)

    whole = np.concatenate([np.zeros((n, 2)), shapes], axis=1)
    rrc = RandomResizedCrop(flip_h=0.5).matrices(shapes, REF_OUT, seed=7, backend="numpy").astype(np.float32)
    # Upscaling: a 16 x 24 window near each image's centre onto the whole 64 x 96 output (x4).
    up = affine(crop=np.concatenate([np.zeros((n, 2)), np.tile([[16.0, 24.0]], (n, 1))], axis=1))
    # Perspective: the resize, then a projective term: W' = 1 + 0.004 x - 0.003 y (> 0 on the output).
    persp = affine() @ np.array([[1, 0.1, 0], [0.05, 1, 0], [0.004, -0.003, 1]], np.float32)
    # Zoom out by 1.6 and rotate 10 degrees: the borders fall outside the source.
    zoom = affine(crop=whole * [1, 1, 1.6, 1.6], degrees=10.0)
    # A NaN/inf bottom row on half the samples: W' = 0 (SPEC section 4: NaN -> out of bounds).
    degenerate = affine(keep_ratio=True)
    degenerate[::2, 2] = 0.0
    single = compute_affine_matrix((512, 512), REF_OUT).astype(np.float32)[None]  # a centre crop, one matrix
    # A 12 x 16 corner of each picture onto the whole output (x5.3, x6), top-left corners on even samples,
    # bottom-right on odd ones: the output's outer pixels read the half pixel beyond the picture's
    # outer pixel centres, which is inside the picture (sampled at the edge, not the fill colour).
    corner = np.tile([[12.0, 16.0]], (n, 1))
    sign = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)[:, None]
    edges = affine(crop=np.concatenate([sign * (shapes - corner) / 2, corner], axis=1))
    # Zoom out by 1.6, no rotation, with the pictures' own sizes (picture_sizes: the track's
    # height x width at the top-left of the 512 x 512 frame): beyond the right and bottom edges lies
    # the frame's padding, which must not show: the fill colour there as on the left and top.
    beyond = affine(crop=whole * [1, 1, 1.6, 1.6])
    # Every output pixel 10,000 pixels away from the source: all out of bounds. Its output is also
    # what bzna_gpu_fill_oob must write (a skipped picture).
    away = affine() @ np.array([[1, 0, 1e4], [0, 1, 1e4], [0, 0, 1]], np.float32)
    cases = {
        "rotation": dict(matrices=affine(degrees=30.0), **normed, oob=[0, 0, 0], channels_first=False),
        "flip_h": dict(matrices=affine(flip_h=True), **normed, oob=[0, 0, 0], channels_first=False),
        "flip_v": dict(matrices=affine(flip_v=True), **normed, oob=[0, 0, 0], channels_first=False),
        "random_resized_crop": dict(matrices=rrc, **normed, oob=[0, 0, 0], channels_first=False),
        "upscale": dict(matrices=up, **raw, oob=[0, 0, 0], channels_first=False),
        "edge_upscale": dict(matrices=edges, **raw, oob=[0.25, -1.5, 3.0], channels_first=False),
        "perspective": dict(matrices=persp, **normed, oob=[0, 0, 0], channels_first=False),
        "oob_fill": dict(matrices=zoom, **normed, oob=[0.25, -1.5, 3.0], channels_first=False),
        "nchw": dict(matrices=rrc, **normed, oob=[0, 0, 0], channels_first=True),
        "non_square": dict(
            matrices=affine((48, 80), keep_ratio=True), **normed, oob=[0, 0, 0], channels_first=False
        ),
        "single_matrix": dict(
            matrices=single, bias=[10, 20, 30], norm=[0.5, 0.25, 2.0], oob=[1, 2, 3], channels_first=False
        ),
        "degenerate_w0": dict(matrices=degenerate, **normed, oob=[7, 8, 9], channels_first=True),
        "all_oob": dict(matrices=away, **normed, oob=[0.25, -1.5, 3.0], channels_first=True),
        "picture_sizes": dict(
            matrices=beyond, **normed, oob=[0.25, -1.5, 3.0], channels_first=False, picture_sizes=True
        ),
        # Antialiasing (lib/warp.h): random crops (diagonal footprints, per row and column) and the
        # centre half of each picture turned 30 degrees (parallelograms), reduced 1.3 to 5 times.
        "antialias": dict(matrices=rrc, **normed, oob=[0, 0, 0], channels_first=False, antialias=True),
        "antialias_rotation": dict(
            matrices=affine(crop=whole * [1, 1, 0.5, 0.5], degrees=30.0),
            **normed,
            oob=[0, 0, 0],
            channels_first=False,
            antialias=True,
        ),
    }
    out_shapes = {"non_square": (48, 80)}
    for name, c in cases.items():
        c["out_shape"] = list(out_shapes.get(name, REF_OUT))
        c.setdefault("antialias", False)
        c.setdefault("picture_sizes", False)
    return cases


def _rgb_case():
    """A small batch of smooth RGB images (uint8 and the same + 0.375 as float32), its matrices."""
    from bzna_tf.transforms import compute_affine_matrix

    rng = np.random.default_rng(3)
    h, w = 40, 56
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    imgs = []
    for _ in range(3):
        f = rng.uniform(0.05, 0.3, 3)
        p = rng.uniform(0, 6, 3)
        img = [127.5 + 120 * np.sin(f[c] * xx + 0.7 * f[c] * yy + p[c]) for c in range(3)]
        imgs.append(np.stack(img, -1))
    u8 = np.clip(np.round(np.stack(imgs)), 0, 255).astype(np.uint8)
    f32 = u8.astype(np.float32) + 0.375
    m = compute_affine_matrix(
        np.array([[h, w]] * 3), np.array([32, 48]), degrees=np.array([0.0, 25.0, -40.0]), resize=True
    ).astype(np.float32)
    m[2] = m[2] @ np.array([[1.3, 0, -6], [0, 1.3, -4], [0, 0, 1]], np.float32)  # partly out of bounds
    return u8, f32, m


# Flat pictures upscaled from barely to far, the whole picture onto the whole output:
# (name, picture (height, width), output (height, width), colour). Every output pixel must be the
# picture's colour: the border band is inside the picture, not the fill colour.
CONSTANT_OOB = (-1.0, -1.0, -1.0)
CONSTANT_CASES = (
    ("x1.01", (100, 200), (101, 202), (200, 120, 60)),
    ("x3.7", (10, 10), (37, 37), (30, 250, 128)),
    ("x20", (3, 5), (60, 100), (255, 0, 17)),
)


def _constant_case(in_hw, out_hw, colour):
    """A flat RGB picture, flat 4:2:0 planes of about that colour, and the whole-picture resize matrix."""
    h, w = in_hw
    rgb = np.broadcast_to(np.uint8(colour), (1, h, w, 3)).copy()
    r, g, b = (float(v) for v in colour)
    luma = 0.299 * r + 0.587 * g + 0.114 * b
    ch, cw = (h + 1) // 2, (w + 1) // 2
    y = np.full((1, h, w), round(luma), np.uint8)
    cb = np.full((1, ch, cw), round(min(255.0, max(0.0, 128 + (b - luma) / 1.772))), np.uint8)
    cr = np.full((1, ch, cw), round(min(255.0, max(0.0, 128 + (r - luma) / 1.402))), np.uint8)
    sy, sx = h / out_hw[0], w / out_hw[1]
    m = np.array([[[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]]], np.float32)
    return rgb, y, cb, cr, m


def make_references(out_dir: Path, fixture: Path, log=None) -> dict:
    """Computes the CPU references with the TensorFlow ops and writes reference.npz / reference.json.

    Returns:
      The JSON description written.
    """
    import tensorflow as tf

    from bzna_tf.decode import decode_annexb
    from bzna_tf.ops import decode_warp, warp_rgb, warp_yuv420

    pictures, shapes = _fixture_thumbs(fixture_bzna(fixture))
    planes = [decode_annexb(p) for p in pictures]
    y, cb, cr = (np.stack([p[k] for p in planes]) for k in range(3))
    arrays = {"thumb_y": y, "thumb_cb": cb, "thumb_cr": cr, "thumb_shapes": shapes}
    meta = {"samples": len(pictures), "track": "thumb", "cases": {}}
    data = tf.constant(pictures)
    for name, c in reference_cases(shapes).items():
        kw = dict(
            bias=c["bias"],
            norm=c["norm"],
            oob_color=c["oob"],
            data_format="NCHW" if c["channels_first"] else "NHWC",
            antialias=c["antialias"],
        )
        if c["picture_sizes"]:
            # The pictures' sizes: decode_warp warps each picture alone, warp_yuv420 its cut planes.
            hw = shapes.astype(np.int32)
            dw = decode_warp(data, c["matrices"], c["out_shape"], picture_sizes=hw, **kw).numpy()
            wy = warp_pictures(
                lambda *a, c=c, kw=kw: warp_yuv420(*a, c["out_shape"], **kw).numpy(),
                y,
                cb,
                cr,
                c["matrices"],
                hw,
            )
            arrays[f"{name}.picture_sizes"] = hw
        else:
            dw = decode_warp(data, c["matrices"], c["out_shape"], **kw).numpy()
            wy = warp_yuv420(y, cb, cr, c["matrices"], c["out_shape"], **kw).numpy()
        same = bool(np.array_equal(dw, wy))
        arrays[f"{name}.matrices"] = c["matrices"]
        arrays[f"{name}.decode_warp"] = dw
        if not same:  # stored once when equal (they are, on the CPU: one code path), to keep the kit small
            arrays[f"{name}.warp_yuv420"] = wy
        meta["cases"][name] = {
            "out_shape": c["out_shape"],
            "bias": [float(v) for v in c["bias"]],
            "norm": [float(v) for v in c["norm"]],
            "oob": [float(v) for v in c["oob"]],
            "channels_first": bool(c["channels_first"]),
            "antialias": bool(c["antialias"]),
            "picture_sizes": bool(c["picture_sizes"]),
            "matrix_count": int(len(c["matrices"])),
            "warp_yuv420_equals_decode_warp": same,
        }
        _log(log, f"reference case {name}: {dw.shape}")
    u8, f32, m = _rgb_case()
    rgb = {"bias": [255 * v for v in MEAN], "norm": [1 / (255 * s) for s in STD], "oob": [0.5, 0.5, 0.5]}
    for dtype, images in (("uint8", u8), ("float32", f32)):
        arrays[f"rgb_{dtype}.images"] = images
        for suffix, antialias in (("", False), ("_antialias", True)):
            arrays[f"rgb_{dtype}.out{suffix}"] = warp_rgb(
                images,
                m,
                (32, 48),
                bias=rgb["bias"],
                norm=rgb["norm"],
                oob_color=rgb["oob"],
                antialias=antialias,
            ).numpy()
    arrays["rgb.matrices"] = m
    meta["rgb"] = {"out_shape": [32, 48], "channels_first": False, **rgb}
    meta["constant"] = {}
    for name, in_hw, out_hw, colour in CONSTANT_CASES:
        images, y1, cb1, cr1, m1 = _constant_case(in_hw, out_hw, colour)
        for k, v in zip(("rgb", "y", "cb", "cr", "m"), (images, y1, cb1, cr1, m1), strict=True):
            arrays[f"constant.{name}.{k}"] = v
        for suffix, antialias in (("", False), ("_antialias", True)):
            kw = dict(oob_color=CONSTANT_OOB, antialias=antialias)
            arrays[f"constant.{name}.rgb_out{suffix}"] = warp_rgb(images, m1, out_hw, **kw).numpy()
            arrays[f"constant.{name}.yuv_out{suffix}"] = warp_yuv420(y1, cb1, cr1, m1, out_hw, **kw).numpy()
        meta["constant"][name] = {
            "out_shape": list(out_hw),
            "colour": list(colour),
            "oob": list(CONSTANT_OOB),
        }
    np.savez_compressed(out_dir / "reference.npz", **arrays)
    (out_dir / "reference.json").write_text(json.dumps(meta, indent=1))
    return meta


# -------------------------------------------------------------------------------- anchors, PyNvVideoCodec


def copy_anchors(out: Path, images: int, fixture: Path, workers, size_limit: int, log) -> dict | None:
    """The anchor sets of ``images`` images (``kit_anchor_sets``) into out/data; what anchors.json says.

    Raises:
      KitError: they do not fit in ``size_limit`` beside the rest.
    """
    if images < 1:
        return None
    folder = anchor_sets(images, fixture=fixture, workers=workers, log=log)
    for name in (*anchor_files(), "anchors.json"):
        _copy(folder / name, out / "data" / name)
    size = _tree_size(out)
    if size + 64 * 1024 > size_limit:
        raise KitError(
            f"the kit would exceed {size_limit / 2**20:.0f} MiB: it holds {size / 2**20:.2f} MiB with the "
            f"anchor sets of {images} images; pass a smaller --anchor-images (0: none)"
        )
    return json.loads((folder / "anchors.json").read_text())


def place_wheel(out: Path, wheel: Path | None, size_limit: int, log) -> dict | None:
    """PyNvVideoCodec's wheel into out/wheels/ where it fits (64 KiB kept for run.sh, README, kit.json);
    else it is marked to go beside the kit (``build_kit`` writes that folder). What kit.json says of it."""
    if wheel is None:
        return None
    size = wheel.stat().st_size
    info = {"wheel": wheel.name, "bytes": size}
    if _tree_size(out) + size + 64 * 1024 <= size_limit:
        _copy(wheel, out / "wheels" / wheel.name)
        info["where"] = "kit"
    else:
        info["where"] = "beside"
        _log(
            log, f"PyNvVideoCodec's wheel ({size / 2**20:.1f} MiB) does not fit in the kit: it goes beside it"
        )
    return info


def wheels_folder(kit: Path) -> Path:
    """The folder beside the kit for a wheel that does not fit in it: ``<kit>-wheels``."""
    return kit.parent / f"{kit.name}-wheels"


INSTALL_SH = r"""#!/usr/bin/env bash
# PyNvVideoCodec's wheel for the bzna_tf GPU kit beside this folder: installs it into site/ here
# (pip, no network), then tries to import it. The kit's runner finds site/ (or installs the wheel itself).
# The last line of stdout is one JSON object.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
wheel="$here/@WHEEL@"
if ! "$py" -m pip install --no-deps --no-index --upgrade --target "$here/site" "$wheel" >&2; then
  echo '{"installed": false, "error": "pip install failed: see stderr"}'
  exit 1
fi
printf '%s %s' "@WHEEL@" "$(stat -c %s "$wheel")" > "$here/site/.installed"
"$py" -c '
import json, sys
sys.path.insert(0, sys.argv[1])
try:
    import PyNvVideoCodec as nvc
    print(json.dumps({"installed": True, "import": "ok", "version": getattr(nvc, "__version__", None)}))
except BaseException as e:  # RuntimeError without an NVIDIA driver (libnvidia-encode.so.1)
    lines = str(e).strip().splitlines()
    print(json.dumps({"installed": True, "import": type(e).__name__ + ": " + (lines[0] if lines else "")}))
' "$here/site"
"""

WHEELS_README = """PyNvVideoCodec for the bzna_tf GPU kit
======================================

{wheel} ({mib:.1f} MiB) does not fit in the kit beside its benchmark sets, so it travels
in this folder, carried by a call of its own, before the kit's, to the same (warm) machine:

    bash {name}/install.sh      installs it into {name}/site (pip --no-deps --no-index); prints JSON
    bash {kit}/run.sh           the kit's runner finds {name}/site beside the kit

Each call may carry at most 64 MiB (this folder; the kit). Folders a call does not carry stay
on a warm machine, so this one is still there for the kit's call.
"""


def write_wheels_folder(folder: Path, wheel: Path, force: bool) -> None:
    """``<kit>-wheels/``: the wheel, install.sh and README.txt (replacing a folder of ours; any with force).

    Raises:
      KitError: the folder exists with other files and ``force`` is not set.
    """
    ours = {"install.sh", "README.txt", "site"}
    if folder.exists():
        others = [p.name for p in folder.iterdir() if p.name not in ours and not p.name.endswith(".whl")]
        if others and not force:
            raise KitError(
                f"{folder} exists and holds other files ({', '.join(sorted(others)[:5])}): pass --force"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    _copy(wheel, folder / wheel.name)
    (folder / "install.sh").write_text(INSTALL_SH.replace("@WHEEL@", wheel.name))
    (folder / "install.sh").chmod(0o755)
    (folder / "README.txt").write_text(
        WHEELS_README.format(
            wheel=wheel.name,
            mib=wheel.stat().st_size / 2**20,
            name=folder.name,
            kit=folder.name[: -len("-wheels")],
        )
    )


def readme_anchors(anchors: dict | None, wheel: dict | None) -> str:
    """README.txt's paragraph on the anchors at matched quality and where PyNvVideoCodec's wheel is."""
    if anchors is None:
        return "\nAnchors at matched quality: not in this kit (--anchor-images 0).\n"
    crfs = ", ".join(f"{c:g}" for c in anchors["crfs"])
    lines = [
        "",
        f"Anchors at matched quality (kit/kit_anchors.py): the first {anchors['images']} benchmark images at",
        f"quality {anchors['quality']}'s settings and CRF {crfs}, benzina layout, each beside JPEGs of",
        "equal RGB PSNR (the JPEG quality found by bisection; same images, same measure):",
    ]
    for a in anchors["sets"]:
        j = a["jpeg"]
        lines.append(
            f"  {a['name']:15s} {a['picture_bytes_per_picture'] / 1e3:6.1f} kB  {a['rgb_psnr_db']:.2f} dB   "
            f"JPEG q{j['quality']:<3d} {j.get('chroma', '4:2:0')} {j['bytes_per_picture'] / 1e3:6.1f} kB  "
            f"{j['rgb_psnr_db']:.2f} dB"
        )
    lines += [
        "For each: the core's decode and decode + warp, PyNvVideoCodec decoding the same pictures (as many",
        "instances as the core has NVDEC sessions, and one), nvJPEG decode + resize of the JPEGs",
        '(the JSON\'s "anchors"; a table on stderr; results/<date>-<gpu>-kit-anchors.json, or in',
        "$KIT_RESULTS_DIR). $KIT_PYNVVIDEOCODEC names another PyNvVideoCodec (a folder, or a wheel).",
    ]
    if wheel is None:
        lines.append("PyNvVideoCodec: no wheel was given (--pynvvideocodec-wheel): its anchor reports that.")
    elif wheel["where"] == "kit":
        lines.append(f"PyNvVideoCodec: wheels/{wheel['wheel']}, installed by the runner into wheels/site.")
    else:
        lines += [
            f"PyNvVideoCodec: {wheel['wheel']} did not fit: it is in <this folder>-wheels/ beside the kit.",
            "Carry that folder in a call of its own first (bash <that folder>/install.sh), then this kit.",
        ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ the kit

RUN_SH = """#!/usr/bin/env bash
# bzna_tf GPU kit: builds the GPU core with nvcc, checks it against the CPU references, times it.
# Usage: bash run.sh [--no-bench] [--quick] [--batch N]     (see README.txt)
# The last line of stdout is one JSON object with every result; progress goes to stderr.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
  echo '{"error": "python3 is not on PATH (set $PYTHON to a Python 3.10+ with NumPy)"}'
  exit 2
fi
limit="${KIT_TIMEOUT:-540}"
if command -v timeout >/dev/null 2>&1; then
  # The runner prints partial results itself 60 s before the limit; timeout is the backstop.
  timeout -k 30 "$limit" "$py" -u "$here/kit/run_kit.py" --deadline "$((limit - 60))" "$@"
else
  "$py" -u "$here/kit/run_kit.py" --deadline "$((limit - 60))" "$@"
fi
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "{\\"error\\": \\"the kit ran past its ${limit} s limit and was killed (exit $rc); see stderr\\"}"
fi
exit "$rc"
"""

README = """bzna_tf GPU kit
===============

What it is: the GPU core of bzna_tf (NVDEC H.265 decode + CUDA warp, no TensorFlow),
its sources, a ctypes binding, test data and CPU reference outputs, to prove and time
the core on a machine with an NVIDIA GPU that has no TensorFlow. Built by
`python tools/gpu_kit` from bzna_tf {version} (commit {commit}) on {created}.

Run it (needs: nvcc (PATH, $NVCC, $CUDA_HOME or /usr/local/cuda/bin), g++, an NVIDIA
driver, python3 with NumPy; optional: torch + torchvision for the JPEG anchor):

    bash run.sh                 everything (a minute or two; the whole run is limited to 540 s)
    bash run.sh --quick         fewer timed batches
    bash run.sh --no-bench      correctness only
    bash run.sh --train-step    also a PyTorch ResNet-50 training step: alone, after, beside decoding
                                (and results/<date>-<gpu>-kit-overlap.json: the step fed by the queue)
    KIT_TIMEOUT=900 bash run.sh another limit; PYTHON=python3.12 bash run.sh another Python

Nothing is written outside this folder: the core's build goes to build/, and --train-step's
overlap record to results/.

What it prints: progress on stderr; the LAST line of stdout is one JSON object:
  error        present when the kit could not run at all (no nvcc, compiler, driver or GPU;
               a failed build, with the compiler's output tail)
  build        the library built, nvcc, seconds
  probe        CUDA / NVDEC availability and why not
  device       the core's description of GPU 0 (name, compute capability, driver, NVDEC)
  nvdec        {{"available": ..., "reason": ...}}
  checks       nvdec_decode: MD5 of every decoded frame of the original-tools fixture (thumb
                 and input tracks) against its manifest, matched/total and the failures;
               decode_warp / warp_yuv420 / warp_rgb: each named case against the CPU op's
                 output (within one grey level: atol = max|norm| + 1e-5), max abs diff,
                 fraction equal; bench_decode: MD5 of the benchmark pictures' planes;
               queue: the asynchronous queue against decode_warp (bitwise): batches submitted
                 ahead and collected out of order, ring reuse (2 buffers, 6 batches, growth),
                 a damaged picture failing its ticket only, SKIP_BAD, destroy in flight
  bench        batches of {batch} thumbnails (512x512-coded; ImageNet-like sizes): decode only
               (NVDEC into device buffers) and decode + RandomResizedCrop-warp + normalise
               to 224x224 (output in device memory), default sessions and 1, 2, 4:
               images/s, median ms per batch, CPU core-seconds per image
  bench_sets   the same (default sessions) for the other sets: bench_compact (the same images,
               compact layout), small and small_compact (32 to 96 px pictures, both layouts)
  anchor       the same images as JPEG q{quality}: torchvision.io.decode_jpeg(device="cuda")
               in batches, bilinear resize to 224x224, normalise; same figures (or the reason
               torch/torchvision could not run); anchor_small: the small pictures' JPEGs
  train_step   with --train-step: ResNet-50 (torchvision, random weights), batch {batch}, bfloat16
               autocast, channels-last, SGD: median ms of the step alone, of the core decoding
               its batch then the step, of the step while the core decodes the next batch
               in another thread, and of the step fed by the core's queue (or the reason torch
               could not run)
  overlap      with --train-step: {{"kind": "overlap", "device", "step_ms_alone",
               "step_ms_overlapped" (the queue's), "tensorflow_gpu_dataset" (not run here)}},
               also written to results/<date>-<gpu>-kit-overlap.json
  errors       each stage that raised, with the traceback's last lines
  passed       true when every check ran and passed

Exit status: 0 all checks passed; 1 a check failed or a stage raised; 2 the kit could not run
(see "error"); 3 no NVDEC (only the warp checks ran); 124 the time limit.

Benchmark sets: {bench_images} ImageNet-like images and {bench_images} small ones, generated
from seed {seed}: random crops, rescales, flips and colour changes of the fixture's source
photographs, and procedural textures; encoded from the lossless images by bzna_tf's converter
at quality {quality_name} (x265 {preset}, CRF {crf:g}, {chroma} chroma{psy}). {crf_note}
Per picture (RGB PSNR as the loader decodes it, against the generated image):
{sets_table}
"""


def _git_commit(ignore: Path | None = None) -> str:
    """The checkout's commit, "+changes" when it differs from it; ignore: the kit being written."""

    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()

    try:
        spec = [":(top)"]
        root = git("rev-parse", "--show-toplevel")
        if ignore is not None and root:
            try:
                spec.append(f":(top,exclude){Path(ignore).resolve().relative_to(Path(root).resolve())}")
            except ValueError:  # outside the checkout: nothing to leave out
                pass
        changed = git("status", "--porcelain", "--", *spec)
        return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else "")
    except OSError:
        return "unknown"


def build_kit(
    out_dir,
    *,
    bench_images: int = BENCH_IMAGES,
    force: bool = False,
    ffnvcodec_include: str | None = None,
    workers: int | None = None,
    regenerate_bench: bool = False,
    size_limit: int = SIZE_LIMIT,
    anchor_images: int = ANCHOR_IMAGES,
    pynvvideocodec_wheel=None,
    log=sys.stderr,
) -> dict:
    """Writes the GPU kit into ``out_dir`` (see the module docstring for its contents).

    Args:
      out_dir: the kit's folder; it must not exist, or be empty, unless ``force`` (then it is replaced).
      bench_images: images in each group of the benchmark sets (the default fits the size limit at the
        default quality).
      force: replace an existing ``out_dir``.
      ffnvcodec_include: the folder holding ffnvcodec/ (default: the GPU build's,
        ``_build.ffnvcodec_include(fetch=True)``: installed headers, else Debian's package fetched).
      workers: encoding processes for the benchmark set (default: all usable cores).
      regenerate_bench: encode the benchmark set again even if it is cached.
      size_limit: the most bytes the kit may hold.
      anchor_images: images in each anchor set (matched quality, ``kit_anchor_sets``): at most
        ``bench_images`` are used; 0 leaves the anchors out.
      pynvvideocodec_wheel: PyNvVideoCodec's cp312 wheel, for the runner's NVIDIA-binding anchor: in
        ``wheels/`` of the kit where it fits in ``size_limit``, else alone in ``<out_dir>-wheels/`` beside
        it (with ``install.sh``), for a call of its own (None: no wheel; the anchor reports its absence).
      log: where progress goes (None: quiet).

    Returns:
      The kit's description (also written to ``kit.json``).

    Raises:
      KitError: a missing input (sources, headers, fixture), a failed import check, or a kit over
        ``size_limit`` even at the highest CRF tried (``MAX_CRF``).
    """
    if isinstance(bench_images, bool) or not isinstance(bench_images, int) or bench_images < 1:
        raise ValueError(
            f"Expected `bench_images` as a positive integer. Received: bench_images={bench_images!r}"
        )
    if isinstance(anchor_images, bool) or not isinstance(anchor_images, int) or anchor_images < 0:
        raise ValueError(
            f"Expected `anchor_images` as an integer >= 0. Received: anchor_images={anchor_images!r}"
        )
    wheel = None if pynvvideocodec_wheel is None else Path(pynvvideocodec_wheel)
    if wheel is not None and not (
        wheel.is_file() and wheel.name.lower().startswith("pynvvideocodec-") and wheel.suffix == ".whl"
    ):
        raise KitError(
            "Expected `pynvvideocodec_wheel` as PyNvVideoCodec's wheel file (pynvvideocodec-*.whl). "
            f"Received: {pynvvideocodec_wheel!s}"
        )
    final = Path(out_dir).absolute()  # run.sh and the import check need the absolute path
    if final.exists() and (not final.is_dir() or any(final.iterdir())) and not force:
        raise KitError(f"{final} exists and is not empty: pass --force to replace it")
    # Written beside its final place and renamed when complete: a failed build leaves nothing behind.
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.partial-"))
    try:
        work.chmod(0o755)
        anchors = (anchor_images, wheel)
        info = _write_kit(
            work, bench_images, ffnvcodec_include, workers, regenerate_bench, size_limit, log, anchors
        )
        if info.get("pynvvideocodec", {}).get("where") == "beside":
            write_wheels_folder(wheels_folder(final), wheel, force)
        if final.is_dir():
            shutil.rmtree(final)
        elif final.exists():
            final.unlink()
        os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _log(log, f"wrote {final}: {info['bytes'] / 2**20:.1f} MiB")
    return info


def _write_kit(
    out: Path, bench_images, ffnvcodec_include, workers, regenerate_bench, size_limit, log, anchors=(0, None)
):
    """build_kit's work, into the empty folder ``out``; ``anchors``: (anchor images, wheel or None)."""
    start = time.perf_counter()
    check_checkout()
    fixture = fixture_dir()
    sources = copy_sources(out)
    headers = copy_ffnvcodec(out, ffnvcodec_include, log)
    copy_python(out)
    check_imports(out)
    data = out / "data"
    _copy(fixture_bzna(fixture), data / "fixture" / KIT_FIXTURE)
    _copy(fixture / "manifest.json", data / "fixture" / "manifest.json")
    _check_size(out, size_limit, "the sources, headers, Python and fixture")
    _log(log, "computing the CPU references (TensorFlow ops)")
    refs = make_references(data, fixture, log)
    _check_size(out, size_limit, "the references")

    # The benchmark set gets what is left of the size limit (64 KiB kept for run.sh, README, kit.json).
    budget = size_limit - _tree_size(out) - 64 * 1024
    crf = BENCH_CRF
    while True:
        folder = bench_set(
            bench_images, crf=crf, fixture=fixture, workers=workers, regenerate=regenerate_bench, log=log
        )
        size = bench_bytes(folder)
        if size <= budget:
            break
        if crf >= MAX_CRF:
            raise KitError(
                f"the kit would exceed {size_limit / 2**20:.0f} MiB: the benchmark set of {bench_images} "
                f"images takes {size / 2**20:.1f} MiB at CRF {crf:g}, {budget / 2**20:.1f} MiB are left; "
                "pass a smaller --bench-images"
            )
        _log(
            log,
            f"benchmark set: {size / 2**20:.1f} MiB at CRF {crf:g} > {budget / 2**20:.1f} MiB left; CRF + 2",
        )
        crf += 2
    for name in BENCH_FILES:
        _copy(folder / name, data / name)
    anchor_info = copy_anchors(out, min(anchors[0], bench_images), fixture, workers, size_limit, log)
    wheel_info = place_wheel(out, anchors[1], size_limit, log)

    bench_info = json.loads((folder / "bench.json").read_text())
    jpeg_bytes = (data / "bench_jpeg.npz").stat().st_size
    crf_note = (
        "That is the library's default quality."
        if crf == BENCH_CRF
        else f"NOT the default quality's CRF ({BENCH_CRF}): raised so that the kit fits in "
        f"{size_limit / 2**20:.0f} MiB."
    )
    rows = [
        f"  {name:14s} {s['layout']:8s} {s['picture_bytes_per_picture'] / 1e3:6.1f} kB  "
        f"{s['rgb_psnr_db']:.2f} dB"
        for name, s in bench_info["sets"].items()
    ]
    rows += [
        f"  JPEG q{j['quality']} {group:8s}          {j['bytes_per_picture'] / 1e3:6.1f} kB  "
        f"{j['rgb_psnr_db']:.2f} dB"
        for group, j in bench_info["jpeg"].items()
    ]
    import bzna_tf

    info = {
        "bzna_tf": getattr(bzna_tf, "__version__", "unknown"),
        "commit": _git_commit(ignore=out),
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "sources": sources,
        "ffnvcodec": headers,
        "fixture": {"folder": str(fixture), "bzna": fixture_bzna(fixture).name, "in_kit": KIT_FIXTURE},
        "reference_cases": sorted(refs["cases"]),
        "bench": {
            "images": bench_images,
            "seed": BENCH_SEED,
            "encoder": "x265",
            "quality": BENCH_QUALITY,
            "preset": bench_info["preset"],
            "chroma": bench_info["chroma"],
            "x265_params": bench_info["x265_params"],
            "crf": crf,
            "default_crf": BENCH_CRF,
            "crf_raised_for_size": crf != BENCH_CRF,
            "bzna_bytes": (data / "bench.bzna").stat().st_size,
            "jpeg_bytes": jpeg_bytes,
            "jpeg_quality": JPEG_QUALITY,
            "sets": bench_info["sets"],
            "jpeg": bench_info["jpeg"],
            "out_shape": list(BENCH_OUT),
            "key": bench_info["key"],
        },
        "size_limit": size_limit,
    }
    if anchor_info is not None:
        info["anchors"] = anchor_info
    if wheel_info is not None:
        info["pynvvideocodec"] = wheel_info
    (out / "run.sh").write_text(RUN_SH)
    (out / "run.sh").chmod(0o755)
    (out / "README.txt").write_text(
        README.format(
            version=info["bzna_tf"],
            commit=info["commit"],
            created=info["created"],
            batch=256,
            quality=JPEG_QUALITY,
            bench_images=bench_images,
            seed=BENCH_SEED,
            quality_name=BENCH_QUALITY,
            preset=bench_info["preset"],
            chroma=bench_info["chroma"],
            psy=", psycho-visual tuning off" if "psy-rd=0" in bench_info["x265_params"] else "",
            crf=crf,
            crf_note=crf_note,
            sets_table="\n".join(rows),
        )
        + readme_anchors(anchor_info, wheel_info)
    )
    # The size recorded counts kit.json itself, whose length depends on it: written once it agrees.
    others = _tree_size(out)
    info["bytes"] = others
    while True:
        text = json.dumps(info, indent=1)
        if info["bytes"] == others + len(text.encode()):
            break
        info["bytes"] = others + len(text.encode())
    (out / "kit.json").write_text(text)
    if info["bytes"] > size_limit:
        raise KitError(
            f"the kit is {info['bytes'] / 2**20:.2f} MiB, over the {size_limit / 2**20:.0f} MiB limit"
        )
    _log(log, f"kit complete: {info['bytes'] / 2**20:.1f} MiB in {time.perf_counter() - start:.0f} s")
    return info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/gpu_kit",
        description="Write the GPU kit: a folder (<= 64 MiB) that builds, checks and times bzna_tf's GPU "
        "core on a machine with a GPU and no TensorFlow (bash OUT_DIR/run.sh there).",
    )
    parser.add_argument("out_dir", help="the kit's folder")
    parser.add_argument(
        "--bench-images", type=int, default=BENCH_IMAGES, help="benchmark images (%(default)s)"
    )
    parser.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    parser.add_argument(
        "--ffnvcodec-include",
        help="the folder holding ffnvcodec/ (nv-codec-headers; default: the installed ones, else Debian's "
        "package fetched without root, as `python -m bzna_tf.ops build --gpu` does)",
    )
    parser.add_argument("--workers", type=int, help="encoding processes (default: all cores)")
    parser.add_argument("--regenerate-bench", action="store_true", help="encode the benchmark set again")
    parser.add_argument(
        "--anchor-images",
        type=int,
        default=ANCHOR_IMAGES,
        help="images in each anchor set at matched quality (the default CRF and 5 either side, beside JPEGs "
        "of equal PSNR; "
        "at most --bench-images; 0: none) (%(default)s)",
    )
    parser.add_argument(
        "--pynvvideocodec-wheel",
        metavar="WHEEL",
        help="PyNvVideoCodec's cp312 wheel (pip download pynvvideocodec --no-deps --python-version 3.12 "
        "--only-binary :all:), for the NVIDIA-binding anchor: in the kit where it fits, else in "
        "OUT_DIR-wheels/ beside it, for a call of its own",
    )
    args = parser.parse_args(argv)
    # A device call carries the checkout too: the kit gets what the 64 MiB leave, less 1 MiB of margin.
    try:
        checkout = checkout_bytes(REPO)
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: nothing is known to travel
        checkout = 0
    size_limit = SIZE_LIMIT - checkout - (1 << 20 if checkout else 0)
    if checkout:
        print(
            f"gpu_kit: the checkout travels with the kit ({checkout / 2**20:.1f} MiB): the kit may hold "
            f"{size_limit / 2**20:.1f} MiB",
            file=sys.stderr,
        )
    try:
        info = build_kit(
            args.out_dir,
            size_limit=size_limit,
            bench_images=args.bench_images,
            force=args.force,
            ffnvcodec_include=args.ffnvcodec_include,
            workers=args.workers,
            regenerate_bench=args.regenerate_bench,
            anchor_images=args.anchor_images,
            pynvvideocodec_wheel=args.pynvvideocodec_wheel,
        )
    except (KitError, ValueError) as e:
        print(f"gpu_kit: error: {e}", file=sys.stderr)
        return 2
    if info.get("pynvvideocodec", {}).get("where") == "beside":
        wheels = wheels_folder(Path(args.out_dir))
        print(
            f"{wheels}: PyNvVideoCodec's wheel, too big for the kit: carry it in a call of its own first: "
            f"bash {wheels}/install.sh"
        )
    print(f"{args.out_dir}: {info['bytes'] / 2**20:.1f} MiB; on the GPU machine: bash {args.out_dir}/run.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
