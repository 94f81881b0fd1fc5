"""TensorFlow carried to a GPU machine that has none: parts of at most 60 MiB, one ``run`` call each.

Tooling, not runtime: it lives in the checkout (``tools/tf_carry/``), not in the installed package.
The GPU machines this project borrows have Python 3.12, NVIDIA's driver, CUDA 13's nvcc, PyTorch and
NumPy, and no TensorFlow, no PyAV and no network. A ``run`` call carries the checkout (its tracked and
untracked-not-ignored files) and at most 8 ignored paths, 64 MiB in all; ignored files that a call
left on a warm machine stay there for the next call. ``python tools/tf_carry`` writes, in the
checkout's ignored folder ``.tf_carry/``::

    .tf_carry/
      plan.json              what is carried: each part's size and SHA-256, the calls, the stubs
      PLAN.txt               the run calls to make, one after another, with their commands
      base/ops/              libbzna_tf_ops.so, built here for that TensorFlow (+ build.json)
      base/gpu/              the three GPU libraries, built here with the pinned nvcc/ptxas wheels
      base/cuda/             libcudart.so.12 (NVIDIA's nvidia-cuda-runtime-cu12 wheel) and the
                             stubs of cuBLAS, cuBLASLt, cuFFT, cuSOLVER, cuSPARSE and cuDNN (STUBS.txt)
      base/ffnvcodec/include nv-codec-headers (the tests' toolchain fixture)
      base/fixture/          the original-tools fixture (the tests' $BZNA_TF_FIXTURES)
      bench/                 the benchmark pictures (tools/gpu_kit's set: bench.bzna, bench_meta.npz)
      parts/site.tar.xz.NN   the installed packages: one xz stream, cut into parts

The installed packages are TensorFlow's wheel for the machine's Python and its dependencies' wheels,
at the versions of the environment the builder runs in (those that pass the tests here), with PyAV
and tqdm (bzna_tf's own dependencies) and pytest: installed here by ``pip install --no-deps --target``
for CPython 3.12 manylinux x86_64, less ``REMOVED`` and ``EXCLUDED``, packed as one tar.xz. There
(``tools/tf_carry/device_run.py``) the parts are checked as they arrive, joined, and unpacked into a
fresh venv that sees none of the machine's own packages.

Why the libraries: TensorFlow 2.21 registers a GPU only if it can dlopen the CUDA 12 runtime and
libraries (``TryDlopenCUDALibraries`` in XLA's ``xla/tsl/platform/default/dlopen_checker.cc``):
libcudart.so.12, libcublas.so.12, libcublasLt.so.12, libcufft.so.11, libcusolver.so.11,
libcusparse.so.12 and libcudnn.so.9. The runtime is NVIDIA's (about 1 MB). The others' wheels are far
too large, and no bzna_tf op calls them: each is a stub of this builder's (``STUBS``) with that name
and none of the library's functions. TensorFlow resolves each function it calls through its own
trampolines (``xla/tsl/cuda/*_stub.cc``); a function the library lacks becomes one returning the
library's error status (``CUBLAS_STATUS_INTERNAL_ERROR``, ...; ``cudnnGetVersion`` returns 0), so an op
that needs one of them (MatMul, Conv2D, FFT, ...) fails with TensorFlow's error on the GPU instead of
computing anything. The checks run there keep such layers off the GPU (device_run.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

from device_run import file_sha256  # the hash the machine checks each part with

__all__ = [
    "CarryError",
    "build_carry",
    "check_plan",
    "checkout_bytes",
    "join_parts",
    "main",
    "pack_calls",
    "split_file",
]

KiB, MiB = 1024, 1024 * 1024
CALL_LIMIT = 64 * MiB  # what one run call carries, the checkout included
PART_LIMIT = 60 * MiB
# Kept free in every call: files the checkout gains before the calls (plan.json is checked again then).
CALL_MARGIN = 1 * MiB
PYTHON = "3.12"  # the GPU machines' Python
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34, 35, 39)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "manylinux_2_5_x86_64",
]
# bzna_tf's own dependencies and the test runner, beside TensorFlow (each at the version installed here).
EXTRA_DISTRIBUTIONS = ("av", "tqdm", "pytest", "pytest-xdist")
# Resolved with TensorFlow but not installed there: why.
EXCLUDED = {
    "libclang": "TensorFlow's API generator parses C++ with it; nothing imports it at run time (25 MB)",
}
# Installed here but not carried: why.
REMOVED = {
    "tensorflow/include": "C++ headers, for compiling ops: the ops are compiled here (431 MB unpacked)",
    "bin": "console scripts whose first line names this machine's Python (the run uses python -m)",
}
CUDART = ("nvidia-cuda-runtime-cu12", "12.5.82")  # the CUDA 12 runtime of TensorFlow 2.21's build (12.5)
CUDART_MEMBER = "nvidia/cuda_runtime/lib/libcudart.so.12"
# The libraries TensorFlow 2.21 dlopens before it registers a GPU, by the sonames of its build
# (cuda_config.h: CUDA 12.5, cuDNN 9), stubbed: what they are.
STUBS = {
    "libcublas.so.12": "cuBLAS (MatMul, BatchMatMul, Dense and Einsum layers)",
    "libcublasLt.so.12": "cuBLASLt (TensorFlow's fused matmul)",
    "libcufft.so.11": "cuFFT (tf.signal's FFTs)",
    "libcusolver.so.11": "cuSOLVER (tf.linalg's decompositions)",
    "libcusparse.so.12": "cuSPARSE (sparse matmuls)",
    "libcudnn.so.9": "cuDNN (Conv2D, pooling by cuDNN, batch norm, RNNs)",
}
STUB_SOURCE = """\
/* {name}: a stand-in written by bzna_tf's tools/tf_carry, NOT NVIDIA's {what}.
   It defines none of that library's functions. TensorFlow opens it by name before it registers a GPU;
   each function TensorFlow then looks up is missing, and TensorFlow's trampoline returns the library's
   error status instead, so an op that needs it fails with an error and computes nothing.
   No bzna_tf op calls it. */
