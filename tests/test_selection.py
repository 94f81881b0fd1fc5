"""Which tests a run selects (tests/conftest.py): the slow end-to-end tests are left out of a run of the
test folder and run with ``-m slow`` or when their file is named; under pytest-xdist without ``--dist``,
the tests of a module with costly fixtures (the GPU kit's) share one worker, the others are spread.
The tests of test_gpu.py and those using a fixture that compiles with nvcc get the gpu_build marker
(.ci/gpu-build runs those). Checked on a copy of the conftest with tests of its own."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

TESTS = """
import pytest

@pytest.mark.slow
def test_long():
    pass

def test_short():
    pass
"""

SIX = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_six(i):
    pass
"""


@pytest.fixture
def suite(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(HERE / "conftest.py", tests)
    (tests / "test_some.py").write_text(TESTS)
    return tmp_path


def _pytest(cwd, *args):
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(cwd), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize(
    ("args", "selected", "deselected"),
    [
        (["tests"], ["test_short"], 1),  # the folder: the slow test is left out
        ([], ["test_short"], 1),  # the same folder, by default (testpaths or the working folder)
        (["tests/test_some.py"], ["test_long", "test_short"], 0),  # a named file runs them all
        (["tests/test_some.py::test_long"], ["test_long"], 0),
        (["-m", "slow", "tests"], ["test_long"], 1),  # .ci/slow
        (["-m", "not slow", "tests"], ["test_short"], 1),
    ],
)
def test_slow_tests_are_left_out_of_a_run_of_the_folder(suite, args, selected, deselected):
    out = _pytest(suite, "--collect-only", "-q", *args)
    assert sorted(re.findall(r"::(test_\w+)", out)) == selected, out
    assert (f"({deselected} deselected)" in out) == bool(deselected), out
    said = "The slow end-to-end tests were left out: `python -m pytest -n auto -m slow` runs them"
    assert (said in out) == (args in ([], ["tests"])), out


def _workers(out, module):
    return set(re.findall(rf"\[(gw\d+)\] (?:\[ *\d+%\] )?PASSED tests/{re.escape(module)}::", out))


@pytest.mark.slow  # three pytest-xdist runs of two worker processes each
def test_the_gpu_kits_tests_share_one_worker_and_the_others_are_spread(suite):
    pytest.importorskip("xdist")
    for module in ("test_gpu_kit.py", "test_other.py"):
        (suite / "tests" / module).write_text(SIX)
    out = _pytest(suite, "-n", "2", "-v", "tests/test_gpu_kit.py", "tests/test_other.py")
    assert len(_workers(out, "test_gpu_kit.py")) == 1, out
    out = _pytest(suite, "-n", "2", "-v", "tests/test_other.py")  # alone: the first tests go to both
    assert len(_workers(out, "test_other.py")) == 2, out
    out = _pytest(suite, "-n", "2", "-v", "--dist", "load", "tests/test_gpu_kit.py")  # --dist is obeyed
    assert len(_workers(out, "test_gpu_kit.py")) == 2, out


KIT = """
import pytest

@pytest.fixture(scope="module")
def ran_kit():
    return "built"

@pytest.fixture(scope="module")
def core(ran_kit):
    return ran_kit

def test_uses_the_core(core):
    pass

def test_runs_the_kit(ran_kit):
    pass

def test_reads_the_kit():
    pass
"""


@pytest.mark.parametrize(
    ("args", "selected"),
    [
        # .ci/gpu-build: test_gpu.py whole, and the tests using a fixture that compiles with nvcc
        (
            ["-m", "gpu_build", "tests"],
            ["test_long", "test_runs_the_kit", "test_short", "test_uses_the_core"],
        ),
        (["-m", "gpu_build", "tests/test_kit.py"], ["test_runs_the_kit", "test_uses_the_core"]),
        (["-m", "not gpu_build", "tests"], ["test_reads_the_kit"]),
    ],
)
def test_the_gpu_build_leg_selects_what_needs_nvcc(suite, args, selected):
    (suite / "tests" / "test_some.py").rename(suite / "tests" / "test_gpu.py")
    (suite / "tests" / "test_kit.py").write_text(KIT)
    out = _pytest(suite, "--collect-only", "-q", *args)
    assert sorted(re.findall(r"::(test_\w+)", out)) == selected, out
