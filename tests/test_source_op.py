"""The C++ source op (BznaDataset) against the Python reader, checkpoints, tf.data service."""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from bzna_tf import BznaFile, BznaWriter
from bzna_tf.ops import BznaDataset, num_samples


def _elements(ds):
    return [{k: v.numpy() for k, v in e.items()} for e in ds]


@pytest.mark.every_original
@pytest.mark.parametrize("track", ["thumb", "input"])
def test_every_element_matches_the_python_reader(original_path, manifest, track):
    ds = BznaDataset(str(original_path), track=track, with_filenames=True)
    assert ds.cardinality().numpy() == 12
    assert set(ds.element_spec) == {"data", "filename", "height", "index", "target", "width"}
    got = _elements(ds)
    with BznaFile(original_path) as f:
        for i, e in enumerate(got):
            s = f.sample(i)
            pic = s.thumb if track == "thumb" else s.input
            m = manifest["samples"][i]
            assert e["index"] == i
            assert e["data"] == pic.annexb()
            assert (e["width"], e["height"]) == tuple(m["thumb_size" if track == "thumb" else "image_size"])
            assert e["target"] == f.target(i) == (-1 if m["target"] is None else m["target"])
            assert e["filename"].decode() == m["filename"]


def test_order_and_subsets_follow_indices(original_path):
    order = [11, 3, 3, 0, 7]
    got = _elements(BznaDataset(original_path, np.array(order, np.int32)))
    assert [e["index"] for e in got] == order
    assert "filename" not in got[0]
    assert got[1]["data"] == got[2]["data"]
    assert _elements(BznaDataset(original_path, tf.constant([], tf.int64))) == []


def test_several_files_are_concatenated(original_path, manifest, pictures, tmp_path):
    second = tmp_path / "b.bzna"
    with BznaWriter(second) as w:
        for k, (inp, thumb) in enumerate(pictures):
            w.append(inp, thumb=thumb, target=100 + k if k < 2 else None, filename=f"p{k}.png")
    n, labelled = num_samples([original_path, second])
    assert n.tolist() == [12, 3] and labelled.tolist() == [9, 2]
    got = _elements(BznaDataset([original_path, second], [13, 12, 14, 0], with_filenames=True))
    assert [e["index"] for e in got] == [13, 12, 14, 0]
    first = manifest["samples"][0]
    assert [e["target"] for e in got] == [101, 100, -1, first["target"]]
    assert [e["filename"] for e in got] == [b"p1.png", b"p0.png", b"p2.png", first["filename"].encode()]
    with BznaFile(second) as f:
        assert got[0]["data"] == f.sample(1).thumb.annexb()
        assert (got[0]["width"], got[0]["height"]) == f.sample(1).thumb.size
    # Default indices: every sample of every file, in order.
    assert [e["index"] for e in _elements(BznaDataset([original_path, second]))] == list(range(15))


def test_argument_errors(original_path, tmp_path):
    with pytest.raises(ValueError, match="track"):
        BznaDataset(original_path, track="full")
    with pytest.raises(TypeError, match="integer indices"):
        BznaDataset(original_path, [0.5])
    with pytest.raises(ValueError, match="vector"):
        BznaDataset(original_path, [[0]])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"indices\[1\] = 12 is out of range.* 12 samples"
    ):
        BznaDataset(original_path, [0, 12])
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        BznaDataset(original_path, [-1])
    with pytest.raises(tf.errors.NotFoundError):
        BznaDataset(tmp_path / "missing.bzna")
    with pytest.raises(tf.errors.InvalidArgumentError, match="at least one"):
        BznaDataset([])


def test_a_relative_path_is_opened_from_the_working_directory_the_op_was_made_in(
    original_path, tmp_path, monkeypatch
):
    # Later, the working directory moves (a notebook's %cd) to a folder with another file of that name: the
    # dataset's iterators and a read_samples traced before the move read the file meant when they were
    # made, and errors still name it as given.
    from bzna_tf.ops import read_samples

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    shutil.copy(original_path, tmp_path / "a" / "x.bzna")
    (tmp_path / "b" / "x.bzna").write_bytes(b"another file")
    monkeypatch.chdir(tmp_path / "a")
    ds = BznaDataset("x.bzna", [0, 11], with_filenames=True)
    read = tf.function(lambda i: read_samples("x.bzna", i, with_filenames=True)["filename"])
    traced = read.get_concrete_function(tf.TensorSpec([None], tf.int64))
    want = [e["filename"] for e in _elements(ds)]
    monkeypatch.chdir(tmp_path / "b")
    assert [e["filename"] for e in _elements(ds)] == want
    assert traced(tf.constant([0, 11], tf.int64)).numpy().tolist() == want
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"index 12 is out of range: x\.bzna holds 12"):
        traced(tf.constant([12], tf.int64))


