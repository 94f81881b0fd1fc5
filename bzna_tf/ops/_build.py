"""Compiling the native ops against the installed TensorFlow.

The C++ under ``custom_ops/`` (shipped inside the package as
``bzna_tf/custom_ops`` by a wheel, found beside the package in a source
checkout) is compiled with the flags ``tf.sysconfig`` gives, into one shared
library per (TensorFlow version, compiler, sources) combination::

    $BZNA_TF_CACHE_DIR (default $XDG_CACHE_HOME/bzna_tf, or ~/.cache/bzna_tf)
      ops-tf2.21.0-<hash of sources, flags and compiler>/
        libbzna_tf_ops.so
        build.json            what it was built for, read back in load errors

No ABI is stable across TensorFlow minors, so nothing prebuilt is shipped. A
file lock makes concurrent first uses (pytest workers, several trainers) wait
for one build instead of racing; the library appears under its final name only
once it is complete.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BuildError",
    "Build",
    "GpuBuild",
    "plan",
    "plan_gpu",
    "build",
    "build_gpu",
    "gpu_toolchain_error",
    "source_dir",
]

LIB_NAME = "libbzna_tf_ops.so"
# -ffp-contract=off: no fused multiply-add, so the warp's float32 arithmetic is
# exactly the order the NumPy reference in tests/ uses.
EXTRA_FLAGS = [
    "-O2",
    "-fPIC",
    "-std=c++17",
    "-ffp-contract=off",
    "-DNDEBUG",
    "-Wall",
    "-Wno-sign-compare",
    "-Wno-deprecated-declarations",
    "-Wno-interference-size",
]


class BuildError(RuntimeError):
    """The native ops could not be compiled or loaded."""


def source_dir() -> Path:
    """Where the C++ sources are: inside the installed package, or the checkout."""
    here = Path(__file__).resolve().parent.parent  # bzna_tf/
    for cand in (here / "custom_ops", here.parent / "custom_ops"):
        if (cand / "lib").is_dir():
            return cand
    raise BuildError(
        f"the C++ sources of bzna_tf's ops are missing: looked for {here / 'custom_ops'} and "
        f"{here.parent / 'custom_ops'}. Reinstall bzna-tf (pip install --force-reinstall bzna-tf)."
    )


def _sources(root: Path) -> tuple[list[Path], list[Path]]:
    """(translation units, headers) that go into the CPU library, sorted (gpu/ is the GPU library's)."""
    units = sorted(p for p in root.rglob("*.cc") if p.relative_to(root).parts[0] != "gpu")
    headers = sorted(p for p in root.rglob("*.h") if p.relative_to(root).parts[0] != "gpu")
    return units, headers


def _compiler() -> str:
    tried = []
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if not name:
            continue
        tried.append(name)
        path = shutil.which(name)
        if path:
            return path
    raise BuildError(
        "bzna_tf needs a C++17 compiler to build its TensorFlow ops for the installed TensorFlow, and "
        f"found none (tried {', '.join(tried)}). Install g++ (Debian/Ubuntu: apt install g++; Fedora: "
        "dnf install gcc-c++) or point $CXX at one, then run: python -m bzna_tf.ops build"
    )


def cache_root() -> Path:
    if os.environ.get("BZNA_TF_CACHE_DIR"):
        return Path(os.environ["BZNA_TF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bzna_tf"


@dataclass(frozen=True)
class Build:
    """One planned build: where the library goes and how it is made."""

    directory: Path
    compiler: str
    units: tuple[Path, ...]
    compile_flags: tuple[str, ...]
    link_flags: tuple[str, ...]
    tf_version: str
    key: str

    @property
    def library(self) -> Path:
        return self.directory / LIB_NAME


def plan() -> Build:
    """Work out the compiler, flags and cache directory (does not compile)."""
    import tensorflow as tf

    root = source_dir()
    units, headers = _sources(root)
    cxx = _compiler()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    cflags = [*tf.sysconfig.get_compile_flags(), *EXTRA_FLAGS, f"-I{root}"]
    lflags = [*tf.sysconfig.get_link_flags(), "-ldl"]  # dlopen of FFmpeg (in libc since glibc 2.34)
    h = hashlib.sha256()
    for part in (tf.__version__, tf.sysconfig.get_lib(), cxx, *version, *cflags, *lflags):
        h.update(part.encode() + b"\0")
    for p in [*units, *headers]:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
    key = h.hexdigest()[:16]
    directory = cache_root() / f"ops-tf{tf.__version__}-{key}"
    return Build(directory, cxx, tuple(units), tuple(cflags), tuple(lflags), tf.__version__, key)


def build(force: bool = False, verbose: bool = False, jobs: int | None = None) -> Path:
    """Compile the ops for the installed TensorFlow (cached) and return the library path.

    Raises:
      BuildError: no compiler, or the compiler failed (its output is in the message).
    """
    return _cached(plan(), _compile, force, verbose, jobs)


def _cached(b: Build, compile_fn, force: bool, verbose: bool, jobs: int | None) -> Path:
    """b.library, compiled by compile_fn(b, verbose, jobs) unless it exists; one builder at a time."""
    if b.library.exists() and not force:
        return b.library
    b.directory.mkdir(parents=True, exist_ok=True)
    with open(b.directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if b.library.exists() and not force:
            return b.library  # another process built it while we waited
        compile_fn(b, verbose, jobs or os.cpu_count() or 1)
    return b.library


def _run(cmd: list[str], verbose: bool) -> None:
    if verbose:
        print(shlex.join(cmd), file=sys.stderr, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise BuildError(f"building bzna_tf's ops failed:\n$ {shlex.join(cmd)}\n{r.stdout}{r.stderr}")


def _compile(b: Build, verbose: bool, jobs: int) -> None:
    if verbose:
        print(f"bzna_tf: building {b.library} for TensorFlow {b.tf_version}", file=sys.stderr)
    root = source_dir()
    with tempfile.TemporaryDirectory(dir=b.directory, prefix=".build-") as tmp:
        objs = [Path(tmp) / (str(u.relative_to(root)).replace(os.sep, "_") + ".o") for u in b.units]
        cmds = [
            [b.compiler, *b.compile_flags, "-c", str(u), "-o", str(o)]
            for u, o in zip(b.units, objs, strict=True)
        ]
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            for f in [pool.submit(_run, c, verbose) for c in cmds]:
                f.result()
        out = Path(tmp) / LIB_NAME
        _run([b.compiler, "-shared", *map(str, objs), "-o", str(out), *b.link_flags], verbose)
        info = {
            "tensorflow": b.tf_version,
            "compiler": b.compiler,
            "key": b.key,
            "sources": [str(u.relative_to(root)) for u in b.units],
        }
        (b.directory / "build.json").write_text(json.dumps(info, indent=1))
        os.replace(out, b.library)


# --------------------------------------------------------------------------------------------- GPU library

GPU_LIB_NAME = "libbzna_tf_gpu.so"
# Real code for each architecture nvcc offers from Turing (sm_75) on, plus PTX
# of the newest for later GPUs. CUDA 13 starts at sm_75; CUDA 12 offers older
# ones too, which bzna_tf does not build.
MIN_CUDA_ARCH = 75
NVCC_FLAGS = ["-std=c++17", "-O3", "--fmad=false", "-Xcompiler", "-fPIC"]
FFNVCODEC_HINT = (
    "nv-codec-headers (ffnvcodec: Debian/Ubuntu `apt install libffmpeg-nvenc-dev`, or "
    "https://github.com/FFmpeg/nv-codec-headers `make install`; build time only), or set "
    "$BZNA_TF_FFNVCODEC_INCLUDE to the folder holding ffnvcodec/"
)


def nvcc() -> str | None:
    """nvcc: $BZNA_TF_NVCC, $CUDA_HOME/bin, $PATH, then the pip wheels (nvidia-cuda-nvcc)."""
    candidates = [os.environ.get("BZNA_TF_NVCC")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates.append(shutil.which("nvcc"))
    try:
        import nvidia  # the namespace package of NVIDIA's pip wheels

        for base in nvidia.__path__:
            candidates += [os.path.join(base, sub, "bin", "nvcc") for sub in ("cu13", "cuda_nvcc", "cu12")]
    except ImportError:
        pass
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def ffnvcodec_include() -> str | None:
    """The include folder holding ffnvcodec/dynlink_loader.h, or None."""
    candidates = [os.environ.get("BZNA_TF_FFNVCODEC_INCLUDE"), "/usr/include", "/usr/local/include"]
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--cflags-only-I", "ffnvcodec"], capture_output=True, text=True)
        candidates += [flag[2:] for flag in r.stdout.split() if flag.startswith("-I")]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "ffnvcodec", "dynlink_loader.h")):
            return c
        if (
            c
            and os.path.basename(c.rstrip("/")) == "ffnvcodec"
            and os.path.isfile(os.path.join(c, "dynlink_loader.h"))
        ):
            return os.path.dirname(c.rstrip("/"))
    return None


def cuda_archs(nvcc_path: str) -> list[int]:
    """The real architectures (sm_XX, XX >= 75) this nvcc compiles for."""
    r = subprocess.run([nvcc_path, "--list-gpu-code"], capture_output=True, text=True)
    archs = sorted({int(w[3:]) for w in r.stdout.split() if w.startswith("sm_") and w[3:].isdigit()})
    return [a for a in archs if a >= MIN_CUDA_ARCH]


@dataclass(frozen=True)
class GpuBuild(Build):
    """One planned build of the GPU library: a Build plus nvcc and its targets."""

    nvcc: str = ""
    archs: tuple[int, ...] = ()
    kernels: Path = Path()

    @property
    def library(self) -> Path:
        return self.directory / GPU_LIB_NAME


def gpu_toolchain_error() -> str | None:
    """What the GPU library's build lacks, or None when nvcc and ffnvcodec are both found."""
    missing = []
    if nvcc() is None:
        missing.append(
            "nvcc (a CUDA toolkit, or the pip wheels: pip install 'bzna-tf[gpu-build]'), or set $BZNA_TF_NVCC"
        )
    if ffnvcodec_include() is None:
        missing.append(FFNVCODEC_HINT)
    return "building bzna_tf's GPU kernels needs " + " and ".join(missing) if missing else None


def plan_gpu() -> GpuBuild:
    """Work out the GPU library's build (does not compile).

    Raises:
      BuildError: no nvcc, no ffnvcodec headers, or no C++ compiler.
    """
    import tensorflow as tf

    error = gpu_toolchain_error()
    if error:
        raise BuildError(error)
    root = source_dir()
    nv = nvcc()
    archs = cuda_archs(nv)
    if not archs:
        raise BuildError(f"{nv} offers no GPU architecture from sm_{MIN_CUDA_ARCH} on (nvcc --list-gpu-code)")
    units = sorted((root / "gpu").glob("*.cc"))
    kernels = root / "gpu" / "warp_kernels.cu"
    headers = sorted([*(root / "gpu").glob("*.h"), *root.glob("kernels/*.h"), *root.glob("lib/*.h")])
    cxx = _compiler()
    cflags = [*tf.sysconfig.get_compile_flags(), *EXTRA_FLAGS, f"-I{root}", f"-I{ffnvcodec_include()}"]
    # -ldl for dlopen; no CUDA library is linked: the driver is opened at run time.
    lflags = [*tf.sysconfig.get_link_flags(), "-ldl"]
    nv_version = (
        subprocess.run([nv, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    )
    h = hashlib.sha256()
    for part in (
        tf.__version__,
        tf.sysconfig.get_lib(),
        cxx,
        nv,
        *nv_version,
        *map(str, archs),
        *cflags,
        *lflags,
    ):
        h.update(part.encode() + b"\0")
    for p in [*units, kernels, *headers]:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
    key = h.hexdigest()[:16]
    directory = cache_root() / f"gpu-tf{tf.__version__}-{key}"
    return GpuBuild(
        directory=directory,
        compiler=cxx,
        units=tuple(units),
        compile_flags=tuple(cflags),
        link_flags=tuple(lflags),
        tf_version=tf.__version__,
        key=key,
        nvcc=nv,
        archs=tuple(archs),
        kernels=kernels,
    )


def build_gpu(force: bool = False, verbose: bool = False, jobs: int | None = None) -> Path:
    """Compile the GPU kernels (CUDA warp + NVDEC) for the installed TensorFlow (cached); return the library.

    Needs nvcc and nv-codec-headers at build time, no GPU and no driver: the
    library links no CUDA library and loads anywhere TensorFlow does.

    Raises:
      BuildError: a missing tool (the message says which and how to get it), or a failed compile.
    """
    return _cached(plan_gpu(), _compile_gpu, force, verbose, jobs)


def _embed(data: bytes, symbol: str) -> str:
    """C++ source defining `symbol` (the bytes, 64-byte aligned) and `symbol`_size."""
    rows = [", ".join(str(v) for v in data[i : i + 32]) for i in range(0, len(data), 32)]
    body = ",\n".join(rows)
    return (
        "// Generated by bzna_tf/ops/_build.py: the fatbin of gpu/warp_kernels.cu.\n#include <cstdint>\n"
        f'extern "C" {{\nalignas(64) extern const unsigned char {symbol}[] = {{\n{body}\n}};\n'
        f"extern const uint64_t {symbol}_size = {len(data)};\n}}\n"
    )


def _compile_gpu(b: GpuBuild, verbose: bool, jobs: int) -> None:
    if verbose:
        print(f"bzna_tf: building {b.library} for TensorFlow {b.tf_version}, sm_{b.archs}", file=sys.stderr)
    root = source_dir()
    with tempfile.TemporaryDirectory(dir=b.directory, prefix=".build-") as tmp:
        fatbin = Path(tmp) / "warp_kernels.fatbin"
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in b.archs]
        gencode.append(f"-gencode=arch=compute_{b.archs[-1]},code=compute_{b.archs[-1]}")
        nvcc_cmd = [b.nvcc, *NVCC_FLAGS, f"-I{root}", "--fatbin", *gencode, str(b.kernels), "-o", str(fatbin)]
        embedded = Path(tmp) / "warp_fatbin.cc"
        objs = [Path(tmp) / (u.name + ".o") for u in b.units]
        cmds = [
            [b.compiler, *b.compile_flags, "-c", str(u), "-o", str(o)]
            for u, o in zip(b.units, objs, strict=True)
        ]
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = [pool.submit(_run, c, verbose) for c in [nvcc_cmd, *cmds]]
            for f in futures:
                f.result()
        embedded.write_text(_embed(fatbin.read_bytes(), "bzna_tf_warp_fatbin"))
        embedded_obj = Path(tmp) / "warp_fatbin.o"
        _run(
            [b.compiler, "-O0", "-fPIC", "-std=c++17", "-c", str(embedded), "-o", str(embedded_obj)], verbose
        )
        out = Path(tmp) / GPU_LIB_NAME
        _run(
            [b.compiler, "-shared", *map(str, objs), str(embedded_obj), "-o", str(out), *b.link_flags],
            verbose,
        )
        info = {
            "tensorflow": b.tf_version,
            "compiler": b.compiler,
            "nvcc": b.nvcc,
            "archs": [f"sm_{a}" for a in b.archs],
            "key": b.key,
            "sources": [str(u.relative_to(root)) for u in [*b.units, b.kernels]],
        }
        (b.directory / "build.json").write_text(json.dumps(info, indent=1))
        os.replace(out, b.library)
