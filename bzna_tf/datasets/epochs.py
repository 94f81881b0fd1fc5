"""The order step's root: which stream positions each iteration of an ``as_dataset`` pipeline reads.

Position ``p`` of the endless stream of epochs is epoch ``p // per_epoch``,
entry ``p % per_epoch`` of that epoch's order (see
``bzna_tf.ops.source.epoch_schedule``). With an ``initial_epoch`` the root is
a plain range (stateless: it serialises, as tf.data service needs). Without
one, an :class:`EpochState` variable says where each iteration starts.
"""

from __future__ import annotations

import threading
import uuid

from bzna_tf.datasets.arguments import nonnegative_int

__all__ = ["EpochState", "positions"]

# The end of an endless pipeline's stream of positions, and the epochs between
# the starts of two iterations of an endless pipeline.
ENDLESS = 2**62
ENDLESS_STRIDE = 2**20


def positions(options, per_epoch: int, batches):
    """(the root dataset of stream positions, its EpochState or None)."""
    import tensorflow as tf

    # Stream positions are int64s below ENDLESS: a pipeline past it would overflow, or be silently empty.
    last = (options.initial_epoch or 0) + (1 if options.epochs is None else options.epochs)
    if last * per_epoch > ENDLESS:
        raise ValueError(
            f"as_dataset counts the samples it reads in int64: initial_epoch={options.initial_epoch} and "
            f"{'an endless stream' if options.epochs is None else f'repeat={options.epochs}'} of epochs of "
            f"{per_epoch} samples would go past 2**62 of them. Check `initial_epoch` and `repeat`"
        )
    if options.initial_epoch is None:
        state = EpochState(options.epochs, per_epoch, options.batch_size, batches)
        state.reproducible = options.reproducible
        return state.positions(), state
    first = options.initial_epoch * per_epoch
    stop = ENDLESS if options.epochs is None else first + options.epochs * per_epoch
    return tf.data.Dataset.range(first, stop), None


