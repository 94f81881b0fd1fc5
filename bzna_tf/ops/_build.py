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
once it is complete. A build says so on stderr, with how long it should take
(the range of the recent builds of its kind here, longer while other jobs keep
the cores busy; see estimate_range), then one line per compiler run (one line
rewritten in place on a terminal), and build.json records how long it took.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bzna_tf._cache import OPS_LIBRARY_NAME, cache_root

__all__ = [
    "BuildError",
    "Build",
    "GpuBuild",
    "GpuLibraries",
    "compile_core",
    "plan",
    "plan_gpu",
    "build",
    "build_gpu",
    "estimate_range",
    "fetch_ffnvcodec",
    "fetched_ffnvcodec",
    "ffnvcodec_include",
    "gpu_toolchain_error",
    "source_dir",
]

LIB_NAME = OPS_LIBRARY_NAME
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
    # -ldl: dlopen of FFmpeg (in libc since glibc 2.34).
    lflags = [*tf.sysconfig.get_link_flags(), "-ldl", HIDE_STATIC_RUNTIME]
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
    return _cached(plan(), _compile, force, verbose, jobs, "native ops")


# Seconds per round of parallel compiler runs (one translation unit per job; see _runs), until this machine
# has built something. Measured on 2 cores: 17 builds of the ops file by file (12 units, 6 rounds) took 22
# to 70 s, the slow ones beside other jobs (one more, on a 2-core machine busy with several test runs,
# about 6 minutes, which the load scaling of estimate_range covers); grouped (13 units as 5 runs, 3
# rounds), 31 s, 10 s a round; 10 builds of the GPU libraries (1 round of the TensorFlow kernels, the
# core's compile included) 11 to 60 s.
SECONDS_PER_ROUND_RANGE = {"ops": (3.5, 16.0), "gpu": (11.0, 60.0)}
RECENT_BUILDS = 5  # how many of this machine's recorded builds make its range


# The folders of the TensorFlow kernels and op registrations. Each of their files spends most of its compile
# parsing TensorFlow's headers, the same ones (about 10 s of the 10 to 21 s a file takes on 2 cores): with
# fewer jobs than such files, _runs compiles them as `jobs` groups, each group one translation unit that
# includes its files, so that the headers are parsed once per group (the ops: about 30 s on 2 cores,
# 80 s file by file). Each file keeps its own names in a namespace of its own (bzna_tf::<file name>), so
# that a file never sees another's. lib/ (no TensorFlow) compiles file by file, as do the GPU build's units.
GROUPED_FOLDERS = ("kernels", "ops")


def _runs(b: Build, jobs: int) -> list[tuple[Path, ...]]:
    """The compiler runs of a build, the groups first: each a tuple of the units compiled as one."""
    jobs = max(1, jobs)
    grouped = [] if isinstance(b, GpuBuild) else [u for u in b.units if u.parent.name in GROUPED_FOLDERS]
    alone = [(u,) for u in b.units if u not in grouped]
    if len(grouped) <= jobs:
        return [(u,) for u in grouped] + alone
    size = {u: u.stat().st_size for u in grouped}
    groups: list[list[Path]] = [[] for _ in range(jobs)]
    for u in sorted(grouped, key=lambda u: (-size[u], str(u))):  # the largest to the lightest group
        min(groups, key=lambda g: sum(size[v] for v in g)).append(u)
    return [tuple(sorted(g)) for g in groups] + alone


def _rounds(b: Build, jobs: int) -> int:
    return max(1, math.ceil(len(_runs(b, jobs)) / max(1, jobs)))


