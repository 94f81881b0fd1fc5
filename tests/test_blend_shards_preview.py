"""Shards assigned to workers by file, endless training iteration, blend(), and the preview grid."""

import math
import os
import warnings

import numpy as np
import pytest
from conftest import SHARD_SIZES, shard_colour, shard_sample

import bzna_tf
from bzna_tf import ClassificationDataset
from bzna_tf.cli import main as cli
from bzna_tf.previews import CAPTION, PreviewWarning, caption, grid_size, render_text

tf = pytest.importorskip("tensorflow")


def samples(ds):
    return [shard_sample(n) for *_, names in ds for n in names.numpy()]


# ---------------------------------------------------------------------------------------- file shards


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_file_shards_are_disjoint_complete_and_fixed(flat_shards, workers):
    d = ClassificationDataset(flat_shards)
    seen = []
    for w in range(workers):
        # Each worker shuffles only its own files, so workers need no common seed; the seed only
        # makes the reshuffle check below certain (unseeded, two epochs of a 5-sample file come out
        # the same once in 120 runs).
        ds = d.as_dataset(
            batch_size=4,
            shape=8,
            shuffle=True,
            seed=3,
            shard=(workers, w),
            shard_by="files",
            with_filenames=True,
            repeat=2,
        )
        got = samples(ds)
        mine = {k for k in range(3) if k % workers == w}
        assert {k for k, _ in got} == mine  # whole files, file k -> worker k % workers
        per_epoch = sum(SHARD_SIZES[k] for k in mine)
        first, second = got[:per_epoch], got[per_epoch:]
        assert sorted(first) == sorted(second) and len(set(first)) == per_epoch  # every sample once per epoch
        assert first != second  # reshuffled each epoch
        seen += first
    assert sorted(seen) == sorted((k, i) for k, n in enumerate(SHARD_SIZES) for i in range(n))


def test_endless_training_iteration_over_a_workers_files(flat_shards):
    d = ClassificationDataset(flat_shards)
    ds = d.as_dataset(
        batch_size=4,
        shape=8,
        shuffle=True,
        seed=3,
        shard=(2, 0),
        shard_by="files",
        repeat=True,
        with_filenames=True,
    )
    assert ds.cardinality() == tf.data.INFINITE_CARDINALITY
    assert ds.element_spec[0].shape == (4, 8, 8, 3)
    got = samples(ds.take(40))  # 160 samples = 10 passes over files 0 and 2 (16 samples)
    counts = {s: got.count(s) for s in set(got)}
    assert set(counts) == {(k, i) for k in (0, 2) for i in range(SHARD_SIZES[k])}
    assert set(counts.values()) == {10}


def test_a_checkpoint_of_a_file_shard_restored_into_another_names_the_shard(flat_shards, tmp_path):
    d = ClassificationDataset(flat_shards)

    def iterator(count):
        return iter(d.as_dataset(batch_size=2, shape=8, shard=(count, 0), shard_by="files", seed=1))

    it = iterator(2)
    next(it)
    saved = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "ckpt" / "it"))
    with pytest.raises(tf.errors.FailedPreconditionError) as e:  # the workers went from 2 to 3
        tf.train.Checkpoint(iterator=iterator(3)).read(saved)
    assert "file shard: then 0 of 2, now 0 of 3" in e.value.message


