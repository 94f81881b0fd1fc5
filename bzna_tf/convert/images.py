"""Decoding source images (JPEG, PNG, ...) to RGB with FFmpeg, through PyAV."""

from __future__ import annotations

import io

import numpy as np

__all__ = ["ImageDecodeError", "decode_image"]

_JPEG_MAGIC = b"\xff\xd8"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class ImageDecodeError(ValueError):
    """A source image that cannot be decoded; the message says why."""


def _what(data: bytes) -> str:
    """What the bytes look like, for an error message: the format by its magic, the size, the ends."""
    if data.startswith(_JPEG_MAGIC):
        end = "ends with an" if data.rstrip(b"\0").endswith(b"\xff\xd9") else "has no"
        return f"JPEG data of {len(data)} bytes that {end} end-of-image marker (FF D9)"
    if data.startswith(_PNG_MAGIC):
        end = "ends with an" if b"IEND" in data[-16:] else "has no"
        return f"PNG data of {len(data)} bytes that {end} IEND chunk"
    return f"{len(data)} bytes starting {data[:16]!r} (neither JPEG nor PNG)"


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
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise ImageDecodeError(f"FFmpeg cannot decode it ({why}): {_what(data)}") from e
    if rgb.ndim != 3 or rgb.shape[2] != 3 or 0 in rgb.shape:
        raise ImageDecodeError(f"decoded to an unexpected shape {rgb.shape}")
    return rgb