const char bzna_tf_carry_stub[] = "{name}: a stub without functions (bzna_tf tools/tf_carry)";
"""
FIXTURE_FILES = ("benzina_original_mini.bzna", "manifest.json")
BENCH_IMAGES = 128  # distinct pictures; batches of 256 cycle through them, as the kit does
XZ_PRESET = 6
ARCHIVE = "site.tar.xz"
FORMAT = 1  # of the archive and plan.json: bump when either changes meaning

HERE = Path(__file__).resolve().parent  # tools/tf_carry
REPO = HERE.parent.parent
DEVICE_SCRIPT = "tools/tf_carry/device.sh"
RECEIVE_TIMEOUT_S = 120
FINAL_TIMEOUT_S = 560
# The final command's deadline is its call's timeout less this: its checks stop starting stages at the
# deadline and write their results, rather than the run tool killing the command mid-stage.
DEADLINE_MARGIN_S = 20
# What the carried libraries are built from (the C++ and CUDA sources and the build's flags): a carry
# older than a change there carries stale libraries. The Python around them travels with the checkout on
# every call.
LIBRARY_SOURCES = ("custom_ops", "bzna_tf/ops/_build.py")


# The checkout's commit when the calls are made (written by --check when all is well, removed when not;
# carried by the last call): the code that runs there, which the results name; plan.json's is the
# libraries'. Without it the results name the carry's commit and say so.
HEAD_FILE = "head.json"


class CarryError(RuntimeError):
    """The carry cannot be built or does not fit: says what, and what to do."""


def _log(log, message: str) -> None:
    if log is not None:
        print(f"tf_carry: {message}", file=log, flush=True)


def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _run(cmd: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if r.returncode:
        said = (r.stderr.strip() or r.stdout.strip())[-3000:]
        raise CarryError(f"{what} failed (exit status {r.returncode}): {' '.join(cmd[:6])} ...\n{said}")
    return r


# --------------------------------------------------------------------------------------------- splitting


def split_file(path: Path, sizes: list[int], out_dir: Path, name: str) -> list[dict]:
    """Cuts ``path`` into consecutive parts of ``sizes`` bytes (the last may be shorter): name.01, ...

    Returns:
      One ``{"name", "bytes", "sha256"}`` per part, in order.

    Raises:
      CarryError: ``sizes`` do not cover the file, or one is not positive.
    """
    total = path.stat().st_size
    if any(s <= 0 for s in sizes) or sum(sizes) < total:
        raise CarryError(f"parts of {sizes} bytes do not cover {path} ({total} bytes)")
    out_dir.mkdir(parents=True, exist_ok=True)
    parts, done = [], 0
    with open(path, "rb") as f:
        for k, size in enumerate(sizes, 1):
            if done >= total:
                break
            part = out_dir / f"{name}.{k:02d}"
            h, left = hashlib.sha256(), min(size, total - done)
            with open(part, "wb") as out:
                while left:
                    block = f.read(min(left, 4 * MiB))
                    out.write(block)
                    h.update(block)
                    left -= len(block)
            written = part.stat().st_size
            parts.append({"name": part.name, "bytes": written, "sha256": h.hexdigest()})
            done += written
    return parts


def join_parts(parts: list[Path], out: Path) -> str:
    """Joins parts in order into ``out``; returns the whole file's SHA-256."""
    h = hashlib.sha256()
    with open(out, "wb") as w:
        for p in parts:
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(4 * MiB), b""):
                    w.write(block)
                    h.update(block)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------------ calls


