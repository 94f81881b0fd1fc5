"""A stand-in for NVIDIA's PyNvVideoCodec on machines without a GPU: FFmpeg (PyAV) decodes, host memory.

The part of its API the GPU kit's anchor uses (``kit_anchors.py``): ``CreateDecoder`` with the same
keywords, ``PacketData`` (``bsl_data``: the address of the picture's bytes, ``bsl``: their count,
``decode_flag``), ``Decode(packet)`` returning a list of frames with ``GetPtrToPlane(0)`` and
``framesize()`` over NV12 (luma, then interleaved chroma), the enums it names. As the real decoder,
each decoder writes its frames into one buffer of its own, which the next ``Decode`` overwrites.

Variants (``FAKE_PYNVVIDEOCODEC``): ``ok``; ``no-driver`` (the import raises the RuntimeError the real
module raises without an NVIDIA driver); ``drop`` (every other picture gives no frame); ``corrupt``
(each frame's first luma byte is off by one).
"""

import ctypes
import os

import av
import numpy as np

MODE = os.environ.get("FAKE_PYNVVIDEOCODEC", "ok")
if MODE == "no-driver":  # what the real module raises on a machine without the driver (seen with 2.2.4)
    raise RuntimeError(
        "Failed to load NVENC library: libnvidia-encode.so.1: cannot open shared object file: No such file "
        "or directory\n\n=== TROUBLESHOOTING STEPS ===\n"
    )

__version__ = "0.0.0+fake"


class cudaVideoCodec:  # noqa: N801  (the real module's name)
    H264 = 4
    HEVC = 8


class DisplayDecodeLatencyType:
    NATIVE = 0
    LOW = 1
    ZERO = 2


class VideoPacketFlag:
    ENDOFSTREAM = 1
    ENDOFPICTURE = 2


class PacketData:
    def __init__(self):
        self.bsl_data = 0
        self.bsl = 0
        self.decode_flag = 0
        self.pts = 0


class _Frame:
    def __init__(self, buffer: np.ndarray):
        self._buffer = buffer

    def GetPtrToPlane(self, index):  # noqa: N802
        if index != 0:
            raise ValueError("the fake's NV12 frames are contiguous: plane 0 only")
        return self._buffer.ctypes.data

    def framesize(self):
        return self._buffer.nbytes


class _Decoder:
    def __init__(self, latency):
        self._buffer = None  # the one output buffer, overwritten by each Decode
        self._latency = latency
        self._count = 0

    def Decode(self, packet):  # noqa: N802
        data = ctypes.string_at(packet.bsl_data, packet.bsl)
        if (
            packet.decode_flag != VideoPacketFlag.ENDOFPICTURE
            or self._latency != DisplayDecodeLatencyType.ZERO
        ):
            raise ValueError("the fake decodes zero-latency end-of-picture packets only")
        self._count += 1
        if MODE == "drop" and self._count % 2 == 0:
            return []
        ctx = av.CodecContext.create("hevc", "r")  # each picture stands alone (its own VPS, SPS, PPS)
        frames = ctx.decode(av.Packet(data)) or ctx.decode(None)
        y, cb, cr = (
            np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width] for p in frames[0].planes
        )
        uv = np.stack([cb, cr], axis=-1).reshape(cb.shape[0], -1)
        nv12 = np.concatenate([y.reshape(-1), uv.reshape(-1)])
        if MODE == "corrupt":
            nv12[0] ^= 1
        if self._buffer is None or self._buffer.nbytes != nv12.nbytes:
            self._buffer = np.empty_like(nv12)
        self._buffer[:] = nv12
        return [_Frame(self._buffer)]


def CreateDecoder(  # noqa: N802
    gpuid=0,
    codec=cudaVideoCodec.H264,
    cudacontext=0,
    cudastream=0,
    usedevicememory=False,
    maxwidth=0,
    maxheight=0,
    latency=DisplayDecodeLatencyType.NATIVE,
):
    if codec != cudaVideoCodec.HEVC:
        raise ValueError(f"the fake decodes HEVC only. Received codec={codec!r}")
    return _Decoder(latency)
