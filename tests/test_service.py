"""tf.data service processes started with `bzna-tf service` know bzna_tf's ops.

The dispatcher and two workers are real, separate OS processes on localhost,
each with a bounded lifetime and ended by PID.
"""

import select
import subprocess
import sys
import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
# Separate service processes (their fixtures run on one worker: tests/conftest.py).
pytestmark = pytest.mark.slow

from bzna_tf.ops import BznaDataset  # noqa: E402


def _start(*args, timeout=180):
    """A `bzna-tf service ...` process and the line it printed once serving."""
    p = subprocess.Popen(
        [sys.executable, "-m", "bzna_tf.cli", "service", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], 1.0)
        if ready:
            line = p.stdout.readline()
            if line.startswith("bzna-tf service:"):
                return p, line.strip()
            if not line and p.poll() is not None:
                break
    p.kill()
    raise AssertionError(f"`bzna-tf service {' '.join(args)}` did not start (exit {p.poll()})")


@pytest.fixture(scope="module")
def service():
    """grpc://localhost:PORT of a dispatcher with two workers, all separate processes."""
    procs = []
    try:
        d, line = _start("dispatcher", "--port", "0")
        procs.append(d)
        target = line.rsplit(" ", 1)[-1]
        assert target.startswith("grpc://localhost:"), line
        address = target.split("://", 1)[1]
        for _ in range(2):
            procs.append(_start("worker", "--dispatcher", address, "--port", "0")[0])
        yield target
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


def test_distributed_epoch_reads_every_sample_once(service, original_path):
    ds = BznaDataset(str(original_path)).map(lambda e: e["index"])
    ds = ds.apply(tf.data.experimental.service.distribute("distributed_epoch", service))
    got = sorted(int(i) for i in ds)
    assert got == list(range(12)), got


def test_workers_run_the_decode_ops(service, original_path):
    """A whole decode + warp pipeline runs in the worker processes."""
    from bzna_tf.ops import decode_warp

    def load(e):
        m = tf.eye(3, batch_shape=[1])
        return e["index"], tf.shape(decode_warp(e["data"][None], m, (8, 8)))

    ds = BznaDataset(str(original_path)).map(load)
    ds = ds.apply(tf.data.experimental.service.distribute("distributed_epoch", service))
    got = sorted((int(i), tuple(s.numpy())) for i, s in ds)
    assert got == [(i, (1, 8, 8, 3)) for i in range(12)]


def test_python_helpers_start_servers_with_the_ops():
    import bzna_tf.service

    d = bzna_tf.service.dispatcher()
    w = bzna_tf.service.worker(d.target)
    assert d.target.startswith("grpc://localhost:")
    ds = tf.data.Dataset.range(5).apply(tf.data.experimental.service.distribute("parallel_epochs", d.target))
    assert sorted(int(x) for x in ds) == list(range(5))
    w.stop()
    d.stop()