def test_checkpoint_mid_epoch_then_restore_in_a_fresh_pipeline(original_path, tmp_path):
    order = np.random.default_rng(3).permutation(12)

    def pipeline():
        return BznaDataset(original_path, order).map(lambda e: (e["index"], tf.strings.length(e["data"])))

    whole = [(int(i), int(n)) for i, n in pipeline()]
    it = iter(pipeline())
    first = [(int(i), int(n)) for i, n in (next(it) for _ in range(5))]
    path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
    next(it)  # moving on after the save must not matter

    fresh = iter(pipeline())
    tf.train.Checkpoint(iterator=fresh).restore(path).assert_consumed()
    rest = [(int(i), int(n)) for i, n in fresh]
    assert first + rest == whole
    assert [i for i, _ in whole] == order.tolist()


def test_save_and_load_the_dataset_graph(original_path, tmp_path):
    ds = BznaDataset(original_path, [5, 1], track="input", with_filenames=True)
    tf.data.Dataset.save(ds, str(tmp_path / "saved"))
    back = tf.data.Dataset.load(str(tmp_path / "saved"))
    assert [e["index"] for e in _elements(back)] == [5, 1]
    # The graph itself serialises (what tf.data service ships to workers).
    graph = ds._as_serialized_graph().numpy()
    assert b"BznaDataset" in graph


def test_tf_data_service_distributed_epoch_delivers_every_sample_once(original_path):
    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    workers = [
        tf.data.experimental.service.WorkerServer(
            tf.data.experimental.service.WorkerConfig(dispatcher_address=address)
        )
        for _ in range(2)
    ]
    order = np.random.default_rng(5).permutation(12)
    ds = BznaDataset(original_path, order).map(lambda e: e["index"])
    ds = ds.apply(
        tf.data.experimental.service.distribute(
            processing_mode="distributed_epoch", service=dispatcher.target
        )
    )
    got = [int(i) for i in ds]
    assert sorted(got) == list(range(12))
    del workers


# ------------------------------------------------------------------ epoch_schedule, read_samples


def test_epoch_schedule_permutes_each_epoch_and_its_shards_cover_it():
    from bzna_tf.ops import epoch_schedule

    sel = tf.constant(np.arange(100, 137), tf.int64)  # 37 samples
    n = 37

    def run(positions, **kw):
        idx, ep = epoch_schedule(tf.constant(positions, tf.int64), sel, tf.constant(9, tf.int64), **kw)
        return idx.numpy(), ep.numpy()

    idx, ep = run(np.arange(3 * n), shuffle=True)
    assert ep.tolist() == [0] * n + [1] * n + [2] * n
    epochs = idx.reshape(3, n)
    for e in epochs:
        assert sorted(e.tolist()) == list(range(100, 137))  # a permutation of the selection
    assert len({tuple(e) for e in epochs}) == 3  # a new one each epoch
    # a pure function of (seed, epoch, position): any subset, in any order, agrees
    some = np.array([80, 3, 41, 40, 5])
    np.testing.assert_array_equal(run(some, shuffle=True)[0], idx[some])
    other = epoch_schedule(tf.constant(np.arange(n), tf.int64), sel, tf.constant(10, tf.int64), shuffle=True)
    assert not np.array_equal(other[0].numpy(), epochs[0])  # another seed, another order
    assert run(np.arange(n))[0].tolist() == list(range(100, 137))  # no shuffle: the selection's order
    # shards: per_epoch = ceil((n - index) / count), strided from the same epoch's order
    for e in range(2):
        sizes = [len(range(k, n, 3)) for k in range(3)]
        stream = [np.arange(e * m, (e + 1) * m) for m in sizes]
        parts = [run(stream[k], shuffle=True, shard=(3, k))[0] for k in range(3)]
        assert sorted(np.concatenate(parts).tolist()) == list(range(100, 137))
        np.testing.assert_array_equal(parts[1], epochs[e][1::3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative"):
        run(np.array([-1]))


def test_read_samples_matches_bzna_dataset(original_path):
    from bzna_tf.ops import read_samples

    order = [7, 0, 11, 3, 3]
    want = _elements(BznaDataset(str(original_path), order, with_filenames=True))
    got = read_samples(str(original_path), tf.constant(order, tf.int64), with_filenames=True)
    for k, el in enumerate(want):
        for key, value in el.items():
            assert got[key].numpy()[k] == value, key
    assert "filename" not in read_samples(str(original_path), tf.constant(order, tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="sample index 12 is out of range"):
        read_samples(str(original_path), tf.constant([1, 12], tf.int64))
