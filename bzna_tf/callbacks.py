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
import weakref

import keras

from bzna_tf._legacy_keras import legacy_keras_message

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
      the iterator starts ``e * S`` batches into the stream (with
      ``steps_per_execution=k``, Keras runs whole executions: ``S`` rounded
      up to a multiple of ``k`` batches per epoch, which the callback counts).

    Other combinations (a finite dataset with a different
    ``steps_per_epoch``, whose iterators Keras restarts at their end
    mid-epoch) are resumed near ``e * S`` batches, at an iteration boundary,
    with a warning: not batch-exact. A finite pipeline that several
    replicas share (``distribute_datasets_from_function`` on a machine of
    several GPUs) is refused with a ``steps_per_epoch`` other than its
    batches: Keras counts a distributed dataset's batches as its steps and
    would train whole epochs on an iterator that has ended. So are the
    pipelines per replica of a distributed dataset whose lengths differ
    (``shard_by="files"``) where Keras (a longer one than the first) or
    tf.distribute (a shorter one, of static batches) would end each pass
    before some of their batches. These refusals concern the pipelines
    training reads, found between the first epoch's first two training
    steps (in an epoch of one step, at its validation or end: under a
    strategy, those ``fit`` read a batch of before the epoch began).

    It assumes that ``fit`` reads the pipeline as ``as_dataset`` returned it.
    Over ``pipeline.take(k)``, Keras' ``k`` steps are taken for a
    ``steps_per_epoch`` that continues one iterator (each data epoch is read
    by two or more Keras epochs); over ``pipeline.repeat()``, whose
    read-ahead starts the next iteration before Keras' next epoch, that
    iteration is set back and read twice; over ``.cache()``, every epoch is
    the first. Use ``repeat=True`` with ``steps_per_epoch``, and ``select``
    or a split for fewer samples.

    A validation pipeline (``validation_data``) is read once per Keras epoch,
    after training: a pipeline that training did not read during epoch ``e``
    (finite, or endless with ``validation_steps``) is set to iteration ``e``
    when Keras starts validating.

    Keras epoch ``e`` reads data epoch ``e`` in every ``fit``: a second
    ``fit`` of the same model in the same process that starts again at epoch
    0 reads the first one's data again (the callback warns); pass
    ``initial_epoch`` to go on.

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
        # Whether training reads each pipeline (None until known): one whose counter moved in the epoch
        # before its second training step. In an epoch of one step, one that moved before validation;
        # under tf.distribute, Keras' evaluate() reads a batch of the validation data before on_test_begin,
        # and fit one of the training data before on_train_begin (its symbolic build): there, one that
        # also moved before the fit began.
        self._snapshot()  # self._before: the counters before the next fit
        self._known = None  # under a strategy, the pipelines that moved before the fit began
        self._trained = []  # this epoch's
        self._ever = []  # whether training read each pipeline in an epoch of this fit
        self._refused = False  # whether the training pipelines were checked this fit
        self._validated = False  # whether the epoch's validation has begun
        self._fit_starts = False  # the next on_epoch_begin is a fit's first

    def set_model(self, model):
        # Keras 3's fit sets it first: a tf_keras fit (TF_USE_LEGACY_KERAS=1) fails later, in its own
        # callback list, on what a Keras 3 callback lacks.
        message = legacy_keras_message("bzna_tf.callbacks.SyncEpochs", model)
        if message:
            raise TypeError(message)
        super().set_model(model)

    def _snapshot(self):
        # Also at each epoch's end: a fit retried after an exception (on_train_end never ran) compares
        # with the counters of its last whole epoch, which validation had already moved.
        self._before = [state.get() for state in self._states]

    def on_train_begin(self, logs=None):
        self._fit_starts, self._refused, self._known = True, False, None
        self._ever = [False] * len(self._states)
        if getattr(self.model, "_distribute_strategy", None) is not None:
            self._known = [state.get() != b for state, b in zip(self._states, self._before, strict=True)]

    def on_train_end(self, logs=None):
        self._snapshot()

    def _refuse(self, trained):
        # What makes Keras leave out a training pipeline's data without an error. Validation pipelines
        # are read as Keras counts their own batches (validation_steps), whatever the training steps.
        self._refused = True
        steps = (self.params or {}).get("steps")
        for state, lead, read in zip(self._states, self._leads, trained, strict=True):
            if read and state.batches is None and steps is None:  # Keras would train epoch 0 forever
                raise ValueError("An endless dataset (repeat=True) needs `steps_per_epoch` in model.fit")
            if not read or state.batches is None:
                continue
            if steps is not None and int(steps) == lead.batches < state.batches:
                # A pipeline per replica of shard_by="files": its size follows its files.
                raise ValueError(
                    f"SyncEpochs: Keras counts the first pipeline's {lead.batches} batches as the steps of "
                    "its distributed dataset, and another of its pipelines makes "
                    f"{state.batches}: each Keras epoch would end before that one's last "
                    f"{state.batches - lead.batches} batches, never read (shard_by='files' pipelines per "
                    "replica differ as their files do). Build them with repeat=True and give model.fit "
                    "steps_per_epoch, or shard by samples"
                )
            if lead is not state and state.batches < lead.batches and getattr(state, "static_batches", False):
                raise ValueError(
                    f"SyncEpochs: a pipeline of this distributed dataset makes {state.batches} batches, "
                    f"fewer than the first one's {lead.batches}: tf.distribute ends a pass of statically "
                    "shaped batches (drop_remainder=True) at its shortest pipeline's end, so each Keras "
                    f"epoch would leave out the first pipeline's last {lead.batches - state.batches} "
                    "batches, never read (shard_by='files' pipelines per replica differ as their files do). "
                    "Build them with repeat=True and give model.fit steps_per_epoch, or shard by samples"
                )
            per_step = getattr(state, "batches_per_step", 1)
            if per_step == 1 or steps is None or int(steps) == lead.batches:
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

    def _find_trained(self, between_steps: bool = False):
        """This epoch's training pipelines: those whose counter moved since on_epoch_begin (after the
        epoch's only step under a strategy, those that also moved before the fit began)."""
        moved = [state.get() != s for state, s in zip(self._states, self._set, strict=True)]
        if not between_steps and self._known is not None:
            moved = [m and k for m, k in zip(moved, self._known, strict=True)]
        self._trained = moved
        self._ever = [a or b for a, b in zip(self._ever, moved, strict=True)]
        if not self._refused:
            self._refuse(moved)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = int(epoch)
        if self._fit_starts:
            self._fit_starts = False
            self._warn_if_trained_before(self._epoch)
        steps = (self.params or {}).get("steps")
        self._set, self._trained = [], [None] * len(self._states)
        self._validated = False
        if len(self._ever) != len(self._states):  # called without on_train_begin
            self._ever = [False] * len(self._states)
        for state, lead in zip(self._states, self._leads, strict=True):
            position = self._position(state, lead, self._epoch, steps)
            if position is not None:
                state.set(*position)
            self._set.append(state.get())

    def on_train_batch_begin(self, batch, logs=None):
        # Before the epoch's second execution the first one has run: every pipeline training reads has
        # started its iteration (the counter moves at an iteration's first element), and validation has
        # not begun.
        if batch > 0 and None in self._trained and self._epoch is not None:
            self._find_trained(between_steps=True)

    def on_test_begin(self, logs=None):
        # Keras validates after the epoch's training. A pipeline that training did not read is a validation
        # one: one pass (or validation_steps) per Keras epoch, so iteration `epoch` (the training steps say
        # nothing about it: set from them, a longer validation pipeline repeated its order for several
        # epochs, and an endless one read on from the training stream's position).
        if self._epoch is None or self._validated:
            return
        self._validated = True
        if None in self._trained:  # an epoch of one execution
            self._find_trained()
        for state, trained in zip(self._states, self._trained, strict=True):
            if not trained:
                state.set(self._epoch, 0)

    def _warn_if_trained_before(self, epoch: int):
        # Keras epoch e reads data epoch e: a second fit of the same model from epoch 0 reads the first
        # one's data again.
        done = max((getattr(s, "_trained_by", {}).get(self.model, -1) for s in self._states), default=-1)
        if epoch <= done:
            warnings.warn(
                f"SyncEpochs: this fit starts at Keras epoch {epoch}, and an earlier fit of this model in "
                f"this process already trained Keras epochs up to {done} on this pipeline: Keras epoch e "
                f"reads data epoch e, so epochs {epoch}..{done} read the same orders and crops again. To go "
                f"on with new data, pass model.fit(initial_epoch={done + 1}, epochs={done + 1} + more)",
                UserWarning,
                stacklevel=2,
            )

    def on_epoch_end(self, epoch, logs=None):
        steps = (self.params or {}).get("steps")
        if None in self._trained and self._epoch is not None:  # one execution, no validation
            self._find_trained()
        for i, (state, lead) in enumerate(zip(self._states, self._leads, strict=True)):
            if self._ever[i] and self.model is not None:
                if not hasattr(state, "_trained_by"):
                    state._trained_by = weakref.WeakKeyDictionary()
                state._trained_by[self.model] = max(state._trained_by.get(self.model, -1), int(epoch))
            trained = bool(self._trained[i])
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
        self._snapshot()
        self._epoch = None

    def _position(self, state, lead, epoch: int, steps) -> tuple[int, int] | None:
        # A step takes one batch of the pipeline per replica it feeds (several under tf.distribute). The
        # pipelines of one distributed dataset go by its lead's batches, Keras' steps: one iteration each
        # per pass, though a shard may have a batch fewer (its replica then gets an empty one).
        per_step = getattr(state, "batches_per_step", 1)
        if state.batches is None:  # endless: one iteration, positioned by batches
            if steps is None:  # not a training pipeline (Keras needs steps_per_epoch for one): validation
                return None
            return 0, epoch * self._steps_read(steps) * per_step
        if steps is None or int(steps) == lead.batches:  # Keras' steps from the pipeline's length
            return epoch, 0
        return epoch * self._steps_read(steps) * per_step // lead.batches, 0

    def _steps_read(self, steps) -> int:
        # Keras runs whole executions of steps_per_execution steps on an iterator it keeps: with
        # steps_per_epoch=4 and steps_per_execution=3, an epoch takes 6 batches (keras/src/trainers/
        # epoch_iterator.py: range(0, steps_per_epoch, steps_per_execution), each execution k steps).
        k = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
        return -(-int(steps) // k) * k
