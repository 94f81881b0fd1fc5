"""Ctrl-C during `bzna-tf convert`: one line saying what was kept and how to resume, exit 130, no worker left.

The walkthrough's case: a full KeyboardInterrupt traceback (the workers'
too). A terminal's Ctrl-C sends SIGINT to every process of the foreground
job: the test does the same to the conversion's process group.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from test_convert_resume import HERE, alive, children
from test_convert_shards import make_folder

from bzna_tf.convert import EncodeOptions, ImageFolderSource, convert, shard_paths

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the workers"
)

FLAGS = ["--processes", "2", "--preset", "medium", "--crf", "20", "--chroma", "average", "--no-progress"]


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_shards_says_so_in_one_line_and_the_same_command_resumes(tmp_path):
    src = make_folder(tmp_path / "src", {"a": 12, "b": 12}, size=(144, 192))
    out = tmp_path / "out" / "x.bzna"
    out.parent.mkdir()
    args = ["convert", "folder", str(src), str(out), "--num-shards", "6"]
    command = [sys.executable, "-m", "bzna_tf.cli", *args]
    # The interrupt comes in a known state, not after a time: the source holds back the images of the last
    # shard (from image 20 of 24 on, tests/_gated_cli.py) and says so. By then the conversion has written
    # all but at most workers x 4 (its images in flight) of the 20 before: shards 0-2 at least are
    # finished, the last is not, and nothing else moves however loaded the machine.
    gate = tmp_path / "gate"
    # SIGINT at its default in the conversion, as in a terminal's job: started from a background job of a
    # non-interactive shell (`.ci/run &`), pytest and its children inherit SIGINT ignored, and the
    # conversion would run to its end.
    job = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_gated_cli.py"), "20", str(gate), *args, *FLAGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    shards = shard_paths(out, 6)
    deadline = time.monotonic() + 600
    while not gate.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not gate.exists():
        job.kill()
        pytest.fail(f"the conversion never reached its last shard: {job.communicate()[1][-3000:]}")
    workers = children(job.pid)
    os.killpg(job.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    stdout, stderr = job.communicate(timeout=120)
    kept = [p for p in shards if os.path.exists(p)]
    assert 3 <= len(kept) < 6 and kept == shards[: len(kept)], stderr
    assert job.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert lines == [lines[-1]] and lines[-1].startswith(
        f"bzna-tf convert: interrupted: kept {len(kept)} of 6 "
    ), stderr
    assert os.path.basename(kept[0]) in lines[-1] and "run the same command again" in lines[-1]
    # The workers are joined before the exit; multiprocessing's resource tracker (also a child) exits when
    # it reads the end of its pipe, just after.
    deadline = time.monotonic() + 60  # a bound, not a wait: they are usually gone at once
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = {w: _cmdline(w) for w in workers if alive(w)}
    assert workers and not left, f"processes outlived the interrupted conversion: {left}"
    assert sorted(os.listdir(out.parent)) == sorted(os.path.basename(p) for p in kept)  # no partial file
    # The same command converts the rest: byte for byte an uninterrupted conversion.
    again = subprocess.run([*command, *FLAGS], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"skipped {len(kept)} file" in again.stdout
    reference = tmp_path / "ref" / "x.bzna"
    encoding = EncodeOptions(preset="medium", crf=20, chroma="average")
    convert(ImageFolderSource(src), reference, num_shards=6, workers=2, encoding=encoding, progress=False)
    for mine, theirs in zip(shards, shard_paths(reference, 6), strict=True):
        with open(mine, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read(), mine


def _gated_cli(args, tmp_path, **env):
    """``bzna-tf ARGS`` through tests/_gated_cli.py (its gate never opens: ``env`` holds images or workers)
    in a process group of its own, with Python's Ctrl-C handling, as from a terminal."""
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_gated_cli.py"), "1000", str(tmp_path / "never"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        env={**os.environ, **env},
    )


def _stderr_at_its_end(job, timeout, when):
    """The standard error of ``job`` once it exits; past ``timeout`` seconds the test fails (a hang)."""
    try:
        return job.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        pytest.fail(f"the conversion hung {when}")


