"""tf.data service processes started with `bzna-tf service` know bzna_tf's ops.

The dispatcher and two workers are real, separate OS processes on localhost,
each with a bounded lifetime and ended by PID.
"""

import select
import subprocess
import sys
import time

import pytest

tf = pytest.importorskip("tensorflow")

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
