"""Encoding RGB images as single H.265 pictures the way Benzina stores them.

Each picture is one intra frame, HEVC Main 8-bit 4:2:0, full range, BT.601
(JFIF) coefficients, chroma sited at the centre of each 2x2 block. The image
sits at the top-left of a coded frame whose sides are multiples of 512 (the
compact layout: multiples of 64, at least 144; see layout_coded_size); the
padding repeats the last column and row. libx265 is driven through PyAV and
its Annex-B output split into the sample (length-prefixed NAL units) and the
``hvcC`` (parameter sets), as an mp4 muxer would.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import numpy as np

from bzna_tf.format.hevc import HvcC, annexb_to_picture_parts
from bzna_tf.format.sample import LAYOUTS, Picture

__all__ = [
    "CHROMA_MODES",
    "COMPACT_BLOCK",
    "DEFAULT_CRF",
    "DEFAULT_LAYOUT",
    "DEFAULT_PRESET",
    "DEFAULT_QUALITY",
    "DEPRECATED_QUALITIES",
    "LAYOUTS",
    "NVDEC_MIN_SIDE",
    "NVENC_QP",
    "QUALITY_PRESETS",
    "X265_PRESETS",
    "check_crf",
    "check_preset",
    "check_quality",
    "check_x265_params",
    "coded_size_for",
    "compact_coded_size",
    "encode_image",
    "encode_image_with",
    "encode_picture",
    "layout_coded_size",
    "quality_options",
    "resize_rgb",
    "rgb_to_yuv420",
    "thumbnail_size",
]

TILE = 512
THUMB_MAX = 512
# The compact layout (LAYOUTS[1], see layout_coded_size) rounds coded frames up
# to x265's coding tree unit instead of 512: few distinct frame sizes, so the
# GPU path's per-size NVDEC decoders are reused (benchmarks/layouts.py
# compares 8, the smallest coding unit). No side goes below NVDEC's smallest
# H.265 frame (cuvidGetDecoderCaps nMinWidth/nMinHeight: 144 from Maxwell on,
# in NVIDIA's decoder programming guide), so every picture decodes on the GPU.
COMPACT_BLOCK = 64
NVDEC_MIN_SIDE = 144
# The layout of new files' per-image mp4s (docs/guides/converting.md, "Layouts").
DEFAULT_LAYOUT = "benzina"
# Benzina's own tools encoded ImageNet with CRF 10 and x265's "medium" preset.
DEFAULT_CRF = 10
"""Benzina's CRF: what :func:`encode_image` and :func:`encode_picture` use unless told."""
DEFAULT_PRESET = "medium"
"""Benzina's x265 preset: what :func:`encode_image` and :func:`encode_picture` use unless told."""
# How 4:2:0 chroma is made from the full-resolution Cb/Cr (see rgb_to_yuv420).
CHROMA_MODES = ("average", "lsq")
"""How 4:2:0 chroma is made: ``"average"`` (of each 2x2 block, close to Benzina's) or ``"lsq"``
(least squares)."""
X265_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                "veryslow", "placebo")  # fmt: skip
"""libx265's presets, fastest to slowest (``x265 --help``); ``encode_picture`` refuses anything else."""
# libx265's CRF range (and NVENC's constant QP).
CRF_RANGE = (0, 51)

# x265 options that encode_picture sets itself (colour signalling, threads, the SEI): not for qualities.
_X265_RESERVED = ("log-level", "range", "colormatrix", "chromaloc", "pools", "frame-threads", "info",
                  "input-res", "input-csp", "fps", "preset", "crf", "tune")  # fmt: skip