def _recorded_per_round(b: Build) -> list[float]:
    """Seconds per round of this machine's recorded builds of b's kind (ops or GPU), newest first."""
    kind = b.directory.name.partition("-")[0]
    found = []
    for info in b.directory.parent.glob(f"{kind}-*/build.json"):
        try:
            mtime = info.stat().st_mtime
            facts = json.loads(info.read_text())
            seconds, rounds = float(facts["build_seconds"]), int(facts["build_rounds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if rounds > 0 and seconds >= 0:
            found.append((mtime, seconds / rounds))
    return [per_round for _, per_round in sorted(found, reverse=True)]


def _usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a Slurm job's or a container's cpuset on a
    larger machine), else all of the machine's. Builds run as many compiles at a time."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _busy() -> tuple[float, int]:
    """(load average over the last minute, cores): os.getloadavg, or no load where there is none.

    The load average counts the whole machine's runnable jobs, so it is compared with all its cores."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return load, cores


def estimate_range(b: Build, jobs: int) -> tuple[float, float]:
    """(shortest, longest) seconds that compiling ``b`` with ``jobs`` parallel jobs should take here.

    The fastest and slowest of this machine's last ``RECENT_BUILDS`` builds of the same kind (ops
    or GPU), per round of parallel compiles, times this build's rounds; before any build,
    ``SECONDS_PER_ROUND_RANGE``, and after one, from it to that default's slowest. When other
    jobs keep the cores busy (a load average above the core count), the longest grows in
    proportion: a compile gets its share of the cores.
    """
    kind = b.directory.name.partition("-")[0]
    default = SECONDS_PER_ROUND_RANGE.get(kind, SECONDS_PER_ROUND_RANGE["ops"])
    recorded = _recorded_per_round(b)[:RECENT_BUILDS]
    low, high = (min(recorded), max(recorded)) if recorded else default
    if len(recorded) == 1:  # one build is one figure, not a range: up to the default's slowest
        high = max(high, default[1])
    rounds = _rounds(b, jobs)
    load, cores = _busy()
    return low * rounds, high * rounds * max(1.0, load / cores)


def _duration(seconds: float) -> str:
    """'8 s', '45 s', '2.5 min': a time to the precision an estimate has."""
    if seconds < 10:
        return f"{max(1, round(seconds))} s"
    if seconds < 100:
        return f"{5 * round(seconds / 5)} s"
    return f"{round(seconds / 30) / 2:g} min"


def _span(low: float, high: float) -> str:
    """A range of durations in words: '20 to 80 s', '20 s to 5 min'."""
    a, b = _duration(low), _duration(high)
    if a == b:
        return f"about {a}"
    if a.endswith(" s") and b.endswith(" s"):
        return f"{a[:-2]} to {b}"
    return f"{a} to {b}"


def _announce(b: Build, jobs: int, what: str) -> str:
    """The line a build starts with: what, how many files, and how long it should take here."""
    low, high = estimate_range(b, jobs)
    load, cores = _busy()
    busy = f"; other jobs are using the cores (load average {load:.1f} on {cores})" if load > cores else ""
    files, runs = len(b.units), len(_runs(b, jobs))
    # The GPU build's units are its TensorFlow kernels only: the core's compile has its own files.
    together = "" if runs == files else f" as {runs} compiler runs"
    count = "" if isinstance(b, GpuBuild) else f"{files} files{together}, {min(jobs, runs)} at a time, "
    return (
        f"compiling bzna_tf's {what} for TensorFlow {b.tf_version}, once: {count}{_span(low, high)} "
        f"on this machine{busy}"
    )


class _Progress:
    """A compile's progress on stderr: a line per file, or one line rewritten in place on a terminal."""

    def __init__(self, total: int, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def compiled(self, name: str) -> None:
        self.done += 1
        self._say(f"  {self.done}/{self.total} compiled ({name}), {time.monotonic() - self.start:.0f} s")

    def linked(self, what: str) -> None:
        self._say(f"  {what} linked, {time.monotonic() - self.start:.0f} s in all", last=True)

    def _say(self, text: str, last: bool = False) -> None:
        if self.tty:  # one line, rewritten; erased to its end, then kept when the build is done
            self.stream.write(f"\r{text}\x1b[K" + ("\n" if last else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _cached(b: Build, compile_fn, force: bool, verbose: bool, jobs: int | None, what: str) -> Path:
    """b.library, compiled by compile_fn(b, verbose, jobs) unless it exists; one builder at a time.

    A compile prints one line to stderr first ("compiling bzna_tf's native ops
    for TensorFlow 2.21.0, once: 12 files, 2 at a time, 20 to 95 s on this
    machine"), then compile_fn its progress; waiting for another process's
    compile, another line. A cached library prints nothing.
    """
    if b.library.exists() and not force:
        return b.library
    b.directory.mkdir(parents=True, exist_ok=True)
    jobs = jobs or _usable_cores()
    with open(b.directory / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"waiting for another process compiling bzna_tf's {what} for TensorFlow {b.tf_version} "
                f"(in {b.directory})",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(lock, fcntl.LOCK_EX)
        if b.library.exists() and not force:
            return b.library  # another process built it while we waited
        print(_announce(b, jobs, what), file=sys.stderr, flush=True)
        start = time.monotonic()
        compile_fn(b, verbose, jobs)
        _record_time(b, time.monotonic() - start, jobs)
    return b.library


def _record_time(b: Build, seconds: float, jobs: int) -> None:
    """Adds the build's time to its build.json, for the next estimate."""
    info = b.directory / "build.json"
    try:
        facts = json.loads(info.read_text())
    except (OSError, ValueError):
        facts = {}
    facts.update(build_seconds=round(seconds, 1), build_jobs=jobs, build_rounds=_rounds(b, jobs))
    tmp = info.with_name(f".build.json.{os.getpid()}")
    tmp.write_text(json.dumps(facts, indent=1))
    os.replace(tmp, info)


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
        runs = _runs(b, jobs)
        cmds, names, objs = [], [], []
        for k, run in enumerate(runs):
            names.append(", ".join(str(u.relative_to(root)) for u in run))
            if len(run) == 1:
                source, obj = run[0], Path(tmp) / (str(run[0].relative_to(root)).replace(os.sep, "_") + ".o")
            else:  # one translation unit that includes the group's files (see GROUPED_FOLDERS)
                source, obj = Path(tmp) / f"group{k}.cc", Path(tmp) / f"group{k}.o"
                lines = [f"// bzna_tf/ops/_build.py: {len(run)} files compiled as one translation unit"]
                source.write_text("\n".join([*lines, *(f'#include "{u}"' for u in run)]) + "\n")
            cmds.append([b.compiler, *b.compile_flags, "-c", str(source), "-o", str(obj)])
            objs.append(obj)
        progress = _Progress(len(cmds))
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = {pool.submit(_run, c, verbose): name for c, name in zip(cmds, names, strict=True)}
            for f in concurrent.futures.as_completed(futures):
                f.result()
                progress.compiled(futures[f])
        out = Path(tmp) / LIB_NAME
        _run([b.compiler, "-shared", *map(str, objs), "-o", str(out), *b.link_flags], verbose)
        progress.linked(LIB_NAME)
        info = {
            "tensorflow": b.tf_version,
            "compiler": b.compiler,
            "key": b.key,
            "sources": [str(u.relative_to(root)) for u in b.units],
        }
        (b.directory / "build.json").write_text(json.dumps(info, indent=1))
        os.replace(out, b.library)


# --------------------------------------------------------------------------------------------- GPU libraries

# Three libraries, built together into one cache folder:
#   libbzna_tf_gpu_core.so   the GPU core (custom_ops/gpu/core): NVDEC + the CUDA kernels behind a C ABI,
#                            no TensorFlow, no absl; the GPU kit builds the same one with compile_core()
#   libbzna_tf_gpu_warp.so   TensorFlow GPU kernels of BznaWarpYuv420 and BznaWarpRgb (need CUDA)
#   libbzna_tf_gpu_nvdec.so  TensorFlow GPU kernels of BznaDecodeWarp and BznaDecodeWarpDataset (need CUDA
#                            and NVDEC)
# Both TensorFlow libraries call the core (linked by name, found beside them),
# so bzna_tf can register exactly the GPU kernels the machine can run.
CORE_LIB_NAME = "libbzna_tf_gpu_core.so"
GPU_WARP_LIB_NAME = "libbzna_tf_gpu_warp.so"
GPU_NVDEC_LIB_NAME = "libbzna_tf_gpu_nvdec.so"
# Each TensorFlow library's translation units (custom_ops/gpu/tf_*.cc; bazel/gpu.bzl lists the same).
TF_GPU_UNITS = {
    GPU_WARP_LIB_NAME: ("tf_warp_kernels.cc",),
    GPU_NVDEC_LIB_NAME: ("tf_decode_kernels.cc", "tf_decode_dataset_kernels.cc"),  # + BznaDecodeWarpDataset
}
# The kernels are compiled in two steps: nvcc -> PTX for compute_75 (Turing,
# the oldest GPU with the NVDEC this needs), then ptxas -> one cubin per
# architecture family below, plus the PTX for GPUs newer than all of them.
# A GPU runs the cubin of its own architecture, or the newest of its major
# version not newer than it (binary compatible); the driver JIT-compiles the
# PTX otherwise.
PTX_ARCH = 75
CUBIN_ARCHS = (75, 80, 86, 89, 90, 100, 120)
# CUDA 12.0's PTX ISA. When ptxas comes from an older CUDA than nvcc (the
# pinned CUDA 12 ptxas beside a CUDA 13 nvcc: CUDA 12's pip wheels carry no
# nvcc), the PTX is declared at this ISA, so that its cubins and PTX load on
# every driver from 525 (CUDA 12.0) on; ptxas refuses it if nvcc used anything newer.
CUDA12_PTX_ISA = "8.0"
NVCC_FLAGS = ["-std=c++17", "-O3", "--fmad=false"]
# A C++ runtime the compiler links statically (some toolchains do by default) stays inside the
# TensorFlow libraries: exported, it would mix with the libstdc++ TensorFlow loaded (locale tables,
# the first std::ostringstream crashes). No effect where libstdc++ is linked as a shared library.
HIDE_STATIC_RUNTIME = "-Wl,--exclude-libs,ALL"
# The core exports its C API only (see the file): never a C++ runtime a toolchain linked in.
CORE_EXPORTS = "exports.map"
CORE_FLAGS = ["-O2", "-fPIC", "-std=c++17", "-ffp-contract=off", "-DNDEBUG", "-Wall", "-Wno-sign-compare"]
FFNVCODEC_HINT = (
    "nv-codec-headers (ffnvcodec: Debian/Ubuntu `apt install libffmpeg-nvenc-dev`, or "
    "https://github.com/FFmpeg/nv-codec-headers `make install`; build time only), or set "
    "$BZNA_TF_FFNVCODEC_INCLUDE to the folder holding ffnvcodec/"
)


def _nvidia_wheel_dirs() -> list[str]:
    try:
        import nvidia  # the namespace package of NVIDIA's pip wheels
    except ImportError:
        return []
    return list(nvidia.__path__)


def _executable(candidates) -> str | None:
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def nvcc() -> str | None:
    """nvcc: $BZNA_TF_NVCC, $CUDA_HOME/bin, $PATH, /usr/local/cuda/bin, then the pip wheels."""
    candidates = [os.environ.get("BZNA_TF_NVCC")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    for base in _nvidia_wheel_dirs():
        candidates += [os.path.join(base, sub, "bin", "nvcc") for sub in ("cu13", "cuda_nvcc", "cu12")]
    return _executable(candidates)


def ptxas(nvcc_path: str | None = None) -> str | None:
    """ptxas: $BZNA_TF_PTXAS, the pinned CUDA 12 wheel's (nvidia-cuda-nvcc-cu12), else the one beside nvcc."""
    candidates = [os.environ.get("BZNA_TF_PTXAS")]
    candidates += [os.path.join(base, "cuda_nvcc", "bin", "ptxas") for base in _nvidia_wheel_dirs()]
    if nvcc_path:
        candidates.append(os.path.join(os.path.dirname(nvcc_path), "ptxas"))
    candidates.append(shutil.which("ptxas"))
    return _executable(candidates)


def _cuda_release(tool: str) -> tuple[int, int]:
    """(major, minor) of a CUDA tool's `--version` ("release 12.9")."""
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    for word, following in zip(out.split(), out.split()[1:], strict=False):
        if word == "release":
            major, _, minor = following.rstrip(",").partition(".")
            if major.isdigit() and minor.isdigit():
                return int(major), int(minor)
    raise BuildError(f"could not tell the CUDA version of {tool} from `{tool} --version`:\n{out}")


def ptxas_archs(ptxas_path: str) -> list[int]:
    """The CUBIN_ARCHS this ptxas compiles for (from the allowed --gpu-name values of `ptxas --help`)."""
    out = subprocess.run([ptxas_path, "--help"], capture_output=True, text=True).stdout
    offered = {
        int(w[3:])
        for w in out.replace(",", " ").replace("'", " ").split()
        if w[3:].isdigit() and w[:3] == "sm_"
    }
    return [a for a in CUBIN_ARCHS if a in offered]


FFNVCODEC_PACKAGE = "libffmpeg-nvenc-dev"  # Debian's (and Ubuntu's) package of nv-codec-headers


def _holds_ffnvcodec(include) -> bool:
    return bool(include) and os.path.isfile(os.path.join(include, "ffnvcodec", "dynlink_loader.h"))


def fetched_ffnvcodec() -> Path:
    """The include folder where :func:`fetch_ffnvcodec` unpacks nv-codec-headers (in the cache)."""
    return cache_root() / "ffnvcodec" / "include"


def _installed_ffnvcodec() -> str | None:
    """nv-codec-headers installed on the system (or named by $BZNA_TF_FFNVCODEC_INCLUDE), or None."""
    candidates = [os.environ.get("BZNA_TF_FFNVCODEC_INCLUDE"), "/usr/include", "/usr/local/include"]
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--cflags-only-I", "ffnvcodec"], capture_output=True, text=True)
        candidates += [flag[2:] for flag in r.stdout.split() if flag.startswith("-I")]
    for c in candidates:
        if _holds_ffnvcodec(c):
            return c
        if (
            c
            and os.path.basename(c.rstrip("/")) == "ffnvcodec"
            and os.path.isfile(os.path.join(c, "dynlink_loader.h"))
        ):
            return os.path.dirname(c.rstrip("/"))
    return None


def ffnvcodec_include(fetch: bool = False, log=sys.stderr) -> str | None:
    """The include folder holding ffnvcodec/dynlink_loader.h, or None.

    Looked for in $BZNA_TF_FFNVCODEC_INCLUDE, /usr/include, /usr/local/include,
    pkg-config's ``ffnvcodec``, then the copy :func:`fetch_ffnvcodec` unpacked
    into the cache (so that once fetched, every GPU build finds it).

    Args:
      fetch: when none is found, fetch them (:func:`fetch_ffnvcodec`) instead
        of returning None.
      log: where a fetch says so (None: quiet).

    Raises:
      BuildError: ``fetch`` and the fetch failed (the message says why and what to install).
    """
    found = _installed_ffnvcodec()
    if found:
        return found
    if _holds_ffnvcodec(fetched_ffnvcodec()):
        return str(fetched_ffnvcodec())
    return fetch_ffnvcodec(log=log) if fetch else None


def _fetch_error(what: str) -> BuildError:
    return BuildError(f"could not fetch nv-codec-headers: {what}. Install " + FFNVCODEC_HINT)


def fetch_ffnvcodec(log=sys.stderr) -> str:
    """Fetches nv-codec-headers without root: Debian's package, unpacked into the cache.

    ``apt-get download libffmpeg-nvenc-dev`` (which needs no root: it writes the
    .deb into the current folder) and ``dpkg-deb -x`` into a temporary folder,
    then the include folder is renamed to :func:`fetched_ffnvcodec` complete,
    where every later call (and :func:`ffnvcodec_include`) finds it. One fetch
    at a time (a file lock). The headers are needed at build time only: the
    libraries load libcuda and libnvcuvid with dlopen.

    Args:
      log: where the fetch says so (None: quiet).

    Returns:
      The include folder (holding ffnvcodec/).

    Raises:
      BuildError: no apt-get or dpkg-deb, or the download or unpacking failed
        (apt's message is in the error).
    """
    dest = fetched_ffnvcodec()
    if _holds_ffnvcodec(dest):
        return str(dest)
    missing = [tool for tool in ("apt-get", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        raise _fetch_error(
            f"{' and '.join(missing)} not found (Debian's {FFNVCODEC_PACKAGE} is fetched with them)"
        )
    folder = dest.parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".ffnvcodec.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _holds_ffnvcodec(dest):
            return str(dest)
        if log is not None:
            print(
                f"bzna_tf: fetching nv-codec-headers (apt-get download {FFNVCODEC_PACKAGE}, no root) into "
                f"{folder}",
                file=log,
                flush=True,
            )
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".ffnvcodec-") as tmp:
            command = ["apt-get", "download", FFNVCODEC_PACKAGE]
            try:
                r = subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise _fetch_error(f"`{shlex.join(command)}` failed: {e}") from None
            debs = sorted(Path(tmp).glob("*.deb"))
            if r.returncode or len(debs) != 1:
                said = (r.stderr.strip() or r.stdout.strip())[-800:]
                raise _fetch_error(
                    f"`{shlex.join(command)}` exited with status {r.returncode} and wrote "
                    f"{len(debs)} .deb files: {said}"
                )
            unpacked = Path(tmp) / "root"
            x = subprocess.run(
                ["dpkg-deb", "-x", str(debs[0]), str(unpacked)], capture_output=True, text=True
            )
            include = unpacked / "usr" / "include"
            if x.returncode or not _holds_ffnvcodec(include):
                raise _fetch_error(
                    f"`dpkg-deb -x {debs[0].name}` gave no usr/include/ffnvcodec/dynlink_loader.h "
                    f"(exit status {x.returncode}): {x.stderr.strip()[-800:]}"
                )
            staged = Path(tmp) / "ffnvcodec"
            staged.mkdir()
            os.replace(include, staged / "include")
            (staged / "source.json").write_text(json.dumps({"package": debs[0].name}) + "\n")
            if folder.exists():
                shutil.rmtree(folder)  # left by a fetch that did not finish
            os.replace(staged, folder)
    return str(dest)


def gpu_toolchain_error() -> str | None:
    """What the GPU libraries' build lacks, or None when nvcc, ptxas and ffnvcodec are found."""
    missing = []
    nv = nvcc()
    if nv is None:
        missing.append(
            "nvcc (a CUDA toolkit, or the pip wheels: pip install 'bzna-tf[gpu-build]'), or set $BZNA_TF_NVCC"
        )
    elif ptxas(nv) is None:
        missing.append("ptxas (pip install 'bzna-tf[gpu-build]'), or set $BZNA_TF_PTXAS")
    if ffnvcodec_include() is None:
        missing.append(
            FFNVCODEC_HINT + " (`python -m bzna_tf.ops build --gpu` fetches Debian's package, without root)"
        )
    return "building bzna_tf's GPU kernels needs " + " and ".join(missing) if missing else None


def _core_sources(root: Path) -> tuple[list[Path], Path, list[Path]]:
    """(core .cc units, kernels.cu, the other files the core depends on: headers, exports.map)."""
    core = root / "gpu" / "core"
    units = sorted(core.glob("*.cc"))
    headers = sorted([*core.glob("*.h"), root / "lib" / "warp.h", core / CORE_EXPORTS])
    return units, core / "kernels.cu", headers


def _embed_images(images: list[tuple[int, bytes]]) -> str:
    """C++ source of gpu/core/kernel_images.h's table: (arch, bytes) pairs, arch 0 = PTX (NUL-terminated)."""
    parts = [
        "// Generated by bzna_tf/ops/_build.py: the compiled kernels of gpu/core/kernels.cu.",
        '#include "gpu/core/kernel_images.h"',
    ]
    entries = []
    for k, (arch, data) in enumerate(images):
        rows = [", ".join(str(v) for v in data[i : i + 32]) for i in range(0, len(data), 32)]
        body = ",\n".join(rows)
        parts.append(f"alignas(64) static const unsigned char image{k}[] = {{\n{body}\n}};")
        entries.append(f"{{{arch}, image{k}, {len(data)}}}")
    parts.append(
        f"extern const bzna_tf_kernel_image bzna_tf_kernel_images[] = {{{', '.join(entries)}}};\n"
        f"extern const int bzna_tf_kernel_image_count = {len(images)};\n"
    )
    return "\n".join(parts)


def compile_core(
    out_dir,
    *,
    source_root=None,
    nvcc: str | None = None,
    ptxas: str | None = None,
    cxx: str | None = None,
    ffnvcodec_include: str | None = None,
    verbose: bool = False,
    jobs: int | None = None,
) -> Path:
    """Compiles the GPU core (no TensorFlow, no GPU needed) into out_dir/libbzna_tf_gpu_core.so.

    Used by build_gpu() and by the GPU kit on machines without TensorFlow. The
    library appears under its final name only once complete; out_dir also
    gets core.json (the tools and the kernel images built).

    Args:
      out_dir: folder for the library (created).
      source_root: a folder shaped like custom_ops/ (lib/warp.h, gpu/core/); default: source_dir().
      nvcc, ptxas, cxx, ffnvcodec_include: the tools; None = discovered (see nvcc(), ptxas()).

    Raises:
      BuildError: a missing tool (named, with how to get it) or a failed compile (its output).
    """
    root = Path(source_root) if source_root is not None else source_dir()
    nv = nvcc or globals()["nvcc"]()
    if nv is None:
        raise BuildError(
            "building bzna_tf's GPU core needs nvcc: set $BZNA_TF_NVCC or put a CUDA toolkit on PATH"
        )
    px = ptxas or globals()["ptxas"](nv)
    if px is None:
        raise BuildError(f"building bzna_tf's GPU core needs ptxas (none beside {nv}); set $BZNA_TF_PTXAS")
    include = ffnvcodec_include or globals()["ffnvcodec_include"]()
    if include is None:
        raise BuildError("building bzna_tf's GPU core needs " + FFNVCODEC_HINT)
    cxx = cxx or _compiler()
    units, kernels, _ = _core_sources(root)
    if not units or not kernels.is_file():
        raise BuildError(f"the GPU core's sources are missing under {root / 'gpu' / 'core'}")
    nv_release, px_release = _cuda_release(nv), _cuda_release(px)
    archs = ptxas_archs(px)
    if not archs:
        raise BuildError(f"{px} compiles for none of sm_{', sm_'.join(map(str, CUBIN_ARCHS))}")
    isa = CUDA12_PTX_ISA if px_release < nv_release else None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        tmp = Path(tmp)
        ptx = tmp / "kernels.ptx"
        _run(
            [
                nv,
                *NVCC_FLAGS,
                f"-I{root}",
                "--ptx",
                f"-arch=compute_{PTX_ARCH}",
                str(kernels),
                "-o",
                str(ptx),
            ],
            verbose,
        )
        text = ptx.read_text()
        if isa is not None:
            lines = text.splitlines()
            version = [i for i, line in enumerate(lines) if line.startswith(".version ")]
            if not version:
                raise BuildError(f"{nv} wrote PTX without a .version line")
            lines[version[0]] = f".version {isa}"
            text = "\n".join(lines) + "\n"
            ptx.write_text(text)
        cubins = [tmp / f"kernels.sm_{a}.cubin" for a in archs]
        cmds = [
            [px, f"-arch=sm_{a}", "-O3", "--fmad=false", str(ptx), "-o", str(c)]
            for a, c in zip(archs, cubins, strict=True)
        ]
        objs = [tmp / (u.name + ".o") for u in units]
        flags = [*CORE_FLAGS, f"-I{root}", f"-I{include}"]
        cmds += [[cxx, *flags, "-c", str(u), "-o", str(o)] for u, o in zip(units, objs, strict=True)]
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs or _usable_cores())) as pool:
            for f in [pool.submit(_run, c, verbose) for c in cmds]:
                f.result()
        images = [(a, c.read_bytes()) for a, c in zip(archs, cubins, strict=True)] + [
            (0, text.encode() + b"\0")
        ]
        table = tmp / "kernel_images.cc"
        table.write_text(_embed_images(images))
        _run(
            [
                cxx,
                "-O0",
                "-fPIC",
                "-std=c++17",
                f"-I{root}",
                "-c",
                str(table),
                "-o",
                str(tmp / "kernel_images.o"),
            ],
            verbose,
        )
        lib = tmp / CORE_LIB_NAME
        _run(
            [
                cxx,
                "-shared",
                f"-Wl,-soname,{CORE_LIB_NAME}",
                f"-Wl,--version-script={root / 'gpu' / 'core' / CORE_EXPORTS}",
                *map(str, objs),
                str(tmp / "kernel_images.o"),
                "-o",
                str(lib),
                "-ldl",
                "-lpthread",
            ],
            verbose,
        )
        info = {
            "nvcc": nv,
            "nvcc_release": ".".join(map(str, nv_release)),
            "ptxas": px,
            "ptxas_release": ".".join(map(str, px_release)),
            "ptx_isa": isa or "nvcc's",
            "archs": [f"sm_{a}" for a in archs] + [f"compute_{PTX_ARCH} (PTX)"],
            "compiler": cxx,
        }
        (out_dir / "core.json").write_text(json.dumps(info, indent=1))
        os.replace(lib, out_dir / CORE_LIB_NAME)
    return out_dir / CORE_LIB_NAME


@dataclass(frozen=True)
class GpuBuild(Build):
    """A planned build of the GPU libraries: a Build (the TensorFlow kernels' units) + the core's tools."""

    nvcc: str = ""
    ptxas: str = ""
    ffnvcodec: str = ""

    @property
    def library(self) -> Path:  # written last: its presence means the build is complete
        return self.directory / GPU_NVDEC_LIB_NAME


@dataclass(frozen=True)
class GpuLibraries:
    """The built GPU libraries (see the comment above CORE_LIB_NAME)."""

    core: Path
    warp: Path
    nvdec: Path


def plan_gpu() -> GpuBuild:
    """Work out the GPU libraries' build (does not compile).

    Raises:
      BuildError: no nvcc, ptxas or ffnvcodec headers, or no C++ compiler.
    """
    import tensorflow as tf

    error = gpu_toolchain_error()
    if error:
        raise BuildError(error)
    root = source_dir()
    nv = nvcc()
    px = ptxas(nv)
    include = ffnvcodec_include()
    core_units, kernels, core_headers = _core_sources(root)
    units = sorted((root / "gpu").glob("tf_*.cc"))
    headers = sorted([*(root / "gpu").glob("*.h"), *root.glob("kernels/*.h"), *core_headers])
    cxx = _compiler()
    cflags = [*tf.sysconfig.get_compile_flags(), *EXTRA_FLAGS, f"-I{root}", f"-I{include}"]
    lflags = [*tf.sysconfig.get_link_flags(), "-ldl", HIDE_STATIC_RUNTIME]
    h = hashlib.sha256()
    for part in (
        tf.__version__,
        tf.sysconfig.get_lib(),
        cxx,
        nv,
        px,
        *map(str, _cuda_release(nv)),
        *map(str, _cuda_release(px)),
        *cflags,
        *lflags,
    ):
        h.update(part.encode() + b"\0")
    for p in [*units, *core_units, kernels, *headers]:
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(p.read_bytes())
    key = h.hexdigest()[:16]
    return GpuBuild(
        directory=cache_root() / f"gpu-tf{tf.__version__}-{key}",
        compiler=cxx,
        units=tuple(units),
        compile_flags=tuple(cflags),
        link_flags=tuple(lflags),
        tf_version=tf.__version__,
        key=key,
        nvcc=nv,
        ptxas=px,
        ffnvcodec=include,
    )


def build_gpu(force: bool = False, verbose: bool = False, jobs: int | None = None) -> GpuLibraries:
    """Compile the GPU libraries (core + TensorFlow GPU kernels) for the installed TensorFlow (cached).

    Needs nvcc, ptxas and nv-codec-headers at build time, no GPU and no
    driver: nothing of CUDA is linked, and the libraries load anywhere
    TensorFlow does.

    Raises:
      BuildError: a missing tool (the message says which and how to get it), or a failed compile.
    """
    b = plan_gpu()
    _cached(b, _compile_gpu, force, verbose, jobs, "GPU kernels")
    return GpuLibraries(b.directory / CORE_LIB_NAME, b.directory / GPU_WARP_LIB_NAME, b.library)


def _compile_gpu(b: GpuBuild, verbose: bool, jobs: int) -> None:
    if verbose:
        print(
            f"bzna_tf: building the GPU libraries in {b.directory} for TensorFlow {b.tf_version}",
            file=sys.stderr,
        )
    root = source_dir()
    compile_core(
        b.directory,
        source_root=root,
        nvcc=b.nvcc,
        ptxas=b.ptxas,
        cxx=b.compiler,
        ffnvcodec_include=b.ffnvcodec,
        verbose=verbose,
        jobs=jobs,
    )
    with tempfile.TemporaryDirectory(dir=b.directory, prefix=".build-") as tmp:
        objs = {u: Path(tmp) / (u.name + ".o") for u in b.units}
        cmds = [[b.compiler, *b.compile_flags, "-c", str(u), "-o", str(o)] for u, o in objs.items()]
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            for f in [pool.submit(_run, c, verbose) for c in cmds]:
                f.result()
        # The core is found beside the TensorFlow libraries ($ORIGIN), by its soname.
        link_core = [f"-L{b.directory}", f"-l:{CORE_LIB_NAME}", "-Wl,-rpath,$ORIGIN"]
        info = json.loads((b.directory / "core.json").read_text())
        info.update(tensorflow=b.tf_version, key=b.key, sources=[str(p.relative_to(root)) for p in b.units])
        (b.directory / "build.json").write_text(json.dumps(info, indent=1))
        for name in sorted(TF_GPU_UNITS, key=lambda n: n == GPU_NVDEC_LIB_NAME):  # the marker last
            units = [objs[u] for u in b.units if u.name in TF_GPU_UNITS[name]]
            out = Path(tmp) / name
            link = [b.compiler, "-shared", *map(str, units), "-o", str(out), *link_core, *b.link_flags]
            _run(link, verbose)
            os.replace(out, b.directory / name)