class EpochState:
    """Where the next iteration of an ``as_dataset`` pipeline starts (``ds.bzna_epochs``).

    A pipeline built with ``initial_epoch=None`` yields, on its ``k``-th
    iteration (``iter(ds)``, each Keras epoch), the data epochs ``k *
    epochs .. (k + 1) * epochs - 1`` (``epochs`` per iteration: 1, or
    ``repeat``). The next iteration's ``k`` (and, for an endless pipeline,
    batches to skip at its start) live in a CPU variable: each iteration
    reads it when it starts and advances ``k`` by one. :meth:`set` moves it;
    :class:`bzna_tf.callbacks.SyncEpochs` sets it from Keras' epoch, so a
    restarted ``model.fit`` sees the data an uninterrupted one saw. An
    iterator checkpoint of the pipeline holds the variable's value too, and
    its restore moves the variable there unless it is further already (the
    BznaEpochCounterCheckpointDataset op: ``bzna_tf.datasets.pipeline``).

    The variable lives in the process that built the pipeline: such a
    pipeline cannot run in another one (a tf.data service worker). There it
    fails at its first element with an error naming ``initial_epoch``.

    Attributes:
      epochs: data epochs per iteration (None: endless).
      batches: batches per iteration (None: endless).
      variable: the int64 ``[iteration, skip]`` variable.
      reproducible: False when as_dataset drew the seed and something random
        depends on it (shuffle, a random warp): a rebuilt pipeline differs.
      batches_per_step: batches a training step takes from this pipeline: 1,
        or, built with an ``input_context``, the replicas it feeds
        (``num_replicas_in_sync // num_input_pipelines``: two GPUs of one
        MirroredStrategy worker take two per step).
      input_pipeline: built with an ``input_context``,
        ``(num_input_pipelines, input_pipeline_id)``; else None.
      static_batches: whether every batch has ``batch_size`` samples, a
        static first dimension (``drop_remainder=True`` without
        ``on_error="skip"``): tf.distribute then ends a pass at its shortest
        pipeline's end.
    """

    def __init__(self, epochs, per_epoch: int, batch_size: int, batches):
        import tensorflow as tf
        from tensorflow.python.ops import resource_variable_ops

        self.epochs = epochs
        self.per_epoch = per_epoch
        self.batch_size = batch_size
        self.batches = None if epochs is None else int(batches)
        self.reproducible = True
        # Batches of this pipeline a training step takes (the replicas it feeds under tf.distribute).
        self.batches_per_step = 1
        # Built with an input_context: (num_input_pipelines, input_pipeline_id); else None.
        self.input_pipeline = None
        self.static_batches = False
        # ResourceVariable itself, not tf.Variable: a distribution strategy in
        # scope would make a mirrored variable, which tf.data cannot capture.
        with tf.init_scope(), tf.device("/cpu:0"):
            self.variable = resource_variable_ops.ResourceVariable(
                [0, 0], dtype=tf.int64, trainable=False, name="bzna_epoch_state"
            )
            if tf.compat.v1.executing_eagerly_outside_functions():
                self._home = (_CONTAINER, _process_marker())
            else:
                # TF1 graph mode: a session holds the variables, so the marker is
                # one of the graph's, set by its initializer with the counter's.
                marker = resource_variable_ops.ResourceVariable(
                    1, dtype=tf.int64, trainable=False, name="bzna_epoch_home"
                )
                op = marker.handle.op
                self._home = (op.get_attr("container").decode(), op.get_attr("shared_name").decode())

    def set(self, iteration: int, skip: int = 0):
        """The next iteration is iteration ``iteration``, starting ``skip`` batches in (endless pipelines)."""
        self._eager("set")
        iteration = nonnegative_int(iteration, "iteration")
        skip = nonnegative_int(skip, "skip")
        if skip and self.epochs is not None:
            raise ValueError("`skip` is for endless pipelines (repeat=True)")
        self.variable.assign([iteration, skip])

    def get(self) -> tuple[int, int]:
        """(iteration, skip) of the next iteration."""
        self._eager("get")
        k, skip = self.variable.numpy().tolist()
        return int(k), int(skip)

    def _eager(self, what):
        import tensorflow as tf

        if not tf.compat.v1.executing_eagerly_outside_functions():
            raise RuntimeError(
                f"bzna_epochs.{what}() runs eagerly (TensorFlow 2); in graph mode (tf.compat.v1) read or "
                "assign bzna_epochs.variable, [iteration, skip], in your session"
            )

    def positions(self):
        """The root: each iteration, the stream positions of its epochs (see ``epoch_schedule``).

        The BznaEpochPositions op reads and advances the variable when an
        iterator's first element is asked for; the iteration's range is then
        the iterator's state, so checkpoints (explicit or symbolic) restore it
        without reading the variable again.
        """
        from bzna_tf.ops.source import epoch_positions

        endless = self.epochs is None
        iteration = epoch_positions(
            self.variable.handle,
            per_epoch=self.per_epoch,
            stride=ENDLESS_STRIDE if endless else self.epochs,
            batch_size=self.batch_size,
            endless_stop=ENDLESS if endless else 0,
        )
        return self._home_check().concatenate(iteration)

    def _home_check(self):
        """An empty dataset that fails outside the process that built the pipeline.

        tf.data service copies a pipeline's graph into its workers, the
        variable with it: a copy would read the same epochs on every
        iteration. A name-scoped marker variable exists only here. The
        dataset is an endless split source cut to one element, so that with
        ``processing_mode="distributed_epoch"`` every worker reads (and
        checks) it, not only the one the dispatcher would give a one-element
        range to.
        """
        import tensorflow as tf

        from bzna_tf.ops._load import load_library

        container, name = self._home
        home_check = load_library().bzna_home_check

        def check(x):
            # BznaHomeCheck, not a variable lookup and an Assert: those are stateful ops, and under
            # TensorFlow's op determinism one stateful op in a pipeline's functions makes every parallel
            # map of the pipeline serial and turns its prefetches off.
            with tf.device("/device:CPU:0"):  # the marker's device, wherever the pipeline runs
                return home_check(x, container=container, shared_name=name, message=HOME_MESSAGE)

        one = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).repeat().take(1)
        plain = tf.autograph.experimental.do_not_convert  # graph code as written (AutoGraph costs time)
        return one.map(plain(check)).filter(plain(lambda x: tf.constant(False)))


HOME_MESSAGE = (
    "bzna_tf: this as_dataset pipeline was built with initial_epoch=None: its data epoch counter "
    "(ds.bzna_epochs) lives in the process that built it, and it is running in another one (a tf.data "
    "service worker?), where every iteration would repeat one epoch. Build the pipeline you send to the "
    "service with an explicit initial_epoch (as_dataset(..., initial_epoch=0); for a resumed run, the "
    "epoch to resume at): it is then stateless, and each iteration yields the epochs from that one on. "
    "(In TF1 graph mode, this also says that the session has not run the graph's variable initializers: "
    "tf.compat.v1.global_variables_initializer().)"
)
_CONTAINER = "bzna_tf"
_marker = None
_marker_lock = threading.Lock()


def _process_marker() -> str:
    """The shared name of this process's marker variable, made on first use (one per process)."""
    global _marker
    import tensorflow as tf
    from tensorflow.python.ops import gen_resource_variable_ops as rv

    with _marker_lock:
        if _marker is None:
            name = f"bzna_tf_home_{uuid.uuid4().hex}"
            handle = rv.var_handle_op(dtype=tf.int64, shape=[], shared_name=name, container=_CONTAINER)
            rv.assign_variable_op(handle, tf.constant(0, tf.int64))
            _marker = name
        return _marker
