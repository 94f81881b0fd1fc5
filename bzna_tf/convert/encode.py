"""Encoding RGB images as single H.265 pictures the way Benzina stores them.

Each picture is one intra frame, HEVC Main 8-bit 4:2:0, full range, BT.601
(JFIF) coefficients, chroma sited at the centre of each 2x2 block. The image
sits at the top-left of a coded frame whose sides are multiples of 512; the
padding repeats the last column and row. libx265 is driven through PyAV and
its Annex-B output split into the sample (length-prefixed NAL units) and the
``hvcC`` (parameter sets), as an mp4 muxer would.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from bzna_tf.format.hevc import annexb_to_picture_parts
from bzna_tf.format.sample import Picture

__all__ = [
    "DEFAULT_CRF",
    "DEFAULT_PRESET",
    "coded_size_for",
    "encode_image",
    "encode_image_with",
    "encode_picture",
    "resize_rgb",
    "rgb_to_yuv420",
    "thumbnail_size",
]

TILE = 512
THUMB_MAX = 512
# Benzina's own tools encoded ImageNet with CRF 10 and x265's "medium" preset.
DEFAULT_CRF = 10
DEFAULT_PRESET = "medium"


def coded_size_for(size, tile: int = TILE) -> tuple[int, int]:
    """The coded frame size for an image: each side rounded up to a multiple of ``tile``."""
    w, h = size
    return (math.ceil(w / tile) * tile, math.ceil(h / tile) * tile)


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


def rgb_to_yuv420(rgb: np.ndarray, coded_size) -> np.ndarray:
    """Full-range BT.601 4:2:0 planes, padded by edge repetition, as one (H*3/2, W) array.

    Chroma is the average of each 2x2 block (centre siting).
    """
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

    return np.concatenate([u8(y), u8(sub(cb)).reshape(ch // 4, cw), u8(sub(cr)).reshape(ch // 4, cw)])


def encode_picture(
    rgb: np.ndarray,
    *,
    coded_size=None,
    crf: float = DEFAULT_CRF,
    preset: str = DEFAULT_PRESET,
    threads: int | None = None,
) -> Picture:
    """Encode one RGB image as a single H.265 picture.

    Args:
      rgb: (H, W, 3) uint8.
      coded_size: (width, height) of the coded frame; default
        :func:`coded_size_for` the image.
      crf: x265 constant rate factor, 0 (lossless-ish) to 51 (Benzina's tools use 10).
      preset: x265 preset ('ultrafast' ... 'placebo'; Benzina uses 'medium').
      threads: x265 worker threads; default x265's own choice (all cores).
        Parallel converters give each process one.

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
    cw, ch = coded_size_for((w, h)) if coded_size is None else coded_size
    if cw < w or ch < h or cw % 8 or ch % 8:
        raise ValueError(
            f"coded_size must cover the image and be multiples of 8. "
            f"Received: coded_size={(cw, ch)} for an image of {(w, h)}"
        )
    frame = av.VideoFrame.from_ndarray(rgb_to_yuv420(rgb, (cw, ch)), format="yuv420p")
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
    ctx.options = {"crf": str(crf), "preset": preset, "x265-params": params}
    packets = ctx.encode(frame) + ctx.encode(None)
    sample, hvcc = annexb_to_picture_parts(b"".join(bytes(p) for p in packets))
    return Picture(sample, hvcc, (w, h), (cw, ch), compressor=f"bzna_tf libx265 crf {crf:g}")


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
    threads: int | None = None,
    thumbnails_only: bool = False,
):
    """Encode an image and, when it exceeds 512x512, its thumbnail.

    Args:
      rgb: (H, W, 3) uint8.
      crf, preset, threads: as for :func:`encode_picture`.
      thumbnails_only: store only the thumbnail (the image itself when it fits
        512x512): the input track then holds the thumbnail-size picture, a much
        smaller file for training at up to 512 pixels.

    Returns:
      (input, thumb): two :class:`~bzna_tf.format.Picture`; ``thumb`` is None
      when the image fits 512x512 (the thumbnail track then points at the input),
      and always with ``thumbnails_only``.
    """

    def encode(image, coded_size=None):
        return encode_picture(image, coded_size=coded_size, crf=crf, preset=preset, threads=threads)

    return encode_image_with(encode, rgb, thumbnails_only=thumbnails_only)


def encode_image_with(encode, rgb: np.ndarray, *, thumbnails_only: bool = False):
    """(input, thumb) pictures of an image, each made by ``encode(rgb, coded_size=None)``.

    The thumbnail (SPEC.md section 2: at most 512 on a side, sizes truncated)
    is resized bicubically and coded in a 512x512 frame; none when the image
    fits, or with ``thumbnails_only`` (the input is then the thumbnail).
    """
    rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    tsize = thumbnail_size((w, h))
    small = None if tsize is None else resize_rgb(rgb, tsize)
    if thumbnails_only:
        return encode(rgb if small is None else small), None
    inp = encode(rgb)
    if small is None:
        return inp, None
    return inp, encode(small, coded_size=(THUMB_MAX, THUMB_MAX))