def checkout_bytes(repo: Path = REPO) -> int:
    """What a run call sends of the checkout: tracked and untracked-not-ignored files, and shared/
    (the GPU kit's count, ``run_kit.checkout_bytes``)."""
    kit = str(REPO / "tools" / "gpu_kit")
    if kit not in sys.path:
        sys.path.insert(0, kit)
    from run_kit import checkout_bytes as kit_checkout_bytes

    try:
        return kit_checkout_bytes(repo)
    except subprocess.CalledProcessError as e:
        said = (e.stderr or b"").decode(errors="replace").strip()[-3000:]
        raise CarryError(
            f"listing the checkout's files (git ls-files) failed (exit status {e.returncode}):\n{said}"
        ) from e
    except OSError as e:
        raise CarryError(f"listing the checkout's files (git ls-files) failed: {e}") from e


def pack_calls(first: list[tuple[str, int]], archive_bytes: int, budget: int, part_limit: int = PART_LIMIT):
    """The calls: the first carries ``first`` (path, bytes) and the archive's first part, each later call
    one part, every call within ``budget`` bytes (what is left of a call beside the checkout).

    Returns:
      (part sizes, calls): calls as lists of (path, bytes), the parts named ``parts/site.tar.xz.NN``.

    Raises:
      CarryError: ``first`` alone exceeds the budget.
    """
    used = sum(b for _, b in first)
    if used > budget:
        raise CarryError(
            f"the first call's files take {used / MiB:.1f} MiB, over the {budget / MiB:.1f} MiB a call has "
            "beside the checkout: carry fewer benchmark pictures (--bench-images)"
        )
    per_part = min(part_limit, budget)
    sizes, left = [], archive_bytes
    head = min(per_part, budget - used)
    if head >= 4 * MiB or left <= head:  # a small first part is not worth its own name
        sizes.append(min(head, left))
        left -= sizes[-1]
    while left > 0:
        sizes.append(min(per_part, left))
        left -= sizes[-1]
    calls = [list(first)]
    for k, size in enumerate(sizes, 1):
        item = (f"parts/{ARCHIVE}.{k:02d}", size)
        if k == 1 and len(calls[0]) == len(first) and used + size <= budget:
            calls[0].append(item)
        else:
            calls.append([item])
    return sizes, calls


# ---------------------------------------------------------------------------------------------- wheels


def _pins() -> tuple[list[str], list[str]]:
    """(requirements, constraints) from this environment: TensorFlow, EXTRA_DISTRIBUTIONS, and every
    installed distribution's version as a constraint, so that the machine gets what passes here."""
    reqs = []
    for name in ("tensorflow", *EXTRA_DISTRIBUTIONS):
        try:
            reqs.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            raise CarryError(
                f"{name} is not installed here: the carry takes the versions of this environment "
                "(pip install -e '.[test]')"
            ) from None
    constraints = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower().replace("_", "-") != "bzna-tf":
            constraints.add(f"{name}=={dist.version}")
    return reqs, sorted(constraints)


def _target_flags(python: str) -> list[str]:
    flags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for p in PLATFORMS:
        flags += ["--platform", p]
    return flags


def resolve_wheels(python: str, cache: Path, offline: bool, log=None) -> list[Path]:
    """The wheels to install for ``python``: downloaded into ``cache/wheels-cpXY`` (unless ``offline``),
    then resolved from that folder alone (pip's report), EXCLUDED left out.

    Raises:
      CarryError: pip failed (its message is in the error).
    """
    folder = cache / f"wheels-cp{python.replace('.', '')}"
    folder.mkdir(parents=True, exist_ok=True)
    reqs, constraints = _pins()
    with tempfile.TemporaryDirectory() as tmp:
        cfile = Path(tmp) / "constraints.txt"
        cfile.write_text("\n".join(constraints) + "\n")
        pip = [sys.executable, "-m", "pip"]
        if not offline:
            _log(log, f"downloading the wheels for CPython {python} into {folder} (pip download)")
            _run(
                [*pip, "download", "-q", "-d", str(folder), *_target_flags(python), "-c", str(cfile), *reqs],
                "pip download",
            )
        report = Path(tmp) / "report.json"
        _run(
            [
                *pip,
                "install",
                "-q",
                "--dry-run",
                "--ignore-installed",
                "--no-index",
                "--find-links",
                str(folder),
                "--report",
                str(report),
                "--target",
                str(Path(tmp) / "target"),
                *_target_flags(python),
                "-c",
                str(cfile),
                *reqs,
            ],
            f"resolving the wheels from {folder} (pip install --dry-run; run without --offline to download)",
        )
        items = json.loads(report.read_text())["install"]
    wheels = []
    for item in items:
        name = item["metadata"]["name"].lower().replace("_", "-")
        if name in EXCLUDED:
            continue
        url = item["download_info"]["url"]
        wheels.append(Path(url.removeprefix("file://")))
    return sorted(wheels, key=lambda p: p.name)


