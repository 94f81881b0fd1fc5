"""Building the native ops: cache layout, the explicit command, a missing compiler."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from bzna_tf.ops import _build
from bzna_tf.ops._build import BuildError


def test_build_is_cached_per_tensorflow_version_and_sources():
    path = _build.build()
    assert path.name == "libbzna_tf_ops.so" and path.exists()
    assert path.parent.name.startswith(f"ops-tf{tf.__version__}-")
    assert _build.build() == path  # cached: same library, no rebuild
    info = json.loads((path.parent / "build.json").read_text())
    assert info["tensorflow"] == tf.__version__
    assert "lib/bzna_format.cc" in info["sources"] and not any(s.endswith(".cu.cc") for s in info["sources"])


def test_python_m_bzna_tf_ops_build_prints_the_library():
    out = subprocess.run(
        [sys.executable, "-m", "bzna_tf.ops", "build"], capture_output=True, text=True, env=os.environ.copy()
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(_build.build())


def test_a_missing_compiler_gives_one_clear_message(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "no-such-c++")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(
        BuildError, match=r"needs a C\+\+17 compiler .* found none \(tried no-such-c\+\+, g\+\+, c\+\+\)"
    ):
        _build.build()
    out = subprocess.run(
        [sys.executable, "-m", "bzna_tf.ops", "build"], capture_output=True, text=True, env=os.environ.copy()
    )
    assert out.returncode == 1 and "apt install g++" in out.stderr


def test_sources_hash_changes_the_cache_key(monkeypatch, tmp_path):
    import shutil

    copy = tmp_path / "custom_ops"
    shutil.copytree(_build.source_dir(), copy)
    monkeypatch.setattr(_build, "source_dir", lambda: copy)
    before = _build.plan().key
    (copy / "lib" / "warp.h").write_text((copy / "lib" / "warp.h").read_text() + "\n// changed\n")
    assert _build.plan().key != before


def test_each_tensorflow_gets_its_own_library(monkeypatch):
    """Two TensorFlows sharing the cache (the main venv and .ci/oldest-tf's) never load each other's ops.

    The folder names TensorFlow's version, and the key covers the TensorFlow it was built against
    (version, installation, ABI and include flags, the framework library it links).
    """
    here = _build.plan()
    other_version = "2.16.2" if tf.__version__ != "2.16.2" else "2.21.0"
    variants = {
        "version": (tf, "__version__", other_version),
        "installation": (tf.sysconfig, "get_lib", lambda: "/elsewhere/site-packages/tensorflow"),
        "ABI flag": (
            tf.sysconfig,
            "get_compile_flags",
            lambda flags=tf.sysconfig.get_compile_flags(): [
                f.replace("_GLIBCXX_USE_CXX11_ABI=1", "_GLIBCXX_USE_CXX11_ABI=0")
                if "_GLIBCXX_USE_CXX11_ABI=1" in f
                else f.replace("_GLIBCXX_USE_CXX11_ABI=0", "_GLIBCXX_USE_CXX11_ABI=1")
                for f in flags
            ],
        ),
        "headers": (
            tf.sysconfig,
            "get_compile_flags",
            lambda flags=tf.sysconfig.get_compile_flags(): [*flags, "-I/elsewhere/tensorflow/include"],
        ),
        "framework library": (
            tf.sysconfig,
            "get_link_flags",
            lambda flags=tf.sysconfig.get_link_flags(): [*flags[:-1], "-l:libtensorflow_framework.so.3"],
        ),
    }
    assert any("_GLIBCXX_USE_CXX11_ABI=" in f for f in tf.sysconfig.get_compile_flags())
    for what, (owner, name, value) in variants.items():
        with monkeypatch.context() as m:
            m.setattr(owner, name, value)
            other = _build.plan()
        assert other.key != here.key and other.directory != here.directory, what
        assert other.directory.parent == here.directory.parent, what
    assert here.directory.name == f"ops-tf{tf.__version__}-{here.key}"
    with monkeypatch.context() as m:
        m.setattr(tf, "__version__", other_version)
        assert _build.plan().directory.name.startswith(f"ops-tf{other_version}-")
    assert _build.plan() == here  # nothing else moves the key


def test_the_wheel_carries_every_native_source():
    """pyproject's package-data patterns cover every file the builds compile or include."""
    tomllib = pytest.importorskip("tomllib")
    import fnmatch

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["bzna_tf.custom_ops"]
    sources = [
        p.relative_to(root / "custom_ops").as_posix()
        for p in (root / "custom_ops").rglob("*")
        if p.suffix in (".h", ".cc", ".cu")
    ]
    assert sources
    missing = [s for s in sources if not any(fnmatch.fnmatch(s, pat) for pat in patterns)]
    assert not missing, f"add these to [tool.setuptools.package-data]: {missing}"


RUNTIME_SOURCE = """
#include <sstream>
extern "C" int digits(int x) {
  std::ostringstream s;
  s << x;
  return static_cast<int>(s.str().size());
}
"""


def _runtime_exports(compiler: str, tmp_path: Path, *flags: str) -> list[str]:
    """The symbols a small C++ library exports, linked with libstdc++ statically and the given flags."""
    src, lib = tmp_path / "digits.cc", tmp_path / "libdigits.so"
    src.write_text(RUNTIME_SOURCE)
    r = subprocess.run(
        [compiler, "-shared", "-fPIC", str(src), "-o", str(lib), "-static-libstdc++", *flags],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        pytest.skip(f"{compiler} cannot link libstdc++ statically here: {r.stderr[-500:]}")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    assert nm.returncode == 0, nm.stderr
    return [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]


def test_a_statically_linked_cxx_runtime_stays_inside_the_libraries(tmp_path):
    """A compiler that links libstdc++ statically must not export it beside TensorFlow's libstdc++.

    The two copies would mix (a GPU machine's g++ did this to the GPU core, which crashed in its first
    std::ostringstream). The TensorFlow libraries link with HIDE_STATIC_RUNTIME; the core exports its
    C API only (tests/test_gpu_kit.py).
    """
    b = _build.plan()
    assert _build.HIDE_STATIC_RUNTIME in b.link_flags
    runtime = ("locale", "codecvt", "ios_base")
    plain = _runtime_exports(b.compiler, tmp_path)
    assert [s for s in plain if any(r in s for r in runtime)], "expected the hazard without the flag"
    hidden = _runtime_exports(b.compiler, tmp_path, _build.HIDE_STATIC_RUNTIME)
    assert "digits" in hidden and not [s for s in hidden if any(r in s for r in runtime)], hidden
