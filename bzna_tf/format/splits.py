"""The ImageNet 2012 split ranges of a Benzina file (SPEC section 3).

The file holds train (1,281,167), then val (50,000), then test (100,000)
entries. The ranges are counted from the end, so a file missing a few training
images still splits correctly.
"""

from __future__ import annotations

__all__ = ["IMAGENET_SPLITS", "imagenet_split"]

# (split, entries counted from the end of the file): val and test have fixed sizes.
_VAL, _TEST = 50_000, 100_000
IMAGENET_SPLITS = ("train", "val", "test")


def imagenet_split(split: str, num_samples: int) -> range:
    """The sample indices of an ImageNet 2012 split.

    Args:
      split: 'train', 'val' (alias 'validation') or 'test'.
      num_samples: entries in the file (1,431,167 for the full dataset).

    Returns:
      A ``range`` of sample indices.

    Raises:
      ValueError: an unknown split, or a file too small to hold val and test.
    """
    s = {"validation": "val"}.get(split, split)
    if s not in IMAGENET_SPLITS:
        raise ValueError(
            f"split must be one of {IMAGENET_SPLITS + ('validation',)}. Received: split={split!r}"
        )
    if num_samples < _VAL + _TEST:
        raise ValueError(
            f"an ImageNet file holds at least {_VAL + _TEST} entries (val + test). "
            f"Received: num_samples={num_samples}"
        )
    test0 = num_samples - _TEST
    val0 = test0 - _VAL
    return {"train": range(0, val0), "val": range(val0, test0), "test": range(test0, num_samples)}[s]
