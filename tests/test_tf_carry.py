"""TensorFlow carried to a GPU machine (tools/tf_carry): parts, calls, the machine's receive and install.

The builder's pieces run here on small files: parts cut and joined byte for byte, calls packed within
64 MiB with the checkout, the stubs' sonames and their missing functions. The device's script runs
here on a carry made of a tiny package: parts checked as they arrive, a corrupt part named, the
archive unpacked into a fresh venv that imports it. The real carry (573 MB of wheels) is checked only
where it was built (``.tf_carry/``): nothing here downloads it.
"""

import ctypes
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "tf_carry"
sys.path.insert(0, str(TOOL))
import carry_builder as cb  # noqa: E402  (tools/tf_carry is no package: its folder goes on the path)
import device_run  # noqa: E402

MiB = cb.MiB


def _random_file(path: Path, size: int, seed: int = 0) -> bytes:
    data = hashlib.shake_256(str(seed).encode()).digest(size)
    path.write_bytes(data)
    return data


def test_parts_join_back_byte_for_byte(tmp_path):
    data = _random_file(tmp_path / "a.bin", 3 * MiB + 12345)
    parts = cb.split_file(tmp_path / "a.bin", [MiB + 7, MiB, MiB, MiB], tmp_path / "parts", "a.bin")
    assert [p["name"] for p in parts] == ["a.bin.01", "a.bin.02", "a.bin.03", "a.bin.04"]
    assert [p["bytes"] for p in parts] == [MiB + 7, MiB, MiB, 12338]
    for p in parts:
        assert hashlib.sha256((tmp_path / "parts" / p["name"]).read_bytes()).hexdigest() == p["sha256"]
    digest = cb.join_parts([tmp_path / "parts" / p["name"] for p in parts], tmp_path / "b.bin")
    assert (tmp_path / "b.bin").read_bytes() == data
    assert digest == hashlib.sha256(data).hexdigest()


def test_parts_must_cover_the_file(tmp_path):
    _random_file(tmp_path / "a.bin", 1000)
    with pytest.raises(cb.CarryError, match="do not cover"):
        cb.split_file(tmp_path / "a.bin", [400, 500], tmp_path / "parts", "a")
    with pytest.raises(cb.CarryError, match="do not cover"):
        cb.split_file(tmp_path / "a.bin", [0, 1000], tmp_path / "parts", "a")


@pytest.mark.parametrize("archive_mib", [1, 30, 59, 405, 1300])
def test_calls_fit_the_limit_beside_the_checkout(archive_mib):
    checkout = cb.checkout_bytes()
    budget = cb.CALL_LIMIT - checkout - cb.CALL_MARGIN
    first = [("plan.json", 64 * 1024), ("base", 7 * MiB), ("bench", 17 * MiB)]
    archive = archive_mib * MiB + 4321
    sizes, calls = cb.pack_calls(first, archive, budget)
    assert sum(sizes) == archive and all(0 < s <= cb.PART_LIMIT for s in sizes)
    assert calls[0][:3] == first
    carried = [p for call in calls for p, _ in call if p.startswith("parts/")]
    assert carried == [f"parts/site.tar.xz.{k:02d}" for k in range(1, len(sizes) + 1)]
    for call in calls:
        assert checkout + sum(b for _, b in call) <= cb.CALL_LIMIT - cb.CALL_MARGIN, call
    # No call could be dropped: every later call but the last is full.
    assert all(sum(b for _, b in call) == min(cb.PART_LIMIT, budget) for call in calls[1:-1])


def test_a_first_call_over_the_budget_is_refused():
    with pytest.raises(cb.CarryError, match="--bench-images"):
        cb.pack_calls([("bench", 70 * MiB)], 10 * MiB, 60 * MiB)


def test_the_checkout_leaves_room_for_a_part():
    """What a call sends of the checkout (git's tracked and untracked, not ignored, files) leaves room for
    a part of at least 56 MiB (pack_calls cuts the parts to the room a call has beside the checkout;
    .tf_carry and the venvs are ignored)."""
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    files = [ROOT / n for n in tracked.decode().split("\0") if n and (ROOT / n).exists()]
    size = cb.checkout_bytes()
    assert size >= sum(p.lstat().st_size for p in files)
    assert size + 56 * cb.MiB + cb.CALL_MARGIN <= cb.CALL_LIMIT, size
    assert cb._ignored(ROOT / ".tf_carry") and cb._ignored(ROOT / ".tf_carry.partial-x")


