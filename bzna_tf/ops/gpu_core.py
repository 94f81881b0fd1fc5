"""A ctypes binding of the GPU core's C ABI (``libbzna_tf_gpu_core.so``): NVDEC decode + CUDA warp.

The core (``custom_ops/gpu/core/bzna_gpu.h``, the contract this module follows)
has no TensorFlow in it; neither has this module, which imports only the
standard library and NumPy, so it runs where TensorFlow does not (the GPU kit,
``python tools/gpu_kit`` in a checkout, ships it). The library is compiled by
``bzna_tf.ops._build.compile_core``.

Three families of calls:

- ``*_host`` methods take and return NumPy arrays; the core copies to and
  from the GPU and returns when the results are written.
- The device methods take raw device pointers (Python ints, e.g. from
  :meth:`GpuCore.alloc`, ``torch.Tensor.data_ptr()`` or CuPy), an optional
  ``CUstream`` (an int), and write into device memory.
- :class:`GpuQueue` (:meth:`GpuCore.queue`) decodes batches in the background:
  ``submit`` returns a ticket at once, ``collect`` waits for its batch and
  copies it into device memory (or lends the queue's ring buffer).

Matrices map OUTPUT pixel indices to SOURCE pixel indices of the picture
(SPEC section 4), 3x3 row-major float32; one per picture, or one for all. The
decoding calls' picture is each one's ``picture_sizes`` (height, width) at the
top-left of its decoded frame, else the whole frame: outside it is ``oob``.
Output: float32 ``(N, H, W, 3)``, or ``(N, 3, H, W)`` with ``channels_first``;
``out[c] = (rgb[c] - bias[c]) * norm[c]`` inside the source, ``oob[c]`` (raw)
outside; with ``antialias=True``, pixels where the matrix reduces average a
footprint of bilinear taps (the CPU ops' ``antialias``). Every failure raises a
:class:`GpuCoreError` carrying the core's status code and its message
(``bzna_gpu_last_error()``).
"""

from __future__ import annotations

import ctypes
import json
import os

import numpy as np

__all__ = [
    "ABI_VERSION",
    "CANCELLED",
    "FLOAT32",
    "HAS_CUDA",
    "HAS_NVDEC",
    "INTERNAL",
    "INVALID_ARGUMENT",
    "LIB_NAME",
    "OK",
    "OUT_OF_MEMORY",
    "SKIP_BAD",
    "UINT8",
    "UNAVAILABLE",
    "GpuCancelledError",
    "GpuCore",
    "GpuCoreError",
    "GpuInternalError",
    "GpuInvalidArgumentError",
    "GpuOutOfMemoryError",
    "GpuQueue",
    "GpuUnavailableError",
]

LIB_NAME = "libbzna_tf_gpu_core.so"
ABI_VERSION = 4  # bzna_gpu.h's BZNA_GPU_ABI_VERSION (4: the asynchronous queue)

# Status codes (bzna_gpu.h).
OK = 0
INVALID_ARGUMENT = 1
UNAVAILABLE = 2
INTERNAL = 3
OUT_OF_MEMORY = 4
CANCELLED = 5
STATUS_NAMES = {
    OK: "OK",
    INVALID_ARGUMENT: "INVALID_ARGUMENT",
    UNAVAILABLE: "UNAVAILABLE",
    INTERNAL: "INTERNAL",
    OUT_OF_MEMORY: "OUT_OF_MEMORY",
    CANCELLED: "CANCELLED",
}

# bzna_gpu_probe() bits.
HAS_CUDA = 1
HAS_NVDEC = 2

# bzna_gpu_warp_rgb() dtypes.
UINT8 = 0
FLOAT32 = 1

# bzna_gpu_submit() flags.
SKIP_BAD = 1

_DESCRIBE_BYTES = 1 << 16


class GpuCoreError(RuntimeError):
    """A GPU core call that returned a status other than OK.

    Attributes:
      code: the BZNA_GPU_* status (``INVALID_ARGUMENT``, ``UNAVAILABLE``, ``INTERNAL``, ``OUT_OF_MEMORY``,
        ``CANCELLED``).
      message: the core's reason (``bzna_gpu_last_error()``).
      function: the C function that failed, or None.
    """

    def __init__(self, code: int, message: str, function: str | None = None):
        self.code = int(code)
        self.message = message
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{message} [{STATUS_NAMES.get(self.code, f'status {self.code}')}]")

    def __reduce__(self):
        return (type(self), (self.code, self.message, self.function))

    @property
    def status_name(self) -> str:
        return STATUS_NAMES.get(self.code, f"status {self.code}")


class GpuInvalidArgumentError(GpuCoreError, ValueError):
    """BZNA_GPU_INVALID_ARGUMENT: bad arguments, or data NVDEC cannot decode."""


class GpuUnavailableError(GpuCoreError):
    """BZNA_GPU_UNAVAILABLE: no driver, no GPU, or no NVDEC."""


