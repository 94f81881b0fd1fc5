"""Dataset, ClassificationDataset, ImageNet and as_dataset()."""

import collections
import contextlib
import os
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import bzna_tf
from bzna_tf import BznaWriter, ClassificationDataset, Dataset, ImageNet

tf = pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[1]
N, LABELLED = 23, 20  # an odd count: uneven shards and a short last batch
# Every sample, the unlabelled tail with label -1 (the default warp is deterministic: training=False is moot).
ALL = dict(training=False, unlabelled="keep")


def colour(i):
    """Sample i's flat colour: the decoded picture tells which sample it is."""
    return np.array([(37 * i) % 200 + 20, 230 - (23 * i) % 200, 60 + (i % 4) * 40], dtype=np.uint8)


@pytest.fixture(scope="session")
def flat_file(tmp_path_factory):
    """N flat-coloured pictures of assorted sizes; targets i % 4 for the first LABELLED, then none."""
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("datasets") / "flat.bzna"
    rng = np.random.default_rng(0)
    with BznaWriter(path) as w:
        for i in range(N):
            h, w_ = (int(v) for v in rng.integers(40, 120, 2))
            inp, thumb = encode_image(np.broadcast_to(colour(i), (h, w_, 3)).copy(), preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 4 if i < LABELLED else None, filename=f"img_{i:03d}.png")
    return path


def sample_of(name):
    return int(name.decode()[4:7])


def run(ds):
    """Every element of a dataset as NumPy tuples."""
    return [tuple(np.asarray(t) for t in el) for el in ds]


def names(ds):
    return [sample_of(n) for el in ds for n in el[-1].numpy()]


# ---------------------------------------------------------------------------------------------- opening


def test_len_targets_filenames(flat_file):
    d = ClassificationDataset(flat_file)
    assert len(d) == N and d.paths == [str(flat_file)]
    assert d.targets.tolist() == [i % 4 for i in range(LABELLED)] + [-1] * (N - LABELLED)
    assert d.filenames == [f"img_{i:03d}.png" for i in range(N)]
    assert d.num_classes == 4 and d.indices.tolist() == list(range(N))
    assert "samples=23" in repr(d)
    sub = d.select([5, 2, 7])
    assert sub.indices.tolist() == [5, 2, 7] and sub.targets.tolist() == [1, 2, 3]
    assert d.select(d.targets == 3).indices.tolist() == [3, 7, 11, 15, 19]
    half = Dataset(flat_file, split="[:50%]")
    assert half.indices.tolist() == list(range(12))  # round(11.5) = 12, as TFDS rounds
    assert Dataset(flat_file, split="all[-3:]+[0]").indices.tolist() == [20, 21, 22, 0]


def test_select_repeats_positions_on_purpose(flat_file):
    # Oversampling: a position given twice is read twice an epoch, shuffled or not.
    d = ClassificationDataset(flat_file).select([1, 2, 2, 5, 5, 5])
    assert d.indices.tolist() == [1, 2, 2, 5, 5, 5] and len(d) == 6
    for shuffle in (False, True):
        ds = d.as_dataset(batch_size=4, shape=8, shuffle=shuffle, seed=3, with_filenames=True, **ALL)
        assert sorted(names(ds)) == [1, 2, 2, 5, 5, 5]


def test_an_oversampled_samples_copies_get_their_own_crops(flat_file):
    from bzna_tf.datasets.pipeline import warp_keys

    assert warp_keys(np.array([7, 3, 7, 7, 3, 1]), 10).tolist() == [7, 3, 17, 27, 13, 1]
    warp = bzna_tf.layers.RandomResizedCrop(8, 8, flip_h=0.5)

    def matrices(selection):  # the pictures are flat colours: their warps tell the copies apart
        ds = ClassificationDataset(flat_file).select(selection)
        out = ds.as_dataset(
            batch_size=len(selection), shape=8, warp=warp, seed=11, unlabelled="keep", device="model"
        )
        payload, _ = next(iter(out))
        return payload["matrices"].numpy(), payload["data"].numpy()

    m, data = matrices([3, 3, 3, 5])
    assert data[0] == data[1] == data[2] != data[3]  # the same picture, three times
    assert len({m[k].tobytes() for k in range(3)}) == 3
    # The first copy is the sample as a selection without repeats has it.
    alone, _ = matrices([3, 5])
    np.testing.assert_array_equal(m[[0, 3]], alone)


def test_opening_errors(flat_file, tmp_path):
    with pytest.raises(ValueError, match="track"):
        Dataset(flat_file, track="bzna_target")
    with pytest.raises(ValueError, match="Unknown split 'train'.*flat.bzna"):
        Dataset(flat_file, split="train")
    with pytest.raises(FileNotFoundError):
        Dataset(tmp_path / "missing.bzna")
    with pytest.raises(FileNotFoundError, match="no file matches"):
        Dataset(str(tmp_path / "*.bzna"))
    with pytest.raises(bzna_tf.BznaFormatError, match="not-a-bzna"):
        (tmp_path / "not-a-bzna").write_bytes(b"\0" * 64)
        Dataset(tmp_path / "not-a-bzna")
    d = Dataset(flat_file)
    with pytest.raises(IndexError, match=f"position {N} out of range .* from 0 to {N - 1}"):
        d.select([N])
    with pytest.raises(IndexError, match="position -1 out of range"):
        d.select([0, -1])  # not the last sample: a position computed wrong
    mask = (d.targets == 2).astype(np.int64)  # a 0/1 column, not a boolean mask
    with pytest.raises(ValueError, match="all 0 or 1, one per sample.*np.asarray\\(mask, bool\\)"):
        d.select(mask)
    assert d.select(mask.astype(bool)).indices.tolist() == np.flatnonzero(mask).tolist()
    with pytest.raises(ValueError, match="as positions they read sample 1 only"):
        d.select(np.ones(N, np.int64))  # sample 1, N times: said as what it reads
    with pytest.raises(ValueError, match="matched no sample"):
        d.select(d.targets == 99)
    assert d.select([0, 1]).select(np.r_[[0] * (N - 1), 1]).indices.tolist() == [0] * (N - 1) + [1]
    with pytest.raises(ValueError, match="empty"):
        d.select([])
    with pytest.raises(ValueError, match="mask"):
        d.select(np.ones(3, bool))


def test_a_dataset_opened_by_a_relative_path_keeps_its_file_after_a_chdir(flat_file, tmp_path, monkeypatch):
    # Later, the working directory moves (a notebook's %cd) to a folder with another file of that name: the
    # dataset and its pipelines, made before the move or after, read the file it opened.
    import shutil

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    shutil.copy(flat_file, tmp_path / "a" / "x.bzna")
    (tmp_path / "b" / "x.bzna").write_bytes(b"another file")
    monkeypatch.chdir(tmp_path / "a")
    ds = Dataset("x.bzna")
    before = ds.as_dataset(batch_size=8, shape=8, with_filenames=True, training=False)
    assert names(before) == list(range(N))
    monkeypatch.chdir(tmp_path / "b")
    assert names(before) == list(range(N))
    after = ds.as_dataset(batch_size=8, shape=8, with_filenames=True, training=False)
    assert names(after) == list(range(N))
    assert ds.filenames[0] == "img_000.png" and ds.paths == ["x.bzna"]


