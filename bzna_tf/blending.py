"""Blending datasets by weight: whole batches from one source, or mixed within a batch."""

from __future__ import annotations

import math
import weakref

from bzna_tf.datasets.arguments import as_written, check_seed, flag, positive_int, resolve_seed

__all__ = ["blend", "MIXES"]

MIXES = ("batch", "sample")
"""How :func:`blend` mixes: ``"batch"`` (whole batches from one source) or ``"sample"`` (within batches)."""


def _weights(weights, n):
    if weights is None:
        return [1.0 / n] * n
    try:
        w = [float(v) for v in weights]
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"Expected `weights` as {n} non-negative numbers. Received: weights={weights!r}"
        ) from e
    if len(w) != n or any(not math.isfinite(v) or v < 0 for v in w) or sum(w) <= 0:
        raise ValueError(
            f"Expected `weights` as {n} non-negative numbers (one per dataset) with a positive sum. "
            f"Received: weights={weights!r}"
        )
    total = sum(w)
    return [v / total for v in w]


def _class_names(datasets):
    """The class names of ``datasets`` merged by target, with what they come from (None: none is named),
    refusing a target named differently by two of them (:func:`~bzna_tf.format.shards.merge_class_names`).

    A dataset straight from ``as_dataset`` of a labelled dataset (or a blend)
    carries its class names (``bzna_class_names``); one transformed since
    (``.map``, ...) carries none and is not compared.
    """
    from bzna_tf.format.shards import merge_class_names

    named = [getattr(d, "bzna_class_names", (None, None)) for d in datasets]

    def clash(t, j, i, merged, names):
        raise ValueError(
            f"dataset {i} ({named[i][1]}) names class {t} {names[t]!r}, and dataset {j} ({named[j][1]}) "
            f"names it {merged[t]!r}: blend keeps each dataset's labels as they are, so label {t} would "
            "mean one class in one dataset and another in the other. Convert them with the same classes "
            "(--classes train.bzna, or one --class-names list), or, if their labels are meant to differ, "
            "map one dataset's labels to yours first (ds.map(...)), which blend then takes as they are"
        )

    out = merge_class_names([names for names, _ in named], clash)
    whats = sorted({named[k][1] for k in (out[1] if out else ()) if k >= 0})
    return (out[0], "the blend of " + ", ".join(whats)) if whats else None


def _batch_size(spec):
    import tensorflow as tf

    sizes = {s.shape[0] for s in tf.nest.flatten(spec) if s.shape.rank}
    return sizes.pop() if len(sizes) == 1 else None


def _built_unsharded(ds) -> bool:
    """Whether ``ds`` is, or is made by tf.data calls from, a pipeline ``as_dataset`` built unsharded
    (``bzna_sharded`` False) with no ``shard`` call in between: the attribute does not survive a call made
    on the pipeline (``.map``, ``.prefetch``), so the inputs are followed back to it."""
    seen, todo = set(), [ds]
    while todo:
        d = todo.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        mark = getattr(d, "bzna_sharded", None)
        if mark is not None:
            if not mark:
                return True
            continue  # sharded per worker by as_dataset: its own inputs are its business
        if type(d).__name__ == "_ShardDataset":  # sharded by hand: whatever it reads is split
            continue
        try:
            todo.extend(d._inputs())
        except Exception:  # noqa: BLE001 (a dataset class without the private API: taken as it is)
            continue
    return False


