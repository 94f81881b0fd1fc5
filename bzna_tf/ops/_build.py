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

__all__ = ["BuildError", "Build", "plan", "build", "source_dir"]

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
    b = plan()
    if b.library.exists() and not force:
        return b.library
    b.directory.mkdir(parents=True, exist_ok=True)
    with open(b.directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if b.library.exists() and not force:
            return b.library  # another process built it while we waited
        _compile(b, verbose, jobs or os.cpu_count() or 1)
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
