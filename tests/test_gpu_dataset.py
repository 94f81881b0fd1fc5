"""as_dataset(device="gpu"): batches decoded ahead by BznaDecodeWarpDataset, elements as device="cpu"'s.

The op has a CPU kernel (FFmpeg) beside its GPU one (NVDEC), with one
iterator: here the op is placed on the CPU (``decoder_device`` patched), so
its semantics (order, seeds, depth, checkpoints with batches in flight,
shards, on_error, shutdown) are checked without a GPU; without one,
device="gpu" itself falls back to the CPU pipeline, with a warning. The GPU
kernel's checks are in test_gpu.py.
"""

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_on_error import DAMAGED, UNDECODABLE, bad_file, colour  # noqa: F401 (a fixture)

import bzna_tf
from bzna_tf import BznaWriter, ClassificationDataset
from bzna_tf.datasets import pipeline

tf = pytest.importorskip("tensorflow")

SAMPLES = 11
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    """SAMPLES pictures of different sizes and colours, targets i % 4, named."""
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("gpu_dataset") / "good.bzna"
    with BznaWriter(path) as w:
        for i in range(SAMPLES):
            pixels = np.broadcast_to(colour(i), (20 + 3 * i, 36 - i, 3)).copy()
            pixels[::3, ::2] = 255 - pixels[::3, ::2]  # some texture for the warp to sample
            inp, thumb = encode_image(pixels, preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 4, filename=f"g{i:02d}.png")
    return path


@pytest.fixture
def on_cpu_op(monkeypatch):
    """device="gpu" builds BznaDecodeWarpDataset as on a GPU, but places it on the CPU (its CPU kernel)."""
    calls = []

    def cpu(input_context=None):
        calls.append(input_context)
        return CPU, None

    monkeypatch.setattr(pipeline, "decoder_device", cpu)
    return calls


def _all(ds):
    return [tuple(np.asarray(t) for t in el) for el in ds]


def _assert_same(a, b):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            np.testing.assert_array_equal(u, v)


ARGS = dict(
    batch_size=3,
    shape=(12, 16),
    warp=bzna_tf.layers.RandomResizedCrop(12, 16, flip_h=0.5),
    shuffle=True,
    seed=5,
    repeat=2,
    normalize=((0.5, 0.4, 0.3), (0.2, 0.25, 0.3)),
    with_filenames=True,
)


def test_elements_are_the_cpu_paths_over_epochs(good_file, on_cpu_op):
    d = ClassificationDataset(good_file)
    cpu = d.as_dataset(**ARGS, device="cpu")
    ahead = d.as_dataset(**ARGS, device="gpu")
    assert on_cpu_op, "device='gpu' did not ask for its decoding device"
    assert type(ahead).__name__ == "_DecodeWarpDataset"
    assert ahead.element_spec == cpu.element_spec
    assert ahead.cardinality() == cpu.cardinality() == 8  # 2 epochs of 11, by 3
    first = _all(ahead)
    _assert_same(first, _all(cpu))
    # Each iteration is the next epochs, shuffled anew, still as the CPU path's.
    second, again = _all(ahead), _all(cpu)
    _assert_same(second, again)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(first, second, strict=True))
    # Images only (Dataset), channels first, a short last batch kept.
    plain = bzna_tf.Dataset(good_file)
    kw = dict(batch_size=4, shape=9, data_format="channels_first", seed=1)
    _assert_same(
        [(x,) for x in _all(plain.as_dataset(**kw, device="gpu"))],
        [(x,) for x in _all(plain.as_dataset(**kw, device="cpu"))],
    )


@pytest.mark.parametrize("depth", [1, 3, 7])
def test_depth_changes_nothing_but_timing(good_file, on_cpu_op, depth):
    d = ClassificationDataset(good_file)
    _assert_same(_all(d.as_dataset(**ARGS, device="gpu", prefetch=depth)), _all(d.as_dataset(**ARGS)))


