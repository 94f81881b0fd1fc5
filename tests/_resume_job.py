"""Passes over as_dataset pipelines, checkpointed during one pass and resumed; run by test_preemption.py.

Usage: python _resume_job.py DATA ROLE FOLDER

Each case's pipeline is built with initial_epoch=None (the epoch counter).
ROLE "whole" records three uninterrupted passes (iterations) of each case;
"save" records the first pass and the head of the second (the batches read
before the checkpoint), then writes a tf.train.Checkpoint of that iterator
(with the counter variable too in the cases that say so); "resume", in
another process, restores each checkpoint into a freshly built pipeline and
records the rest of the second pass and a whole third one. Each role writes
FOLDER/ROLE.json: {case: {"passes": [[batch, ...], ...], "counter": [iteration,
skip]}}, a batch being "name|digest of the warped picture" per sample, the
counter as the save found it ("save") or as the restore left it ("resume").
"""

import hashlib
import json
import sys
from pathlib import Path

import tensorflow as tf

import bzna_tf

data, role, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
STEPS = 4  # batches per pass of the endless pipeline (the finite one has 4: 12 samples by 3)
MID = 2  # batches of the second pass read before a checkpoint saved mid-pass
# head: the batches of the second pass read before the checkpoint (None: all, to its end; 0: none,
# the iterator made but not started); variable: the counter variable's name in the checkpoint
# (tf.train.Checkpoint restores its attributes in the order of their names: "a_epochs" before the
# iterator, "z_epochs" after it); move: where "whole" and "save" set the counter after the head.
CASES = {
    "iterator": {},
    "iterator-symbolic": {"symbolic": True},
    "iterator-endless": {"endless": True},
    "iterator-exhausted": {"head": None},
    "iterator-symbolic-exhausted": {"symbolic": True, "head": None},
    "iterator-unstarted": {"head": 0},
    "variable-too": {"variable": "data_epochs"},
    "variable-further-restored-first": {"variable": "a_epochs", "move": 5},
    "variable-further-restored-last": {"variable": "z_epochs", "move": 5},
}

ds = bzna_tf.Dataset(data, track="bzna_thumb")  # every picture (3 of the fixture's 12 are unlabelled)


def make(endless=False, symbolic=False):
    p = ds.as_dataset(
        batch_size=3,
        shuffle=True,
        seed=7,
        warp=bzna_tf.layers.RandomResizedCrop(8, 8, flip_h=0.5),
        repeat=endless,
        with_filenames=True,
    )
    state = p.bzna_epochs
    if endless:
        state.set(0, skip=2)  # the run starts 2 batches in: the counter's skip
    if symbolic:
        options = tf.data.Options()
        options.experimental_symbolic_checkpoint = True
        p = p.with_options(options)
    return p, state


def batch(b):
    images, names = (t.numpy() for t in b)  # no labels: bzna_tf.Dataset
    digest = [hashlib.sha256(x.tobytes()).hexdigest()[:12] for x in images]
    return [f"{n.decode()}|{h}" for n, h in zip(names, digest, strict=True)]


def take(it, count):
    """`count` batches (None: to the end of the pass)."""
    return [batch(b) for b in it] if count is None else [batch(next(it)) for _ in range(count)]


def checkpoint(it, state, variable):
    objects = {"iterator": it}
    if variable:
        objects[variable] = state.variable
    return tf.train.Checkpoint(**objects)


out = {}
for case, how in CASES.items():
    endless, variable, move = how.get("endless", False), how.get("variable"), how.get("move")
    p, state = make(endless, how.get("symbolic", False))
    whole = STEPS if endless else None  # a pass
    head = how.get("head", MID)
    rest = (STEPS - head if endless else None) if head is not None else 0
    if role == "resume":  # a freshly built pipeline in a new process: its counter says iteration 0
        it = iter(p)
        checkpoint(it, state, variable).read(str(folder / case / "ckpt")).assert_consumed()
        counter = list(state.get())
        out[case] = {"counter": counter, "passes": [take(it, rest), take(iter(p), whole)]}
        continue
    first = take(iter(p), whole)
    it = iter(p)
    read = take(it, head)
    if move is not None:
        state.set(move)  # the counter moved on by hand: the next pass is iteration `move`
    if role == "save":
        checkpoint(it, state, variable).write(str(folder / case / "ckpt"))
        out[case] = {"counter": list(state.get()), "passes": [first, read]}
    else:
        out[case] = {"passes": [first, read + take(it, rest), take(iter(p), whole)]}
(folder / f"{role}.json").write_text(json.dumps(out))
