"""The plan of a conversion: the order of the inputs, which go to which shard, and when a shard is done.

A conversion of N images first puts them in its order
(:func:`conversion_order`): by default a shuffle drawn from a recorded seed,
as TFDS shuffles when it writes, so that every shard and every slice of the
result is a random sample of the whole (not stratified); or the source's own
order. Then S shards are
written, ``NAME-00000-of-000SS.bzna`` ... (TFDS-style names), shard k holding
the positions ``[k N // S, (k+1) N // S)`` of that order. The order and the
plan depend only on N, the seed (and which images the source knows to be
unlabelled) and S, so every process of an array job, and every rerun,
computes the same ones.

A finished shard carries, in its metadata box (:mod:`bzna_tf.format.metadata`),
the fingerprint (the source's files, sizes and mtimes, its keys, every
encoding option, the order and its seed), its index, the shard count, its
range of positions, the order and the seed. A rerun skips a shard whose file
opens as a complete .bzna and carries exactly those facts; anything else
under that name is another conversion's file and is refused unless
``overwrite``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from bzna_tf.convert.sources.base import without_mtimes
from bzna_tf.format.atomic import partial_path
from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.reader import BznaFile
from bzna_tf.format.wording import count

__all__ = [
    "DEFAULT_SEED",
    "ORDERS",
    "ShardSpec",
    "conversion_order",
    "fingerprint",
    "finished",
    "plan_shards",
    "shard_paths",
]

SUFFIX = ".bzna"
ORDERS = ("shuffle", "source")
"""A conversion's orders: ``"shuffle"``, a permutation drawn from the seed; ``"source"``, the source's own."""
DEFAULT_SEED = 0
"""The seed of a shuffled conversion unless one is given (recorded in every shard's metadata)."""
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class ShardSpec:
    """One output file of a plan.

    Attributes:
      index: the shard's number, 0 .. num_shards - 1.
      num_shards: how many shards the plan has.
      start, stop: the positions it holds, ``[start, stop)`` of the conversion's order.
      path: the file to write.
    """

    index: int
    num_shards: int
    start: int
    stop: int
    path: str

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def partial(self) -> str:
        """The deterministic temporary name beside ``path`` (``.NAME.partial``): a rerun takes it over."""
        return partial_path(self.path)


def shard_paths(output, num_shards: int | None) -> list[str]:
    """The files of a plan: ``[output]`` unsharded, else ``STEM-00000-of-0000N.bzna`` ...

    ``STEM`` is ``output`` without its ``.bzna`` suffix.
    """
    output = os.fspath(output)
    if not output:
        raise ValueError("Expected an output file name (e.g. DIR/train.bzna). Received: an empty name, ''")
    if os.path.isdir(output) or output.endswith(("/", os.sep)):
        raise ValueError(
            "Expected an output file name (e.g. DIR/train.bzna; shards are named "
            "DIR/train-00000-of-00004.bzna). "
            f"Received: a directory, {output!r}"
        )
    if num_shards is None:
        return [output]
    stem = output[: -len(SUFFIX)] if output.endswith(SUFFIX) else output
    width = max(5, len(str(num_shards)))
    return [f"{stem}-{k:0{width}d}-of-{num_shards:0{width}d}{SUFFIX}" for k in range(num_shards)]


def plan_shards(total: int, output, num_shards: int | None = None) -> list[ShardSpec]:
    """The shards of a conversion of ``total`` inputs: contiguous ranges of positions, sizes within 1.

    Args:
      total: the number of input images (``len(source)``).
      output: the output name (see :func:`shard_paths`).
      num_shards: None for one file named ``output``; else the shard count (1 .. total).

    Raises:
      ValueError: a shard count that is not an integer in [1, total].
    """
    if num_shards is not None and (
        isinstance(num_shards, bool)
        or not isinstance(num_shards, int)
        or not 1 <= num_shards <= max(total, 1)
    ):
        raise ValueError(
            f"Expected `num_shards` as an integer in [1, {max(total, 1)}] (the source has {total} images). "
            f"Received: num_shards={num_shards!r}"
        )
    paths = shard_paths(output, num_shards)
    n = len(paths)
    return [ShardSpec(k, n, k * total // n, (k + 1) * total // n, p) for k, p in enumerate(paths)]


def shards_for_size(total: int, bytes_per_image: float, shard_size: float) -> int:
    """How many shards of about ``shard_size`` bytes ``total`` images of ``bytes_per_image`` make (>= 1)."""
    if not shard_size > 0:
        raise ValueError(f"Expected `shard_size` > 0 bytes. Received: shard_size={shard_size!r}")
    return max(1, min(total, math.ceil(total * bytes_per_image / shard_size)))


def check_order(order, seed) -> None:
    """Raises ValueError for an order not in ``ORDERS`` or a seed that is not an integer in [0, 2**64)."""
    if order not in ORDERS:
        raise ValueError(f"Expected `order` in {ORDERS}. Received: order={order!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= _MASK64:
        raise ValueError(f"Expected `seed` as an integer in [0, 2**64). Received: seed={seed!r}")


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (a bijection): the same numbers on every machine and NumPy."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def conversion_order(
    total: int, order: str = "shuffle", seed: int = DEFAULT_SEED, labelled=None
) -> np.ndarray:
    """The source indices in the order a conversion writes them (int64, a permutation of ``range(total)``).

    ``"shuffle"`` sorts the indices by a 64-bit hash of (seed, index): a
    random permutation that depends only on ``total`` and ``seed`` (not on
    NumPy's generators, whose streams may change between versions), so every
    host and every rerun computes the same. With ``labelled`` (a bool per
    index, when the source knows it up front), the labelled images are
    shuffled among themselves first and the unlabelled ones after them: the
    format stores targets for a prefix of each file's samples.
    ``"source"``: ``0 .. total - 1``; with ``labelled``, the labelled indices
    in that order, then the unlabelled ones in that order (the converter
    passes ``labelled`` there only without ``missing_label``, where
    unlabelled images must come last).
    """
    check_order(order, seed)
    if order == "source":
        perm = np.arange(total, dtype=np.int64)
    else:
        key = _mix64(np.array([seed], np.uint64))[0] ^ np.arange(total, dtype=np.uint64)
        perm = np.argsort(_mix64(key), kind="stable").astype(np.int64)
    if labelled is not None:
        labelled = np.asarray(labelled, bool)
        perm = np.concatenate([perm[labelled[perm]], perm[~labelled[perm]]])
    return perm


def fingerprint(source, options, *, mtimes: bool = True, **extra) -> str | None:
    """A hash of everything that decides a conversion's output, or None if the source cannot describe itself.

    ``options`` is the :class:`~bzna_tf.convert.converter.EncodeOptions`
    (its resolved fields; the ``quality`` name only chooses them); ``extra``
    holds the other output-deciding arguments (``missing_label``, the order
    and seed, the plan, the class names). ``mtimes=False`` leaves the source
    files' mtimes out (what array tasks compare: each may read its own copy).
    """
    describe = getattr(source, "describe", None)
    if describe is None:
        return None
    fields = dict(options.settings)
    fields.pop("quality", None)
    # Lenient decoding changes only the images that strict decoding refuses: each shard records it
    # (its conversion facts' "lenient"), and the converter decides whether a finished shard still fits.
    fields.pop("lenient", None)
    # So does the pixel limit (a shard records it, the largest picture it holds and those it left out).
    fields.pop("max_pixels", None)
    # The image size limit decides only which images are refused (a bad record): shards record it when they
    # left images out for it, and a rerun with a larger limit converts those again (see _triage).
    fields.pop("max_image_bytes", None)
    # Options added later enter only when set, so that the conversions made before them still resume.
    for later, default in (("exif_transpose", False), ("alpha_background", None), ("x265_params", "")):
        if fields.get(later, default) == default:
            fields.pop(later, None)
    description = describe() if mtimes else without_mtimes(describe())
    text = json.dumps({"source": description, "options": fields, **extra}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def conversion_facts(spec: ShardSpec, fp: str | None, order: str = "shuffle", seed=DEFAULT_SEED) -> dict:
    """What a shard's metadata records of its conversion (compared by :func:`finished`).

    ``seed`` is recorded as None with ``order="source"``, where it plays no part.
    """
    return {
        "fingerprint": fp,
        "shard": spec.index,
        "num_shards": spec.num_shards,
        "start": spec.start,
        "stop": spec.stop,
        "order": order,
        "seed": int(seed) if order == "shuffle" else None,
    }


def shard_facts(path):
    """(the conversion facts a .bzna file records, or None; its sample count).

    Raises:
      BznaFormatError, OSError: not a readable .bzna file.
    """
    with BznaFile(path) as f:
        return f.metadata.get("conversion"), len(f)


def finished(spec: ShardSpec, fp: str | None, order: str = "shuffle", seed=DEFAULT_SEED):
    """Whether ``spec.path`` is this very shard, complete: (yes, why not, its conversion facts) as a tuple.

    A file that is not a readable .bzna, lacks the facts, or has other facts
    is not finished (the reason says which); a missing file gives
    ``(False, "missing", None)``.
    """
    if not os.path.exists(spec.path):
        return False, "missing", None
    try:
        facts, samples = shard_facts(spec.path)
    except (BznaFormatError, OSError) as e:
        return False, f"not a complete .bzna ({e})", None
    if not isinstance(facts, dict):
        return False, "not written by a bzna_tf conversion (no conversion facts in it)", None
    if fp is None:
        return (
            False,
            "the source cannot be fingerprinted (a plain list or iterable, not a bzna_tf.convert Source)",
            facts,
        )
    want = conversion_facts(spec, fp, order, seed)
    for key in ("order", "seed", *want):  # the order's words first: it is also in the fingerprint
        value = want[key]
        if facts.get(key) != value:
            what = {"fingerprint": "sources or options", "order": "order", "seed": "seed"}
            what = what.get(key, "plan")
            return (
                False,
                f"written by a conversion with other {what} ({key} {facts.get(key)!r}, now {value!r})",
                facts,
            )
    skipped = facts.get("skipped", [])
    if not isinstance(skipped, list) or samples + len(skipped) != len(spec):
        return (
            False,
            f"holds {count(samples, 'sample')} + {len(skipped)} skipped, its range has {len(spec)}",
            facts,
        )
    return True, "", facts
