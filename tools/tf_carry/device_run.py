"""On the GPU machine: receive the carry, install TensorFlow into a venv, run the TensorFlow GPU checks.

Run through ``bash tools/tf_carry/device.sh COMMAND`` in the checkout's root, one ``run`` call per
line of ``.tf_carry/PLAN.txt`` (written by ``python tools/tf_carry``):

- ``receive`` (every call but the last): checks the SHA-256 of each part that arrived since the last
  call, records when this call started and how long after the previous one ended (the transfer of
  this call's files, the tool's overhead and the wait between calls), says what is still missing and
  which call comes next. The first call also records the machine (Python, nvidia-smi, tools, disk) and
  stops at once (exit 2) if its Python is not the one the carry was built for.
- ``final`` (the last call): ``receive``, ``install``, then ``run``. When ``receive`` or ``install``
  fails, it still writes a results JSON (the machine, the date, the commit, the failed step and its
  error) before it exits non-zero.
- ``install``: joins the parts, checks the archive's SHA-256 while unpacking it (xz, else Python's
  lzma) into a fresh venv (``python -m venv --without-pip``) that sees none of the machine's packages.
- ``run``: each check in its own process, with a deadline ($TF_CARRY_DEADLINE seconds from the
  command's start, which PLAN.txt's final command sets from the call's timeout less a margin: a stage
  that would start too late is recorded as not run rather than the command killed), partial results
  written after each: the environment (TensorFlow's GPU, the CUDA libraries it opened), the tests
  that need a GPU (``pytest -v -rA``: each test's outcome is in the log as it runs, even if the
  stage is stopped before its JUnit XML is written), the GPU core's rate through the kit's
  benchmark (no TensorFlow), ``model.fit`` with ``DecodeWarp`` (decoded batches against the CPU
  path), the overlap (``as_dataset(device="gpu")``'s elements on the GPU and equal to the CPU
  path's; a training step alone, fed by that dataset, and fed by ``device="model"`` + DecodeWarp),
  ``decode_warp`` through TensorFlow at batch 256, and the guide's Conv2D + Dense model (which needs
  the stubbed libraries: its error is recorded).
  Writes ``$OUT/<date>-<gpu>-tensorflow-gpu.json`` and ``$OUT/<date>-<gpu>-overlap.json`` (for
  ``benchmarks/results/``), ``tests.xml`` and ``tf_gpu.log``.

The standard library only, up to the checks (which run in the venv's Python).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
CARRY = Path(os.environ.get("TF_CARRY_DIR") or REPO / ".tf_carry").absolute()
STATE = CARRY / "state"
VENV = Path(os.environ.get("TF_CARRY_VENV") or "/tmp/tf_carry_venv")
OUT = Path(os.environ.get("OUT") or CARRY / "out")
MiB = 1024 * 1024
BATCH = 256
REPEATS = 20
START = time.perf_counter()
# The final call's command must end within the run tool's limit (timeout_s of PLAN.txt, whose command
# sets $TF_CARRY_DEADLINE to that less a margin): the checks share what is left after receiving and
# installing, each with its own ceiling, and one that would start too late is skipped, not killed.
DEADLINE_S = float(os.environ.get("TF_CARRY_DEADLINE") or "540")
STAGE_LIMITS = {
    "environment": 180,
    "core_bench": 120,
    "tests": 300,
    "fit": 240,
    "stubbed": 150,
    "tf_bench": 240,
    "overlap": 150,
}
# The tests that need a GPU (and the checks of the carried GPU libraries); $TF_CARRY_TESTS adds others.
TESTS = (
    "tests/test_gpu.py",
    "tests/test_gpu_dataset.py",  # device="gpu"'s semantics: its op's CPU kernel beside the GPU one
    "tests/test_library_override.py",
    *shlex.split(os.environ.get("TF_CARRY_TESTS", "")),
)
# Tests that run everywhere (CI runs them on the CPU) but need a stubbed library on the GPU: left out
# there, and listed in the results with the reason.
DESELECTED = {
    "tests/test_gpu.py::test_decode_warp_layer_trains_and_saves": "its Dense layer needs cuBLAS on the GPU, "
    "a stub here (it runs on the CPU on every CI run)",
    "tests/test_gpu.py::test_gpu_dataset_trains_an_unchanged_model": "its Dense layer needs cuBLAS on the "
    "GPU, a stub here (the overlap stage trains a model without MatMul on the GPU dataset instead)",
}
RATIO_GOAL = 0.9
# tests/test_gpu.py's skip reasons when TensorFlow sees no GPU or bzna_tf's GPU kernels did not load.
NO_GPU = ("no GPU visible to TensorFlow", "GPU kernels are unavailable")


def log(message: str) -> None:
    print(f"[tf_carry {time.perf_counter() - START:6.1f}s] {message}", file=sys.stderr, flush=True)


# The last STOP message (final's failure record quotes it).
_stopped: list[str] = []


def stop(message: str) -> None:
    """Prints ``tf_carry: STOP: message`` to stderr and keeps it for the failure record."""
    _stopped.append(message)
    print(f"tf_carry: STOP: {message}", file=sys.stderr, flush=True)


def _plan() -> dict:
    try:
        return json.loads((CARRY / "plan.json").read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(
            f"tf_carry: STOP: {CARRY / 'plan.json'} is unreadable ({e}): the first call carries "
            ".tf_carry/plan.json (see PLAN.txt)"
        ) from None


def file_sha256(path: Path) -> str:
    """The file's SHA-256, read 4 MiB at a time (the builder hashes the parts with it too)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MiB), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=1))
    os.replace(tmp, path)


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _command(cmd: list[str], timeout: float = 60) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (r.stdout or r.stderr).strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------- receive


def machine() -> dict:
    """What the machine has, recorded by the first call."""
    tools = {t: shutil.which(t) for t in ("xz", "readelf", "g++", "nvcc", "nvidia-smi", "tar")}
    disk = shutil.disk_usage("/tmp")
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "tools": tools,
        "nvidia_smi": _command(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        )
        if tools["nvidia-smi"]
        else None,
        "tmp_free_gib": round(disk.free / 2**30, 1),
        "libnvcuvid": "libnvcuvid.so.1" in _command(["ldconfig", "-p"]),
    }


def _part_paths(plan: dict) -> list[Path]:
    return [CARRY / "parts" / p["name"] for p in plan["parts"]]


def verify_parts(plan: dict) -> tuple[list[str], list[str], list[str], float]:
    """(verified now, held, missing or wrong) part names, and the seconds hashing took.

    A part whose SHA-256 matched once is not hashed again (state/verified/NAME holds its hash).
    """
    done, held, missing = [], [], []
    t = time.perf_counter()
    (STATE / "verified").mkdir(parents=True, exist_ok=True)
    for part, path in zip(plan["parts"], _part_paths(plan), strict=True):
        marker = STATE / "verified" / part["name"]
        if not path.is_file():
            missing.append(part["name"])
            continue
        if marker.is_file() and marker.read_text() == part["sha256"] and path.stat().st_size == part["bytes"]:
            held.append(part["name"])
            continue
        if path.stat().st_size != part["bytes"] or file_sha256(path) != part["sha256"]:
            missing.append(part["name"] + " (corrupt: carry it again)")
            continue
        marker.write_text(part["sha256"])
        done.append(part["name"])
        held.append(part["name"])
    return done, held, missing, time.perf_counter() - t


