"""The public API's names: as_dataset's signatures spelled out, one name per concept, old names as
deprecated aliases, and hints for the keywords users of Keras or TFDS type."""

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import bzna_tf
from bzna_tf import BznaWriter, ClassificationDataset, Dataset, ImageNet
from bzna_tf.datasets import arguments

tf = pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[1]
N = 3


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """N flat pictures, targets 0..N-1, with filenames: enough to read what each name gives."""
    from bzna_tf.convert import encode_image

    path = tmp_path_factory.mktemp("api") / "small.bzna"
    with BznaWriter(path) as w:
        for i in range(N):
            rgb = np.full((24 + 8 * i, 32, 3), 40 + 60 * i, np.uint8)
            inp, thumb = encode_image(rgb, preset="ultrafast")
            w.append(inp, thumb=thumb, target=i, filename=f"img_{i}.png")
    return path


# ----------------------------------------------------------------------------- the signatures


def _parameters(func):
    return [p for p in inspect.signature(func).parameters.values() if p.name != "self"]


def test_as_dataset_signatures_spell_out_every_argument_and_agree():
    base = _parameters(Dataset.as_dataset)
    labelled = _parameters(ClassificationDataset.as_dataset)
    assert all(p.kind is p.KEYWORD_ONLY for p in base + labelled)  # no **kwargs, no positional
    # ClassificationDataset's (so ImageNet's) is Dataset's, name for name, default for default, + unlabelled.
    assert labelled[:-1] == base and labelled[-1].name == "unlabelled"
    assert _parameters(ImageNet.as_dataset) == labelled
    # check() takes every argument but the sample list (which the catalog applies): the same names.
    checked = set(inspect.signature(arguments.check).parameters)
    assert checked == {p.name for p in base} - {"sample_list"}


def test_every_as_dataset_argument_is_documented_in_the_docstring_and_the_guide():
    names = [p.name for p in _parameters(ClassificationDataset.as_dataset)]
    # cleandoc: Python 3.13 strips the docstrings' indentation when it compiles them, 3.12 keeps it
    documented = set()
    for doc in (Dataset.as_dataset.__doc__, ClassificationDataset.as_dataset.__doc__):
        documented |= set(re.findall(r"^ {2}(\w+):", inspect.cleandoc(doc), re.M))
    assert set(names) <= documented, set(names) - documented
    guide = (ROOT / "docs" / "guides" / "as-dataset.md").read_text(encoding="utf-8")
    in_tables = re.findall(r"^\| `(\w+)` \|", guide, re.M)
    assert sorted(in_tables) == sorted(names)


OLD_NAMES = {"input_label", "layout", "with_filename"}


@pytest.mark.parametrize(
    "func",
    [
        Dataset,
        Dataset.as_dataset,
        ClassificationDataset,
        ClassificationDataset.as_dataset,
        ImageNet,
        ImageNet.from_sample_list,
        bzna_tf.ops.BznaDataset,
        bzna_tf.ops.read_samples,
    ],
    ids=lambda f: f.__qualname__,
)
def test_public_signatures_use_one_name_per_concept(func):
    names = set(inspect.signature(func).parameters)
    assert not names & OLD_NAMES
    assert not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(func).parameters.values())


# ----------------------------------------------------------------------------- the old names