@pytest.fixture(scope="session")
def imagenet_index(tmp_path_factory):
    """An index-only file with ImageNet's 1,431,167 entries (placeholder payloads, real index)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import index_open
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    folder = tmp_path_factory.mktemp("imagenet")
    index_open.build(str(folder / "ilsvrc2012.bzna"), index_open.IMAGENET_ENTRIES)
    return folder


def test_imagenet_splits_and_slicing(imagenet_index):
    path = imagenet_index / "ilsvrc2012.bzna"
    sizes = {s: len(ImageNet(path, split=s)) for s in ("train", "val", "validation", "test")}
    assert sizes == {"train": 1_281_167, "val": 50_000, "validation": 50_000, "test": 100_000}
    assert len(ImageNet(imagenet_index)) == 1_431_167  # a directory holding ilsvrc2012.bzna
    assert len(ImageNet(path, split="train[:10%]")) == 128_117  # round(128116.7)
    assert ImageNet(path, split="val[1000:2000]").indices.tolist() == list(range(1_282_167, 1_283_167))
    assert len(ImageNet(path, split="train+val")) == 1_331_167
    assert ImageNet(path, split="test[-1]").indices.tolist() == [1_431_166]
    assert ImageNet(path, split="val[-10%:]").indices[0] == 1_326_167
    val = ImageNet(path, split="val")
    with bzna_tf.BznaFile(path) as f:
        assert (val.targets == f.targets[1_281_167:1_331_167]).all()
    assert (ImageNet(path, split="test[:100]").targets == -1).all()  # the test split has no labels
    assert ImageNet(path).num_classes == 1000
    spec = ImageNet(path, split="train").as_dataset(batch_size=256, shape=224, shuffle=True, seed=1)
    assert spec.element_spec[0].shape.as_list() == [None, 224, 224, 3]
    assert spec.cardinality().numpy() == 5005  # ceil(1,281,167 / 256)
    with pytest.raises(ValueError, match="Unknown split 'dev'"):
        ImageNet(path, split="dev")
    with pytest.raises(FileNotFoundError, match="ilsvrc2012.bzna or ilsvrc2012.mp4"):
        ImageNet(imagenet_index / "..")


def test_a_sum_of_overlapping_splits_is_refused(imagenet_index):
    path = imagenet_index / "ilsvrc2012.bzna"
    # Typos in a bound that put held-out samples in training, or read samples twice per epoch.
    for spec, shared in [
        ("train[:60%]+train[50%:]", "128,116 samples twice"),
        ("train+all", "1,281,167 samples twice"),
        ("val[:1000]+val[999]", "1 sample twice"),
    ]:
        with pytest.raises(ValueError, match=shared) as e:
            ImageNet(path, split=spec)
        assert "overlap" in str(e.value) and "Dataset.select" in str(e.value)
    # Adjacent and disjoint parts are a sum.
    assert len(ImageNet(path, split="train[:50%]+train[50%:]")) == 1_281_167
    assert len(ImageNet(path, split="val[5]+val[7]+test")) == 100_002


def test_imagenet_needs_room_for_val_and_test(flat_file):
    with pytest.raises(ValueError, match="at least 150000 entries"):
        ImageNet(flat_file, split="train")
    assert len(ImageNet(flat_file, split="all[:5]")) == 5


# ---------------------------------------------------------------------------------------------- elements


def test_element_spec_and_exact_labels(flat_file):
    d = ClassificationDataset(flat_file)
    ds = d.as_dataset(batch_size=5, shape=(24, 32), with_filenames=True, **ALL)
    images, labels, fnames = ds.element_spec
    assert images == tf.TensorSpec([None, 24, 32, 3], tf.float32)
    assert labels == tf.TensorSpec([None], tf.int64) and fnames == tf.TensorSpec([None], tf.string)
    assert ds.cardinality().numpy() == 5
    seen = []
    for x, y, n in run(ds):
        for image, label, name in zip(x, y, n, strict=True):
            i = sample_of(name)
            seen.append(i)
            assert label == (i % 4 if i < LABELLED else -1)
            # The whole picture is one colour: every output pixel shows it (H.265 keeps flat areas).
            np.testing.assert_allclose(image.reshape(-1, 3).mean(0), colour(i), atol=3)
    assert seen == list(range(N))  # no shuffle: the file's order
    # Static batch dimension, channels first, labels only.
    with pytest.warns(UserWarning, match=r"drop_remainder=True\) leaves out the last 3 samples of each"):
        ds = d.as_dataset(batch_size=5, shape=8, data_format="channels_first", drop_remainder=True, **ALL)
    assert ds.element_spec[0].shape.as_list() == [5, 3, 8, 8] and ds.cardinality().numpy() == 4
    assert [y.shape[0] for _, y in ds] == [5, 5, 5, 5]


def test_data_format_follows_keras_unless_given_and_a_conflicting_warp_layer_is_refused(flat_file):
    import keras

    d = ClassificationDataset(flat_file)
    before = keras.config.image_data_format()
    try:
        keras.config.set_image_data_format("channels_first")  # as image_dataset_from_directory follows it
        assert d.as_dataset(batch_size=5, shape=8, **ALL).element_spec[0].shape.as_list() == [None, 3, 8, 8]
        given = d.as_dataset(batch_size=5, shape=8, data_format="channels_last", **ALL)
        assert given.element_spec[0].shape.as_list() == [None, 8, 8, 3]
        first = bzna_tf.layers.CenterResizedCrop(8, 8)  # made under channels_first: its data_format says so
        keras.config.set_image_data_format("channels_last")
        assert first.data_format == "channels_first"
        with pytest.raises(ValueError, match="warp layer's data_format is 'channels_first' and Keras'"):
            d.as_dataset(batch_size=5, warp=first, **ALL)
        chosen = d.as_dataset(batch_size=5, warp=first, data_format="channels_last", **ALL)
        assert chosen.element_spec[0].shape.as_list() == [None, 8, 8, 3]
        # device="model" makes no images: the layer's layout is not compared (the refusal asked for a
        # data_format that device="model" then refused in turn).
        payloads = d.as_dataset(batch_size=5, warp=first, device="model", **ALL)
        assert sorted(payloads.element_spec[0]) == ["data", "matrices", "picture_sizes"]
    finally:
        keras.config.set_image_data_format(before)


def test_a_drawn_seed_follows_tensorflows_global_seed_as_tf_data_does(flat_file):
    d = ClassificationDataset(flat_file)

    def order():
        ds = d.as_dataset(batch_size=N, shape=8, shuffle=True, with_filenames=True, **ALL)
        return names(ds)

    try:
        tf.random.set_seed(5)  # as keras.utils.set_random_seed does
        a, b = order(), order()
        tf.random.set_seed(5)
        assert order() == a and order() == b  # the same program, the same pipelines
        assert a != b  # each pipeline another seed, as shuffle(seed=None) ops get
        assert sorted(a) == list(range(N))
        # A pipeline that draws nothing takes no seed: the program's other random ops stay as they were.
        tf.random.set_seed(5)
        alone = tf.random.uniform([]).numpy()
        tf.random.set_seed(5)
        d.as_dataset(batch_size=4, shape=8, **ALL)  # no shuffle, the default (fixed) warp
        assert tf.random.uniform([]).numpy() == alone
    finally:
        tf.random.set_seed(None)


def test_unlabelled_dataset_yields_images_only(flat_file):
    ds = Dataset(flat_file, track="bzna_thumb").as_dataset(batch_size=10, shape=(16, 16))
    assert ds.element_spec == tf.TensorSpec([None, 16, 16, 3], tf.float32)
    assert [b.shape[0] for b in ds] == [10, 10, 3]
    ds = Dataset(flat_file).as_dataset(batch_size=10, shape=(16, 16), with_filenames=True)
    assert names(ds) == list(range(N))


def test_normalisation_and_warp_layers(flat_file):
    d = ClassificationDataset(flat_file).select([3])
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    (x, _), *_ = run(d.as_dataset(batch_size=1, shape=12, normalize=(mean, std)))
    np.testing.assert_allclose(x[0].reshape(-1, 3).mean(0), (colour(3) / 255 - mean) / std, atol=0.06)
    (b, _), *_ = run(
        d.as_dataset(batch_size=1, shape=12, normalize=bzna_tf.layers.Normalize(bias=10, norm=0.5))
    )
    np.testing.assert_allclose(b[0].reshape(-1, 3).mean(0), (colour(3) - 10.0) * 0.5, atol=2)
    # A layer gives the output shape; zooming out far leaves fill_value around the picture.
    layer = bzna_tf.layers.CenterResizedCrop(20, 30, scale=4.0, fill_value=7.0)
    (z, _), *_ = run(d.as_dataset(batch_size=1, warp=layer))
    assert z.shape == (1, 20, 30, 3) and (z[0, 0, 0] == 7).all() and (z[0, 10, 15] != 7).any()
    # A transform (no Keras) works too, with an explicit shape.
    (t, _), *_ = run(
        d.as_dataset(batch_size=1, shape=(20, 30), warp=bzna_tf.transforms.CenterResizedCrop(4.0))
    )
    assert (t[0, 0, 0] == 0).all()


def test_a_model_given_the_documented_fill_pads_as_as_dataset_does(flat_file):
    # as_dataset normalises the picture and leaves the fill raw (SPEC section 4); in a model, a Normalize
    # layer after the warp layer normalises the fill too. The layers guide's recipe, a warp layer's
    # fill_value = bias + v / norm, gives the model the frame as_dataset trained it on (v).
    d = ClassificationDataset(flat_file).select([3])
    normalize = bzna_tf.layers.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    warp = bzna_tf.layers.CenterResizedCrop(20, 30, scale=4.0)
    (x, _), *_ = run(d.as_dataset(batch_size=1, warp=warp, normalize=normalize, fill_value=0.5))
    np.testing.assert_array_equal(x[0, 0, 0], [0.5, 0.5, 0.5])
    bias, norm = normalize.kernel_terms()
    picture = np.full((1, 16, 16, 3), 100, np.uint8)  # any picture: the frame around it is compared
    for fill, same in [((bias + 0.5 / norm).tolist(), True), (0.5, False)]:
        layer = bzna_tf.layers.CenterResizedCrop(20, 30, scale=4.0, fill_value=fill)
        served = normalize(layer(picture, training=False)).numpy()
        assert np.allclose(served[0, 0, 0], x[0, 0, 0], atol=1e-5) == same, (fill, served[0, 0, 0])


# ---------------------------------------------------------------------------------------------- order


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("count", [1, 3])
def test_every_sample_once_per_epoch(flat_file, shuffle, count):
    d = ClassificationDataset(flat_file)
    epochs = []
    for index in range(count):
        ds = d.as_dataset(
            batch_size=4,
            shape=8,
            shuffle=shuffle,
            seed=7,
            with_filenames=True,
            shard=(count, index),
            repeat=2,
            **ALL,
        )
        got = names(ds)
        assert ds.cardinality().numpy() == len(got) // 4 + (len(got) % 4 > 0)
        per_epoch = len(range(index, N, count))
        assert len(got) == 2 * per_epoch
        epochs.append((got[:per_epoch], got[per_epoch:]))
    for e in range(2):
        union = [i for shard in epochs for i in shard[e]]
        assert sorted(union) == list(range(N))  # disjoint shards, every sample once
    first, second = epochs[0]
    if shuffle:
        assert first != second  # a new permutation (and with shards, a new subset) each epoch
        assert count > 1 or first != sorted(first)
    else:
        assert first == list(range(0, N, count)) == second


def test_same_seed_same_batches_and_new_epochs(flat_file):
    d = Dataset(flat_file, track="bzna_thumb")  # every picture, random warps (no labels)
    warp = bzna_tf.layers.RandomResizedCrop(16, 16, scale=(0.1, 0.3), flip_h=0.5)

    def make(seed):
        return d.as_dataset(batch_size=6, shuffle=True, seed=seed, warp=warp, with_filenames=True)

    a, b = make(5), make(5)
    a1, a2, b1, b2 = run(a), run(a), run(b), run(b)  # two iterations (Keras epochs) of each
    for x, y in zip(a1 + a2, b1 + b2, strict=True):
        for u, v in zip(x, y, strict=True):
            np.testing.assert_array_equal(u, v)
    order = [n for el in a1 for n in el[-1]]
    assert order != [n for el in a2 for n in el[-1]]  # each iteration reshuffles
    assert order != [n for el in run(make(6)) for n in el[-1]]
    # A seed is taken modulo 2**63 (as the docs say): -1 is a fixed seed, 2**63 - 1's.
    assert [n for el in run(make(5 + 2**63)) for n in el[-1]] == order
    assert [n for el in run(make(-1)) for n in el[-1]] == [n for el in run(make(2**63 - 1)) for n in el[-1]]


def test_crops_differ_per_epoch_but_are_reproducible(tmp_path):
    from conftest import gradient

    from bzna_tf.convert import encode_image

    path = tmp_path / "gradients.bzna"
    with BznaWriter(path) as w:
        for i in range(4):
            inp, thumb = encode_image(gradient(60 + 10 * i, 80, seed=i), preset="ultrafast")
            w.append(inp, thumb=thumb, target=i, filename=f"g{i}.png")
    d = ClassificationDataset(path)
    warp = bzna_tf.layers.RandomResizedCrop(16, 16, scale=(0.1, 0.3), flip_h=0.5)

    def images(seed, **kwargs):
        return [x for x, _ in run(d.as_dataset(batch_size=4, warp=warp, seed=seed, **kwargs))]

    (e1, e2), again = images(3, repeat=2), images(3, repeat=2)
    assert not np.allclose(e1, e2)  # a new crop per sample each epoch ...
    np.testing.assert_array_equal(np.stack([e1, e2]), np.stack(again))  # ... reproducible from the seed
    assert not np.allclose(images(4)[0], e1)
    # training=False: the warp's deterministic centre values, whatever the seed and epoch.
    f1, f2 = images(3, repeat=2, training=False)
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(f1, images(9, training=False)[0])


def test_checkpoint_mid_epoch_restores_the_continuation(flat_file, tmp_path):
    d = Dataset(flat_file, track="bzna_thumb")  # every picture, random warps (no labels)
    warp = bzna_tf.layers.RandomResizedCrop(16, 16, flip_h=0.5)

    def make():
        return d.as_dataset(batch_size=4, shuffle=True, seed=11, warp=warp, repeat=True, with_filenames=True)

    it = iter(make())
    for _ in range(3):
        next(it)
    ckpt = tf.train.Checkpoint(iterator=it)
    saved = ckpt.write(str(tmp_path / "it"))
    expected = [next(it) for _ in range(8)]  # runs across the epoch boundary (23 samples)
    fresh = iter(make())
    tf.train.Checkpoint(iterator=fresh).read(saved).assert_consumed()
    for want, got in zip(expected, (next(fresh) for _ in range(8)), strict=True):
        for u, v in zip(want, got, strict=True):
            np.testing.assert_array_equal(u.numpy(), v.numpy())


def small_file(path, order):
    """Flat pictures ``order`` (sample i: img_00i.png, colour(i), target i % 4), written in that order."""
    from bzna_tf.convert import encode_image

    with BznaWriter(path) as w:
        for i in order:
            inp, thumb = encode_image(np.broadcast_to(colour(i), (24, 32, 3)).copy(), preset="ultrafast")
            w.append(inp, thumb=thumb, target=i % 4, filename=f"img_{i:03d}.png")
    return path


@pytest.mark.parametrize("symbolic", [False, True], ids=["explicit", "symbolic"])
def test_a_checkpoint_restores_only_into_a_pipeline_over_the_same_samples(tmp_path, symbolic):
    # The iterators save stream positions: restored into a pipeline over a file converted again in another
    # order, another shard, selection, seed or batch size, they went on reading other samples (some twice in
    # the epoch, others never) without a word. A staged copy (another path and modification time) restores.
    path = small_file(tmp_path / "train.bzna", range(12))
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic

    def make(batch_size=2, split=None, **kwargs):
        ds = ClassificationDataset(path, split=split).as_dataset(
            batch_size=batch_size, shape=kwargs.pop("shape", 8), shuffle=kwargs.pop("shuffle", True),
            seed=kwargs.pop("seed", 1),
            with_filenames=True, **kwargs,
        )  # fmt: skip
        return ds.with_options(options)

    def saved_after_one_batch(**kwargs):
        it = iter(make(**kwargs))
        next(it)
        return tf.train.Checkpoint(iterator=it).write(str(tmp_path / "ckpt" / "it")), it

    cases = [
        ({"shard": (2, 0)}, {"shard": (2, 1)}, "shard: then 0 of 2, now 1 of 2"),
        ({"shard": (4, 0)}, {"shard": (3, 0)}, "shard: then 0 of 4, now 0 of 3"),
        ({"split": "[:50%]"}, {"split": "[50%:]"}, "selection: then 6 samples ("),
        ({}, {"batch_size": 3}, "batch size: then 2, now 3"),
        ({}, {"seed": 2}, "order: then shuffled with seed 1, now shuffled with seed 2"),
        ({}, {"shuffle": False}, "order: then shuffled with seed 1, now as selected"),
        ({}, {"repeat": 2}, "epochs per iteration: then 1, now 2"),
        ({}, {"shape": 4}, "images: then 8 x 8, channels_last, now 4 x 4, channels_last"),
        (  # one pipeline that 2, then 4 replicas share: iterations of 6, then 4 batches (whole steps)
            {"input_context": tf.distribute.InputContext(1, 0, 2), "drop_remainder": True},
            {"input_context": tf.distribute.InputContext(1, 0, 4), "drop_remainder": True},
            "batches per iteration: then 6, now 4",
        ),
    ]
    # The facts and their wording do not depend on the kind of checkpoint: one case shows that a symbolic
    # checkpoint carries them too.
    for before, after, said in cases[:1] if symbolic else cases:
        saved, _ = saved_after_one_batch(**before)
        with pytest.raises(tf.errors.FailedPreconditionError, match="another pipeline") as e:
            tf.train.Checkpoint(iterator=iter(make(**after))).read(saved)
        assert said in e.value.message
        assert "would read other samples" in e.value.message

    # The same pipeline restores (its continuation), also over a staged copy of the file.
    saved, it = saved_after_one_batch()
    rest = names(it)
    staged = tmp_path / "ssd" / "train.bzna"
    staged.parent.mkdir()
    staged.write_bytes(path.read_bytes())  # a new modification time, another path
    path = staged
    again = iter(make())
    tf.train.Checkpoint(iterator=again).read(saved).assert_consumed()
    assert names(again) == rest

    # The file converted again (the same pictures in another order): refused.
    path = small_file(tmp_path / "again.bzna", range(11, -1, -1))
    with pytest.raises(tf.errors.FailedPreconditionError, match="files: then 1 file of 12 samples"):
        tf.train.Checkpoint(iterator=iter(make())).read(saved)


def test_checkpoint_facts_compare_only_the_facts_both_sides_have(tmp_path):
    # A version that saves another fact must not make every earlier checkpoint unrestorable.
    from bzna_tf.datasets.pipeline import _CheckpointFacts
    from bzna_tf.ops import load_library

    def make(facts):
        return _CheckpointFacts(tf.data.Dataset.range(10), facts)

    it = iter(make(["files: a", "shard: 0 of 2"]))
    next(it)
    saved = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "it"))
    again = iter(make(["files: a", "shard: 0 of 2", "batch size: 4"]))  # one fact more: restores
    tf.train.Checkpoint(iterator=again).read(saved).assert_consumed()
    assert [int(x) for x in again] == list(range(1, 10))
    fewer = iter(make(["shard: 0 of 2"]))
    tf.train.Checkpoint(iterator=fewer).read(saved).assert_consumed()
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"\(shard: then 0 of 2, now 1 of 2\)"):
        tf.train.Checkpoint(iterator=iter(make(["files: a", "shard: 1 of 2"]))).read(saved)
    # The epoch counter's op under its former name still loads graphs written before the rename.
    assert hasattr(load_library(), "bzna_epoch_counter_checkpoint")


@pytest.mark.parametrize("symbolic", [False, True], ids=["explicit", "symbolic"])
def test_a_checkpoint_restores_into_the_same_pipeline_after_the_counter_moved_on(
    flat_file, tmp_path, symbolic
):
    # initial_epoch=None: each iteration takes its epochs from the counter when it starts. A restored
    # iterator must continue the saved iteration's epochs, not take the counter's next ones (a symbolic
    # checkpoint saves no buffered element: the root's range must be state, not a re-read).
    d = ClassificationDataset(flat_file).labelled()
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic
    ds = d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=2, repeat=2, with_filenames=True)
    epochs = ds.bzna_epochs
    ds = ds.with_options(options)
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    saved = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "it"))
    rest = [el[2].numpy().tolist() for el in it]  # to the end of the iteration (epochs 0 and 1)
    assert epochs.get() == (1, 0)
    again = iter(ds)  # the counter says iteration 1; the checkpoint says iteration 0, batch 3
    tf.train.Checkpoint(iterator=again).read(saved).assert_consumed()
    assert [el[2].numpy().tolist() for el in again] == rest
    names = [n for el in head for n in el[2].numpy().tolist()] + [n for b in rest for n in b]
    assert sorted(collections.Counter(names).values()) == [2] * LABELLED  # two epochs: every sample twice
    assert epochs.get() == (1, 0)  # the restored iterator took no iteration from the counter


@pytest.mark.parametrize("device", ["cpu", "model"])
def test_op_determinism_leaves_the_pipeline_parallel(flat_file, device):
    # TensorFlow's op determinism (tf.config.experimental.enable_op_determinism) rewrites a tf.data
    # pipeline whose functions hold a stateful op outside its short lists (tensorflow/core/grappler/
    # optimizers/data/make_deterministic.cc: every prefetch to a buffer of 0, parallel maps to serial
    # ones; in a parallel map even Assert and the random ops count). The epoch counter's home check
    # looked the marker variable up with VarHandleOp/VarIsInitializedOp and an Assert: the whole default
    # pipeline read and decoded one batch at a time, with no prefetch. It is BznaHomeCheck now, and the
    # pipeline's functions hold no stateful op at all. on_error="skip" keeps its stateful report (its
    # log lines and counts in order are what op determinism asks for): documented.
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.framework import op_def_registry

    def stateful(**kw):
        ds = (
            ClassificationDataset(flat_file)
            .labelled()
            .as_dataset(batch_size=4, shape=8, shuffle=True, seed=1, device=device, **kw)
        )
        policy = tf.data.experimental.ExternalStatePolicy.IGNORE
        graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
        ops = {n.op for f in graph.library.function for n in f.node_def}
        assert "BznaHomeCheck" in ops  # the counter pipeline's check is there
        return {op for op in ops if op_def_registry.get(op).is_stateful}

    assert stateful() == set()
    assert stateful(on_error="skip") == {"BznaReportSkips"}


def test_sync_epochs_refuses_a_legacy_keras_model_by_name(flat_file, monkeypatch):
    # A tf_keras fit (TF_USE_LEGACY_KERAS=1) failed on SyncEpochs inside its own callback list, with an
    # AttributeError about batch hooks; set_model, which it calls first, now says what is wrong. (tf_keras
    # is not a test dependency: its classes are told apart by their module, as here.)
    import keras

    monkeypatch.setitem(sys.modules, "tf_keras", types.ModuleType("tf_keras"))
    sync = bzna_tf.callbacks.SyncEpochs(
        ClassificationDataset(flat_file).labelled().as_dataset(batch_size=4, shape=8)
    )
    legacy_model = type("Functional", (), {"__module__": "tf_keras.src.engine.functional"})
    with pytest.raises(TypeError, match=r"SyncEpochs is a Keras 3 object.*Functional of legacy Keras"):
        sync.set_model(legacy_model())
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    sync.set_model(model)
    assert sync.model is model


def test_a_counter_pipeline_refuses_tf_data_warm_start(flat_file):
    # Warm start asks for the first element when the iterator is made: a counter pipeline would take its
    # iteration then (Keras makes an unread iterator at each epoch's end), skipping data epochs. Refused
    # (TensorFlow raises it at the first next), with the counter untouched; a pipeline with an
    # initial_epoch takes the option.
    d = ClassificationDataset(flat_file).labelled()
    warm = tf.data.Options()
    warm.experimental_warm_start = True
    ds = d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=2)
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"experimental_warm_start off"):
        next(iter(ds.map(lambda x, y: (x, y)).with_options(warm)))
    assert ds.bzna_epochs.get() == (0, 0)
    fixed = d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=2, initial_epoch=1)
    want = [y.numpy().tolist() for _, y in fixed]
    assert [y.numpy().tolist() for _, y in fixed.with_options(warm)] == want


@pytest.mark.parametrize("symbolic", [False, True], ids=["explicit", "symbolic"])
def test_an_iterator_checkpoint_holds_the_epoch_counter_and_a_restore_never_moves_it_back(
    flat_file, tmp_path, symbolic
):
    # The iterator's checkpoint holds the counter as the pipeline had it: a restore moves a counter that
    # is behind there (a fresh pipeline's; the iterations after the restored one are then the same) and
    # leaves one that is further ([iteration, skip] order). It used to leave every counter as it was.
    d = ClassificationDataset(flat_file).labelled()
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic

    def make(repeat=False, at=None):
        ds = d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=2, repeat=repeat)
        if at is not None:
            ds.bzna_epochs.set(*at)
        return ds.with_options(options), ds.bzna_epochs

    def restore(saved, made):
        ds, epochs = made
        tf.train.Checkpoint(iterator=iter(ds)).read(saved).assert_consumed()
        return epochs.get()

    ds, epochs = make()
    for _ in ds:  # iteration 0
        pass
    it = iter(ds)
    next(it)  # iteration 1: the counter says 2
    saved = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "finite"))
    for _ in range(2):  # iterations 2 and 3
        for _ in ds:
            pass
    assert restore(saved, (ds, epochs)) == (4, 0)  # the same pipeline, further on: left
    assert restore(saved, make()) == (2, 0)
    assert restore(saved, make(at=(5, 0))) == (5, 0)
    # Endless: [iteration, skip] in that order.
    ds, epochs = make(repeat=True, at=(0, 3))
    it = iter(ds)
    next(it)
    assert epochs.get() == (1, 0)
    saved = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "endless"))
    assert restore(saved, make(repeat=True, at=(0, 9))) == (1, 0)
    assert restore(saved, make(repeat=True, at=(1, 2))) == (1, 2)


def test_repeat(flat_file):
    d = ClassificationDataset(flat_file)
    ds = d.as_dataset(batch_size=5, shape=8, repeat=True, with_filenames=True, **ALL)
    assert ds.cardinality().numpy() == tf.data.INFINITE_CARDINALITY
    assert ds.element_spec[0].shape.as_list() == [5, 8, 8, 3]  # endless: no short batch
    got = [sample_of(n) for el in ds.take(10) for n in el[2].numpy()]
    assert got == (list(range(N)) * 3)[:50]
    ds = d.as_dataset(batch_size=5, shape=8, repeat=3, **ALL)
    assert ds.cardinality().numpy() == 14 and sum(y.shape[0] for _, y in ds) == 3 * N


def test_argument_errors(flat_file):
    d = ClassificationDataset(flat_file).labelled()
    layer = bzna_tf.layers.CenterResizedCrop(8, 8)
    cases = [
        (dict(batch_size=0, shape=8), "batch_size"),
        (dict(batch_size=2), "shape"),
        (dict(batch_size=2, shape=(8, 8, 3)), "shape"),
        (dict(batch_size=2, shape=(9, 8), warp=layer), "differs from the warp layer"),
        (dict(batch_size=2, shape=8, data_format="NWHC"), "data_format"),
        (dict(batch_size=2, shape=8, device="tpu"), "device"),
        (dict(batch_size=2, shape=8, shard=(3, 3)), "shard"),
        (dict(batch_size=2, shape=8, shard=(2, 0), shuffle=True), "seed"),
        (dict(batch_size=2, shape=8, repeat=-1), "repeat"),
        (dict(batch_size=2, shape=8, normalize=(0.5, 0)), "std.*normalize"),
        (dict(batch_size=2, shape=8, shard=(30, 29)), "empty"),
        (dict(batch_size=2, shape=8, shard=(2.9, 1.7)), r"\(count, index\) as integers"),  # not (2, 1)
        (dict(batch_size=2, shape=8, shard=(2, True)), "as integers"),
        (dict(batch_size=2, shape=8, shard=("2", "x")), "as integers"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            d.as_dataset(**kwargs)
    with pytest.raises(TypeError, match="warp"):
        d.as_dataset(batch_size=2, shape=8, warp=lambda x: x)
    # Integral values of other types are the integers they are (an eager tensor: a replica's id).
    for shard in [("2", "1"), (2.0, 1.0), (tf.constant(2), np.int64(1))]:
        assert d.as_dataset(batch_size=2, shape=8, shard=shard).bzna_epochs.per_epoch == len(
            range(1, len(d), 2)
        )
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    with pytest.raises(ValueError, match="not both"):
        d.as_dataset(batch_size=2, shape=8, shard=(2, 1), input_context=ctx)


def test_input_context_gives_that_shard(flat_file):
    d = ClassificationDataset(flat_file)
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    ds = d.as_dataset(batch_size=4, shape=8, input_context=ctx, with_filenames=True, **ALL)
    assert names(ds) == list(range(1, N, 2))


def test_files_of_other_filesystems(flat_file):
    url = "ram://bzna_tf_tests/flat.bzna"
    tf.io.gfile.makedirs("ram://bzna_tf_tests")
    tf.io.gfile.copy(str(flat_file), url, overwrite=True)
    d = ClassificationDataset("ram://bzna_tf_tests/*.bzna")
    assert d.paths == [url] and d.targets.tolist() == ClassificationDataset(flat_file).targets.tolist()
    assert names(d.as_dataset(batch_size=8, shape=8, with_filenames=True, **ALL)) == list(range(N))


@pytest.mark.parametrize("initial_epoch", [None, 0])
def test_tf_distribute_auto_shards_an_unsharded_pipeline(flat_file, initial_epoch):
    # A pipeline handed whole to a one-device strategy (MirroredStrategy on one GPU, OneDeviceStrategy)
    # failed at once: "Unable to shard this input" (auto-sharding adds its shard op only after an op whose
    # name ends in "Dataset", and the ops under the prefetch were named otherwise). DATA auto-sharding of
    # several workers keeps every N-th batch.
    import keras
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    d = ClassificationDataset(flat_file).labelled()

    def make():
        return d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=3, initial_epoch=initial_epoch)

    want = [y.tolist() for _, y in run(make())]
    for strategy in (tf.distribute.MirroredStrategy(["/cpu:0"]), tf.distribute.OneDeviceStrategy("/cpu:0")):
        got = [y.numpy().tolist() for _, y in strategy.experimental_distribute_dataset(make())]
        assert got == want, type(strategy).__name__
    halves = [[y.tolist() for _, y in run(_AutoShardDataset(make(), 2, k))] for k in (0, 1)]
    assert halves == [want[0::2], want[1::2]]
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        model = keras.Sequential(
            [keras.Input((8, 8, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)]
        )
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(model.fit(make(), epochs=1, verbose=0).history["loss"]) == 1


def test_model_fit_under_mirrored_strategy(flat_file):
    """Two logical CPU devices (set before TensorFlow starts, hence a fresh process)."""
    script = textwrap.dedent(
        f"""
        import numpy as np, tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras, bzna_tf

        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        d = bzna_tf.ClassificationDataset({str(flat_file)!r}).select(np.arange({LABELLED}))
        warp = bzna_tf.layers.RandomResizedCrop(16, 16, flip_h=0.5)

        def dataset_fn(ctx):
            return d.as_dataset(batch_size=ctx.get_per_replica_batch_size(8), warp=warp, shuffle=True,
                                seed=1, input_context=ctx, repeat=True, normalize=(0.5, 0.25))

        data = strategy.distribute_datasets_from_function(dataset_fn)
        with strategy.scope():
            model = keras.Sequential([keras.Input((16, 16, 3)), keras.layers.Conv2D(4, 3),
                                      keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)])
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        sync = bzna_tf.callbacks.SyncEpochs(data)  # the pipeline dataset_fn returned, found inside
        assert len(sync._states) == 1
        mapped = strategy.distribute_datasets_from_function(
            lambda ctx: dataset_fn(ctx).map(lambda x, y: (x, y))
        )
        try:
            bzna_tf.callbacks.SyncEpochs(mapped)
            raise AssertionError("a mapped pipeline has no epoch state")
        except ValueError as e:
            assert "SyncEpochs(*made)" in str(e), e
        history = model.fit(data, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[sync])
        assert strategy.num_replicas_in_sync == 2
        losses = history.history["loss"]
        assert len(losses) == 2 and all(np.isfinite(losses)), losses
        # Validation from distribute_datasets_from_function too (before any PER_REPLICA dataset: the
        # strategy keeps that mode for later calls). SyncEpochs took it for a training pipeline: it refused
        # a steps_per_epoch nobody gave (Keras' steps are the training data's), and, Keras' evaluate()
        # reading a validation batch before on_test_begin, never set it to iteration e.
        def finite(select, seed):
            return lambda ctx: d.select(select).as_dataset(
                batch_size=ctx.get_per_replica_batch_size(4), shape=16, shuffle=True, seed=seed,
                input_context=ctx, drop_remainder=True)
        train = strategy.distribute_datasets_from_function(finite(np.arange(12), 1))
        val = strategy.distribute_datasets_from_function(finite(np.arange(12, 20), 2))
        read = []

        class Record(keras.callbacks.Callback):
            def on_test_end(self, logs=None):  # the iteration the validation read: the counter is one on
                read.append(val._datasets[0].bzna_epochs.get()[0] - 1)

        model.fit(train, validation_data=val, epochs=3, verbose=0,
                  callbacks=[bzna_tf.callbacks.SyncEpochs(train, val), Record()])
        assert read == [0, 1, 2], read
        # A pipeline per replica (PER_REPLICA): shards of 5 and 4 samples, 3 and 2 batches. Keras counts the
        # first one's as its steps; SyncEpochs took 3 steps for 2 batches as "not one pass an epoch" and
        # set the second to iteration 3 at epoch 2 (another permutation than the first's: shards overlap).
        odd = d.select(np.arange(9))
        per_replica = tf.distribute.InputOptions(
            experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
            experimental_fetch_to_device=False,
        )
        finite = strategy.distribute_datasets_from_function(
            lambda ctx: odd.as_dataset(batch_size=2, shape=16, shuffle=True, seed=1, input_context=ctx),
            per_replica,
        )
        states = [p.bzna_epochs for p in finite._datasets]
        assert [s.batches for s in states] == [3, 2] and int(finite.cardinality) == 3
        made = []  # the pipelines of a function that maps them, given to SyncEpochs one by one
        mapped = strategy.distribute_datasets_from_function(
            lambda ctx: made.append(odd.as_dataset(batch_size=2, shape=16, shuffle=True, seed=1,
                                                   input_context=ctx)) or made[-1].map(lambda x, y: (x, y)),
            per_replica,
        )
        assert [p.bzna_epochs.input_pipeline for p in made] == [(2, 0), (2, 1)]
        for sync, states in ((bzna_tf.callbacks.SyncEpochs(finite), states),
                             (bzna_tf.callbacks.SyncEpochs(*made), [p.bzna_epochs for p in made])):
            sync.set_params(dict(steps=3, epochs=4))
            for e in range(4):
                sync.on_epoch_begin(e)
                assert [s.get() for s in states] == [(e, 0), (e, 0)], (e, [s.get() for s in states])
        print("OK", losses)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]


