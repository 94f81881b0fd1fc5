"""TensorFlow's own checkpoint harness (tf.data's CheckpointTestBase) on bzna_tf's datasets.

The harness saves an iterator at break points, restores it into a rebuilt
pipeline and compares every element with an uninterrupted run, in eager and
in graph (tf.compat.v1 Session) mode, with explicit and symbolic checkpoints
(Options.experimental_symbolic_checkpoint: no buffer is saved, each element
carries its sources' cursors). It runs on the source op (BznaDataset) and on
as_dataset's pipelines: the CPU path, and the decode-ahead dataset op
(device="gpu") placed on the CPU, each with and without an initial_epoch
(initial_epoch=None: the epoch counter variable, which a restore must not
read again).
"""

import pytest
from test_gpu_dataset import good_file, on_cpu_op  # noqa: F401 (fixtures: its file, the op on the CPU)

import bzna_tf
from bzna_tf import ClassificationDataset

tf = pytest.importorskip("tensorflow")
ctb = pytest.importorskip(
    "tensorflow.python.data.kernel_tests.checkpoint_test_base",
    reason="this TensorFlow wheel ships no tf.data test harness",
)
from tensorflow.python.framework import ops  # noqa: E402

# CheckpointTestBase's checks (verify_<name>).
VERIFY = [
    "unused_iterator",
    "fully_used_iterator",
    "exhausted_iterator",
    "multiple_breaks",
    "reset_restored_iterator",
]


class _Harness(ctb.CheckpointTestBase):
    __test__ = False  # a TestCase, for its checks only: pytest collects none of its methods

    def runTest(self):  # unittest wants one; pytest drives the checks
        pass


@pytest.fixture
def harness():
    h = _Harness()
    h.setUp()  # TensorFlow's test case sets a global seed, and its tearDown leaves it set
    yield h
    h.tearDown()
    tf.random.set_seed(None)  # tests run after these in this process draw seeds as a program does


def _symbolic(ds, symbolic):
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic
    # As the harness's own combinations do: no static rewrite between checks.
    options.experimental_optimization.apply_default_optimizations = False
    return ds.with_options(options)


def _in_mode(mode, check):
    """Runs check() eagerly, or in graph mode (tf.compat.v1: Session, Saver, initializable iterators)."""
    if mode == "eager":
        check()
    else:
        with ops.Graph().as_default():
            check()


def _verify(harness, which, mode, ds_fn, n):
    if which == "breaks_at_each_element":
        # verify_multiple_breaks' check at every element (it picks ten points, repeats included).
        _in_mode(mode, lambda: harness.verify_run_with_breaks(ds_fn, list(range(1, n)), n))
    else:
        _in_mode(mode, lambda: getattr(harness, f"verify_{which}")(ds_fn, n))


def _modes(which):
    # Re-initialising an iterator exists in graph mode only.
    return ["graph"] if which == "reset_restored_iterator" else ["eager", "graph"]


@pytest.mark.parametrize("symbolic", [False, True], ids=["explicit", "symbolic"])
@pytest.mark.parametrize(("which", "mode"), [(w, m) for w in VERIFY for m in _modes(w)])
def test_the_source_op(harness, good_file, which, mode, symbolic):  # noqa: F811
    order = [3, 1, 4, 1, 5, 9, 2, 6]

    def ds_fn():
        return _symbolic(bzna_tf.ops.BznaDataset(str(good_file), order, with_filenames=True), symbolic)

    _verify(harness, which, mode, ds_fn, len(order))


def _pipeline(path, device, initial_epoch, symbolic):
    d = ClassificationDataset(path)
    ds = d.as_dataset(
        batch_size=6,
        shape=(6, 8),
        warp=bzna_tf.layers.RandomResizedCrop(6, 8, flip_h=0.5),
        shuffle=True,
        seed=5,
        repeat=2,
        initial_epoch=initial_epoch,
        device=device,
    )
    return _symbolic(ds, symbolic)


BATCHES = 4  # 2 epochs of 11, by 6: the second batch crosses into the second epoch


# The epoch counter (initial_epoch=None) in every combination; an initial_epoch once.
PIPELINES = [
    (mode, device, None, symbolic)
    for mode in ("eager", "graph")
    for device in ("cpu", "gpu")
    for symbolic in (False, True)
] + [("graph", "gpu", 0, True)]


@pytest.mark.parametrize(
    ("mode", "device", "initial_epoch", "symbolic"),
    PIPELINES,
    ids=[
        "-".join(
            [m, "decode_ahead_op" if d == "gpu" else "cpu_path", "counter" if e is None else "initial_epoch"]
            + ["symbolic" if s else "explicit"]
        )
        for m, d, e, s in PIPELINES
    ],
)
def test_as_dataset_breaks(harness, good_file, on_cpu_op, mode, device, initial_epoch, symbolic):  # noqa: F811
    fn = lambda: _pipeline(good_file, device, initial_epoch, symbolic)  # noqa: E731
    _verify(harness, "breaks_at_each_element", mode, fn, BATCHES)


OTHER_CHECKS = [(w, m) for w in VERIFY if w != "multiple_breaks" for m in _modes(w)]


@pytest.mark.parametrize(("which", "mode"), OTHER_CHECKS)
def test_as_dataset_decode_ahead_other_checks(harness, good_file, on_cpu_op, which, mode):  # noqa: F811
    # The counter under symbolic checkpoints: the case where a re-read would break.
    _verify(harness, which, mode, lambda: _pipeline(good_file, "gpu", None, True), BATCHES)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_an_endless_pipeline_symbolically(harness, good_file, mode):  # noqa: F811
    # repeat=True: the counter's endless branch (each iteration from its start, `skip` batches in).
    def ds_fn():
        d = ClassificationDataset(good_file)
        return _symbolic(d.as_dataset(batch_size=3, shape=8, shuffle=True, seed=1, repeat=True), True)

    # Breaks across epochs 0 to 2.
    _in_mode(mode, lambda: harness.verify_run_with_breaks(ds_fn, [1, 4, 8], 9, verify_exhausted=False))
