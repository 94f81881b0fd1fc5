"""The optional NVENC encoder (an NVIDIA GPU's hardware H.265 encoder, through PyNvVideoCodec).

NVENC is much faster than x265 and uses no CPU, at some cost in quality per
byte; pictures come out in the same format (one IDR picture, 4:2:0, planes
padded by edge smear, parameter sets moved to ``hvcC``), so the files read
the same. ``import PyNvVideoCodec`` raises RuntimeError on a machine without
an NVIDIA driver: :func:`nvenc_error` turns that into a reason.

Facts from PyNvVideoCodec's sources (1.0.2 and 2.0.2): keyword values are
passed as strings (so numbers, not booleans); presets are "P1".."P7"; the
only colour keyword, ``colorspace="bt601"``, selects BT.601 with full range;
the encoder holds pictures back, so one picture comes out of ``EndEncode``;
``Encode`` returns bytes (2.x) or a list of ints (1.x).
"""

from __future__ import annotations

import numpy as np

from bzna_tf.convert.encode import coded_size_for, encode_image_with, rgb_to_yuv420
from bzna_tf.format.hevc import annexb_to_picture_parts
from bzna_tf.format.sample import Picture

__all__ = ["encode_image_nvenc", "encode_picture_nvenc", "nvenc_error"]

NVENC_PRESET = "P7"  # the slowest, best-quality preset: still far faster than x265


def nvenc_error() -> str | None:
    """Why NVENC cannot be used here, or None when PyNvVideoCodec loads."""
    try:
        import PyNvVideoCodec  # noqa: F401
    except ImportError:
        return "PyNvVideoCodec is not installed (pip install 'bzna-tf[gpu]')"
    except RuntimeError as e:
        return f"PyNvVideoCodec cannot start (no NVIDIA driver?): {e}"
    return None


def encode_picture_nvenc(rgb: np.ndarray, *, coded_size=None, qp: float = 10, gpu_id: int = 0) -> Picture:
    """Encodes one RGB image as a single H.265 IDR picture on the GPU.

    Args:
      rgb: (H, W, 3) uint8.
      coded_size: (width, height) of the coded frame; default the image's sides rounded up to 512.
      qp: the constant quantiser (NVENC's constant-QP rate control; comparable to x265's CRF).
      gpu_id: the GPU.

    Returns:
      A :class:`~bzna_tf.format.Picture`.
    """
    import PyNvVideoCodec as nvc

    rgb = np.asarray(rgb)
    h, w = rgb.shape[:2]
    cw, ch = coded_size_for((w, h)) if coded_size is None else coded_size
    planes = rgb_to_yuv420(rgb, (cw, ch))  # I420: Y, then Cb, then Cr, each contiguous
    # Positional first four arguments: the fourth is misspelt in 1.x.
    encoder = nvc.CreateEncoder(
        cw,
        ch,
        "YUV420",
        1,
        gpu_id=gpu_id,
        codec="hevc",
        preset=NVENC_PRESET,
        tuning_info="high_quality",
        rc="constqp",
        constqp=int(round(qp)),
        gop=1,
        bf=0,
        repeatspspps=1,
        colorspace="bt601",
    )
    stream = bytes(bytearray(encoder.Encode(np.ascontiguousarray(planes))))
    stream += bytes(bytearray(encoder.EndEncode()))
    sample, hvcc = annexb_to_picture_parts(stream)
    return Picture(sample, hvcc, (w, h), (cw, ch), compressor=f"bzna_tf nvenc qp {int(round(qp))}")


def encode_image_nvenc(
    rgb: np.ndarray,
    *,
    qp: float = 10,
    thumbnails_only: bool = False,
    gpu_id: int = 0,
    layout: str = "benzina",
):
    """:func:`bzna_tf.convert.encode_image` on NVENC: (input, thumb or None)."""

    def encode(image, coded_size=None):
        return encode_picture_nvenc(image, coded_size=coded_size, qp=qp, gpu_id=gpu_id)

    return encode_image_with(encode, rgb, thumbnails_only=thumbnails_only, layout=layout)
