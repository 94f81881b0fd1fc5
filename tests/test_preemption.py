"""Preemption: a model.fit SIGKILLed mid-training and restarted with BackupAndRestore and
SyncEpochs trains, from the resumed epoch on, on exactly the batches of an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.slow  # several processes that train, each about 8 s

JOB = Path(__file__).with_name("_preempt_job.py")


def _fit(data, tmp, name, mode, kill=None):
    """Runs the job; returns {epoch: [batch digests]} recorded by the model."""
    record = tmp / f"{name}.txt"
    args = [sys.executable, str(JOB), str(data), str(tmp / f"{name}-backup"), str(record), mode]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if kill:
        r = subprocess.run([*args, *map(str, kill)], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
        killed = _read(record)
        assert max(killed) == kill[0], killed  # it died in the epoch asked for
        record.rename(tmp / f"{name}-killed.txt")
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return _read(record)


def _read(path):
    out = {}
    for line in path.read_text().splitlines():
        epoch, digest = line.split()
        out.setdefault(int(epoch), []).append(digest)
    return out


@pytest.mark.parametrize("mode", ["epochs", "endless", "mirrored-endless", "mirrored-epochs"])
def test_sigkill_and_restart_resumes_the_same_batches(original_path, tmp_path, mode):
    whole = _fit(original_path, tmp_path, "whole", mode)
    assert sorted(whole) == [0, 1, 2]
    assert whole[0] != whole[1] != whole[2]  # each epoch gets new order and crops
    # mirrored-epochs: one step an epoch. Its pipeline's third batch would make a step that one replica
    # gets no batch for: tf.distribute cut it off mid-step (the batch recorded, or not, and never trained).
    resumed = _fit(original_path, tmp_path, "resumed", mode, kill=(1, 0 if mode == "mirrored-epochs" else 1))
    assert sorted(resumed) == [1, 2]  # BackupAndRestore resumed at epoch 1 (its last backup: epoch 0's end)
    if mode.startswith("mirrored"):  # two replicas record their batches of a step in either order
        whole, resumed = ({e: sorted(b) for e, b in r.items()} for r in (whole, resumed))
        steps = 5 if mode == "mirrored-endless" else 1
        assert [len(whole[e]) for e in (0, 1, 2)] == [2 * steps] * 3  # whole steps of 2 batches
    assert resumed[1] == whole[1] and resumed[2] == whole[2]


def test_without_sync_the_resumed_epochs_replay_old_data(original_path, tmp_path):
    """The control: the check above can fail, and fails without SyncEpochs."""
    whole = _fit(original_path, tmp_path, "whole", "nosync")
    resumed = _fit(original_path, tmp_path, "resumed", "nosync", kill=(1, 1))
    assert sorted(resumed) == [1, 2]
    assert resumed[1] == whole[0]  # the restarted process began at the dataset's first epoch


RESUME_JOB = Path(__file__).with_name("_resume_job.py")


def _resume_role(data, tmp, role):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    r = subprocess.run(
        [sys.executable, str(RESUME_JOB), str(data), role, str(tmp)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((tmp / f"{role}.json").read_text())


def test_an_iterator_checkpoint_resumes_in_a_fresh_process_and_the_next_pass_follows(original_path, tmp_path):
    """A checkpoint of the iterator alone, restored in a new process, finishes its pass and sets the epoch
    counter as the saving process had it, so the next pass is the uninterrupted run's (it was the new
    process's iteration 0 again: an earlier pass's order and crops): saved mid-pass (explicit, symbolic,
    endless with a skip), at the end of the pass (the root's own state is gone by then), before the
    first element. With the counter variable in the checkpoint too, restored before or after the
    iterator, the counter is the saved one."""
    whole = _resume_role(original_path, tmp_path, "whole")
    saved = _resume_role(original_path, tmp_path, "save")
    resumed = _resume_role(original_path, tmp_path, "resume")
    assert sorted(whole) == sorted(saved) == sorted(resumed)
    wrong = {}
    for case, run in whole.items():
        passes = run["passes"]
        assert len({json.dumps(p) for p in passes}) == 3, case  # each pass its own order and crops
        first, head = saved[case]["passes"]
        rest, after = resumed[case]["passes"]
        assert first == passes[0], case
        counter, want = resumed[case]["counter"], saved[case]["counter"]
        if head + rest != passes[1] or after != passes[2] or counter != want:
            seen = [[i for i in (0, 1, 2) if p == passes[i]] for p in (head + rest, after)]
            wrong[case] = f"counter {counter}, saved {want}; the restored and next passes = passes {seen}"
    assert not wrong, wrong  # [[1], [2]] is right