# ---------------------------------------------------------------------------------------------- the main job


@pytest.mark.slow
def test_main_example_trains_on_its_own_data(tmp_path):
    """The example learns its five texture classes: well above the 0.2 of chance on 50 validation pictures.

    These settings (300 steps of 8 at 32 x 32, enough for BatchNormalization's moving statistics)
    reached 0.86 to 0.94 with seeds 0 to 3; a model that learns nothing (learning rate 0, or shuffled
    training labels) stays near 0.2: at 0.2 a chance of 30 right out of 50 is about 1e-9.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, str(ROOT / "examples" / "train_keras.py"), "--workdir", str(tmp_path)]
    cmd += ["--train-images", "200", "--val-images", "50", "--epochs", "12", "--batch-size", "8"]
    cmd += ["--processes", "1", "--size", "32", "--seed", "0", "--layout", "compact"]  # encodes 3x faster
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("val_accuracy: ") and float(last.split()[1]) >= 0.6, r.stdout[-3000:]
    assert "train: 200 samples, val: 50 samples, 5 classes" in r.stdout
    assert {p.name for p in tmp_path.glob("*.bzna")} == {"train.bzna", "val.bzna"}


@pytest.mark.slow
def test_main_example_on_any_file(flat_file):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, str(ROOT / "examples" / "train_keras.py"), "--data", str(flat_file)]
    cmd += ["--epochs", "1", "--size", "16", "--batch-size", "4"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    # The unlabelled tail is left out; 10% of the labelled samples are held out.
    assert "train: 18 samples, val: 2 samples, 4 classes" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("val_accuracy: ")


def test_an_unsharded_pipeline_in_a_multi_worker_job_warns_once(flat_file, monkeypatch):
    import json
    import warnings

    from bzna_tf.datasets import arguments

    d = ClassificationDataset(flat_file).labelled()
    cluster = {"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setattr(arguments, "_warned_auto_shard", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d.as_dataset(batch_size=2, shape=8)  # no TF_CONFIG: a single process
        monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
        d.as_dataset(batch_size=2, shape=8, shard=(2, 0))  # sharded by hand
        assert not caught
        d.as_dataset(batch_size=2, shape=8)
        d.as_dataset(batch_size=2, shape=8)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "2 workers" in message and "input_context" in message and "DATA" in message
    monkeypatch.setattr(arguments, "_warned_auto_shard", False)
    with pytest.warns(UserWarning, match=r"or with shard=\(1, 0\)\) in a job of 2 workers"):
        d.as_dataset(batch_size=2, shape=8, shard=(1, 0))  # the whole dataset: auto-sharded all the same


def test_an_unsharded_shuffle_without_a_seed_in_a_multi_worker_job_is_refused(flat_file, monkeypatch):
    # Each worker would draw its own order; DATA auto-sharding then keeps every N-th batch of N orders
    # (two real workers read some samples twice and others never).
    import json

    d = ClassificationDataset(flat_file).labelled()
    cluster = {"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    with pytest.raises(
        ValueError, match=r"shuffle=True\) without a `seed` in a job of 2 workers: each worker"
    ):
        d.as_dataset(batch_size=2, shape=8, shuffle=True)
    with pytest.raises(ValueError, match=r"without a `seed` in a job of 2 workers"):  # the whole dataset too
        d.as_dataset(batch_size=2, shape=8, shuffle=True, shard=(1, 0))
    with pytest.warns(UserWarning, match="DATA"):  # said where it is not refused
        d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=3)
    d.as_dataset(batch_size=2, shape=8, shuffle=True, shard=(2, 0), seed=1)
    # One global seed is refused too: the seed drawn from it depends on the random ops the process made
    # before (a chief that built one more random pipeline drew another order).
    tf.random.set_seed(5)
    try:
        for extra in (0, 1):
            orders = []
            for _ in range(2):  # two "workers": the same program, the second makes `extra` random ops first
                tf.random.set_seed(5)
                for _ in range(extra * len(orders)):
                    tf.random.uniform(())
                monkeypatch.delenv("TF_CONFIG")
                ds = d.as_dataset(batch_size=2, shape=8, shuffle=True, with_filenames=True)
                orders.append([n for el in ds for n in el[-1].numpy().tolist()])
                monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
            assert (orders[0] == orders[1]) == (extra == 0)
        with pytest.raises(ValueError, match="one global seed too: the seed drawn from it depends on"):
            d.as_dataset(batch_size=2, shape=8, shuffle=True)
    finally:
        tf.random.set_seed(None)
    # ParameterServerStrategy (a "ps" job) does not auto-shard, and traces the dataset function: a seed
    # drawn there is a constant of the graph every worker runs.
    tf.function(lambda: d.as_dataset(batch_size=2, shape=8, shuffle=True, initial_epoch=0).cardinality())()
    pss = {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "ps": ["h3:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": pss, "task": {"type": "chief", "index": 0}}))
    d.as_dataset(batch_size=2, shape=8, shuffle=True)
    # An evaluator beside the workers, and a strategy without a cluster in scope: nothing auto-shards.
    job = {"worker": ["h1:1", "h2:1"], "evaluator": ["h4:1"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": job, "task": {"type": "evaluator", "index": 0}}))
    d.as_dataset(batch_size=2, shape=8, shuffle=True)
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        d.as_dataset(batch_size=2, shape=8, shuffle=True)


def test_as_dataset_in_a_tf_function_needs_an_initial_epoch(flat_file):
    # ParameterServerStrategy's create_per_worker_dataset traces the dataset function: autograph's own
    # names were taken for arguments (TypeError: check() got an unexpected keyword argument 'do_return'),
    # and a pipeline on the tracing process's epoch counter hung on the workers.
    d = ClassificationDataset(flat_file).labelled()

    @tf.function
    def cardinality(**kwargs):
        return tf.data.experimental.cardinality(d.as_dataset(batch_size=4, shape=8, **kwargs))

    assert int(cardinality(initial_epoch=0)) == -(-len(d) // 4)
    with pytest.raises(ValueError, match=r"as_dataset\(initial_epoch=None\) called in a tf.function"):
        cardinality()


def test_a_tf_function_calls_as_dataset_and_blend_as_written(flat_file, monkeypatch):
    # AutoGraph would convert as_dataset, blend and the ~50 functions they call (about 5 s the first time
    # in a process) to run the same Python: both carry AutoGraph's own mark, so their code runs as written.
    import inspect

    import bzna_tf.blending
    import bzna_tf.datasets.catalog

    callers = []  # the functions on the stack of each spied call: AutoGraph's conversions are named tf__NAME

    def spy(module, name):
        real = getattr(module, name)

        def recorded(*args, **kwargs):
            callers.append([frame.function for frame in inspect.stack()])
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, recorded)

    spy(bzna_tf.datasets.catalog, "check_arguments")
    spy(bzna_tf.blending, "_weights")
    d = ClassificationDataset(flat_file).labelled()

    @tf.function
    def cardinality():
        ds = d.as_dataset(batch_size=4, shape=8, initial_epoch=0, shuffle=True, seed=1, repeat=True)
        return tf.data.experimental.cardinality(bzna_tf.blend([ds, ds], seed=2))

    assert int(cardinality()) == tf.data.INFINITE_CARDINALITY
    assert len(callers) == 2
    for stack in callers:
        assert "tf__cardinality" in stack  # the test's own function is converted
        assert "as_dataset" in stack or "blend" in stack
        assert [f for f in stack if f.startswith("tf__") and f != "tf__cardinality"] == []


def test_iterations_continue_the_epochs_and_the_state_checkpoints(flat_file, tmp_path):
    d = ClassificationDataset(flat_file)

    def make():
        return d.as_dataset(batch_size=5, shape=8, shuffle=True, seed=4, with_filenames=True, **ALL)

    def names(it, k=None):
        batches = it if k is None else (next(it) for _ in range(k))
        return [sample_of(n) for el in batches for n in el[2].numpy()]

    ds = make()
    assert ds.bzna_epochs.get() == (0, 0)
    epochs = [names(iter(ds)) for _ in range(3)]
    assert ds.bzna_epochs.get() == (3, 0) and len({tuple(e) for e in epochs}) == 3
    kw = dict(batch_size=5, shape=8, shuffle=True, seed=4, with_filenames=True, **ALL)
    assert [names(d.as_dataset(**kw, initial_epoch=e)) for e in range(3)] == epochs  # the same, stateless
    assert not hasattr(d.as_dataset(batch_size=5, shape=8, initial_epoch=0, **ALL), "bzna_epochs")
    # an iterator and the epoch state, checkpointed mid-epoch 1, restore into a fresh pipeline
    ds = make()
    names(iter(ds))
    it = iter(ds)
    head = names(it, 2)
    saved = tf.train.Checkpoint(iterator=it, data_epochs=ds.bzna_epochs.variable).write(str(tmp_path / "ck"))
    fresh = make()
    it2 = iter(fresh)
    tf.train.Checkpoint(iterator=it2, data_epochs=fresh.bzna_epochs.variable).read(saved).assert_consumed()
    assert head + names(it2) == epochs[1] and names(iter(fresh)) == epochs[2]
    # set() moves the next iteration; skip is for endless pipelines only
    ds.bzna_epochs.set(1)
    assert names(iter(ds)) == epochs[1]
    with pytest.raises(ValueError, match="endless"):
        ds.bzna_epochs.set(0, skip=2)
    endless = d.as_dataset(**kw, repeat=True)
    endless.bzna_epochs.set(0, skip=3)
    assert names(iter(endless), 2) == (epochs[0] + epochs[1])[15:25]


def test_sync_epochs_takes_as_dataset_pipelines(flat_file):
    d = ClassificationDataset(flat_file).labelled()
    ds = d.as_dataset(batch_size=5, shape=8)
    with pytest.raises(ValueError, match="as_dataset"):
        bzna_tf.callbacks.SyncEpochs(ds.map(lambda x, y: (x, y)))
    with pytest.raises(ValueError, match="built with initial_epoch=0, so every iteration yields the same"):
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=5, shape=8, initial_epoch=0))
    sync = bzna_tf.callbacks.SyncEpochs(ds)
    sync.set_params({"steps": ds.cardinality().numpy()})
    sync.on_epoch_begin(4)
    assert ds.bzna_epochs.get() == (4, 0)


def test_one_pipeline_of_several_replicas_ends_each_iteration_at_a_whole_step(flat_file):
    # distribute_datasets_from_function on one worker hands the pipeline's batches to its replicas in turn.
    # Of statically shaped batches tf.distribute takes no partial step: with 5 batches and 2 replicas the
    # fifth was read, cut off mid-step and never trained (the step's collectives cancelled).
    d = ClassificationDataset(flat_file).labelled()
    n = len(d)
    assert (n // 4) % 2 == 1, n  # an odd count of batches of 4

    def ctx(pipelines=1, replicas=2):
        return tf.distribute.InputContext(pipelines, 0, replicas)

    def batches(**kw):
        ds = d.as_dataset(batch_size=4, shape=8, shuffle=True, seed=2, **kw)
        return int(ds.cardinality()), [y.numpy().tolist() for _, y in ds]

    count, whole = batches(drop_remainder=True, input_context=ctx())
    assert count == len(whole) == n // 4 - 1
    assert whole == batches(drop_remainder=True)[1][: n // 4 - 1]  # the same order, its last batch left out
    # Where tf.distribute feeds a replica without a batch an empty one: nothing to leave out.
    assert batches(input_context=ctx())[0] == -(-n // 4)  # short batches (drop_remainder=False)
    assert batches(drop_remainder=True, input_context=ctx(), on_error="skip")[0] == n // 4  # shapes unknown
    assert batches(drop_remainder=True, input_context=ctx(2, 4))[0] == (len(range(0, n, 2))) // 4  # 2 workers
    assert batches(drop_remainder=True, input_context=ctx(1, 1))[0] == n // 4
    endless = d.as_dataset(batch_size=4, shape=8, drop_remainder=True, repeat=True, input_context=ctx())
    assert endless.cardinality() == tf.data.INFINITE_CARDINALITY
    with pytest.warns(UserWarning, match=rf"leaves out the last {n - (n // 4 - 1) * 4} samples of each "
                      r"iteration \(batches of 4, whole steps of 2 replicas\)"):  # fmt: skip
        d.as_dataset(batch_size=4, shape=8, drop_remainder=True, input_context=ctx(), training=False)
    few = rf"makes {n // 4} batches of 4 an iteration \({n} samples, drop_remainder=True\), fewer than one"
    with pytest.raises(ValueError, match=few + rf" step of its {n // 4 + 1} replicas takes"):
        d.as_dataset(batch_size=4, shape=8, drop_remainder=True, input_context=ctx(1, n // 4 + 1))


def test_with_drop_remainder_every_shard_makes_the_smallest_shards_batches(flat_file):
    # Shards by samples differ by one sample, so with drop_remainder=True by one batch at most: the ranks
    # of a lockstep loop (an allreduce per batch) or tf.distribute's per-replica pipelines (which take no
    # partial step) parted with one rank's batch read and cut off, or waiting for its peers.
    d = ClassificationDataset(flat_file).labelled()
    n = len(d)
    count, b = next((c, b) for c in range(2, 7) for b in range(2, 5) if (n // c + 1) % b == 0 and n % c)
    assert len(range(0, n, count)) // b > (n // count) // b  # shard 0 would make one more batch

    def shard(k, **kw):
        ds = d.as_dataset(
            batch_size=b, shape=8, shuffle=True, seed=5, shard=(count, k), with_filenames=True, **kw
        )
        names = [[sample_of(f) for f in el[2].numpy()] for el in ds]
        return int(ds.cardinality()), names

    made = [shard(k, drop_remainder=True) for k in range(count)]
    assert {c for c, _ in made} == {len(names) for _, names in made} == {(n // count) // b}
    read = [s for _, names in made for batch in names for s in batch]
    assert len(read) == len(set(read)) == count * ((n // count) // b) * b  # disjoint, whole batches
    assert shard(0)[0] == -(-len(range(0, n, count)) // b)  # drop_remainder=False: every sample, as before
    # A shard of enough samples for a batch, where the smallest has too few: refused, as that one is.
    few = next(c for c in range(2, n) if n % c and n // c == 1)  # shards of 2 samples and of 1
    for training in (True, False):  # evaluation would read none either
        with pytest.raises(ValueError, match=rf"\(shard 0 of {few}\) makes 1 batch, but the smallest"):
            d.as_dataset(batch_size=2, shape=8, shard=(few, 0), drop_remainder=True, training=training)
        # A shard that has no batch anyway is refused too: its peers are, and a worker left building would
        # wait for them at its first step (evaluation shards built while shard 0 was refused).
        last = rf"\(shard {few - 1} of {few}\) makes no batch, and the smallest of the {few} shards reads 1 "
        with pytest.raises(ValueError, match=last):
            d.as_dataset(batch_size=2, shape=8, shard=(few, few - 1), drop_remainder=True, training=training)


def _first_steps(sync, read):
    """What Keras calls SyncEpochs with up to an epoch's second training step, training reading ``read``."""
    sync.on_train_begin()
    sync.on_epoch_begin(0)
    for ds in read:
        next(iter(ds))  # an iteration's first batch: its counter moves
    sync.on_train_batch_begin(1)