# Named encoder settings, chosen from benchmarks/quality.py (docs/benchmarks.md, "Quality against
# JPEG"): bytes and RGB PSNR of the fixture's twelve photographs, and of others, against JPEG
# re-encodes of the same pictures. One lone intra picture is what every sample is: x265 codes it at
# QP = CRF - 6. Psycho-visual rate-distortion (psy-rd, psy-rdoq) spends bits on texture that PSNR,
# and a model looking at 224-pixel crops, do not reward: off, the same PSNR costs 1 to 2% fewer
# bytes. superfast is as small as medium at equal PSNR, in 0.9x its time; ultrafast needs 20 to 25%
# more bytes, in a third of the time. Least-squares chroma needs 4 to 6% fewer bytes than averaged
# chroma at equal RGB PSNR.
QUALITY_PRESETS = {
    # Near-lossless copies: Benzina's encoder settings (medium, CRF 10) with least-squares chroma.
    "archival": {"preset": "medium", "crf": 10, "chroma": "lsq", "x265_params": ""},
    # For training: the smallest files at the RGB PSNR of a JPEG quality-90 re-encode of the same
    # pictures, on the fixture's twelve photographs and on the repository's free ones
    # (tests/fixtures/free-photos), in about 0.55x its bytes (and a fifth of what "archival" stores).
    "training": {"preset": "superfast", "crf": 30, "chroma": "lsq", "x265_params": "psy-rd=0:psy-rdoq=0"},
    # The training quality's PSNR for a third of the conversion's CPU time, in bigger files.
    "quick": {"preset": "ultrafast", "crf": 29, "chroma": "lsq", "x265_params": "psy-rd=0:psy-rdoq=0"},
}
"""The named qualities: name -> ``preset``, ``crf``, ``chroma``, ``x265_params`` of :func:`encode_image`."""
# The qualities of earlier releases whose names now mean nothing or something else: they keep
# their settings for one release, with a FutureWarning naming what replaces them.
DEPRECATED_QUALITIES = {
    "balanced": {"preset": "superfast", "crf": 14, "chroma": "lsq", "x265_params": ""},
    "fast": {"preset": "ultrafast", "crf": 14, "chroma": "lsq", "x265_params": ""},
}
"""Earlier qualities (``"balanced"``, the default before ``"training"``, ``"fast"``), kept for one release."""
# NVENC takes the CRF as its constant QP. x265 codes a lone intra picture at QP = CRF - 6, so a
# quality's CRF as NVENC's QP would be 6 steps coarser than x265's picture: NVENC gets this QP.
NVENC_QP = {"archival": 10, "training": 24, "quick": 23, "balanced": 14, "fast": 14}
"""A named quality's constant QP with ``encoder="nvenc"`` (archival's and the deprecated names' as before)."""
# The default: a conversion's files are read every epoch and decoded (CABAC, whose cost grows with
# the bits) on every read; "training" stores what a model at ImageNet resolutions can use.
DEFAULT_QUALITY = "training"
"""The quality :func:`bzna_tf.convert.convert` and ``bzna-tf convert`` use unless told."""


# What each deprecated quality's warning suggests instead.
_REPLACEMENT = {"balanced": "training", "fast": "quick"}


def _deprecation(name: str) -> str:
    old = DEPRECATED_QUALITIES[name]
    new = _REPLACEMENT[name]
    return (
        f"quality {name!r} is deprecated and will be removed in the next release: it stores near-lossless "
        f"pictures (x265 {old['preset']}, CRF {old['crf']:g}, {old['chroma']} chroma) 2 to 3 times the size "
        f"of a JPEG quality-90 copy. Use quality={new!r} ({QUALITY_PRESETS[new]['preset']}, CRF "
        f"{QUALITY_PRESETS[new]['crf']:g}: about a JPEG quality-90 copy's RGB PSNR) for training, or "
        f"'archival' for near-lossless copies; to keep these exact settings, pass preset={old['preset']!r}, "
        f"crf={old['crf']}, chroma={old['chroma']!r} with quality='archival' "
        f"(--quality archival --preset {old['preset']} --crf {old['crf']} --chroma {old['chroma']})"
    )


def check_quality(name, *, stacklevel: int = 1) -> str:
    """``name`` if it is a named quality; a deprecated one with a FutureWarning; else a ValueError.

    Args:
      name: one of ``QUALITY_PRESETS``, or of ``DEPRECATED_QUALITIES``.
      stacklevel: the frame the warning names, counted from the caller's (1).

    Returns:
      ``name``.

    Raises:
      ValueError: an unknown name, listing the valid ones.
    """
    if isinstance(name, str) and name in DEPRECATED_QUALITIES:
        import warnings

        warnings.warn(_deprecation(name), FutureWarning, stacklevel=stacklevel + 1)
        return name
    if not isinstance(name, str) or name not in QUALITY_PRESETS:
        raise ValueError(f"Expected `quality` in {tuple(QUALITY_PRESETS)}. Received: quality={name!r}")
    return name


def quality_options(name: str) -> dict:
    """The encoder keywords (``preset``, ``crf``, ``chroma``, ``x265_params``) of a named quality.

    Args:
      name: one of ``QUALITY_PRESETS`` ("archival", "training", "quick"); a deprecated
        name ("balanced", "fast") gives its old settings with a FutureWarning.

    Returns:
      A new dict, to pass on as ``encode_image(rgb, **quality_options(name))``.

    Raises:
      ValueError: an unknown name.
    """
    check_quality(name, stacklevel=2)
    return dict(QUALITY_PRESETS.get(name) or DEPRECATED_QUALITIES[name])


