"""Loading the compiled ops (building them on first use)."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import threading
import warnings
from pathlib import Path

from bzna_tf._cache import OPS_LIBRARY_VAR
from bzna_tf.ops._build import (
    CORE_LIB_NAME,
    GPU_NVDEC_LIB_NAME,
    GPU_WARP_LIB_NAME,
    BuildError,
    GpuLibraries,
    build,
    build_gpu,
    plan,
)
from bzna_tf.ops.gpu_core import HAS_CUDA, HAS_NVDEC, GpuCore

__all__ = ["load_library", "load_gpu_library", "ffmpeg_libraries", "ffmpeg_error", "gpu_error"]

_lock = threading.Lock()
_module = None
_path = None  # the libbzna_tf_ops.so loaded (ctypes calls go to this very file)
_ffmpeg_error = None
_gpu_state = None  # None: not tried; else (library path or None, error or None)


def ffmpeg_libraries() -> tuple[str, str] | None:
    """(libavutil, libavcodec) paths for the native decoder, or None.

    ``$BZNA_TF_LIBAVUTIL`` and ``$BZNA_TF_LIBAVCODEC`` win; otherwise the
    copies PyAV's wheel ships (``av.libs/``), which the ``av`` module itself
    uses, so the process holds one FFmpeg.
    """
    if os.environ.get("BZNA_TF_LIBAVCODEC") and os.environ.get("BZNA_TF_LIBAVUTIL"):
        return os.environ["BZNA_TF_LIBAVUTIL"], os.environ["BZNA_TF_LIBAVCODEC"]
    try:
        import av
    except ImportError:
        return None
    site = os.path.dirname(os.path.dirname(av.__file__))
    for libs in (os.path.join(site, "av.libs"), os.path.join(os.path.dirname(av.__file__), ".dylibs")):
        util, codec = (_first_library(libs, name) for name in ("libavutil", "libavcodec"))
        if util and codec:
            return util, codec
    return None


def _first_library(folder: str, name: str) -> str | None:
    found = sorted(
        glob.glob(os.path.join(folder, f"{name}*.so*")) + glob.glob(os.path.join(folder, f"{name}*.dylib"))
    )
    return found[0] if found else None


def ffmpeg_error() -> str | None:
    """Why the native HEVC decoder is unavailable, or None when it works (after load_library())."""
    return _ffmpeg_error


def _load_ffmpeg(path) -> str | None:
    libs = ffmpeg_libraries()
    if libs is None:
        return (
            "found no libavcodec: install PyAV (pip install av), or set $BZNA_TF_LIBAVUTIL and "
            "$BZNA_TF_LIBAVCODEC to an FFmpeg 4.4 to 8 build"
        )
    lib = ctypes.CDLL(str(path))
    lib.bzna_tf_load_ffmpeg.restype = ctypes.c_char_p
    lib.bzna_tf_load_ffmpeg.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    err = lib.bzna_tf_load_ffmpeg(libs[0].encode(), libs[1].encode())
    return None if err is None else err.decode(errors="replace")


# Libraries built elsewhere (Bazel: `bazel build //:libbzna_tf_ops.so //:gpu`), loaded instead of
# bzna_tf's own g++ build: the ops library, and the folder holding the three GPU libraries.
GPU_LIBRARY_DIR_VAR = "BZNA_TF_GPU_LIBRARY_DIR"


def _given_library() -> Path | None:
    """$BZNA_TF_OPS_LIBRARY's absolute path, or None when unset."""
    given = os.environ.get(OPS_LIBRARY_VAR)
    if not given:
        return None
    if not os.path.isfile(given):
        raise BuildError(f"${OPS_LIBRARY_VAR} names {given}, which is not a file (unset it to build the ops)")
    return Path(given).absolute()