def test_sync_epochs_refuses_steps_per_epoch_over_a_finite_pipeline_of_several_replicas(flat_file):
    # Keras counts a DistributedDatasetsFromFunction's cardinality (its pipeline's batches) as steps; with
    # steps_per_epoch it kept one iterator until that many were taken, past the pipeline's end: a
    # MirroredStrategy fit of 2 replicas with steps_per_epoch=the true steps trained every other epoch on
    # nothing ("Your input ran out of data", once).
    d = ClassificationDataset(flat_file).labelled()
    ctx = tf.distribute.InputContext(1, 0, 2)
    ds = d.as_dataset(batch_size=2, shape=8, drop_remainder=True, input_context=ctx)
    steps = int(ds.cardinality())
    assert ds.bzna_epochs.batches_per_step == 2 and steps % 2 == 0
    sync = bzna_tf.callbacks.SyncEpochs(ds)
    for fine in (None, steps):  # Keras' own count: each epoch one pass
        sync.set_params({"steps": fine, "epochs": 2})
        _first_steps(sync, [ds])
    sync.set_params({"steps": steps // 2, "epochs": 2})
    shared = rf"steps_per_epoch={steps // 2}\) over a finite as_dataset pipeline whose batches 2 replicas"
    with pytest.raises(ValueError, match=shared + rf" share .* counts its {steps} batches as {steps} steps"):
        _first_steps(sync, [ds])
    endless = d.as_dataset(batch_size=2, shape=8, repeat=True, input_context=ctx)
    sync = bzna_tf.callbacks.SyncEpochs(endless)
    sync.set_params({"steps": 3, "epochs": 2})
    _first_steps(sync, [endless])  # an endless pipeline is for steps_per_epoch
    sync.set_params({"steps": None, "epochs": 2})  # without it Keras would train epoch 0 forever
    with pytest.raises(ValueError, match=r"An endless dataset \(repeat=True\) needs `steps_per_epoch`"):
        _first_steps(sync, [endless])
    # Such a pipeline for validation, beside an endless training one (params' steps are training's): it
    # was refused at on_train_begin, for a steps_per_epoch that was not its own.
    sync = bzna_tf.callbacks.SyncEpochs(endless, ds)
    sync.set_params({"steps": 3, "epochs": 2})
    _first_steps(sync, [endless])
    sync.on_test_begin()
    assert ds.bzna_epochs.get() == (0, 0)


def test_sync_epochs_refuses_a_distributed_dataset_whose_pipelines_keras_or_tf_distribute_cut(flat_shards):
    # Keras counts a DistributedDatasetsFromFunction's first pipeline's batches as its steps. Pipelines per
    # replica (PER_REPLICA) of shard_by="files" follow their files: a longer one than the first was cut at
    # each epoch's end (two replicas, files of 2 and 6 pictures: 4 of 8 images trained an epoch); and of
    # static batches, tf.distribute ends the pass at the shortest one (4 of 10 samples an epoch).
    d = ClassificationDataset(flat_shards)  # files of 7, 5 and 9 samples

    def pipeline(k, **kw):
        context = tf.distribute.InputContext(2, k, 2)  # pipeline k of 2, as PER_REPLICA builds them
        return d.as_dataset(batch_size=2, shape=8, input_context=context, shard_by="files", **kw)

    longer, shorter = pipeline(0), pipeline(1)  # files 0 and 2 (16 samples: 8 batches); file 1 (5: 3 batches)
    assert (longer.bzna_epochs.batches, shorter.bzna_epochs.batches) == (8, 3)
    sync = bzna_tf.callbacks.SyncEpochs(longer, shorter)  # led by the longer one: the shorter gets empty ones
    sync.set_params({"steps": 8, "epochs": 2})
    _first_steps(sync, [longer, shorter])
    static = [pipeline(k, drop_remainder=True) for k in (0, 1)]  # 8 and 2 batches, no partial batch
    sync = bzna_tf.callbacks.SyncEpochs(*static)
    sync.set_params({"steps": 8, "epochs": 2})
    with pytest.raises(
        ValueError, match=r"makes 2 batches, fewer than the first one's 8: tf.distribute ends"
    ):
        _first_steps(sync, static)
    # Files in another order: pipeline 0 the shorter one.
    longer.bzna_epochs.input_pipeline, shorter.bzna_epochs.input_pipeline = (2, 1), (2, 0)
    sync = bzna_tf.callbacks.SyncEpochs(shorter, longer)
    sync.set_params({"steps": 3, "epochs": 2})
    with pytest.raises(ValueError, match=r"first pipeline's 3 batches as the steps .* makes 8: each Keras"):
        _first_steps(sync, [shorter, longer])


def test_sync_epochs_gives_a_validation_pipeline_one_iteration_per_keras_epoch(flat_file, caplog):
    # The validation pipeline used to be set from the training steps: with more batches than training
    # has steps, it read iteration 0 for several epochs (one order, one set of crops) and warned about
    # a steps_per_epoch nobody set.
    import logging

    import keras

    d = ClassificationDataset(flat_file).labelled()
    train = d.select(np.arange(4)).as_dataset(batch_size=2, shape=8, shuffle=True, seed=1)  # 2 steps
    val = d.select(np.arange(4, len(d))).as_dataset(batch_size=1, shape=8, shuffle=True, seed=2)
    assert val.bzna_epochs.batches > 2
    read = []

    class Record(keras.callbacks.Callback):
        def on_test_end(self, logs=None):  # the validation pass read its iteration: the counter is one on
            read.append((val.bzna_epochs.get()[0] - 1, train.bzna_epochs.get()[0] - 1))

    model = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)]
    )
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    sync = bzna_tf.callbacks.SyncEpochs(train, val)
    with (
        caplog.at_level(logging.WARNING, logger="bzna_tf.callbacks"),
        warnings.catch_warnings(record=True) as w,
    ):
        warnings.simplefilter("always")
        model.fit(train, validation_data=val, epochs=4, verbose=0, callbacks=[sync, Record()])
    assert read == [(e, e) for e in range(4)]
    assert "steps_per_epoch" not in caplog.text and not [x for x in w if "SyncEpochs" in str(x.message)]
    # A resumed fit (Keras starts at epoch 2): the same iterations. In the process that trained them, it
    # is a second fit over data epochs already read: warned.
    read.clear()
    again = r"this fit starts at Keras epoch 2, and an earlier fit of this model in this process already "
    with pytest.warns(
        UserWarning, match=again + r"trained Keras epochs up to 3 .* pass model.fit\(initial_epoch=4, epochs="
    ):
        model.fit(
            train, validation_data=val, epochs=4, initial_epoch=2, verbose=0, callbacks=[sync, Record()]
        )
    assert read == [(2, 2), (3, 3)]
    # Another model on the same pipelines (a sweep), and the validation pipeline beside new training data:
    # no second fit of what was trained (the mark was the pipeline's, validation pipelines' too).
    other = keras.models.clone_model(model)
    other.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fresh = d.select(np.arange(4)).as_dataset(batch_size=2, shape=8, shuffle=True, seed=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        other.fit(
            train, validation_data=val, epochs=1, verbose=0, callbacks=[bzna_tf.callbacks.SyncEpochs(train)]
        )
        model.fit(fresh, validation_data=val, epochs=1, verbose=0,
                  callbacks=[bzna_tf.callbacks.SyncEpochs(fresh, val)])  # fmt: skip
    assert not [x for x in w if "SyncEpochs" in str(x.message)]
    # The training pipeline with another steps_per_epoch still warns (it is not batch-exact).
    with (
        caplog.at_level(logging.WARNING, logger="bzna_tf.callbacks"),
        pytest.warns(UserWarning, match="epoch 0"),
    ):
        model.fit(train.repeat(), steps_per_epoch=3, epochs=1, verbose=0,
                  callbacks=[bzna_tf.callbacks.SyncEpochs(train)])  # fmt: skip
    assert (
        "SyncEpochs: Keras reads 3 batches per epoch (steps_per_epoch, or a take() or filter()" in caplog.text
    )


def _which(images) -> list[int]:
    """The sample each flat-coloured picture of a batch is (nearest colour(i) by red)."""
    reds = np.array([colour(i)[0] for i in range(N)], np.float64)
    red = np.asarray(images, np.float64)[..., 0].mean(axis=(1, 2))
    return np.abs(red[:, None] - reds).argmin(axis=1).tolist()


def _recording_model(seen):
    """A small classifier whose training and test steps note which samples each batch held."""
    import keras

    def note(kind, x):
        tf.py_function(lambda x: seen.append((kind, _which(x.numpy()))) or np.int64(0), [x], tf.int64)

    class Recording(keras.Model):
        def __init__(self):
            super().__init__()
            self.pool, self.dense = keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(4)

        def call(self, x):
            return self.dense(self.pool(x))

        def train_step(self, data):
            note("train", data[0])
            return super().train_step(data)

        def test_step(self, data):
            note("val", data[0])
            return super().test_step(data)

    return Recording()


def test_sync_epochs_counts_whole_executions_and_sets_every_validation_pipeline(flat_file, caplog):
    # Keras runs whole executions: steps_per_epoch=4 with steps_per_execution=3 takes 6 batches an epoch
    # from an endless pipeline, and a resumed epoch 2 started 8 batches in (2 x 4), not 12: batches trained
    # again, others never. An endless validation pipeline (validation_steps) read on from the training
    # stream's position, where an uninterrupted fit without SyncEpochs validates on a new iteration each
    # time. Under tf.distribute, evaluate() reads a validation batch before on_test_begin, so a validation
    # pipeline passed for a training one: not set to iteration e, and warned about a steps_per_epoch.
    import logging

    import keras

    d = ClassificationDataset(flat_file).labelled()
    seen = []

    class Epochs(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(("epoch", epoch))

    def fit(initial_epoch, repeat=True, strategy=None, spe=3, **kw):
        train = d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=3, repeat=repeat)
        val = d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=4, repeat=repeat, training=False)
        with strategy.scope() if strategy else contextlib.nullcontext():
            model = _recording_model(seen)
            model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          steps_per_execution=spe)  # fmt: skip
        seen.clear()
        model.fit(train, validation_data=val, epochs=3, verbose=0, initial_epoch=initial_epoch,
                  callbacks=[Epochs(), bzna_tf.callbacks.SyncEpochs(train, val)], **kw)  # fmt: skip
        epochs = {}
        for kind, value in seen:
            if kind == "epoch":
                epochs[value] = {"train": [], "val": []}
            else:
                epochs[max(epochs)][kind].append(value)
        return epochs, val

    whole, val = fit(0, steps_per_epoch=4, validation_steps=1)
    assert [len(whole[e]["train"]) for e in range(3)] == [6, 6, 6]  # two executions of 3 steps each
    for e in range(3):  # validation e: the validation pipeline's iteration e (one execution: 3 batches)
        val.bzna_epochs.set(e)
        it = iter(val)
        assert whole[e]["val"] == [_which(next(it)[0]) for _ in range(3)]
    resumed, _ = fit(2, steps_per_epoch=4, validation_steps=1)
    assert resumed[2] == whole[2]
    # Under a strategy (one replica), finite pipelines: validation e reads iteration e, and no warning
    # (epochs of one step: test_sync_epochs_under_a_strategy_in_epochs_of_one_step).
    with caplog.at_level(logging.WARNING, logger="bzna_tf.callbacks"):
        mirrored, val = fit(0, repeat=False, strategy=tf.distribute.MirroredStrategy(["/cpu:0"]))
    assert "steps_per_epoch" not in caplog.text
    for e in range(3):
        val.bzna_epochs.set(e)
        assert mirrored[e]["val"] == [_which(x) for x, _ in val]