def _kill_if_running(job):
    """Kills ``job``'s process group if it still runs (a test that failed before it ended)."""
    if job.poll() is None:
        os.killpg(job.pid, signal.SIGKILL)
        job.communicate()


def _wait_for(condition, job, what, timeout=300):
    deadline = time.monotonic() + timeout
    while not condition() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if not condition():
        job.kill()
        pytest.fail(f"{what} never happened: {job.communicate()[1][-3000:]}")


def test_ctrl_c_again_while_the_images_in_flight_are_finished_stops_the_workers_at_once(tmp_path):
    # Ctrl-C twice (the second while the first was handled: the pool waiting for its images in flight)
    # printed the line, then hung for good: the second KeyboardInterrupt broke off the join of the pool's
    # thread, and the exit waited for workers never told to stop. A worker here never finishes one image
    # (as a huge one takes long), so the first Ctrl-C alone waits in the shutdown, where the second comes.
    src = make_folder(tmp_path / "src", {"a": 12}, size=(48, 64))
    out = tmp_path / "out" / "x.bzna"
    held = tmp_path / "held"
    args = ["convert", "folder", str(src), str(out), "--order", "source", *FLAGS]
    job = _gated_cli(args, tmp_path, GATED_CLI_HOLD_IMAGE="a/a_5.ppm", GATED_CLI_HOLD_MARKER=str(held))
    try:
        partial = out.parent / ".x.bzna.partial"
        # A worker holds image 5, and images before it are written: the file is open.
        _wait_for(lambda: held.exists() and partial.exists(), job, "the held image and the partial file")
        workers = children(job.pid)
        os.killpg(job.pid, signal.SIGINT)
        _wait_for(lambda: not partial.exists(), job, "the first Ctrl-C's removal of the partial file")
        os.killpg(job.pid, signal.SIGINT)  # again, hammered: the pool is waiting for image 5
        os.killpg(job.pid, signal.SIGINT)
        stderr = _stderr_at_its_end(job, 60, "after a second Ctrl-C")
    finally:
        _kill_if_running(job)
    # 130, or killed by a SIGINT that came after the line, while Python was ending (it puts SIGINT's
    # default action back then): the shell shows both as 130.
    assert job.returncode in (130, -signal.SIGINT), stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert lines == [
        "bzna-tf convert: interrupted: nothing finished; removed the unfinished .x.bzna.partial; run the "
        "same command again to convert it"
    ], stderr
    deadline = time.monotonic() + 60  # a bound, not a wait: they are gone at once
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers and not [w for w in workers if alive(w)], {w: _cmdline(w) for w in workers if alive(w)}
    assert os.listdir(out.parent) == []


def test_ctrl_c_while_the_workers_start_prints_one_line(tmp_path):
    # The workers ignored SIGINT only from their initializer on: a Ctrl-C while they were importing
    # printed a KeyboardInterrupt traceback from each. Here each worker waits in its start until told.
    src = make_folder(tmp_path / "src", {"a": 8}, size=(48, 64))
    out = tmp_path / "out" / "x.bzna"
    gate = tmp_path / "worker"
    args = ["convert", "folder", str(src), str(out), *FLAGS]
    job = _gated_cli(args, tmp_path, GATED_CLI_WORKER_GATE=str(gate))
    try:
        started = lambda: [n for n in os.listdir(tmp_path) if n.startswith("worker.")]  # noqa: E731
        _wait_for(lambda: len(started()) == 2, job, "the start of both workers")
        workers = children(job.pid)
        os.killpg(job.pid, signal.SIGINT)  # both workers are importing
        time.sleep(0.2)  # where SIGINT is not blocked, it is taken by now
        (tmp_path / "worker.release").touch()
        stderr = _stderr_at_its_end(job, 120, "after a Ctrl-C while its workers started")
    finally:
        _kill_if_running(job)
    assert job.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == [
        "bzna-tf convert: interrupted: nothing finished; run the same command again to convert it"
    ], stderr
    deadline = time.monotonic() + 60
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if alive(w)], {w: _cmdline(w) for w in workers if alive(w)}