def test_stubs_have_the_sonames_and_none_of_the_functions(tmp_path):
    made = cb.compile_stubs(tmp_path)
    assert sorted(p.name for p in made) == sorted(cb.STUBS)
    # TensorFlow 2.21's sonames (CUDA 12, cuDNN 9), and the functions it looks up are absent.
    assert set(cb.STUBS) == {
        "libcublas.so.12",
        "libcublasLt.so.12",
        "libcufft.so.11",
        "libcusolver.so.11",
        "libcusparse.so.12",
        "libcudnn.so.9",
    }
    functions = {
        "libcublas.so.12": "cublasCreate_v2",
        "libcudnn.so.9": "cudnnCreate",
        "libcufft.so.11": "cufftPlan2d",
    }
    for lib in made:
        soname = subprocess.run(
            ["readelf", "-d", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        assert f"Library soname: [{lib.name}]" in soname
        handle = ctypes.CDLL(str(lib))
        marker = (ctypes.c_char * 80).in_dll(handle, "bzna_tf_carry_stub").value
        assert marker == f"{lib.name}: a stub without functions (bzna_tf tools/tf_carry)".encode()
        if lib.name in functions:
            assert not hasattr(handle, functions[lib.name])


def test_device_scripts_are_valid():
    r = subprocess.run(["bash", "-n", str(TOOL / "device.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    compile((TOOL / "device_run.py").read_text(), "device_run.py", "exec")
    # The device's script needs the standard library only until the checks (the venv's Python).
    top = [
        line
        for line in (TOOL / "device_run.py").read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert not [
        line for line in top if any(w in line for w in ("numpy", "tensorflow", "keras", "bzna_tf"))
    ], top


# ------------------------------------------------------------------------------------- the device's side


@pytest.fixture()
def small_carry(tmp_path):
    """A carry holding a tiny package instead of TensorFlow: plan.json, base/, bench/, three parts."""
    carry = tmp_path / ".tf_carry"
    tree = tmp_path / "tree" / "tf_carry_probe"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("VALUE = 42\n" + "# padding\n" * 20000)
    archive = tmp_path / "site.tar.xz"
    import lzma

    with lzma.open(archive, "wb") as out:
        cb._write_tar(tmp_path / "tree", out)
    size = archive.stat().st_size
    third = size // 3 + 1
    parts = cb.split_file(archive, [third, third, third], carry / "parts", "site.tar.xz")
    for folder in ("base", "bench"):
        (carry / folder).mkdir()
    plan = {
        "python": ".".join(map(str, sys.version_info[:2])),
        "tensorflow": "0",
        "parts": parts,
        "archive": {"bytes": size, "sha256": hashlib.sha256(archive.read_bytes()).hexdigest()},
        "calls": [
            {"carry": ["plan.json", "base", "bench", "parts/site.tar.xz.01"], "command": "receive"},
            {"carry": ["parts/site.tar.xz.02"], "command": "receive"},
            {"carry": ["parts/site.tar.xz.03"], "command": "final"},
        ],
    }
    (carry / "plan.json").write_text(json.dumps(plan))
    return carry


def _device(carry, *args, **env):
    environment = dict(os.environ, TF_CARRY_DIR=str(carry), TF_CARRY_PYTHON=sys.executable, **env)
    return subprocess.run(
        ["bash", str(TOOL / "device.sh"), *args], capture_output=True, text=True, env=environment, timeout=120
    )


def test_receive_checks_each_part_and_names_the_next_call(small_carry):
    later = [small_carry / "parts" / f"site.tar.xz.0{k}" for k in (2, 3)]
    held = {p: p.read_bytes() for p in later}
    for p in later:
        p.unlink()
    r = _device(small_carry, "receive")
    assert r.returncode == 0, r.stderr
    assert "call 1: 1 part(s) arrived" in r.stdout and "held 1/3 parts" in r.stdout
    assert "next: call 2: receive" in r.stdout and "site.tar.xz.02" in r.stdout
    assert (
        json.loads((small_carry / "state" / "machine.json").read_text())["python"] == sys.version.split()[0]
    )
    later[0].write_bytes(held[later[0]])
    r = _device(small_carry, "receive")
    assert "call 2: 1 part(s) arrived" in r.stdout and "s since the previous call ended" in r.stdout
    later[1].write_bytes(held[later[1]][:-1] + b"x")  # damaged on the way
    r = _device(small_carry, "receive")
    assert "missing site.tar.xz.03 (corrupt: carry it again)" in r.stdout
    r = _device(small_carry, "install", TF_CARRY_VENV=str(small_carry.parent / "venv"))
    assert r.returncode == 3 and "parts missing: site.tar.xz.03 (corrupt" in r.stderr
    calls = json.loads((small_carry / "state" / "calls.json").read_text())
    assert [c["verified"] for c in calls] == [["site.tar.xz.01"], ["site.tar.xz.02"], []]


def test_install_unpacks_the_joined_parts_into_a_fresh_venv(small_carry):
    venv = small_carry.parent / "venv"
    r = _device(small_carry, "receive")
    assert "every part is here" in r.stdout, r.stdout
    r = _device(small_carry, "install", TF_CARRY_VENV=str(venv))
    assert r.returncode == 0, r.stderr
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import tf_carry_probe, sys; print(tf_carry_probe.VALUE, sys.prefix)",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.stdout.split() == ["42", str(venv)], probe.stderr
    info = json.loads((small_carry / "state" / "installed.json").read_text())
    assert (
        info["files"] == 1
        and info["sha256"] == json.loads((small_carry / "plan.json").read_text())["archive"]["sha256"]
    )


def test_a_machine_with_another_python_stops_at_the_first_call(small_carry):
    plan = json.loads((small_carry / "plan.json").read_text())
    plan["python"] = "2.7"
    (small_carry / "plan.json").write_text(json.dumps(plan))
    r = _device(small_carry, "receive")
    assert r.returncode == 2 and "STOP" in r.stderr and "the carry is for CPython 2.7" in r.stderr


def test_test_counts_come_from_junit(tmp_path):
    (tmp_path / "t.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.test_gpu" name="a"/>'
        '<testcase classname="tests.test_gpu" name="b"><failure message="x"/></testcase>'
        '<testcase classname="tests.test_gpu" name="c"><skipped message="no GPU"/></testcase>'
        '<testcase classname="tests.test_gpu" name="d"><error message="e"/></testcase>'
        "</testsuite></testsuites>"
    )
    counts = device_run._junit(tmp_path / "t.xml")
    assert {k: counts[k] for k in ("passed", "failed", "skipped", "errors")} == {
        "passed": 1,
        "failed": 1,
        "skipped": 1,
        "errors": 1,
    }
    assert counts["failed_names"] == ["test_gpu::b", "test_gpu::d (error)"]
    assert counts["skipped_reasons"] == {"test_gpu::c": "no GPU"}
    assert device_run._slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"


def test_the_checks_need_the_gpu_path_and_the_rate():
    def results(skips, tf_rate):
        tests = {"ran": True, "passed": 20, "failed": 0, "errors": 0, "skipped_reasons": skips}
        r = {"environment": {"logical_gpus": ["/device:GPU:0"]}, "tests": tests, "fit": {"passed": True}}
        core = {"decode_warp": {"images_per_s": 9200.0}}  # the core's one run
        device_run.summarise(r, core, {"decode_warp": {"images_per_s": tf_rate}})
        return r

    good = results(
        {"test_gpu::test_nvdec_pictures_equal_ffmpeg_decodes": "PyNvVideoCodec unavailable"}, 8400.0
    )
    assert good["core_images_per_s"] == 9200.0 and good["tf_to_core"] == 0.913
    assert all(good["checks"].values()), good["checks"]
    slow = results({}, 8000.0)  # 0.87 of the core's rate
    assert not slow["checks"]["tf_rate_at_least_0.9_of_core"]
    skipped = results(
        {"test_gpu::test_model_fit_decodes_on_the_gpu": "no GPU visible to TensorFlow (...)"}, 9000.0
    )
    assert not skipped["checks"]["gpu_tests_ran"] and skipped["checks"]["tests_passed"]
    none = {"environment": {}, "tests": {"ran": False}, "fit": {}}
    device_run.summarise(none, {"available": False}, {"available": False})
    assert none["tf_to_core"] is None and not any(none["checks"].values())


def _full_plan(carry):
    """small_carry's plan.json with what run_checks records of a real one."""
    plan = json.loads((carry / "plan.json").read_text())
    plan.update(commit="abc", dirty=False, cudart={}, stubs={}, removed={}, excluded={})
    (carry / "plan.json").write_text(json.dumps(plan))


def test_the_checks_run_the_tests_after_the_environment_and_the_core_once(small_carry, tmp_path, monkeypatch):
    """The stages' order: the tests straight after the environment, before any benchmark; the core's
    benchmark once. The results JSON is written with each stage's result."""
    _full_plan(small_carry)
    monkeypatch.setattr(device_run, "CARRY", small_carry)
    monkeypatch.setattr(device_run, "STATE", small_carry / "state")
    monkeypatch.setattr(device_run, "OUT", tmp_path / "out")
    ran = []

    def stage(name, deadline, logfile):
        ran.append(name)
        return {"ran": True, "decode_warp": {"images_per_s": 100.0}} if "bench" in name else {"ran": True}

    def tests(deadline, logfile):
        ran.append("tests")
        return {"ran": True, "passed": 1, "failed": 0, "errors": 0, "skipped_reasons": {}}

    monkeypatch.setattr(device_run, "run_stage", stage)
    monkeypatch.setattr(device_run, "run_tests", tests)
    monkeypatch.setattr(device_run, "write_overlap", lambda stage, results: {"passed": False})
    device_run.run_checks()
    assert ran == ["environment", "tests", "core_bench", "fit", "overlap", "tf_bench", "stubbed"]
    (written,) = (tmp_path / "out").glob("*-tensorflow-gpu.json")
    results = json.loads(written.read_text())
    assert results["core_bench"]["ran"] and results["core_images_per_s"] == 100.0
    assert results["tf_to_core"] == 1.0 and results["commit"] == "abc"
    # Without head.json the record names the carry's commit, and says so; with it (--check wrote it, the
    # last call carried it), the checkout's, which ran: the carry's is its libraries'.
    assert results["carry_commit"] == "abc" and "no head.json came" in results["commit_note"]
    (small_carry / "head.json").write_text(json.dumps({"commit": "def", "dirty": True}))
    device_run.run_checks()
    results = json.loads(written.read_text())
    assert (results["commit"], results["commit_dirty"], results["carry_commit"]) == ("def", True, "abc")
    assert "commit_note" not in results


def test_the_deadline_comes_from_the_environment_and_skips_stages_cleanly(tmp_path):
    code = f"import sys; sys.path.insert(0, {str(TOOL)!r}); import device_run; print(device_run.DEADLINE_S)"
    for value, expected in (("123", "123.0"), ("", "540.0")):
        env = dict(os.environ, TF_CARRY_DEADLINE=value)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert r.stdout.strip() == expected, r.stderr
    # Past the deadline, a stage does not start: recorded as not run, with how much time was left.
    with open(tmp_path / "log", "a") as logfile:
        soon = device_run.time.perf_counter() + 5
        skipped = device_run.run_stage("fit", soon, logfile)
        assert skipped["ran"] is False and re.fullmatch(
            r"not run: [45] s left before the deadline", skipped["error"]
        )
        assert device_run.run_tests(soon, logfile)["ran"] is False
    # PLAN.txt's final command sets the deadline from its timeout (a deadline already set is kept).
    command = cb.final_command(560)
    assert command == "TF_CARRY_DEADLINE=${TF_CARRY_DEADLINE:-540} bash tools/tf_carry/device.sh final"
    probe = command.replace("bash tools/tf_carry/device.sh final", "printenv TF_CARRY_DEADLINE")
    env = {k: v for k, v in os.environ.items() if k != "TF_CARRY_DEADLINE"}
    assert subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env).stdout == "540\n"
    env["TF_CARRY_DEADLINE"] = "1500"
    assert subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env).stdout == "1500\n"
    plan = {
        "tensorflow": "2.21.0",
        "python": "3.12",
        "checkout_bytes": MiB,
        "calls": [
            {"carry": ["plan.json"], "bytes": MiB, "total_bytes": 2 * MiB, "command": "x", "timeout_s": 120},
            {
                "carry": ["parts/a"],
                "bytes": MiB,
                "total_bytes": 2 * MiB,
                "command": command,
                "timeout_s": 560,
            },
        ],
    }
    text = cb.plan_text(plan)
    assert f"  command: {command}" in text and "timeout_s=560" in text
    assert "Order: environment, tests, core_bench, fit, overlap, tf_bench, stubbed." in text


def test_the_tests_stage_logs_each_outcome_for_a_run_stopped_without_junit(tmp_path, monkeypatch):
    """pytest runs with -v -rA; when it writes no JUnit XML (stopped at the deadline), the outcomes it
    logged are the record."""
    seen = {}

    def fake_run(cmd, stdout, **kwargs):
        seen["cmd"] = cmd
        stdout.write(
            "tests/test_gpu.py::test_a PASSED [ 33%]\n"
            "tests/test_gpu.py::test_b[explicit] XFAIL (TensorFlow cannot save) [ 66%]\n"
            "tests/test_gpu_dataset.py::test_c FAILED [100%]\n"
        )
        stdout.flush()
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(device_run, "OUT", tmp_path)
    monkeypatch.setattr(device_run.subprocess, "run", fake_run)
    with open(tmp_path / "tf_gpu.log", "a") as logfile:
        logfile.write("earlier stage: tests/test_x.py::test_old PASSED\n")
        out = device_run.run_tests(device_run.time.perf_counter() + 600, logfile)
    assert "-v" in seen["cmd"] and "-rA" in seen["cmd"] and "-q" not in seen["cmd"]
    assert out["exit_code"] == "timeout" and "no junit XML" in out["error"]
    assert out["logged_outcomes"] == {
        "tests/test_gpu.py::test_a": "PASSED",
        "tests/test_gpu.py::test_b[explicit]": "XFAIL",
        "tests/test_gpu_dataset.py::test_c": "FAILED",
    }


def test_final_writes_a_record_when_install_or_receive_fails(small_carry, tmp_path):
    _full_plan(small_carry)
    (small_carry / "parts" / "site.tar.xz.03").unlink()
    out = tmp_path / "out"
    r = _device(small_carry, "final", OUT=str(out), TF_CARRY_VENV=str(tmp_path / "venv"))
    assert r.returncode == 3 and "parts missing: site.tar.xz.03" in r.stderr
    (written,) = out.glob("*-tensorflow-gpu.json")
    record = json.loads(written.read_text())
    assert record["passed"] is False and record["failed_step"] == "install"
    assert record["error"] == "parts missing: site.tar.xz.03 (see PLAN.txt)"
    assert record["commit"] == "abc" and record["device"] and record["date"] in written.name
    plan = json.loads((small_carry / "plan.json").read_text())
    plan["python"] = "2.7"
    (small_carry / "plan.json").write_text(json.dumps(plan))
    shutil.rmtree(small_carry / "state")
    written.unlink()
    r = _device(small_carry, "final", OUT=str(out), TF_CARRY_VENV=str(tmp_path / "venv"))
    assert r.returncode == 2
    record = json.loads(next(out.glob("*-tensorflow-gpu.json")).read_text())
    assert record["failed_step"] == "receive" and "the carry is for CPython 2.7" in record["error"]


def _git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_check_fails_when_the_library_sources_changed_since_the_carry(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    for folder in ("custom_ops", "bzna_tf/ops", "docs"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "a.txt").write_text("1")
    (repo / "bzna_tf" / "ops" / "_build.py").write_text("1")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "one")
    built = _git(repo, "rev-parse", "HEAD")
    assert cb.stale_libraries(built, repo) is None
    (repo / "docs" / "a.txt").write_text("2")  # elsewhere: still the carry's libraries
    (repo / "bzna_tf" / "ops" / "a.txt").write_text("2")  # the Python beside them travels on each call
    _git(repo, "commit", "-qam", "docs")
    assert cb.stale_libraries(built, repo) is None
    (repo / "custom_ops" / "new.cc").write_text("2")  # not committed, not even added: carried all the same
    assert "hold files the carry's commit" in cb.stale_libraries(built, repo)
    (repo / "custom_ops" / "new.cc").unlink()
    (repo / "bzna_tf" / "ops" / "_build.py").write_text("2")  # uncommitted
    assert "changed since the carry's commit" in cb.stale_libraries(built, repo)
    _git(repo, "commit", "-qam", "ops")
    assert "changed since the carry's commit" in cb.stale_libraries(built, repo)
    assert "cannot compare" in cb.stale_libraries("0" * 40, repo)
    assert "no commit" in cb.stale_libraries("unknown", repo)
    # --check: the problem, what to do, exit 1.
    carry = tmp_path / ".tf_carry"
    carry.mkdir()
    (carry / "PLAN.txt").write_text("the plan\n")
    (carry / "plan.json").write_text(json.dumps({"parts": [], "calls": [], "commit": built}))
    stale = cb.stale_libraries
    monkeypatch.setattr(cb, "stale_libraries", lambda commit: stale(commit, repo))
    assert cb.main(["--check", "--out", str(carry)]) == 1
    assert [p for p in cb.check_plan(carry, log=io.StringIO()) if "stale" in p] == [
        f"custom_ops and bzna_tf/ops/_build.py changed since the carry's commit {built[:12]}: its libraries "
        "are stale: rebuild the carry (python tools/tf_carry --force)"
    ]
    monkeypatch.setattr(cb, "stale_libraries", lambda commit: stale(_git(repo, "rev-parse", "HEAD"), repo))
    assert cb.main(["--check", "--out", str(carry)]) == 0
    assert not (carry / cb.HEAD_FILE).exists()  # no call carries it
    # A plan whose last call carries head.json: --check records the checkout's commit for the results.
    (carry / "plan.json").write_text(
        json.dumps({"parts": [], "calls": [{"carry": [cb.HEAD_FILE]}], "commit": built})
    )
    assert cb.main(["--check", "--out", str(carry)]) == 0
    assert json.loads((carry / cb.HEAD_FILE).read_text()) == cb._git_commit()
    # A check that fails removes it: the last call would carry an earlier check's commit.
    monkeypatch.setattr(cb, "stale_libraries", lambda commit: "stale")
    assert cb.main(["--check", "--out", str(carry)]) == 1
    assert not (carry / cb.HEAD_FILE).exists()


# ------------------------------------------------------------------------------------------ the real carry


CARRY = Path(os.environ.get("BZNA_TF_CARRY_DIR") or ROOT / ".tf_carry")


@pytest.mark.skipif(
    not (CARRY / "plan.json").is_file(), reason=f"no carry built at {CARRY} (python tools/tf_carry)"
)
def test_the_built_carry_fits_the_calls():
    plan = json.loads((CARRY / "plan.json").read_text())
    assert cb.check_plan(CARRY, log=io.StringIO()) == []
    assert all(p["bytes"] <= cb.PART_LIMIT for p in plan["parts"])
    assert sum(p["bytes"] for p in plan["parts"]) == plan["archive"]["bytes"]
    carried = [p for call in plan["calls"] for p in call["carry"]]
    assert sorted(carried) == sorted(
        ["plan.json", "base", "bench", *(f"parts/{p['name']}" for p in plan["parts"]), cb.HEAD_FILE]
    )
    assert cb.HEAD_FILE in plan["calls"][-1]["carry"]  # written by --check, just before the calls
    assert plan["calls"][-1]["command"].endswith("device.sh final")
    assert all(c["command"].endswith("device.sh receive") for c in plan["calls"][:-1])
    names = sorted(p.name for p in (CARRY / "base" / "cuda").iterdir())
    assert names == sorted(["STUBS.txt", "libcudart.so.12", *cb.STUBS])


# ------------------------------------------------------------------------ the overlap stage (issue 38 item 3)


def test_the_gpu_tests_collect_with_only_the_carried_packages():
    """The tests stage's files import with what the carry installs (TensorFlow, PyAV, tqdm, pytest): the
    test extra's other packages are made unimportable, as they are on the GPU machine."""
    absent = ("hypothesis", "PIL", "pyarrow", "datasets", "apache_beam", "tensorflow_io", "torch")
    code = (
        "import sys\n"
        f"for name in {absent!r}:\n"
        "    sys.modules[name] = None  # import raises ImportError\n"
        "import pytest\n"
        "sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
    )
    # No plugins from the entry points: Hypothesis's would import it.
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    r = subprocess.run(
        [sys.executable, "-c", code, *device_run.TESTS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ids = {line.strip() for line in r.stdout.splitlines() if "::" in line}
    assert {"tests/test_gpu.py", "tests/test_gpu_dataset.py"} <= {i.split("::")[0] for i in ids}, ids
    # pytest ignores a --deselect that names no test: each one left out must still exist.
    assert set(device_run.DESELECTED) <= ids, set(device_run.DESELECTED) - ids


@pytest.fixture(scope="module")
def small_bench(tmp_path_factory):
    """A benchmark folder as the carry's bench/: bench.bzna (6 pictures with thumbnails, 3 classes) and
    bench_meta.npz (out_shape, mean, std)."""
    import numpy as np

    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    carry = tmp_path_factory.mktemp("overlap") / ".tf_carry"
    (carry / "bench").mkdir(parents=True)
    with BznaWriter(carry / "bench" / "bench.bzna") as w:
        for i in range(6):
            pixels = np.broadcast_to(
                np.array([40 * i, 200 - 20 * i, 90], np.uint8), (24 + 2 * i, 30, 3)
            ).copy()
            pixels[::3, ::2] = 255 - pixels[::3, ::2]
            inp, thumb = encode_image(pixels, preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 3, filename=f"p{i}.png")
    np.savez(
        carry / "bench" / "bench_meta.npz",
        out_shape=np.array([16, 16]),
        mean=np.array([0.485, 0.456, 0.406]),
        std=np.array([0.229, 0.224, 0.225]),
    )
    return carry


SMALL = {
    "batch": 4,
    "compare_batches": 2,
    "warmup": 1,
    "steps": 3,
    "target_ms": 1.0,
    "max_blocks": 2,
    "width": 4,
}


def test_the_overlap_stage_on_the_cpu_records_the_fallback(small_bench, monkeypatch, tmp_path):
    """Without a GPU, device="gpu" is the CPU path: the stage says so (elements on the CPU, not passed,
    the fallback's reason), compares the values all the same, and times the three steps."""
    pytest.importorskip("tensorflow")
    monkeypatch.setattr(device_run, "CARRY", small_bench)
    monkeypatch.setattr(device_run, "OVERLAP", SMALL)
    assert device_run.stage("overlap", str(tmp_path / "overlap.json")) == 0
    res = json.loads((tmp_path / "overlap.json").read_text())
    assert "error" not in res, res
    ds = res["tensorflow_gpu_dataset"]
    assert ds["passed"] is False and ds["element_device"].endswith("device:CPU:0"), ds
    assert "TensorFlow sees no GPU" in ds["reason"] and "not a GPU" in ds["reason"], ds
    assert ds["batches_compared"] == 2 and ds["max_abs_diff"] == 0.0 and ds["labels_equal"], ds
    assert res["data"]["batch"] == 4 and res["data"]["shape"] == [16, 16] and res["data"]["samples"] == 6
    assert res["ops_needing_stubs"] == [] and res["model_blocks"] in (1, 2)
    for part in ("step_alone", "step_overlapped", "step_alone_again", "step_decode_then_step"):
        figures = res[part]
        assert figures["steps"] == 3 and 0 < figures["ms_min"] <= figures["ms_median"] <= figures["ms_max"], (
            part
        )
    record = device_run.overlap_record(res, {"date": "2026-01-02", "device": "cpu (a rehearsal)"})
    assert record["kind"] == "overlap" and record["passed"] is False
    assert record["tensorflow_gpu_dataset"]["element_device"] == ds["element_device"]
    assert set(record["reasons"]) == {"tensorflow_gpu_dataset"}, record["reasons"]
    alone = min(res["step_alone"]["ms_median"], res["step_alone_again"]["ms_median"])
    assert record["step_ms_alone"] == alone
    assert record["overlapped_over_alone"] == round(res["step_overlapped"]["ms_median"] / alone, 3)


def test_the_step_model_needs_no_stubbed_library_and_trains():
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    x = tf.constant(np.random.default_rng(0).normal(size=(8, 10, 12, 3)), tf.float32)
    y = tf.constant(np.arange(8) % 3, tf.int64)
    model = device_run.StandInNet(classes=3, blocks=2, width=4)
    step = device_run.make_step(model, lr=0.2)
    assert device_run.stubbed_ops(step, x, y) == []
    losses = [float(step(x, y)) for _ in range(30)]
    assert losses[-1] < 0.8 * losses[0], losses  # gradients reach the variables and the updates apply
    assert not np.array_equal(model.slots[0].numpy(), np.zeros((3, 4)))

    class WithMatMul(device_run.StandInNet):
        def logits(self, x):
            return super().logits(x) + tf.matmul(tf.reduce_mean(x, axis=[1, 2]), tf.ones((3, self.classes)))

    assert device_run.stubbed_ops(device_run.make_step(WithMatMul(3, 1, 4)), x, y) == ["MatMul"]


def _stage(alone, overlapped, again=None, then=30.0, dataset=True, stubs=()):
    def figures(ms):
        return {"ms_median": ms, "ms_min": ms, "ms_max": ms, "ms_mean": ms, "steps": 30}

    res = {
        "tensorflow_gpu_dataset": {"passed": dataset, "element_device": "/device:GPU:0", "reason": None},
        "step_alone": figures(alone),
        "step_overlapped": figures(overlapped),
        "step_decode_then_step": figures(then),
        "ops_needing_stubs": list(stubs),
    }
    if again is not None:
        res["step_alone_again"] = figures(again)
    return res


def test_the_overlap_record_ratio_goal_and_reasons(tmp_path, monkeypatch):
    run = {"date": "2026-01-02", "device": "NVIDIA H100 80GB HBM3", "driver": "570.1", "commit": "abc"}
    good = device_run.overlap_record(_stage(40.0, 42.0, again=41.0), run)
    assert good["step_ms_alone"] == 40.0 and good["overlapped_over_alone"] == 1.05 and good["goal_met"]
    assert good["passed"] and good["reasons"] == {} and good["decode_then_step_over_alone"] == 0.75
    assert good["device"] == run["device"] and good["driver"] == "570.1" and good["commit"] == "abc"
    slow = device_run.overlap_record(_stage(41.0, 42.0, again=40.0, then=60.0), run)  # the faster alone: 40
    assert slow["overlapped_over_alone"] == 1.05 and slow["passed"]
    assert not device_run.overlap_record(_stage(40.0, 42.1), run)["goal_met"]
    off_gpu = device_run.overlap_record(_stage(40.0, 40.0, dataset=False), run)
    assert not off_gpu["passed"] and off_gpu["goal_met"]
    assert not device_run.overlap_record(_stage(40.0, 40.0, stubs=["MatMul"]), run)["passed"]
    # A stage that did not run: a record all the same, each part with the reason.
    none = device_run.overlap_record({"ran": False, "error": "not run: 12 s left before the deadline"}, run)
    assert none["passed"] is False and none["step_ms_alone"] is None and none["overlapped_over_alone"] is None
    assert none["tensorflow_gpu_dataset"] == {
        "element_device": None,
        "reason": "not run: 12 s left before the deadline",
        "passed": False,
    }
    assert none["reasons"]["step_overlapped"] == "not run: 12 s left before the deadline"
    # A part that failed: its error is its reason.
    broken = _stage(40.0, 40.0)
    broken["step_overlapped"] = {"error": "ResourceExhaustedError: OOM"}
    assert device_run.overlap_record(broken, run)["reasons"] == {
        "step_overlapped": "ResourceExhaustedError: OOM"
    }
    monkeypatch.setattr(device_run, "OUT", tmp_path)
    kept = device_run.write_overlap(_stage(40.0, 41.0), {**run, "date": "2026-01-02"})
    assert kept["file"] == "2026-01-02-h100-overlap.json" and kept["passed"]
    assert json.loads((tmp_path / kept["file"]).read_text())["step_ms_overlapped"] == 41.0