class GpuInternalError(GpuCoreError):
    """BZNA_GPU_INTERNAL: a CUDA or NVDEC call failed."""


class GpuOutOfMemoryError(GpuCoreError, MemoryError):
    """BZNA_GPU_OUT_OF_MEMORY: GPU memory ran out."""


class GpuCancelledError(GpuCoreError):
    """BZNA_GPU_CANCELLED: the queue was destroyed before the batch ran (or while the call waited)."""


_ERRORS = {
    INVALID_ARGUMENT: GpuInvalidArgumentError,
    UNAVAILABLE: GpuUnavailableError,
    INTERNAL: GpuInternalError,
    OUT_OF_MEMORY: GpuOutOfMemoryError,
    CANCELLED: GpuCancelledError,
}


def error_for(code: int, message: str, function: str | None = None) -> GpuCoreError:
    """The :class:`GpuCoreError` subclass instance for a status code (the base class for unknown codes)."""
    return _ERRORS.get(int(code), GpuCoreError)(code, message, function)


class WarpParams(ctypes.Structure):
    """``bzna_gpu_warp_params``: output size, normalisation, out-of-bounds colour, layout, antialias."""

    _fields_ = [
        ("out_height", ctypes.c_int32),
        ("out_width", ctypes.c_int32),
        ("bias", ctypes.c_float * 3),
        ("norm", ctypes.c_float * 3),
        ("oob", ctypes.c_float * 3),
        ("channels_first", ctypes.c_int32),
        ("antialias", ctypes.c_int32),
    ]


_c_int = ctypes.c_int
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_u64 = ctypes.c_uint64
_ptr = ctypes.c_void_p
_pictures_t = ctypes.POINTER(ctypes.c_char_p)
_sizes_t = ctypes.POINTER(ctypes.c_uint64)
_params_t = ctypes.POINTER(WarpParams)

# name -> argtypes (every function returns int).
_SIGNATURES = {
    "bzna_gpu_abi_version": [],
    "bzna_gpu_probe": [],
    "bzna_gpu_describe": [_c_int, ctypes.c_char_p, _u64],
    "bzna_gpu_set_nvdec_sessions": [_c_int],
    "bzna_gpu_decode_warp": [_c_int, _ptr, _pictures_t, _sizes_t, _i64, _ptr, _i64, _ptr, _params_t, _ptr],
    "bzna_gpu_decode_warp_host": [_c_int, _pictures_t, _sizes_t, _i64, _ptr, _i64, _ptr, _params_t, _ptr],
    "bzna_gpu_decode_yuv": [_c_int, _ptr, _pictures_t, _sizes_t, _i64, _i32, _i32, _ptr, _ptr, _ptr, _ptr],
    "bzna_gpu_decode_yuv_host": [_c_int, _pictures_t, _sizes_t, _i64, _i32, _i32, _ptr, _ptr, _ptr, _ptr],
    "bzna_gpu_warp_yuv420": [_c_int, _ptr, _ptr, _ptr, _ptr, _i64, _i32, _i32, _ptr, _i64, _params_t, _ptr],
    "bzna_gpu_warp_yuv420_host": [_c_int, _ptr, _ptr, _ptr, _i64, _i32, _i32, _ptr, _i64, _params_t, _ptr],
    "bzna_gpu_warp_rgb": [_c_int, _ptr, _ptr, _i32, _i64, _i32, _i32, _ptr, _i64, _params_t, _ptr],
    "bzna_gpu_warp_rgb_host": [_c_int, _ptr, _i32, _i64, _i32, _i32, _ptr, _i64, _params_t, _ptr],
    "bzna_gpu_fill_oob": [_c_int, _ptr, _i64, _params_t, _ptr],
    "bzna_gpu_alloc": [_c_int, _u64, ctypes.POINTER(ctypes.c_void_p)],
    "bzna_gpu_free": [_c_int, _ptr],
    "bzna_gpu_copy": [_c_int, _ptr, _ptr, _u64],
    "bzna_gpu_queue_create": [_c_int, _i32, ctypes.POINTER(ctypes.c_void_p)],
    "bzna_gpu_queue_destroy": [_ptr],
    "bzna_gpu_submit": [
        _ptr,
        _pictures_t,
        _sizes_t,
        _i64,
        _ptr,
        _i64,
        _ptr,
        _params_t,
        _i32,
        ctypes.POINTER(_i64),
    ],
    "bzna_gpu_collect": [_ptr, _i64, _ptr, _ptr, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_i64)],
    "bzna_gpu_release": [_ptr, _i64, _ptr],
    "bzna_gpu_ticket_failure": [_ptr, _i64, _i64, ctypes.POINTER(_i64), ctypes.c_char_p, _u64],
}

_FAILURE_BYTES = 4096


# ----------------------------------------------------------------------------------------- argument helpers