def test_a_killed_worker_stops_the_conversion_in_one_line(tmp_path):
    # A worker killed (the kernel's out-of-memory killer, say) broke the process pool: a traceback
    # ending in BrokenProcessPool, saying nothing of what was kept.
    src = make_folder(tmp_path / "src", {"a": 8, "b": 8}, size=(48, 64))
    out = tmp_path / "out" / "x.bzna"
    gate, release = tmp_path / "gate", tmp_path / "release"
    args = ["convert", "folder", str(src), str(out), "--num-shards", "4", *FLAGS]
    job = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_gated_cli.py"), "12", str(gate), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GATED_CLI_RELEASE": str(release)},
    )
    deadline = time.monotonic() + 600
    while not gate.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = [w for w in children(job.pid) if "spawn_main" in _cmdline(w) or "fork" in _cmdline(w)]
    assert gate.exists() and workers, job.communicate()[1][-3000:] if job.poll() is not None else workers
    os.kill(workers[0], signal.SIGKILL)
    release.touch()
    _, stderr = job.communicate(timeout=300)
    assert job.returncode == 1, stderr
    assert "Traceback" not in stderr and "BrokenProcessPool" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.strip()]
    assert line.startswith("bzna-tf convert: a worker process died (killed, or out of memory?"), line
    assert "shards are finished and kept: run the same command again (they are skipped)" in line
    assert not [n for n in os.listdir(out.parent) if n.endswith(".partial")]


def test_ctrl_c_in_python_is_a_keyboard_interrupt_carrying_the_summary(tmp_path):
    from bzna_tf.convert import ConversionInterrupted, Item

    src = make_folder(tmp_path / "src", {"a": 3}, size=(8, 8))
    items = list(ImageFolderSource(src))

    def interrupted():
        yield from items[:2]
        raise KeyboardInterrupt

    with pytest.raises(ConversionInterrupted) as e:
        convert(interrupted(), tmp_path / "x.bzna", workers=0, order="source", progress=False)
    assert isinstance(e.value, KeyboardInterrupt) and e.value.removed.endswith(".partial")
    assert str(e.value) == (
        f"interrupted: nothing finished; removed the unfinished {os.path.basename(e.value.removed)}; "
        "run the same command again to convert it"
    )
    assert os.listdir(tmp_path) == ["src"]
    assert isinstance(items[0], Item)


class _StopsAt(ImageFolderSource):
    """A folder source whose image ``stop`` is a Ctrl-C (KeyboardInterrupt) when read (None: its labels)."""

    def __init__(self, root, stop):
        super().__init__(root)
        self.stop = stop

    def item(self, index):
        if index == self.stop:
            raise KeyboardInterrupt
        return super().item(index)

    def labelled(self):  # read before the shards to write are known
        if self.stop is None:
            raise KeyboardInterrupt
        return super().labelled()


@pytest.mark.parametrize(
    "stop, said",
    [
        # Nothing finished of 3 shards: "to convert it" (one file) was said of several shards.
        (1, "kept 0 of 3 shards finished; removed the unfinished .x-00000-of-00003.bzna.partial; run the "
            "same command again to convert them"),
        (3, "kept 1 of 3 shards finished (x-00000-of-00003.bzna); removed the unfinished "
            ".x-00001-of-00003.bzna.partial; run the same command again to convert the other 2 shards "
            "(finished ones are skipped)"),
        (None, "kept 0 of 3 shards finished; run the same command again to convert them"),
    ],
)  # fmt: skip
def test_the_interrupted_line_counts_the_shards_left(tmp_path, stop, said):
    from bzna_tf.convert import ConversionInterrupted

    src = make_folder(tmp_path / "src", {"a": 6}, size=(8, 8))
    with pytest.raises(ConversionInterrupted) as e:
        convert(_StopsAt(src, stop), tmp_path / "out" / "x.bzna", num_shards=3, order="source", workers=0,
                progress=False)  # fmt: skip
    assert str(e.value) == f"interrupted: {said}"
    assert e.value.remaining == (None if stop is None else 3 - int(stop >= 2))


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
