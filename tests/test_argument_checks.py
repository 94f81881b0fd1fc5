"""Bad arguments to the public API: a clear error naming the argument, before any graph runs.

Each case here was once taken in silence (a truthy "False", a size wrapped to
int32, a string read character by character, a negative std), or failed
late and unclearly, or crashed or hung the process (an eager call bypassing
an op's shape function, a dataset handed to ``blend`` where a list was
expected, a tuning count of 2**40).
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import bzna_tf
from bzna_tf import ClassificationDataset, SampleList, blend, preview
from bzna_tf import layers as L
from bzna_tf import transforms as T
from bzna_tf.cli import main as cli
from bzna_tf.ops import epoch_schedule, read_samples, verify_checksums, warp_rgb


@pytest.fixture(scope="module")
def data(flat_shards):
    return ClassificationDataset(flat_shards)


def _as_dataset(data, **kwargs):
    return data.as_dataset(**{"batch_size": 2, "shape": (8, 8), **kwargs})


# ------------------------------------------------------------------ flags


@pytest.mark.parametrize("arg", ["shuffle", "training", "drop_remainder", "with_filenames"])
@pytest.mark.parametrize("value", ["False", "no", "", 0, 1, None])
def test_as_dataset_flags_are_bools(data, arg, value):
    with pytest.raises(
        TypeError, match=re.escape(f"Expected `{arg}` as True or False. Received: {arg}={value!r}")
    ):
        _as_dataset(data, **{arg: value}, seed=1)


def test_as_dataset_flags_take_numpy_bools(data):
    a = _as_dataset(data, shuffle=np.bool_(True), training=np.False_, seed=3)
    b = _as_dataset(data, shuffle=True, training=False, seed=3)
    for (x, y), (u, v) in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, u)
        np.testing.assert_array_equal(y, v)


def test_layer_and_transform_flags_are_bools():
    with pytest.raises(TypeError, match=r"`random` as True or False. Received: random='False'"):
        L.SimilarityTransform(8, 8, random="False")
    for arg in ("resize", "keep_ratio", "random_crop"):
        with pytest.raises(TypeError, match=f"`{arg}` as True or False. Received: {arg}='False'"):
            T.SimilarityTransform(**{arg: "False"})
    with pytest.raises(TypeError, match=r"`keep_ratio` as True or False"):
        L.CenterResizedCrop(8, 8, keep_ratio="False")
    assert T.SimilarityTransform(keep_ratio=np.False_).keep_ratio is False
    with pytest.raises(TypeError, match=r"`seed` as an integer or None. Received: seed=True"):
        L.RandomResizedCrop(8, 8, seed=True)


def test_checksum_switch_and_read_samples_take_bools_only(flat_shards):
    before = verify_checksums()
    for value in ("no", "", 1):
        with pytest.raises(TypeError, match=r"`enabled` as True, False or None"):
            verify_checksums(value)
    assert verify_checksums() == before  # unchanged by the refused calls
    with pytest.raises(TypeError, match=r"`with_filenames` as True or False. Received: with_filenames='no'"):
        read_samples(flat_shards[:1], [0], with_filenames="no")
    with pytest.raises(TypeError, match=r"`with_filenames` as True or False"):
        bzna_tf.ops.BznaDataset(flat_shards[:1], with_filenames="no")


def test_preview_flags_and_seed_as_as_dataset_takes_them(flat_shards):
    with pytest.raises(TypeError, match=r"`shuffle` as True or False. Received: shuffle='no'"):
        preview(flat_shards, 4, shape=(8, 8), shuffle="no")
    # A negative seed is reduced modulo 2**63, as as_dataset reduces it: the same grid as its residue.
    a = preview(flat_shards, 4, shape=(8, 8), seed=-1)
    b = preview(flat_shards, 4, shape=(8, 8), seed=2**63 - 1)
    assert a.indices == b.indices
    np.testing.assert_array_equal(a.image, b.image)
    with pytest.raises(TypeError, match=r"`seed` as an integer or None. Received: seed='a'"):
        preview(flat_shards, 4, shape=(8, 8), seed="a")


# ------------------------------------------------------------------ tf.data tuning


@pytest.mark.parametrize("arg", ["num_parallel_calls", "prefetch"])
@pytest.mark.parametrize("value", [2**40, -2, "4", 2.0, True])
def test_tuning_counts_are_checked(data, arg, value):
    with pytest.raises(
        ValueError, match=re.escape(f"Expected `{arg}` as tf.data.AUTOTUNE (the default) or an")
    ):
        _as_dataset(data, **{arg: value})


def test_tuning_counts_taken(data):
    want = [y.numpy().tolist() for _, y in _as_dataset(data)]
    for kwargs in (
        {"num_parallel_calls": 1, "prefetch": 0},
        {"num_parallel_calls": np.int64(3), "prefetch": np.int64(2)},
        {"num_parallel_calls": tf.data.AUTOTUNE, "prefetch": tf.data.AUTOTUNE},
    ):
        assert [y.numpy().tolist() for _, y in _as_dataset(data, **kwargs)] == want
    with pytest.raises(ValueError, match=r"`num_parallel_calls` as tf.data.AUTOTUNE .* from 1 to 1024"):
        _as_dataset(data, num_parallel_calls=0)


def test_a_prefetch_holding_more_than_16_gib_of_images_is_refused(data):
    # 1024 batches of 64 x 256 x 256 x 3 float32: 48 GiB
    with pytest.raises(ValueError, match=r"prefetch holds at most 16 GiB of images; prefetch=1024 batches"):
        data.as_dataset(batch_size=64, shape=(256, 256), prefetch=1024)
    data.as_dataset(batch_size=64, shape=(256, 256), prefetch=64)  # 3 GiB at most


# ------------------------------------------------------------------ sizes


def test_output_sizes_past_int32_are_refused_not_wrapped():
    image = np.zeros((1, 4, 4, 3), np.uint8)
    for shape in ((2**32 + 4, 4), (2**31, 4)):
        with pytest.raises(ValueError, match=r"two integers from 1 to 2147483647"):
            warp_rgb(image, np.eye(3), shape)
    for shape in ((4.7, 4), ("4", "4"), (True, True), (np.float32(4), 4)):
        with pytest.raises(TypeError, match=r"`output_shape` = \(height, width\), two integers"):
            warp_rgb(image, np.eye(3), shape)
    assert warp_rgb(image, np.eye(3), (np.int64(3), 5)).shape == (1, 3, 5, 3)
    for layer in (L.CenterResizedCrop, L.RandomResizedCrop, L.DecodeWarp):
        with pytest.raises(ValueError, match=r"`height` as an integer from 1 to 2147483647"):
            layer(2**32 + 4, 4)


def test_transform_ranges_are_not_read_character_by_character():
    for kwargs in ({"scale": b"12"}, {"scale": "12"}, {"ratio": "12"}, {"degrees": "19"}, {"translate": "12"},
                   {"scale": {0.5: 1, 1.0: 2}}):  # fmt: skip
        (arg,) = kwargs
        with pytest.raises(TypeError, match=f"Expected `{arg}` as a"):
            T.SimilarityTransform(**kwargs)
    with pytest.raises(TypeError, match=r"Expected `scale` as a"):
        L.RandomResizedCrop(8, 8, scale=b"12")
    with pytest.raises(ValueError, match=r"`scale` as a positive, finite number. Received: scale=1e\+300"):
        T.CenterResizedCrop(1e300)


def test_a_std_must_be_positive_and_a_norm_nonzero(data):
    for make in (lambda: L.Normalize(mean=0.5, std=-0.2), lambda: _as_dataset(data, normalize=(0.5, -0.2)),
                 lambda: L.DecodeWarp(8, 8, mean=0.5, std=(0.2, -0.2, 0.2))):  # fmt: skip
        with pytest.raises(ValueError, match=r"positive `std` \(a standard deviation\)"):
            make()
    with pytest.raises(ValueError, match=r"nonzero `norm`"):
        L.Normalize(norm=0)
    image = np.full((1, 2, 2, 3), 255, np.uint8)
    assert (
        float(warp_rgb(image, np.eye(3), (2, 2), bias=255.0, norm=-1.0)[0, 0, 0, 0]) == 0.0
    )  # negative: taken


def test_numbers_are_not_text_nor_flags(data):
    cases = (("flip_h", "no"), ("flip_h", "1"), ("degrees", "19"), ("translate", {}), ("crop", "0"))
    for arg, value in cases:
        with pytest.raises(TypeError, match=re.escape(f"Expected `{arg}` as numbers (or True/False)")):
            T.compute_affine_matrix((10, 10), (5, 5), **{arg: value})
        with pytest.raises(TypeError, match=re.escape(f"Expected `{arg}` as numbers (or True/False)")):
            T.compute_affine_matrix_tf((10, 10), (5, 5), **{arg: value})
    for arg, value in (("mean", "a"), ("mean", True), ("std", ["0.2"] * 3), ("bias", "3"), ("norm", False)):
        with pytest.raises(TypeError, match=re.escape(f"Expected `{arg}` as a number or 3 numbers")):
            L.Normalize(**{arg: value})
    for make in (lambda: T.ConstantBiasTransform("3"), lambda: T.ConstantNormTransform(True)):
        with pytest.raises(TypeError, match=r"to be a number or 3 numbers"):
            make()
    with pytest.raises(TypeError, match=r"Expected `fill_value` to be a number or 3 numbers"):
        _as_dataset(data, fill_value=True)  # the layers refuse it too
    flips = T.compute_affine_matrix((10, 10), (5, 5), flip_h=np.array([True, False]))  # per-sample flags
    assert flips[0, 0, 0] == -1 and flips[1, 0, 0] == 1


def test_sizes_of_the_matrices_must_be_sizes():
    t = T.RandomResizedCrop()
    for in_shapes in ([[-5, 10]], [[np.nan, 10]], [[np.inf, 10]], tf.constant([[-1, 10]])):
        with pytest.raises(ValueError, match=r"Expected `in_shapes` as sizes of 0 or more"):
            t.matrices(in_shapes, (4, 4))
    for out_shape in ((0, 4), (4, -1), (np.nan, 4)):
        with pytest.raises(ValueError, match=r"Expected `out_shape` as positive sizes"):
            t.matrices([[10, 10]], out_shape, backend="numpy")
    assert t.matrices([[0, 10]], (4, 4)).shape == (1, 3, 3)  # an empty image: all fill, any matrix


def test_affine_shapes_may_be_tuples_of_tensors_in_graphs():
    """``(tf.shape(x)[0], tf.shape(x)[1])``: tf.constant refused it; float64 kept beside the tensors."""
    want = T.compute_affine_matrix((4, 6), (5, 5), degrees=0.1, translate=(0.3, 0.7), flip_h=True)

    @tf.function
    def graph(x):
        shape = (tf.shape(x)[0], tf.shape(x)[1])
        return T.compute_affine_matrix_tf(shape, (5, 5), degrees=0.1, translate=(0.3, 0.7), flip_h=True,
                                          dtype=tf.float64)  # fmt: skip

    np.testing.assert_array_equal(graph(tf.zeros((4, 6))), want)
    eager = T.compute_affine_matrix_tf((tf.constant(4), 6), (5, 5), degrees=0.1, translate=(0.3, 0.7),
                                       flip_h=True, dtype=tf.float64)  # fmt: skip
    np.testing.assert_array_equal(eager, want)


# ------------------------------------------------------------------ ops called eagerly


def test_eager_op_inputs_of_the_wrong_rank_are_refused_not_a_crash(flat_shards):
    # The op's shape function runs only where a graph is built; eagerly, the kernel checks (was an abort).
    for args, name in ((([0], [0, 1], [1, 2]), "seed"), (([0], [0, 1], []), "seed"),
                       (([[0, 1]], [0, 1], 1), "positions"), (([0], [[0, 1]], 1), "selection")):  # fmt: skip
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"expected `{name}` as a"):
            epoch_schedule(*args)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"expected `indices` as a vector"):
        read_samples(flat_shards[:1], [[0, 1]])
    a = read_samples(
        flat_shards[:1], tf.constant([1, 0], tf.int32), with_filenames=True
    )  # int32 as BznaDataset
    assert [n.decode() for n in a["filename"].numpy()] == ["s0_01.png", "s0_00.png"]
    with pytest.raises(TypeError, match=r"Expected integer indices. Received: indices of dtype float32"):
        read_samples(flat_shards[:1], [0.5])


# ------------------------------------------------------------------ everything else


def test_blend_of_one_dataset_instead_of_a_list_is_refused_without_reading_it(data):
    ds = _as_dataset(data)
    with pytest.raises(ValueError, match=r"Expected a list of tf.data.Datasets, as in blend\(\[a, b\]"):
        blend(ds, seed=1)  # list(ds) read it all first (an endless one for ever)
    for seed in ("x", 1.5, True):
        with pytest.raises(TypeError, match=r"`seed` as an integer or None"):
            blend([ds, ds], seed=seed)
    with pytest.raises(TypeError, match=r"`stop_on_empty` as True or False"):
        blend([ds, ds], seed=1, stop_on_empty="no")


def test_unclear_arguments_get_named(data, flat_shards, tmp_path):
    with pytest.raises(TypeError, match=r"`input_context` as the tf.distribute.InputContext"):
        _as_dataset(data, input_context=object())
    ctx = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=5)
    with pytest.raises(ValueError, match=r"input_context with num_input_pipelines=3, input_pipeline_id=5"):
        _as_dataset(data, input_context=ctx)
    with pytest.raises(
        ValueError, match=r"initial_epoch=4611686018427387904 .* past 2\*\*62.*`initial_epoch`"
    ):
        _as_dataset(data, initial_epoch=2**62)
    with pytest.raises(ValueError, match=r"repeat=4611686018427387904 .* past 2\*\*62"):
        _as_dataset(data, repeat=2**62)
    with pytest.raises(TypeError, match=r"`sample_list` as a bzna_tf.SampleList or the path"):
        _as_dataset(data, sample_list=123)
    with pytest.raises(TypeError, match=r"`sample_list` as a bzna_tf.SampleList"):
        SampleList.of(None)
    for paths in (flat_shards[0].encode(), None, 123, [None], [flat_shards[0].encode()]):
        with pytest.raises(TypeError, match=r"Expected (a path|each path)"):
            ClassificationDataset(paths)
    with pytest.raises(TypeError, match=r"Expected `root` as a path"):
        bzna_tf.ImageNet(None)


def test_cli_refuses_an_empty_output_name_and_a_dispatcher_without_a_port(tmp_path, capsys):
    from bzna_tf import service

    folder = tmp_path / "images"
    folder.mkdir()
    assert cli(["convert", "folder", str(folder), ""]) != 0
    assert (
        "Expected an output file name (e.g. DIR/train.bzna). Received: an empty name"
        in capsys.readouterr().err
    )
    assert not list(tmp_path.glob("*partial*"))
    for address in ("bogus", "localhost", "grpc://host:", "host:99999", None):
        with pytest.raises(ValueError, match=r"`dispatcher_address` as the dispatcher's host:port"):
            service.worker(address, 0)