def _pictures(pictures):
    """(char* array, uint64 array, list of bytes kept alive) from a sequence of bytes-like pictures."""
    if isinstance(pictures, (bytes, bytearray, memoryview, str)):
        raise TypeError(
            "Expected `pictures` as a list of bytes (one Annex-B H.265 picture each). "
            f"Received: a single {type(pictures).__name__}"
        )
    try:
        items = list(pictures)
    except TypeError as e:
        raise TypeError(f"Expected `pictures` as a list of bytes. Received: {type(pictures).__name__}") from e
    data = []
    for i, p in enumerate(items):
        if isinstance(p, np.ndarray):
            p = p.item() if p.ndim == 0 else np.ascontiguousarray(p, dtype=np.uint8).tobytes()
        if isinstance(p, (bytearray, memoryview)):
            p = bytes(p)
        if not isinstance(p, bytes):
            raise TypeError(f"Expected picture {i} as bytes. Received: {type(p).__name__}")
        data.append(p)
    # c_char_p points into each bytes object without copying; the array keeps them referenced.
    ptrs = (ctypes.c_char_p * len(data))(*data)
    sizes = (ctypes.c_uint64 * len(data))(*(len(p) for p in data))
    return ptrs, sizes, data


def _matrices(matrices) -> np.ndarray:
    """float32 C-contiguous (M, 3, 3) from (3, 3), (9,), (M, 3, 3) or (M, 9)."""
    m = np.asarray(matrices)
    if m.dtype.kind not in "fiu":
        raise TypeError(f"Expected real-valued `matrices`. Received: matrices.dtype={m.dtype}")
    if m.shape in ((3, 3), (9,)):
        m = m.reshape(1, 3, 3)
    elif m.ndim == 2 and m.shape[1] == 9:
        m = m.reshape(-1, 3, 3)
    elif not (m.ndim == 3 and m.shape[1:] == (3, 3)):
        raise ValueError(
            f"Expected `matrices` of shape (3, 3), (M, 3, 3) or (M, 9). Received: matrices.shape={m.shape}"
        )
    return np.ascontiguousarray(m, dtype=np.float32)


def _picture_sizes(picture_sizes, count: int):
    """int32 C-contiguous (count, 2) (height, width) per picture, or None (the decoded frames' sizes)."""
    if picture_sizes is None:
        return None
    sizes = np.asarray(picture_sizes)
    if sizes.dtype.kind not in "iu":
        raise TypeError(
            f"Expected integer `picture_sizes` (height, width). Received: picture_sizes.dtype={sizes.dtype}"
        )
    if sizes.shape != (count, 2):
        raise ValueError(
            f"Expected `picture_sizes` of shape ({count}, 2), (height, width) per picture. "
            f"Received: picture_sizes.shape={sizes.shape}"
        )
    if sizes.size and (sizes.min() < -(2**31) or sizes.max() >= 2**31):
        raise ValueError(f"Expected `picture_sizes` within int32. Received: {sizes.tolist()}")
    return np.ascontiguousarray(sizes, dtype=np.int32)


def _pair(value, arg) -> tuple[int, int]:
    """Two Python ints (height, width); the core checks their range."""
    try:
        h, w = (int(v) for v in value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"Expected `{arg}` = (height, width), two integers. Received: {arg}={value!r}") from e
    if not (-(2**31) <= h < 2**31 and -(2**31) <= w < 2**31):
        raise ValueError(f"Expected `{arg}` within int32. Received: {arg}={value!r}")
    return h, w


def _three(value, arg) -> tuple[float, float, float]:
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.size == 1:
        v = np.repeat(v, 3)
    if v.size != 3:
        raise ValueError(f"Expected `{arg}` as a scalar or 3 values. Received: {arg}={value!r}")
    return tuple(float(x) for x in v)


def warp_params(
    out_shape, bias=(0, 0, 0), norm=(1, 1, 1), oob=(0, 0, 0), channels_first=False, antialias=False
) -> WarpParams:
    """A :class:`WarpParams` from Python values (``out_shape`` = (height, width))."""
    h, w = _pair(out_shape, "out_shape")
    p = WarpParams()
    p.out_height, p.out_width = h, w
    p.bias[:] = _three(bias, "bias")
    p.norm[:] = _three(norm, "norm")
    p.oob[:] = _three(oob, "oob")
    p.channels_first = 1 if channels_first else 0
    p.antialias = 1 if antialias else 0
    return p


def _out_array(count, params: WarpParams) -> np.ndarray:
    h, w = max(0, params.out_height), max(0, params.out_width)  # the core rejects <= 0 itself
    shape = (count, 3, h, w) if params.channels_first else (count, h, w, 3)
    return np.zeros(shape, dtype=np.float32)


def _stream(stream):
    return None if stream is None or stream == 0 else ctypes.c_void_p(int(stream))