def test_service_cli_errors(capsys):
    from bzna_tf.cli import main

    with pytest.raises(SystemExit):
        main(["service", "worker"])  # --dispatcher is required
    assert "--dispatcher" in capsys.readouterr().err
    for port in ("99999", "-1", "x"):  # TensorFlow took 99999 modulo 65536, and a traceback for -1
        with pytest.raises(SystemExit):
            main(["service", "dispatcher", "--port", port])
        assert f"expected a port from 0 (a free one) to 65535, got '{port}'" in capsys.readouterr().err
    assert main(["service", "dispatcher", "--fault-tolerant"]) == 1
    assert capsys.readouterr().err == (
        "bzna-tf service: fault_tolerant_mode needs a work_dir for its journal (--work-dir)\n"
    )
    import socket

    with socket.socket() as taken:  # a port in use: one line, not a traceback
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["service", "dispatcher", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bzna-tf service: cannot start the dispatcher on port {port} (in use by another")
    assert "Traceback" not in err


# ---------------------------------------------------------------- as_dataset under the service


def _names(ds):
    return sorted(n.decode() for el in ds for n in el[-1].numpy())


def _as_dataset(path, **kwargs):
    """Every sample of the file (3 of its 12 unlabelled: label -1; the default warp is deterministic)."""
    import bzna_tf

    kwargs = {"batch_size": 2, "shape": 8, "with_filenames": True, "seed": 5, "initial_epoch": 0, **kwargs}
    kwargs = {"training": False, "unlabelled": "keep", **kwargs}
    return bzna_tf.ClassificationDataset(str(path)).as_dataset(**kwargs)


def _served(ds, service, mode="distributed_epoch", **kwargs):
    return ds.apply(tf.data.experimental.service.distribute(mode, service, **kwargs))


@pytest.mark.parametrize("shuffle", [False, True])
def test_as_dataset_distributed_epoch_is_exactly_once(service, original_path, shuffle):
    local = _names(_as_dataset(original_path, shuffle=shuffle))
    assert len(local) == 12 == len(set(local))
    assert _names(_served(_as_dataset(original_path, shuffle=shuffle), service)) == local
    twice = _names(_served(_as_dataset(original_path, shuffle=shuffle, repeat=2), service))
    assert twice == sorted(local * 2)


def test_as_dataset_served_images_are_the_local_ones(service, original_path):
    """Per-sample crops depend on (seed, epoch, index) only: the workers make the local pipeline's images."""
    import bzna_tf

    def images(ds):
        return {n.decode(): x for xs, _, ns in ds for x, n in zip(xs.numpy(), ns.numpy(), strict=True)}

    warp = bzna_tf.layers.RandomResizedCrop(8, 8, flip_h=0.5)
    kw = dict(shuffle=True, warp=warp, initial_epoch=3, training=True, unlabelled="raise")
    d = bzna_tf.ClassificationDataset(str(original_path)).labelled()
    make = lambda: d.as_dataset(batch_size=2, with_filenames=True, seed=5, **kw)  # noqa: E731
    local, served = images(make()), images(_served(make(), service))
    assert sorted(local) == sorted(served)
    for name, x in local.items():
        np.testing.assert_array_equal(x, served[name])


def test_as_dataset_shards_and_sample_lists_under_the_service(service, original_path, tmp_path):
    import bzna_tf

    everything = _names(_as_dataset(original_path))
    halves = [
        _names(_served(_as_dataset(original_path, shuffle=True, shard=(2, k)), service)) for k in (0, 1)
    ]
    assert sorted(halves[0] + halves[1]) == everything and len(halves[0]) == 6
    d = bzna_tf.ClassificationDataset(str(original_path))
    listed = d.select([1, 4, 7]).to_sample_list()
    got = _names(_served(_as_dataset(original_path, shuffle=True, sample_list=listed), service))
    assert got == sorted(d.filenames[i] for i in (1, 4, 7))


def test_as_dataset_parallel_epochs_is_one_copy_per_worker(service, original_path):
    once = _names(_as_dataset(original_path, shuffle=True))
    served = _served(_as_dataset(original_path, shuffle=True), service, "parallel_epochs")
    assert _names(served) == sorted(once * 2)


@pytest.mark.parametrize("mode", ["distributed_epoch", "parallel_epochs"])
def test_the_default_pipeline_fails_on_the_workers_naming_initial_epoch(service, original_path, mode):
    """initial_epoch=None keeps the epoch counter in this process: a worker's copy would repeat one epoch.

    Before, the workers failed with TensorFlow's "Input dataset was expected to contain 6 elements but
    contained only 0 elements"; now the first element fails with a message that names the fix.
    """
    ds = _as_dataset(original_path, initial_epoch=None)
    assert hasattr(ds, "bzna_epochs")
    with pytest.raises(tf.errors.OpError, match=r"built with initial_epoch=None.*initial_epoch=0") as e:
        next(iter(_served(ds, service, mode)))
    assert "elements but contained only" not in str(e.value)
    assert len(_names(ds)) == 12  # the same pipeline still runs here


def test_register_dataset_shared_job_is_exactly_once(service, original_path):
    """Two consumers of one registered dataset and one named job share the epoch."""
    ds = _as_dataset(original_path, shuffle=True)
    dataset_id = tf.data.experimental.service.register_dataset(service, ds)
    consumers = [
        tf.data.experimental.service.from_dataset_id(
            "distributed_epoch", service, dataset_id, ds.element_spec, job_name="shared"
        )
        for _ in range(2)
    ]
    its = [iter(c) for c in consumers]
    got, live = [], list(its)
    while live:  # read the two consumers in turn, as two trainers would
        for it in list(live):
            try:
                got += [n.decode() for n in next(it)[-1].numpy()]
            except StopIteration:
                live.remove(it)
    assert sorted(got) == _names(_as_dataset(original_path))
