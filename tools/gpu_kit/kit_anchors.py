"""The GPU kit's anchors at matched quality (shipped as ``kit/kit_anchors.py``; issue 37, item 4).

For each anchor set the builder wrote (``data/anchors.json``: the benchmark
images at the default's CRF and 5 either side, see ``kit_anchor_sets.py``), in batches of the
benchmark's size:

- the core: NVDEC decode only, and decode + RandomResizedCrop warp +
  normalise to 224 x 224 (``run_kit.bench_core``, which also checks the
  decoded planes' MD5s: ``checks.bench_decode_anchor_crf<N>``), with the
  default decoder sessions; and decode only with one session;
- NVIDIA's own binding, PyNvVideoCodec, decoding the same Annex-B pictures
  into device memory: one ``CreateDecoder`` (HEVC, device memory, zero
  display latency: an intra picture per packet, flagged end-of-picture, is
  returned by the call that submits it) per instance, as many instances as
  the core has sessions, each in its own thread pulling the batch's next
  picture (as the core's sessions do); and with one instance. Its frames'
  planes are checked against the same MD5s;
- nvJPEG: the same images as JPEGs of equal PSNR (the builder's match),
  decoded by ``torchvision.io.decode_jpeg(device="cuda")``, resized and
  normalised (``run_kit.bench_anchor``);

and the ratios: the core's decode over PyNvVideoCodec's at the same instance
count (goal >= 0.95: the core should not lose to NVIDIA's binding of the
same engines), and the core's decode + warp over nvJPEG's decode + resize
(goal >= 1).

PyNvVideoCodec is found in ``$KIT_PYNVVIDEOCODEC`` (a folder to import it
from, a wheel, or a folder holding a wheel), else ``wheels/`` in the kit,
else ``<kit>-wheels/`` beside it (the builder's folder for a wheel too big to
fit in the kit, carried to the machine by another call). A wheel is installed
once with ``pip install --no-deps --no-index --target <its folder>/site``
(zip extraction where pip is missing). ``import PyNvVideoCodec`` raises
RuntimeError without an NVIDIA driver (it loads ``libnvidia-encode.so.1`` even
to decode): the anchor then reports that reason, and the core's and nvJPEG's
figures still stand.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GOAL_CORE_OVER_PYNVVIDEOCODEC = 0.95
GOAL_DECODE_WARP_OVER_NVJPEG = 1.0
WHEEL_GLOB = "pynvvideocodec-*.whl"
MD5_PICTURES = 8  # pictures of each set whose PyNvVideoCodec planes are checked


# ------------------------------------------------------------------------------------ PyNvVideoCodec


def _first_line(e: BaseException, limit: int = 400) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {(text[0] if text else '')[:limit]}"


def find_pynvvideocodec(kit: Path) -> dict:
    """Where PyNvVideoCodec comes from: ``{"site": folder to import from}`` or ``{"wheel": path}``, with
    ``from`` saying which place; ``{"reason": ...}`` where there is none."""
    env = os.environ.get("KIT_PYNVVIDEOCODEC")
    places = [("$KIT_PYNVVIDEOCODEC", Path(env))] if env else []
    places += [("kit", kit / "wheels"), ("beside the kit", kit.parent / f"{kit.name}-wheels")]
    for label, place in places:
        if place.is_file() and place.suffix == ".whl":
            return {"from": label, "wheel": str(place)}
        if (place / "PyNvVideoCodec").is_dir():
            return {"from": label, "site": str(place)}
        wheels = sorted(place.glob(WHEEL_GLOB)) if place.is_dir() else []
        if wheels:
            return {"from": label, "wheel": str(wheels[-1])}
        if label == "$KIT_PYNVVIDEOCODEC":
            return {
                "from": label,
                "reason": f"$KIT_PYNVVIDEOCODEC={env} holds no PyNvVideoCodec nor its wheel",
            }
    return {
        "reason": "no PyNvVideoCodec wheel in the kit (wheels/) nor beside it "
        f"({kit.name}-wheels/), and $KIT_PYNVVIDEOCODEC is not set"
    }


def install_wheel(wheel: Path, python: str = sys.executable) -> dict:
    """Installs a wheel into ``site/`` beside it, once (``site/.installed`` names the wheel installed).

    ``pip install --no-deps --no-index --target``; where pip is missing or fails, the wheel's files are
    extracted (a wheel is a zip whose top level is what ``--target`` gets, plus ``*.data/``, not needed
    here). Returns what was done: ``site``, ``how``, ``seconds`` (and pip's error where it failed).
    """
    site = wheel.parent / "site"
    stamp = site / ".installed"
    tag = f"{wheel.name} {wheel.stat().st_size}"
    if stamp.is_file() and stamp.read_text() == tag:
        return {"site": str(site), "how": "installed before", "wheel": wheel.name}
    t = time.perf_counter()
    command = [
        python,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--upgrade",
        "--target",
        str(site),
        str(wheel),
    ]
    info = {"site": str(site), "wheel": wheel.name}
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=300)
        ok, err = r.returncode == 0, (r.stderr or r.stdout).strip()[-800:]
    except (OSError, subprocess.SubprocessError) as e:
        ok, err = False, _first_line(e)
    if ok:
        info["how"] = "pip install --no-deps --no-index --target"
    else:
        info.update(how="extracted (pip failed)", pip_error=err)
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
    stamp.write_text(tag)
    info["seconds"] = round(time.perf_counter() - t, 2)
    return info


def load_pynvvideocodec(kit: Path):
    """(the PyNvVideoCodec module or None, what was found/installed/imported, with the reason where None)."""
    info = find_pynvvideocodec(kit)
    if "reason" in info:
        return None, info
    try:
        if "wheel" in info:
            info["install"] = install_wheel(Path(info["wheel"]))
            info["site"] = info["install"]["site"]
    except Exception as e:  # an unreadable wheel, a full disk: the reason is the result
        info["reason"] = f"installing {info['wheel']} failed: {_first_line(e)}"
        return None, info
    if info["site"] not in sys.path:
        sys.path.insert(0, info["site"])
    try:
        import PyNvVideoCodec as nvc
    except BaseException as e:  # noqa: BLE001  RuntimeError without a driver; ImportError for another Python
        if isinstance(e, KeyboardInterrupt):
            raise
        info["reason"] = f"import PyNvVideoCodec failed: {_first_line(e)}"
        return None, info
    info["version"] = getattr(nvc, "__version__", None)
    info["module"] = getattr(nvc, "__file__", None)
    return nvc, info


def hevc_codec(nvc):
    """``nvc.cudaVideoCodec.HEVC`` (NVIDIA's guide names ``cudaVideoCodec.H264``; the enum mirrors
    cuviddec.h's ``cudaVideoCodec_HEVC``), found by name should a release spell it otherwise."""
    codecs = nvc.cudaVideoCodec
    if hasattr(codecs, "HEVC"):
        return codecs.HEVC
    names = [n for n in getattr(codecs, "__members__", {}) if "HEVC" in n.upper() or "H265" in n.upper()]
    if not names:
        raise RuntimeError(f"PyNvVideoCodec's cudaVideoCodec has no HEVC member: {dir(codecs)}")
    return getattr(codecs, names[0])


class PyNvDecoders:
    """``count`` PyNvVideoCodec decoders (HEVC, device memory, zero latency), one thread each.

    ``decode(pictures)`` decodes a batch: each thread takes the batch's next picture (a shared counter,
    as the core's sessions take theirs) and submits it as one packet flagged end-of-picture, on its own
    decoder; it returns once every picture's frame is in device memory (each ``Decode`` call returns
    the frame of the picture it submitted: an intra picture has nothing to wait for).
    """

    def __init__(self, nvc, count: int, max_shape, sync=None):
        self.nvc, self.count, self.sync = nvc, count, sync
        h, w = (int(v) for v in max_shape)
        self.decoders = [
            nvc.CreateDecoder(
                gpuid=0,
                codec=hevc_codec(nvc),
                cudacontext=0,  # the primary context, as the core's
                cudastream=0,
                usedevicememory=True,
                maxwidth=w,
                maxheight=h,
                latency=nvc.DisplayDecodeLatencyType.ZERO,
            )
            for _ in range(count)
        ]
        self.pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="pynvc")

    def packets(self, pictures):
        """PacketData for each picture (its bytes kept alive beside it): made before timing, as the core's
        callers have their pictures' bytes ready."""
        out = []
        for p in pictures:
            buf = ctypes.create_string_buffer(p, len(p))
            pkt = self.nvc.PacketData()
            pkt.bsl_data = ctypes.addressof(buf)
            pkt.bsl = len(p)
            pkt.decode_flag = self.nvc.VideoPacketFlag.ENDOFPICTURE
            out.append((pkt, buf))
        return out

    def _run(self, decoder, packets, counter, frames: list, keep: bool):
        got = 0
        while True:
            i = next(counter)
            if i >= len(packets):
                return got
            out = decoder.Decode(packets[i][0])
            got += len(out)
            if keep:
                frames[i] = out

    def decode(self, packets, keep: bool = False):
        """Decodes the batch; the number of frames returned (and, with ``keep``, each picture's frames)."""
        counter = itertools.count()
        frames = [None] * len(packets)
        jobs = [self.pool.submit(self._run, d, packets, counter, frames, keep) for d in self.decoders]
        got = sum(j.result() for j in jobs)
        if self.sync:
            self.sync()
        if got != len(packets):
            raise RuntimeError(
                f"PyNvVideoCodec returned {got} frames for {len(packets)} pictures: not one frame per picture"
            )
        return frames

    def close(self):
        self.pool.shutdown(wait=True)
        self.decoders.clear()


def primary_context_sync():
    """cuCtxSynchronize on device 0's primary context (the core's and PyNvVideoCodec's), or None without
    libcuda (the tests' stand-ins work in host memory)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    dev, ctx, popped = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p()
    if (
        cu.cuInit(0)
        or cu.cuDeviceGet(ctypes.byref(dev), 0)
        or cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    ):
        return None

    def sync():
        cu.cuCtxPushCurrent(ctx)
        try:
            status = cu.cuCtxSynchronize()
        finally:
            cu.cuCtxPopCurrent(ctypes.byref(popped))
        if status:
            raise RuntimeError(f"cuCtxSynchronize failed: CUresult {status}")

    return sync


def check_frames(core, decoders, pictures, meta, indices) -> dict:
    """PyNvVideoCodec's NV12 frames of ``indices`` against the CPU decoder's planar MD5s (chroma
    de-interleaved): one picture at a time, each frame downloaded with the core (one process, one
    primary context) before the next decode can reuse its buffer."""
    import hashlib

    import numpy as np

    matched, failing = 0, []
    for i in indices:
        ((frame,),) = decoders.decode(decoders.packets([pictures[i]]), keep=True)
        h, w = (int(v) for v in meta["coded_shapes"][i])
        size = int(frame.framesize())
        if size != h * w * 3 // 2:
            failing.append(
                {"picture": int(i), "error": f"framesize() {size}, expected NV12 {h}x{w}: {h * w * 3 // 2}"}
            )
            continue
        nv12 = core.download(int(frame.GetPtrToPlane(0)), (size,), np.uint8)
        uv = nv12[h * w :].reshape(h // 2, w // 2, 2)
        planes = (nv12[: h * w], np.ascontiguousarray(uv[..., 0]), np.ascontiguousarray(uv[..., 1]))
        md5 = hashlib.md5(b"".join(p.tobytes() for p in planes)).hexdigest()
        if md5 == str(meta["md5"][i]):
            matched += 1
        else:
            failing.append({"picture": int(i), "md5": md5})
    return {"matched": matched, "total": len(indices), "failing": failing[:8], "pass": not failing}


def bench_pynvvideocodec(rk, nvc, core, args, pictures, meta, sessions: int) -> dict:
    """PyNvVideoCodec decoding the set's pictures in batches: ``sessions`` instances, then one."""
    import numpy as np

    n, batch = len(pictures), args.batch
    repeats = 3 if args.quick else args.repeats
    coded = meta["coded_shapes"]
    max_shape = (int(coded[:, 0].max()), int(coded[:, 1].max()))
    sync = primary_context_sync()
    res = {
        "available": True,
        "version": getattr(nvc, "__version__", None),
        "what": "CreateDecoder(HEVC, usedevicememory=True, latency=ZERO) per instance, one thread each; "
        "PacketData per picture flagged ENDOFPICTURE; NV12 frames in device memory",
        "batch": batch,
        "sync": "cuCtxSynchronize on the primary context after each batch" if sync else "none (no libcuda)",
    }
    batches = [[pictures[i] for i in (k * batch + np.arange(batch)) % n] for k in range(repeats + 1)]
    for count in dict.fromkeys((sessions, 1)):
        decoders = PyNvDecoders(nvc, count, max_shape, sync)
        try:
            packets = [decoders.packets(b) for b in batches]
            res[f"decode_{count}"] = rk.timed(lambda k, d=decoders, p=packets: d.decode(p[k]), repeats, batch)
            if count == sessions:  # the planes, once, after the timing: a failure here keeps the figures
                idx = list(range(min(MD5_PICTURES, n)))
                try:
                    res["frames_check"] = check_frames(core, decoders, pictures, meta, idx)
                except Exception as e:  # e.g. the core cannot read the binding's memory: say so
                    res["frames_check"] = {"pass": False, "error": _first_line(e)}
        finally:
            decoders.close()
        rk.log(f"  PyNvVideoCodec, {count} instance(s): {res[f'decode_{count}']['images_per_s']} images/s")
    res["instances"] = sessions
    return res


# ------------------------------------------------------------------------------------------ the core


def bench_core_one_session(rk, core, args, pictures, meta) -> dict:
    """The core's decode only (into device buffers) with one NVDEC session: PyNvVideoCodec's one instance."""
    import numpy as np

    n, batch = len(pictures), args.batch
    repeats = 3 if args.quick else args.repeats
    coded = meta["coded_shapes"]
    h, w = int(coded[:, 0].max()), int(coded[:, 1].max())
    batches = [[pictures[i] for i in (k * batch + np.arange(batch)) % n] for k in range(repeats + 1)]
    ptrs = [
        core.alloc(batch * h * w),
        *(core.alloc(batch * ((h + 1) // 2) * ((w + 1) // 2)) for _ in range(2)),
    ]
    core.set_nvdec_sessions(1)
    try:
        return rk.timed(lambda k: core.decode_yuv(batches[k], (h, w), *ptrs), repeats, batch)
    finally:
        core.set_nvdec_sessions(0)
        for p in ptrs:
            core.free(p)


# -------------------------------------------------------------------------------------------- a run


def _ratio(a, b):
    return round(a / b, 3) if a and b else None


def _figure(d, *keys):
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def run(rk, core, args) -> dict | None:
    """Every anchor set: the core, PyNvVideoCodec, nvJPEG and their ratios, into ``results["anchors"]``.

    ``rk``: the runner's module (its ``results``, ``stage``, ``log``, ``timed``, ``load_bench``,
    ``bench_core``, ``bench_anchor``). Returns the anchors' results, or None where the kit has none.
    """
    described = rk.KIT / "data" / "anchors.json"
    if not described.is_file():
        return None
    info = json.loads(described.read_text())
    device = rk.results.get("device") or {}
    nvdec = device.get("nvdec") if isinstance(device, dict) else None
    sessions = int((nvdec or {}).get("sessions") or (nvdec or {}).get("engines") or 1)
    nvc, found = rk.stage("anchors_load_pynvvideocodec", load_pynvvideocodec, rk.KIT) or (
        None,
        {"reason": "raised"},
    )
    out = {
        "what": "the benchmark images at several CRFs; the core, PyNvVideoCodec (same bitstreams) and nvJPEG "
        "(JPEGs of equal PSNR) in batches of the benchmark's size",
        "images": info["images"],
        "batch": args.batch,
        "sessions": sessions,
        "goals": {
            "core_over_pynvvideocodec": GOAL_CORE_OVER_PYNVVIDEOCODEC,
            "decode_warp_over_nvjpeg": GOAL_DECODE_WARP_OVER_NVJPEG,
        },
        "pynvvideocodec": {"available": nvc is not None, **found},
        "sets": {},
    }
    rk.results["anchors"] = out
    for s in info["sets"]:
        name = s["name"]
        rk.log(f"anchor set {name}: CRF {s['crf']}, JPEG q{s['jpeg']['quality']}")
        entry = {
            "crf": s["crf"],
            "picture_bytes_per_picture": s["picture_bytes_per_picture"],
            "rgb_psnr_db": s["rgb_psnr_db"],
            "jpeg": s["jpeg"],
        }
        out["sets"][name] = entry
        loaded = rk.stage(f"load_{name}", rk.load_bench, args.batch, name)
        if loaded is None:
            continue
        pictures, meta = loaded
        entry["core"] = rk.stage(f"bench_core_{name}", rk.bench_core, core, args, pictures, meta, name)
        entry["core_decode_1_session"] = rk.stage(
            f"bench_core_1_{name}", bench_core_one_session, rk, core, args, pictures, meta
        )
        if nvc is None:
            entry["pynvvideocodec"] = {"available": False, "reason": found.get("reason")}
        else:
            p = rk.stage(
                f"bench_pynvvideocodec_{name}",
                bench_pynvvideocodec,
                rk,
                nvc,
                core,
                args,
                pictures,
                meta,
                sessions,
            )
            if p is None:  # it raised: the reason instead of figures, not a failed check
                err = rk.results["errors"].pop()
                p = {"available": False, "reason": err["error"], "traceback": err["traceback"]}
            entry["pynvvideocodec"] = p
        jpeg = rk.stage(f"bench_nvjpeg_{name}", rk.bench_anchor, args, meta, s["jpeg"]["file"])
        if jpeg is None:
            err = rk.results["errors"].pop()
            jpeg = {"available": False, "reason": err["error"], "traceback": err["traceback"]}
        entry["nvjpeg"] = jpeg
        core_decode = _figure(entry, "core", "decode_yuv", "images_per_s")
        core_warp = _figure(entry, "core", "decode_warp", "images_per_s")
        pnvc = _figure(entry, "pynvvideocodec", f"decode_{sessions}", "images_per_s")
        entry["core_decode_over_pynvvideocodec"] = _ratio(core_decode, pnvc)
        entry["core_decode_over_pynvvideocodec_1"] = _ratio(
            _figure(entry, "core_decode_1_session", "images_per_s"),
            _figure(entry, "pynvvideocodec", "decode_1", "images_per_s"),
        )
        entry["decode_warp_over_nvjpeg"] = _ratio(
            core_warp, _figure(entry, "nvjpeg", "decode_resize_normalise", "images_per_s")
        )
        for key, goal in (
            ("core_decode_over_pynvvideocodec", GOAL_CORE_OVER_PYNVVIDEOCODEC),
            ("decode_warp_over_nvjpeg", GOAL_DECODE_WARP_OVER_NVJPEG),
        ):
            entry[f"meets_goal_{key}"] = None if entry[key] is None else entry[key] >= goal
    out["table"] = table(out)
    for line in out["table"]:
        rk.log(line)
    out["results_file"] = str(write_results(rk, out, getattr(args, "results_dir", None)))
    return out


def write_results(rk, out: dict, results_dir=None) -> Path:
    """The anchors' results file, for ``benchmarks/results/``: ``<date>-<gpu>-kit-anchors.json`` in
    ``results_dir`` (the runner's ``--results-dir``), else ``$KIT_RESULTS_DIR`` (the device machine's
    $OUT, say), else the kit's ``results/``. Kind, device,
    driver, date, commit, versions, the anchors' checks and every figure."""
    import platform

    host = rk.results.get("host") or {}
    smi = host.get("nvidia_smi")
    smi = [v.strip() for v in smi[0].split(",")] if isinstance(smi, list) and smi else []
    device = rk.results.get("device") if isinstance(rk.results.get("device"), dict) else {}
    name = device.get("name") or (smi[0] if smi else "unknown-gpu")
    kit = rk.results.get("kit") if isinstance(rk.results.get("kit"), dict) else {}
    nvjpeg = next((s["nvjpeg"] for s in out["sets"].values() if (s.get("nvjpeg") or {}).get("available")), {})
    checks = {k: v for k, v in rk.results["checks"].items() if k.startswith("bench_decode_anchor_")}
    for set_name, s in out["sets"].items():
        frames = (s.get("pynvvideocodec") or {}).get("frames_check")
        if frames is not None:
            checks[f"pynvvideocodec_frames_{set_name}"] = frames
    date = time.strftime("%Y-%m-%d")
    slug = re.sub("[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"  # "NVIDIA H200": nvidia-h200
    results = {
        "kind": "kit-anchors",
        "device": name,
        "driver": smi[1] if len(smi) > 1 else device.get("driver_version"),  # nvidia-smi's, else CUDA's
        "date": date,
        "commit": kit.get("commit"),
        "versions": {
            "bzna_tf": kit.get("bzna_tf"),
            "python": platform.python_version(),
            "numpy": host.get("numpy"),
            "nvcc": (rk.results.get("build") or {}).get("nvcc_version"),
            "pynvvideocodec": out["pynvvideocodec"].get("version"),
            "torch": nvjpeg.get("torch"),
            "torchvision": nvjpeg.get("torchvision"),
        },
        "checks": checks,
        "passed": all(v.get("pass") is not False for v in checks.values()),
        "anchors": out,
    }
    folder = Path(results_dir or os.environ.get("KIT_RESULTS_DIR") or rk.KIT / "results")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{date}-{slug}-kit-anchors.json"
    path.write_text(json.dumps(rk._jsonable(results), indent=1) + "\n")
    rk.log(f"anchors: results in {path} (for benchmarks/results/)")
    return path


def table(out: dict) -> list[str]:
    """The figures as lines: per CRF, bytes, PSNR, the JPEG match, images/s and the two ratios."""

    def num(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    lines = [
        f"anchors at matched quality (batch {out['batch']}, {out['sessions']} NVDEC sessions/instances; "
        f"goals: core/PyNvVideoCodec >= {GOAL_CORE_OVER_PYNVVIDEOCODEC}, decode+warp/nvJPEG >= "
        f"{GOAL_DECODE_WARP_OVER_NVJPEG})",
        f"{'set':15s} {'kB/pic':>7s} {'dB':>6s} {'JPEG':>5s} {'kB/pic':>7s} {'dB':>6s} {'core dec':>9s} "
        f"{'PyNvVC':>9s} {'ratio':>6s} {'core d+w':>9s} {'nvJPEG':>9s} {'ratio':>6s}",
    ]
    for name, e in out["sets"].items():
        j = e["jpeg"]
        lines.append(
            f"{name:15s} {e['picture_bytes_per_picture'] / 1e3:7.1f} {e['rgb_psnr_db']:6.2f} "
            f"{'q' + str(j['quality']):>5s} {j['bytes_per_picture'] / 1e3:7.1f} {j['rgb_psnr_db']:6.2f} "
            f"{num(_figure(e, 'core', 'decode_yuv', 'images_per_s'), '9.0f')} "
            f"{num(_figure(e, 'pynvvideocodec', 'decode_' + str(out['sessions']), 'images_per_s'), '9.0f')} "
            f"{num(e.get('core_decode_over_pynvvideocodec'), '6.3f')} "
            f"{num(_figure(e, 'core', 'decode_warp', 'images_per_s'), '9.0f')} "
            f"{num(_figure(e, 'nvjpeg', 'decode_resize_normalise', 'images_per_s'), '9.0f')} "
            f"{num(e.get('decode_warp_over_nvjpeg'), '6.3f')}"
        )
    if not out["pynvvideocodec"]["available"]:
        lines.append(f"PyNvVideoCodec: {out['pynvvideocodec'].get('reason')}")
    return lines
