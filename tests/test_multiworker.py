"""A real multi-process run: two MultiWorkerMirroredStrategy workers (two processes, gRPC between them).

Each worker builds its input pipeline with ``distribute_datasets_from_function``
and ``as_dataset(input_context=...)``, as docs/guides/distributed.md says. The
test checks what only separate processes can show: each epoch, the two
workers' shards are disjoint and together hold every sample once; the next
epoch (the next iteration of the same pipeline) is another permutation; and
a custom training loop (``strategy.run``, gradients all-reduced between the
processes) leaves the same weights on both workers.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from test_on_error import colour

from bzna_tf import BznaWriter

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.slow  # two worker processes that import TensorFlow and train

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = 14

# Each worker script's start: this worker of a job of two, its strategy and the file.
WORKER_START = textwrap.dedent(
    """
    import json, os, sys
    index, ports, path, out = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3], sys.argv[4]
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": [f"localhost:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
    )
    import numpy as np, tensorflow as tf, keras
    import bzna_tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = bzna_tf.ClassificationDataset(path)
    """
)

WORKER = WORKER_START + textwrap.dedent(
    """
    GLOBAL = 4

    def pipeline(ctx):
        return data.as_dataset(batch_size=ctx.get_per_replica_batch_size(GLOBAL), input_context=ctx, shape=8,
                               shuffle=True, seed=3, with_filenames=True, normalize=(0.5, 0.25))

    dist = strategy.distribute_datasets_from_function(pipeline)
    epochs = []
    for _ in range(2):  # two iterations of one pipeline: data epochs 0 and 1
        names = []
        for _, _, files in dist:
            names += [n.decode() for t in strategy.experimental_local_results(files) for n in t.numpy()]
        epochs.append(names)

    with strategy.scope():
        layers = [keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(data.num_classes)]
        model = keras.Sequential(layers)
        optimizer = keras.optimizers.SGD(0.1)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @tf.function
    def step(images, labels, files):
        def replica(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True)) / GLOBAL
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce("SUM", strategy.run(replica, args=(images, labels)), axis=None)

    losses = [float(step(*batch)) for batch in dist]
    weights = [w.numpy().tolist() for w in model.weights]
    json.dump({"epochs": epochs, "losses": losses, "weights": weights}, open(out, "w"))
    print("OK", index)
    """
)


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("multiworker") / "mw.bzna"
    with BznaWriter(path) as w:
        for i in range(SAMPLES):
            pixels = np.broadcast_to(colour(i), (16 + i, 24 - i // 2, 3)).copy()
            inp, thumb = encode_image(pixels, preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 3, filename=f"m{i:02d}.png")
    return path


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _run_workers(script, small_file, tmp_path):
    """Runs ``script`` as two workers of one job; what each wrote, parsed."""
    ports = ",".join(str(p) for p in _free_ports(2))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    outs = [tmp_path / f"worker{k}.json" for k in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(k), ports, str(small_file), str(outs[k])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in range(2)
    ]
    said = []
    try:
        for p in procs:
            said.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            p.kill()
    for k, p in enumerate(procs):
        assert p.returncode == 0 and f"OK {k}" in said[k], said[k][-4000:]
    return [json.loads(o.read_text()) for o in outs]


def test_two_worker_processes_split_every_epoch_and_train_in_step(small_file, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    runs = _run_workers(script, small_file, tmp_path)
    everything = sorted(f"m{i:02d}.png" for i in range(SAMPLES))
    for epoch in range(2):
        a, b = (r["epochs"][epoch] for r in runs)
        assert len(a) == len(b) == SAMPLES // 2  # balanced shards, no sample twice
        assert sorted(a + b) == everything  # together: every sample, once
    assert runs[0]["epochs"][0] != runs[0]["epochs"][1]  # the next iteration is the next data epoch
    # Synchronous training across the processes: the same losses and weights on both workers.
    assert len(runs[0]["losses"]) == len(runs[1]["losses"]) > 0
    np.testing.assert_allclose(runs[0]["losses"], runs[1]["losses"], rtol=1e-6)
    for u, v in zip(runs[0]["weights"], runs[1]["weights"], strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)


SHARDED_WORKER = WORKER_START + textwrap.dedent(
    """
    # One pipeline per worker, sharded by hand, handed to experimental_distribute_dataset (as model.fit
    # does): its auto-sharding must not keep 1/N of the shard again.
    ds = data.as_dataset(batch_size=2, shape=8, shuffle=True, seed=3, with_filenames=True, shard=(2, index))
    names = [n.decode() for _, _, files in strategy.experimental_distribute_dataset(ds)
             for t in strategy.experimental_local_results(files) for n in t.numpy()]
    json.dump(names, open(out, "w"))
    print("OK", index)
    """
)


def test_a_pipeline_sharded_by_hand_is_not_sharded_again_by_tf_distribute(small_file, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(SHARDED_WORKER)
    a, b = _run_workers(script, small_file, tmp_path)
    assert len(a) == len(b) == SAMPLES // 2  # a quarter of the samples on each worker, before
    assert sorted(a + b) == sorted(f"m{i:02d}.png" for i in range(SAMPLES))