def _given_gpu_libraries() -> GpuLibraries | None:
    """The GPU libraries in $BZNA_TF_GPU_LIBRARY_DIR, or None when unset."""
    folder = os.environ.get(GPU_LIBRARY_DIR_VAR)
    if not folder:
        return None
    paths = [Path(folder).absolute() / n for n in (CORE_LIB_NAME, GPU_WARP_LIB_NAME, GPU_NVDEC_LIB_NAME)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise BuildError(f"${GPU_LIBRARY_DIR_VAR} is {folder}, which lacks {', '.join(missing)}")
    return GpuLibraries(*paths)


def load_library():
    """The op module of ``libbzna_tf_ops.so``, built for the installed TensorFlow if needed.

    ``$BZNA_TF_OPS_LIBRARY`` names a library built elsewhere (by Bazel) to load instead.

    Raises:
      BuildError: no compiler, a failed build, or a library TensorFlow refuses to load.
    """
    global _module, _path
    first = False
    with _lock:
        if _module is None:
            first = True
            import tensorflow as tf

            given = _given_library()
            path = given or build()
            try:
                _module = tf.load_op_library(str(path))
            except Exception as e:  # tf raises NotFoundError or RuntimeError with the dlerror text
                try:
                    built_for = json.loads((path.parent / "build.json").read_text())["tensorflow"]
                except (OSError, ValueError, KeyError):
                    built_for = "unknown"
                rebuild = (
                    f"Rebuild it (bazel build //:libbzna_tf_ops.so) or unset ${OPS_LIBRARY_VAR}"
                    if given
                    else f"Rebuild it with: python -m bzna_tf.ops build --force (key {plan().key})"
                )
                raise BuildError(
                    f"TensorFlow {tf.__version__} could not load {path} (built for TensorFlow {built_for}): "
                    f"{e}. {rebuild}"
                ) from e
            global _ffmpeg_error
            _ffmpeg_error = _load_ffmpeg(path)
            _path = path
    if first and _gpu_wanted():  # once: load_library() is on every op's path
        load_gpu_library()
    return _module


def _gpu_wanted() -> bool:
    """$BZNA_TF_GPU=1/0 forces the GPU kernels on/off; by default, on when TensorFlow sees a GPU."""
    flag = os.environ.get("BZNA_TF_GPU", "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    if flag in ("1", "true", "yes", "on"):
        return True
    return _tf_sees_gpu()


# Files an NVIDIA driver creates: the kernel module's /proc entry and device nodes (also in containers
# run with the NVIDIA runtime), WSL 2's GPU device, Jetson's integrated GPU.
DRIVER_FILES = ("proc/driver/nvidia", "dev/nvidiactl", "dev/nvidia0", "dev/dxg", "dev/nvhost-ctrl-gpu")


def nvidia_driver_present(root: str = "/") -> bool:
    """Whether this machine may have an NVIDIA driver, from the files one creates (loads nothing).

    Always True off Linux, where there is no such cheap check.
    """
    if not sys.platform.startswith("linux"):
        return True
    return any(os.path.exists(os.path.join(root, f)) for f in DRIVER_FILES) or bool(
        glob.glob(os.path.join(root, "dev", "nvidia[0-9]*"))
    )


def _tf_sees_gpu() -> bool:
    """Whether TensorFlow lists a GPU, asked only where an NVIDIA driver may be.

    TensorFlow's GPU query initialises its devices, which calls cuInit; without
    a driver that logs "failed call to cuInit: ... UNKNOWN ERROR (303)" (an
    ERROR, so TF_CPP_MIN_LOG_LEVEL=2 keeps it). TensorFlow logs the same line
    at its first op anyway, but bzna_tf's probe is never what prints it.
    """
    if not nvidia_driver_present():
        return False
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def load_gpu_library():
    """Builds (cached) the GPU libraries and loads the TensorFlow GPU kernels this machine can run.

    ``load_library()`` calls it when TensorFlow sees a GPU. The GPU core is
    probed first (through ctypes: it registers nothing), and only then are
    kernels registered with TensorFlow, so an op never lands on a GPU kernel
    that cannot run:

    - CUDA and NVDEC: the warp kernels and the NVDEC kernels of BznaDecodeWarp and
      BznaDecodeWarpDataset (as_dataset(device="gpu"));
    - CUDA without NVDEC (e.g. a container without the "video" driver
      capability): the warp kernels only; decode_warp runs on the CPU;
    - no usable driver, or no nvcc / nv-codec-headers to build with: none.

    ``$BZNA_TF_GPU_LIBRARY_DIR`` names a folder of GPU libraries built
    elsewhere (by Bazel) to load instead of building them.

    :func:`gpu_error` says why decoding is not on the GPU; a warning says it
    once where TensorFlow sees a GPU.

    Returns:
      The :class:`~bzna_tf.ops._build.GpuLibraries`, or None when they could not be built.
    """
    global _gpu_state
    if _module is None:
        load_library()  # the ops (and the dataset kernel's skip counter) first; it calls back here
    with _lock:
        if _gpu_state is not None:
            return _gpu_state[0]
        import tensorflow as tf

        libraries, error = None, None
        try:
            libraries = _given_gpu_libraries() or build_gpu()
            bits, reason = GpuCore(libraries.core).probe()
            if bits & HAS_CUDA:
                tf.load_library(str(libraries.warp))
            if bits & HAS_NVDEC:
                tf.load_library(str(libraries.nvdec))
                _connect_skip_counter(libraries.nvdec)
            error = None if bits & HAS_NVDEC else reason
        except BuildError as e:
            error = str(e)
        except Exception as e:  # TensorFlow's load error (NotFoundError with the dlerror text)
            error = f"TensorFlow could not load bzna_tf's GPU kernels: {e}"
        _gpu_state = (libraries, error)
        if error is not None and _tf_sees_gpu():
            warnings.warn(f"bzna_tf decodes on the CPU: {error}", RuntimeWarning, stacklevel=2)
        return libraries


def _connect_skip_counter(nvdec) -> None:
    """Hands BznaDecodeWarpDataset's GPU kernel the ops library's counter of skipped samples.

    TensorFlow loads each library with its own symbols, so the GPU library
    cannot find ``bzna_tf_report_skip`` by itself; ctypes reaches both files
    TensorFlow loaded (the same handles).
    """
    report = ctypes.CDLL(str(_path)).bzna_tf_report_skip
    connect = ctypes.CDLL(str(nvdec)).bzna_tf_gpu_set_skip_reporter
    connect.argtypes = [ctypes.c_void_p]
    connect.restype = None
    connect(ctypes.cast(report, ctypes.c_void_p))


def gpu_error() -> str | None:
    """Why decoding cannot run on the GPU here (NVDEC + CUDA warp), or None when it can.

    Tries :func:`load_gpu_library` first if nothing has.
    """
    if _gpu_state is None:
        load_gpu_library()
    return _gpu_state[1]
