"""tf.data service processes that know bzna_tf's ops.

A tf.data service dispatcher and its workers deserialise the pipelines that
clients send them, so every process must have bzna_tf's ops registered before
the first pipeline arrives: a worker to run ``BznaDataset`` and the decode
ops, the dispatcher to split ``BznaDataset`` for
``processing_mode="distributed_epoch"``. Started the plain TensorFlow way,
they fail with ``NotFoundError: Op type not registered 'BznaDataset'``.

From the shell (each command runs until it is killed)::

    bzna-tf service dispatcher --port 5050
    bzna-tf service worker --dispatcher host0:5050 --port 5051

From Python, for people who start servers themselves::

    import bzna_tf.service
    dispatcher = bzna_tf.service.dispatcher(port=5050)           # loads the ops, then starts it
    worker = bzna_tf.service.worker("host0:5050", port=5051)
    worker.join()

or call :func:`load_ops` before making TensorFlow's own
``DispatchServer`` / ``WorkerServer``.
"""

from __future__ import annotations

__all__ = ["dispatcher", "load_ops", "worker"]


def load_ops() -> None:
    """Registers bzna_tf's ops (and GPU kernels, where they can run) in this process."""
    from bzna_tf.ops import load_library

    load_library()


def _check_port(port) -> int:
    """``port`` as an int from 0 (a free one) to 65535; ValueError otherwise."""
    try:
        value = int(port)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value <= 65535:
        raise ValueError(f"Expected a port from 0 (a free one) to 65535. Received: port={port!r}")
    return value


def dispatcher(port: int = 0, *, work_dir: str | None = None, fault_tolerant_mode: bool = False):
    """Loads bzna_tf's ops, then starts a tf.data service dispatcher in this process.

    Args:
      port: the port to listen on; 0 picks a free one (see the server's ``target``).
      work_dir: where the dispatcher keeps its journal (needed by ``fault_tolerant_mode``).
      fault_tolerant_mode: journal the state so that a restarted dispatcher resumes its jobs.

    Returns:
      The started ``tf.data.experimental.service.DispatchServer``.

    Raises:
      ValueError: ``fault_tolerant_mode`` without ``work_dir``, or a port outside 0 to 65535.
    """
    import tensorflow as tf

    if fault_tolerant_mode and not work_dir:  # TensorFlow's own error leaves a half-made server behind
        raise ValueError("fault_tolerant_mode needs a work_dir for its journal (--work-dir)")
    port = _check_port(port)
    load_ops()
    config = tf.data.experimental.service.DispatcherConfig(
        port=port, work_dir=work_dir, fault_tolerant_mode=fault_tolerant_mode
    )
    return tf.data.experimental.service.DispatchServer(config)


def worker(dispatcher_address: str, port: int = 0, *, worker_address: str | None = None):
    """Loads bzna_tf's ops, then starts a tf.data service worker in this process.

    Args:
      dispatcher_address: the dispatcher's ``host:port`` (a ``grpc://`` prefix is accepted).
      port: the port to listen on; 0 picks a free one.
      worker_address: how the dispatcher and clients reach this worker (``host:port``, ``%port%``
        standing for the port); default: ``localhost:%port%``. Set it on multi-host jobs.

    Returns:
      The started ``tf.data.experimental.service.WorkerServer``.

    Raises:
      ValueError: a port outside 0 to 65535, or a dispatcher address that is not ``host:port``.
    """
    import tensorflow as tf

    port = _check_port(port)
    address = dispatcher_address.split("://", 1)[-1] if isinstance(dispatcher_address, str) else ""
    host, _, dispatcher_port = address.rpartition(":")
    if not host or not dispatcher_port.isdigit() or not 0 < int(dispatcher_port) <= 65535:
        # TensorFlow would wait for ever, saying nothing, for a dispatcher at an address it cannot use
        raise ValueError(
            "Expected `dispatcher_address` as the dispatcher's host:port (e.g. localhost:5050, or "
            f"grpc://host:5050). Received: dispatcher_address={dispatcher_address!r}"
        )
    load_ops()
    kwargs = {"worker_address": worker_address} if worker_address else {}
    config = tf.data.experimental.service.WorkerConfig(dispatcher_address=address, port=port, **kwargs)
    return tf.data.experimental.service.WorkerServer(config)
