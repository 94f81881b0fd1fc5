"""The plan of a conversion: which input range goes to which output shard, and how a finished shard is known.

A conversion of N images into S shards writes ``NAME-00000-of-000SS.bzna`` ...
(TFDS-style names), shard k holding the inputs ``[k N // S, (k+1) N // S)``
in input order. The plan depends only on N and S, so every process of an
array job, and every rerun, computes the same one.

A finished shard carries, in its metadata box (:mod:`bzna_tf.format.metadata`),
the source fingerprint (the source's files, sizes and mtimes, its keys, and
every encoding option), its index, the shard count and its input range. A rerun
skips a shard whose file opens as a complete .bzna and carries exactly those
facts; anything else under that name is another conversion's file and is
refused unless ``overwrite``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass

from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.reader import BznaFile
from bzna_tf.format.wording import count

__all__ = ["ShardSpec", "fingerprint", "finished", "plan_shards", "shard_paths"]

SUFFIX = ".bzna"


@dataclass(frozen=True)
class ShardSpec:
    """One output file of a plan.

    Attributes:
      index: the shard's number, 0 .. num_shards - 1.
      num_shards: how many shards the plan has.
      start, stop: the input range it holds, ``[start, stop)`` in input order.
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
        folder, base = os.path.split(self.path)
        return os.path.join(folder, f".{base}.partial")


def shard_paths(output, num_shards: int | None) -> list[str]:
    """The files of a plan: ``[output]`` unsharded, else ``STEM-00000-of-0000N.bzna`` ...

    ``STEM`` is ``output`` without its ``.bzna`` suffix.
    """
    output = os.fspath(output)
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
    """The shards of a conversion of ``total`` inputs: contiguous, in input order, sizes within 1.

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


def fingerprint(source, options, **extra) -> str | None:
    """A hash of everything that decides a conversion's output, or None if the source cannot describe itself.

    ``options`` is the :class:`~bzna_tf.convert.converter.EncodeOptions`
    (every field except ``threads``, which changes speed, not bytes); ``extra``
    holds the other output-deciding arguments (``missing_label``, the plan).
    """
    describe = getattr(source, "describe", None)
    if describe is None:
        return None
    fields = dataclasses.asdict(options)
    fields.pop("threads", None)
    text = json.dumps({"source": describe(), "options": fields, **extra}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def conversion_facts(spec: ShardSpec, fp: str | None) -> dict:
    """What a shard's metadata records of its conversion (compared by :func:`finished`)."""
    return {
        "fingerprint": fp,
        "shard": spec.index,
        "num_shards": spec.num_shards,
        "start": spec.start,
        "stop": spec.stop,
    }


def finished(spec: ShardSpec, fp: str | None) -> tuple[bool, str, dict | None]:
    """Whether ``spec.path`` is this very shard, complete: (yes, why not, its conversion facts).

    A file that is not a readable .bzna, lacks the facts, or has other facts
    is not finished (the reason says which); a missing file gives
    ``(False, "missing", None)``.
    """
    if not os.path.exists(spec.path):
        return False, "missing", None
    try:
        with BznaFile(spec.path) as f:
            facts = f.metadata.get("conversion")
            samples = len(f)
    except (BznaFormatError, OSError) as e:
        return False, f"not a complete .bzna ({e})", None
    if not isinstance(facts, dict):
        return False, "not written by a bzna_tf conversion (no conversion facts in it)", None
    if fp is None:
        return False, "the source cannot be fingerprinted (not a TFRecord, folder or GulpIO source)", facts
    want = conversion_facts(spec, fp)
    for key, value in want.items():
        if facts.get(key) != value:
            what = "sources or options" if key == "fingerprint" else "plan"
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
