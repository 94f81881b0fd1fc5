"""A quiet, honest start: one line when the native ops compile, then their progress (nothing when
cached), with how long it should take here; no GPU query without an NVIDIA driver.

The compiler is replaced by a stand-in that writes an empty library, so these
tests take milliseconds; tests/test_build.py compiles for real.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tensorflow as tf

from bzna_tf.ops import _build, _load

LINE = re.compile(
    r"compiling bzna_tf's native ops for TensorFlow (\S+), once: (\d+) files(?: as (\d+) compiler runs)?, "
    r"(\d+) at a time, (.+) on this machine\n"
)


@pytest.fixture
def idle(monkeypatch):
    """A machine with 2 cores and no other jobs (load average 0.5)."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


@pytest.fixture
def fake_compile(monkeypatch, tmp_path):
    """build() into an empty cache, its compiler a stand-in that records its calls and writes the library."""
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def compile_fn(b, verbose, jobs):
        calls.append(b)
        (b.directory / "build.json").write_text(json.dumps({"tensorflow": b.tf_version}))
        b.library.write_bytes(b"")

    monkeypatch.setattr(_build, "_compile", compile_fn)
    return calls


def test_one_line_when_the_ops_compile_and_none_when_cached(fake_compile, idle, capsys):
    b = _build.plan()
    rounds = _build._rounds(b, 2)
    path = _build.build()
    err = capsys.readouterr().err
    m = LINE.fullmatch(err)
    assert m, err
    # An empty cache: the range measured on 2 cores, per round of parallel compiles.
    span = _build._span(*(s * rounds for s in _build.SECONDS_PER_ROUND_RANGE["ops"]))
    runs = len(_build._runs(b, 2))  # 2 groups of kernels/ and ops/ files, then lib/'s files one by one
    assert (m[1], int(m[2]), int(m[3]), int(m[4]), m[5]) == (tf.__version__, len(b.units), runs, 2, span)
    assert _build.build() == path and len(fake_compile) == 1
    assert capsys.readouterr().err == ""  # cached: silent
    facts = json.loads((path.parent / "build.json").read_text())
    assert facts["tensorflow"] == tf.__version__  # what the compile wrote is kept
    assert facts["build_rounds"] == rounds and facts["build_seconds"] >= 0


def test_the_compile_prints_its_progress_run_by_run(monkeypatch, tmp_path, idle, capsys):
    monkeypatch.setenv("BZNA_TF_CACHE_DIR", str(tmp_path / "cache"))
    sources = []

    def compiler(cmd, verbose):  # a stand-in for g++: writes the file that -o names
        if "-c" in cmd:
            source = Path(cmd[cmd.index("-c") + 1])
            sources.append(source.read_text() if source.name.startswith("group") else str(source))
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"")

    monkeypatch.setattr(_build, "_run", compiler)
    b = _build.plan()
    _build.build()
    first, *lines = capsys.readouterr().err.splitlines()
    assert LINE.fullmatch(first + "\n"), first
    n = len(_build._runs(b, 2))
    steps = [re.fullmatch(r"  (\d+)/(\d+) compiled \((.+)\), \d+ s", line) for line in lines[:-1]]
    assert all(steps) and len(steps) == n == len(sources), lines
    assert [(int(m[1]), int(m[2])) for m in steps] == [(k, n) for k in range(1, n + 1)]
    root = _build.source_dir()
    named = [name for m in steps for name in m[3].split(", ")]
    assert sorted(named) == sorted(str(u.relative_to(root)) for u in b.units)  # each file once
    # A group is one translation unit that includes its files; every file is compiled once.
    included = [
        line.split('"')[1] for text in sources for line in text.splitlines() if line.startswith("#include")
    ]
    assert sorted(included + [s for s in sources if s.endswith(".cc")]) == sorted(str(u) for u in b.units)
    assert re.fullmatch(r"  libbzna_tf_ops\.so linked, \d+ s in all", lines[-1]), lines[-1]


def test_a_build_runs_as_many_compiles_as_the_cores_the_process_may_use(fake_compile, monkeypatch, capsys):
    # A Slurm job or a container given 2 cores of a 64-core machine: 2 compiles at a time (as groups),
    # not 13 files at once on 2 cores (each g++ of a kernel takes ~0.9 GB).
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5}, raising=False)
    assert _build._usable_cores() == 2
    _build.build()
    m = LINE.fullmatch(capsys.readouterr().err)
    assert m and int(m[4]) == 2 and int(m[3]) == len(_build._runs(_build.plan(), 2)), m
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # not Linux: all the machine's cores
    assert _build._usable_cores() == 64


