"""The GPU kit's runner (shipped as ``kit/run_kit.py``): build the GPU core, check it, time it.

Runs on a machine with an NVIDIA GPU and no TensorFlow: the standard library
and NumPy only (torch + torchvision, when present, run the JPEG anchor). It
uses the kit's own copies of ``bzna_tf.format``, ``bzna_tf.ops._build`` and
``bzna_tf.ops.gpu_core`` (``py/``), whatever else is installed.

1. Build: ``compile_core(build/, source_root=src/custom_ops, ffnvcodec_include=include)``
   (nvcc from $NVCC, else the core's discovery, else /usr/local/cuda/bin), reused
   when the sources and tools are unchanged.
2. Probe, describe device 0.
3. Checks: NVDEC decode of every fixture picture (MD5s of the manifest), the
   named reference cases through ``decode_warp`` / ``warp_yuv420`` /
   ``warp_rgb`` against the CPU ops' outputs (one case with the pictures'
   sizes within their padded frames), the device-pointer API, and the
   asynchronous queue (order, ring reuse, errors per ticket, SKIP_BAD,
   shutdown in flight) against ``decode_warp``.
4. Speed: batches of thumbnails, decode only and decode + warp + normalise to
   224x224, several NVDEC session counts; the torchvision nvJPEG anchor; with
   ``--train-step``, a PyTorch ResNet-50 training step alone, after the core
   decodes its batch, and while the core decodes the next one (in a thread, and through the
   core's queue); the step alone and the queue's also go to
   ``results/<date>-<gpu>-kit-overlap.json`` (``"kind": "overlap"``).

Progress goes to stderr; the last line of stdout is one JSON object holding
everything. Exit status: 0 all checks passed, 1 a check failed or a stage
raised, 2 the kit could not run (no nvcc/compiler/driver/GPU, failed build:
``"error"`` says why), 3 no NVDEC (warp checks only), 124 out of time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
START = time.perf_counter()
MAX_ERROR_CHARS = 6000

results: dict = {"errors": [], "checks": {}, "seconds": {}}
_emit_lock = threading.Lock()
_emitted = False


# ------------------------------------------------------------------------------------------------ output


def log(message: str) -> None:
    print(f"[kit {time.perf_counter() - START:7.1f}s] {message}", file=sys.stderr, flush=True)


def _jsonable(value):
    """Plain JSON values: NumPy scalars and arrays converted, NaN and infinities as strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in list(value.items())}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def emit(code: int) -> None:
    """Prints the results as the last stdout line (once) and exits with ``code``."""
    global _emitted
    main = threading.current_thread() is threading.main_thread()
    with _emit_lock:
        if _emitted and not main:
            return  # the watchdog, after the main thread printed: its exit status stands
        if not _emitted:
            _emitted = True
            results["exit_code"] = code
            results["seconds"]["total"] = round(time.perf_counter() - START, 2)
            first = ("error", "exit_code", "passed", "failed_checks", "stage")
            try:
                ordered = {k: results[k] for k in first if k in results}
                ordered.update((k, v) for k, v in list(results.items()) if k not in ordered)
                line = json.dumps(_jsonable(ordered))
            except Exception as e:  # a racing mutation; keep what matters
                line = json.dumps(
                    {
                        "error": results.get("error", f"results could not be serialised: {e!r}"),
                        "exit_code": code,
                    }
                )
            sys.stderr.flush()
            print(line, flush=True)
    if main:
        sys.exit(code)
    os._exit(code)  # from the watchdog: the main thread may be stuck in a C call


def fail(message: str, code: int = 2) -> None:
    results["error"] = message
    emit(code)


