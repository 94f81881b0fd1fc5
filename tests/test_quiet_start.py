"""A quiet, honest start: one line when the native ops compile (none when cached); no GPU query
without an NVIDIA driver.

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

LINE = re.compile(r"compiling bzna_tf's native ops for TensorFlow (\S+), once: ~(\d+) s\n")


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


def test_one_line_when_the_ops_compile_and_none_when_cached(fake_compile, capsys):
    b = _build.plan()
    expected = _build._about(_build.estimate_seconds(b, os.cpu_count()))  # an empty cache: the default
    assert expected == _build._about(_build.SECONDS_PER_ROUND["ops"] * _build._rounds(b, os.cpu_count()))
    path = _build.build()
    err = capsys.readouterr().err
    m = LINE.fullmatch(err)
    assert m, err
    assert m[1] == tf.__version__ and f"~{m[2]} s" == expected
    assert _build.build() == path and len(fake_compile) == 1
    assert capsys.readouterr().err == ""  # cached: silent
    facts = json.loads((path.parent / "build.json").read_text())
    assert facts["tensorflow"] == tf.__version__  # what the compile wrote is kept
    assert facts["build_rounds"] == _build._rounds(b, os.cpu_count()) and facts["build_seconds"] >= 0


def _plan(root: Path, name: str, units: int) -> _build.Build:
    return _build.Build(
        root / name, "g++", tuple(Path(f"u{k}.cc") for k in range(units)), (), (), "2.21.0", "k"
    )


def test_the_estimate_comes_from_the_last_build_here(tmp_path):
    b = _plan(tmp_path, "ops-tf2.21.0-new", units=9)
    # Nothing built yet: the figure measured on 2 cores, per round of parallel compiles.
    assert _build.estimate_seconds(b, 2) == 5 * _build.SECONDS_PER_ROUND["ops"]
    assert _build.estimate_seconds(b, 16) == _build.SECONDS_PER_ROUND["ops"]
    for name, seconds, rounds, age in [
        ("ops-tf2.21.0-old", 500.0, 5, 100),  # older: ignored
        ("ops-tf2.21.0-last", 60.0, 3, 10),  # the newest build of ops: 20 s per round
        ("gpu-tf2.21.0-last", 1.0, 1, 0),  # another kind: ignored
        ("ops-tf2.21.0-broken", None, None, 0),  # no time recorded (an older bzna_tf): ignored
    ]:
        (tmp_path / name).mkdir()
        info = tmp_path / name / "build.json"
        info.write_text(
            json.dumps({} if seconds is None else {"build_seconds": seconds, "build_rounds": rounds})
        )
        os.utime(info, (time.time() - age, time.time() - age))
    assert _build.estimate_seconds(b, 2) == 100.0
    assert _build.estimate_seconds(_plan(tmp_path, "gpu-tf2.21.0-new", units=2), 2) == 1.0
    assert [_build._about(s) for s in (0.2, 7.4, 31, 33, 100.0)] == [
        "~1 s",
        "~7 s",
        "~30 s",
        "~35 s",
        "~100 s",
    ]


def test_the_gpu_build_says_so_too(monkeypatch, tmp_path, capsys):
    b = _build.GpuBuild(
        tmp_path / "gpu-tf2.21.0-k", "g++", (Path("tf_warp_kernels.cc"),), (), (), "2.21.0", "k"
    )
    monkeypatch.setattr(_build, "plan_gpu", lambda: b)
    monkeypatch.setattr(_build, "_compile_gpu", lambda b, verbose, jobs: b.library.write_bytes(b""))
    _build.build_gpu()
    assert capsys.readouterr().err == (
        "compiling bzna_tf's GPU kernels for TensorFlow 2.21.0, once: "
        f"~{round(_build.SECONDS_PER_ROUND['gpu'])} s\n"
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
