"""The conversion order: shuffled by default with a fixed, recorded seed, the same way for every source.

The walkthrough's case: a folder conversion kept its classes in order, so
``split='[80%:]'`` held only the last class and shard 0 of 4 only class 0.
"""

import json

import numpy as np
import pytest
from conftest import gradient
from test_convert import write_gulp_chunk
from test_convert_shards import make_folder, ppm, tfrecord

from bzna_tf.cli import main
from bzna_tf.format import BznaFile

FAST = ["--processes", "0", "--preset", "ultrafast", "--chroma", "average", "--no-progress"]
MASK = (1 << 64) - 1


def reference_order(total, seed):
    """The documented shuffle, in plain Python: indices sorted by SplitMix64(SplitMix64(seed) ^ index)."""

    def mix(x):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
        return x ^ (x >> 31)

    key = mix(seed)
    return sorted(range(total), key=lambda i: mix(key ^ i))


@pytest.fixture()
def classes(tmp_path):
    """Four classes of six images, in class order on disk."""
    return make_folder(tmp_path / "src", {c: 6 for c in ("ant", "bee", "cat", "dog")}, size=(16, 24))


def targets_of(paths):
    out = []
    for p in paths:
        with BznaFile(p) as f:
            out.append(f.targets.tolist())
    return out


def test_a_folder_is_shuffled_by_default_so_every_shard_and_slice_holds_every_class(
    tmp_path, classes, capsys
):
    import bzna_tf

    out = tmp_path / "out" / "train.bzna"
    (tmp_path / "out").mkdir()
    assert main(["convert", "folder", str(classes), str(out), *FAST, "--num-shards", "4"]) == 0
    shards = sorted((tmp_path / "out").glob("train-*.bzna"))
    per_shard = targets_of(shards)
    assert all(len(set(t)) >= 2 for t in per_shard), per_shard  # class order: shard 0 held only class 0
    everything = sum(per_shard, [])
    assert sorted(everything) == sorted([0, 1, 2, 3] * 6)
    tail = bzna_tf.ClassificationDataset(tmp_path / "out", split="[80%:]").targets.tolist()
    assert len(set(tail)) >= 2, tail  # class order: the last 20% held only the last class
    assert "order: shuffled with seed 0" in capsys.readouterr().out
    with BznaFile(shards[2]) as f:
        facts = f.metadata["conversion"]
    assert (facts["order"], facts["seed"], facts["start"], facts["stop"]) == ("shuffle", 0, 12, 18)


def test_the_order_is_the_documented_permutation_for_every_source(tmp_path, classes):
    from bzna_tf.convert import (
        EncodeOptions,
        GulpSource,
        ImageFolderSource,
        TFRecordSource,
        conversion_order,
        convert,
    )
    from bzna_tf.convert.plan import DEFAULT_SEED

    encoding = {"encoding": EncodeOptions(preset="ultrafast", crf=30)}
    assert DEFAULT_SEED == 0
    for n, seed in [(1, 0), (7, 0), (24, 5), (1000, 2**64 - 1)]:
        assert conversion_order(n, "shuffle", seed).tolist() == reference_order(n, seed)
    assert conversion_order(5, "source", 3).tolist() == [0, 1, 2, 3, 4]
    records = [{"image/encoded": ppm(gradient(8, 8, seed=i)), "image/class/label": i} for i in range(9)]
    tfrecord(tmp_path / "r-0", records[:5])
    tfrecord(tmp_path / "r-1", records[5:])
    write_gulp_chunk(tmp_path / "g", 0, {str(v): (v, [gradient(8, 8, seed=v)] * 2) for v in range(4)})
    sources = {
        "folder": ImageFolderSource(classes),
        "tfrecord": TFRecordSource(str(tmp_path / "r-*"), label_offset=0),
        "gulp": GulpSource(tmp_path / "g"),
    }
    for kind, src in sources.items():
        names = [i.filename for i in src]
        out = tmp_path / f"{kind}.bzna"
        convert(src, out, workers=0, seed=11, progress=False, **encoding)
        with BznaFile(out) as f:
            assert f.filenames() == [names[i] for i in reference_order(len(src), 11)], kind
            assert (f.metadata["conversion"]["order"], f.metadata["conversion"]["seed"]) == ("shuffle", 11)


