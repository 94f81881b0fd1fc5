"""Bad samples during training: errors name the file and the sample; on_error="skip" drops them and counts."""

import re
import shutil

import numpy as np
import pytest
from _pictures import _pic

from bzna_tf import BznaWriter, ClassificationDataset
from bzna_tf.format import BznaFile

tf = pytest.importorskip("tensorflow")

N = 12
UNDECODABLE = (3, 8)  # well-formed container, pictures FFmpeg cannot decode
DAMAGED = 5  # its per-image mp4 is broken: the read fails


def colour(i):
    return np.array([(40 * i) % 200 + 20, 200 - (15 * i) % 150, 90], dtype=np.uint8)


@pytest.fixture(scope="module")
def bad_file(tmp_path_factory):
    """N samples, targets i % 3: UNDECODABLE cannot be decoded, DAMAGED cannot be read."""
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("on_error") / "bad.bzna"
    with BznaWriter(path) as w:
        for i in range(N):
            if i in UNDECODABLE:
                w.append(_pic(7 + i, (40, 30), (512, 512)), target=i % 3, filename=f"img_{i:02d}.png")
                continue
            inp, thumb = encode_image(np.broadcast_to(colour(i), (24 + i, 32, 3)).copy(), preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 3, filename=f"img_{i:02d}.png")
    with BznaFile(path) as f:
        offset, _ = f.sample_location(DAMAGED)
    with open(path, "r+b") as f:  # the per-image mp4's first box claims 4 GiB
        f.seek(offset)
        f.write(b"\xff\xff\xff\xff")
    return path


def test_decode_warp_names_pictures_and_skips(bad_file):
    from bzna_tf.ops import decode_warp, read_samples

    el = read_samples([str(bad_file)], tf.constant([2, 3, 4], tf.int64))
    eye = np.eye(3, dtype=np.float32)
    names = ["bad.bzna, sample 2", "bad.bzna, sample 3", "bad.bzna, sample 4"]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad\.bzna, sample 3: could not decode the"):
        decode_warp(el["data"], eye, (4, 4), names=names)
    images, errors = decode_warp(
        el["data"], eye, (4, 4), names=names, on_error="skip", oob_color=(-1, -2, -3)
    )
    errors = errors.numpy()
    assert errors[0] == b"" and errors[2] == b""
    assert errors[1].startswith(b"bad.bzna, sample 3: could not decode the"), errors[1]
    np.testing.assert_array_equal(images[1], np.broadcast_to([-1, -2, -3], (4, 4, 3)))
    good = decode_warp(el["data"][2], eye, (4, 4))
    np.testing.assert_array_equal(images[2], good)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected `names` of shape \[0\] or \[3\]"):
        decode_warp(el["data"], eye, (4, 4), names=["x"])
    with pytest.raises(ValueError, match="on_error"):
        decode_warp(el["data"], eye, (4, 4), on_error="ignore")


def test_read_errors_name_the_sample_and_skip(bad_file):
    from bzna_tf.ops import read_samples

    idx = tf.constant([4, DAMAGED, 6], tf.int64)
    with pytest.raises(tf.errors.DataLossError, match=rf"bad\.bzna, sample {DAMAGED}\b"):
        read_samples([str(bad_file)], idx)
    el = read_samples([str(bad_file)], idx, on_error="skip", with_filenames=True)
    errors = el["errors"].numpy()
    assert errors[0] == errors[2] == b""
    assert re.search(rf"bad\.bzna, sample {DAMAGED}\b", errors[1].decode()), errors[1]
    assert el["data"].numpy()[1] == b"" and el["width"].numpy()[1] == 0
    assert el["target"].numpy().tolist() == [1, DAMAGED % 3, 0]
    assert el["filename"].numpy()[2] == b"img_06.png"


def test_a_file_cut_short_while_open_is_not_skipped(bad_file, tmp_path):
    """A file cut short while open (its index already read): its samples past the end are not skipped as
    unreadable ones, which would drop the rest of an epoch: the file changed, and the op says so."""
    from bzna_tf.ops import read_samples

    path = tmp_path / "cut.bzna"
    shutil.copy(bad_file, path)
    with BznaFile(path) as f:
        cut = f.sample_location(N - 2)[0] + 10
    size = path.stat().st_size
    idx = tf.constant([0, N - 2, N - 1], tf.int64)
    first = read_samples([str(path)], idx[:1], on_error="skip")
    assert first["errors"].numpy()[0] == b""
    with open(path, "r+b") as f:
        f.truncate(cut)
    changed = rf"cut\.bzna: the file changed since the dataset was opened \(.*: {size} bytes then, {cut} now"
    with pytest.raises(tf.errors.FailedPreconditionError, match=changed):
        read_samples([str(path)], idx, on_error="skip")