def _refuse_what_workers_would_split_wrong(datasets, seed) -> None:
    """In a multi-worker job (tf.distribute's DATA auto-sharding splits a pipeline among N workers), refuses:

    - sources sharded per worker (auto-shard policy OFF) blended with a source that ``as_dataset`` built
      unsharded: tf.distribute takes the blend's policy as OFF when any source's is, so the unsharded source
      would not be split at all, and every worker would read all of it (each of its samples N times an
      epoch). Such a source is found through the calls made on it since (``map``, ``prefetch``,
      ``with_options``, ...); one sharded by hand since (``ds.shard``), or of another kind, is taken as it is;
    - ``seed=None`` for a blend of sources none of which is sharded per worker: each worker keeps every N-th
      batch of its own blend order, so a source's batch could be kept by two workers or by none. A seed
      drawn from one global seed differs too (TensorFlow's op seed counter).
    """
    import tensorflow as tf

    from bzna_tf.datasets.arguments import _auto_sharded_workers

    workers = _auto_sharded_workers()
    if workers <= 1:
        return
    off = tf.data.experimental.AutoShardPolicy.OFF
    sharded = [d.options().experimental_distribute.auto_shard_policy == off for d in datasets]
    unsharded = [_built_unsharded(d) for d in datasets]
    if any(sharded) and any(unsharded):
        i, j = sharded.index(True), unsharded.index(True)
        if i == j:  # one source made of both (sample_from_datasets, zip): another sharded one, if any
            i = next((k for k, (a, b) in enumerate(zip(sharded, unsharded, strict=True)) if a and not b), i)
        which = f"dataset {i}, which holds both" if i == j else f"dataset {i}"
        raise ValueError(
            f"blend of datasets sharded per worker ({which}) and unsharded ones (dataset {j}) in a job "
            f"of {workers} workers: tf.distribute does not split a blend with a source sharded per worker, "
            f"so every worker would read all of dataset {j} (each of its samples {workers} times an epoch). "
            "Shard every source per worker (as_dataset(..., input_context=ctx)), or none"
        )
    if seed is None and not any(sharded):  # sharded per worker (as_dataset sets OFF): nothing splits it
        raise ValueError(
            f"blend(seed=None) of unsharded datasets in a job of {workers} workers: each worker would draw "
            "its own blend order (one global seed too: the seed drawn from it depends on the random ops each "
            "process made before), and tf.distribute's auto-sharding (every N-th batch of each worker's "
            "blend) would keep some batches on two workers and others on none. Give every worker the same "
            "`seed`, or better, shard the sources per worker (as_dataset(..., input_context=ctx)) and blend "
            "those, each worker with its own seed"
        )