def receive() -> int:
    started = time.time()
    plan = _plan()
    STATE.mkdir(parents=True, exist_ok=True)
    calls = _read_json(STATE / "calls.json", [])
    if not calls:
        info = machine()
        _write_json(STATE / "machine.json", info)
        log(
            f"machine: Python {info['python']}, {info['cpus']} CPUs, {info['nvidia_smi']}, "
            f"/tmp {info['tmp_free_gib']} GiB free, tools {info['tools']}"
        )
        if not info["python"].startswith(plan["python"] + "."):
            stop(
                f"this machine's python3 is {info['python']}, the carry is for CPython "
                f"{plan['python']}: give the machine back and build the carry with --python "
                f"{'.'.join(info['python'].split('.')[:2])}"
            )
            return 2
        for folder in ("base", "bench"):
            if not (CARRY / folder).is_dir():
                stop(f"{CARRY / folder} has not arrived (call 1 carries it)")
                return 2
    gap = round(started - calls[-1]["end"], 1) if calls else None
    done, held, missing, hashing = verify_parts(plan)
    have = sum(p["bytes"] for p in plan["parts"] if p["name"] in held)
    total = sum(p["bytes"] for p in plan["parts"])
    calls.append(
        {
            "call": len(calls) + 1,
            "start": started,
            "since_previous_end_s": gap,
            "verified": done,
            "verified_mib": round(sum(p["bytes"] for p in plan["parts"] if p["name"] in done) / MiB, 1),
            "hash_s": round(hashing, 2),
            "end": time.time(),
        }
    )
    _write_json(STATE / "calls.json", calls)
    print(
        f"tf_carry: call {len(calls)}: {len(done)} part(s) arrived ({calls[-1]['verified_mib']} MiB, "
        f"SHA-256 OK in {hashing:.1f} s); held {len(held)}/{len(plan['parts'])} parts, "
        f"{have / MiB:.0f}/{total / MiB:.0f} MiB"
        + (f"; {gap} s since the previous call ended" if gap is not None else "")
    )
    if missing:
        wanted = {m.split(" ")[0] for m in missing}
        nxt = next(
            (k for k, c in enumerate(plan["calls"], 1) if any(Path(p).name in wanted for p in c["carry"])),
            None,
        )
        print(f"tf_carry: missing {', '.join(missing)}")
        if nxt is not None:
            c = plan["calls"][nxt - 1]
            print(
                f"tf_carry: next: call {nxt}: {c['command']}  "
                f"carry {json.dumps(['.tf_carry/' + p for p in c['carry']])}"
            )
    else:
        print("tf_carry: every part is here")
    calls[-1]["end"] = time.time()
    _write_json(STATE / "calls.json", calls)
    return 0


# ---------------------------------------------------------------------------------------------- install


class _Feeder(threading.Thread):
    """Writes the parts, in order, into a pipe, hashing them on the way."""

    def __init__(self, paths: list[Path], sink):
        super().__init__(daemon=True)
        self.paths, self.sink = paths, sink
        self.sha256 = hashlib.sha256()
        self.error: BaseException | None = None

    def run(self):
        try:
            for p in self.paths:
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(4 * MiB), b""):
                        self.sha256.update(block)
                        self.sink.write(block)
        except BaseException as e:  # a broken pipe: the reader's error says why
            self.error = e
        finally:
            try:
                self.sink.close()
            except OSError:
                pass


class _Joined:
    """The parts as one read-only stream (for Python's lzma when there is no xz)."""

    def __init__(self, paths: list[Path]):
        self.paths = list(paths)
        self.sha256 = hashlib.sha256()
        self.f = None

    def read(self, n: int = -1) -> bytes:
        while True:
            if self.f is None:
                if not self.paths:
                    return b""
                self.f = open(self.paths.pop(0), "rb")
            block = self.f.read(n if n and n > 0 else 4 * MiB)
            if block:
                self.sha256.update(block)
                return block
            self.f.close()
            self.f = None


def _extract(stream, site: Path) -> tuple[int, int]:
    files = size = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if hasattr(tarfile, "data_filter"):
                tar.extract(member, site, filter="data")
            else:  # an older Python: the archive is ours, written by tools/tf_carry
                tar.extract(member, site)
            if member.isfile():
                files += 1
                size += member.size
    return files, size