def _renamed(call, old, new):
    """What ``call`` returns, checking that it warned once, at the caller's line, that ``old`` is ``new``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    deprecations = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    message = str(deprecations[0].message)
    assert f"`{old}` is now called `{new}`" in message and "next release" in message
    assert deprecations[0].filename == __file__  # it points at the user's line, not at bzna_tf
    return out


def test_input_label_still_opens_with_a_future_warning(small_file):
    ds = _renamed(lambda: ClassificationDataset(small_file, input_label="bzna_input"), "input_label", "track")
    assert ds.track == "bzna_input" and ds._track == "input"
    net = _renamed(lambda: ImageNet(small_file, input_label="input"), "input_label", "track")
    assert net.track == "input"
    with pytest.warns(FutureWarning, match="now called `track`"):
        assert ds.input_label == "bzna_input"
    # The new name, positionally as before, and by keyword: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ClassificationDataset(small_file, "bzna_input").track == "bzna_input"
        assert ImageNet(small_file, None, track="bzna_input").track == "bzna_input"


def test_layout_and_the_ops_with_filename_still_work_with_a_future_warning(small_file):
    ds = ClassificationDataset(small_file)
    old = _renamed(lambda: ds.as_dataset(batch_size=N, shape=8, layout="NCHW"), "layout", "data_format")
    new = ds.as_dataset(batch_size=N, shape=8, data_format="channels_first")
    assert old.element_spec == new.element_spec and new.element_spec[0].shape.as_list() == [None, 3, 8, 8]
    np.testing.assert_array_equal(next(iter(old))[0], next(iter(new))[0])
    source = _renamed(
        lambda: bzna_tf.ops.BznaDataset(str(small_file), with_filename=True),
        "with_filename",
        "with_filenames",
    )
    assert next(iter(source))["filename"].numpy() == b"img_0.png"
    batch = _renamed(
        lambda: bzna_tf.ops.read_samples(str(small_file), tf.constant([2], tf.int64), with_filename=True),
        "with_filename",
        "with_filenames",
    )
    assert batch["filename"].numpy().tolist() == [b"img_2.png"]


def test_data_format_takes_keras_and_the_ops_spellings(small_file):
    ds = Dataset(small_file)
    for keras_name, op_name, shape in [
        ("channels_last", "NHWC", [N, 8, 8, 3]),
        ("channels_first", "NCHW", [N, 3, 8, 8]),
    ]:
        a = next(iter(ds.as_dataset(batch_size=N, shape=8, data_format=keras_name)))
        b = next(iter(ds.as_dataset(batch_size=N, shape=8, data_format=op_name)))
        assert a.shape.as_list() == shape
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"Expected `data_format` in \('channels_last', 'channels_first'\)"):
        ds.as_dataset(batch_size=N, shape=8, data_format="nchw")
    # device="model": the model's DecodeWarp lays the images out; the default layout, however spelled, is no
    # request (layout="NHWC" was accepted there), channels first is refused, naming the layer's argument.
    for spelling in ("channels_last", "NHWC"):
        payloads = ds.as_dataset(batch_size=N, shape=8, device="model", data_format=spelling).element_spec
        assert set(payloads) == {"data", "matrices", "picture_sizes"}
    with pytest.raises(
        ValueError, match=r"DecodeWarp: give it the layout \(its data_format='channels_first'\)"
    ):
        ds.as_dataset(batch_size=N, shape=8, device="model", data_format="NCHW")


def test_old_and_new_name_together_is_a_type_error(small_file):
    ds = ClassificationDataset(small_file)
    with pytest.raises(TypeError, match=r"got both `layout` and `data_format`: `layout` is the old name"):
        ds.as_dataset(batch_size=N, shape=8, layout="NCHW", data_format="channels_first")
    with pytest.raises(TypeError, match=r"ClassificationDataset\(\) got both `input_label` and `track`"):
        ClassificationDataset(small_file, input_label="bzna_input", track="bzna_thumb")
    with pytest.raises(TypeError, match="got both `with_filename` and `with_filenames`"):
        bzna_tf.ops.BznaDataset(str(small_file), with_filename=True, with_filenames=True)


# ----------------------------------------------------------------------------- unknown keywords


@pytest.mark.parametrize(
    ("keyword", "advice"),
    [
        ("image_size", "did you mean `shape`?"),
        ("batch", "did you mean `batch_size`?"),
        ("drop_last", "did you mean `drop_remainder`?"),
        ("shuffle_files", "did you mean `shuffle`?"),
        ("drop_reminder", "did you mean `drop_remainder`?"),  # a typo
        ("normalise", "did you mean `normalize`?"),
        ("with_filename", "did you mean `with_filenames`?"),  # the ops' old name: never as_dataset's
        ("split", "the samples are chosen when the dataset is opened: bzna_tf.Dataset(path, split="),
        ("as_supervised", "yields (images, labels) already"),
        ("label_mode", "tf.one_hot(y, num_classes)"),
        ("labels", "stored in the file at conversion"),
        ("color_mode", "tf.image.rgb_to_grayscale"),
    ],
)
def test_keywords_of_keras_and_tfds_get_the_name_to_use(small_file, keyword, advice):
    for ds, title in [
        (Dataset(small_file), "Dataset"),
        (ClassificationDataset(small_file), "ClassificationDataset"),
    ]:
        with pytest.raises(TypeError) as e:
            ds.as_dataset(batch_size=N, shape=8, **{keyword: 1})
        # Python's own words, then the advice.
        message = str(e.value)
        assert message.startswith(f"{title}.as_dataset() got an unexpected keyword argument '{keyword}': ")
        assert advice in message


def test_other_unknown_keywords_get_pythons_own_error(small_file):
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'colour_jitter'$"):
        Dataset(small_file).as_dataset(batch_size=N, shape=8, colour_jitter=0.4)
    # Dataset never had input_label (ClassificationDataset's old name for its track); a typo of split.
    unexpected = r"\(\) got an unexpected keyword argument"
    with pytest.raises(TypeError, match=rf"^Dataset{unexpected} 'input_label': did you mean `track`\?$"):
        Dataset(small_file, input_label="bzna_thumb")
    with pytest.raises(TypeError, match=rf"^ImageNet{unexpected} 'splits': did you mean `split`\?$"):
        ImageNet(small_file, splits="train")