def _archive_key(python: str, wheels: list[Path], preset: int) -> str:
    h = hashlib.sha256(repr((FORMAT, python, sorted(REMOVED), preset)).encode())
    for w in wheels:
        h.update(w.name.encode() + b"\0" + file_sha256(w).encode())
    return h.hexdigest()[:16]


def _xz_command(preset: int) -> list[str] | None:
    xz = shutil.which("xz")
    return [xz, f"-{preset}", f"-T{max(1, min(4, os.cpu_count() or 1))}", "-c"] if xz else None


def _write_tar(tree: Path, sink) -> tuple[int, int]:
    """A reproducible tar of ``tree`` into the binary stream ``sink``: (files, bytes of file data)."""
    files = size = 0

    def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 1
        return info

    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, names in os.walk(tree):
            dirs.sort()
            for name in sorted(names):
                path = Path(root) / name
                tar.add(path, arcname=str(path.relative_to(tree)), recursive=False, filter=reset)
                if path.is_file() and not path.is_symlink():
                    files += 1
                    size += path.stat().st_size
    return files, size


def build_archive(
    python: str, wheels: list[Path], cache: Path, preset: int = XZ_PRESET, log=None
) -> tuple[Path, dict]:
    """The installed packages as one tar.xz (xz ``preset``), cached by its wheels and preset (xz -6 of
    1.6 GB: about 10 minutes on 2 idle cores)."""
    key = _archive_key(python, wheels, preset)
    archive = cache / f"site-cp{python.replace('.', '')}-{key}.tar.xz"
    info_path = archive.with_name(archive.name + ".json")
    if archive.is_file() and info_path.is_file():
        _log(log, f"installed packages: cached in {archive}")
        return archive, json.loads(info_path.read_text())
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=cache, prefix=".tree-") as tmp:
        tree = Path(tmp) / "site"
        _log(log, f"installing {len(wheels)} wheels for CPython {python} (pip install --no-deps --target)")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-compile",
                "--no-index",
                "--no-warn-script-location",
                "--target",
                str(tree),
                *_target_flags(python),
                *map(str, wheels),
            ],
            "pip install --target",
        )
        installed = _tree_bytes(tree)
        removed = {}
        for rel in sorted(REMOVED):
            p = tree / rel
            if p.exists():
                removed[rel] = _tree_bytes(p)
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        partial = Path(tmp) / archive.name
        _log(log, f"packing {(installed - sum(removed.values())) / 2**20:.0f} MiB with xz -{preset}")
        command = _xz_command(preset)
        if command:
            with open(partial, "wb") as out:
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out)
                try:
                    files, data = _write_tar(tree, proc.stdin)
                finally:
                    proc.stdin.close()
                    proc.wait()
            if proc.returncode:
                raise CarryError(f"{command[0]} exited with status {proc.returncode}")
        else:
            import lzma

            with lzma.open(partial, "wb", preset=preset) as out:
                files, data = _write_tar(tree, out)
        info = {
            "python": python,
            "key": key,
            "files": files,
            "data_bytes": data,
            "installed_bytes": installed,
            "removed_bytes": removed,
            "xz_preset": preset,
            "bytes": partial.stat().st_size,
            "sha256": file_sha256(partial),
            "seconds": round(time.perf_counter() - start, 1),
        }
        os.replace(partial, archive)
        info_path.write_text(json.dumps(info, indent=1))
    _log(log, f"installed packages: {info['bytes'] / 2**20:.1f} MiB packed in {info['seconds']:.0f} s")
    return archive, info


# ------------------------------------------------------------------------------------------- libraries


def _needed(library: Path) -> list[str]:
    out = _run(["readelf", "-d", str(library)], f"readelf -d {library}").stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def check_checkout() -> None:
    """The imported bzna_tf is this checkout's (the libraries are built from its sources)."""
    import bzna_tf

    found = Path(bzna_tf.__file__).resolve().parent
    if found != REPO / "bzna_tf":
        raise CarryError(
            f"the carry is built from the checkout it lives in ({REPO}), but bzna_tf is imported from "
            f"{found}: "
            "run it with that checkout's bzna_tf"
        )


