import json
import os
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Original:
    """A .bzna written by the original Benzina tools, with its manifest and the pictures it was made from.

    "free" is in the repository (tests/fixtures/benzina-original-free: freely licensed pictures), so every
    checkout has it. "imagenet" is shared/fixtures/benzina-original beside the checkout (ImageNet pictures,
    which cannot be in the repository): CI has it, a fresh clone does not. Both have the same layout: 12
    samples, targets for samples 0-8, separate thumbnails for samples 2, 9 and 10 (their READMEs).
    """

    def __init__(self, name, folder, filename):
        self.name, self.folder, self.path = name, folder, folder / filename
        self._manifest = None

    @property
    def manifest(self):
        if self._manifest is None:
            with open(self.folder / "manifest.json") as f:
                self._manifest = json.load(f)
        return self._manifest

    def photo(self, index):
        """The picture sample `index` was made from."""
        return self.folder / self.manifest["samples"][index]["source"]["file"]


ORIGINALS = {
    "free": Original(
        "free", ROOT / "tests" / "fixtures" / "benzina-original-free", "benzina_original_free.bzna"
    ),
    # shared/ beside the checkout, or $BZNA_TF_FIXTURES (as the GPU kit reads it; tools/tf_carry sets it on a
    # GPU machine, where only the checkout travels).
    "imagenet": Original(
        "imagenet",
        pathlib.Path(
            os.environ.get("BZNA_TF_FIXTURES") or ROOT.parent / "shared" / "fixtures" / "benzina-original"
        ),
        "benzina_original_mini.bzna",
    ),
}
FREE = ORIGINALS["free"]

# Where every fixture must be there (CI sets it: .ci/run), a test that would skip for want of one fails.
REQUIRE_FIXTURES = os.environ.get("BZNA_TF_REQUIRE_FIXTURES", "") not in ("", "0")


def missing_fixture(reason):
    """Skips the test for want of a fixture, or fails it under BZNA_TF_REQUIRE_FIXTURES=1."""
    if REQUIRE_FIXTURES:
        pytest.fail(f"{reason} (BZNA_TF_REQUIRE_FIXTURES is set: every fixture must be there)", pytrace=False)
    pytest.skip(reason)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "every_original: run once per original-tools file there is (the repository's; also shared/'s "
        "ImageNet one where it sits beside the checkout, or where BZNA_TF_REQUIRE_FIXTURES is set)",
    )
    config.addinivalue_line(
        "markers",
        "slow: a long end-to-end run of several processes (preemption, multi-worker jobs, the tf.data "
        "service, the examples, conversions killed and run again, the GPU kit's runner run whole). Left "
        "out when pytest collects the test folder without -m; `python -m pytest -n auto -m slow` runs them "
        "(.ci/slow does); naming a test file or test runs its slow tests too",
    )
    config.addinivalue_line(
        "markers",
        "gpu_build: needs the GPU toolchain (nvcc), or checks what the GPU libraries change on a machine "
        "without a GPU: every test of test_gpu.py and each test using a fixture that compiles with nvcc "
        f"({', '.join(sorted(NVCC_FIXTURES))}), marked by conftest.py. .ci/gpu-build runs only these",
    )


def _named(config) -> bool:
    """Whether the command line names test files or tests (not only folders): then they all run."""
    return any("::" in a or os.path.isfile(a.split("::")[0]) for a in config.args)


def _leaves_out_slow(config) -> bool:
    """A run of test folders without -m: the slow tests are left out."""
    return not (config.option.markexpr or _named(config))


# The fixtures that compile with nvcc: the GPU libraries (test_gpu.py), the GPU kit's run.sh and the core it
# builds (test_gpu_kit.py). The tests using them, and all of test_gpu.py, get the gpu_build marker; the kit's
# other tests (its contents, its runner on a stand-in core) need no nvcc: the test command and .ci/slow run
# them.
NVCC_FIXTURES = frozenset({"gpu_library", "ran_kit", "core"})
GPU_BUILD_MODULES = ("test_gpu.py",)


