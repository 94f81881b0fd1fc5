"""WebDataset and Parquet conversions SIGKILLed mid-way: a rerun finishes them byte for byte."""

import os
import random
import sys
import time

import pytest
from _sources_data import images, wds_samples, write_parquet, write_shards
from test_convert_labels import FAST, ZERO, records
from test_convert_resume import alive, kill_while_encoding

from bzna_tf.cli import main
from bzna_tf.convert import SOURCES, convert, shard_paths

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _convert_job import OPTIONS  # noqa: E402

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the workers"
)
SIZE = (96, 128)


def make_source(tmp_path, kind):
    """(the source argument of bzna-tf convert KIND, as one string) for 16 images of 3 classes."""
    if kind == "webdataset":
        write_shards(tmp_path / "src", wds_samples(16, size=SIZE), per_shard=5)
        return str(tmp_path / "src" / "train-{000000..000003}.tar")
    pytest.importorskip("pyarrow", reason="Parquet sources need pyarrow: pip install 'bzna-tf[parquet]'")
    (tmp_path / "src").mkdir()
    return str(write_parquet(tmp_path / "src" / "train.parquet", images(16, SIZE), [i % 3 for i in range(16)],
                             row_group_size=5, hf_names=["ant", "bee", "cat"]))  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["webdataset", "parquet"])
def test_sigkill_then_rerun_gives_the_same_bytes(tmp_path, kind):
    src = make_source(tmp_path, kind)
    (tmp_path / "ref").mkdir()
    (tmp_path / "out").mkdir()
    reference = convert(SOURCES[kind].from_cli([src]), tmp_path / "ref" / "x.bzna", num_shards=4, workers=2,
                        progress=False, **OPTIONS)  # fmt: skip
    out = tmp_path / "out" / "x.bzna"
    seed = int(os.environ.get("BZNA_TF_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    workers = kill_while_encoding([src, str(out), "--kind", kind], rng.uniform(0.0, 0.5))
    assert workers, f"the conversion ended before its workers were seen (seed {seed})"
    done = [p for p in shard_paths(out, 4) if os.path.exists(p)]
    assert len(done) < 4, f"the kill came after the end (seed {seed})"
    deadline = time.monotonic() + 60  # a bound for a loaded machine: they go within a second
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if alive(w)], f"workers outlived their killed parent (seed {seed})"
    final = convert(SOURCES[kind].from_cli([src]), out, num_shards=4, workers=2, progress=False, **OPTIONS)
    assert len(final.written) + len(final.finished) == 4 and len(final.finished) == len(done)
    for mine, theirs in zip(shard_paths(out, 4), reference.written, strict=True):
        with open(mine, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read(), f"{mine} differs from the uninterrupted conversion (seed {seed})"
    assert sorted(os.listdir(tmp_path / "out")) == sorted(os.path.basename(p) for p in shard_paths(out, 4))


@pytest.mark.parametrize("kind", ["tfrecord", "webdataset"])
def test_output_beside_the_records_then_the_same_command_resumes(tmp_path, capsys, kind):
    """The docs' own pattern, 'imagenet/train-*' with imagenet/train.bzna: a rerun's pattern also matched
    the conversion's shards (train-0000k-of-00004.bzna), refused as a second set of shards (a tar
    pattern read them as tar shards), so neither a resume nor a rerun of a finished conversion worked."""
    d = tmp_path / "imagenet"
    if kind == "tfrecord":
        d.mkdir()
        for k in range(2):
            records(d / f"train-{k:05d}-of-00002", [[(k + i) % 3] for i in range(4)])
        flags = ZERO
    else:
        write_shards(d, wds_samples(8), per_shard=4)
        flags = []
    argv = ["convert", kind, str(d / "train-*"), str(d / "train.bzna"), "--num-shards", "4", *FAST, *flags]
    assert main(argv) == 0, capsys.readouterr().err
    shards = shard_paths(d / "train.bzna", 4)
    with open(shards[3], "rb") as f:
        last = f.read()
    # As a run killed in its last shard leaves it: that shard missing, its partial file there.
    os.remove(shards[3])
    with open(d / f".{os.path.basename(shards[3])}.partial", "wb") as f:
        f.write(last[:100])
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    assert "skipped 3 files" in capsys.readouterr().out
    with open(shards[3], "rb") as f:
        assert f.read() == last
    assert main(argv) == 0, capsys.readouterr().err  # and once finished, it is all skipped
    assert "skipped 4 files" in capsys.readouterr().out
    assert not [n for n in os.listdir(d) if n.endswith(".partial")]