def build_libraries(base: Path, log=None) -> dict:
    """The ops and GPU libraries, built here for this TensorFlow, into base/ops and base/gpu.

    The ops library links TensorFlow's framework library only (identical in TensorFlow's wheels for
    every Python): it loads in the machine's TensorFlow of the same version.
    """
    from bzna_tf.ops import _build

    check_checkout()
    ops = _build.build()
    (base / "ops").mkdir(parents=True, exist_ok=True)
    for f in (ops, ops.parent / "build.json"):
        shutil.copy2(f, base / "ops" / f.name)
    needed = _needed(ops)
    tf_libs = [n for n in needed if "tensorflow" in n]
    if tf_libs != ["libtensorflow_framework.so.2"]:
        raise CarryError(f"{ops} links {tf_libs}, expected libtensorflow_framework.so.2 alone")
    _build.ffnvcodec_include(fetch=True, log=log)
    gpu = _build.build_gpu()
    (base / "gpu").mkdir(parents=True, exist_ok=True)
    for f in (gpu.core, gpu.warp, gpu.nvdec, gpu.core.parent / "build.json", gpu.core.parent / "core.json"):
        shutil.copy2(f, base / "gpu" / f.name)
    include = Path(_build.ffnvcodec_include())
    dest = base / "ffnvcodec" / "include" / "ffnvcodec"
    dest.mkdir(parents=True, exist_ok=True)
    for h in sorted((include / "ffnvcodec").glob("*.h")):
        shutil.copy2(h, dest / h.name)
    build = json.loads((gpu.core.parent / "build.json").read_text())
    return {
        "ops": {
            "library": ops.name,
            "needs": needed,
            "key": json.loads((ops.parent / "build.json").read_text())["key"],
        },
        "gpu": {k: build.get(k) for k in ("nvcc_release", "ptxas_release", "ptx_isa", "archs", "key")},
    }


def compile_stubs(folder: Path) -> list[Path]:
    """The STUBS, compiled into ``folder``: shared libraries with those sonames and none of the
    libraries' functions (one marker, ``bzna_tf_carry_stub``, says what they are).

    Raises:
      CarryError: no C compiler, or a failed compile.
    """
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise CarryError("compiling the stubs needs a C compiler (cc or gcc, or $CC)")
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for lib, what in STUBS.items():
            src = Path(tmp) / f"{lib}.c"
            src.write_text(STUB_SOURCE.format(name=lib, what=what.split(" (")[0]))
            _run(
                [cc, "-shared", "-fPIC", "-O2", f"-Wl,-soname,{lib}", str(src), "-o", str(folder / lib)],
                f"cc {lib}",
            )
            made.append(folder / lib)
    return made