def test_checkpoint_restores_the_batches_in_flight(good_file, on_cpu_op, tmp_path):
    d = ClassificationDataset(good_file)
    ds = d.as_dataset(**ARGS, device="gpu", prefetch=3, initial_epoch=0)
    it = iter(ds)
    for _ in range(2):
        next(it)  # the iterator now holds 3 batches submitted ahead
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "it"))
    rest = [tuple(np.asarray(t) for t in el) for el in it]
    assert len(rest) == 6
    it2 = iter(ds)
    next(it2)
    tf.train.Checkpoint(iterator=it2).restore(path)
    _assert_same([tuple(np.asarray(t) for t in el) for el in it2], rest)
    # And the CPU path agrees on what comes after batch 2.
    _assert_same(rest, _all(d.as_dataset(**ARGS, initial_epoch=0))[2:])


def test_shards_are_disjoint_and_complete(good_file, on_cpu_op):
    d = ClassificationDataset(good_file)
    seen = []
    for k in range(2):
        kw = dict(ARGS, repeat=False, shard=(2, k))
        shard = _all(d.as_dataset(**kw, device="gpu"))
        _assert_same(shard, _all(d.as_dataset(**kw)))
        seen += [n for el in shard for n in el[2].tolist()]
    assert sorted(seen) == [f"g{i:02d}.png".encode() for i in range(SAMPLES)]


def test_on_error_skip_counts_and_drops_as_the_cpu_path(bad_file, on_cpu_op):  # noqa: F811
    d = ClassificationDataset(bad_file)
    kw = dict(batch_size=4, shape=8, on_error="skip", with_filenames=True, seed=2, shuffle=True)
    cpu = d.as_dataset(**kw)
    ahead = d.as_dataset(**kw, device="gpu", prefetch=2)
    assert ahead.element_spec == cpu.element_spec
    got, want = _all(ahead), _all(cpu)
    _assert_same(got, want)
    names = [n for el in got for n in el[2].tolist()]
    assert len(names) == 12 - len(UNDECODABLE) - 1
    assert not {f"img_{i:02d}.png".encode() for i in (*UNDECODABLE, DAMAGED)} & set(names)
    assert ahead.bzna_skipped.count == cpu.bzna_skipped.count == 3
    # The same samples, named alike (FFmpeg's own wording of a failure can vary between two decodes).
    named = [sorted(r.partition(": ")[0] for r in x.bzna_skipped.recent) for x in (ahead, cpu)]
    assert named[0] == named[1] and len(named[0]) == 3
    assert any("could not decode the" in r for r in ahead.bzna_skipped.recent)


def test_on_error_raise_names_the_sample(bad_file, on_cpu_op):  # noqa: F811
    d = ClassificationDataset(bad_file)
    it = iter(d.as_dataset(batch_size=2, shape=8, device="gpu", prefetch=4))
    assert len(next(it)[0]) == 2  # samples 0, 1: batches ahead of it failing do not fail it
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad\.bzna, sample 3: could not decode the"):
        next(it)
    # tf.data goes on after an error: the next batch (4, 5) fails reading sample 5 (DAMAGED).
    with pytest.raises(tf.errors.DataLossError, match=rf"bad\.bzna, sample {DAMAGED}\b"):
        next(it)
    assert len(next(it)[0]) == 2  # samples 6, 7


def test_deleting_an_iterator_with_batches_in_flight_returns(good_file, on_cpu_op):
    d = bzna_tf.Dataset(good_file)
    ds = d.as_dataset(batch_size=2, shape=(64, 64), repeat=True, device="gpu", prefetch=16, seed=0)
    it = iter(ds)
    next(it)
    done = threading.Event()

    def drop():
        nonlocal it
        del it
        done.set()

    start = time.monotonic()
    threading.Thread(target=drop, daemon=True).start()
    assert done.wait(20), "deleting the iterator hung"
    assert time.monotonic() - start < 20


