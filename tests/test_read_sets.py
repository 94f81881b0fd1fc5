"""Which files read as one dataset, and which are refused: ImageNet's per-split files named by a pattern
or a list, shard sets of two conversions, files whose class names disagree, a file spelled as a file://
URL, a copy under another name, a shard numbered past its count."""

import numpy as np
import pytest

from bzna_tf import BznaWriter, ClassificationDataset, Dataset, ImageNet


@pytest.fixture(scope="module")
def encoded():
    """Four small encoded pictures (input, thumb), of flat colours."""
    from bzna_tf.convert import encode_image

    return [
        encode_image(np.full((16 + 4 * i, 24, 3), 40 * i + 20, np.uint8), preset="ultrafast")
        for i in range(4)
    ]


def write(path, encoded, n, *, prefix=None, target=lambda k: k % 3, **writer):
    """A .bzna file of n pictures named PREFIX_k.png (PREFIX: the file's stem), targets target(k)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = prefix or path.stem
    with BznaWriter(path, **writer) as w:
        for k in range(n):
            inp, thumb = encoded[k % len(encoded)]
            w.append(inp, thumb=thumb, target=target(k), filename=f"{prefix}_{k}.png")
    return path


def names(ds):
    return [n.split("_")[0] for n in ds.filenames]


# ------------------------------------------------------------------------ class names that disagree


def test_files_whose_class_names_disagree_are_refused_when_opened(tmp_path, encoded):
    d = tmp_path / "imagenet"
    write(d / "train.bzna", encoded, 6, metadata={"class_names": ["cat", "dog", "eel"]})
    # Converted apart from a folder without "dog": its "eel" is target 1, train's "dog".
    write(d / "val.bzna", encoded, 4, target=lambda k: k % 2, metadata={"class_names": ["cat", "eel"]})
    pair = [str(d / "train.bzna"), str(d / "val.bzna")]
    for opening in (
        lambda: ClassificationDataset(pair),
        lambda: ImageNet(d, split="val"),
        lambda: ImageNet(d, split="train"),
    ):
        with pytest.raises(ValueError) as e:
            opening()
        assert str(e.value).startswith(
            f"{d / 'val.bzna'}: class 1 is named 'dog' in an earlier file ({d / 'train.bzna'}) and 'eel' here"
        )
        assert "--class-names" in str(e.value)
    assert len(Dataset(pair)) == 10  # pictures only: no labels to mismatch
    assert len(ImageNet(d / "val.bzna")) == 4  # one file alone


def test_files_whose_class_names_agree_or_are_missing_read_together(tmp_path, encoded):
    a = write(tmp_path / "a.bzna", encoded, 3, metadata={"class_names": ["cat", None, "eel"]})
    b = write(tmp_path / "b.bzna", encoded, 3, metadata={"class_names": [None, "dog"]})
    c = write(tmp_path / "c.bzna", encoded, 3)
    assert ClassificationDataset([a, b, c]).class_names == ["cat", "dog", "eel"]
    assert ClassificationDataset([c]).class_names is None
