"""What a new user falls into with datasets (issue 25 items 1, 4 and 9): each case refused or warned
about, saying what to do, instead of a silent data mistake or a confusing error."""

import json
import warnings

import numpy as np
import pytest

import bzna_tf
from bzna_tf import BznaFile, BznaWriter, ClassificationDataset, Dataset, ImageNet
from bzna_tf.cli import main

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def encoded():
    """Four small encoded pictures (input, thumb), of flat colours."""
    from bzna_tf.convert import encode_image

    return [
        encode_image(np.full((16 + 4 * i, 24, 3), 40 * i + 20, np.uint8), preset="ultrafast")
        for i in range(4)
    ]


def write(path, encoded, targets):
    """A .bzna file at ``path`` of len(targets) pictures with these targets (None: unlabelled, last)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with BznaWriter(path) as w:
        for k, target in enumerate(targets):
            inp, thumb = encoded[k % len(encoded)]
            w.append(inp, thumb=thumb, target=target, filename=f"{path.stem}_{k}.png")
    return path


def shards(folder, stem, count, encoded, per_shard=2):
    return [
        write(folder / f"{stem}-{k:05d}-of-{count:05d}.bzna", encoded, list(range(per_shard)))
        for k in range(count)
    ]


# ------------------------------------------------------------------ item 1: one directory, one dataset


def test_a_folder_with_two_shard_sets_is_refused_and_a_pattern_picks_one(tmp_path, encoded):
    """Converted with --num-shards 4, then 3, into one folder: 14 samples for 7 pictures."""
    shards(tmp_path, "s", 4, encoded)
    shards(tmp_path, "s", 3, encoded)
    for cls in (Dataset, ClassificationDataset):
        with pytest.raises(ValueError, match=r"holds 2 datasets, not one") as e:
            cls(tmp_path)
        text = str(e.value)
        assert "s-*-of-00003.bzna (3 files)" in text and "s-*-of-00004.bzna (4 files)" in text
        assert "pattern" in text
    assert len(Dataset(str(tmp_path / "s-*-of-00004.bzna"))) == 8
    with pytest.raises(ValueError, match=r"two sets of shards named s.*-of-00003\.bzna"):
        Dataset(str(tmp_path / "s-*.bzna"))


def test_train_shards_beside_a_val_file_are_not_one_dataset(tmp_path, encoded):
    """train-*-of-* plus val.bzna: read as one set, train and val would be mixed."""
    shards(tmp_path, "train", 2, encoded, per_shard=3)
    write(tmp_path / "val.bzna", encoded, [0, 1])
    with pytest.raises(ValueError, match=r"holds 2 datasets") as e:
        ClassificationDataset(tmp_path)
    assert "train-*-of-00002.bzna (2 files), val.bzna" in str(e.value)
    assert "split=" in str(e.value)  # ImageNet's per-split folders: how to pick a split
    assert len(ImageNet(tmp_path, split="train")) == 6 and len(ImageNet(tmp_path, split="val")) == 2
    # A split that selects nothing names the splits and their sizes.
    with pytest.raises(ValueError, match=r"selects no samples \(the splits: all 8 samples, train 6 samples"):
        ImageNet(tmp_path, split="val[1000:2000]")
    # A per-split folder holds only split files.
    write(tmp_path / "extra.bzna", encoded, [0])
    with pytest.raises(ValueError, match=r"\.bzna files of no ImageNet split: extra\.bzna"):
        ImageNet(tmp_path, split="val")


@pytest.mark.parametrize(
    "union", ["train_val.bzna", "train-val.bzna", "imagenet.trainval.val.bzna", "val-test.bzna"]
)
def test_a_file_whose_name_names_two_splits_is_refused_as_imagenet_split(tmp_path, encoded, union):
    """train_val.bzna (train and val together, for a final fit) beside train.bzna was ImageNet's val split
    (its last word): evaluation on training images."""
    write(tmp_path / "train.bzna", encoded, [0, 1, 2])
    write(tmp_path / union, encoded, [0, 1, 2, 0, 1, 2])
    for root in (tmp_path, str(tmp_path / "*.bzna"), [tmp_path / "train.bzna", tmp_path / union]):
        with pytest.raises(
            ValueError, match=r"its name names the .* splits, so it may hold more than one"
        ) as e:
            ImageNet(root, split="val")
        assert union in str(e.value) and "ClassificationDataset" in str(e.value)
    with pytest.raises(ValueError, match="its name names the"):
        ImageNet(tmp_path / union)  # one such file too: which split is it?
    (tmp_path / union).unlink()
    write(tmp_path / "val.bzna", encoded, [0, 1])  # one split's words only: read as before
    assert len(ImageNet(tmp_path, split="val")) == 2 and len(ImageNet(tmp_path, split="train")) == 3
    # A split word elsewhere in the name is the dataset's name, not a second split.
    for name in ("my_test_set-val.bzna", "testing_run-val.bzna", "contest-val.bzna"):
        assert len(ImageNet(write(tmp_path / "other" / name, encoded, [0, 1]), split="val")) == 2


def test_a_file_reached_twice_is_refused(tmp_path, encoded):
    f = write(tmp_path / "a.bzna", encoded, [0, 1])
    write(tmp_path / "b.bzna", encoded, [0, 1])
    for paths in (
        [f, f],
        [str(f), str(tmp_path / "." / "a.bzna")],  # two spellings of one file
        [str(f), str(tmp_path / "a*.bzna")],  # a path and a pattern that matches it
    ):
        with pytest.raises(ValueError, match="a file is listed twice"):
            Dataset(paths)
    assert len(Dataset([f, tmp_path / "b.bzna"])) == 4


def test_info_and_verify_still_take_every_file_of_a_folder(tmp_path, encoded, capsys):
    write(tmp_path / "a.bzna", encoded, [0, 1])
    write(tmp_path / "b.bzna", encoded, [0])
    assert main(["info", "--json", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["samples"] for r in out["files"]] == [2, 1]
    from bzna_tf.verify import verify

    report = verify(str(tmp_path), decode=False)
    assert report.ok and [r.file for r in report.files] == [
        str(tmp_path / "a.bzna"),
        str(tmp_path / "b.bzna"),
    ]


# ------------------------------------------------------------------ item 4: unlabelled samples


@pytest.fixture()
def partly_labelled(tmp_path, encoded):
    """Targets 0, 1, a stored -5 (a negative label), then one without a target (-1)."""
    return write(tmp_path / "partly.bzna", encoded, [0, 1, -5, None])


def test_unlabelled_samples_are_refused_with_their_count_and_the_fix(partly_labelled):
    d = ClassificationDataset(partly_labelled)
    with pytest.raises(ValueError, match=r"reads 2 unlabelled samples \(target < 0\) of 4.*ds\.labelled\(\)"):
        d.as_dataset(batch_size=2, shape=8)
    with pytest.raises(ValueError, match="reads 1 unlabelled sample"):
        d.select([0, 3]).as_dataset(batch_size=2, shape=8)
    with pytest.raises(ValueError, match="unlabelled='keep' is for training=False"):
        d.as_dataset(batch_size=2, shape=8, unlabelled="keep")
    with pytest.raises(ValueError, match="Received: unlabelled='drop'"):
        d.as_dataset(batch_size=2, shape=8, unlabelled="drop")
    labelled = d.labelled()
    assert labelled.indices.tolist() == [0, 1]
    assert [y.numpy().tolist() for _, y in labelled.as_dataset(batch_size=2, shape=8)] == [[0, 1]]
    every = d.as_dataset(batch_size=4, shape=8, training=False, unlabelled="keep")
    assert [y.numpy().tolist() for _, y in every] == [[0, 1, -5, -1]]
    # Dataset reads pictures without labels: every sample.
    assert sum(x.shape[0] for x in Dataset(partly_labelled).as_dataset(batch_size=4, shape=8)) == 4
    with pytest.raises(ValueError, match="holds no labelled sample"):
        d.select([2, 3]).labelled()


def test_info_samplelist_and_as_dataset_agree_on_labelled(partly_labelled, tmp_path, capsys):
    with BznaFile(partly_labelled) as f:
        assert f.num_labelled == 2 and f.num_targets == 3  # a stored -5 is no class
    assert main(["info", "--json", str(partly_labelled)]) == 0
    assert json.loads(capsys.readouterr().out)["labelled"] == 2
    listed = tmp_path / "labelled.list"
    assert main(["samplelist", str(partly_labelled), "-o", str(listed), "--labelled-only"]) == 0
    d = ClassificationDataset(partly_labelled)
    assert (
        d.select(bzna_tf.SampleList.read(listed)).indices.tolist() == d.labelled().indices.tolist() == [0, 1]
    )
    d.as_dataset(batch_size=2, shape=8, sample_list=listed)  # no unlabelled sample: accepted


# ------------------------------------------------------------------ item 9: clear argument errors


def test_shape_and_seed_errors_quote_what_was_given(partly_labelled):
    d = Dataset(partly_labelled)
    with pytest.raises(ValueError, match=r"Received: shape='32'"):
        d.as_dataset(batch_size=2, shape="32")
    with pytest.raises(ValueError, match=r"Received: shape=\(8, 0\)"):
        d.as_dataset(batch_size=2, shape=(8, 0))
    with pytest.raises(TypeError, match=r"Expected `seed` as an integer or None. Received: seed='a'"):
        d.as_dataset(batch_size=2, shape=8, seed="a")


def test_an_output_past_the_bound_is_refused_before_any_allocation(partly_labelled):
    d = Dataset(partly_labelled)
    with pytest.raises(ValueError, match=r"at most 4 GiB.*Received: shape=100000, batch_size=2"):
        d.as_dataset(batch_size=2, shape=100000)
    from bzna_tf.datasets import MAX_BATCH_BYTES

    side = int((MAX_BATCH_BYTES / 12) ** 0.5)  # one batch of 1 image just under the bound: accepted
    d.as_dataset(batch_size=1, shape=side)
    with pytest.raises(ValueError, match="at most 4 GiB"):
        d.as_dataset(batch_size=2, shape=side)


def test_normalize_takes_a_layer_or_a_pair_and_warns_on_255_units(partly_labelled):
    with pytest.warns(UserWarning, match=r"mean=\[123\.7, 116\.3, 103\.5\] looks like \[0, 255\] units"):
        bzna_tf.layers.Normalize(mean=(123.7, 116.3, 103.5))
    d = Dataset(partly_labelled)
    with pytest.warns(UserWarning, match=r"mean=.* and std=.* look like \[0, 255\] units"):
        d.as_dataset(batch_size=2, shape=8, normalize=((123.7, 116.3, 103.5), (58.4, 57.1, 57.4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d.as_dataset(batch_size=2, shape=8, normalize=((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))
        d.as_dataset(batch_size=2, shape=8, normalize=bzna_tf.layers.Normalize(bias=123.7, norm=1 / 58.4))
    with pytest.raises(
        TypeError, match=r"Expected `normalize` as a \(mean, std\) pair.*Received: normalize=0\.5"
    ):
        d.as_dataset(batch_size=2, shape=8, normalize=0.5)
    # The layer and the pair give the same images.
    pair = ((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))
    a = next(iter(d.as_dataset(batch_size=4, shape=8, normalize=pair))).numpy()
    layer = bzna_tf.layers.Normalize(mean=pair[0], std=pair[1])
    b = next(iter(d.as_dataset(batch_size=4, shape=8, normalize=layer))).numpy()
    np.testing.assert_array_equal(a, b)


def test_preview_of_a_tf_data_pipeline_says_what_it_takes(partly_labelled):
    ds = Dataset(partly_labelled).as_dataset(batch_size=2, shape=8)
    with pytest.raises(TypeError, match=r"Expected `data` as a bzna_tf\.Dataset .*Received: data=<"):
        bzna_tf.preview(ds)
    # The dataset itself works, unlabelled samples included (captioned "-").
    p = bzna_tf.preview(ClassificationDataset(partly_labelled), 4, shape=8, shuffle=False)
    assert p.labels == [0, 1, -5, -1]


def test_sync_epochs_warns_when_a_resume_cannot_be_exact(partly_labelled):
    d = Dataset(partly_labelled)
    warp = bzna_tf.layers.RandomResizedCrop(8, 8)
    with pytest.warns(UserWarning, match="built without a `seed`"):
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, shape=8, shuffle=True))
    with pytest.warns(UserWarning, match="built without a `seed`"):
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, warp=warp))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, warp=warp, shuffle=True, seed=1))
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, shape=8))  # nothing random: exact anyway
        bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, warp=warp, training=False))
        # Warps of no random range draw nothing either (they were taken as random: a seed drawn, a warning).
        for fixed in (
            bzna_tf.layers.SimilarityTransform(8, 8, resize=True, keep_ratio=True),
            bzna_tf.layers.SimilarityTransform(8, 8, degrees=(5, 5), flip_h=1.0),
            bzna_tf.layers.SimilarityTransform(8, 8, scale=(0.5, 0.5), ratio=(1, 1)),
        ):
            bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, warp=fixed))
    for drawing in (
        bzna_tf.layers.SimilarityTransform(8, 8, flip_h=0.5),
        bzna_tf.layers.SimilarityTransform(8, 8, translate=0.1),
        bzna_tf.layers.RandomResizedCrop(8, 8, scale=(0.5, 0.5), ratio=(1, 1)),  # the position is drawn
    ):
        with pytest.warns(UserWarning, match="built without a `seed`"):
            bzna_tf.callbacks.SyncEpochs(d.as_dataset(batch_size=2, warp=drawing))
