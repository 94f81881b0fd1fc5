"""CPU decoding of .bzna pictures: FFmpeg's HEVC decoder through PyAV.

:func:`decode_annexb` decodes in Python (NumPy planes); :func:`decode` is the
TensorFlow op, the same FFmpeg called from C++ (``custom_ops/lib/hevc_decoder``).
Each thread keeps one decoder context and reuses it for every picture (opening
a context costs more than decoding a thumbnail).

FFmpeg's HEVC decoder holds a picture back until it sees the next one (or the
end of the stream), and .bzna pictures are independent one-picture streams:
each is decoded as packet, then end of stream, then a decoder reset.
"""

from __future__ import annotations

import threading

import av
import numpy as np

__all__ = ["decode_annexb", "decode", "DecodeError"]

_local = threading.local()


class DecodeError(ValueError):
    """A picture FFmpeg could not decode, or not 8-bit 4:2:0."""


def _context():
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = av.CodecContext.create("hevc", "r")
        ctx.thread_count = 1  # parallelism comes from decoding several pictures at once
        _local.ctx = ctx
    return ctx


def decode_annexb(data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one Annex-B H.265 picture to its Y, Cb and Cr planes.

    Args:
      data: bytes of one picture (``BznaDataset``'s ``"data"``).

    Returns:
      ``(y, cb, cr)``, uint8 arrays of shapes ``(H, W)``, ``(H/2, W/2)``,
      ``(H/2, W/2)`` (H, W = the coded frame size, rounded up for chroma).

    Raises:
      DecodeError: the bytes are not a decodable 8-bit 4:2:0 H.265 picture.
    """
    if isinstance(data, np.ndarray):  # a 0-d array, e.g. from tf.numpy_function
        data = data.item()
    data = bytes(data)
    ctx = _context()
    try:
        frames = ctx.decode(av.Packet(data))
        if not frames:
            frames = ctx.decode(None)
    except av.error.FFmpegError as e:
        frames = None
        error = e
    finally:
        ctx.flush_buffers()
    if not frames:
        what = f"FFmpeg: {error}" if frames is None else "no picture came out"
        _local.ctx = None  # a decoder that failed is not trusted again
        raise DecodeError(f"could not decode the {len(data)}-byte H.265 picture ({what})")
    frame = frames[0]
    if frame.format.name not in ("yuv420p", "yuvj420p"):
        raise DecodeError(f"expected an 8-bit 4:2:0 picture, decoded {frame.format.name}")
    out = []
    for p in frame.planes:
        a = np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)
        out.append(np.ascontiguousarray(a[:, : p.width]))
    return out[0], out[1], out[2]


def decode(data, name: str | None = None):
    """TensorFlow op: decode one Annex-B H.265 picture to its planes (FFmpeg, in C++).

    The native op (``BznaDecodeYuv420``) runs FFmpeg's HEVC decoder with no
    Python in the way: it scales with ``num_parallel_calls`` and pipelines
    holding it serialise (tf.data service). It gives the same planes as
    :func:`decode_annexb`. To decode and warp in one pass, use
    :func:`bzna_tf.ops.decode_warp`.

    Args:
      data: a scalar tf.string.

    Returns:
      ``(y, cb, cr)`` uint8 tensors of shapes ``(H, W)``, ``((H+1)/2, (W+1)/2)``, ``((H+1)/2, (W+1)/2)``.

    Raises:
      tf.errors.InvalidArgumentError: the bytes are not a decodable 8-bit 4:2:0 H.265 picture.
    """
    import tensorflow as tf

    from bzna_tf.ops._load import load_library

    with tf.name_scope(name or "bzna_decode"):
        return tuple(load_library().bzna_decode_yuv420(data))
