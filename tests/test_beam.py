"""bzna_tf.convert.beam with the DirectRunner: the shards a local conversion writes, reruns that skip them."""

import functools
import os

import numpy as np
import pytest
from conftest import gradient

pytest.importorskip(
    "apache_beam",
    reason="Apache Beam is an optional extra: pip install 'bzna-tf[beam]' (.ci/extras runs this test)",
)

from bzna_tf.convert import ConversionError, ConversionSummary, EncodeOptions, ImageFolderSource, convert  # noqa: E402
from bzna_tf.convert.beam import ConvertShards, merge_summaries, run  # noqa: E402
from bzna_tf.format import BznaFile  # noqa: E402

FAST = {"encoding": EncodeOptions(preset="ultrafast", crf=24, chroma="average")}
NAMES = [f"train-0000{k}-of-00003.bzna" for k in range(3)]


@pytest.fixture()
def folder(tmp_path):
    """Six small PPM images in two classes."""
    k = 0
    for name in ("ant", "zebra"):
        (tmp_path / "src" / name).mkdir(parents=True)
        for i in range(3):
            rgb = np.ascontiguousarray(gradient(24, 32, seed=k))
            (tmp_path / "src" / name / f"{name}_{i}.ppm").write_bytes(b"P6\n32 24\n255\n" + rgb.tobytes())
            k += 1
    return tmp_path / "src"


def contents(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_beam_writes_the_local_shards_and_reruns_skip_them(tmp_path, folder):
    out = tmp_path / "beam"
    out.mkdir()
    summary = run(ImageFolderSource(folder), out / "train.bzna", 3, **FAST)
    # Only the shards (no partial file, no pipeline report left), each a complete .bzna.
    assert sorted(os.listdir(out)) == NAMES
    assert summary.written == [str(out / n) for n in NAMES] and summary.finished == []
    assert (summary.images, summary.num_shards, summary.targets) == (6, 3, (0, 1))
    assert (summary.order, summary.seed) == ("shuffle", 0) and "order: shuffled with seed 0" in str(summary)
    assert summary.class_names == ["ant", "zebra"] and summary.bytes == sum(
        os.path.getsize(out / n) for n in NAMES
    )
    lengths = []
    for name in NAMES:
        with BznaFile(out / name) as f:
            lengths.append(len(f))
            assert f.class_names == ["ant", "zebra"]
    assert lengths == [2, 2, 2]

    # Byte for byte what a local conversion of the same plan writes.
    local = tmp_path / "local"
    local.mkdir()
    # with worker processes, as the CLI converts: the bytes do not depend on `workers`
    convert(ImageFolderSource(folder), local / "train.bzna", num_shards=3, workers=2, progress=False, **FAST)
    written = contents(out)
    assert written == contents(local)

    # A rerun (here with a function that makes the source on each worker) skips every finished shard;
    # with one shard gone, it writes that one again, the same bytes.
    before = {n: os.stat(out / n).st_mtime_ns for n in NAMES}
    again = run(functools.partial(ImageFolderSource, folder), out / "train.bzna", 3, **FAST)
    assert again.written == [] and again.images == 0
    assert again.finished == [(str(out / n), 2) for n in NAMES]
    assert {n: os.stat(out / n).st_mtime_ns for n in NAMES} == before
    os.remove(out / NAMES[1])
    third = run(ImageFolderSource(folder), out / "train.bzna", 3, **FAST)
    assert third.written == [str(out / NAMES[1])] and [p for p, _ in third.finished] == [
        str(out / NAMES[0]),
        str(out / NAMES[2]),
    ]
    assert contents(out) == written


def test_convert_shards_checks_its_arguments_before_running(tmp_path, folder):
    source = ImageFolderSource(folder)
    with pytest.raises(ValueError, match="shards"):
        ConvertShards(source, tmp_path / "t.bzna", 3, shards=[0])
    with pytest.raises(ValueError, match="progress"):
        ConvertShards(source, tmp_path / "t.bzna", 3, progress=True)
    with pytest.raises(ValueError, match=r"num_shards.*\[1, 6\]"):
        ConvertShards(source, tmp_path / "t.bzna", 7)
    with pytest.raises(ValueError, match="len"):
        ConvertShards(iter([]), tmp_path / "t.bzna", 1)
    with pytest.raises(TypeError, match="list of flags"):
        run(source, tmp_path / "t.bzna", 1, pipeline_options="--runner=DirectRunner")
    assert not os.path.exists(tmp_path / "t-00000-of-00003.bzna")


def test_merge_summaries_orders_by_shard():
    a = ConversionSummary("o.bzna", images=2, bytes=10, written=["o-00001-of-00002.bzna"], num_shards=2,
                          targets=(3, 5), class_names=[None, "b"], skipped=[("y", "bad")], labelled=1,
                          unlabelled={"without a label": [1, "y2"]},
                          pictures={"alpha": [2, "y0"]})  # fmt: skip
    b = ConversionSummary("o.bzna", images=1, bytes=5, written=["o-00000-of-00002.bzna"], num_shards=2,
                          targets=(1, 4), class_names=["a"], skipped=[("x", "bad")], labelled=0,
                          unlabelled={"without a label": [1, "x1"]},
                          pictures={"cmyk": [1, "x0"]})  # fmt: skip
    merged = merge_summaries([a, b])
    assert merged.written == ["o-00000-of-00002.bzna", "o-00001-of-00002.bzna"]
    assert (merged.images, merged.bytes, merged.targets, merged.num_shards) == (3, 15, (1, 5), 2)
    assert merged.class_names == ["a", "b"] and merged.skipped == [("x", "bad"), ("y", "bad")]
    assert merged.labelled == 1 and merged.unlabelled == {"without a label": [2, "x1"]}
    assert merged.pictures == {"cmyk": [1, "x0"], "alpha": [2, "y0"]}
    assert merge_summaries([], "o.bzna").images == 0


def test_merge_summaries_refuses_shards_that_name_a_class_two_ways():
    # Each shard checks only its own records: the merge is where two shards' names meet.
    shard = functools.partial(ConversionSummary, "o.bzna", num_shards=2)
    a = shard(written=["o-00000-of-00002.bzna"], class_names=["cat", "dog"])
    b = shard(written=["o-00001-of-00002.bzna"], class_names=[None, "wolf"])
    with pytest.raises(ConversionError, match=r"o-00001-of-00002.bzna names class 1 'wolf', but "
                       r"o-00000-of-00002.bzna names it 'dog'.*--class-names FILE"):  # fmt: skip
        merge_summaries([b, a])
    same = shard(written=["o-00001-of-00002.bzna"], class_names=[None, "dog"])
    assert merge_summaries([same, a]).class_names == ["cat", "dog"]
