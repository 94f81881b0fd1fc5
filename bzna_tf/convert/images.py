"""Decoding source images (JPEG, PNG, ...) to RGB with FFmpeg, through PyAV."""

from __future__ import annotations

import io

import numpy as np

__all__ = ["ImageDecodeError", "decode_image"]

_JPEG_MAGIC = b"\xff\xd8"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ImageDecodeError(ValueError):
    """A source image that cannot be decoded; the message says why."""


def decode_image(data: bytes, *, lenient: bool = False) -> np.ndarray:
    """Decodes an encoded image to RGB, (H, W, 3) uint8.

    JPEG and PNG go straight to FFmpeg's decoder; other formats (BMP, GIF,
    WebP, TIFF, ...) through its image demuxer. Grey, palette, 4:2:2/4:4:4,
    16-bit and alpha images come out as plain RGB (alpha dropped).

    Args:
      data: the file's bytes.
      lenient: accept pictures the decoder had to conceal errors in (a truncated
        JPEG decodes to a grey bottom). By default any decoding error is raised,
        so a damaged image is reported instead of stored damaged.

    Raises:
      ImageDecodeError: undecodable data, with FFmpeg's reason.
    """
    import av  # the format layer never needs FFmpeg

    data = bytes(data)
    if not data:
        raise ImageDecodeError("empty file")
    try:
        if data.startswith(_JPEG_MAGIC) or data.startswith(_PNG_MAGIC):
            ctx = av.CodecContext.create("mjpeg" if data.startswith(_JPEG_MAGIC) else "png", "r")
            ctx.thread_count = 1
            if not lenient:
                ctx.options = {"err_detect": "explode"}
            frames = ctx.decode(av.Packet(data)) + ctx.decode(None)
        else:
            with av.open(io.BytesIO(data)) as container:
                frames = [next(container.decode(video=0), None)]
        frame = next((f for f in frames if f is not None), None)
        if frame is None:
            raise ImageDecodeError("the decoder returned no picture")
        rgb = frame.to_ndarray(format="rgb24")
    except ImageDecodeError:
        raise
    except (av.FFmpegError, ValueError, StopIteration, IndexError) as e:
        raise ImageDecodeError(f"FFmpeg cannot decode it: {e}") from e
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape:
        raise ImageDecodeError(f"decoded to an unexpected shape {rgb.shape}")
    return rgb
