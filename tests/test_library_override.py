"""Libraries built elsewhere: $BZNA_TF_OPS_LIBRARY and $BZNA_TF_GPU_LIBRARY_DIR (the Bazel build).

The override itself is tested everywhere (with a copy of bzna_tf's own build). The checks of the
libraries those variables name run where they are set: .ci/bazel sets BZNA_TF_OPS_LIBRARY to the
Bazel-built library for these and the op tests; BZNA_TF_GPU_LIBRARY_DIR=bazel-bin after
`bazel build //:gpu` checks the Bazel-built GPU libraries.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bzna_tf.ops import _build, _load

tf = pytest.importorskip("tensorflow")

GIVEN_OPS = os.environ.get(_load.OPS_LIBRARY_VAR)
GIVEN_GPU = os.environ.get(_load.GPU_LIBRARY_DIR_VAR)


CUDA = ("cuda", "cuvid", "nvidia")  # libcuda, libcudart, libnvcuvid, NVIDIA's pip wheels


def _needed(library) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def _linked(library, words) -> list[str]:
    """The libraries `library` needs whose names hold one of `words`."""
    return [n for n in _needed(library) if any(w in n for w in words)]


def test_unset_variables_leave_the_build_to_bzna_tf(monkeypatch):
    monkeypatch.delenv(_load.OPS_LIBRARY_VAR, raising=False)
    monkeypatch.delenv(_load.GPU_LIBRARY_DIR_VAR, raising=False)
    assert _load._given_library() is None and _load._given_gpu_libraries() is None


def test_a_missing_library_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(_load.OPS_LIBRARY_VAR, str(tmp_path / "libnone.so"))
    with pytest.raises(_build.BuildError, match=r"OPS_LIBRARY names .*libnone\.so, which is not a file"):
        _load._given_library()


def test_the_gpu_folder_must_hold_the_three_libraries(monkeypatch, tmp_path):
    monkeypatch.setenv(_load.GPU_LIBRARY_DIR_VAR, str(tmp_path))
    names = [_build.CORE_LIB_NAME, _build.GPU_WARP_LIB_NAME, _build.GPU_NVDEC_LIB_NAME]
    with pytest.raises(_build.BuildError, match=", ".join(names)):
        _load._given_gpu_libraries()
    for name in names[:2]:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(_build.BuildError, match=rf"lacks {names[2]}$"):
        _load._given_gpu_libraries()
    (tmp_path / names[2]).write_bytes(b"")
    assert _load._given_gpu_libraries() == _build.GpuLibraries(*(tmp_path / n for n in names))


def test_load_library_loads_the_given_library_and_builds_nothing(tmp_path):
    """A copy of the library (the given one, else bzna_tf's own build); FFmpeg is opened through it too."""
    given = tmp_path / "elsewhere" / "libbzna_tf_ops.so"
    given.parent.mkdir()
    shutil.copy(GIVEN_OPS or _build.build(), given)
    cache = tmp_path / "cache"
    code = (
        "import bzna_tf.ops as ops\n"
        "from bzna_tf.ops import _load\n"
        "ops.load_library()\n"
        "print(_load._path)\n"
        "print(ops.ffmpeg_error())\n"
    )
    env = dict(
        os.environ,
        BZNA_TF_OPS_LIBRARY=str(given),
        BZNA_TF_CACHE_DIR=str(cache),
        BZNA_TF_GPU="0",
        TF_CPP_MIN_LOG_LEVEL="2",
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[-2:] == [str(given), "None"], r.stdout
    assert not cache.exists(), list(cache.rglob("*"))  # nothing built


@pytest.mark.skipif(not GIVEN_OPS, reason="$BZNA_TF_OPS_LIBRARY is not set (.ci/bazel sets it)")
def test_the_given_ops_library_is_the_one_loaded_and_links_no_cuda():
    _load.load_library()
    assert _load._path == Path(GIVEN_OPS).absolute()
    assert _linked(GIVEN_OPS, ["libtensorflow_framework.so"]), _needed(GIVEN_OPS)
    assert not _linked(GIVEN_OPS, [*CUDA, "avcodec", "avutil"]), _needed(GIVEN_OPS)


@pytest.mark.skipif(not GIVEN_GPU, reason="$BZNA_TF_GPU_LIBRARY_DIR is not set (after bazel build //:gpu)")
def test_the_given_gpu_libraries_link_no_cuda_and_register_gpu_kernels():
    from tensorflow.python.framework import kernels

    libraries = _load._given_gpu_libraries()
    assert not _linked(libraries.core, [*CUDA, "tensorflow", "absl"]), _needed(libraries.core)
    assert b"bzna_warp_yuv" in Path(libraries.core).read_bytes()  # the embedded PTX
    for lib in (libraries.warp, libraries.nvdec):
        assert _build.CORE_LIB_NAME in _needed(lib) and not _linked(lib, CUDA), _needed(lib)
    _load.load_library()
    tf.load_library(str(libraries.warp))
    tf.load_library(str(libraries.nvdec))
    for op in ("BznaWarpYuv420", "BznaWarpRgb", "BznaDecodeWarp"):
        devices = {k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}
        assert devices == {"CPU", "GPU"}, (op, devices)
