"""The ImageNet 2012 split ranges of a Benzina file (SPEC section 3).

The file holds train (1,281,167), then val (50,000), then test (100,000)
entries. The ranges are counted from the end, so a file missing a few training
images still splits correctly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

import numpy as np

from bzna_tf.format.wording import count

__all__ = ["IMAGENET_SPLITS", "imagenet_size_error", "imagenet_split", "imagenet_splits", "select_split"]

# (split, entries counted from the end of the file): val and test have fixed sizes.
_VAL, _TEST = 50_000, 100_000
IMAGENET_SPLITS = ("train", "val", "test")
"""The named splits of ImageNet 2012, in file order (SPEC section 3)."""


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
    reason = imagenet_size_error(num_samples)
    if reason:
        raise ValueError(reason)
    test0 = num_samples - _TEST
    val0 = test0 - _VAL
    return {"train": range(0, val0), "val": range(val0, test0), "test": range(test0, num_samples)}[s]


def imagenet_size_error(num_samples: int) -> str | None:
    """Why a file of ``num_samples`` entries has no ImageNet splits, or None when it has them."""
    if num_samples < _VAL + _TEST:
        return (
            f"an ImageNet file holds at least {_VAL + _TEST} entries (val + test, counted from its end): for "
            "other data, use bzna_tf.ClassificationDataset (its one split, 'all', slices as '[:80%]' and "
            "'[80%:]'); a folder of per-split files (train.bzna, val.bzna) opens with "
            f"bzna_tf.ImageNet(folder, split=...). Received: num_samples={num_samples}"
        )
    return None


def imagenet_splits(num_samples: int) -> dict[str, range]:
    """Every ImageNet split name (``validation`` is ``val``; ``all`` is the whole file) -> its range.

    A file too small to hold val and test has only ``all``.
    """
    if imagenet_size_error(num_samples):
        return {"all": range(num_samples)}
    out = {s: imagenet_split(s, num_samples) for s in IMAGENET_SPLITS}
    out["validation"] = out["val"]
    out["all"] = range(num_samples)
    return out


# One part of a split spec: a name, then an optional [start:stop] slice or
# [index]; bounds are integers or percentages (optionally fractional).
_BOUND = r"\s*(-?\d+(?:\.\d+)?%?)?\s*"
_PART = re.compile(rf"^\s*([A-Za-z_][\w-]*)?\s*(?:\[{_BOUND}(:{_BOUND})?\])?\s*$")


def _bound(text: str | None, n: int, spec: str) -> int | None:
    if text is None:
        return None
    if text.endswith("%"):
        pct = Fraction(text[:-1])  # exact: 10.8% and -89.2% of 125 meet at one boundary
        if not -100 <= pct <= 100:
            raise ValueError(f"a percentage must lie in [-100%, 100%]. Received: split={spec!r}")
        # TFDS' default rounding: the closest integer boundary. A negative percentage counts from the end
        # as the boundary of (100 - p)% from the start, so that [:90%] and [-10%:] always split the samples
        # exactly: rounded alone, -p% * n could round to 0 (the whole split: [-10%:] of 5 samples) or
        # round its half the other way than (100 - p)% does (sample 22 of 25 in neither part).
        if text.startswith("-"):
            return round((100 + pct) * n / 100)
        return round(pct * n / 100)
    if "." in text:
        raise ValueError(f"an absolute bound must be an integer (or use %). Received: split={spec!r}")
    return int(text)


def select_split(
    spec: str,
    splits: Mapping[str, range],
    *,
    default: str | None = None,
    unavailable: Mapping[str, str] | None = None,
) -> np.ndarray:
    """The sample indices a TFDS-style split spec selects.

    ``spec`` joins parts with ``+``; each part is a split name with an
    optional slice: ``"train"``, ``"train[:10%]"``, ``"val[1000:2000]"``,
    ``"train[-5%:]"``, ``"train[42]"``, ``"train+val"``. Slices follow Python
    (negative bounds count from the end, out-of-range bounds are clipped);
    a percentage ``p%`` of a split of n samples is the boundary
    ``round(p * n / 100)``, as TFDS rounds by default, and ``-p%`` the
    boundary of ``(100 - p)%``, so that ``[:90%]`` and ``[-10%:]`` always
    split the samples exactly (TFDS rounds ``-p * n / 100`` itself: of 5
    samples, its ``[-10%:]`` is all of them). A part without a name
    (``"[:90%]"``) refers to ``default``.

    Args:
      spec: the split spec.
      splits: the named splits, each a range of sample indices.
      default: the split a nameless part refers to (None: names are required).
      unavailable: names this data lacks -> why (the error for a part that names one).

    Returns:
      The selected indices, int64, in the order the parts give them.

    Raises:
      ValueError: a malformed spec, an unknown name, a selection that is
        empty, or a sum whose parts share samples (unlike TFDS, which
        repeats them).
    """
    if not isinstance(spec, str):
        raise TypeError(f"Expected the split as a string. Received: split={spec!r}")
    parts = []
    for text in spec.split("+"):
        m = _PART.match(text)
        if m is None or not text.strip():
            raise ValueError(
                f"Expected a split such as 'train', 'train[:10%]', 'val[1000:2000]' or 'train+val'. "
                f"Received: split={spec!r}"
            )
        name, start, colon, stop = m.group(1), m.group(2), m.group(3), m.group(4)
        name = name if name is not None else default
        if name is None:
            raise ValueError(
                f"Expected a split name before '[' (one of {list(splits)}). Received: split={spec!r}"
            )
        if unavailable and name in unavailable:
            raise ValueError(unavailable[name])
        if name not in splits:
            raise ValueError(
                f"Unknown split {name!r}: expected one of {list(splits)}. Received: split={spec!r}"
            )
        r = splits[name]
        n = len(r)
        if colon is None and start is not None:
            # One element: train[42].
            i = _bound(start, n, spec)
            if start.endswith("%") or not -n <= i < n:
                raise ValueError(
                    f"Index {start} is not a sample of split {name!r} ({count(n, 'sample')}). "
                    f"Received: split={spec!r}"
                )
            parts.append(np.array([r[i]], dtype=np.int64))
            continue
        s = slice(_bound(start, n, spec), _bound(stop, n, spec))
        sub = r[s]
        parts.append(np.arange(sub.start, sub.stop, sub.step, dtype=np.int64))
    out = np.concatenate(parts)
    if out.size == 0:
        sizes = ", ".join(f"{k} {count(len(r), 'sample')}" for k, r in splits.items())
        raise ValueError(f"The split {spec!r} selects no samples (the splits: {sizes})")
    if len(parts) > 1:
        _refuse_overlap(spec, spec.split("+"), parts)
    return out


def _refuse_overlap(spec: str, texts: list[str], parts: list[np.ndarray]) -> None:
    """Refuses a sum whose parts share samples ("train+all", "train[:60%]+train[50%:]").

    Such a sum reads those samples twice per epoch, and a held-out part
    that overlaps a training part mixes them: almost always a typo in a
    bound, so it is refused; ``Dataset.select`` repeats samples on purpose.
    """
    owner = np.concatenate([np.full(p.size, j) for j, p in enumerate(parts)])
    allv = np.concatenate(parts)
    order = np.argsort(allv, kind="stable")
    sv = allv[order]
    dup = np.flatnonzero(sv[1:] == sv[:-1])
    if dup.size == 0:
        return
    first, second = int(owner[order[dup[0]]]), int(owner[order[dup[0] + 1]])
    shared = np.unique(sv[dup]).size
    raise ValueError(
        f"The split {spec!r} selects {count(shared, 'sample')} twice: its parts {texts[first]!r} and "
        f"{texts[second]!r} overlap (sample {int(sv[dup[0]])} is in both). A sum of splits must not "
        "repeat samples (a held-out part overlapping a training part mixes them); check the bounds, "
        "or repeat samples on purpose with Dataset.select"
    )
