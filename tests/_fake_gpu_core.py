"""A stand-in for ``bzna_tf.ops.gpu_core.GpuCore`` on machines without a GPU: NumPy + PyAV.

It has GpuCore's methods and writes the same results: FFmpeg decodes (PyAV),
the NumPy warp reference of SPEC section 4 (tests/_warp_reference.py) warps, and "device memory" is host
memory (pointers are NumPy buffers' addresses). tests/test_gpu_kit.py runs the
kit's runner with it, so every path of the runner runs before a GPU sees it.
Needs no TensorFlow and no bzna_tf (the runner replaces ``bzna_tf`` by the kit's).

Variants (``FAKE_GPU_CORE`` in the environment): ``ok``; ``no-nvdec`` (probe
lacks NVDEC, decoding raises); ``broken-rgb`` (uint8 warp_rgb outputs two
grey levels off); ``benzina-bounds`` (every warp tests Benzina's bounds,
[0, W - 1] x [0, H - 1], instead of the picture's area: a frame of the fill
colour around upscaled pictures); ``ignore-picture-sizes`` (decode_warp warps
the whole decoded frame whatever ``picture_sizes`` says: the frame's padding
shows beyond the picture's right and bottom edges).

The queue (``FakeCore.queue``: ``bzna_gpu_queue_*`` semantics on a worker
thread, ring buffers of host memory) has broken variants too, each failing one
of the runner's queue checks: ``queue-order`` (each ticket gets the batch
submitted after it); ``queue-one-buffer`` (the ring is one buffer, whatever the
depth: a batch overwrites the ones not yet released); ``queue-sticky-error``
(the ticket after a failed one fails too); ``queue-skip-silent`` (SKIP_BAD fills
a bad picture but does not list it); ``queue-no-cancel`` (destroying decodes
every pending batch, and a blocked submit or collect is not woken).
"""

from __future__ import annotations

import collections
import ctypes
import os
import sys
import threading
from pathlib import Path

import av
import numpy as np

# The NumPy reference of tests/test_warp.py, beside this file (loaded by path in the kit's runner).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _warp_reference import F, ref_rgb, ref_yuv420  # noqa: E402

MODE = os.environ.get("FAKE_GPU_CORE", "ok")

if MODE == "benzina-bounds":
    import _warp_reference

    def _benzina_oob(x, y, w, h):
        """SPEC section 4 as Benzina's kernel has it: NaN, X < 0, X > W - 1, Y < 0 or Y > H - 1."""
        with np.errstate(invalid="ignore"):
            return np.isnan(x) | np.isnan(y) | (x < 0) | (x > F(w - 1)) | (y < 0) | (y > F(h - 1))

    _warp_reference.ref_oob = _benzina_oob


class FakeUnavailable(RuntimeError):
    code = 2