@as_written
def blend(
    datasets, weights=None, seed=None, *, mix: str = "batch", batch_size=None, stop_on_empty: bool = True
):
    """A weighted random blend of batched ``tf.data`` datasets.

    Each step draws a source with probability ``weights[i]``:

    - ``mix="batch"`` (default; Megatron-Energon's ``BlendDataset``): the
      step yields that source's next whole batch. Batches stay pure, and
      across many steps (or many workers, each blending with its own seed)
      the share of each source follows the weights.
    - ``mix="sample"`` (Energon's ``MixBatchDataset``): the blend is drawn per
      sample: the sources are unbatched, blended, and batched again with
      ``batch_size`` (default: the sources' static batch size), so batches
      mix the sources in proportion on average (each sample is drawn on its
      own: a batch's counts vary at random around the weights).

    The draws come from ``seed``: reproducible, and new on each iteration of
    the returned dataset. Without one, the seed is drawn as ``as_dataset``
    draws its own: from TensorFlow's global seed when one is set
    (``keras.utils.set_random_seed``), else at random. Give each worker of a multi-worker job its own seed
    (``seed + input_context.input_pipeline_id``) so that ``mix="batch"`` steps
    differ across workers and one global batch holds the sources in
    proportion, when the sources are sharded per worker. A blend of unsharded
    sources in a multi-worker job, which tf.distribute auto-shards by batch,
    needs one ``seed`` on every worker: ``seed=None`` is refused there; so is a
    blend there of sources sharded per worker with one that ``as_dataset``
    built unsharded (which every worker would then read whole; a source
    sharded by hand with ``ds.shard`` is taken as it is). For training, make the sources endless
    (``as_dataset(repeat=True)``) and pass ``steps_per_epoch`` to
    ``model.fit``: the blend is then endless too. A finite blend ends an
    iteration in the middle of its sources' epochs, and a source not drawn
    in an iteration keeps its epoch for the next.

    ``bzna_tf.callbacks.SyncEpochs`` cannot resume a blend: each source's
    position depends on the random draws, not on the Keras epoch alone. It
    refuses the blend and, while the blend exists, its sources; checkpoint the blend's iterator
    (``tf.train.Checkpoint(iterator=...)``) to resume one exactly.

    Args:
      datasets: the batched datasets (for example from ``as_dataset``), all
        with the same element structure and dtypes. Labels are blended as
        they are: datasets straight from ``as_dataset`` whose class names
        give one target two names are refused (a dataset mapped since is
        not compared).
      weights: one non-negative weight per dataset (normalised); default equal.
      seed: an integer, or None (drawn: see above).
      mix: ``"batch"`` or ``"sample"``.
      batch_size: ``mix="sample"``: the output batch size.
      stop_on_empty: end the blend when any source ends (default), so that
        the proportions hold to the last batch; False carries on with the
        remaining sources (their share grows).

    Returns:
      A ``tf.data.Dataset`` with the sources' element structure.

    Raises:
      ValueError: bad weights, mix or batch_size, sources whose elements differ, sources that
        name one class target differently, ``seed=None`` for a blend of unsharded sources in a
        multi-worker job (auto-sharding would split N different blend orders), or, there, sources
        sharded per worker with one that ``as_dataset`` built unsharded (every worker would read it
        whole).
    """
    import tensorflow as tf

    if isinstance(datasets, (tf.data.Dataset, str, bytes, dict)) or not hasattr(datasets, "__iter__"):
        # list() would read a dataset's elements (an endless one for ever)
        raise ValueError(
            "Expected a list of tf.data.Datasets, as in blend([a, b], weights=[0.7, 0.3]). "
            f"Received: {datasets!r}"
        )
    check_seed(seed)
    stop_on_empty = flag(stop_on_empty, "stop_on_empty")
    datasets = sources = list(datasets)
    if not datasets or not all(isinstance(d, tf.data.Dataset) for d in datasets):
        raise ValueError(f"Expected a list of tf.data.Datasets. Received: {datasets!r}")
    if mix not in MIXES:
        raise ValueError(f"Expected `mix` in {MIXES}. Received: mix={mix!r}")
    w = _weights(weights, len(datasets))
    first = datasets[0].element_spec
    for i, d in enumerate(datasets[1:], start=1):
        spec = d.element_spec
        try:
            tf.nest.assert_same_structure(first, spec)
        except (TypeError, ValueError):
            raise ValueError(
                f"dataset {i}'s elements {spec} differ in structure from dataset 0's {first}"
            ) from None
        for a, b in zip(tf.nest.flatten(first), tf.nest.flatten(spec), strict=True):
            if a.dtype != b.dtype or not a.shape[1:].is_compatible_with(b.shape[1:]):
                raise ValueError(f"dataset {i}'s elements {spec} differ from dataset 0's {first}")
    names = _class_names(sources)
    _refuse_what_workers_would_split_wrong(datasets, seed)
    if seed is None:
        seed = resolve_seed(None)[0]
    if mix == "sample":
        if batch_size is None:
            batch_size = _batch_size(first)
            if batch_size is None:
                raise ValueError(
                    "mix='sample' needs `batch_size`: the sources' batch size is not static "
                    "(pass batch_size=..., or build them with drop_remainder=True)"
                )
        batch_size = positive_int(batch_size, "batch_size")
        datasets = [d.unbatch() for d in datasets]
    elif batch_size is not None:
        raise ValueError("`batch_size` is for mix='sample'; mix='batch' keeps the sources' batches")
    out = tf.data.Dataset.sample_from_datasets(
        datasets, weights=w, seed=seed, stop_on_empty_dataset=stop_on_empty, rerandomize_each_iteration=True
    )
    if mix == "sample":
        endless = all(tf.get_static_value(d.cardinality()) == tf.data.INFINITE_CARDINALITY for d in datasets)
        out = out.batch(batch_size, drop_remainder=bool(endless))
    out = out.prefetch(tf.data.AUTOTUNE)
    out.bzna_blend = True
    if names is not None:
        out.bzna_class_names = names
    for d in sources:
        if hasattr(d, "bzna_epochs"):
            # SyncEpochs refuses it while a blend of it lives: its position depends on the draws.
            if not isinstance(getattr(d, "bzna_blended", None), weakref.WeakSet):
                d.bzna_blended = weakref.WeakSet()
            d.bzna_blended.add(out)
    return out