def cuda_libraries(base: Path, cache: Path, offline: bool, log=None) -> dict:
    """libcudart.so.12 from NVIDIA's wheel, and the STUBS compiled here, into base/cuda."""
    folder = cache / "cuda"
    folder.mkdir(parents=True, exist_ok=True)
    name, version = CUDART
    found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if not found and not offline:
        _log(log, f"downloading {name}=={version}")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "-d",
                str(folder),
                *_target_flags(PYTHON),
                f"{name}=={version}",
            ],
            f"pip download {name}",
        )
        found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if not found:
        raise CarryError(f"no {name}=={version} wheel in {folder} (run without --offline)")
    cuda = base / "cuda"
    cuda.mkdir(parents=True, exist_ok=True)
    with (
        zipfile.ZipFile(found[0]) as z,
        z.open(CUDART_MEMBER) as src,
        open(cuda / "libcudart.so.12", "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    compile_stubs(cuda)
    lines = [
        "Libraries in this folder (LD_LIBRARY_PATH on the GPU machine):",
        f"  libcudart.so.12   NVIDIA's CUDA runtime, from the wheel {found[0].name} (real)",
    ]
    lines += [f"  {lib:<17} STUB: none of {what}'s functions" for lib, what in STUBS.items()]
    lines += [
        "",
        "TensorFlow opens each stub by name before it registers a GPU; it finds none of its functions,",
        "so every op that needs one of them fails with TensorFlow's error on the GPU.",
        "No bzna_tf op calls them.",
    ]
    (cuda / "STUBS.txt").write_text("\n".join(lines) + "\n")
    return {
        "cudart": {"wheel": found[0].name, "sha256": file_sha256(cuda / "libcudart.so.12")},
        "stubs": dict(STUBS),
    }


def copy_fixture(base: Path) -> dict:
    """The original-tools fixture (the .bzna, its manifest, the source photographs) into base/fixture."""
    from kit_builder import fixture_dir

    src = fixture_dir()
    dest = base / "fixture"
    dest.mkdir(parents=True, exist_ok=True)
    for name in FIXTURE_FILES:
        shutil.copy2(src / name, dest / name)
    if (src / "sources").is_dir():  # the tests compare decoded pictures with them
        shutil.copytree(src / "sources", dest / "sources")
    return {"from": str(src), "bytes": _tree_bytes(dest)}


def copy_bench(dest: Path, images: int, crf: float | None, log=None) -> dict:
    """tools/gpu_kit's benchmark set of ``images`` pictures at ``crf`` (the kit's default when None)."""
    from kit_bench import BENCH_CRF, bench_set
    from kit_builder import fixture_dir

    crf = BENCH_CRF if crf is None else crf
    folder = bench_set(images, crf=crf, fixture=fixture_dir(), log=log)
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("bench.bzna", "bench_meta.npz", "bench.json"):
        shutil.copy2(folder / name, dest / name)
    return {"images": images, "crf": crf, "bytes": _tree_bytes(dest), "key": folder.name}


# ------------------------------------------------------------------------------------------------ build


def _git_commit() -> dict:
    try:
        head = _run(["git", "-C", str(REPO), "rev-parse", "HEAD"], "git rev-parse").stdout.strip()
        dirty = bool(_run(["git", "-C", str(REPO), "status", "--porcelain"], "git status").stdout.strip())
    except CarryError:
        return {"commit": "unknown", "dirty": None}
    return {"commit": head, "dirty": dirty}


def final_command(timeout_s: int) -> str:
    """The last call's command: ``final`` with $TF_CARRY_DEADLINE the call's timeout less the margin
    (a deadline already in the environment, the rehearsal's, is kept)."""
    deadline = timeout_s - DEADLINE_MARGIN_S
    return f"TF_CARRY_DEADLINE=${{TF_CARRY_DEADLINE:-{deadline}}} bash {DEVICE_SCRIPT} final"


def stale_libraries(commit: str | None, repo: Path = REPO) -> str | None:
    """Why the libraries built at ``commit`` may not be the checkout's (its working tree, which the
    device calls carry, differs there in ``LIBRARY_SOURCES``, committed or not, or git cannot tell),
    or None."""
    if not commit or commit == "unknown":
        return "plan.json records no commit: the carried libraries cannot be checked against the checkout"
    r = subprocess.run(
        ["git", "-C", str(repo), "diff", "--quiet", commit, "--", *LIBRARY_SOURCES],
        capture_output=True,
        text=True,
    )
    paths = " and ".join(LIBRARY_SOURCES)
    if r.returncode not in (0, 1):
        why = r.stderr.strip()[-300:]
        return f"git cannot compare the carry's commit {commit[:12]} with the checkout ({why})"
    if r.returncode == 1:
        return f"{paths} changed since the carry's commit {commit[:12]}: its libraries are stale"
    new = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all", "--", *LIBRARY_SOURCES],
        capture_output=True,
        text=True,
    ).stdout
    if any(line.startswith("??") for line in new.splitlines()):
        return f"{paths} hold files the carry's commit {commit[:12]} lacks: its libraries are stale"
    return None


def _ignored(path: Path) -> bool:
    """Whether git ignores ``path`` in the checkout (an ignored path travels only when a call carries it)."""
    r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", str(path)], capture_output=True)
    return r.returncode == 0


def plan_text(plan: dict) -> str:
    """PLAN.txt: the run calls, one after another (each within the previous one's warm window)."""
    out = [
        f"TensorFlow {plan['tensorflow']} for CPython {plan['python']} on a GPU machine: "
        f"{len(plan['calls'])} run calls, back to back (a machine stays warm 30 s after a call).",
        f"Checkout: {plan['checkout_bytes'] / MiB:.2f} MiB sent with every call; limit "
        f"{CALL_LIMIT / MiB:.0f} MiB per call. Check again just before: python tools/tf_carry --check",
        "",
    ]
    for k, call in enumerate(plan["calls"], 1):
        carry = [f".tf_carry/{p}" for p in call["carry"]]
        out.append(
            f"call {k}: {call['bytes'] / MiB:.1f} MiB carried "
            f"(+ checkout = {call['total_bytes'] / MiB:.1f} MiB), "
            f"timeout_s={call['timeout_s']}"
        )
        out.append(f"  command: {call['command']}")
        out.append(f"  carry:   {json.dumps(carry)}")
    out += [
        "",
        "After each call: its reply's lease.held_s minus the last one's is what the call cost. The receive "
        "step prints the parts held so far and how long since the previous call ended.",
        f"The final call's command sets $TF_CARRY_DEADLINE to its timeout_s less {DEADLINE_MARGIN_S} s: "
        "stages that would start past it are recorded as not run, so the command ends before the tool "
        "kills it. Order: environment, tests, core_bench, fit, overlap, tf_bench, stubbed. If status's "
        "budget_left_s is below that timeout, the tool runs the call for less: give it "
        "timeout_s = budget_left_s - 10 and prefix the command with TF_CARRY_DEADLINE=<that less 20>.",
        "The final call writes $OUT/<date>-<gpu>-tensorflow-gpu.json (for benchmarks/results/), tests.xml "
        "and tf_gpu.log; when receive or install fails there, the JSON names the step and its error.",
    ]
    return "\n".join(out) + "\n"


def build_carry(
    out: Path,
    *,
    python: str = PYTHON,
    cache: Path,
    bench_images: int = BENCH_IMAGES,
    bench_crf: float | None = None,
    part_limit: int = PART_LIMIT,
    xz_preset: int = XZ_PRESET,
    offline: bool = False,
    force: bool = False,
    log=sys.stderr,
) -> dict:
    """Writes the carry into ``out`` (normally the checkout's ``.tf_carry``); returns plan.json's contents.

    Raises:
      CarryError: a missing tool or input, a failed download or build, or a plan over the limits.
    """
    if isinstance(bench_images, bool) or not isinstance(bench_images, int) or bench_images < 1:
        raise ValueError(
            f"Expected `bench_images` as a positive integer. Received: bench_images={bench_images!r}"
        )
    if not 4 * MiB <= part_limit <= PART_LIMIT:
        raise ValueError(
            f"Expected `part_limit` from 4 MiB to {PART_LIMIT} bytes. Received: part_limit={part_limit!r}"
        )
    out = Path(out).absolute()
    if out.exists() and any(out.iterdir()) and not force:
        raise CarryError(f"{out} exists and is not empty: pass --force to replace it")
    if out.is_relative_to(REPO) and not _ignored(out):
        raise CarryError(
            f"{out} is in the checkout but git does not ignore it: every run call would send it whole "
            "(the checkout's .gitignore ignores /.tf_carry*)"
        )
    checkout = checkout_bytes()
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    import tensorflow as tf

    wheels = resolve_wheels(python, cache, offline, log)
    tf_wheel = [w for w in wheels if w.name.startswith("tensorflow-")]
    if len(tf_wheel) != 1 or f"-{tf.__version__}-" not in tf_wheel[0].name:
        raise CarryError(f"expected one TensorFlow {tf.__version__} wheel among {[w.name for w in wheels]}")
    archive, archive_info = build_archive(python, wheels, cache, xz_preset, log)

    staging = Path(
        tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None, prefix=f"{out.name}.partial-")
    )
    try:
        base = staging / "base"
        base.mkdir()
        libraries = build_libraries(base, log)
        cuda = cuda_libraries(base, cache, offline, log)
        fixture = copy_fixture(base)
        bench = copy_bench(staging / "bench", bench_images, bench_crf, log)
        budget = CALL_LIMIT - checkout - CALL_MARGIN
        first = [
            ("plan.json", 64 * KiB),
            ("base", _tree_bytes(base)),
            ("bench", _tree_bytes(staging / "bench")),
        ]
        sizes, calls = pack_calls(first, archive_info["bytes"], budget - 4 * KiB, part_limit)
        calls[-1].append((HEAD_FILE, 4 * KiB))  # the last call: it writes the results
        _log(log, f"cutting {archive_info['bytes'] / MiB:.1f} MiB into {len(sizes)} parts")
        parts = split_file(archive, sizes, staging / "parts", ARCHIVE)
        plan = {
            "format": FORMAT,
            "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            **_git_commit(),
            "python": python,
            "tensorflow": tf.__version__,
            "wheels": [w.name for w in wheels],
            "excluded": EXCLUDED,
            "removed": REMOVED,
            "archive": {**archive_info, "name": ARCHIVE},
            "parts": parts,
            **libraries,
            **cuda,
            "fixture": fixture,
            "bench": bench,
            "checkout_bytes": checkout,
            "call_limit": CALL_LIMIT,
            "call_margin": CALL_MARGIN,
            "calls": [],
        }
        for k, call in enumerate(calls, 1):
            last = k == len(calls)
            plan["calls"].append(
                {
                    "carry": [p for p, _ in call],
                    "bytes": 0,  # filled below from the files
                    "command": final_command(FINAL_TIMEOUT_S) if last else f"bash {DEVICE_SCRIPT} receive",
                    "timeout_s": FINAL_TIMEOUT_S if last else RECEIVE_TIMEOUT_S,
                }
            )
        (staging / "plan.json").write_text(json.dumps(plan, indent=1))
        for call in plan["calls"]:
            call["bytes"] = sum(_tree_bytes(staging / p) for p in call["carry"])
            call["total_bytes"] = call["bytes"] + checkout
        (staging / "plan.json").write_text(json.dumps(plan, indent=1))
        (staging / "PLAN.txt").write_text(plan_text(plan))
        over = [k for k, c in enumerate(plan["calls"], 1) if c["total_bytes"] > CALL_LIMIT - CALL_MARGIN]
        if over:
            raise CarryError(f"calls {over} would carry more than {(CALL_LIMIT - CALL_MARGIN) / MiB:.0f} MiB")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _log(
        log, f"wrote {out} in {time.perf_counter() - start:.0f} s: {len(plan['calls'])} calls (see PLAN.txt)"
    )
    return plan