def test_fit_skips_bad_samples_counts_and_logs_them(bad_file, capfd):
    import keras

    ds = ClassificationDataset(str(bad_file))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad\.bzna, sample 3: could not decode"):
        for _ in ds.as_dataset(batch_size=4, shape=16):
            pass

    train = ds.as_dataset(
        batch_size=4, shape=16, shuffle=True, seed=3, on_error="skip", normalize=(0.5, 0.25)
    )
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((16, 16, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(train, epochs=2, verbose=0, shuffle=False)
    assert len(history.history["loss"]) == 2 and np.isfinite(history.history["loss"]).all()
    bad = {*UNDECODABLE, DAMAGED}
    assert train.bzna_skipped.count == 2 * len(bad)
    recent = train.bzna_skipped.recent
    assert len(recent) == 2 * len(bad)
    assert {int(re.search(r"bad\.bzna, sample (\d+)", r).group(1)) for r in recent} == bad
    log = capfd.readouterr().err
    for i in bad:
        assert re.search(
            rf"bzna_tf skipped an unreadable sample \(\d+ so far\): \S*bad\.bzna, sample {i}\b", log
        )

    # One epoch yields every good sample once, with its own label; batches only shrink.
    seen = ds.as_dataset(batch_size=4, shape=16, on_error="skip", with_filenames=True)
    sizes, got = [], {}
    for images, labels, names in seen:
        sizes.append(int(images.shape[0]))
        for label, name in zip(labels.numpy(), names.numpy(), strict=True):
            got[int(name.decode()[4:6])] = int(label)
    assert got == {i: i % 3 for i in range(N) if i not in bad}
    assert sizes == [3, 3, 3]  # batches 0-3, 4-7, 8-11 each lose one
    assert seen.bzna_skipped.count == len(bad) and seen.bzna_skipped.counter != train.bzna_skipped.counter


def test_gpu_payloads_skip_read_errors(bad_file):
    """device="model": pictures are decoded in the model; unreadable samples are dropped in tf.data."""
    ds = ClassificationDataset(str(bad_file)).as_dataset(
        batch_size=N, shape=16, device="model", on_error="skip"
    )
    (payload, labels) = next(iter(ds))
    assert payload["data"].shape[0] == payload["matrices"].shape[0] == labels.shape[0] == N - 1
    assert payload["picture_sizes"].shape == (N - 1, 2) and np.all(payload["picture_sizes"].numpy() > 0)
    assert ds.bzna_skipped.count == 1


@pytest.mark.parametrize("initial_epoch", [None, 0])
def test_ignore_errors_after_as_dataset_ends_each_iteration(bad_file, initial_epoch):
    # Batches 0-3, 4-7 and 8-11 each hold a bad sample: ignore_errors drops all three, and the
    # iteration ends (TensorFlow's assert_cardinality, where the count was stated with it, failed again
    # at every later call once a batch had failed: ignore_errors then asked for ever).
    ds = ClassificationDataset(str(bad_file)).as_dataset(batch_size=4, shape=16, initial_epoch=initial_epoch)
    assert int(ds.cardinality()) == 3
    for _ in range(2):  # two iterations (two data epochs with initial_epoch=None)
        assert list(ds.ignore_errors()) == []
    good = ClassificationDataset(str(bad_file)).select([0, 1, 2, 4, 6, 7])
    ds = good.as_dataset(batch_size=4, shape=16, initial_epoch=initial_epoch)
    assert int(ds.cardinality()) == 2 and [int(b[0].shape[0]) for b in ds.ignore_errors()] == [4, 2]


def test_an_iterator_checkpoint_written_under_assert_cardinality_restores(bad_file, tmp_path, monkeypatch):
    # The epoch counter's op states the count where TensorFlow's assert_cardinality did, and keeps the
    # iterator prefix the batches had under it: a checkpoint written with that op restores.
    from bzna_tf.datasets import pipeline

    good = ClassificationDataset(str(bad_file)).select([0, 1, 2, 4, 6, 7, 9, 10, 11])

    def labels(it):
        return [y.numpy().tolist() for _, y in it]

    class Before(pipeline._CounterCheckpoint):  # the pipeline as it was built before
        def __init__(self, ds, counter, cardinality):
            super().__init__(ds.apply(tf.data.experimental.assert_cardinality(cardinality)), counter, -2)

    with monkeypatch.context() as m:
        m.setattr(pipeline, "_CounterCheckpoint", Before)
        old = good.as_dataset(batch_size=2, shape=8, shuffle=True, seed=4)
    it = iter(old)
    next(it), next(it)
    tf.train.Checkpoint(it=it, epochs=old.bzna_epochs.variable).write(str(tmp_path / "ckpt"))
    rest = labels(it)
    assert len(rest) == 3
    new = good.as_dataset(batch_size=2, shape=8, shuffle=True, seed=4)
    it = iter(new)
    tf.train.Checkpoint(it=it, epochs=new.bzna_epochs.variable).read(str(tmp_path / "ckpt")).assert_consumed()
    assert labels(it) == rest