def test_the_kernels_and_ops_compile_in_as_many_groups_as_jobs():
    b = _build.plan()
    root = _build.source_dir()
    grouped = {u for u in b.units if u.relative_to(root).parts[0] in ("kernels", "ops")}
    alone = [(u,) for u in b.units if u not in grouped]
    assert len(grouped) >= 4 and alone
    for jobs in (1, 2, 3):
        runs = _build._runs(b, jobs)
        groups = runs[:jobs]
        assert runs[jobs:] == alone  # lib/ (no TensorFlow headers): file by file
        assert sorted(u for g in groups for u in g) == sorted(grouped)
        sizes = [sum(u.stat().st_size for u in g) for g in groups]
        largest = max(u.stat().st_size for u in grouped)
        assert max(sizes) - min(sizes) <= largest  # balanced by size
    assert _build._runs(b, 64) == [(u,) for u in sorted(grouped)] + alone  # enough cores: file by file
    assert _build._rounds(b, 2) == 3 and _build._rounds(b, 64) == 1


def test_each_grouped_file_keeps_its_names_in_a_namespace_of_its_own():
    # Files compiled as one translation unit share their namespaces: an anonymous namespace directly in
    # bzna_tf, or in a namespace another file's anonymous one is in, would let one file's helper (a
    # ParallelFor, a Layout) take part in another's name lookup.
    root = _build.source_dir()
    owners = {}  # the namespace holding a file's anonymous namespace -> that file
    for folder in _build.GROUPED_FOLDERS:
        for path in sorted((root / folder).glob("*.cc")):
            opened = []
            for line in path.read_text().splitlines():
                m = re.match(r"namespace (\w*) ?\{", line)
                if m:
                    opened.append(m[1])
                    if not m[1]:
                        outer = "::".join(opened[:-1])
                        assert outer not in ("", "bzna_tf"), (
                            f"{path.name}: {outer or '(global)'}::{{anonymous}}"
                        )
                        assert owners.setdefault(outer, path.name) == path.name, (
                            outer,
                            owners[outer],
                            path.name,
                        )
                elif re.match(r"\}\s*// namespace", line):
                    opened.pop()
            assert opened == [], (path.name, opened)
    assert len(owners) >= 6


def test_on_a_terminal_the_progress_is_one_line_rewritten():
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    progress = _build._Progress(2, out)
    progress.compiled("a.cc")
    progress.compiled("b.cc")
    progress.linked("lib.so")
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") == 3
    assert "\r  2/2 compiled (b.cc), 0 s\x1b[K\r  lib.so linked, 0 s in all\x1b[K\n" in text


def _plan(root: Path, name: str, units: int) -> _build.Build:
    return _build.Build(
        root / name, "g++", tuple(Path(f"u{k}.cc") for k in range(units)), (), (), "2.21.0", "k"
    )


def _record(root: Path, name: str, seconds, rounds, age: float) -> None:
    (root / name).mkdir()
    info = root / name / "build.json"
    info.write_text(json.dumps({} if seconds is None else {"build_seconds": seconds, "build_rounds": rounds}))
    os.utime(info, (time.time() - age, time.time() - age))


def test_the_estimate_is_the_range_of_the_recent_builds_here(tmp_path, idle):
    b = _plan(tmp_path, "ops-tf2.21.0-new", units=9)
    low, high = _build.SECONDS_PER_ROUND_RANGE["ops"]
    assert _build.estimate_range(b, 2) == (5 * low, 5 * high)  # nothing built yet: the default
    assert _build.estimate_range(b, 16) == (low, high)  # one round
    _record(tmp_path, "ops-tf2.21.0-a", 10.0, 5, age=100)  # 2 s per round
    assert _build.estimate_range(b, 2) == (10.0, 5 * high)  # one build: up to the default's slowest
    for k, per_round in enumerate([6.0, 4.0, 9.0, 5.0, 30.0]):  # newest first: the 30 is the oldest
        _record(tmp_path, f"ops-tf2.21.0-{k}", per_round * 3, 3, age=10 + k)
    _record(tmp_path, "gpu-tf2.21.0-last", 100.0, 1, age=0)  # another kind: ignored
    _record(tmp_path, "ops-tf2.21.0-broken", None, None, age=0)  # no time recorded: ignored
    assert _build.estimate_range(b, 2) == (20.0, 150.0)  # the newest 5: 4 to 30 s per round, 5 rounds
    assert _build.estimate_range(_plan(tmp_path, "gpu-tf2.21.0-new", units=2), 2) == (
        100.0,
        max(100.0, _build.SECONDS_PER_ROUND_RANGE["gpu"][1]),
    )


def test_a_busy_machine_gets_a_longer_estimate_and_is_told_why(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 6.0, 5.0))
    b = _plan(tmp_path, "ops-tf2.21.0-new", units=9)
    low, high = _build.SECONDS_PER_ROUND_RANGE["ops"]
    assert _build.estimate_range(b, 2) == (5 * low, 5 * high * 4)  # a quarter of the cores
    line = _build._announce(b, 2, "native ops")
    assert line == (
        "compiling bzna_tf's native ops for TensorFlow 2.21.0, once: 9 files, 2 at a time, "
        f"{_build._span(5 * low, 20 * high)} on this machine; other jobs are using the cores "
        "(load average 8.0 on 2)"
    )