def test_order_source_keeps_the_source_order_and_the_seed_decides_the_rest(tmp_path, classes, capsys):
    def run(name, *extra):
        out = tmp_path / f"{name}.bzna"
        assert main(["convert", "folder", str(classes), str(out), *FAST, *extra]) == 0
        return out

    source = run("source", "--order", "source")
    assert "order: the source's" in capsys.readouterr().out
    with BznaFile(source) as f:
        assert f.targets.tolist() == sorted(f.targets.tolist())
        assert f.metadata["conversion"]["order"] == "source" and f.metadata["conversion"]["seed"] is None
    a, again, other = run("a"), run("again", "--seed", "0"), run("other", "--seed", "1")
    assert a.read_bytes() == again.read_bytes()  # the default seed is 0, fixed
    with BznaFile(a) as f, BznaFile(other) as g:
        assert f.filenames() != g.filenames() and sorted(f.filenames()) == sorted(g.filenames())


def test_a_rerun_with_another_order_or_seed_is_another_conversion(tmp_path, classes, capsys):
    out = tmp_path / "x.bzna"
    argv = ["convert", "folder", str(classes), str(out), *FAST, "--num-shards", "2"]
    assert main(argv) == 0
    assert main(argv) == 0 and "skipped 2 files that were already converted" in capsys.readouterr().out
    for extra, why in [
        (["--seed", "3"], "other seed (seed 0, now 3)"),
        (["--order", "source"], "other order"),
    ]:
        assert main([*argv, *extra]) == 1
        err = capsys.readouterr().err
        assert "refusing to replace existing files" in err and why in err, err
    assert main([*argv, "--seed", "3", "--overwrite"]) == 0


def test_shard_lists_are_checked_in_the_shuffled_order(tmp_path, classes):
    """An array job's shards, written separately, are the shards of the whole shuffled conversion."""
    from bzna_tf.convert import EncodeOptions, ImageFolderSource, convert

    encoding = EncodeOptions(preset="ultrafast", crf=30)
    (tmp_path / "whole").mkdir()
    (tmp_path / "parts").mkdir()
    common = {"num_shards": 3, "workers": 0, "encoding": encoding, "seed": 9, "progress": False}
    convert(ImageFolderSource(classes), tmp_path / "whole" / "t.bzna", **common)
    for k in (2, 0, 1):
        convert(ImageFolderSource(classes), tmp_path / "parts" / "t.bzna", shards=[k], **common)
    for p in sorted((tmp_path / "whole").iterdir()):
        assert (tmp_path / "parts" / p.name).read_bytes() == p.read_bytes()


def test_compressed_tfrecords_cannot_be_shuffled_and_say_so(tmp_path, capsys):
    import tensorflow as tf

    def feature(**kw):
        return tf.train.Feature(**kw)

    with tf.io.TFRecordWriter(str(tmp_path / "z-0"), tf.io.TFRecordOptions(compression_type="GZIP")) as w:
        for i in range(3):
            image = feature(bytes_list=tf.train.BytesList(value=[ppm(gradient(8, 8, seed=i))]))
            label = feature(int64_list=tf.train.Int64List(value=[i]))
            features = tf.train.Features(feature={"image/encoded": image, "image/class/label": label})
            w.write(tf.train.Example(features=features).SerializeToString())
    out = tmp_path / "z.bzna"
    argv = [
        "convert",
        "tfrecord",
        str(tmp_path / "z-*"),
        str(out),
        *FAST,
        "--compression",
        "GZIP",
        "--label-offset",
        "0",
    ]
    assert main(argv) == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "Expected order='source' (--order source): GZIP-compressed TFRecord files can only be read" in err
    assert main([*argv, "--order", "source"]) == 0
    with BznaFile(out) as f:
        assert f.targets.tolist() == [0, 1, 2]


def test_the_summary_json_of_info_shows_the_order(tmp_path, classes, capsys):
    out = tmp_path / "x.bzna"
    assert main(["convert", "folder", str(classes), str(out), *FAST, "--seed", "42"]) == 0
    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["conversion"]
    assert facts["order"] == "shuffle" and facts["seed"] == 42
    assert np.array_equal(sorted(BznaFile(out).targets.tolist()), sorted([0, 1, 2, 3] * 6))
