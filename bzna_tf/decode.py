"""CPU decoding of .bzna pictures: FFmpeg's HEVC decoder through PyAV.

Each thread keeps one decoder context and reuses it for every picture (opening
a context costs more than decoding a thumbnail). PyAV releases the GIL inside
FFmpeg, so a ``tf.data`` map with ``num_parallel_calls`` decodes on every core.

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
    if isinstance(data, np.ndarray):  # a 0-d array when called by tf.numpy_function
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
    """TensorFlow op version of :func:`decode_annexb` for one scalar string.

    Runs FFmpeg through ``tf.numpy_function``: use it inside ``Dataset.map``
    with ``num_parallel_calls`` (it scales with cores); a pipeline holding it
    cannot be serialised for tf.data service workers in other processes.

    Returns:
      ``(y, cb, cr)`` uint8 tensors of shapes ``(H, W)``, ``(H/2, W/2)``, ``(H/2, W/2)``.
    """
    import tensorflow as tf

    y, cb, cr = tf.numpy_function(
        decode_annexb, [data], [tf.uint8, tf.uint8, tf.uint8], stateful=False, name=name or "bzna_decode"
    )
    for t in (y, cb, cr):
        t.set_shape([None, None])
    return y, cb, cr