@pytest.hookimpl(tryfirst=True)  # before the mark plugin selects by -m: the markers added here count
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in GPU_BUILD_MODULES or NVCC_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker("gpu_build")
    if not _leaves_out_slow(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
        config.hook.pytest_deselected(items=slow)


def pytest_terminal_summary(terminalreporter, config):
    if _leaves_out_slow(config):  # under xdist only the workers collect: no count here
        terminalreporter.write_line(
            "The slow end-to-end tests were left out: `python -m pytest -n auto -m slow` runs them "
            "(.ci/run does, in its slow leg)"
        )


def pytest_generate_tests(metafunc):
    """Tests marked every_original read each original-tools file; the others read the repository's."""
    if "original_fixture" not in metafunc.fixturenames or not metafunc.definition.get_closest_marker(
        "every_original"
    ):
        return
    metafunc.parametrize("original_fixture", originals_here(), indirect=True, scope="session")


def originals_here() -> list[str]:
    """The original-tools fixtures to test: the repository's, and the others where they are (all of
    them where BZNA_TF_REQUIRE_FIXTURES is set, so that a missing one fails)."""
    return [n for n, o in ORIGINALS.items() if n == "free" or o.path.exists() or REQUIRE_FIXTURES]


# `pytest -n auto` (pytest-xdist, the README's test command): one worker per CPU this process may run
# on (its affinity, which containers and batch systems narrow, not the machine's count), at most 8. Each
# worker imports TensorFlow (about 1 GB of memory) and most tests run multi-threaded TensorFlow ops or
# child processes, so more workers than CPUs only adds memory.
MAX_WORKERS = 8


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without xdist, pytest runs all the same
def pytest_xdist_auto_num_workers(config):
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


# `-n` without `--dist`: the tests are spread one by one as under xdist's load, but those of the modules
# below, whose module fixtures take long to make (the GPU kit and its runs, tf.data service processes),
# all run on one worker, which makes those fixtures once, not once per worker. (xdist's own loadgroup does
# not group under pytest 9.2, pytest-dev/pytest-xdist#1386; whole modules per worker, loadscope, would
# leave a worker idle while the other ends a long module.) An explicit `--dist` (command line or
# $PYTEST_ADDOPTS) is obeyed.
ONE_WORKER_MODULES = ("test_gpu_kit.py", "test_service.py")


def _default_dist(config) -> bool:
    words = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    return config.getvalue("dist") == "load" and not any(str(w).startswith("--dist") for w in words)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if not _default_dist(config):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):  # scopes: a module of ONE_WORKER_MODULES, else each test
        def _split_scope(self, nodeid):
            module = nodeid.split("::", 1)[0]
            return module if module.rsplit("/", 1)[-1] in ONE_WORKER_MODULES else nodeid

    return Scheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def native_ops_built():
    """The native ops, built before the first test of a run whose tests import TensorFlow.

    A test that checks what a command prints must not see the one-time "compiling bzna_tf's native
    ops ..." line, nor, under pytest-xdist, "waiting for another process compiling ..." while another
    worker builds them, because it happened to be the first to use an op. A build error is left to
    the tests that use the ops (they raise it). With $BZNA_TF_OPS_LIBRARY (.ci/bazel), nothing is built.
    """
    if "tensorflow" not in sys.modules:  # the collected test modules never import it: no op is used
        return
    from bzna_tf.ops import _build, _load

    try:
        if _load._given_library() is None:
            _build.build()
    except _build.BuildError:
        pass


@pytest.fixture(scope="session")
def original_fixture(request):
    """An `Original`: the repository's, or each one there is for tests marked every_original."""
    o = ORIGINALS[getattr(request, "param", "free")]
    if not o.path.exists():
        missing_fixture(f"the original-tools fixture is not at {o.path} (shared/ must sit beside the repo)")
    return o


@pytest.fixture(scope="session")
def original_path(original_fixture):
    return original_fixture.path


@pytest.fixture(scope="session")
def manifest(original_fixture):
    return original_fixture.manifest


def gradient(h, w, seed=0):
    """A smooth test image (x265 compresses it well, so tests stay fast)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    a, b, c = rng.uniform(0.2, 1.0, 3)
    img = np.stack([xx * 255 * a / w, yy * 255 * b / h, (xx + yy) * 255 * c / (w + h)], -1)
    return img.astype(np.uint8)


@pytest.fixture(scope="session")
def pictures():
    """Three encoded images: small (no thumbnail), wide (thumbnail), tall (thumbnail)."""
    from bzna_tf.convert import encode_image

    out = []
    for i, (h, w) in enumerate([(96, 128), (300, 700), (620, 200)]):
        out.append(encode_image(gradient(h, w, i), preset="ultrafast"))
    return out


@pytest.fixture(scope="session")
def ffnvcodec():
    """An include folder holding ffnvcodec/: installed, else fetched without root as the GPU build does."""
    from bzna_tf.ops import _build

    try:
        return _build.ffnvcodec_include(fetch=True)
    except _build.BuildError as e:
        pytest.skip(str(e))


@pytest.fixture()
def chdir_tmp(tmp_path):
    old = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(old)


SHARD_SIZES = (7, 5, 9)  # uneven: three .bzna shards of flat-coloured pictures


def shard_colour(k, i):
    """Picture i of shard k: a flat colour that tells which sample it is."""
    return np.array([40 + 60 * k, 30 + 20 * i, 200 - 15 * i], dtype=np.uint8)


def shard_sample(name) -> tuple[int, int]:
    """(shard, index) from a stored filename "s<k>_<i>.png" (bytes or str)."""
    name = name.decode() if isinstance(name, bytes) else name
    return int(name[1]), int(name[3:5])


@pytest.fixture(scope="session")
def flat_shards(tmp_path_factory):
    """Three .bzna shards in data/shards/: shard k's pictures have target k and names s<k>_<ii>.png."""
    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    root = tmp_path_factory.mktemp("data") / "shards"
    root.mkdir()
    rng = np.random.default_rng(1)
    paths = []
    for k, n in enumerate(SHARD_SIZES):
        path = root / f"part-{k}.bzna"
        with BznaWriter(path) as w:
            for i in range(n):
                h, w_ = (int(v) for v in rng.integers(24, 64, 2))
                img = np.broadcast_to(shard_colour(k, i), (h, w_, 3)).copy()
                inp, thumb = encode_image(img, preset="ultrafast")
                w.append(inp, thumb=thumb, target=k, filename=f"s{k}_{i:02d}.png")
        paths.append(str(path))
    return paths


def checkout_ignore(folder, names):
    """For ``shutil.copytree`` of the checkout: leaves out build outputs, venvs and caches (dot-folders,
    Bazel's output base .bazel and its bazel-* links, whose execroot links back into the checkout: a
    copy that follows them never ends)."""
    return [
        n
        for n in names
        if n.startswith(".")
        or n in ("build", "dist", "site", "__pycache__")
        or n.startswith("bazel-")
        or n.endswith(".egg-info")
    ]
