"""A conversion SIGKILLed at random moments: its workers exit, and a rerun finishes it byte for byte."""

import os
import random
import subprocess
import sys
import time

import pytest
from test_convert_shards import make_folder

from bzna_tf.convert import ImageFolderSource, convert, shard_paths

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _convert_job import OPTIONS  # noqa: E402

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the workers"
)


def children(pid):
    """PIDs of the live processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def kill_while_encoding(args, delay):
    """Starts ``_convert_job.py ARGS``, SIGKILLs it ``delay`` s after its workers appear; their PIDs."""
    job = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_convert_job.py"), *args], stdout=subprocess.PIPE, text=True
    )
    assert job.stdout.readline().startswith("started")
    deadline = time.monotonic() + 60
    workers = []
    while not workers and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        workers = children(job.pid)
    time.sleep(delay)  # a random moment of the encoding
    workers = children(job.pid) or workers
    job.kill()
    job.wait()
    job.stdout.close()
    return workers


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun_gives_the_same_bytes(tmp_path):
    src = make_folder(tmp_path / "src", {"a": 8, "b": 8}, size=(96, 128))
    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    reference = convert(ImageFolderSource(src), tmp_path / "ref" / "x.bzna", num_shards=4, workers=2,
                        progress=False, **OPTIONS)  # fmt: skip
    out = tmp_path / "out" / "x.bzna"
    seed = int(os.environ.get("BZNA_TF_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    for attempt, (low, high) in enumerate([(0.0, 0.5), (0.2, 1.5)]):
        workers = kill_while_encoding([str(src), str(out)], rng.uniform(low, high))
        if attempt == 0:  # the first kill lands mid-conversion: shards are left to do
            assert workers, f"the conversion ended before its workers were seen (seed {seed})"
            done = [p for p in shard_paths(out, 4) if os.path.exists(p)]
            assert len(done) < 4, f"the kill came after the end (seed {seed})"
        deadline = time.monotonic() + 60  # a bound for a loaded machine: they go within a second
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [w for w in workers if alive(w)]
        assert not left, f"workers {left} outlived their killed parent (attempt {attempt}, seed {seed})"
    final = convert(ImageFolderSource(src), out, num_shards=4, workers=2, progress=False, **OPTIONS)
    assert len(final.written) + len(final.finished) == 4
    for mine, theirs in zip(shard_paths(out, 4), reference.written, strict=True):
        with open(mine, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read(), f"{mine} differs from the uninterrupted conversion (seed {seed})"
    assert sorted(os.listdir(tmp_path / "out")) == sorted(os.path.basename(p) for p in shard_paths(out, 4))