def test_op_checks_its_arguments(good_file):
    from bzna_tf.ops import decode_warp_dataset

    d = ClassificationDataset(good_file)
    payloads = d.as_dataset(batch_size=2, shape=8, device="model")
    with pytest.raises(TypeError, match="Expected batches of"):
        decode_warp_dataset(payloads, tf.TensorSpec([None, 8, 8, 3]), (8, 8))
    batches = tf.data.Dataset.from_tensors(
        (tf.constant(["x"]), tf.eye(3)[None], tf.constant([[4, 4]]), tf.constant(["s"]), tf.constant([""]))
    )
    with pytest.raises(ValueError, match="counter"):
        decode_warp_dataset(batches, tf.TensorSpec([None, 8, 8, 3]), (8, 8), on_error="skip")
    with pytest.raises(ValueError, match="depth"):
        decode_warp_dataset(batches, tf.TensorSpec([None, 8, 8, 3]), (8, 8), depth=0)
    with tf.device(CPU):
        ds = decode_warp_dataset(batches, tf.TensorSpec([None, 8, 8, 3]), (8, 8))
    with pytest.raises(tf.errors.InvalidArgumentError, match="sample 0 of the batch|could not decode"):
        next(iter(ds))


def test_without_a_gpu_device_gpu_is_the_cpu_path_and_says_so(good_file, monkeypatch):
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("this machine has a GPU (tools/tf_carry runs this file there)")
    monkeypatch.setattr(pipeline, "_warned", set())
    d = ClassificationDataset(good_file)
    with pytest.warns(RuntimeWarning, match=r"device='gpu'\) decodes on the CPU.*TensorFlow sees no GPU"):
        ds = d.as_dataset(**ARGS, device="gpu")
    _assert_same(_all(ds), _all(d.as_dataset(**ARGS)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        d.as_dataset(**ARGS, device="gpu")


def test_device_model_yields_the_dict_for_decode_warp(good_file):
    d = ClassificationDataset(good_file)
    spec, _ = d.as_dataset(batch_size=2, shape=8, device="model").element_spec
    assert set(spec) == {"data", "matrices", "picture_sizes"}
    with pytest.raises(ValueError, match="device"):
        d.as_dataset(batch_size=2, shape=8, device="tpu")


MIRRORED = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    import bzna_tf
    from bzna_tf.datasets import pipeline

    mode = sys.argv[2]
    if mode == "op":  # the op on each replica's device, as on GPUs (there: each replica's GPU)
        pipeline.decoder_device = lambda input_context=None: (pipeline._scope_device(), None)
    d = bzna_tf.ClassificationDataset(sys.argv[1])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def dataset_fn(ctx):  # "cpu": the whole CPU pipeline placed on each replica's device (its epoch counter
        # on the host's CPU: the check that it runs in the process that built it looked on the replica's)
        return d.as_dataset(batch_size=ctx.get_per_replica_batch_size(4), shape=8, seed=3, shuffle=True,
                            device="cpu" if mode == "cpu" else "gpu", input_context=ctx)

    options = tf.distribute.InputOptions(
        experimental_place_dataset_on_device=True,
        experimental_fetch_to_device=False,
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
    )
    dist = strategy.distribute_datasets_from_function(dataset_fn, options)
    got = {0: [], 1: []}
    for images, labels in dist:
        for k, (x, y) in enumerate(zip(images.values, labels.values)):
            got[k].append((x.numpy(), y.numpy(), x.device))
    for k in (0, 1):
        want = list(d.as_dataset(batch_size=2, shape=8, seed=3, shuffle=True, shard=(2, k)))
        assert len(got[k]) == len(want) > 0, (k, len(got[k]), len(want))
        for (x, y, device), (u, v) in zip(got[k], want):
            np.testing.assert_array_equal(x, u)
            np.testing.assert_array_equal(y, v)
            # The op decodes on each replica's device; the fallback's elements are the host's.
            assert device.endswith(f"CPU:{k if mode in ('op', 'cpu') else 0}"), device
    print("OK", mode)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fallback", "op", "cpu"])
def test_mirrored_strategy_recipe_on_two_logical_cpus(good_file, tmp_path, mode):
    script = tmp_path / "mirrored.py"
    script.write_text(MIRRORED)
    root = Path(__file__).resolve().parent.parent
    # Two logical CPUs, no GPU: on a GPU machine (tools/tf_carry) too, "fallback" must fall back.
    env = dict(os.environ, PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, str(script), str(good_file), mode]
    r = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and f"OK {mode}" in r.stdout, r.stdout[-3000:] + r.stderr[-5000:]


MODEL_MIRRORED = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    import keras
    import bzna_tf

    d = bzna_tf.ClassificationDataset(sys.argv[1])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    warp = bzna_tf.layers.RandomResizedCrop(16, 16, flip_h=0.5)
    kw = dict(batch_size=2, shuffle=True, seed=3, warp=warp)
    dist = strategy.distribute_datasets_from_function(
        lambda ctx: d.as_dataset(device="model", input_context=ctx, **kw)
    )
    with strategy.scope():
        inputs = {"data": keras.Input((), dtype="string", name="data"),
                  "matrices": keras.Input((3, 3), name="matrices"),
                  "picture_sizes": keras.Input((2,), dtype="int32", name="picture_sizes")}
        model = keras.Model(inputs, bzna_tf.layers.DecodeWarp(16, 16)(**inputs))

    @tf.function
    def step(batch):
        return strategy.run(model, args=(batch,))

    got = []
    for batch, _ in dist:  # each step: a batch per replica, in the pipeline's order
        got += [x.numpy() for x in strategy.experimental_local_results(step(batch)) if len(x)]
    want = [x.numpy() for x, _ in d.as_dataset(normalize=None, **kw)]
    assert len(got) == len(want) > 2, (len(got), len(want))
    for x, u in zip(got, want):
        np.testing.assert_array_equal(x, u)
    print("OK")
    """
)


@pytest.mark.slow
def test_decode_warp_under_mirrored_strategy_in_a_loop_of_ones_own(good_file, tmp_path):
    """device="model" under two replicas: Keras 3's fit cannot take its string input there (its symbolic
    build averages the first batch over the replicas), so the GPU guide gives a loop around strategy.run."""
    script = tmp_path / "model_mirrored.py"
    script.write_text(MODEL_MIRRORED)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(script), str(good_file)], capture_output=True, text=True, env=env,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-3000:] + r.stderr[-5000:]


def test_the_skip_counter_the_gpu_kernel_reports_to(on_cpu_op):
    """bzna_tf_report_skip (handed to the GPU library's kernel by _load) counts as BznaReportSkips does."""
    import ctypes

    from bzna_tf.ops import SkippedSamples, _load

    _load.load_library()
    counter = "bzna_tf-test-report-skip"
    ctypes.CDLL(str(_load._path)).bzna_tf_report_skip(counter.encode(), b"f.bzna, sample 4: bad")
    skipped = SkippedSamples(counter)
    assert skipped.count == 1 and skipped.recent == ["f.bzna, sample 4: bad"]


@pytest.mark.parametrize(("prefetch", "depth"), [(0, 1), (3, 3), (100, 64)])
def test_device_gpu_decodes_at_least_one_and_at_most_64_batches_ahead(
    good_file, monkeypatch, prefetch, depth
):
    # prefetch=0 (which the CPU pipeline takes) was refused on GPU machines only ("Expected `depth` as a
    # positive integer"), and a prefetch over 64 by the GPU kernel only. The decoding stage is built as a
    # GPU's, placed on the CPU.
    monkeypatch.setattr(pipeline, "decoder_device", lambda ctx=None: ("/device:CPU:0", None))
    seen = {}
    real = pipeline.decode_warp_dataset

    def spy(*args, **kwargs):
        seen["depth"] = kwargs["depth"]
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "decode_warp_dataset", spy)
    ds = ClassificationDataset(good_file).as_dataset(batch_size=2, shape=8, device="gpu", prefetch=prefetch)
    assert seen["depth"] == depth
    assert sum(len(labels) for _, labels in ds) == len(ClassificationDataset(good_file))
