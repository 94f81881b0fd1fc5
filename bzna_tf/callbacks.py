"""Keras callbacks for ``as_dataset`` pipelines.

:class:`SyncEpochs` keeps the data epochs of ``as_dataset`` pipelines in step
with Keras' epoch counter, so that a ``model.fit`` restarted by
``keras.callbacks.BackupAndRestore`` sees, from the resumed epoch on, the same
batches (order, crops, flips) as an uninterrupted run::

    train = ds.as_dataset(batch_size=64, shuffle=True, seed=7, warp=warp)
    model.fit(train, epochs=90, callbacks=[
        keras.callbacks.BackupAndRestore("backup/"),
        bzna_tf.callbacks.SyncEpochs(train),
    ])
"""

from __future__ import annotations

import logging
import warnings

import keras

__all__ = ["SyncEpochs"]

_log = logging.getLogger(__name__)


def _pipelines(datasets):
    """The datasets, with a tf.distribute dataset made by distribute_datasets_from_function replaced by
    the pipelines its function returned (one per input pipeline of this process, or per replica with
    InputReplicationMode.PER_REPLICA), in their order."""
    import tensorflow as tf

    for ds in datasets:
        inner = getattr(ds, "_datasets", None) if isinstance(ds, tf.distribute.DistributedDataset) else None
        if inner and all(hasattr(d, "bzna_epochs") for d in inner):
            yield from inner
        else:
            yield ds


def _leads(states) -> list:
    """Each state's lead: pipeline k of n (built with an input_context) goes by the last pipeline 0 of n
    before it, whose batches Keras counts as the steps of their distributed dataset (its cardinality);
    any other pipeline by itself."""
    leads = []
    for i, state in enumerate(states):
        n, k = getattr(state, "input_pipeline", None) or (1, 0)
        earlier = [s for s in states[:i] if getattr(s, "input_pipeline", None) == (n, 0)]
        leads.append(earlier[-1] if n > 1 and k > 0 and earlier else state)
    return leads