class FakeCoreError(RuntimeError):
    """A status other than OK, with the core's code (1 INVALID_ARGUMENT, 5 CANCELLED, ...)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


INVALID_ARGUMENT, CANCELLED = 1, 5


def _decode(data: bytes):
    ctx = av.CodecContext.create("hevc", "r")
    frames = ctx.decode(av.Packet(data)) or ctx.decode(None)
    planes = []
    for p in frames[0].planes:
        a = np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)
        planes.append(np.ascontiguousarray(a[:, : p.width]))
    return planes


def _crop(planes, hw, i):
    """A decoded frame's planes cut to its picture, (height, width) at the top-left, as the core's are."""
    y, cb, cr = planes
    h, w = (int(v) for v in hw)
    if not (1 <= h <= y.shape[0] and 1 <= w <= y.shape[1]):
        raise ValueError(
            f"sample {i} of the batch: expected a picture size (height, width) of at least [1, 1] and at "
            f"most the decoded frame's {list(y.shape)}. Received {[h, w]}"
        )
    ch, cw = (h + 1) // 2, (w + 1) // 2
    return y[:h, :w], cb[:ch, :cw], cr[:ch, :cw]


def warp_yuv(y, cb, cr, m, out_shape, bias, norm, oob, channels_first, antialias=False):
    """One frame through the SPEC section 4 reference (with warp.h's antialiasing when asked)."""
    return ref_yuv420(y[None], cb[None], cr[None], m, out_shape, bias, norm, oob, channels_first, antialias)[
        0
    ]


def warp_image(img, m, out_shape, bias, norm, oob, channels_first, antialias=False):
    return ref_rgb(img[None], m, out_shape, bias, norm, oob, channels_first, antialias)[0]


def _view(ptr: int, shape, dtype) -> np.ndarray:
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = (ctypes.c_uint8 * count).from_address(int(ptr))
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class FakeCore:
    """GpuCore's interface over host memory, FFmpeg and NumPy."""

    def __init__(self, path=None):
        self.path = str(path)
        self._buffers = {}
        self.sessions = 0

    def probe(self):
        if MODE == "no-nvdec":
            return 1, "libnvcuvid.so.1 could not be loaded (fake)"
        return 3, None

    def describe(self, device=0):
        # The real core's "nvdec" entry (capi.cc): its engines and the sessions a batch uses.
        nvdec = {"available": MODE != "no-nvdec", "engines": 2, "sessions": 2}
        return {"name": "FakeCore (NumPy + FFmpeg)", "device": device, "nvdec_engines": 2, "nvdec": nvdec}

    def set_nvdec_sessions(self, n):
        self.sessions = n

    def queue(self, depth=2, device=0):
        return FakeQueue(self, depth, device)

    # memory
    def alloc(self, nbytes, device=0):
        a = np.zeros(max(1, int(nbytes)), np.uint8)
        self._buffers[a.ctypes.data] = a
        return a.ctypes.data

    def free(self, ptr, device=0):
        del self._buffers[int(ptr)]

    def copy(self, dst, src, nbytes, device=0):
        ctypes.memmove(int(dst), int(src), int(nbytes))

    def upload(self, array, device=0):
        a = np.ascontiguousarray(array)
        ptr = self.alloc(a.nbytes)
        self.copy(ptr, a.ctypes.data, a.nbytes)
        return ptr

    def download(self, ptr, shape, dtype, device=0):
        return _view(ptr, shape, dtype).copy()

    # decoding
    def _decode_all(self, pictures):
        if MODE == "no-nvdec":
            raise FakeUnavailable("no NVDEC (fake)")
        return [_decode(bytes(p)) for p in pictures]

    def decode_yuv_host(self, pictures, max_shape, *, device=0):
        h, w = max_shape
        n = len(pictures)
        y = np.zeros((n, h, w), np.uint8)
        cb = np.zeros((n, (h + 1) // 2, (w + 1) // 2), np.uint8)
        cr = np.zeros_like(cb)
        sizes = self._decode_into(pictures, max_shape, y, cb, cr)
        return y, cb, cr, sizes

    def _decode_into(self, pictures, max_shape, y, cb, cr):
        sizes = np.zeros((len(pictures), 2), np.int32)
        for i, (py, pcb, pcr) in enumerate(self._decode_all(pictures)):
            if py.shape[0] > max_shape[0] or py.shape[1] > max_shape[1]:
                raise ValueError(
                    f"sample {i} of the batch: frame {py.shape} larger than the slot {max_shape}"
                )
            y[i, : py.shape[0], : py.shape[1]] = py
            cb[i, : pcb.shape[0], : pcb.shape[1]] = pcb
            cr[i, : pcr.shape[0], : pcr.shape[1]] = pcr
            sizes[i] = py.shape
        return sizes

    def decode_yuv(self, pictures, max_shape, y_ptr, cb_ptr, cr_ptr, *, device=0, stream=None):
        h, w = max_shape
        n = len(pictures)
        c = (n, (h + 1) // 2, (w + 1) // 2)
        return self._decode_into(
            pictures,
            max_shape,
            _view(y_ptr, (n, h, w), np.uint8),
            _view(cb_ptr, c, np.uint8),
            _view(cr_ptr, c, np.uint8),
        )

    def decode_warp_host(
        self,
        pictures,
        matrices,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        picture_sizes=None,
        device=0,
    ):
        m = np.broadcast_to(np.asarray(matrices, F).reshape(-1, 3, 3), (len(pictures), 3, 3))
        frames = self._decode_all(pictures)
        if picture_sizes is not None and MODE != "ignore-picture-sizes":
            frames = [_crop(f, hw, i) for i, (f, hw) in enumerate(zip(frames, picture_sizes, strict=True))]
        return np.stack(
            [
                warp_yuv(*f, m[i], out_shape, bias, norm, oob, channels_first, antialias)
                for i, f in enumerate(frames)
            ]
        )

    def decode_warp(
        self,
        pictures,
        matrices_ptr,
        matrix_count,
        out_ptr,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        picture_sizes=None,
        device=0,
        stream=None,
    ):
        m = _view(matrices_ptr, (matrix_count, 3, 3), F)
        out = self.decode_warp_host(
            pictures,
            m,
            out_shape,
            bias=bias,
            norm=norm,
            oob=oob,
            channels_first=channels_first,
            antialias=antialias,
            picture_sizes=picture_sizes,
        )
        _view(out_ptr, out.shape, F)[...] = out

    # warping
    def warp_yuv420_host(
        self,
        y,
        cb,
        cr,
        matrices,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device=0,
    ):
        m = np.broadcast_to(np.asarray(matrices, F).reshape(-1, 3, 3), (len(y), 3, 3))
        out = np.stack(
            [
                warp_yuv(y[i], cb[i], cr[i], m[i], out_shape, bias, norm, oob, channels_first, antialias)
                for i in range(len(y))
            ]
        )
        return out

    def warp_yuv420(
        self,
        y_ptr,
        cb_ptr,
        cr_ptr,
        count,
        frame_shape,
        matrices_ptr,
        matrix_count,
        out_ptr,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device=0,
        stream=None,
    ):
        h, w = frame_shape
        c = (count, (h + 1) // 2, (w + 1) // 2)
        out = self.warp_yuv420_host(
            _view(y_ptr, (count, h, w), np.uint8),
            _view(cb_ptr, c, np.uint8),
            _view(cr_ptr, c, np.uint8),
            _view(matrices_ptr, (matrix_count, 3, 3), F),
            out_shape,
            bias=bias,
            norm=norm,
            oob=oob,
            channels_first=channels_first,
            antialias=antialias,
        )
        _view(out_ptr, out.shape, F)[...] = out

    def warp_rgb_host(
        self,
        images,
        matrices,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device=0,
    ):
        m = np.broadcast_to(np.asarray(matrices, F).reshape(-1, 3, 3), (len(images), 3, 3))
        out = np.stack(
            [
                warp_image(images[i], m[i], out_shape, bias, norm, oob, channels_first, antialias)
                for i in range(len(images))
            ]
        )
        if MODE == "broken-rgb" and images.dtype == np.uint8:
            out += F(2) * max(abs(v) for v in np.ravel(norm))  # two grey levels off: over the tolerance
        return out

    def fill_oob(
        self,
        count,
        out_ptr,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device=0,
        stream=None,
    ):
        h, w = out_shape
        shape = (count, 3, h, w) if channels_first else (count, h, w, 3)
        colour = np.asarray(oob, F).reshape((1, 3, 1, 1) if channels_first else (1, 1, 1, 3))
        _view(out_ptr, shape, F)[...] = colour

    def warp_rgb(
        self,
        images_ptr,
        dtype,
        count,
        image_shape,
        matrices_ptr,
        matrix_count,
        out_ptr,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device=0,
        stream=None,
    ):
        images = _view(images_ptr, (count, *image_shape, 3), np.dtype(dtype))
        out = self.warp_rgb_host(
            images,
            _view(matrices_ptr, (matrix_count, 3, 3), F),
            out_shape,
            bias=bias,
            norm=norm,
            oob=oob,
            channels_first=channels_first,
            antialias=antialias,
        )
        _view(out_ptr, out.shape, F)[...] = out


class FakeQueue:
    """``bzna_gpu_queue_*`` over FakeCore: a worker thread decodes the tickets in order into a ring of
    ``depth`` buffers ("device" memory from FakeCore.alloc), as queue.cc does."""

    def __init__(self, core, depth=2, device=0):
        if not 1 <= int(depth) <= 64:
            raise FakeCoreError(INVALID_ARGUMENT, f"expected a queue depth in [1, 64]. Received {depth}")
        if MODE == "no-nvdec":
            raise FakeUnavailable("no NVDEC (fake)")
        self.core, self.depth, self.device = core, int(depth), device
        self._cv = threading.Condition()
        self._tickets = {}
        self._pending = collections.deque()
        self._next = 0
        self._in_flight = 0
        self._callers = 0
        self._stopping = False
        self._failed_before = False  # queue-sticky-error
        slots = 1 if MODE == "queue-one-buffer" else self.depth
        self._slots = [{"ptr": None, "bytes": 0, "owner": -1} for _ in range(slots)]
        self._worker = threading.Thread(target=self._work, daemon=True)
        self._worker.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def ring_bytes(self):
        """What the ring holds now (the runner's memory check reads the pointers instead)."""
        return sum(s["bytes"] for s in self._slots)

    def submit(
        self,
        pictures,
        matrices,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        picture_sizes=None,
        skip_bad=False,
    ):
        m = np.array(matrices, F).reshape(-1, 3, 3)
        if len(pictures) and len(m) not in (1, len(pictures)):
            raise FakeCoreError(
                INVALID_ARGUMENT, f"expected matrix_count 1 or {len(pictures)}. Received {len(m)}"
            )
        t = {
            "state": "pending",
            "pictures": [bytes(p) for p in pictures],
            "matrices": m,
            "kw": dict(
                bias=bias,
                norm=norm,
                oob=oob,
                channels_first=channels_first,
                antialias=antialias,
                picture_sizes=None if picture_sizes is None else np.array(picture_sizes),
            ),
            "out_shape": tuple(out_shape),
            "skip_bad": skip_bad,
            "slot": -1,
            "failures": [],
            "collecting": False,
        }
        with self._cv:
            self._callers += 1
            try:
                cancels = MODE != "queue-no-cancel"
                while not (self._stopping and cancels) and self._in_flight >= self.depth:
                    self._cv.wait()
                if self._stopping:
                    raise FakeCoreError(CANCELLED, "the queue was destroyed while bzna_gpu_submit waited")
                ticket = self._next
                self._next += 1
                self._tickets[ticket] = t
                self._pending.append(ticket)
                self._in_flight += 1
                self._cv.notify_all()
                return ticket
            finally:
                self._callers -= 1
                self._cv.notify_all()

    def _decode(self, t):
        """The batch as FakeCore.decode_warp_host writes it; SKIP_BAD: one picture at a time."""
        m = np.broadcast_to(t["matrices"], (len(t["pictures"]), 3, 3))
        try:
            return self.core.decode_warp_host(t["pictures"], m, t["out_shape"], **t["kw"])
        except Exception as e:
            if not t["skip_bad"]:
                raise FakeCoreError(
                    INVALID_ARGUMENT, f"sample ? of the batch: {type(e).__name__}: {e}"
                ) from e
        out = []
        sizes = t["kw"]["picture_sizes"]
        for n, picture in enumerate(t["pictures"]):
            kw = {**t["kw"], "picture_sizes": None if sizes is None else sizes[n : n + 1]}
            try:
                out.append(self.core.decode_warp_host([picture], m[n : n + 1], t["out_shape"], **kw)[0])
            except Exception as e:
                h, w = t["out_shape"]
                shape = (3, h, w) if kw["channels_first"] else (h, w, 3)
                colour = np.asarray(kw["oob"], F).reshape((3, 1, 1) if kw["channels_first"] else (1, 1, 3))
                out.append(np.broadcast_to(colour, shape).copy())
                if MODE != "queue-skip-silent":
                    t["failures"].append((n, f"{type(e).__name__}: {e}"))
        return np.stack(out)

    def _work(self):
        while True:
            with self._cv:
                while not self._stopping and not self._pending:
                    self._cv.wait()
                if MODE == "queue-no-cancel" and self._pending:
                    pass  # decodes what is pending even when destroyed
                elif self._stopping:
                    return
                ticket = self._pending.popleft()
                t = self._tickets[ticket]
                t["state"] = "running"
                if MODE == "queue-order" and self._pending:
                    after = self._tickets[self._pending[0]]
                    if len(after["pictures"]) == len(t["pictures"]):
                        t = after  # decodes the next ticket's batch for this one
                slot = next(
                    i for i, s in enumerate(self._slots) if s["owner"] < 0 or MODE == "queue-one-buffer"
                )
                self._slots[slot]["owner"] = ticket
                self._tickets[ticket]["slot"] = slot
            try:
                if MODE == "queue-sticky-error" and self._failed_before:
                    raise FakeCoreError(
                        INVALID_ARGUMENT, "sample 0 of the batch: the previous error (sticky)"
                    )
                out = self._decode(t)
                error = None
            except FakeCoreError as e:
                out, error = None, e
                self._failed_before = True
            with self._cv:
                t = self._tickets[ticket]
                if error is None:
                    s = self._slots[slot]
                    if s["bytes"] < out.nbytes:
                        if s["ptr"] is not None:
                            self.core.free(s["ptr"])
                        s["ptr"], s["bytes"] = self.core.alloc(out.nbytes), out.nbytes
                    _view(s["ptr"], out.shape, F)[...] = out
                    t.update(state="done", shape=out.shape, nbytes=out.nbytes)
                else:
                    t.update(state="failed", error=error, slot=-1)
                    self._slots[slot]["owner"] = -1
                self._cv.notify_all()

    def collect(self, ticket, out=None, stream=None):
        with self._cv:
            self._callers += 1
            try:
                t = self._tickets.get(ticket)
                if t is None:
                    raise FakeCoreError(
                        INVALID_ARGUMENT, f"ticket {ticket} is not in flight (never submitted, or finished)"
                    )
                if t["collecting"] or t["state"] in ("collected", "copied"):
                    raise FakeCoreError(INVALID_ARGUMENT, f"ticket {ticket} is already collected")
                t["collecting"] = True
                while not (self._stopping and MODE != "queue-no-cancel") and t["state"] not in (
                    "done",
                    "failed",
                ):
                    self._cv.wait()
                t["collecting"] = False
                if t["state"] not in ("done", "failed"):
                    raise FakeCoreError(
                        CANCELLED, f"the queue was destroyed before ticket {ticket} was collected"
                    )
                if t["state"] == "failed":
                    del self._tickets[ticket]
                    self._in_flight -= 1
                    self._cv.notify_all()
                    raise t["error"]
                failures = list(t["failures"])
                ptr = self._slots[t["slot"]]["ptr"]
                if out is None:
                    t["state"] = "collected"
                    return ptr, failures
                ctypes.memmove(int(out), int(ptr), t["nbytes"])
                self._slots[t["slot"]]["owner"] = -1
                self._in_flight -= 1
                del self._tickets[ticket]  # released: the binding's collect(out=...) releases
                self._cv.notify_all()
                return None, failures
            finally:
                self._callers -= 1
                self._cv.notify_all()

    def release(self, ticket, stream=None):
        with self._cv:
            t = self._tickets.get(ticket)
            if t is None or t["state"] != "collected":
                raise FakeCoreError(INVALID_ARGUMENT, f"ticket {ticket} is not collected")
            self._slots[t["slot"]]["owner"] = -1
            self._in_flight -= 1
            del self._tickets[ticket]
            self._cv.notify_all()

    def close(self):
        with self._cv:
            if self._stopping:
                return
            self._stopping = True
            if MODE != "queue-no-cancel":
                self._pending.clear()
            self._cv.notify_all()
            while self._callers and MODE != "queue-no-cancel":
                self._cv.wait()
        if MODE == "queue-no-cancel":
            while True:
                with self._cv:
                    if not self._pending:
                        break
                    self._cv.wait(0.01)
        self._worker.join()
        for s in self._slots:
            if s["ptr"] is not None:
                self.core.free(s["ptr"])
                s["ptr"] = None