def test_sync_epochs_under_a_strategy_in_epochs_of_one_step(flat_file, tmp_path):
    # An epoch of one execution has no step between two to tell training pipelines by, and under a
    # strategy Keras reads a batch of the validation data before on_test_begin. A fit retried in the same
    # process after an exception (BackupAndRestore's retry) compared with the counters from before its
    # first try, so the validation pipeline passed for a training one and was not set to iteration e (a
    # resumed run validated on other samples); so did a validation pipeline given alone; and an endless
    # one beside training data of unknown length was refused for a steps_per_epoch it does not need.
    import keras

    d = ClassificationDataset(flat_file).labelled()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    seen = []

    class Epochs(keras.callbacks.Callback):
        stop_at = None

        def on_epoch_begin(self, epoch, logs=None):
            seen.append(("epoch", epoch))
            if epoch == self.stop_at:
                self.stop_at = None
                raise RuntimeError("preempted")

    def model():
        with strategy.scope():
            m = _recording_model(seen)
            m.compile(
                "sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=16
            )
        return m

    def validations():
        out = {}
        for kind, value in seen:
            if kind == "epoch":
                out[value] = []
            elif kind == "val":
                out[max(out)].append(value)
        return out

    def iteration(ds, e, batches=None):
        ds.bzna_epochs.set(e)
        it = iter(ds)
        return [_which(next(it)[0]) for _ in range(batches)] if batches else [_which(x) for x, _ in it]

    train = d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=3)
    val = d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=4, training=False)
    stop = Epochs()
    stop.stop_at = 2
    callbacks = [stop, keras.callbacks.BackupAndRestore(str(tmp_path / "backup")),
                 bzna_tf.callbacks.SyncEpochs(train, val)]  # fmt: skip
    m = model()
    with pytest.raises(RuntimeError, match="preempted"):
        m.fit(train, validation_data=val, epochs=4, verbose=0, callbacks=callbacks)
    m.fit(train, validation_data=val, epochs=4, verbose=0, callbacks=callbacks)  # resumes at epoch 2
    got = validations()
    assert [got[e] for e in range(4)] == [iteration(val, e) for e in range(4)]
    # A validation pipeline alone, endless, beside training data whose length Keras does not know.
    seen.clear()
    endless = d.as_dataset(batch_size=2, shape=8, shuffle=True, seed=4, training=False, repeat=True)
    model().fit(train.filter(lambda x, y: True), validation_data=endless, validation_steps=1, epochs=2,
                verbose=0, callbacks=[Epochs(), bzna_tf.callbacks.SyncEpochs(endless)])  # fmt: skip
    got = validations()
    assert [got[e] for e in range(2)] == [iteration(endless, e, 16) for e in range(2)]  # one execution: 16