def test_a_training_pipeline_of_no_batch_is_refused_not_trained_on_nothing(flat_shards):
    d = ClassificationDataset(flat_shards)
    # Worker 1's file holds 5 samples: no batch of 6 with drop_remainder (its samples never read).
    said = r"This pipeline reads 5 samples an epoch, fewer than batch_size=6 with drop_remainder=True"
    with pytest.raises(ValueError, match=said + r".*shard_by='samples'"):
        d.as_dataset(batch_size=6, shape=8, shard=(3, 1), shard_by="files", drop_remainder=True)
    with pytest.raises(ValueError, match=r"This pipeline \(shard 1 of 7\) reads 3 samples an epoch"):
        d.as_dataset(batch_size=4, shape=8, shard=(7, 1), drop_remainder=True)
    # Without drop_remainder, or for evaluation (a validation shard may be empty: a warning says what is
    # left out), or with more epochs an iteration: taken.
    assert d.as_dataset(batch_size=6, shape=8, shard=(3, 1), shard_by="files").cardinality() == 1
    with pytest.warns(UserWarning, match=r"leaves out the last 5 samples of each iteration \(shard 1 of 3\)"):
        ds = d.as_dataset(
            batch_size=6, shape=8, shard=(3, 1), shard_by="files", drop_remainder=True, training=False
        )
    assert ds.cardinality() == 0
    # An evaluation pipeline of no batch at all (unsharded): refused, as for training.
    with pytest.raises(ValueError, match="it has no batch, so evaluation or prediction would read none"):
        d.as_dataset(batch_size=len(d) + 1, shape=8, drop_remainder=True, training=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d.as_dataset(batch_size=len(d), shape=8, drop_remainder=True, training=False)  # nothing left out
    assert d.as_dataset(batch_size=4, shape=8, shard=(7, 1), drop_remainder=True, repeat=2).cardinality() == 1


def test_validation_strides_files_across_workers_some_get_nothing(flat_shards):
    d = ClassificationDataset(flat_shards)
    with pytest.raises(ValueError, match="3 files for 4 shards"):
        d.as_dataset(batch_size=2, shape=8, shard=(4, 3), shard_by="files")
    seen = []
    for w in range(4):
        ds = d.as_dataset(
            batch_size=2, shape=8, shard=(4, w), shard_by="files", training=False, with_filenames=True
        )
        got = samples(ds)
        assert len(got) == (SHARD_SIZES[w] if w < 3 else 0) and ds.cardinality() == math.ceil(len(got) / 2)
        seen += got
    assert sorted(seen) == sorted((k, i) for k, n in enumerate(SHARD_SIZES) for i in range(n))
    with pytest.raises(ValueError, match="is empty"):
        d.as_dataset(batch_size=2, shape=8, shard=(4, 3), shard_by="files", training=False, repeat=True)
    # A selection in one file: fewer files hold it than there are shards.
    first = d.select(np.arange(SHARD_SIZES[0]))
    with pytest.raises(
        ValueError, match="as many files as shards: 1 file holding the samples selected for 2"
    ):
        first.as_dataset(batch_size=2, shape=8, shard=(2, 1), shard_by="files")
    # In files 0 and 2: shard 1 (file 1) is empty; it is named, and why.
    ends = np.cumsum([0, *SHARD_SIZES])
    outer = d.select(np.r_[ends[0] : ends[1], ends[2] : ends[3]])
    n = SHARD_SIZES[0] + SHARD_SIZES[2]
    empty = (
        rf"Shard 1 of 2 \(shard_by='files': file k goes to shard k % 2\) is empty: the {n} samples selected"
    )
    with pytest.raises(ValueError, match=empty + r" are in files 0, 2, none of this shard's\. Use shard_by="):
        outer.as_dataset(batch_size=2, shape=8, shard=(2, 1), shard_by="files")
    with pytest.raises(ValueError, match="shard_by"):
        d.as_dataset(batch_size=2, shape=8, shard_by="rows")


# ---------------------------------------------------------------------------------------------- blend


def sources(flat_shards, batch_size=4):
    """Source k = shard file k, endless: a sample's label says its source."""
    return [
        ClassificationDataset(p).as_dataset(batch_size=batch_size, shape=4, shuffle=True, seed=k, repeat=True)
        for k, p in enumerate(flat_shards[:2])
    ]


def within(count, total, p, sigmas=4.5):
    return abs(count - total * p) <= sigmas * math.sqrt(total * p * (1 - p))


def test_blend_whole_batches_follows_the_weights(flat_shards):
    steps = 1200
    labels = np.stack([y.numpy() for _, y in bzna_tf.blend(sources(flat_shards), [3, 1], seed=7).take(steps)])
    assert labels.shape == (steps, 4)
    assert (labels == labels[:, :1]).all()  # every batch from one source
    from_first = int((labels[:, 0] == 0).sum())
    assert within(from_first, steps, 0.75), from_first


def test_blend_mixed_within_batches_follows_the_weights(flat_shards):
    steps, batch = 400, 8
    blended = bzna_tf.blend(sources(flat_shards, batch), [0.3, 0.7], seed=1, mix="sample")
    assert blended.element_spec[0].shape == (batch, 4, 4, 3)  # the sources' static batch size
    labels = np.stack([y.numpy() for _, y in blended.take(steps)])
    mixed = ((labels == 0).any(axis=1) & (labels == 1).any(axis=1)).mean()
    assert mixed > 0.9  # P(a batch of 8 is pure) = 0.3^8 + 0.7^8 ~ 0.06
    assert within(int((labels == 0).sum()), steps * batch, 0.3)
    again = bzna_tf.blend(sources(flat_shards), [0.3, 0.7], seed=1, mix="sample", batch_size=5)
    assert next(iter(again))[1].shape == (5,)


def test_blend_is_reproducible_and_new_each_iteration(flat_shards):
    def run(blended):
        return [y.numpy()[0] for _, y in blended.take(60)]

    a = bzna_tf.blend(sources(flat_shards), seed=11)
    first, second = run(a), run(a)
    assert first != second  # a new draw on each iteration
    assert run(bzna_tf.blend(sources(flat_shards), seed=11)) == first
    assert run(bzna_tf.blend(sources(flat_shards), seed=12)) != first


def test_blend_without_a_seed_follows_tensorflows_global_seed(flat_shards):
    def run():
        return [y.numpy()[0] for _, y in bzna_tf.blend(sources(flat_shards)).take(40)]

    try:
        tf.random.set_seed(
            3
        )  # as keras.utils.set_random_seed does: tf.data's sample_from_datasets follows it
        first = run()
        tf.random.set_seed(3)
        assert run() == first
    finally:
        tf.random.set_seed(None)


def test_a_blend_that_tf_distribute_auto_shards_needs_a_seed(flat_shards, monkeypatch):
    # Each worker would blend in its own order and keep every N-th batch of it: a source's batch kept by
    # two workers or by none. Sources sharded per worker (auto-sharding OFF) may blend with their own seeds.
    import json

    from bzna_tf.datasets import arguments

    cluster = {"cluster": {"worker": ["host0:2222", "host1:2222"]}, "task": {"type": "worker", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster))
    monkeypatch.setattr(arguments, "_warned_auto_shard", False)
    with pytest.warns(UserWarning, match="DATA"):
        unsharded = sources(flat_shards)
    with pytest.raises(ValueError, match=r"blend\(seed=None\) of unsharded datasets in a job of 2 workers"):
        bzna_tf.blend(unsharded)
    tf.random.set_seed(3)  # one global seed is refused too
    try:
        with pytest.raises(ValueError, match="one global seed too"):
            bzna_tf.blend(unsharded)
    finally:
        tf.random.set_seed(None)
    bzna_tf.blend(unsharded, seed=5)  # the same seed on every worker
    sharded = [
        ClassificationDataset(p).as_dataset(batch_size=4, shape=4, shuffle=True, seed=k, shard=(2, 0))
        for k, p in enumerate(flat_shards[:2])
    ]
    bzna_tf.blend(sharded)
    # One sharded source and one not: the blend's policy is OFF, so every worker read all of the other.
    for mixed in ([sharded[0], unsharded[1]], [unsharded[0], sharded[1]]):
        for seed in (None, 5):
            with pytest.raises(
                ValueError, match="blend of datasets sharded per worker .* and unsharded ones"
            ):
                bzna_tf.blend(mixed, seed=seed)
    # Nor after a call made on it (the attribute that tells it does not survive `.map`), nor as
    # device="gpu" builds it (the decoding stage carried the other attributes, not that one): accepted,
    # every worker read it whole.
    mapped = unsharded[1].map(lambda x, y: (x * 2, y)).prefetch(2)
    with pytest.raises(
        ValueError, match=r"sharded per worker \(dataset 0\) and unsharded ones \(dataset 1\)"
    ):
        bzna_tf.blend([sharded[0], mapped], seed=5)
    from bzna_tf.datasets import pipeline

    monkeypatch.setattr(pipeline, "decoder_device", lambda ctx=None: ("/device:CPU:0", None))  # as a GPU's
    on_gpu = ClassificationDataset(flat_shards[1]).as_dataset(batch_size=4, shape=4, seed=1, device="gpu")
    assert type(on_gpu).__name__ != type(unsharded[1]).__name__  # the decoding stage's
    with pytest.raises(ValueError, match="sharded per worker .* and unsharded ones"):
        bzna_tf.blend([sharded[0], on_gpu], seed=5)
    # One source that holds both (the message named "dataset 0" twice, as sharded and as unsharded).
    both = tf.data.Dataset.sample_from_datasets([sharded[0], unsharded[1]], seed=1)
    with pytest.raises(ValueError, match=r"\(dataset 0, which holds both\) and unsharded ones \(dataset 0\)"):
        bzna_tf.blend([both], seed=5)
    # A source sharded by hand (ds.shard: its policy stays AUTO) is taken as it is, mapped since too.
    by_hand = unsharded[1].unbatch().shard(2, 0).batch(4)
    bzna_tf.blend([sharded[0], by_hand], seed=5)
    bzna_tf.blend([sharded[0], by_hand.map(lambda x, y: (x, y))], seed=5)
    monkeypatch.delenv("TF_CONFIG")
    bzna_tf.blend(unsharded)  # one process
    bzna_tf.blend([sharded[0], unsharded[1]])


def test_sync_epochs_refuses_a_blend_and_its_sources(flat_shards):
    # SyncEpochs set each source as if it had read every step: after a resume, batches went unread.
    a, b = sources(flat_shards)
    blended = bzna_tf.blend([a, b], [0.5, 0.5], seed=0)
    for given, what in ((blended, "given a blend"), (a, "given a source of one")):
        with pytest.raises(ValueError, match=f"SyncEpochs cannot resume a bzna_tf.blend \\({what}\\)"):
            bzna_tf.callbacks.SyncEpochs(given)
    import gc

    bzna_tf.blend([a, b], seed=1)  # another blend of `a`, dropped at once: the first still holds it
    gc.collect()
    with pytest.raises(ValueError, match="given a source of one"):
        bzna_tf.callbacks.SyncEpochs(a)
    del blended  # a source used alone once its blends are gone is a pipeline like any other
    gc.collect()
    assert len(bzna_tf.callbacks.SyncEpochs(a)._states) == 1


def test_blend_stops_when_a_finite_source_ends_and_carries_on_without_stop_on_empty(flat_shards):
    # Source 0 ends after its 7 batches; source 1 never ends. Two finite sources would not do: a
    # draw that empties one and then takes the other's rest before returning to it yields every
    # sample, as a blend that never stops would.
    finite = ClassificationDataset(flat_shards[0]).as_dataset(batch_size=1, shape=4)
    endless = ClassificationDataset(flat_shards[1]).as_dataset(batch_size=1, shape=4, repeat=True)
    cap = 500  # the stopping blend ends near 14 elements; one that never stops reaches the cap
    for seed in (0, 1, 2):
        blend = bzna_tf.blend([finite, endless], [1, 1], seed=seed)
        got = [int(y.numpy()[0]) for _, y in blend.take(cap)]
        assert got.count(0) == SHARD_SIZES[0] and len(got) < cap, (seed, got)
        rest = bzna_tf.blend([finite, endless], [1, 1], seed=seed, stop_on_empty=False)
        more = [int(y.numpy()[0]) for _, y in rest.take(cap)]
        assert len(more) == cap and more.count(0) == SHARD_SIZES[0]


def test_blend_argument_errors(flat_shards):
    a, b = sources(flat_shards)
    with pytest.raises(ValueError, match="weights"):
        bzna_tf.blend([a, b], [1])
    with pytest.raises(ValueError, match="weights"):
        bzna_tf.blend([a, b], [1, -1])
    with pytest.raises(ValueError, match="mix"):
        bzna_tf.blend([a, b], mix="pixel")
    with pytest.raises(ValueError, match="differ"):
        bzna_tf.blend([a, a.map(lambda x, y: x)])
    with pytest.raises(ValueError, match="differ"):
        bzna_tf.blend([a, a.map(lambda x, y: (x, tf.cast(y, tf.int32)))])
    with pytest.raises(ValueError, match="batch_size"):
        bzna_tf.blend([a.unbatch().batch(3), b.unbatch().batch(3)], mix="sample")
    with pytest.raises(ValueError, match="batch_size.*is for mix='sample'"):
        bzna_tf.blend([a, b], batch_size=3)
    with pytest.raises(ValueError, match="tf.data.Datasets"):
        bzna_tf.blend([])


def _named(path, names, targets):
    """A small file whose pictures have ``targets`` and whose stored class names are ``names``."""
    from bzna_tf import BznaWriter
    from bzna_tf.convert import encode_image

    with BznaWriter(path, metadata={"class_names": names}) as w:
        for i, t in enumerate(targets):
            inp, thumb = encode_image(np.full((16, 16, 3), 40 * t, np.uint8), preset="ultrafast")
            w.append(inp, thumb=thumb, target=t, filename=f"{i}.png")
    return ClassificationDataset(path).as_dataset(batch_size=2, shape=4, repeat=True)


def test_blend_refuses_datasets_that_number_their_classes_differently(tmp_path):
    pets = _named(tmp_path / "pets.bzna", ["cat", "dog"], [0, 1])
    extra = _named(tmp_path / "extra.bzna", ["dog", "eel"], [0, 1])  # converted from other class folders
    said = (
        r"dataset 1 \(ClassificationDataset\('.*extra.bzna'.*\)\) names class 0 'dog', and dataset 0 "
        r"\(ClassificationDataset\('.*pets.bzna'.*\)\) names it 'cat': blend keeps each dataset's labels "
        r"as they are"
    )
    with pytest.raises(ValueError, match=said):
        bzna_tf.blend([pets, extra], seed=1)
    # Numbered alike (one more class, or an unnamed target): blended, the names merged by target.
    more = _named(tmp_path / "more.bzna", ["cat", "dog", "eel"], [2, 0])
    blended = bzna_tf.blend([pets, more], seed=1)
    assert blended.bzna_class_names[0] == ["cat", "dog", "eel"]
    with pytest.raises(ValueError, match=r"names class 2 'ant'.* names it 'eel'"):  # a blend of blends too
        bzna_tf.blend([blended, _named(tmp_path / "ant.bzna", ["cat", "dog", "ant"], [2])], seed=1)
    # Labels mapped by the user are theirs: not compared.
    bzna_tf.blend([pets, extra.map(lambda x, y: (x, y + 2))], seed=1)


# -------------------------------------------------------------------------------------------- preview


def test_preview_grid_size_and_tiles_match_the_decoded_samples(flat_shards):
    d = ClassificationDataset(flat_shards)
    warp = bzna_tf.transforms.RandomResizedCrop(scale=(0.5, 1.0), flip_h=0.5)
    p = bzna_tf.preview(d, 5, shape=(24, 32), warp=warp, seed=4)
    rows, cols, height, width = grid_size(5, (24, 32))
    assert (rows, cols) == (2, 3) and p.image.shape == (height, width, 3) and p.image.dtype == np.uint8
    assert height == 2 * (24 + CAPTION) + 3 * 4 and width == 3 * 32 + 4 * 4
    assert len(set(p.indices)) == 5
    names = d.filenames
    for i, (index, label) in enumerate(zip(p.indices, p.labels, strict=True)):
        k, j = shard_sample(names[index])
        assert label == k
        tile = p.tile(i)
        # the tile is that sample's flat colour (an H.265 round trip away; edge pixels may be fill) ...
        assert np.abs(np.median(tile.reshape(-1, 3), axis=0) - shard_colour(k, j)).max() <= 6
        # ... and exactly what as_dataset makes of it with the same seed and warp
        alone = d.select([index]).as_dataset(batch_size=1, shape=(24, 32), warp=warp, seed=4)
        image = next(iter(alone))[0][0].numpy()
        np.testing.assert_array_equal(tile, np.clip(np.rint(image), 0, 255).astype(np.uint8))
        # the caption under it says "index: label"
        y, x, h, w = p.boxes[i]
        text = render_text(caption(index, label))[:, :w]
        strip = p.image[y + h : y + h + CAPTION, x : x + w]
        top = (CAPTION - text.shape[0]) // 2
        assert (strip[top : top + text.shape[0], : text.shape[1]][text] == 255).all()
        assert (strip[top : top + text.shape[0], : text.shape[1]][~text] == 40).all()
    assert bzna_tf.preview(d, 5, shape=(24, 32), warp=warp, seed=4).indices == p.indices
    assert bzna_tf.preview(d, 5, shape=(24, 32), warp=warp, seed=5).indices != p.indices
    assert bzna_tf.preview(d, 3, shuffle=False, shape=8).indices == [0, 1, 2]
    with pytest.warns(PreviewWarning, match=f"asked for 100 samples, but .* has {len(d)} samples"):
        assert len(bzna_tf.preview(d, 100, shape=8).indices) == len(d)


def test_caption_font():
    glyphs = {c: render_text(c, scale=1) for c in "0123456789-:"}
    assert all(g.shape == (5, 4) for g in glyphs.values())
    assert len({g.tobytes() for g in glyphs.values()}) == len(glyphs)  # every glyph distinct
    assert render_text("12", scale=2).shape == (10, 16)
    assert caption(17, 3) == "17: 3" and caption(4, -1) == "4: -"


def test_cli_preview_writes_the_png(flat_shards, tmp_path, capsys):
    out = tmp_path / "grid.png"
    files = [str(p) for p in flat_shards]  # as the shell expands part-*.bzna (a pattern opens one dataset)
    args = [
        "preview",
        *files,
        "-o",
        str(out),
        "--n",
        "6",
        "--size",
        "16",
        "24",
        "--seed",
        "2",
        "--warp",
        "similarity",
        "--degrees",
        "10",
        "--flip-h",
        "0.5",
    ]
    assert cli(args) == 0
    png = tf.io.decode_png(out.read_bytes()).numpy()
    assert png.shape == (*grid_size(6, (16, 24))[2:], 3)
    d = ClassificationDataset(flat_shards)
    warp = bzna_tf.transforms.SimilarityTransform(degrees=10, flip_h=0.5, resize=True)
    np.testing.assert_array_equal(png, bzna_tf.preview(d, 6, shape=(16, 24), warp=warp, seed=2).image)
    assert f"{out}: " in capsys.readouterr().out
    lst = tmp_path / "two.list"
    lst.write_text(f"MULTI-SAMPLE_INCLUSION_V2\n2 1\n{os.path.dirname(flat_shards[0])}\npart-1.bzna 2 4 1\n")
    assert (
        cli(["preview", *files, "-o", str(out), "--first", "--sample-list", str(lst), "--warp", "center"])
        == 0
    )
    assert "2 samples (11, 8)" in capsys.readouterr().out  # global indices 7 + 4 and 7 + 1, in list order
    assert cli(["preview", *files, "-o", str(out), "--warp", "center", "--flip-h", "1"]) == 1
    assert "--warp center takes only --crop" in capsys.readouterr().err
    for crop in ("0", "-1", "nan"):
        assert cli(["preview", *files, "-o", str(out), "--warp", "center", "--crop", crop]) == 1
        assert "--crop takes the crop's side fraction, a number > 0" in capsys.readouterr().err
    # --crop with another warp changed nothing (the picture was the same with and without it): refused.
    for warp in ("similarity", "random-resized-crop"):
        assert cli(["preview", *files, "-o", str(out), "--warp", warp, "--crop", "0.5"]) == 1
        assert f"--crop is --warp center's (the crop's side fraction); --warp {warp} crops" in (
            capsys.readouterr().err
        )