def check_x265_params(params) -> str:
    """``params`` if it is x265 options, ``"key=value:key=value"`` (as ``--x265-params``), else a ValueError.

    The options encode_picture sets itself (colour signalling, threads,
    preset, CRF, ...) are refused: they would make a picture the format does
    not describe, or fight the converter's workers.
    """
    if not isinstance(params, str):
        raise ValueError(f"Expected `x265_params` as a str 'key=value:...'. Received: x265_params={params!r}")
    for item in filter(None, params.split(":")):
        key, eq, value = item.partition("=")
        if not eq or not key or not value or any(c.isspace() for c in item):
            raise ValueError(
                f"Expected `x265_params` as 'key=value' items joined by ':'. Received: x265_params={params!r}"
            )
        if key in _X265_RESERVED:
            raise ValueError(
                f"Expected `x265_params` without {key!r}, which the encoder sets itself "
                f"({', '.join(_X265_RESERVED)}). Received: x265_params={params!r}"
            )
    return params


def check_preset(preset) -> str:
    """``preset`` if it is one of ``X265_PRESETS``, else a ValueError listing them."""
    if preset not in X265_PRESETS:
        raise ValueError(f"Expected `preset` in {X265_PRESETS}. Received: preset={preset!r}")
    return preset


def check_crf(crf) -> float:
    """``crf`` if it is a number in [0, 51] (x265's range; NVENC's QP), else a ValueError."""
    ok = isinstance(crf, (int, float, np.integer, np.floating)) and not isinstance(crf, bool)
    if not ok or not CRF_RANGE[0] <= crf <= CRF_RANGE[1]:  # NaN fails the comparison
        raise ValueError(f"Expected `crf` as a number in [0, 51]. Received: crf={crf!r}")
    return crf


def coded_size_for(size, tile: int = TILE) -> tuple[int, int]:
    """The coded frame size for an image: each side rounded up to a multiple of ``tile``."""
    w, h = size
    return (math.ceil(w / tile) * tile, math.ceil(h / tile) * tile)


def compact_coded_size(size, block: int = COMPACT_BLOCK, minimum: int = NVDEC_MIN_SIDE) -> tuple[int, int]:
    """The compact layout's coded frame: each side rounded up to ``block``, and at least ``minimum``.

    Args:
      size: (width, height) of the picture (an image or a thumbnail).
      block: the rounding; default x265's coding tree unit, 64.
      minimum: the smallest side; default NVDEC's smallest H.265 frame, 144.

    Returns:
      (width, height) of the coded frame.
    """
    return tuple(max(minimum, math.ceil(s / block) * block) for s in size)