def test_durations_are_said_to_the_precision_an_estimate_has():
    assert [_build._duration(s) for s in (0.2, 7.4, 31, 33, 99, 100, 320, 3600)] == [
        "1 s",
        "7 s",
        "30 s",
        "35 s",
        "100 s",
        "1.5 min",
        "5.5 min",
        "60 min",
    ]
    assert _build._span(17.5, 80) == "20 to 80 s"
    assert _build._span(17.5, 320) == "20 s to 5.5 min"
    assert _build._span(4.6, 5.4) == "about 5 s"


def test_the_gpu_build_says_so_too(monkeypatch, tmp_path, capsys, idle):
    b = _build.GpuBuild(
        tmp_path / "gpu-tf2.21.0-k", "g++", (Path("tf_warp_kernels.cc"),), (), (), "2.21.0", "k"
    )
    monkeypatch.setattr(_build, "plan_gpu", lambda: b)
    monkeypatch.setattr(_build, "_compile_gpu", lambda b, verbose, jobs: b.library.write_bytes(b""))
    _build.build_gpu()
    span = _build._span(*_build.SECONDS_PER_ROUND_RANGE["gpu"])
    assert capsys.readouterr().err == (
        f"compiling bzna_tf's GPU kernels for TensorFlow 2.21.0, once: {span} on this machine\n"
    )
    _build.build_gpu()
    assert capsys.readouterr().err == ""


def test_waiting_for_another_compile_says_so_and_does_not_compile_again(fake_compile, capsys):
    import fcntl

    b = _build.plan()
    b.directory.mkdir(parents=True)
    with open(b.directory / ".lock", "w") as other:  # another process compiling
        fcntl.flock(other, fcntl.LOCK_EX)
        done = []
        waiter = threading.Thread(target=lambda: done.append(_build.build()), daemon=True)
        waiter.start()
        err, deadline = "", time.monotonic() + 60  # a bound for a loaded machine, not a wait
        while not err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
        assert err == (
            f"waiting for another process compiling bzna_tf's native ops for TensorFlow {tf.__version__} "
            f"(in {b.directory})\n"
        )
        b.library.write_bytes(b"")  # the other process finishes
    waiter.join(60)
    assert done == [b.library] and fake_compile == []
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------------ GPU probe


@pytest.fixture
def tensorflow_must_not_be_asked(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("bzna_tf asked TensorFlow for its GPUs")

    monkeypatch.setattr(tf.config, "list_physical_devices", refuse)


def test_no_gpu_query_without_a_driver(monkeypatch, tensorflow_must_not_be_asked):
    monkeypatch.setattr(_load, "nvidia_driver_present", lambda root="/": False)
    monkeypatch.delenv("BZNA_TF_GPU", raising=False)
    assert _load._gpu_wanted() is False
    for on in ("1", "true", "yes", "ON"):  # the override still forces the GPU kernels on
        monkeypatch.setenv("BZNA_TF_GPU", on)
        assert _load._gpu_wanted() is True
    for off in ("0", "false", "no", "off"):
        monkeypatch.setenv("BZNA_TF_GPU", off)
        assert _load._gpu_wanted() is False


def test_with_a_driver_tensorflow_decides(monkeypatch):
    monkeypatch.setattr(_load, "nvidia_driver_present", lambda root="/": True)
    monkeypatch.delenv("BZNA_TF_GPU", raising=False)
    for devices, wanted in (([], False), (["/physical_device:GPU:0"], True)):
        monkeypatch.setattr(
            tf.config, "list_physical_devices", lambda kind, d=devices: d if kind == "GPU" else []
        )
        assert _load._gpu_wanted() is wanted
    monkeypatch.setenv("BZNA_TF_GPU", "0")
    assert _load._gpu_wanted() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the driver's files are Linux's")
def test_the_driver_is_found_by_its_files(tmp_path):
    root = str(tmp_path)
    assert not _load.nvidia_driver_present(root)
    for made in ("dev/nvidia3", "dev/nvidiactl", "proc/driver/nvidia", "dev/dxg", "dev/nvhost-ctrl-gpu"):
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).touch()
        assert _load.nvidia_driver_present(root), made
        (tmp_path / made).unlink()
    (tmp_path / "dev" / "nvidia-uvm").touch()  # the unified-memory module alone is not a GPU
    assert not _load.nvidia_driver_present(root)


@pytest.mark.skipif(_load.nvidia_driver_present(), reason="this machine has an NVIDIA driver")
def test_the_probe_is_not_what_prints_cuinit_errors():
    """On a machine without a driver, TensorFlow logs "failed call to cuInit" at its first op; not at ours."""
    code = (
        "import sys, tensorflow as tf\n"
        "from bzna_tf.ops import _load\n"
        "assert _load._gpu_wanted() is False\n"
        "print('--- probed', file=sys.stderr, flush=True)\n"
        "tf.constant(1)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "BZNA_TF_GPU"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    before, _, _ = r.stderr.partition("--- probed")
    assert "cuInit" not in before, before