def check_plan(out: Path, log=sys.stderr) -> list[str]:
    """Problems with the carry in ``out`` as the checkout is now (empty: the calls fit).

    Checks that every carried file is there with the size plan.json records, that each call, with
    the checkout as it is now, fits the call limit, and that HEAD's library sources are the ones the
    carried libraries were built from (``stale_libraries``). Fast: no hashing.
    """
    out = Path(out)
    try:
        plan = json.loads((out / "plan.json").read_text())
    except (OSError, ValueError) as e:
        return [f"{out / 'plan.json'} is unreadable ({e}): build the carry (python tools/tf_carry)"]
    problems = []
    for part in plan["parts"]:
        p = out / "parts" / part["name"]
        if not p.is_file() or p.stat().st_size != part["bytes"]:
            problems.append(f"{p} is missing or not {part['bytes']} bytes")
    checkout = checkout_bytes()
    for k, call in enumerate(plan["calls"], 1):
        carried = sum(_tree_bytes(out / p) for p in call["carry"] if (out / p).exists())
        total = carried + checkout
        if total > CALL_LIMIT:
            problems.append(
                f"call {k} would send {total / MiB:.2f} MiB (checkout {checkout / MiB:.2f} MiB + "
                f"{carried / MiB:.2f} MiB carried), over {CALL_LIMIT / MiB:.0f} MiB: rebuild the carry "
                "(python tools/tf_carry --force; the packed archive is cached)"
            )
    stale = stale_libraries(plan.get("commit"))
    if stale:
        problems.append(f"{stale}: rebuild the carry (python tools/tf_carry --force)")
    largest = max(
        (sum(_tree_bytes(out / p) for p in c["carry"] if (out / p).exists()) for c in plan["calls"]),
        default=0,
    )
    _log(
        log,
        f"checkout {checkout / MiB:.2f} MiB now; {len(plan['calls'])} calls, the largest "
        f"{(largest + checkout) / MiB:.2f} MiB with it (limit {CALL_LIMIT / MiB:.0f}); "
        + ("OK" if not problems else "PROBLEMS"),
    )
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/tf_carry",
        description="Write TensorFlow, bzna_tf's libraries and the checks for a GPU machine without "
        "TensorFlow or network, as parts carried by consecutive run calls (.tf_carry/PLAN.txt).",
    )
    parser.add_argument("--out", default=str(REPO / ".tf_carry"), help="the carry's folder (%(default)s)")
    parser.add_argument("--python", default=PYTHON, help="the GPU machine's Python (%(default)s)")
    parser.add_argument(
        "--cache",
        default=os.environ.get("BZNA_TF_CARRY_CACHE"),
        help="downloaded wheels and packed archives ($BZNA_TF_CARRY_CACHE, else bzna_tf's cache/tf-carry)",
    )
    parser.add_argument(
        "--bench-images", type=int, default=BENCH_IMAGES, help="benchmark pictures (%(default)s)"
    )
    parser.add_argument("--bench-crf", type=float, help="the benchmark set's CRF (default: the GPU kit's)")
    parser.add_argument(
        "--part-mib", type=int, default=PART_LIMIT // MiB, help="most MiB per part (%(default)s)"
    )
    parser.add_argument(
        "--xz-preset", type=int, default=XZ_PRESET, choices=range(10), help="xz's preset (%(default)s)"
    )
    parser.add_argument("--offline", action="store_true", help="use the cached wheels only")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check, just before the calls, that they fit beside the checkout as it is now and that "
        "the carried libraries are built from its sources; then record its commit for the results",
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check_plan(Path(args.out))
        for p in problems:
            print(f"tf_carry: {p}", file=sys.stderr)
        if problems:
            (Path(args.out) / HEAD_FILE).unlink(missing_ok=True)  # an earlier check's commit is not this one
        else:
            out = Path(args.out)
            if any(HEAD_FILE in c["carry"] for c in json.loads((out / "plan.json").read_text())["calls"]):
                (out / HEAD_FILE).write_text(json.dumps(_git_commit()))  # the code the calls will run
            print((out / "PLAN.txt").read_text(), end="")
        return 1 if problems else 0
    if args.cache is None:
        from bzna_tf.ops import _build

        args.cache = str(_build.cache_root() / "tf-carry")
    try:
        build_carry(
            Path(args.out),
            python=args.python,
            cache=Path(args.cache),
            bench_images=args.bench_images,
            bench_crf=args.bench_crf,
            part_limit=args.part_mib * MiB,
            xz_preset=args.xz_preset,
            offline=args.offline,
            force=args.force,
        )
    except (CarryError, ValueError) as e:
        print(f"tf_carry: {e}", file=sys.stderr)
        return 1
    print((Path(args.out) / "PLAN.txt").read_text(), end="")
    return 0