def layout_coded_size(size, layout: str = "benzina", *, thumbnail: bool = False) -> tuple[int, int]:
    """The coded frame of a picture in a layout (``LAYOUTS``).

    ``"benzina"`` (SPEC section 2): an image's sides rounded up to 512, a
    thumbnail in 512 x 512. ``"compact"``: :func:`compact_coded_size` for both.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}. Received: layout={layout!r}")
    if layout == "compact":
        return compact_coded_size(size)
    return (THUMB_MAX, THUMB_MAX) if thumbnail else coded_size_for(size)


def thumbnail_size(size, limit: int = THUMB_MAX) -> tuple[int, int] | None:
    """The thumbnail size Benzina uses, or None when the image already fits.

    f = min(limit/w if w > limit else 1, limit/h if h > limit else 1) and the
    size is (int(w f), int(h f)): truncated, as the original tools do.
    """
    w, h = size
    if w <= limit and h <= limit:
        return None
    f = min(limit / w if w > limit else 1.0, limit / h if h > limit else 1.0)
    return (max(1, int(w * f)), max(1, int(h * f)))


@functools.lru_cache(maxsize=256)
def _upsampling_normal_lu(n: int):
    """LU factors of A^T A, for A the loader's chroma upsampling of a line of ``n`` pixels.

    A is (n, k), k = ceil(n/2): pixel i reads chroma at i/2 - 0.25, so pixel
    2m = 0.25 c[m-1] + 0.75 c[m] and pixel 2m+1 = 0.75 c[m] + 0.25 c[m+1], the
    indices clamped to [0, k-1]. A^T A is tridiagonal (1.25 and 0.375 away from
    the ends) and diagonally dominant: Thomas' elimination needs no pivoting.

    Returns:
      (sub, inv_pivot, ratio) as Python floats: the off-diagonal, the inverse
      pivots and the upper factor's off-diagonal.
    """
    k = (n + 1) // 2
    rows = np.arange(n)
    centre = rows // 2
    neighbour = np.clip(np.where(rows % 2 == 0, centre - 1, centre + 1), 0, k - 1)
    clamped = neighbour == centre  # the row is then c[centre] alone
    diag = np.zeros(k)
    off = np.zeros(k)  # off[j] = (A^T A)[j, j + 1]
    np.add.at(diag, centre, 0.75**2)
    np.add.at(diag, neighbour, 0.25**2)
    np.add.at(diag, centre, np.where(clamped, 2 * 0.75 * 0.25, 0.0))
    np.add.at(off, np.minimum(centre, neighbour), np.where(clamped, 0.0, 0.75 * 0.25))
    inv_pivot = np.empty(k)
    ratio = np.zeros(k)
    for j in range(k):
        pivot = diag[j] - (off[j - 1] * ratio[j - 1] if j else 0.0)
        inv_pivot[j] = 1.0 / pivot
        ratio[j] = off[j] * inv_pivot[j]
    return off[:-1].tolist(), inv_pivot.tolist(), ratio[:-1].tolist()


def _lsq_downsample_rows(f: np.ndarray) -> np.ndarray:
    """argmin_c ||A c - f||^2 for every column of f (n, m): the (ceil(n/2), m) solution."""
    n = f.shape[0]
    k = (n + 1) // 2
    # g = A^T f, the same taps as in _upsampling_normal_lu, gathered by parity.
    even, odd = f[0::2], f[1::2]
    g = 0.75 * even
    g[: len(odd)] += 0.75 * odd
    g[0] += 0.25 * even[0]  # pixel 0 reads c[0] twice (c[-1] clamps to c[0])
    g[:-1] += 0.25 * even[1:]  # pixel 2m reads c[m-1]
    g[1:] += 0.25 * odd[: k - 1]  # pixel 2m+1 reads c[m+1]
    if n % 2 == 0:
        g[-1] += 0.25 * odd[-1]  # the last pixel reads c[k] = c[k-1]
    sub, inv_pivot, ratio = _upsampling_normal_lu(n)
    # Forward then backward substitution, one row at a time, all columns at once.
    tmp = np.empty_like(g[0])
    g[0] *= inv_pivot[0]
    for j in range(1, k):
        g[j] -= np.multiply(g[j - 1], sub[j - 1], out=tmp)
        g[j] *= inv_pivot[j]
    for j in range(k - 2, -1, -1):
        g[j] -= np.multiply(g[j + 1], ratio[j], out=tmp)
    return g


def _chroma_lsq(planes: np.ndarray) -> np.ndarray:
    """Least-squares 4:2:0 chroma: (H, W, C) full-resolution planes -> (ceil(H/2), ceil(W/2), C), float32.

    The loader's upsampling is separable, F ~ A_H C A_W^T, so the least-squares
    C = (A_H^T A_H)^-1 A_H^T F A_W (A_W^T A_W)^-1 is solved down the columns,
    then along the rows. Not clipped or rounded.
    """
    h, w, c = planes.shape
    cols = _lsq_downsample_rows(np.ascontiguousarray(planes, np.float32).reshape(h, w * c))
    cols = np.ascontiguousarray(cols.reshape(-1, w, c).transpose(1, 0, 2))
    rows = _lsq_downsample_rows(cols.reshape(w, -1))
    return rows.reshape(rows.shape[0], -1, c).transpose(1, 0, 2)


def rgb_to_yuv420(rgb: np.ndarray, coded_size, chroma: str = "average") -> np.ndarray:
    """Full-range BT.601 4:2:0 planes, padded by edge repetition, as one (H*3/2, W) array.

    Chroma is sited at the centre of each 2x2 block. With ``chroma="average"``
    each sample is the mean of its 2x2 block. With ``"lsq"`` the samples are
    those whose upsampling by the loader (bilinear at (x/2 - 0.25, y/2 - 0.25),
    fetches clamped; lib/warp.h) is nearest, in squared error, to the image's
    full-resolution Cb and Cr (the padding does not count); the chroma planes
    are then padded by repeating their last row and column, which is what the
    clamped fetches assume. Both planes share the upsampling, so this also
    minimises the RGB error that chroma causes (a fixed linear map of the Cb/Cr
    errors). Sharp colour edges gain most; flat colour is unchanged.

    Args:
      rgb: (H, W, 3) uint8.
      coded_size: (width, height) of the frame, even and at least the image's.
      chroma: "average" or "lsq".

    Returns:
      uint8 (ch * 3 / 2, cw): Y (ch, cw), then Cb and Cr, each (ch/2, cw/2) flattened into rows of cw.
    """
    if chroma not in CHROMA_MODES:
        raise ValueError(f"Expected chroma in {CHROMA_MODES}. Received: chroma={chroma!r}")
    h, w = rgb.shape[:2]
    cw, ch = coded_size
    x = np.pad(rgb.astype(np.float32), ((0, ch - h), (0, cw - w), (0, 0)), mode="edge")
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb = 128.0 - 0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 128.0 + 0.5 * r - 0.418688 * g - 0.081312 * b

    def sub(p):
        return p.reshape(ch // 2, 2, cw // 2, 2).mean(axis=(1, 3))

    def u8(p):
        return np.clip(np.floor(p + 0.5), 0, 255).astype(np.uint8)

    if chroma == "lsq":
        c = _chroma_lsq(np.stack([cb[:h, :w], cr[:h, :w]], axis=-1))
        c = np.pad(c, ((0, ch // 2 - c.shape[0]), (0, cw // 2 - c.shape[1]), (0, 0)), mode="edge")
        cb, cr = c[..., 0], c[..., 1]
    else:
        cb, cr = sub(cb), sub(cr)
    return np.concatenate([u8(y), u8(cb).reshape(ch // 4, cw), u8(cr).reshape(ch // 4, cw)])


def encode_picture(
    rgb: np.ndarray,
    *,
    coded_size=None,
    crf: float = DEFAULT_CRF,
    preset: str = DEFAULT_PRESET,
    chroma: str = "average",
    threads: int | None = None,
    layout: str = "benzina",
    x265_params: str = "",
) -> Picture:
    """Encode one RGB image as a single H.265 picture.

    Args:
      rgb: (H, W, 3) uint8.
      coded_size: (width, height) of the coded frame; default
        :func:`layout_coded_size` of the image in ``layout``.
      crf: x265 constant rate factor, 0 (lossless-ish) to 51 (Benzina's tools use 10).
      preset: x265 preset, one of ``X265_PRESETS`` ('ultrafast' ... 'placebo'; Benzina uses 'medium').
      chroma: 4:2:0 downsampling, "average" (close to Benzina's) or "lsq" (least
        squares against the loader's upsampling): see :func:`rgb_to_yuv420`.
      threads: x265 worker threads; default x265's own choice (all cores).
        Parallel converters give each process one.
      layout: ``"benzina"`` (SPEC section 2) or ``"compact"``: frames of
        :func:`compact_coded_size`, no x265 version/options SEI in the ``hvcC``
        (``info=0``; about 2.3 kB a picture), and lean per-image boxes
        (``Picture.layout``).
      x265_params: more x265 options, ``"key=value:key=value"`` (as
        ``x265 --x265-params`` takes them; the named qualities' turn
        psycho-visual tuning off); not those the encoder sets itself
        (:func:`check_x265_params`).

    Returns:
      A :class:`~bzna_tf.format.Picture`.
    """
    import av  # imported here: reading .bzna files never needs FFmpeg

    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8 or 0 in rgb.shape:
        raise ValueError(
            f"expected a non-empty (H, W, 3) uint8 image. Received: shape={rgb.shape}, dtype={rgb.dtype}"
        )
    h, w = rgb.shape[:2]
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}. Received: layout={layout!r}")
    check_preset(preset)
    check_crf(crf)
    check_x265_params(x265_params)
    cw, ch = layout_coded_size((w, h), layout) if coded_size is None else coded_size
    if cw < w or ch < h or cw % 8 or ch % 8:
        raise ValueError(
            f"coded_size must cover the image and be multiples of 8. "
            f"Received: coded_size={(cw, ch)} for an image of {(w, h)}"
        )
    frame = av.VideoFrame.from_ndarray(rgb_to_yuv420(rgb, (cw, ch), chroma), format="yuv420p")
    frame.color_range = 2  # JPEG (full) range
    frame.colorspace = 5  # BT.470BG = BT.601
    # The codec alone, no mp4 muxer: PyAV's libavformat fails to mux HEVC
    # ('patches welcome') once Python's lzma module is loaded before it.
    ctx = av.CodecContext.create("libx265", "w")
    ctx.width, ctx.height, ctx.pix_fmt = cw, ch, "yuvj420p"
    ctx.time_base = Fraction(1, 1)
    params = "log-level=error:range=full:colormatrix=bt470bg:chromaloc=1"
    if threads is not None:
        params += f":pools={int(threads)}:frame-threads=1"
    if layout == "compact":
        params += ":info=0"
    if x265_params.strip(":"):
        params += ":" + x265_params.strip(":")
    ctx.options = {"crf": str(crf), "preset": preset, "x265-params": params}
    packets = ctx.encode(frame) + ctx.encode(None)
    sample, hvcc = annexb_to_picture_parts(b"".join(bytes(p) for p in packets))
    return Picture(sample, hvcc, (w, h), (cw, ch), compressor=f"bzna_tf libx265 crf {crf:g}", layout=layout)


def resize_rgb(rgb: np.ndarray, size) -> np.ndarray:
    """An RGB image resized to ``size`` = (width, height), bicubic (FFmpeg's swscale)."""
    import av

    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    return frame.reformat(width=size[0], height=size[1], interpolation="BICUBIC").to_ndarray()


def encode_image(
    rgb: np.ndarray,
    *,
    crf: float = DEFAULT_CRF,
    preset: str = DEFAULT_PRESET,
    chroma: str = "average",
    threads: int | None = None,
    thumbnails_only: bool = False,
    layout: str = "benzina",
    x265_params: str = "",
):
    """Encode an image and, when it exceeds 512x512, its thumbnail.

    Args:
      rgb: (H, W, 3) uint8.
      crf, preset, chroma, threads, x265_params: as for :func:`encode_picture`;
        ``**quality_options(name)`` gives a named quality's crf, preset, chroma and x265_params.
      thumbnails_only: store only the thumbnail (the image itself when it fits
        512x512): the input track then holds the thumbnail-size picture, a much
        smaller file for training at up to 512 pixels.
      layout: ``"benzina"`` or ``"compact"`` (``LAYOUTS``; see
        :func:`encode_picture` and :func:`layout_coded_size`).

    Returns:
      (input, thumb): two :class:`~bzna_tf.format.Picture`; ``thumb`` is None
      when the image fits 512x512 (the thumbnail track then points at the input),
      and always with ``thumbnails_only``.
    """

    def encode(image, coded_size=None):
        return encode_picture(
            image,
            coded_size=coded_size,
            crf=crf,
            preset=preset,
            chroma=chroma,
            threads=threads,
            layout=layout,
            x265_params=x265_params,
        )

    check_x265_params(x265_params)
    return encode_image_with(encode, rgb, thumbnails_only=thumbnails_only, layout=layout)


def encode_image_with(
    encode,
    rgb: np.ndarray,
    *,
    thumbnails_only: bool = False,
    layout: str = "benzina",
    chroma: str | None = None,
):
    """(input, thumb) pictures of an image, each made by ``encode(rgb, coded_size=(w, h))``.

    The thumbnail (SPEC section 2: at most 512 on a side, sizes truncated)
    is resized bicubically; none when the image fits, or with
    ``thumbnails_only`` (the input is then the thumbnail). Each picture is
    coded in its :func:`layout_coded_size` frame; with ``"compact"`` the
    pictures are marked compact (whatever the encoder). A ``chroma``
    (``CHROMA_MODES``) is passed on to every call as ``encode(...,
    chroma=chroma)``; None calls ``encode`` without it.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}. Received: layout={layout!r}")
    if chroma is not None:
        if chroma not in CHROMA_MODES:
            raise ValueError(f"Expected chroma in {CHROMA_MODES}. Received: chroma={chroma!r}")
        encode = functools.partial(encode, chroma=chroma)
    rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    tsize = thumbnail_size((w, h))
    small = None if tsize is None else resize_rgb(rgb, tsize)

    def code(image, thumbnail=False):
        size = (image.shape[1], image.shape[0])
        p = encode(image, coded_size=layout_coded_size(size, layout, thumbnail=thumbnail))
        if layout == "benzina" or p.layout == layout:
            return p
        # Another encoder's picture (NVENC): compact boxes, and no SEI in the hvcC.
        lean = p.hvcc.parameter_sets_only() if isinstance(p.hvcc, HvcC) and p.sample_entry is None else p.hvcc
        return dataclasses.replace(p, hvcc=lean, layout=layout)

    if thumbnails_only:
        return code(rgb if small is None else small), None
    inp = code(rgb)
    if small is None:
        return inp, None
    return inp, code(small, thumbnail=True)