class _UsersOwnTransform(bzna_tf.transforms.WarpTransform):
    """A user's transform whose code needs AutoGraph: a Python ``if`` on a tensor."""

    def matrices(
        self, in_shapes, out_shape, *, seed=0, epoch=0, indices=None, training=True, backend="tensorflow"
    ):
        import tensorflow as tf

        sizes = tf.cast(in_shapes, tf.float32)
        scale = sizes / tf.constant(out_shape, tf.float32)  # (y, x): the whole picture
        if tf.reduce_any(scale > 1.0):  # a graph tensor as a Python bool: only AutoGraph makes it a tf.cond
            scale = scale * 1.0
        zeros = tf.zeros_like(scale[:, 0])
        rows = [[scale[:, 1], zeros, zeros], [zeros, scale[:, 0], zeros], [zeros, zeros, zeros + 1.0]]
        return tf.stack([tf.stack(r, axis=-1) for r in rows], axis=1)


@pytest.mark.parametrize("warp", ["ours", "users"])
def test_a_pipeline_is_built_without_autograph_unless_a_transform_is_the_users(original_path, tmp_path, warp):
    """AutoGraph's conversion of the per-batch function was nearly all of a first build's seconds; it
    writes each converted function's source to a temporary file, so the files say whether it ran."""
    import tempfile

    old = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        w = bzna_tf.layers.RandomResizedCrop(8, 8, flip_h=0.5) if warp == "ours" else _UsersOwnTransform()
        ds = Dataset(original_path, track="bzna_thumb").as_dataset(
            batch_size=3, shuffle=True, seed=1, warp=w, shape=(8, 8)
        )
        images = next(iter(ds)).numpy()
    finally:
        tempfile.tempdir = old
    assert images.shape == (3, 8, 8, 3) and np.isfinite(images).all()
    converted = list(tmp_path.glob("__autograph_generated_file*"))
    assert bool(converted) == (warp == "users"), converted