def _tail(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _traceback_tail(lines: int = 8) -> list[str]:
    return [line for line in traceback.format_exc().strip().splitlines()][-lines:]


def stage(name: str, fn, *args, **kwargs):
    """Runs one stage; an exception is recorded (message + traceback tail) and None returned."""
    results["stage"] = name
    log(f"{name} ...")
    t = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # every failure is reported, none hides the others
        results["errors"].append(
            {"stage": name, "error": _tail(f"{type(e).__name__}: {e}"), "traceback": _traceback_tail()}
        )
        log(f"{name} FAILED: {type(e).__name__}: {str(e)[:300]}")
        return None
    finally:
        results["seconds"][name] = round(time.perf_counter() - t, 3)


def start_watchdog(deadline: float) -> None:
    """Prints the partial results and exits 124 at the deadline, even when a C call hangs."""

    def fire():
        results["error"] = (
            f"the kit ran past its {deadline:.0f} s deadline in stage {results.get('stage')!r}: "
            "partial results (a hang in the driver or NVDEC?)"
        )
        log(results["error"])
        emit(124)

    timer = threading.Timer(deadline, fire)
    timer.daemon = True
    timer.start()

    def on_term(signum, frame):
        results["error"] = f"killed by signal {signum} in stage {results.get('stage')!r}: partial results"
        emit(124)

    signal.signal(signal.SIGTERM, on_term)


# ----------------------------------------------------------------------------------------------- set-up


def use_kit_python() -> None:
    """Makes ``bzna_tf`` and ``bzna_tf.ops`` the kit's folders, whatever bzna_tf is installed."""
    py = KIT / "py"
    sys.path.insert(0, str(py))
    parent = None
    for name, path in (("bzna_tf", py / "bzna_tf"), ("bzna_tf.ops", py / "bzna_tf" / "ops")):
        mod = types.ModuleType(name)
        mod.__path__ = [str(path)]
        mod.__package__ = name
        sys.modules[name] = mod
        if parent is not None:
            parent.ops = mod
        parent = mod


def host_info() -> dict:
    info = {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        info["numpy"] = None
    if shutil.which("nvidia-smi"):
        try:
            r = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,driver_version,memory.total,pci.bus_id",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            info["nvidia_smi"] = (r.stdout or r.stderr).strip().splitlines()
        except (OSError, subprocess.SubprocessError) as e:
            info["nvidia_smi"] = f"{type(e).__name__}: {e}"
    return info


def find_nvcc(build) -> str | None:
    """$NVCC, else the core's discovery, else /usr/local/cuda/bin/nvcc."""
    if os.environ.get("NVCC"):
        return os.environ["NVCC"]
    found = build.nvcc()
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.access(default, os.X_OK) else None


def _build_stamp(nvcc: str | None) -> str:
    h = hashlib.sha256(repr((nvcc, os.environ.get("CXX"), sys.version)).encode())
    for root in (KIT / "src", KIT / "include", KIT / "py" / "bzna_tf" / "ops" / "_build.py"):
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for p in files:
            if p.is_file():
                h.update(str(p.relative_to(KIT)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def build_core() -> Path:
    """The core library in build/, compiled unless a build of the same sources and tools is there."""
    from bzna_tf.ops import _build

    if not hasattr(_build, "compile_core"):
        raise RuntimeError(
            "this kit's _build.py has no compile_core(): the kit was built from an older bzna_tf"
        )
    nvcc = find_nvcc(_build)
    out = KIT / "build"
    stamp_file = out / "kit-build.json"
    stamp = _build_stamp(nvcc)
    library = out / "libbzna_tf_gpu_core.so"
    info = {"nvcc": nvcc, "library": str(library)}
    if nvcc:
        try:
            r = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
            info["nvcc_version"] = (r.stdout.strip().splitlines() or ["?"])[-1]
        except (OSError, subprocess.SubprocessError) as e:
            info["nvcc_version"] = f"{type(e).__name__}: {e}"
    results["build"] = info
    if library.is_file() and stamp_file.is_file():
        try:
            if json.loads(stamp_file.read_text()).get("stamp") == stamp:
                info["cached"] = True
                return library
        except ValueError:
            pass
    t = time.perf_counter()
    # This machine's own toolkit: the ptxas beside its nvcc (not a pip wheel's).
    beside = os.path.join(os.path.dirname(nvcc), "ptxas") if nvcc else None
    built = _build.compile_core(
        out,
        source_root=KIT / "src" / "custom_ops",
        nvcc=nvcc,
        ptxas=beside if beside and os.access(beside, os.X_OK) else None,
        ffnvcodec_include=KIT / "include",
        verbose=False,
    )
    info.update(cached=False, seconds=round(time.perf_counter() - t, 1), library=str(built))
    stamp_file.write_text(json.dumps({"stamp": stamp, "nvcc": nvcc}))
    return Path(built)


def _core_json() -> dict | str:
    try:
        return json.loads((KIT / "build" / "core.json").read_text())
    except (OSError, ValueError) as e:
        return f"build/core.json unreadable: {e}"


# ------------------------------------------------------------------------------------------------ checks


def compare(got, ref, atol: float) -> dict:
    """Agreement of a GPU output with the CPU reference: pass, max abs diff, fractions, worst pixel."""
    import numpy as np

    if got.shape != ref.shape:
        return {"pass": False, "error": f"shape {list(got.shape)}, expected {list(ref.shape)}"}
    got64, ref64 = got.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(got64)
    diff = np.where(finite, np.abs(got64 - ref64), np.inf)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    max_diff = float(diff.max()) if diff.size else 0.0
    out = {
        "pass": bool(max_diff <= atol),
        "max_abs_diff": max_diff,
        "atol": atol,
        "frac_equal": float((got64 == ref64).mean()) if diff.size else 1.0,
        "frac_within_atol": float((diff <= atol).mean()) if diff.size else 1.0,
        "non_finite": int((~finite).sum()),
    }
    if diff.size and max_diff > 0:
        out.update(
            worst_index=[int(i) for i in worst],
            worst_got=float(got64[worst]),
            worst_expected=float(ref64[worst]),
        )
    return out


def _md5(*arrays) -> str:
    h = hashlib.md5()
    for a in arrays:
        h.update(a.tobytes())
    return h.hexdigest()


def check_fixture_decode(core, fixture: Path, manifest: dict, refs) -> dict:
    """(a) NVDEC decode of every fixture picture, both tracks, against the manifest's MD5s."""
    import numpy as np

    from bzna_tf.format import BznaFile

    with BznaFile(fixture) as f:
        samples = [f.sample(i) for i in range(len(f))]
    out = {}
    for track in ("thumb", "input"):
        tracks = [getattr(s, track) for s in samples]
        pictures = [t.annexb() for t in tracks]
        coded = [(t.coded_height, t.coded_width) for t in tracks]
        max_shape = (max(h for h, _ in coded), max(w for _, w in coded))
        res = {"total": len(pictures), "matched": 0, "failing": [], "max_shape": list(max_shape)}
        decoded: dict = {}
        try:
            y, cb, cr, sizes = core.decode_yuv_host(pictures, max_shape)
            for i in range(len(pictures)):
                decoded[i] = (y[i], cb[i], cr[i], sizes[i])
        except Exception as e:  # find which pictures fail, one by one
            res["batch_error"] = _tail(f"{type(e).__name__}: {e}", 1500)
            for i, p in enumerate(pictures):
                try:
                    y, cb, cr, sizes = core.decode_yuv_host([p], coded[i])
                    decoded[i] = (y[0], cb[0], cr[0], sizes[0])
                except Exception as e1:
                    decoded[i] = f"{type(e1).__name__}: {e1}"
        for i in range(len(pictures)):
            expected = manifest["samples"][i]["decoded"][track]
            entry = {
                "sample": i,
                "expected_md5": expected["yuv420p_md5"],
                "expected_frame_size": expected["frame_size"],
            }
            if isinstance(decoded[i], str):
                res["failing"].append({**entry, "error": _tail(decoded[i], 800)})
                continue
            y, cb, cr, (fh, fw) = decoded[i]
            fh, fw = int(fh), int(fw)
            ch, cw = (fh + 1) // 2, (fw + 1) // 2
            planes = (y[:fh, :fw], cb[:ch, :cw], cr[:ch, :cw])
            md5 = _md5(*(np.ascontiguousarray(p) for p in planes))
            if md5 == expected["yuv420p_md5"] and [fw, fh] == list(expected["frame_size"]):
                res["matched"] += 1
                continue
            entry.update(md5=md5, frame_size=[fw, fh])
            if track == "thumb" and refs is not None and (fh, fw) == refs["thumb_y"].shape[1:]:
                for name, got in zip(("y", "cb", "cr"), planes, strict=True):
                    ref = refs[f"thumb_{name}"][i]
                    d = np.abs(got.astype(np.int16) - ref.astype(np.int16))
                    entry[f"{name}_max_abs_diff"] = int(d.max())
                    entry[f"{name}_frac_differing"] = float((d > 0).mean())
            res["failing"].append(entry)
        res["pass"] = res["matched"] == res["total"]
        out[track] = res
        log(f"  NVDEC {track}: {res['matched']}/{res['total']} frames bit-exact")
    return out


def _case_kwargs(c: dict) -> dict:
    return {
        "bias": c["bias"],
        "norm": c["norm"],
        "oob": c["oob"],
        "channels_first": c["channels_first"],
        "antialias": c.get("antialias", False),  # kits made before antialias have none
    }


def _atol(norm) -> float:
    return max(abs(v) for v in norm) * 1.0 + 1e-5


def _guarded(fn) -> dict:
    try:
        return fn()
    except Exception as e:  # one case's failure must not hide the others
        return {
            "pass": False,
            "error": _tail(f"{type(e).__name__}: {e}", 1500),
            "traceback": _traceback_tail(4),
        }


def _picture_sizes(refs, name: str, c: dict):
    """The case's pictures' (height, width), or None: the decoded frames' (kits made before
    picture sizes have no such case)."""
    return refs[f"{name}.picture_sizes"] if c.get("picture_sizes") else None


def checkout_bytes(repo: Path) -> int:
    """What a device call sends of the checkout besides the folders it names: the files git does not
    ignore (tracked and untracked) and shared/ where the checkout has one (it travels ignored or not).
    The one count of it, for the kit's builder and tools/tf_carry's plan (here because this module
    imports quickly: standard library and NumPy).

    Raises:
      OSError, subprocess.CalledProcessError: git cannot list the files (not a git checkout).
    """
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout
    seen = {os.fsdecode(name) for name in listed.split(b"\0") if name}
    shared = repo / "shared"
    if shared.is_dir():
        seen.update(str(p.relative_to(repo)) for p in shared.rglob("*") if p.is_file())
    total = 0
    for name in seen:
        try:
            total += (repo / name).lstat().st_size
        except FileNotFoundError:  # deleted but still in the index
            pass
    return total


def free_quietly(core, ptrs) -> None:
    """Frees device buffers after a check, whatever happened: a failure to free is not what the check
    reports (the failure that came first is)."""
    for p in ptrs:
        try:
            core.free(p)
        except Exception:
            pass


def warp_pictures(warp, y, cb, cr, matrices, picture_sizes):
    """``warp(y, cb, cr, m)`` of each frame's picture alone: its planes cut to picture_sizes[i].

    What decode_warp with picture_sizes warps; one call per picture (the pictures' sizes differ).
    The kit's builder computes the CPU reference with it too.
    """
    import numpy as np

    out = []
    for i, (h, w) in enumerate(picture_sizes):
        ch, cw = (h + 1) // 2, (w + 1) // 2
        planes = (y[i : i + 1, :h, :w], cb[i : i + 1, :ch, :cw], cr[i : i + 1, :ch, :cw])
        out.append(warp(*(np.ascontiguousarray(p) for p in planes), matrices[i : i + 1]))
    return np.concatenate(out)


def check_reference_cases(core, refs, meta: dict, thumbs, nvdec: bool) -> None:
    """(b) every named case: GPU decode_warp and warp_yuv420 vs the CPU ops; warp_rgb uint8/float32.

    The case with picture sizes passes them to decode_warp, and warps each picture's cut planes.
    """
    y, cb, cr = refs["thumb_y"], refs["thumb_cb"], refs["thumb_cr"]
    dw, wy = {}, {}
    for name, c in meta["cases"].items():
        m, ref = refs[f"{name}.matrices"], refs[f"{name}.decode_warp"]
        ref_yuv = refs[f"{name}.warp_yuv420"] if f"{name}.warp_yuv420" in refs.files else ref
        kw, atol = _case_kwargs(c), _atol(c["norm"])
        hw = _picture_sizes(refs, name, c)
        sized = {} if hw is None else {"picture_sizes": hw}
        if nvdec:
            dw[name] = _guarded(
                lambda m=m, c=c, kw=kw, ref=ref, atol=atol, sized=sized: compare(
                    core.decode_warp_host(thumbs, m, c["out_shape"], **kw, **sized), ref, atol
                )
            )

        def yuv(m=m, c=c, kw=kw, hw=hw):
            if hw is None:
                return core.warp_yuv420_host(y, cb, cr, m, c["out_shape"], **kw)
            return warp_pictures(
                lambda *a, c=c, kw=kw: core.warp_yuv420_host(*a, c["out_shape"], **kw), y, cb, cr, m, hw
            )

        wy[name] = _guarded(lambda yuv=yuv, ref=ref_yuv, atol=atol: compare(yuv(), ref, atol))
        log(
            f"  {name}: decode_warp {dw[name]['pass'] if nvdec else 'skipped'}, "
            f"warp_yuv420 {wy[name]['pass']} (max diff {wy[name].get('max_abs_diff')})"
        )
    results["checks"]["decode_warp"] = dw if nvdec else {"skipped": "no NVDEC"}
    results["checks"]["warp_yuv420"] = wy
    rgb = meta["rgb"]
    kw = {
        "bias": rgb["bias"],
        "norm": rgb["norm"],
        "oob": rgb["oob"],
        "channels_first": rgb["channels_first"],
    }
    out = {}
    for dtype in ("uint8", "float32"):
        # Point sampling, then the footprint filter (kits made before antialias have no such reference).
        for suffix, antialias in (("", False), ("_antialias", True)):
            if f"rgb_{dtype}.out{suffix}" not in refs.files:
                continue
            images, ref = refs[f"rgb_{dtype}.images"], refs[f"rgb_{dtype}.out{suffix}"]
            out[dtype + suffix] = _guarded(
                lambda images=images, ref=ref, antialias=antialias: compare(
                    core.warp_rgb_host(
                        images, refs["rgb.matrices"], rgb["out_shape"], antialias=antialias, **kw
                    ),
                    ref,
                    _atol(rgb["norm"]),
                )
            )
            log(f"  warp_rgb {dtype + suffix}: {out[dtype + suffix]['pass']}")
    results["checks"]["warp_rgb"] = out


def _constant_check(core, refs, name: str, c: dict, kind: str, antialias: bool) -> dict:
    """One flat case through warp_rgb ("rgb") or warp_yuv420 ("yuv"): flat, and equal to the CPU's."""
    import numpy as np

    k, kw = f"constant.{name}", {"oob": c["oob"], "channels_first": False, "antialias": antialias}
    if kind == "rgb":
        got = core.warp_rgb_host(refs[f"{k}.rgb"], refs[f"{k}.m"], c["out_shape"], **kw)
    else:
        planes = (refs[f"{k}.y"], refs[f"{k}.cb"], refs[f"{k}.cr"])
        got = core.warp_yuv420_host(*planes, refs[f"{k}.m"], c["out_shape"], **kw)
    result = compare(got, refs[f"{k}.{kind}_out{'_antialias' if antialias else ''}"], _atol([1, 1, 1]))
    result["flat"] = bool(np.all(got == got[:, :1, :1, :]))
    result["pass"] = result["pass"] and result["flat"]
    return result


def check_constant_upscale(core, refs, meta: dict) -> dict:
    """(b') flat pictures upscaled 1.01 to 20 times stay flat (no fill colour at the borders), and
    equal the CPU ops' outputs; warp_rgb and warp_yuv420, point sampling and antialiased."""
    out = {}
    for name, c in meta["constant"].items():
        for kind in ("rgb", "yuv"):
            for antialias in (False, True):
                key = f"{name}.{kind}{'_antialias' if antialias else ''}"
                out[key] = _guarded(
                    lambda name=name, c=c, kind=kind, antialias=antialias: _constant_check(
                        core, refs, name, c, kind, antialias
                    )
                )
                log(f"  constant {key}: {out[key]['pass']}")
    return out


def check_device_api(core, refs, meta: dict, thumbs, nvdec: bool) -> dict:
    """The device-pointer variants (what the benchmark uses) on one case, against the references."""
    import numpy as np

    name = "random_resized_crop" if "random_resized_crop" in meta["cases"] else next(iter(meta["cases"]))
    c = meta["cases"][name]
    m, ref = refs[f"{name}.matrices"], refs[f"{name}.decode_warp"]
    n = len(thumbs)
    kw, atol = _case_kwargs(c), _atol(c["norm"])
    y, cb, cr = refs["thumb_y"], refs["thumb_cb"], refs["thumb_cr"]
    ptrs = []

    def alloc(nbytes):
        ptrs.append(core.alloc(nbytes))
        return ptrs[-1]

    def upload(a):
        ptrs.append(core.upload(a))
        return ptrs[-1]

    out = {"case": name}
    try:
        m_ptr = upload(np.ascontiguousarray(m, np.float32))
        out_ptr = alloc(ref.nbytes)
        if nvdec:

            def dev_decode_warp():
                core.decode_warp(thumbs, m_ptr, len(m), out_ptr, c["out_shape"], **kw)
                return compare(core.download(out_ptr, ref.shape, np.float32), ref, atol)

            def dev_decode_yuv():
                h, w = y.shape[1:]
                yp, cbp, crp = alloc(y.nbytes), alloc(cb.nbytes), alloc(cr.nbytes)
                sizes = core.decode_yuv(thumbs, (h, w), yp, cbp, crp)
                planes = [core.download(p, a.shape, np.uint8) for p, a in ((yp, y), (cbp, cb), (crp, cr))]
                same = all(np.array_equal(g, a) for g, a in zip(planes, (y, cb, cr), strict=True))
                return {"pass": bool(same and (sizes == [h, w]).all()), "frame_sizes": sizes[:2]}

            def dev_decode_warp_picture_sizes():
                sc = meta["cases"]["picture_sizes"]
                sm, sref = refs["picture_sizes.matrices"], refs["picture_sizes.decode_warp"]
                smp, sop = upload(np.ascontiguousarray(sm, np.float32)), alloc(sref.nbytes)
                hw = refs["picture_sizes.picture_sizes"]
                core.decode_warp(
                    thumbs, smp, len(sm), sop, sc["out_shape"], picture_sizes=hw, **_case_kwargs(sc)
                )
                return compare(core.download(sop, sref.shape, np.float32), sref, _atol(sc["norm"]))

            out["decode_warp"] = _guarded(dev_decode_warp)
            out["decode_yuv"] = _guarded(dev_decode_yuv)
            if "picture_sizes" in meta["cases"]:  # kits made before it have no such case
                out["decode_warp_picture_sizes"] = _guarded(dev_decode_warp_picture_sizes)

        def dev_warp_yuv420():
            yp, cbp, crp = upload(y), upload(cb), upload(cr)
            core.warp_yuv420(yp, cbp, crp, n, y.shape[1:], m_ptr, len(m), out_ptr, c["out_shape"], **kw)
            return compare(core.download(out_ptr, ref.shape, np.float32), ref, atol)

        def dev_warp_rgb():
            rgb = meta["rgb"]
            images, rref = refs["rgb_uint8.images"], refs["rgb_uint8.out"]
            ip, mp, op = upload(images), upload(refs["rgb.matrices"]), alloc(rref.nbytes)
            core.warp_rgb(
                ip,
                np.uint8,
                len(images),
                images.shape[1:3],
                mp,
                len(images),
                op,
                rgb["out_shape"],
                bias=rgb["bias"],
                norm=rgb["norm"],
                oob=rgb["oob"],
            )
            return compare(core.download(op, rref.shape, np.float32), rref, _atol(rgb["norm"]))

        def dev_fill_oob():
            # What a skipped picture becomes: the CPU ops' output where every pixel is out of bounds.
            fc = meta["cases"]["all_oob"]
            fref = refs["all_oob.decode_warp"]
            fp = alloc(fref.nbytes)
            core.fill_oob(len(fref), fp, fc["out_shape"], **_case_kwargs(fc))
            return compare(core.download(fp, fref.shape, np.float32), fref, _atol(fc["norm"]))

        out["warp_yuv420"] = _guarded(dev_warp_yuv420)
        out["warp_rgb"] = _guarded(dev_warp_rgb)
        if "all_oob" in meta["cases"]:  # kits made before it have no such case
            out["fill_oob"] = _guarded(dev_fill_oob)
    finally:
        free_quietly(core, ptrs)
    out["pass"] = all(v["pass"] for v in out.values() if isinstance(v, dict))
    return out


# ------------------------------------------------------------------------------------------------- queue

QUEUE_BATCH = 4  # pictures per batch of the queue checks
QUEUE_BAD = 1  # the damaged picture's place in its batch


def parameter_sets_only(picture: bytes) -> bytes:
    """An Annex-B H.265 picture cut before its first slice: its VPS, SPS and PPS, and no picture.

    What NVDEC (and FFmpeg) cannot decode, whatever the GPU: a damaged picture for the error checks.
    """
    i = 0
    while True:
        i = picture.find(b"\x00\x00\x01", i)
        if i < 0 or i + 3 >= len(picture):
            raise ValueError("the picture holds no slice NAL unit")
        if (picture[i + 3] >> 1) & 0x3F < 32:  # NAL unit types 0..31 are slices
            return picture[: i - 1 if i > 0 and picture[i - 1] == 0 else i]
        i += 3


def _error_code(e: Exception):
    return getattr(e, "code", None)


def check_queue(core, refs, meta: dict, thumbs) -> dict:
    """The asynchronous queue (bzna_gpu_queue_*, submit, collect, release) against bzna_gpu_decode_warp.

    Batches of QUEUE_BATCH fixture pictures with one case's matrices; each batch's reference is the
    synchronous decode_warp_host of the same batch, and the queue's result must equal it bitwise.
    ahead_out_of_order: 4 batches submitted at once, collected 2, 0, 3, 1 into the caller's buffers.
    ring_reuse: 6 batches through a ring of 2, both tickets' ring buffers held at once (no copy),
    at most 2 distinct buffers; then batches of 2, 6, 1 and 4 pictures (the ring grows), copied.
    ticket_error: a batch with a damaged picture between two good ones fails alone, and is finished.
    skip_bad: the same batch with SKIP_BAD lists the damaged picture, fills it with oob, keeps the rest.
    shutdown: destroying a queue with a batch running and one pending returns promptly; a thread
    blocked in collect (the pending ticket) and one blocked in submit (the ring full) get CANCELLED.
    """
    import numpy as np

    from bzna_tf.ops.gpu_core import CANCELLED, INVALID_ARGUMENT

    name = "oob_fill" if "oob_fill" in meta["cases"] else next(iter(meta["cases"]))
    c = meta["cases"][name]
    kw, shape = _case_kwargs(c), c["out_shape"]
    m_all = np.ascontiguousarray(refs[f"{name}.matrices"], np.float32)
    n = len(thumbs)

    def batch(k, size=QUEUE_BATCH):
        idx = [(3 * k + j) % n for j in range(size)]
        return [thumbs[i] for i in idx], m_all[idx]

    expected = {}

    def reference(k, size=QUEUE_BATCH):
        if (k, size) not in expected:
            expected[k, size] = core.decode_warp_host(*batch(k, size), shape, **kw)
        return expected[k, size]

    ptrs = []

    def alloc(nbytes):
        ptrs.append(core.alloc(nbytes))
        return ptrs[-1]

    def collect_copy(q, ticket, like):
        ptr = alloc(like.nbytes)
        _, failures = q.collect(ticket, out=ptr)
        return core.download(ptr, like.shape, np.float32), failures

    def same(got, k, size=QUEUE_BATCH):
        return bool(np.array_equal(got, reference(k, size)))

    def ahead():
        with core.queue(4) as q:
            tickets = [q.submit(*batch(k), shape, **kw) for k in range(4)]
            order = [2, 0, 3, 1]
            equal = {k: same(collect_copy(q, tickets[k], reference(k))[0], k) for k in order}
        return {
            "tickets": tickets,
            "collected": order,
            "bitwise_equal": [equal[k] for k in range(4)],
            "pass": tickets == [0, 1, 2, 3] and all(equal.values()),
        }

    def ring_reuse():
        depth, rounds = 2, 3
        held, buffers, equal = [], set(), []
        with core.queue(depth) as q:
            for r in range(rounds):
                tickets = [
                    (q.submit(*batch(depth * r + j), shape, **kw), depth * r + j) for j in range(depth)
                ]
                # Both tickets' batches in the ring at once: neither may overwrite the other.
                held = [(t, k, q.collect(t)[0]) for t, k in tickets]
                for _, k, ptr in held:
                    buffers.add(ptr)
                    equal.append(same(core.download(ptr, reference(k).shape, np.float32), k))
                for t, _, _ in held:
                    q.release(t)
            sizes = [2, 6, 1, 4]
            tickets = [q.submit(*batch(10 + i, size), shape, **kw) for i, size in enumerate(sizes[:depth])]
            grown = []
            for i, size in enumerate(sizes):
                got, _ = collect_copy(q, tickets[i], reference(10 + i, size))
                grown.append(same(got, 10 + i, size))
                if i + depth < len(sizes):
                    j = i + depth
                    tickets.append(q.submit(*batch(10 + j, sizes[j]), shape, **kw))
        return {
            "depth": depth,
            "batches": depth * rounds,
            "bitwise_equal": equal,
            "ring_buffers": len(buffers),
            "grown_sizes": sizes,
            "grown_bitwise_equal": grown,
            "pass": all(equal) and len(equal) == depth * rounds and len(buffers) <= depth and all(grown),
        }

    def damaged():
        pictures, m = batch(1)
        pictures = list(pictures)
        pictures[QUEUE_BAD] = parameter_sets_only(pictures[QUEUE_BAD])
        return pictures, m

    def ticket_error():
        res = {}
        with core.queue(3) as q:
            t0 = q.submit(*batch(0), shape, **kw)
            t1 = q.submit(*damaged(), shape, **kw)
            t2 = q.submit(*batch(2), shape, **kw)
            res["before"] = same(collect_copy(q, t0, reference(0))[0], 0)
            try:
                collect_copy(q, t1, reference(1))
                res["error"] = None
            except Exception as e:  # the ticket's own failure: what is checked
                res.update(error=_tail(f"{type(e).__name__}: {e}", 800), error_code=_error_code(e))
            try:  # finished by its failed collect
                q.collect(t1)
                res["collected_again"] = "no error"
            except Exception as e:
                res["collected_again"] = _error_code(e)
            res["after"] = same(collect_copy(q, t2, reference(2))[0], 2)
        res["pass"] = bool(
            res["before"]
            and res["after"]
            and res.get("error_code") == INVALID_ARGUMENT
            and "sample" in (res["error"] or "")
            and res["collected_again"] == INVALID_ARGUMENT
        )
        return res

    def skip_bad():
        with core.queue(2) as q:
            t = q.submit(*damaged(), shape, **kw, skip_bad=True)
            got, failures = collect_copy(q, t, reference(1))
        ref = reference(1)
        others = [j for j in range(len(ref)) if j != QUEUE_BAD]
        oob = np.asarray(c["oob"], np.float32).reshape((3, 1, 1) if c["channels_first"] else (1, 1, 3))
        filled = bool(np.array_equal(got[QUEUE_BAD], np.broadcast_to(oob, got[QUEUE_BAD].shape)))
        kept = bool(np.array_equal(got[others], ref[others]))
        listed = [int(f[0]) for f in failures]
        return {
            "failures": [[int(f[0]), _tail(str(f[1]), 300)] for f in failures],
            "filled_with_oob": filled,
            "others_bitwise_equal": kept,
            "pass": listed == [QUEUE_BAD] and all(f[1] for f in failures) and filled and kept,
        }

    def shutdown():
        # Batches long enough that the second cannot start before the destroy: about 0.1 s each.
        core.decode_warp_host(*batch(0, n), shape, **kw)
        t = time.perf_counter()
        core.decode_warp_host(*batch(0, n), shape, **kw)
        per_batch = time.perf_counter() - t
        repeat = max(1, min(64, math.ceil(0.1 / max(per_batch, 1e-6))))
        pictures, m = batch(0, n * repeat)
        outcome = {}
        q = core.queue(2)
        out_ptr = alloc(len(pictures) * int(np.prod(shape)) * 3 * 4)

        def blocked(kind, call):
            try:
                call()
                outcome[kind] = "returned"
            except Exception as e:  # CANCELLED expected: recorded and checked
                outcome[kind] = _error_code(e)
                outcome[f"{kind}_error"] = _tail(f"{type(e).__name__}: {e}", 300)

        try:
            q.submit(pictures, m, shape, **kw)
            pending = q.submit(pictures, m, shape, **kw)
            threads = [
                threading.Thread(
                    target=blocked, args=("collect", lambda: q.collect(pending, out=out_ptr)), daemon=True
                ),
                threading.Thread(
                    target=blocked, args=("submit", lambda: q.submit(pictures, m, shape, **kw)), daemon=True
                ),
            ]
            for th in threads:
                th.start()
            time.sleep(0.02)  # both threads inside their calls
            t = time.perf_counter()
            q.close()
            close_s = time.perf_counter() - t
        except BaseException:
            q.close()
            raise
        for th in threads:
            th.join(timeout=max(10.0, 20 * per_batch * repeat))
        still = [k for k, th in zip(("collect", "submit"), threads, strict=True) if th.is_alive()]
        batch_s = per_batch * repeat
        return {
            "pictures_per_batch": len(pictures),
            "batch_s_estimate": round(batch_s, 4),
            "destroy_s": round(close_s, 4),
            "blocked_collect": outcome.get("collect", "still blocked"),
            "blocked_submit": outcome.get("submit", "still blocked"),
            "threads_still_blocked": still,
            "pass": outcome.get("collect") == CANCELLED
            and outcome.get("submit") == CANCELLED
            and not still
            and close_s < 3 * batch_s + 2.0,
        }

    out = {"case": name, "batch": QUEUE_BATCH}
    try:
        for key, fn in (
            ("ahead_out_of_order", ahead),
            ("ring_reuse", ring_reuse),
            ("ticket_error", ticket_error),
            ("skip_bad", skip_bad),
            ("shutdown", shutdown),
        ):
            out[key] = _guarded(fn)
            log(f"  queue {key}: {out[key]['pass']}")
    finally:
        free_quietly(core, ptrs)
    out["pass"] = all(v["pass"] for v in out.values() if isinstance(v, dict))
    return out


# ------------------------------------------------------------------------------------------------- speed


def figures(walls, cpus, batch: int) -> dict:
    """Throughput figures of timed batches (the warm-up batch already dropped)."""
    import numpy as np

    walls, cpus = np.array(walls), np.array(cpus)
    med = float(np.median(walls))
    return {
        "images_per_s": round(batch / med, 1),
        "images_per_s_overall": round(batch * len(walls) / float(walls.sum()), 1),
        "ms_per_batch_median": round(med * 1e3, 2),
        "ms_per_batch_min": round(float(walls.min()) * 1e3, 2),
        "ms_per_batch_max": round(float(walls.max()) * 1e3, 2),
        "cpu_core_s_per_image": round(float(cpus.sum()) / (batch * len(walls)), 6),
        "cpu_cores_busy": round(float(cpus.sum()) / float(walls.sum()), 2),
        "batches": len(walls),
    }


def timed(step, batches: int, batch: int, sync=None) -> dict:
    """Runs step(k) for a warm-up batch then ``batches`` timed ones; wall and process CPU time each."""
    step(0)
    if sync:
        sync()
    walls, cpus = [], []
    for k in range(1, batches + 1):
        t, c = time.perf_counter(), time.process_time()
        step(k)
        if sync:
            sync()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return figures(walls, cpus, batch)


# The benchmark sets beside "bench" (kits made before them have only "bench"): name -> its JPEG anchor.
OTHER_SETS = {"bench_compact": None, "small": "small_jpeg.npz", "small_compact": None}


def load_bench(batch: int, name: str = "bench"):
    import numpy as np

    from bzna_tf.format import BznaFile

    data = KIT / "data"
    with BznaFile(data / f"{name}.bzna") as f:
        pictures = [f.sample(i).thumb.annexb() for i in range(len(f))]
    meta = dict(np.load(data / f"{name}_meta.npz"))
    return pictures, meta


def bench_core(core, args, pictures, meta, name: str = "bench") -> dict:
    """NVDEC decode only, and decode + warp + normalise to 224x224 (NCHW), into device memory.

    ``name``: the set; "bench" is also timed with 1, 2 and 4 decoder sessions, and its MD5
    check is ``bench_decode`` (the others', ``bench_decode_<name>``).
    """
    import numpy as np

    n, batch = len(pictures), args.batch
    repeats = 3 if args.quick else args.repeats
    coded = meta["coded_shapes"]
    max_shape = (int(coded[:, 0].max()), int(coded[:, 1].max()))
    out_h, out_w = (int(v) for v in meta["out_shape"])
    mean, std = meta["mean"], meta["std"]
    norm_kw = {"bias": [255 * v for v in mean], "norm": [1 / (255 * s) for s in std], "channels_first": True}
    epochs = meta["matrices"].shape[0]

    def indices(k):
        return (k * batch + np.arange(batch)) % n

    def batch_pictures(k):
        return [pictures[i] for i in indices(k)]

    res = {
        "batch": batch,
        "images": n,
        "coded_shape": list(max_shape),
        "out_shape": [out_h, out_w],
        "layout": "NCHW float32, ImageNet mean/std",
        "repeats": repeats,
        "warmup_batches": 1,
    }
    ptrs = []
    try:
        h, w = max_shape
        y = core.alloc(batch * h * w)
        ptrs.append(y)
        cb = core.alloc(batch * ((h + 1) // 2) * ((w + 1) // 2))
        ptrs.append(cb)
        cr = core.alloc(batch * ((h + 1) // 2) * ((w + 1) // 2))
        ptrs.append(cr)
        out = core.alloc(batch * 3 * out_h * out_w * 4)
        ptrs.append(out)
        # Matrices for every batch, uploaded before timing: the crops of epoch (index // n).
        m_ptrs = []
        for k in range(repeats + 1):
            idx = indices(k)
            m = meta["matrices"][(k * batch + np.arange(batch)) // n % epochs, idx]
            m_ptrs.append(core.upload(np.ascontiguousarray(m, np.float32)))
            ptrs.append(m_ptrs[-1])
        batches = [batch_pictures(k) for k in range(repeats + 1)]

        def decode_only(k):
            core.decode_yuv(batches[k], max_shape, y, cb, cr)

        def decode_warp(k):
            core.decode_warp(batches[k], m_ptrs[k], batch, out, (out_h, out_w), **norm_kw)

        res["decode_yuv"] = timed(decode_only, repeats, batch)
        log(f"  decode only: {res['decode_yuv']['images_per_s']} images/s")
        # The planes of batch 0, decoded again, against the CPU decoder's MD5s.
        sizes = core.decode_yuv(batches[0], max_shape, y, cb, cr)
        yh = core.download(y, (batch, h, w), np.uint8)
        cbh = core.download(cb, (batch, (h + 1) // 2, (w + 1) // 2), np.uint8)
        crh = core.download(cr, (batch, (h + 1) // 2, (w + 1) // 2), np.uint8)
        bad = []
        for j, i in enumerate(indices(0)):
            fh, fw = (int(v) for v in sizes[j])
            ch, cw = (fh + 1) // 2, (fw + 1) // 2
            md5 = _md5(
                *(np.ascontiguousarray(p) for p in (yh[j, :fh, :fw], cbh[j, :ch, :cw], crh[j, :ch, :cw]))
            )
            if md5 != str(meta["md5"][i]):
                bad.append(int(i))
        checked = min(batch, n)
        results["checks"]["bench_decode" if name == "bench" else f"bench_decode_{name}"] = {
            "pass": not bad,
            "matched": checked - len(set(bad)),
            "total": checked,
            "failing": sorted(set(bad))[:20],
        }
        res["decode_warp"] = timed(decode_warp, repeats, batch)
        log(f"  decode + warp: {res['decode_warp']['images_per_s']} images/s")
        sessions = {}
        for s in ((1, 2, 4) if not args.quick else (1,)) if name == "bench" else ():
            core.set_nvdec_sessions(s)
            try:
                sessions[str(s)] = timed(decode_warp, repeats, batch)
            finally:
                core.set_nvdec_sessions(0)
            log(f"  decode + warp, {s} session(s): {sessions[str(s)]['images_per_s']} images/s")
        sessions["default"] = res["decode_warp"]
        res["decode_warp_by_sessions"] = sessions
    finally:
        free_quietly(core, ptrs)
    return res


def bench_anchor(args, meta, jpeg_file: str = "bench_jpeg.npz") -> dict:
    """The same images as JPEG: torchvision.io.decode_jpeg on the GPU, resize 224x224, normalise."""
    import numpy as np

    try:
        import torch
        import torch.nn.functional as F
        import torchvision
        from torchvision.io import ImageReadMode, decode_jpeg
    except Exception as e:  # optional: the reason is the result
        return {"available": False, "reason": f"{type(e).__name__}: {e}"}
    if not torch.cuda.is_available():
        return {
            "available": False,
            "reason": "torch.cuda.is_available() is False",
            "torch": torch.__version__,
        }
    jpeg = np.load(KIT / "data" / jpeg_file)
    data, offsets = jpeg["data"], jpeg["offsets"]
    n = len(offsets) - 1
    tensors = [torch.from_numpy(data[offsets[i] : offsets[i + 1]]) for i in range(n)]
    batch = args.batch
    repeats = 3 if args.quick else args.repeats
    out_h, out_w = (int(v) for v in meta["out_shape"])
    batches = [[tensors[i] for i in (k * batch + np.arange(batch)) % n] for k in range(repeats + 1)]
    dev = torch.device("cuda")
    mean = torch.tensor([255 * v for v in meta["mean"]], device=dev, dtype=torch.float32).view(1, 3, 1, 1)
    inv_std = torch.tensor([1 / (255 * v) for v in meta["std"]], device=dev, dtype=torch.float32).view(
        1, 3, 1, 1
    )
    out = torch.empty((batch, 3, out_h, out_w), device=dev, dtype=torch.float32)

    mode = ImageReadMode.RGB  # the JPEGs are RGB: UNCHANGED gives the same, should a build refuse RGB on GPU
    try:
        decode_jpeg(batches[0][:2], mode=mode, device=dev)
    except RuntimeError as e:
        log(f"  anchor: decode_jpeg(mode=RGB, device='cuda') failed ({e}); using UNCHANGED")
        mode = ImageReadMode.UNCHANGED

    def decode_only(k):
        decode_jpeg(batches[k], mode=mode, device=dev)

    def decode_resize(k):
        images = decode_jpeg(batches[k], mode=mode, device=dev)
        for i, im in enumerate(images):
            out[i] = F.interpolate(
                im[None].float(), size=(out_h, out_w), mode="bilinear", align_corners=False
            )[0]
        out.sub_(mean).mul_(inv_std)

    res = {
        "available": True,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "device": torch.cuda.get_device_name(0),
        "what": "torchvision.io.decode_jpeg(list, device='cuda') (nvJPEG), F.interpolate bilinear to "
        f"{out_h}x{out_w} per image, (x - 255 mean) / (255 std); NCHW float32",
        "jpeg_bytes_per_image": round(float(offsets[-1]) / n, 1),
        "batch": batch,
        "mode": mode.name,
    }
    res["decode"] = timed(decode_only, repeats, batch, torch.cuda.synchronize)
    log(f"  anchor decode: {res['decode']['images_per_s']} images/s")
    res["decode_resize_normalise"] = timed(decode_resize, repeats, batch, torch.cuda.synchronize)
    log(f"  anchor decode + resize: {res['decode_resize_normalise']['images_per_s']} images/s")
    return res


def _train_model(name: str):
    """The model of the training step: torchvision's ResNet-50 (random weights), or a tiny one for tests."""
    import torch

    if name == "resnet50":
        import torchvision

        return torchvision.models.resnet50(weights=None)
    if name == "tiny":  # the tests' stand-in: the same step on a model cheap enough for a CPU
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 7, stride=8),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(8, 1000),
        )
    raise ValueError(f"Expected --train-model resnet50 or tiny. Received: {name!r}")


def _step_figures(seconds, batch: int) -> dict:
    import numpy as np

    s = np.array(seconds)
    return {
        "ms_median": round(float(np.median(s)) * 1e3, 2),
        "ms_min": round(float(s.min()) * 1e3, 2),
        "ms_max": round(float(s.max()) * 1e3, 2),
        "images_per_s": round(batch / float(np.median(s)), 1),
        "steps": len(s),
    }


def bench_train_step(core, args, pictures, meta) -> dict:
    """What decoding costs a training step, in PyTorch: the step alone (its batch already decoded), the
    core decoding the batch then the step (DecodeWarp's design: decode, then compute, in the training
    stream's order), the step while the core decodes the next batch on its own streams in another
    thread (an overlapped design), and the same through the core's queue (``queue_overlapped``: each
    step collects its batch into the step's buffer on the training stream and submits the batch
    QUEUE_AHEAD steps on; the queue's worker decodes meanwhile). Mixed precision (bfloat16 autocast),
    channels-last, SGD with momentum.

    The core writes NHWC float32 (normalised as the benchmark does): its NCHW view is channels-last
    without a copy. Two output buffers, so the overlapped decode never writes the batch being trained on.
    """
    import numpy as np

    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # optional: the reason is the result
        return {"available": False, "reason": f"{type(e).__name__}: {e}"}
    cuda = torch.cuda.is_available()
    if not cuda and not args.train_on_cpu:
        return {
            "available": False,
            "reason": "torch.cuda.is_available() is False",
            "torch": torch.__version__,
        }
    try:
        model_fn = _train_model(args.train_model)
    except Exception as e:  # torchvision missing, say
        return {"available": False, "reason": f"{type(e).__name__}: {e}", "torch": torch.__version__}
    dev = torch.device("cuda" if cuda else "cpu")
    n, batch, steps = len(pictures), args.batch, args.train_steps
    out_h, out_w = (int(v) for v in meta["out_shape"])
    norm_kw = {
        "bias": [255 * v for v in meta["mean"]],
        "norm": [1 / (255 * s) for s in meta["std"]],
        "channels_first": False,
    }
    epochs = meta["matrices"].shape[0]
    count = steps + QUEUE_AHEAD + 1  # batches: each timed step's, plus those decoded ahead
    indices = [(k * batch + np.arange(batch)) % n for k in range(count)]
    batches = [[pictures[i] for i in idx] for idx in indices]
    m_host = [
        np.ascontiguousarray(meta["matrices"][(k * batch + np.arange(batch)) // n % epochs, idx], np.float32)
        for k, idx in enumerate(indices)
    ]
    m_ptrs = []
    model = model_fn.to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    labels = torch.randint(0, 1000, (batch,), device=dev)
    bufs = [torch.empty((batch, out_h, out_w, 3), device=dev, dtype=torch.float32) for _ in range(2)]
    precision = torch.bfloat16

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step(buf):
        x = buf.permute(0, 3, 1, 2)  # NCHW, channels-last strides
        with torch.autocast(dev.type, dtype=precision):
            loss = F.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def decode(k, buf, stream=None):
        core.decode_warp(
            batches[k], m_ptrs[k], batch, buf.data_ptr(), (out_h, out_w), stream=stream, **norm_kw
        )

    training_stream = torch.cuda.current_stream().cuda_stream if cuda else None
    try:
        for m in m_host:
            m_ptrs.append(core.upload(m))
        decode(0, bufs[0])
        decode(1, bufs[1])
        sync()
        for _ in range(args.train_warmup):  # cuDNN's algorithm choice, the allocator's first blocks
            step(bufs[0])
        sync()
        alone, decode_only, then, overlapped = [], [], [], []
        for k in range(steps):
            t = time.perf_counter()
            step(bufs[k % 2])
            sync()
            alone.append(time.perf_counter() - t)
        for k in range(steps):
            t = time.perf_counter()
            decode(k, bufs[0], training_stream)
            decode_only.append(time.perf_counter() - t)
            step(bufs[0])
            sync()
            then.append(time.perf_counter() - t)
        decode(0, bufs[0])
        cur = 0
        for k in range(steps):
            t = time.perf_counter()
            ahead = threading.Thread(target=decode, args=(k + 1, bufs[1 - cur]))
            ahead.start()
            step(bufs[cur])
            sync()
            ahead.join()
            overlapped.append(time.perf_counter() - t)
            cur = 1 - cur
        queued = _queue_steps(
            core, batches, m_host, (out_h, out_w), norm_kw, bufs[0], step, sync, training_stream
        )
    finally:
        free_quietly(core, m_ptrs)
    res = {
        "available": True,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu (a test run)",
        "model": args.train_model
        + (" (torchvision, random weights)" if args.train_model == "resnet50" else ""),
        "batch": batch,
        "input": f"{out_h}x{out_w} NHWC float32 from the core, viewed as channels-last NCHW",
        "precision": "bfloat16 autocast",
        "optimizer": "SGD, momentum 0.9",
        "warmup_steps": args.train_warmup,
        "step_alone": _step_figures(alone, batch),
        "decode_then_step": _step_figures(then, batch),
        "decode_in_decode_then_step": _step_figures(decode_only, batch),
        "overlapped": _step_figures(overlapped, batch),
        "queue_overlapped": _step_figures(queued, batch),
        "queue_depth": QUEUE_AHEAD,
    }
    base = res["step_alone"]["ms_median"]
    res["decode_then_step_over_alone"] = round(res["decode_then_step"]["ms_median"] / base, 3)
    res["overlapped_over_alone"] = round(res["overlapped"]["ms_median"] / base, 3)
    res["queue_overlapped_over_alone"] = round(res["queue_overlapped"]["ms_median"] / base, 3)
    log(
        f"  training step: alone {base} ms, decode then step {res['decode_then_step']['ms_median']} ms, "
        f"overlapped {res['overlapped']['ms_median']} ms, through the queue "
        f"{res['queue_overlapped']['ms_median']} ms"
    )
    return res


# Batches the queue decodes ahead of the training step (its depth).
QUEUE_AHEAD = 2


def _queue_steps(core, batches, matrices, out_shape, norm_kw, buf, step, sync, stream) -> list:
    """Seconds of each step fed by the core's queue: collect batch k into ``buf`` on the training
    stream (after the previous step's reads of it), submit batch k + QUEUE_AHEAD, run the step; the
    queue decodes the next batches meanwhile. The first step is a warm-up (the queue's first batch
    allocates its ring buffer)."""
    seconds = []
    with core.queue(QUEUE_AHEAD) as q:
        tickets = [q.submit(batches[k], matrices[k], out_shape, **norm_kw) for k in range(QUEUE_AHEAD)]
        for k in range(len(batches) - QUEUE_AHEAD):
            t = time.perf_counter()
            q.collect(tickets[k], out=buf.data_ptr(), stream=stream)
            tickets.append(
                q.submit(batches[k + QUEUE_AHEAD], matrices[k + QUEUE_AHEAD], out_shape, **norm_kw)
            )
            step(buf)
            sync()
            if k > 0:
                seconds.append(time.perf_counter() - t)
        for ticket in tickets[len(batches) - QUEUE_AHEAD :]:
            q.collect(ticket, out=buf.data_ptr(), stream=stream)
        sync()
    return seconds


def overlap_result(train: dict, kit: dict) -> dict:
    """The ``"kind": "overlap"`` record of issue 38 (benchmarks/results/<date>-<gpu>-kit-overlap.json) from
    the training-step figures: the step alone and the step fed by the core's queue. The kit has no
    TensorFlow, so the GPU dataset's check is recorded as not run (the TensorFlow runner fills it)."""
    commit = kit.get("commit") if isinstance(kit, dict) else None
    return {
        "kind": "overlap",
        "date": time.strftime("%Y-%m-%d"),
        "device": train["device"],
        "commit": commit,
        "source": "GPU kit (tools/gpu_kit), --train-step: PyTorch, the core's queue",
        "model": train["model"],
        "batch": train["batch"],
        "precision": train["precision"],
        "queue_depth": train["queue_depth"],
        "step_ms_alone": train["step_alone"]["ms_median"],
        "step_ms_overlapped": train["queue_overlapped"]["ms_median"],
        "overlapped_over_alone": train["queue_overlapped_over_alone"],
        "step_ms_decode_then_step": train["decode_then_step"]["ms_median"],
        "tensorflow_gpu_dataset": {
            "passed": None,
            "element_device": None,
            "not_run": "the GPU kit has no TensorFlow: the TensorFlow runner (tools/tf_carry) records the "
            "GPU dataset's check",
        },
    }


def overlap_file_name(record: dict, what: str = "overlap") -> str:
    """<date>-<gpu>-<what>.json, the GPU named by its model ("h100", "h200"; "cpu" for a test run): the
    TensorFlow runner's record is "overlap" (tools/tf_carry), the kit's PyTorch one "kit-overlap"."""
    import re

    device = str(record["device"])
    found = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Za-z]?)\b", device)
    words = re.findall(r"[a-z0-9]+", device.lower())
    digits = [w for w in words if any(ch.isdigit() for ch in w)]
    gpu = found.group(1).lower() if found else (digits or words or ["gpu"])[0]
    return f"{record['date']}-{gpu}-{what}.json"


# -------------------------------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Build, check and time bzna_tf's GPU core (the GPU kit).")
    parser.add_argument("--no-bench", action="store_true", help="correctness checks only")
    parser.add_argument("--quick", action="store_true", help="fewer timed batches, fewer session counts")
    parser.add_argument("--batch", type=int, default=256, help="images per batch (%(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=10, help="timed batches after the warm-up (%(default)s)"
    )
    parser.add_argument(
        "--deadline", type=float, default=480.0, help="seconds before partial results (%(default)s)"
    )
    parser.add_argument(
        "--train-step",
        action="store_true",
        help="also time a PyTorch training step: alone, after the core decodes its batch, and while the "
        "core decodes the next batch",
    )
    parser.add_argument("--train-model", default="resnet50", help="resnet50 (default) or tiny (the tests')")
    parser.add_argument("--train-steps", type=int, default=20, help="timed steps of each kind (%(default)s)")
    parser.add_argument("--train-warmup", type=int, default=5, help="untimed steps first (%(default)s)")
    parser.add_argument(
        "--results-dir",
        default=os.environ.get("KIT_RESULTS_DIR") or None,
        help="where the results files go: --train-step's <date>-<gpu>-kit-overlap.json, the anchors' "
        "<date>-<gpu>-kit-anchors.json (default: $KIT_RESULTS_DIR, else results/ in the kit)",
    )
    parser.add_argument("--train-on-cpu", action="store_true", help=argparse.SUPPRESS)  # the tests' CPU run
    args = parser.parse_args(argv)
    start_watchdog(args.deadline)
    results["host"] = host_info()
    try:
        results["kit"] = json.loads((KIT / "kit.json").read_text())
    except (OSError, ValueError) as e:
        results["kit"] = f"kit.json unreadable: {e}"
    try:
        import numpy as np
    except ImportError as e:
        fail(f"the kit needs NumPy for {sys.executable}: {e} (pip install numpy, or PYTHON=... bash run.sh)")
    use_kit_python()

    results["stage"] = "build"
    log("building the GPU core (nvcc) ...")
    t = time.perf_counter()
    try:
        library = build_core()
    except Exception as e:  # a missing tool or a failed compile: the message says which
        results["seconds"]["build"] = round(time.perf_counter() - t, 1)
        fail(_tail(f"building the GPU core failed: {type(e).__name__}: {e}"))
    results["seconds"]["build"] = round(time.perf_counter() - t, 1)
    results.setdefault("build", {})["core"] = _core_json()
    log(f"built {library}")

    try:
        from bzna_tf.ops.gpu_core import HAS_CUDA, HAS_NVDEC, GpuCore

        core = GpuCore(library)
    except Exception as e:
        fail(_tail(f"loading the GPU core failed: {type(e).__name__}: {e}"))
    bits, reason = core.probe()
    nvdec = bool(bits & HAS_NVDEC)
    results["probe"] = {"bits": bits, "cuda": bool(bits & HAS_CUDA), "nvdec": nvdec, "reason": reason}
    if not bits & HAS_CUDA:
        fail(f"no usable NVIDIA GPU: {reason}")
    results["nvdec"] = {"available": nvdec, "reason": None if nvdec else reason}
    results["device"] = stage("describe", core.describe, 0)

    data = KIT / "data"
    refs = stage("load_references", lambda: np.load(data / "reference.npz"))
    meta = stage("load_reference_json", lambda: json.loads((data / "reference.json").read_text()))
    manifest = stage("load_manifest", lambda: json.loads((data / "fixture" / "manifest.json").read_text()))
    thumbs = None
    if refs is not None and meta is not None:
        thumbs = stage("read_fixture_thumbs", _fixture_thumbs, data / "fixture" / "original.bzna")
    if nvdec and manifest is not None:
        nv = stage(
            "check_nvdec_decode",
            check_fixture_decode,
            core,
            data / "fixture" / "original.bzna",
            manifest,
            refs,
        )
        if nv is not None:
            results["checks"]["nvdec_decode"] = nv
    if thumbs is not None:
        stage("check_reference_cases", check_reference_cases, core, refs, meta, thumbs, nvdec)
        if "constant" in meta:  # kits made before the edge band have no flat cases
            flat = stage("check_constant_upscale", check_constant_upscale, core, refs, meta)
            if flat is not None:
                results["checks"]["constant_upscale"] = flat
        api = stage("check_device_api", check_device_api, core, refs, meta, thumbs, nvdec)
        if api is not None:
            results["checks"]["device_api"] = api
        if nvdec:
            queue = stage("check_queue", check_queue, core, refs, meta, thumbs)
            if queue is not None:
                results["checks"]["queue"] = queue

    if nvdec and not args.no_bench:
        loaded = stage("load_bench", load_bench, args.batch)
        if loaded is not None:
            pictures, bench_meta = loaded
            results["bench"] = stage("bench_core", bench_core, core, args, pictures, bench_meta)
            anchor = stage("bench_anchor", bench_anchor, args, bench_meta)
            if anchor is None:  # it raised: report the reason instead of figures, not a failed check
                err = results["errors"].pop()
                anchor = {"available": False, "reason": err["error"], "traceback": err["traceback"]}
            results["anchor"] = anchor
            if args.train_step:
                train = stage("bench_train_step", bench_train_step, core, args, pictures, bench_meta)
                if train is None:  # it raised: the reason instead of figures, not a failed check
                    err = results["errors"].pop()
                    train = {"available": False, "reason": err["error"], "traceback": err["traceback"]}
                results["train_step"] = train
                if train.get("available"):
                    record = overlap_result(train, results.get("kit"))
                    results["overlap"] = record
                    folder = Path(args.results_dir) if args.results_dir else KIT / "results"
                    folder.mkdir(parents=True, exist_ok=True)
                    path = folder / overlap_file_name(record, "kit-overlap")
                    path.write_text(json.dumps(record, indent=1) + "\n")
                    log(f"overlap results: {path} (for benchmarks/results/)")
        # The other sets: the same images in the compact layout, and small pictures in both.
        for name, jpeg_file in OTHER_SETS.items():
            if not (KIT / "data" / f"{name}.bzna").is_file():
                continue
            log(f"benchmark set {name}")
            loaded = stage(f"load_{name}", load_bench, args.batch, name)
            if loaded is None:
                continue
            figures = stage(f"bench_core_{name}", bench_core, core, args, *loaded, name)
            results.setdefault("bench_sets", {})[name] = figures
            if jpeg_file is not None:
                anchor = stage(f"bench_anchor_{name}", bench_anchor, args, loaded[1], jpeg_file)
                if anchor is None:
                    err = results["errors"].pop()
                    anchor = {"available": False, "reason": err["error"], "traceback": err["traceback"]}
                results[f"anchor_{name}"] = anchor
        # The anchors at matched quality (issue 37, item 4): kit/kit_anchors.py, with data/anchors.json.
        if (KIT / "kit" / "kit_anchors.py").is_file():
            stage("anchors", _run_anchors, core, args)
    elif args.no_bench:
        results["bench"] = {"skipped": "--no-bench"}
    else:
        results["bench"] = {"skipped": "no NVDEC"}
    results["stage"] = "done"

    failed = sorted(_failed_checks(results["checks"]))
    results["failed_checks"] = failed
    if results["errors"] or failed:
        code = 1
    elif not nvdec:
        code = 3
    else:
        code = 0
    results["passed"] = code == 0
    log(f"done: exit {code}; failed checks: {failed or 'none'}; stage errors: {len(results['errors'])}")
    emit(code)


def _run_anchors(core, args):
    """kit_anchors.run with this module (its results, stages, benchmarks), whatever name it runs under."""
    sys.path.insert(0, str(KIT / "kit"))
    import kit_anchors

    return kit_anchors.run(sys.modules[__name__], core, args)


def _fixture_thumbs(path: Path) -> list[bytes]:
    from bzna_tf.format import BznaFile

    with BznaFile(path) as f:
        return [f.sample(i).thumb.annexb() for i in range(len(f))]


def _failed_checks(checks: dict, prefix: str = "") -> list[str]:
    """Dotted names of every check whose "pass" is False."""
    failed = []
    for name, value in checks.items():
        if not isinstance(value, dict):
            continue
        if value.get("pass") is False:
            failed.append(prefix + name)
        failed += _failed_checks({k: v for k, v in value.items() if k != "pass"}, f"{prefix}{name}.")
    return failed


if __name__ == "__main__":
    main()