class SyncEpochs(keras.callbacks.Callback):
    """Starts each Keras epoch on the data an uninterrupted ``fit`` gives it.

    An ``as_dataset`` pipeline's data is a function of the seed and the data
    epoch; which data epochs an iteration yields is kept in the pipeline's
    :class:`bzna_tf.EpochState` (``ds.bzna_epochs``). At the start of Keras
    epoch ``e`` this callback sets it from ``e``:

    - one iteration per Keras epoch (no ``steps_per_epoch``, or as many as
      the dataset's batches): the iteration is ``e``, so Keras epoch ``e``
      reads data epochs ``e * repeat ...``;
    - an endless pipeline (``repeat=True``) with ``steps_per_epoch=S``:
      the iterator starts ``e * S`` batches into the stream.

    Other combinations (a finite dataset with a different
    ``steps_per_epoch``, whose iterators Keras restarts at their end
    mid-epoch) are resumed near ``e * S`` batches, at an iteration boundary,
    with a warning: not batch-exact. A finite pipeline that several
    replicas share (``distribute_datasets_from_function`` on a machine of
    several GPUs) is refused with a ``steps_per_epoch`` other than its
    batches: Keras counts a distributed dataset's batches as its steps and
    would train whole epochs on an iterator that has ended.

    It assumes that ``fit`` reads the pipeline as ``as_dataset`` returned it.
    Over ``pipeline.take(k)``, Keras' ``k`` steps are taken for a
    ``steps_per_epoch`` that continues one iterator (each data epoch is read
    by two or more Keras epochs); over ``pipeline.repeat()``, whose
    read-ahead starts the next iteration before Keras' next epoch, that
    iteration is set back and read twice; over ``.cache()``, every epoch is
    the first. Use ``repeat=True`` with ``steps_per_epoch``, and ``select``
    or a split for fewer samples.

    A validation pipeline (``validation_data``) is read once per Keras epoch,
    after training: a finite pipeline that training did not read during
    epoch ``e`` is set to iteration ``e`` when Keras starts validating.

    Keras' ``BackupAndRestore`` with ``save_freq=N`` batches restores the
    weights of the last backup and restarts its epoch at batch 0; this
    callback then replays that whole epoch as the uninterrupted run had it.

    A pipeline built without a ``seed`` (as_dataset then draws one) that
    shuffles or warps at random cannot be resumed exactly: the restarted
    process draws another seed. The callback warns about it.

    Args:
      *datasets: pipelines returned by ``as_dataset`` (with the default
        ``initial_epoch=None``), e.g. the training and validation ones, or
        the dataset ``strategy.distribute_datasets_from_function`` made of
        them (its function returning ``as_dataset``'s pipeline as it is).
        The pipelines of one distributed dataset go by its first one's
        batches (Keras' steps for all); given one by one, pipeline ``k`` of
        ``n`` goes by the last pipeline 0 of ``n`` given before it.
    """

    def __init__(self, *datasets):
        super().__init__()
        if not datasets:
            raise ValueError("Expected at least one dataset returned by as_dataset")
        self._states = []
        for ds in _pipelines(datasets):
            if getattr(ds, "bzna_blend", False) or len(getattr(ds, "bzna_blended", ())):
                raise ValueError(
                    "SyncEpochs cannot resume a bzna_tf.blend (given "
                    f"{'a blend' if getattr(ds, 'bzna_blend', False) else 'a source of one'}): how far each "
                    "source has gone depends on the blend's random draws, not on the Keras epoch alone, so "
                    "a resumed fit would read other data. Checkpoint the blend's iterator instead "
                    "(tf.train.Checkpoint(iterator=...)), or train on the sources without SyncEpochs"
                )
            state = getattr(ds, "bzna_epochs", None)
            if state is None and getattr(ds, "bzna_initial_epoch", None) is not None:
                raise ValueError(
                    f"SyncEpochs: this pipeline was built with initial_epoch={ds.bzna_initial_epoch}, so "
                    "every iteration yields the same data epochs and there is nothing to set: build it with "
                    "initial_epoch=None (the default) to have Keras epoch e read data epoch e"
                )
            if state is None:
                raise ValueError(
                    "SyncEpochs takes the tf.data.Dataset that as_dataset(...) returned, with "
                    "initial_epoch=None (a transformed copy, e.g. ds.map(...), loses its epoch state: "
                    "pass the original; under tf.distribute, keep the pipelines your dataset function "
                    "builds, made.append(ds), and pass SyncEpochs(*made)). "
                    f"Received: {ds!r}"
                )
            if not getattr(state, "reproducible", True):
                warnings.warn(
                    "SyncEpochs: this pipeline was built without a `seed` and shuffles or warps at random: "
                    "as_dataset drew a seed, and a restarted run draws another, so a resumed fit sees other "
                    "orders and crops than the interrupted one. Pass seed=<int> to as_dataset for an exact "
                    "resume.",
                    UserWarning,
                    stacklevel=2,
                )
            self._states.append(state)
        self._leads = _leads(self._states)  # a pass over a state's lead is a pass over it
        self._warned = False
        self._epoch = None  # the Keras epoch under way (None outside model.fit)
        self._set = []  # each state as on_epoch_begin left it
        self._trained = []  # whether training read it this epoch (its counter moved before validation)

    def on_train_begin(self, logs=None):
        steps = (self.params or {}).get("steps")
        for state, lead in zip(self._states, self._leads, strict=True):
            if state.batches is not None and steps is not None and int(steps) == lead.batches < state.batches:
                # A pipeline per replica of shard_by="files": its size follows its files.
                raise ValueError(
                    f"SyncEpochs: Keras counts the first pipeline's {lead.batches} batches as the steps of "
                    "its distributed dataset, and another of its pipelines makes "
                    f"{state.batches}: each Keras epoch would end before that one's last "
                    f"{state.batches - lead.batches} batches, never read (shard_by='files' pipelines per "
                    "replica differ as their files do). Build them with repeat=True and give model.fit "
                    "steps_per_epoch, or shard by samples"
                )
            per_step = getattr(state, "batches_per_step", 1)
            if state.batches is None or per_step == 1 or steps is None or int(steps) == lead.batches:
                continue
            # Keras takes a distributed dataset's cardinality (one pipeline's batches) for its steps, and
            # with steps_per_epoch keeps one iterator until it has taken that many: past the pipeline's end.
            raise ValueError(
                f"SyncEpochs: model.fit(steps_per_epoch={steps}) over a finite as_dataset pipeline whose "
                f"batches {per_step} replicas share (distribute_datasets_from_function): Keras counts its "
                f"{state.batches} batches as {state.batches} steps, {per_step} times the steps there are, so "
                "it would go on with an iterator that has ended and train whole epochs on nothing. Leave "
                "out steps_per_epoch (each Keras epoch is then one pass over the pipeline; Keras warns at "
                "its end that the input ran out of data), or build the pipeline with repeat=True and keep "
                "steps_per_epoch"
            )

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        steps = (self.params or {}).get("steps")
        self._set, self._trained = [], [None] * len(self._states)
        for state, lead in zip(self._states, self._leads, strict=True):
            state.set(*self._position(state, lead, self._epoch, steps))
            self._set.append(state.get())

    def on_test_begin(self, logs=None):
        # Keras validates after the epoch's training. A finite pipeline that training did not read is a
        # validation one: one pass per Keras epoch, so iteration `epoch` (the training steps say nothing
        # about it: set from them, a longer validation pipeline repeated its order for several epochs).
        if self._epoch is None or None not in self._trained:
            return
        for i, state in enumerate(self._states):
            self._trained[i] = state.get() != self._set[i]
            if not self._trained[i] and state.batches is not None:
                state.set(self._epoch, 0)

    def on_epoch_end(self, epoch, logs=None):
        steps = (self.params or {}).get("steps")
        for i, (state, lead) in enumerate(zip(self._states, self._leads, strict=True)):
            trained = self._trained[i] if self._trained[i] is not None else state.get() != self._set[i]
            per_step = getattr(state, "batches_per_step", 1)
            finite_elsewhere = (
                state.batches is not None
                and steps is not None
                and lead.batches not in (int(steps), int(steps) * per_step)
            )
            if trained and finite_elsewhere and not self._warned:
                self._warned = True
                _log.warning(
                    "SyncEpochs: Keras reads %s batches per epoch (steps_per_epoch, or a take() or filter() "
                    "over the pipeline) of a finite pipeline of %s batches: a resumed fit restarts at a data "
                    "iteration boundary near its position, not batch-exact. Use repeat=True (with "
                    "steps_per_epoch), or pass model.fit the pipeline as as_dataset returns it.",
                    steps,
                    state.batches,
                )
        self._epoch = None

    def _position(self, state, lead, epoch: int, steps) -> tuple[int, int]:
        # A step takes one batch of the pipeline per replica it feeds (several under tf.distribute). The
        # pipelines of one distributed dataset go by its lead's batches, Keras' steps: one iteration each
        # per pass, though a shard may have a batch fewer (its replica then gets an empty one).
        per_step = getattr(state, "batches_per_step", 1)
        if state.batches is None:  # endless: one iteration, positioned by batches
            if steps is None:
                raise ValueError("An endless dataset (repeat=True) needs `steps_per_epoch` in model.fit")
            return 0, epoch * int(steps) * per_step
        if steps is None or int(steps) == lead.batches:  # Keras' steps from the pipeline's length
            return epoch, 0
        return epoch * int(steps) * per_step // lead.batches, 0