def _dtype_code(dtype) -> int:
    """BZNA_GPU_UINT8 / BZNA_GPU_FLOAT32 from a NumPy dtype; an int goes through for the core to check."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return int(dtype)
    d = np.dtype(dtype)
    if d == np.uint8:
        return UINT8
    if d == np.float32:
        return FLOAT32
    raise TypeError(f"Expected images of dtype uint8 or float32. Received: dtype={d}")


def _planes(y, cb, cr):
    """Validated C-contiguous uint8 planes (N, H, W), (N, (H+1)//2, (W+1)//2) x 2."""
    planes = [np.asarray(p) for p in (y, cb, cr)]
    for p, arg in zip(planes, ("y", "cb", "cr"), strict=True):
        if p.dtype != np.uint8:
            raise TypeError(f"Expected `{arg}` of dtype uint8. Received: {arg}.dtype={p.dtype}")
    if planes[0].ndim == 2:
        planes = [p[np.newaxis] if p.ndim == 2 else p for p in planes]
    if planes[0].ndim != 3:
        raise ValueError(f"Expected `y` of shape (N, H, W) or (H, W). Received: y.shape={planes[0].shape}")
    n, h, w = planes[0].shape
    want = (n, (h + 1) // 2, (w + 1) // 2)
    if planes[1].shape != want or planes[2].shape != want:
        raise ValueError(
            f"Expected `cb` and `cr` of shape {want} for y of shape {planes[0].shape}. "
            f"Received: cb.shape={planes[1].shape}, cr.shape={planes[2].shape}"
        )
    return [np.ascontiguousarray(p) for p in planes]


# --------------------------------------------------------------------------------------------- the binding


class GpuCore:
    """The GPU core library, loaded with ctypes.

    Args:
      path: the shared library (``libbzna_tf_gpu_core.so``, from ``bzna_tf.ops._build.compile_core``).

    Raises:
      OSError: the library cannot be loaded (the message names it).
      GpuCoreError: it reports an ABI version other than :data:`ABI_VERSION`.

    Example:

    ```python
    core = GpuCore(compile_core("build"))
    bits, reason = core.probe()
    out = core.decode_warp_host([pic], np.eye(3), (224, 224))  # (1, 224, 224, 3) float32
    ```
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            self.lib = ctypes.CDLL(self.path)
        except OSError as e:
            raise OSError(f"cannot load the GPU core {self.path}: {e}") from e
        for name, argtypes in _SIGNATURES.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError as e:
                raise OSError(f"{self.path} lacks {name}(): not the bzna_gpu.h library it should be") from e
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        self.lib.bzna_gpu_last_error.argtypes = []
        self.lib.bzna_gpu_last_error.restype = ctypes.c_char_p
        version = self.lib.bzna_gpu_abi_version()
        if version != ABI_VERSION:
            raise GpuCoreError(
                INTERNAL,
                f"expected ABI version {ABI_VERSION} (bzna_gpu.h). Received: {version} from {self.path}",
                "bzna_gpu_abi_version",
            )
        self.abi_version = version

    def __repr__(self):
        return f"GpuCore({self.path!r})"

    # ----------------------------------------------------------------------------------------- plumbing

    def last_error(self) -> str:
        """The reason the last failed call on this thread failed ("" if none)."""
        raw = self.lib.bzna_gpu_last_error()
        return raw.decode("utf-8", "replace") if raw else ""

    def _call(self, name: str, *args) -> None:
        status = getattr(self.lib, name)(*args)
        if status != OK:
            raise error_for(status, self.last_error() or "(no message)", name)

    # ------------------------------------------------------------------------------------------ queries

    def probe(self) -> tuple[int, str | None]:
        """What this machine offers; creates no CUDA context.

        Returns:
          ``(bits, reason)``: bits of :data:`HAS_CUDA` (driver loaded, at least one GPU) and
          :data:`HAS_NVDEC` (libnvcuvid too); reason is why a bit is missing, None when both are set.
        """
        bits = int(self.lib.bzna_gpu_probe())
        reason = None if bits & (HAS_CUDA | HAS_NVDEC) == (HAS_CUDA | HAS_NVDEC) else self.last_error()
        return bits, reason

    def describe(self, device: int = 0) -> dict:
        """What the core knows of a device (name, compute capability, driver, kernel image, NVDEC).

        Creates the device's primary context if needed.

        Returns:
          The core's JSON description, parsed (a dict).

        Raises:
          GpuCoreError: no driver or no such device.
        """
        buf = ctypes.create_string_buffer(_DESCRIBE_BYTES)
        self._call("bzna_gpu_describe", int(device), buf, _DESCRIBE_BYTES)
        return json.loads(buf.value.decode("utf-8", "replace"))

    def set_nvdec_sessions(self, sessions: int) -> None:
        """Decoder sessions per batch (host thread + NVDEC decoder + stream each); 0 restores the default."""
        self._call("bzna_gpu_set_nvdec_sessions", int(sessions))

    # ----------------------------------------------------------------------------------- host variants

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
        device: int = 0,
    ) -> np.ndarray:
        """Decodes pictures with NVDEC and warps each with its matrix (host memory in and out).

        Args:
          pictures: N Annex-B H.265 pictures (bytes), one intra picture each.
          matrices: output->source matrices: (3, 3) for all, or (N, 3, 3) / (N, 9).
          out_shape: the output (height, width).
          bias, norm: ``out = (rgb - bias) * norm`` per channel (scalars or 3 values).
          oob: the raw colour outside the source.
          channels_first: (N, 3, H, W) instead of (N, H, W, 3).
          antialias: where a matrix reduces, average a footprint of bilinear taps instead of
            sampling a point (the CPU ops' ``antialias``; custom_ops/lib/warp.h).
          picture_sizes: integers (N, 2), each picture's (height, width) at the top-left of its
            decoded frame (a track's size, without the frame's padding): the source is that
            picture, ``oob`` beyond it on every side. A size below 1 or above the decoded frame's
            is an error naming the sample. None (default): the decoded frames' own sizes.
          device: the CUDA device ordinal.

        Returns:
          float32 array (N, H, W, 3), or (N, 3, H, W) with ``channels_first``.

        Raises:
          GpuCoreError: arguments the core rejects (:class:`GpuInvalidArgumentError`, naming the
            sample), no GPU (:class:`GpuUnavailableError`), or a CUDA/NVDEC failure.
        """
        ptrs, sizes, keep = _pictures(pictures)
        m = _matrices(matrices)
        hw = _picture_sizes(picture_sizes, len(keep))
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        out = _out_array(len(keep), params)
        self._call(
            "bzna_gpu_decode_warp_host",
            int(device),
            ptrs,
            sizes,
            len(keep),
            m.ctypes.data,
            m.shape[0],
            None if hw is None else hw.ctypes.data,
            ctypes.byref(params),
            out.ctypes.data,
        )
        return out

    def decode_yuv_host(self, pictures, max_shape, *, device: int = 0):
        """Decodes pictures with NVDEC into host planes.

        Args:
          pictures: N Annex-B H.265 pictures (bytes).
          max_shape: (max_height, max_width) of a slot; a larger frame is an error.
          device: the CUDA device ordinal.

        Returns:
          ``(y, cb, cr, frame_sizes)``: uint8 arrays (N, H, W), (N, (H + 1) // 2, (W + 1) // 2) twice
          (picture n's planes at the top-left of slot n, zeros elsewhere), and int32 (N, 2), each
          frame's decoded (height, width).

        Raises:
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        ptrs, sizes, keep = _pictures(pictures)
        h, w = _pair(max_shape, "max_shape")
        n = len(keep)
        hh, ww = max(0, h), max(0, w)
        y = np.zeros((n, hh, ww), np.uint8)
        cb = np.zeros((n, (hh + 1) // 2, (ww + 1) // 2), np.uint8)
        cr = np.zeros_like(cb)
        frame_sizes = np.zeros((n, 2), np.int32)
        self._call(
            "bzna_gpu_decode_yuv_host",
            int(device),
            ptrs,
            sizes,
            n,
            h,
            w,
            y.ctypes.data,
            cb.ctypes.data,
            cr.ctypes.data,
            frame_sizes.ctypes.data,
        )
        return y, cb, cr, frame_sizes

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
        device: int = 0,
    ) -> np.ndarray:
        """Warps planar 4:2:0 frames on the GPU (host memory in and out).

        Args:
          y: uint8 (N, H, W) (or (H, W) for one frame).
          cb, cr: uint8 (N, (H + 1) // 2, (W + 1) // 2).
          matrices, out_shape, bias, norm, oob, channels_first, antialias, device: as for
            :meth:`decode_warp_host`.

        Returns:
          float32 array (N, H', W', 3), or (N, 3, H', W') with ``channels_first``.

        Raises:
          TypeError, ValueError: planes that are not uint8 or whose shapes do not fit together.
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        y, cb, cr = _planes(y, cb, cr)
        n, h, w = y.shape
        m = _matrices(matrices)
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        out = _out_array(n, params)
        self._call(
            "bzna_gpu_warp_yuv420_host",
            int(device),
            y.ctypes.data,
            cb.ctypes.data,
            cr.ctypes.data,
            n,
            h,
            w,
            m.ctypes.data,
            m.shape[0],
            ctypes.byref(params),
            out.ctypes.data,
        )
        return out

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
        device: int = 0,
    ) -> np.ndarray:
        """Warps interleaved RGB images on the GPU (host memory in and out).

        uint8 images are rounded and clamped after interpolation like decoded pixels; float32 images
        are left as interpolated.

        Args:
          images: uint8 or float32 (N, H, W, 3) (or (H, W, 3) for one image).
          matrices, out_shape, bias, norm, oob, channels_first, antialias, device: as for
            :meth:`decode_warp_host`.

        Returns:
          float32 array (N, H', W', 3), or (N, 3, H', W') with ``channels_first``.

        Raises:
          TypeError: images neither uint8 nor float32.
          ValueError: images not (N, H, W, 3).
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        images = np.asarray(images)
        code = _dtype_code(images.dtype)
        if images.ndim == 3:
            images = images[np.newaxis]
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(
                f"Expected `images` of shape (N, H, W, 3). Received: images.shape={images.shape}"
            )
        images = np.ascontiguousarray(images)
        n, h, w, _ = images.shape
        m = _matrices(matrices)
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        out = _out_array(n, params)
        self._call(
            "bzna_gpu_warp_rgb_host",
            int(device),
            images.ctypes.data,
            code,
            n,
            h,
            w,
            m.ctypes.data,
            m.shape[0],
            ctypes.byref(params),
            out.ctypes.data,
        )
        return out

    # --------------------------------------------------------------------------------- device variants

    def decode_warp(
        self,
        pictures,
        matrices_ptr: int,
        matrix_count: int,
        out_ptr: int,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        picture_sizes=None,
        device: int = 0,
        stream: int | None = None,
    ) -> None:
        """Decodes pictures (host bytes) with NVDEC and warps them into device memory.

        Args:
          pictures: N Annex-B H.265 pictures (bytes).
          matrices_ptr: device pointer to ``matrix_count`` float32 3x3 row-major matrices.
          matrix_count: 1 or N.
          out_ptr: device pointer to float32 (N, H, W, 3), or (N, 3, H, W) with ``channels_first``.
          out_shape: the output (height, width).
          bias, norm, oob, channels_first, antialias, picture_sizes: as for :meth:`decode_warp_host`
            (``picture_sizes`` in host memory).
          device: the CUDA device ordinal (ignored with a stream: the stream's context is used).
          stream: a ``CUstream`` as an int, or None for the device's primary context.

        Returns:
          None, once the output is written.

        Raises:
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        ptrs, sizes, keep = _pictures(pictures)
        hw = _picture_sizes(picture_sizes, len(keep))
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        self._call(
            "bzna_gpu_decode_warp",
            int(device),
            _stream(stream),
            ptrs,
            sizes,
            len(keep),
            matrices_ptr,
            int(matrix_count),
            None if hw is None else hw.ctypes.data,
            ctypes.byref(params),
            out_ptr,
        )

    def decode_yuv(
        self,
        pictures,
        max_shape,
        y_ptr: int,
        cb_ptr: int,
        cr_ptr: int,
        *,
        device: int = 0,
        stream: int | None = None,
    ) -> np.ndarray:
        """Decodes pictures with NVDEC into device planes.

        Args:
          pictures: N Annex-B H.265 pictures (bytes).
          max_shape: (max_height, max_width) of a slot.
          y_ptr: device pointer to uint8 (N, max_height, max_width).
          cb_ptr, cr_ptr: device pointers to uint8 (N, (max_height + 1) // 2, (max_width + 1) // 2).
          device, stream: as for :meth:`decode_warp`.

        Returns:
          int32 array (N, 2): each frame's decoded (height, width).

        Raises:
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        ptrs, sizes, keep = _pictures(pictures)
        h, w = _pair(max_shape, "max_shape")
        frame_sizes = np.zeros((len(keep), 2), np.int32)
        self._call(
            "bzna_gpu_decode_yuv",
            int(device),
            _stream(stream),
            ptrs,
            sizes,
            len(keep),
            h,
            w,
            y_ptr,
            cb_ptr,
            cr_ptr,
            frame_sizes.ctypes.data,
        )
        return frame_sizes

    def warp_yuv420(
        self,
        y_ptr: int,
        cb_ptr: int,
        cr_ptr: int,
        count: int,
        frame_shape,
        matrices_ptr: int,
        matrix_count: int,
        out_ptr: int,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device: int = 0,
        stream: int | None = None,
    ) -> None:
        """Warps planar 4:2:0 frames in device memory (enqueued only when a stream is given).

        Args:
          y_ptr: device pointer to uint8 (count, H, W).
          cb_ptr, cr_ptr: device pointers to uint8 (count, (H + 1) // 2, (W + 1) // 2).
          count: the number of frames.
          frame_shape: (H, W) of the frames.
          matrices_ptr, matrix_count, out_ptr, out_shape, bias, norm, oob, channels_first, antialias, device,
            stream: as for :meth:`decode_warp`.

        Raises:
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        h, w = _pair(frame_shape, "frame_shape")
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        self._call(
            "bzna_gpu_warp_yuv420",
            int(device),
            _stream(stream),
            y_ptr,
            cb_ptr,
            cr_ptr,
            int(count),
            h,
            w,
            matrices_ptr,
            int(matrix_count),
            ctypes.byref(params),
            out_ptr,
        )

    def warp_rgb(
        self,
        images_ptr: int,
        dtype,
        count: int,
        image_shape,
        matrices_ptr: int,
        matrix_count: int,
        out_ptr: int,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device: int = 0,
        stream: int | None = None,
    ) -> None:
        """Warps interleaved RGB images in device memory (enqueued only when a stream is given).

        Args:
          images_ptr: device pointer to (count, H, W, 3) images.
          dtype: ``np.uint8`` / ``np.float32`` (or the core's code, :data:`UINT8` / :data:`FLOAT32`).
          count: the number of images.
          image_shape: (H, W) of the images.
          matrices_ptr, matrix_count, out_ptr, out_shape, bias, norm, oob, channels_first, antialias, device,
            stream: as for :meth:`decode_warp`.

        Raises:
          TypeError: a NumPy dtype other than uint8 or float32.
          GpuCoreError: as for :meth:`decode_warp_host` (an unknown integer dtype code included).
        """
        h, w = _pair(image_shape, "image_shape")
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        self._call(
            "bzna_gpu_warp_rgb",
            int(device),
            _stream(stream),
            images_ptr,
            _dtype_code(dtype),
            int(count),
            h,
            w,
            matrices_ptr,
            int(matrix_count),
            ctypes.byref(params),
            out_ptr,
        )

    def fill_oob(
        self,
        count: int,
        out_ptr: int,
        out_shape,
        *,
        bias=(0, 0, 0),
        norm=(1, 1, 1),
        oob=(0, 0, 0),
        channels_first=False,
        antialias=False,
        device: int = 0,
        stream: int | None = None,
    ) -> None:
        """Writes ``count`` outputs whose every pixel is what the warps write out of bounds.

        What a picture that failed to decode becomes when the caller skips it (``oob`` in the
        output's layout; bias, norm and antialias are checked as the warps check them, and unused).

        Args:
          count: the number of outputs (0 writes nothing).
          out_ptr, out_shape, bias, norm, oob, channels_first, antialias, device, stream: as for
            :meth:`decode_warp`.

        Raises:
          GpuCoreError: as for :meth:`decode_warp_host`.
        """
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        self._call(
            "bzna_gpu_fill_oob", int(device), _stream(stream), int(count), ctypes.byref(params), out_ptr
        )

    # -------------------------------------------------------------------------------------- memory

    def alloc(self, nbytes: int, device: int = 0) -> int:
        """Allocates device memory in ``device``'s primary context.

        Returns:
          The device pointer, an int (free it with :meth:`free`).
        """
        ptr = ctypes.c_void_p()
        self._call("bzna_gpu_alloc", int(device), int(nbytes), ctypes.byref(ptr))
        return int(ptr.value or 0)

    def free(self, ptr: int, device: int = 0) -> None:
        """Frees memory from :meth:`alloc`."""
        self._call("bzna_gpu_free", int(device), ptr)

    def copy(self, dst: int, src: int, nbytes: int, device: int = 0) -> None:
        """Copies ``nbytes`` between two pointers, host or device, either way (unified addressing)."""
        self._call("bzna_gpu_copy", int(device), dst, src, int(nbytes))

    def queue(self, depth: int = 2, device: int = 0) -> GpuQueue:
        """A :class:`GpuQueue` on ``device``: at most ``depth`` batches in flight."""
        return GpuQueue(self, depth, device)

    def upload(self, array, device: int = 0) -> int:
        """A new device buffer holding a copy of ``array`` (C order).

        Returns:
          The device pointer, an int (free it with :meth:`free`).
        """
        a = np.ascontiguousarray(array)
        ptr = self.alloc(max(1, a.nbytes), device)
        try:
            if a.nbytes:
                self.copy(ptr, a.ctypes.data, a.nbytes, device)
        except BaseException:
            self.free(ptr, device)
            raise
        return ptr

    def download(self, ptr: int, shape, dtype, device: int = 0) -> np.ndarray:
        """A NumPy copy of device memory holding an array of ``shape`` and ``dtype`` (C order).

        Returns:
          A new array (shape, dtype).
        """
        out = np.empty(shape, dtype)
        if out.nbytes:
            self.copy(out.ctypes.data, ptr, out.nbytes, device)
        return out


class GpuQueue:
    """Asynchronous decode + warp batches on a worker thread of the core (``bzna_gpu_queue_*``).

    :meth:`submit` copies a batch and returns its ticket at once (it blocks only while ``depth``
    batches are in flight); the core decodes the tickets in order on its own decoder sessions and
    streams, into a ring of ``depth`` device buffers, while the caller works on earlier batches.
    :meth:`collect` waits for a ticket (in any order, each once). A decoding error fails its own
    ticket only. Closing the queue (:meth:`close`, or leaving a ``with`` block) cancels the batches
    not started, waits for the one being decoded and frees the ring; a thread blocked in
    :meth:`submit` or :meth:`collect` gets :class:`GpuCancelledError`.

    Args:
      core: the :class:`GpuCore`.
      depth: batches in flight at most (1 to 64): the ring's size.
      device: the CUDA device ordinal (the queue works in its primary context).

    Raises:
      GpuCoreError: ``depth`` out of range (:class:`GpuInvalidArgumentError`), no driver, GPU or
        NVDEC (:class:`GpuUnavailableError`).

    Example:

    ```python
    with core.queue(depth=3) as q:
        tickets = [q.submit(pictures[k], matrices[k], (224, 224)) for k in range(3)]
        for t in tickets:
            q.collect(t, out=buffer_ptr, stream=torch.cuda.current_stream().cuda_stream)
            ...  # train on buffer, on that stream
    ```
    """

    def __init__(self, core: GpuCore, depth: int = 2, device: int = 0):
        self.core = core
        self.depth = int(depth)
        self.device = int(device)
        self._handle = None
        handle = ctypes.c_void_p()
        core._call("bzna_gpu_queue_create", self.device, self.depth, ctypes.byref(handle))
        self._handle = handle.value

    def __repr__(self):
        state = "closed" if self._handle is None else f"depth={self.depth}, device={self.device}"
        return f"GpuQueue({state})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self, what: str):
        if self._handle is None:
            raise ValueError(f"Expected an open GpuQueue for {what}(). Received: a closed one")
        return ctypes.c_void_p(self._handle)

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
        skip_bad: bool = False,
    ) -> int:
        """Submits a batch; returns its ticket (tickets count from 0 in submission order).

        Args:
          pictures, matrices, out_shape, bias, norm, oob, channels_first, antialias, picture_sizes:
            as for :meth:`GpuCore.decode_warp_host` (host memory, copied before the call returns).
          skip_bad: a picture that fails to decode (or whose picture size exceeds its frame) becomes
            ``oob`` in every pixel and is listed by :meth:`collect`, instead of failing the batch.

        Returns:
          The ticket, an int.

        Raises:
          GpuCoreError: arguments the core rejects (nothing submitted), or
            :class:`GpuCancelledError` when the queue is closed while this call waits.
        """
        handle = self._live("submit")
        ptrs, sizes, keep = _pictures(pictures)
        m = _matrices(matrices)
        hw = _picture_sizes(picture_sizes, len(keep))
        params = warp_params(out_shape, bias, norm, oob, channels_first, antialias)
        ticket = ctypes.c_int64(-1)
        self.core._call(
            "bzna_gpu_submit",
            handle,
            ptrs,
            sizes,
            len(keep),
            m.ctypes.data,
            m.shape[0],
            None if hw is None else hw.ctypes.data,
            ctypes.byref(params),
            SKIP_BAD if skip_bad else 0,
            ctypes.byref(ticket),
        )
        return int(ticket.value)

    def collect(self, ticket: int, out: int | None = None, stream: int | None = None):
        """Waits for a ticket's batch (float32, in its ``out_shape`` and layout).

        Args:
          ticket: from :meth:`submit`.
          out: a device pointer (in the queue's context) to copy the batch into, on ``stream``; the
            ticket is then released here. None: the queue's ring buffer holding the batch is lent
            until :meth:`release`.
          stream: a ``CUstream`` (an int) of the queue's context for the copy, which runs after the
            work already queued there; None waits for the copy.

        Returns:
          ``(pointer, failures)``: the ring buffer's device pointer (None with ``out``, or for an
          empty batch) and, for ``skip_bad``, the skipped pictures as ``(sample, reason)`` pairs.

        Raises:
          GpuCoreError: the batch's decoding error ("sample 3 of the batch: ..."; the ticket is then
            finished), an unknown or already collected ticket (:class:`GpuInvalidArgumentError`),
            or :class:`GpuCancelledError` when the queue is closed while this call waits.
        """
        handle = self._live("collect")
        ring = ctypes.c_void_p()
        count = ctypes.c_int64(0)
        self.core._call(
            "bzna_gpu_collect",
            handle,
            int(ticket),
            _stream(stream),
            None if out is None else ctypes.c_void_p(int(out)),
            ctypes.byref(ring),
            ctypes.byref(count),
        )
        failures = []
        message = ctypes.create_string_buffer(_FAILURE_BYTES)
        sample = ctypes.c_int64(-1)
        for i in range(count.value):
            self.core._call(
                "bzna_gpu_ticket_failure",
                handle,
                int(ticket),
                i,
                ctypes.byref(sample),
                message,
                _FAILURE_BYTES,
            )
            failures.append((int(sample.value), message.value.decode("utf-8", "replace")))
        if out is not None:
            self.release(ticket)
            return None, failures
        return (int(ring.value) if ring.value else None), failures

    def release(self, ticket: int, stream: int | None = None) -> None:
        """Returns a collected ticket's ring buffer to the queue once the work queued on ``stream`` so
        far (the caller's reads of it) is done; None: at once."""
        self.core._call("bzna_gpu_release", self._live("release"), int(ticket), _stream(stream))

    def close(self) -> None:
        """Destroys the queue (idempotent): cancels the batches not started, waits for the running one."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        self.core._call("bzna_gpu_queue_destroy", ctypes.c_void_p(handle))