def install() -> int:
    plan = _plan()
    _, held, missing, _ = verify_parts(plan)
    if missing:
        stop(f"parts missing: {', '.join(missing)} (see PLAN.txt)")
        return 3
    done = _read_json(STATE / "installed.json", {})
    if done.get("sha256") == plan["archive"]["sha256"] and (VENV / "bin" / "python").exists():
        log(f"TensorFlow is already installed in {VENV}")
        return 0
    t = time.perf_counter()
    if VENV.exists():
        shutil.rmtree(VENV)
    python = os.environ.get("TF_CARRY_PYTHON") or sys.executable
    r = subprocess.run([python, "-m", "venv", "--without-pip", str(VENV)], capture_output=True, text=True)
    if r.returncode:
        stop(f"python -m venv failed: {r.stderr.strip()[-2000:]}")
        return 3
    site = Path(
        _command(
            [str(VENV / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        )
    )
    venv_s = time.perf_counter() - t
    paths = _part_paths(plan)
    xz = shutil.which("xz")
    t = time.perf_counter()
    if xz:
        proc = subprocess.Popen([xz, "-dc", "-T0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        feeder = _Feeder(paths, proc.stdin)
        feeder.start()
        try:
            files, size = _extract(proc.stdout, site)
        finally:
            proc.stdout.close()
            feeder.join()
            proc.wait()
        digest = feeder.sha256.hexdigest()
        if proc.returncode or feeder.error:
            stop(f"xz exited with {proc.returncode} ({feeder.error})")
            return 3
    else:
        import lzma

        joined = _Joined(paths)
        with lzma.open(joined) as stream:
            files, size = _extract(stream, site)
        digest = joined.sha256.hexdigest()
    unpack_s = time.perf_counter() - t
    if digest != plan["archive"]["sha256"]:
        stop("the joined archive's SHA-256 differs from plan.json's")
        return 3
    info = {
        "sha256": digest,
        "site": str(site),
        "files": files,
        "bytes": size,
        "venv_s": round(venv_s, 1),
        "unpack_s": round(unpack_s, 1),
        "with": xz or "python lzma",
    }
    _write_json(STATE / "installed.json", info)
    log(
        f"installed {files} files ({size / MiB:.0f} MiB) into {site} in {unpack_s:.1f} s "
        f"(venv {venv_s:.1f} s)"
    )
    return 0


# ------------------------------------------------------------------------------------------------- run


def stage_env() -> dict:
    """The environment of every check: the carried libraries, the fixture, a quiet Keras."""
    base = CARRY / "base"
    env = dict(os.environ)
    env.update(
        BZNA_TF_OPS_LIBRARY=str(base / "ops" / "libbzna_tf_ops.so"),
        BZNA_TF_GPU_LIBRARY_DIR=str(base / "gpu"),
        BZNA_TF_FFNVCODEC_INCLUDE=str(base / "ffnvcodec" / "include"),
        BZNA_TF_FIXTURES=str(base / "fixture"),
        BZNA_TF_CACHE_DIR=str(STATE / "bzna_tf_cache"),  # nothing should build; if it did, here
        LD_LIBRARY_PATH=os.pathsep.join(p for p in (str(base / "cuda"), env.get("LD_LIBRARY_PATH")) if p),
        TF_FORCE_GPU_ALLOW_GROWTH="true",  # the core's process and TensorFlow's share the GPU
        KERAS_BACKEND="tensorflow",
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("PYTHONHOME", None)
    return env


def run_stage(name: str, deadline: float, logfile) -> dict:
    """One check in its own process (the venv's Python): its JSON, or why there is none."""
    left = deadline - time.perf_counter()
    limit = min(STAGE_LIMITS[name], left)
    if limit < 20:
        return {"ran": False, "error": f"not run: {left:.0f} s left before the deadline"}
    result = STATE / f"stage-{name}.json"
    result.unlink(missing_ok=True)
    env = stage_env()
    if name == "environment":  # which CUDA libraries TensorFlow opens, from its own log
        env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="dso_loader=1,dlopen_checker=1")
    cmd = [str(VENV / "bin" / "python"), "-u", __file__, "stage", name, str(result)]
    log(f"{name} (at most {limit:.0f} s) ...")
    t = time.perf_counter()
    logfile.write(f"\n===== {name} =====\n")
    logfile.flush()
    try:
        r = subprocess.run(cmd, stdout=logfile, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=limit)
        code = r.returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    seconds = round(time.perf_counter() - t, 1)
    out = _read_json(result, None)
    if out is None:
        out = {"ran": False, "error": f"the stage exited with {code} and wrote no result (tf_gpu.log)"}
    out.setdefault("ran", True)
    out["exit_code"], out["seconds"] = code, seconds
    log(f"{name}: exit {code} in {seconds} s")
    return out


def _junit(path: Path) -> dict:
    import xml.etree.ElementTree as ET

    counts = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0}
    failed, skipped = [], {}
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        return {**counts, "error": f"no junit XML: {e}"}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            failed.append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            failed.append(name + " (error)")
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
            skipped[name] = (case.find("skipped").get("message") or "")[:300]
        else:
            counts["passed"] += 1
    return {**counts, "failed_names": failed, "skipped_reasons": skipped}


def run_tests(deadline: float, logfile) -> dict:
    left = deadline - time.perf_counter()
    limit = min(STAGE_LIMITS["tests"], left)
    if limit < 30:
        return {"ran": False, "error": f"not run: {left:.0f} s left before the deadline"}
    xml = OUT / "tests.xml"
    cmd = [
        str(VENV / "bin" / "python"),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        # Each test's name and outcome in the log as it ends, and all of them again at the end: a
        # pytest stopped at the deadline writes no JUnit XML, and the log is then the record.
        "-v",
        "-rA",
        f"--junitxml={xml}",
        *(f"--deselect={t}" for t in DESELECTED),
        *TESTS,
    ]
    log(f"tests: {' '.join(TESTS)} (at most {limit:.0f} s) ...")
    logfile.write("\n===== tests =====\n")
    logfile.flush()
    t = time.perf_counter()
    start = logfile.tell()
    try:
        code = subprocess.run(
            cmd, stdout=logfile, stderr=subprocess.STDOUT, env=stage_env(), cwd=REPO, timeout=limit
        ).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    logfile.flush()
    out = {
        "ran": True,
        "files": list(TESTS),
        "deselected": DESELECTED,
        "exit_code": code,
        "seconds": round(time.perf_counter() - t, 1),
    }
    out.update(_junit(xml))
    if "error" in out:  # no JUnit XML (stopped at the deadline): the outcomes pytest -v logged
        with open(logfile.name, "rb") as f:
            f.seek(start)
            out["logged_outcomes"] = logged_outcomes(f.read().decode("utf-8", "replace"))
    log(
        f"tests: {out.get('passed')} passed, {out.get('failed')} failed, {out.get('errors')} errors, "
        f"{out.get('skipped')} skipped"
    )
    return out


_OUTCOME = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.MULTILINE)


def logged_outcomes(text: str) -> dict:
    """{test id: outcome} from ``pytest -v``'s lines (``tests/x.py::name PASSED [ 50%]``), in order."""
    return {m.group(1): m.group(2) for m in _OUTCOME.finditer(text)}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def summarise(results: dict, core_bench: dict, bench: dict) -> None:
    """The rates and the checks, from the stages' results (the core's rate: its one run)."""
    rate = core_bench.get("decode_warp", {}).get("images_per_s")
    core = rate if isinstance(rate, (int, float)) else None
    tf_rate = bench.get("decode_warp", {}).get("images_per_s")
    results["core_images_per_s"] = core
    results["tf_decode_warp_images_per_s"] = tf_rate
    results["tf_to_core"] = round(tf_rate / core, 3) if core and tf_rate else None
    tests = results["tests"]
    results["checks"] = {
        "gpu_registered": bool(results["environment"].get("logical_gpus")),
        "tests_passed": bool(
            tests.get("ran") and tests.get("passed") and not tests.get("failed") and not tests.get("errors")
        ),
        # On a GPU machine, a test skipped for want of a GPU means the GPU path did not run.
        "gpu_tests_ran": bool(tests.get("ran"))
        and not [r for r in tests.get("skipped_reasons", {}).values() if any(w in r for w in NO_GPU)],
        "fit_passed": bool(results["fit"].get("passed")),
        "tf_rate_at_least_0.9_of_core": bool(results["tf_to_core"] and results["tf_to_core"] >= RATIO_GOAL),
    }


def overlap_record(stage: dict, run: dict) -> dict:
    """The ``"kind": "overlap"`` record of issue 38 (benchmarks/results/<date>-<gpu>-overlap.json) from
    the overlap stage's result and the run's (the machine, the commit, TensorFlow). A part that failed,
    or a stage that did not run, is recorded with its reason; the record is written all the same."""

    def ms(part):
        value = stage.get(part)
        return value.get("ms_median") if isinstance(value, dict) else None

    def reason(part):
        value = stage.get(part)
        if not isinstance(value, dict):
            return stage.get("error") or f"not run ({part} absent: tf_gpu.log)"
        return value.get("error")

    dataset = dict(stage.get("tensorflow_gpu_dataset") or {})
    if not dataset:
        dataset = {"element_device": None, "reason": reason("tensorflow_gpu_dataset")}
    dataset["passed"] = bool(dataset.get("passed"))
    alone = [v for v in (ms("step_alone"), ms("step_alone_again")) if v is not None]
    # The faster of the two runs alone (before and after the overlapped one): the stricter comparison.
    step_alone = min(alone) if alone else None
    overlapped, then = ms("step_overlapped"), ms("step_decode_then_step")
    ratio = round(overlapped / step_alone, 3) if overlapped and step_alone else None
    stubs = stage.get("ops_needing_stubs")
    record = {
        "kind": "overlap",
        "date": run.get("date"),
        "time": run.get("time"),
        "device": run.get("device"),
        "driver": run.get("driver"),
        "commit": run.get("commit"),
        "commit_dirty": run.get("commit_dirty"),
        "carry_commit": run.get("carry_commit"),
        "tensorflow": run.get("tensorflow"),
        "python": run.get("python"),
        "versions": stage.get("versions"),
        "source": "tools/tf_carry (device_run.py, the overlap stage): TensorFlow, as_dataset(device='gpu') "
        "(BznaDecodeWarpDataset, decoding ahead on the GPU core's queue)",
        "model": stage.get("model"),
        "model_blocks": stage.get("model_blocks"),
        "ops_needing_stubs": stubs,
        "calibration": stage.get("calibration"),
        "data": stage.get("data"),
        "step_device": stage.get("step_device"),
        "timing": "median ms per step: the next batch, the step, its loss read back (TensorFlow's stream)",
        "step_ms_alone": step_alone,
        "step_ms_overlapped": overlapped,
        "overlapped_over_alone": ratio,
        "goal": OVERLAP_GOAL,
        "goal_met": bool(ratio is not None and ratio <= OVERLAP_GOAL),
        "step_ms_decode_then_step": then,
        "decode_then_step_over_alone": round(then / step_alone, 3) if then and step_alone else None,
        "steps": {
            k: stage.get(k)
            for k in ("step_alone", "step_overlapped", "step_alone_again", "step_decode_then_step")
        },
        "tensorflow_gpu_dataset": dataset,
        "stage": {k: stage.get(k) for k in ("ran", "exit_code", "seconds", "error") if k in stage},
    }
    record["reasons"] = {
        k: r
        for k, r in (
            ("tensorflow_gpu_dataset", None if dataset["passed"] else dataset.get("reason")),
            ("step_alone", None if step_alone else reason("step_alone")),
            ("step_overlapped", None if overlapped else reason("step_overlapped")),
            ("step_decode_then_step", None if then else reason("step_decode_then_step")),
            (
                "ops_needing_stubs",
                f"the step has ops that need a stubbed library: {stubs}" if stubs else None,
            ),
        )
        if r
    }
    record["passed"] = bool(dataset["passed"] and record["goal_met"] and stubs == [])
    return record


def write_overlap(stage: dict, results: dict) -> dict:
    """Writes the overlap record into $OUT (named as the GPU kit names its own: <date>-<gpu>-overlap.json);
    returns what the tensorflow-gpu record keeps of it."""
    record = overlap_record(stage, results)
    try:
        sys.path.insert(0, str(REPO / "tools" / "gpu_kit"))
        from run_kit import overlap_file_name  # the standard library only, like this script

        name = overlap_file_name(record)
    except Exception as e:  # the record matters more than its name
        name = f"{record['date']}-{_slug(str(record['device']))}-overlap.json"
        record["file_name_error"] = f"{type(e).__name__}: {e}"
    _write_json(OUT / name, record)
    log(
        f"overlap: step alone {record['step_ms_alone']} ms, fed by the GPU dataset "
        f"{record['step_ms_overlapped']} ms ({record['overlapped_over_alone']}); elements on "
        f"{record['tensorflow_gpu_dataset'].get('element_device')}: {OUT / name}"
    )
    keep = (
        "passed",
        "step_ms_alone",
        "step_ms_overlapped",
        "overlapped_over_alone",
        "step_ms_decode_then_step",
    )
    return {"file": name, **{k: record[k] for k in keep}, "reasons": record["reasons"]}


def _checkout_commit(plan: dict) -> dict:
    """The commit of the code that runs here: head.json, which ``tools/tf_carry --check`` wrote just
    before the calls and the last call carried; without it, the carry's own (said so)."""
    try:
        head = json.loads((CARRY / "head.json").read_text())
        return {"commit": head["commit"], "commit_dirty": head["dirty"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {
            "commit": plan.get("commit"),
            "commit_dirty": plan.get("dirty"),
            "commit_note": "no head.json came: the carry's commit, which the checkout may be past",
        }


def _record_head(info: dict, plan: dict) -> dict:
    """What every results file starts with: its kind, when, the commits (the checkout's, which ran, and
    the carry's, whose libraries it loaded), the device and its driver."""
    smi = (info.get("nvidia_smi") or "").split(",")
    return {
        "kind": "tensorflow-gpu",
        "date": time.strftime("%Y-%m-%d"),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **_checkout_commit(plan),
        "carry_commit": plan.get("commit"),
        "carry_commit_dirty": plan.get("dirty"),
        "device": smi[0].strip() if smi and smi[0].strip() else "unknown",
        "driver": smi[1].strip() if len(smi) > 1 else None,
        "python": info.get("python"),
    }


def run_checks() -> int:
    plan = _plan()
    deadline = START + DEADLINE_S
    OUT.mkdir(parents=True, exist_ok=True)
    info = _read_json(STATE / "machine.json", {}) or machine()
    results = {
        **_record_head(info, plan),
        "tensorflow": plan["tensorflow"],
        "host": {k: info.get(k) for k in ("cpus", "platform", "libnvcuvid")},
        "carry": {
            "calls": len(plan["calls"]),
            "parts": len(plan["parts"]),
            "archive_bytes": plan["archive"]["bytes"],
            "installed": _read_json(STATE / "installed.json", {}),
            "calls_log": _read_json(STATE / "calls.json", []),
            "cudart": plan["cudart"],
            "stubbed": plan["stubs"],
            "removed": plan["removed"],
            "excluded": plan["excluded"],
        },
    }
    name = f"{results['date']}-{_slug(results['device'])}-tensorflow-gpu.json"
    path = OUT / name

    def save():
        _write_json(path, results)

    save()
    # The tests first after the environment: they are the checks that matter most, and a deadline
    # reached later costs a benchmark, not them. The core's rate is measured once.
    with open(OUT / "tf_gpu.log", "a") as logfile:
        results["environment"] = run_stage("environment", deadline, logfile)
        save()
        results["tests"] = run_tests(deadline, logfile)
        save()
        results["core_bench"] = core = run_stage("core_bench", deadline, logfile)
        save()
        results["fit"] = run_stage("fit", deadline, logfile)
        save()
        results["overlap"] = write_overlap(run_stage("overlap", deadline, logfile), results)
        save()
        results["tf_bench"] = bench = run_stage("tf_bench", deadline, logfile)
        save()
        results["stubbed_model"] = run_stage("stubbed", deadline, logfile)
    summarise(results, core, bench)
    results["passed"] = all(results["checks"].values())
    results["seconds"] = round(time.perf_counter() - START, 1)
    save()
    print(
        json.dumps(
            {
                k: results[k]
                for k in (
                    "passed",
                    "checks",
                    "core_images_per_s",
                    "tf_decode_warp_images_per_s",
                    "tf_to_core",
                )
            }
        )
    )
    print(f"tf_carry: results in {path} (copy it to benchmarks/results/{name})")
    overlap = results.get("overlap", {}).get("file")
    if overlap:
        print(f"tf_carry: overlap record in {OUT / overlap} (copy it to benchmarks/results/{overlap})")
    return 0 if results["passed"] else 1


# -------------------------------------------------------------------------------- checks (the venv's Python)


def _bench_data():
    """The benchmark pictures (thumbnails, Annex-B) and their metadata, as the kit's runner loads them."""
    import numpy as np

    from bzna_tf.format import BznaFile

    with BznaFile(CARRY / "bench" / "bench.bzna") as f:
        pictures = [f.sample(i).thumb.annexb() for i in range(len(f))]
    return pictures, dict(np.load(CARRY / "bench" / "bench_meta.npz"))


def _batches(pictures, meta, batch: int, count: int):
    """The kit's batches: pictures k*batch.. cycled, matrices of epoch (index // n)."""
    import numpy as np

    n = len(pictures)
    epochs = meta["matrices"].shape[0]
    out = []
    for k in range(count):
        idx = (k * batch + np.arange(batch)) % n
        m = meta["matrices"][(k * batch + np.arange(batch)) // n % epochs, idx]
        out.append(([pictures[i] for i in idx], np.ascontiguousarray(m, np.float32)))
    return out


def check_environment() -> dict:
    import tensorflow as tf

    res = {"tensorflow": tf.__version__, "build": dict(tf.sysconfig.get_build_info())}
    res["physical_gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    res["logical_gpus"] = [d.name for d in tf.config.list_logical_devices("GPU")]  # TensorFlow registered it
    if res["physical_gpus"]:
        res["gpu_details"] = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[0]
        )
    import bzna_tf

    bzna_tf.ops.load_library()
    res["bzna_tf_gpu_error"] = bzna_tf.ops.gpu_error()
    res["ffmpeg_error"] = bzna_tf.ops.ffmpeg_error()
    mapped = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if re.search(r"lib(cuda|cudart|cublas|cufft|cusolver|cusparse|cudnn|nvcuvid|bzna)", path):
                mapped.add(path)
    res["libraries_loaded"] = sorted(mapped)
    from tensorflow.python.framework import kernels

    res["kernels"] = {
        op: sorted({k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel})
        for op in ("BznaDecodeWarp", "BznaDecodeWarpDataset", "BznaWarpYuv420", "BznaWarpRgb")
    }
    return res


def check_core_bench() -> dict:
    """The GPU core's decode + warp rate through the kit's own benchmark (tools/gpu_kit/run_kit.py), on
    the carried core library and pictures: no TensorFlow in this process."""
    import types

    for name, path in (("bzna_tf", REPO / "bzna_tf"), ("bzna_tf.ops", REPO / "bzna_tf" / "ops")):
        mod = types.ModuleType(
            name
        )  # the package's folders without their __init__ (which imports TensorFlow)
        mod.__path__ = [str(path)]
        sys.modules[name] = mod
    sys.path.insert(0, str(REPO / "tools" / "gpu_kit"))
    import run_kit

    from bzna_tf.ops.gpu_core import HAS_CUDA, HAS_NVDEC, GpuCore

    core = GpuCore(CARRY / "base" / "gpu" / "libbzna_tf_gpu_core.so")
    bits, reason = core.probe()
    if not bits & HAS_CUDA or not bits & HAS_NVDEC:
        return {"available": False, "reason": reason}
    pictures, meta = _bench_data()
    args = argparse.Namespace(batch=BATCH, quick=False, repeats=REPEATS)
    res = run_kit.bench_core(core, args, pictures, meta)
    res["bench_decode_md5"] = run_kit.results["checks"].get("bench_decode")
    res["describe"] = core.describe(0)
    return res


def check_tf_bench() -> dict:
    """decode_warp through TensorFlow on the GPU: the kit's batches and output (224 x 224 NCHW)."""
    import numpy as np
    import tensorflow as tf

    import bzna_tf

    bzna_tf.ops.load_library()
    if bzna_tf.ops.gpu_error():
        return {"available": False, "reason": bzna_tf.ops.gpu_error()}
    pictures, meta = _bench_data()
    out_h, out_w = (int(v) for v in meta["out_shape"])
    bias = [255 * float(v) for v in meta["mean"]]
    norm = [1 / (255 * float(v)) for v in meta["std"]]
    batches = [(tf.constant(p), tf.constant(m)) for p, m in _batches(pictures, meta, BATCH, REPEATS + 1)]
    sync = getattr(tf.test.experimental, "sync_devices", None)
    devices = set()

    def step(k):
        data, m = batches[k]
        with tf.device("/GPU:0"):
            out = bzna_tf.ops.decode_warp(data, m, (out_h, out_w), bias=bias, norm=norm, data_format="NCHW")
        devices.add(out.device)
        if sync:
            sync()
        else:
            out[0, 0, 0, 0].numpy()

    step(0)  # warm-up: decoders created, kernels loaded
    walls, cpus = [], []
    for k in range(1, REPEATS + 1):
        t, c = time.perf_counter(), time.process_time()
        step(k)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    walls, cpus = np.array(walls), np.array(cpus)
    med = float(np.median(walls))
    figures = {
        "images_per_s": round(BATCH / med, 1),
        "images_per_s_overall": round(BATCH * len(walls) / float(walls.sum()), 1),
        "ms_per_batch_median": round(med * 1e3, 2),
        "ms_per_batch_min": round(float(walls.min()) * 1e3, 2),
        "cpu_core_s_per_image": round(float(cpus.sum()) / (BATCH * len(walls)), 6),
        "batches": len(walls),
    }
    return {
        "batch": BATCH,
        "images": len(pictures),
        "out_shape": [out_h, out_w],
        "layout": "NCHW float32, ImageNet mean/std",
        "synchronised_by": "tf.test.experimental.sync_devices" if sync else "a value read back",
        "devices": sorted(devices),
        "on_gpu": all("GPU" in d for d in devices),
        "decode_warp": figures,
    }


class _Linear:
    """A Keras layer factory: logits = x w + b as a broadcast multiply and a sum (no MatMul, so no cuBLAS,
    which is stubbed here)."""

    @staticmethod
    def make(units: int):
        import keras

        class LinearNoMatMul(keras.layers.Layer):
            def __init__(self, units, **kwargs):
                super().__init__(**kwargs)
                self.units = units

            def build(self, shape):
                self.w = self.add_weight(shape=(shape[-1], self.units), initializer="glorot_uniform")
                self.b = self.add_weight(shape=(self.units,), initializer="zeros")

            def call(self, x):
                return keras.ops.sum(x[:, :, None] * self.w[None], axis=1) + self.b

        return LinearNoMatMul(units)


def check_fit() -> dict:
    """as_dataset(device="model") + DecodeWarp: decoded batches against the CPU path (same seed), then
    model.fit for a few steps with the decode on the GPU."""
    import keras
    import numpy as np

    import bzna_tf

    bzna_tf.ops.load_library()
    res = {"gpu_error": bzna_tf.ops.gpu_error()}
    fixture = CARRY / "base" / "fixture" / "benzina_original_mini.bzna"
    d = bzna_tf.ClassificationDataset(fixture).labelled()
    size = (32, 32)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    warp = bzna_tf.layers.RandomResizedCrop(*size, flip_h=0.5)
    payloads = d.as_dataset(batch_size=3, warp=warp, seed=1, device="model")
    images = d.as_dataset(batch_size=3, warp=warp, seed=1, normalize=(mean, std))

    def inputs():
        return {
            "data": keras.Input((), dtype="string", name="data"),
            "matrices": keras.Input((3, 3), name="matrices"),
            "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes"),
        }

    i = inputs()
    decode = keras.Model(i, bzna_tf.layers.DecodeWarp(*size, mean=mean, std=std)(i))
    atol = 1.0 / (255 * min(std)) + 1e-5  # one grey level, in normalised units
    batches, worst, equal, total, devices, labels_equal = 0, 0.0, 0, 0, set(), True
    for (x, y), (p, q) in zip(images, payloads, strict=True):
        got = decode(p)
        devices.add(got.device)
        diff = np.abs(got.numpy() - x.numpy())
        worst = max(worst, float(diff.max()))
        equal += int((diff == 0).sum())
        total += diff.size
        labels_equal &= bool(np.array_equal(y.numpy(), q.numpy()))
        batches += 1
    res["compare"] = {
        "batches": batches,
        "decoded_on": sorted(devices),
        "max_abs_diff": worst,
        "atol": atol,
        "fraction_equal": round(equal / max(1, total), 6),
        "labels_equal": labels_equal,
        "pass": bool(batches and worst <= atol and labels_equal and all("GPU" in s for s in devices)),
    }
    i = inputs()
    x = bzna_tf.layers.DecodeWarp(*size, mean=mean, std=std)(i)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(i, _Linear.make(d.num_classes)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    t = time.perf_counter()
    history = model.fit(payloads, epochs=3, verbose=0)
    losses = [float(v) for v in history.history["loss"]]
    res["fit"] = {
        "model": "DecodeWarp(32, 32) -> GlobalAveragePooling2D -> linear layer written as multiply + sum "
        "(MatMul needs cuBLAS, which is stubbed)",
        "epochs": 3,
        "steps_per_epoch": batches,
        "losses": losses,
        "seconds": round(time.perf_counter() - t, 2),
        "pass": bool(np.isfinite(losses).all()),
    }
    res["passed"] = bool(res["compare"]["pass"] and res["fit"]["pass"] and res["gpu_error"] is None)
    return res


def check_stubbed() -> dict:
    """The guide's model (Conv2D + Dense) on the GPU: it needs cuDNN and cuBLAS, which are stubbed here;
    records whether it failed and TensorFlow's error (what a layer needing them meets)."""
    import keras
    import numpy as np

    import bzna_tf

    d = bzna_tf.ClassificationDataset(CARRY / "base" / "fixture" / "benzina_original_mini.bzna").labelled()
    ds = d.as_dataset(batch_size=3, warp=bzna_tf.layers.RandomResizedCrop(32, 32), seed=1, device="model")
    i = {
        "data": keras.Input((), dtype="string", name="data"),
        "matrices": keras.Input((3, 3), name="matrices"),
        "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes"),
    }
    x = bzna_tf.layers.DecodeWarp(32, 32, mean=0.5, std=0.25)(i)
    x = keras.layers.Conv2D(8, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(i, keras.layers.Dense(d.num_classes)(x))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    try:
        history = model.fit(ds, epochs=1, verbose=0)
    except Exception as e:  # the expected outcome with the stubs: TensorFlow's error is the result
        return {"failed": True, "error": f"{type(e).__name__}: {str(e)[:1500]}"}
    return {
        "failed": False,
        "losses": [float(v) for v in history.history["loss"]],
        "finite": bool(np.isfinite(history.history["loss"]).all()),
    }


# The overlap check's sizes (tests shrink them). target_ms: the step alone is calibrated to about this
# long, longer than a batch of 256's decode (28 ms measured on an H200), so the decode can hide behind it.
OVERLAP = {
    "batch": BATCH,
    "compare_batches": 2,
    "warmup": 5,
    "steps": 30,
    "target_ms": 60.0,
    "max_blocks": 24,
    "width": 16,
}
# $TF_CARRY_OVERLAP (a JSON object) changes some of them: a rehearsal on a CPU uses small sizes.
OVERLAP.update(json.loads(os.environ.get("TF_CARRY_OVERLAP") or "{}"))
OVERLAP_GOAL = 1.05  # issue 38: the step fed by the GPU dataset within 5% of the step alone
# Ops whose GPU kernels call the libraries the carry stubs (cuBLAS, cuDNN, cuFFT): the step must have none.
STUBBED_OPS = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Einsum",
        "Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3D",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
        "AvgPool",
        "AvgPoolGrad",
        "MaxPool",
        "MaxPoolV2",
        "MaxPoolGrad",
        "FusedBatchNorm",
        "FusedBatchNormV3",
        "FusedBatchNormGradV3",
        "FFT",
        "FFT2D",
        "RFFT",
        "IRFFT",
    }
)


class StandInNet:
    """The overlap check's training step's model: a stand-in for a network, NOT a ResNet.

    The carry's cuBLAS and cuDNN are stubs, so no MatMul, convolution, cuDNN pooling or batch
    normalisation can run on the GPU there. This model is built from what runs with them (Eigen's and
    TensorFlow's own CUDA kernels): a 2 x 2 mean pool written as a reshape and a mean, a 3 -> ``width``
    channel mix written as a broadcast multiply and a sum, ``blocks`` residual blocks at half the input's
    resolution (per-channel scale and bias, tanh, a spatial mix of each pixel with its upper and left
    neighbours through ``tf.roll``, a per-channel gain), a global mean and a linear head written as a
    multiply and a sum. Its cost is memory traffic, as a real network's elementwise layers are; its step
    is made as long as a real one's by its number of blocks (:func:`_calibrate`).

    Inputs: NHWC float32 batches (as_dataset's default layout), int64 labels.
    """

    def __init__(self, classes: int, blocks: int, width: int = 16, seed: int = 0):
        import tensorflow as tf

        def init(shape, scale, k):
            return tf.Variable(scale * tf.random.stateless_normal(shape, seed=[seed, k]), trainable=True)

        self.blocks, self.width, self.classes = blocks, width, classes
        self.stem = [init((3, width), 0.5, 0), tf.Variable(tf.zeros((width,)))]
        self.body = []
        for b in range(blocks):
            k = 10 * (b + 1)
            self.body.append(
                [
                    tf.Variable(tf.ones((width,))),  # scale
                    init((width,), 0.1, k),  # bias
                    init((width,), 0.3, k + 1),  # upper neighbour's weight
                    init((width,), 0.3, k + 2),  # left neighbour's weight
                    tf.Variable(tf.fill((width,), 0.2)),  # the block's gain
                ]
            )
        self.head = [init((width, classes), 0.3, 1), tf.Variable(tf.zeros((classes,)))]
        self.variables = [*self.stem, *(v for block in self.body for v in block), *self.head]
        self.slots = [tf.Variable(tf.zeros_like(v)) for v in self.variables]  # SGD's momentum

    def describe(self) -> str:
        size = sum(int(v.shape.num_elements()) for v in self.variables)
        return (
            f"StandInNet (tools/tf_carry/device_run.py): no MatMul, convolution, cuDNN pooling or batch "
            f"normalisation (cuBLAS and cuDNN are stubs in the carry): 2x2 mean pool (reshape + mean), "
            f"3->{self.width} channel mix (multiply + sum), {self.blocks} residual blocks of per-channel "
            f"scale, bias, tanh, a 3-tap spatial mix (tf.roll) and gain at half resolution, global mean, "
            f"linear head to {self.classes} classes (multiply + sum); softmax cross-entropy; SGD with "
            f"momentum 0.9 written as variable updates; {size} trainable parameters; float32; "
            "tf.function without XLA. A stand-in for a network's cost, not a ResNet"
        )

    def logits(self, x):
        import tensorflow as tf

        h, w = (int(x.shape[1]) // 2) * 2, (int(x.shape[2]) // 2) * 2
        x = x[:, :h, :w, :]
        # tf.nn.avg_pool's GPU kernel for NCHW, and max pooling's, are cuDNN's: a mean over 2 x 2 windows.
        x = tf.reduce_mean(tf.reshape(x, [-1, h // 2, 2, w // 2, 2, 3]), axis=[2, 4])
        x = tf.reduce_sum(tf.expand_dims(x, -1) * self.stem[0], axis=-2) + self.stem[1]
        for scale, bias, up, left, gain in self.body:
            y = tf.tanh(x * scale + bias)
            y = y + tf.roll(y, 1, axis=1) * up + tf.roll(y, 1, axis=2) * left
            x = x + y * gain
        x = tf.reduce_mean(x, axis=[1, 2])
        return tf.reduce_sum(tf.expand_dims(x, -1) * self.head[0], axis=1) + self.head[1]

    def loss(self, x, y):
        import tensorflow as tf

        per_sample = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(y, tf.int64), self.logits(x))
        return tf.reduce_mean(per_sample)


def make_step(model: StandInNet, decode=None, lr: float = 0.01, momentum: float = 0.9):
    """A compiled training step ``(x, y) -> loss``: gradients, then SGD with momentum on every variable.
    ``decode`` (a DecodeWarp layer): x is its payload dict, decoded first (device="model"'s design)."""
    import tensorflow as tf

    @tf.function(jit_compile=False)
    def step(x, y):
        if decode is not None:
            x = decode(x)
        with tf.GradientTape() as tape:
            loss = model.loss(x, y)
        grads = tape.gradient(loss, model.variables)
        for v, m, g in zip(model.variables, model.slots, grads, strict=True):
            m.assign(momentum * m + g)
            v.assign_sub(lr * m)
        return loss

    return step


def stubbed_ops(step, *args) -> list[str]:
    """The op types of ``step``'s graph (its gradient and updates too) whose GPU kernels need a stub."""
    graph = step.get_concrete_function(*args).graph
    return sorted({op.type for op in graph.get_operations()} & STUBBED_OPS)


def _timed(step, batch, warmup: int, steps: int) -> list[float]:
    """Seconds of each of ``steps`` steps after ``warmup`` untimed ones. A step is: ``batch()`` (the next
    batch: from an iterator, it waits while the batch is not ready), the step, and its loss read back (as
    a loop that logs its loss does). The read waits for the step's kernels on TensorFlow's stream only;
    ``tf.test.experimental.sync_devices`` would synchronise the whole GPU, also the core's streams that
    decode the next batches (the overlap being measured)."""
    for _ in range(warmup):
        float(step(*batch()))
    seconds = []
    for _ in range(steps):
        t = time.perf_counter()
        float(step(*batch()))
        seconds.append(time.perf_counter() - t)
    return seconds


def step_figures(seconds: list[float]) -> dict:
    """Milliseconds per step: median (the figure compared), min, max, mean, and the count."""
    import numpy as np

    s = np.asarray(seconds, np.float64) * 1e3
    return {
        "ms_median": round(float(np.median(s)), 3),
        "ms_min": round(float(s.min()), 3),
        "ms_max": round(float(s.max()), 3),
        "ms_mean": round(float(s.mean()), 3),
        "steps": len(s),
    }


def _calibrate(build, batch, target_ms: float, max_blocks: int) -> tuple[int, dict]:
    """The number of blocks whose step alone takes about ``target_ms``: steps of 1 and 3 blocks timed
    (median of 3, after 2 warm-ups), the count from their slope, within 1..max_blocks."""
    import numpy as np

    ms = {}
    for blocks in (1, 3):
        step = make_step(build(blocks))
        ms[blocks] = float(np.median(_timed(step, batch, 2, 3))) * 1e3
    per_block = max((ms[3] - ms[1]) / 2, 1e-3)
    blocks = int(min(max_blocks, max(1, round(1 + (target_ms - ms[1]) / per_block))))
    return blocks, {
        "target_ms": target_ms,
        "ms_1_block": round(ms[1], 3),
        "ms_3_blocks": round(ms[3], 3),
        "ms_per_block": round(per_block, 3),
        "blocks": blocks,
        "max_blocks": max_blocks,
    }


def _compare(ahead, cpu, batches: int, atol: float, fallback: str | None) -> dict:
    """device="gpu"'s first ``batches`` batches against device="cpu"'s (same arguments and seed)."""
    import numpy as np

    got, want = iter(ahead), iter(cpu)
    devices, worst, equal, total, labels_equal, n = set(), 0.0, 0, 0, True, 0
    element_device = None
    for _ in range(batches):
        (x, y), (u, v) = next(got), next(want)
        element_device = element_device or x.device
        devices.update((x.device, y.device))
        diff = np.abs(x.numpy() - u.numpy())
        worst = max(worst, float(diff.max()))
        equal += int((diff == 0).sum())
        total += diff.size
        labels_equal &= bool(np.array_equal(y.numpy(), v.numpy()))
        n += 1
    decoded_by = type(ahead).__name__
    on_gpu = bool(devices) and all("GPU" in d for d in devices)
    reasons = []
    if fallback:
        reasons.append(f"as_dataset(device='gpu') decodes on the CPU: {fallback}")
    if not on_gpu:
        reasons.append(f"elements on {sorted(devices)}, not a GPU")
    if worst > atol:
        reasons.append(f"max abs difference {worst} over the tolerance {atol} (one grey level)")
    if not labels_equal:
        reasons.append("labels differ from device='cpu''s")
    return {
        "passed": not reasons and n == batches,
        "element_device": element_device,
        "devices": sorted(devices),
        "dataset": decoded_by,
        "batches_compared": n,
        "max_abs_diff": worst,
        "atol": atol,
        "fraction_equal": round(equal / max(1, total), 6),
        "labels_equal": labels_equal,
        "reason": "; ".join(reasons) or None,
    }


def _part(results: dict, name: str, run) -> None:
    """results[name] = run(), or the part's error (a failed part is recorded; the others still run)."""
    import traceback

    try:
        results[name] = run()
    except Exception as e:  # the part's failure is its result
        results[name] = {
            "error": f"{type(e).__name__}: {str(e)[:2000]}",
            "traceback": traceback.format_exc().strip().splitlines()[-8:],
        }


def overlap_check(
    path,
    *,
    track: str,
    shape,
    mean,
    std,
    batch: int,
    compare_batches: int,
    warmup: int,
    steps: int,
    target_ms: float,
    max_blocks: int,
    width: int,
    seed: int = 0,
) -> dict:
    """Issue 38's proof: as_dataset(device="gpu")'s elements (on the GPU? equal to device="cpu"'s?), and
    the training step alone on a batch already there, fed by that dataset (decoding ahead while it
    trains), and fed by device="model" + DecodeWarp (decode, then train). See :class:`StandInNet`."""
    import warnings

    import keras
    import numpy as np
    import tensorflow as tf

    import bzna_tf
    from bzna_tf.datasets.pipeline import decoder_device

    bzna_tf.ops.load_library()
    h, w = (int(v) for v in shape)
    mean, std = tuple(float(v) for v in mean), tuple(float(v) for v in std)
    gpus = tf.config.list_logical_devices("GPU")
    res = {
        "versions": {
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "numpy": np.__version__,
            "bzna_tf": getattr(bzna_tf, "__version__", None),
        },
        "gpu_error": bzna_tf.ops.gpu_error(),
        "step_device": gpus[0].name if gpus else "/device:CPU:0",
        "data": {"file": Path(path).name, "track": track, "batch": batch, "shape": [h, w], "seed": seed},
    }
    d = bzna_tf.ClassificationDataset(path, track).labelled()
    res["data"]["samples"] = len(d)
    kw = dict(
        batch_size=batch,
        warp=bzna_tf.layers.RandomResizedCrop(h, w, flip_h=0.5),
        normalize=(mean, std),
        seed=seed,
        shuffle=True,
        repeat=True,
    )
    _, fallback = decoder_device()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback's reason is recorded instead
        ahead = d.as_dataset(**kw, device="gpu")
    atol = 1.0 / (255 * min(std)) + 1e-5  # one grey level, in normalised units (tests/test_gpu.py's)
    _part(
        res,
        "tensorflow_gpu_dataset",
        lambda: _compare(ahead, d.as_dataset(**kw, device="cpu"), compare_batches, atol, fallback),
    )
    if "error" in res["tensorflow_gpu_dataset"]:
        res["tensorflow_gpu_dataset"].update(
            passed=False, element_device=None, reason=res["tensorflow_gpu_dataset"]["error"]
        )
    with tf.device(res["step_device"]):
        x0, y0 = (tf.identity(t) for t in next(iter(ahead)))  # the batch already on the step's device
        res["data"]["fixed_batch_device"] = x0.device

        def build(blocks):
            return StandInNet(d.num_classes, blocks, width, seed)

        def calibrate():
            blocks, info = _calibrate(build, lambda: (x0, y0), target_ms, max_blocks)
            res["model_blocks"] = blocks
            return info

        _part(res, "calibration", calibrate)
        model = build(res.get("model_blocks", 1))
        step = make_step(model)
        res["model"] = model.describe()
        res["ops_needing_stubs"] = stubbed_ops(step, x0, y0)
        _part(res, "step_alone", lambda: step_figures(_timed(step, lambda: (x0, y0), warmup, steps)))

        def overlapped():
            it = iter(ahead)
            return step_figures(_timed(step, lambda: next(it), warmup, steps))

        _part(res, "step_overlapped", overlapped)
        _part(res, "step_alone_again", lambda: step_figures(_timed(step, lambda: (x0, y0), warmup, steps)))

        def decode_then_step():
            payloads = d.as_dataset(**{k: v for k, v in kw.items() if k != "normalize"}, device="model")
            layer = bzna_tf.layers.DecodeWarp(h, w, mean=mean, std=std)
            it = iter(payloads)
            return step_figures(_timed(make_step(model, decode=layer), lambda: next(it), warmup, steps))

        _part(res, "step_decode_then_step", decode_then_step)
    return res


def check_overlap() -> dict:
    """overlap_check on the kit's benchmark pictures (their thumbnails, the kit's 224 x 224 and
    ImageNet's mean and std), at OVERLAP's sizes."""
    import numpy as np

    meta = dict(np.load(CARRY / "bench" / "bench_meta.npz"))
    return overlap_check(
        CARRY / "bench" / "bench.bzna",
        track="bzna_thumb",
        shape=meta["out_shape"],
        mean=meta["mean"],
        std=meta["std"],
        **OVERLAP,
    )


CHECKS = {
    "environment": check_environment,
    "core_bench": check_core_bench,
    "tf_bench": check_tf_bench,
    "fit": check_fit,
    "stubbed": check_stubbed,
    "overlap": check_overlap,
}


def stage(name: str, result: str) -> int:
    import traceback

    try:
        value = CHECKS[name]()
    except Exception as e:  # the error is the stage's result
        value = {
            "error": f"{type(e).__name__}: {str(e)[:3000]}",
            "traceback": traceback.format_exc().strip().splitlines()[-12:],
        }
    _write_json(Path(result), _jsonable(value))
    return 0


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _jsonable(value.tolist())
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["receive", "install", "run", "final", "stage"])
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "stage":
        return stage(*args.args)
    if args.command == "receive":
        return receive()
    if args.command == "install":
        return install()
    if args.command == "run":
        return run_checks()
    for name, step in (("receive", receive), ("install", install)):
        try:
            code = step()
        except SystemExit as e:  # _plan's STOP: printed as Python would have
            print(e.code, file=sys.stderr, flush=True)
            code = 2
            _stopped.append(str(e.code).removeprefix("tf_carry: STOP: "))
        except Exception as e:  # recorded, then raised: the traceback is in the log
            write_failure(name, f"{type(e).__name__}: {e}")
            raise
        if code:
            write_failure(name, _stopped[-1] if _stopped else f"exited with {code}")
            return code
    return run_checks()


def write_failure(step: str, error: str) -> Path:
    """final's record when receiving or installing failed: what a run of the checks would have named
    (the machine, the date, the commit), the step and its error. No check ran."""
    info = _read_json(STATE / "machine.json", {}) or machine()
    plan = _read_json(CARRY / "plan.json", {})
    record = {
        **_record_head(info, plan),
        "tensorflow": plan.get("tensorflow"),
        "passed": False,
        "failed_step": step,
        "error": error,
        "calls_log": _read_json(STATE / "calls.json", []),
        "seconds": round(time.perf_counter() - START, 1),
    }
    path = OUT / f"{record['date']}-{_slug(record['device'])}-tensorflow-gpu.json"
    _write_json(path, record)
    print(f"tf_carry: {step} failed: the record is {path}", file=sys.stderr)
    return path


if __name__ == "__main__":
    sys.exit(main())
