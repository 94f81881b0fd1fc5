"""``BznaDataset``: the tf.data source of .bzna pictures (the C++ ``BznaDataset`` op)."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops

from bzna_tf.format.keywords import flag, keywords
from bzna_tf.format.reader import is_url
from bzna_tf.ops._load import load_library

__all__ = [
    "BznaDataset",
    "SkippedSamples",
    "epoch_positions",
    "epoch_schedule",
    "num_samples",
    "read_samples",
]

TRACKS = ("thumb", "input")


def _int64_indices(indices) -> tf.Tensor:
    """``indices`` as an int64 tensor, from any integer dtype; a TypeError for another."""
    indices = tf.convert_to_tensor(indices)
    if not indices.dtype.is_integer:
        raise TypeError(f"Expected integer indices. Received: indices of dtype {indices.dtype.name}")
    return tf.cast(indices, tf.int64)


def _filenames(filenames) -> tf.Tensor:
    if isinstance(filenames, (str, bytes)) or hasattr(filenames, "__fspath__"):
        filenames = [filenames]
    if isinstance(filenames, (list, tuple)):
        filenames = [f.__fspath__() if hasattr(f, "__fspath__") else f for f in filenames]
    t = tf.convert_to_tensor(filenames, dtype=tf.string)
    if t.shape.rank == 0:
        t = tf.reshape(t, [1])
    elif t.shape.rank is not None and t.shape.rank != 1:
        raise ValueError(f"Expected one filename or a list of them. Received: filenames with shape {t.shape}")
    return t


def _working_directory(filenames: tf.Tensor) -> str:
    """The ops' ``working_directory``: the current one when a name is a relative local path (or the names
    are not known yet), so that the ops open the files meant now whatever the process's working directory
    is when they read them; else ``""``."""
    names = tf.get_static_value(filenames)
    if names is not None:
        names = [n.decode("utf-8", "surrogateescape") if isinstance(n, bytes) else str(n) for n in names.flat]
        if all(is_url(n) or os.path.isabs(n) for n in names):
            return ""
    try:
        return os.getcwd()
    except OSError:  # removed since: the ops open relative paths as the process would
        return ""


IDENTITY_FIELDS = 5  # size, mtime_ns, moov, targets, names: bzna_tf.format.reader.FileIdentity


def _identities(identities, filenames: tf.Tensor) -> list[int]:
    """The ops' ``identities`` attribute: five ints per file, or [] for None."""
    if identities is None:
        return []
    flat = []
    for k, ident in enumerate(identities):
        values = [int(v) for v in ident] if ident is not None else []
        if len(values) != IDENTITY_FIELDS:
            raise ValueError(
                f"Expected each identity as BznaFile.identity gives it ({IDENTITY_FIELDS} integers). "
                f"Received: identities[{k}]={ident!r}"
            )
        flat += values
    n = filenames.shape[0]
    if n is not None and len(flat) != n * IDENTITY_FIELDS:
        raise ValueError(
            f"Expected one identity per file ({n}). Received: {len(flat) // IDENTITY_FIELDS} identities"
        )
    return flat


def num_samples(filenames) -> tuple[np.ndarray, np.ndarray]:
    """(samples, labelled samples) of each .bzna file, read through TensorFlow's filesystems.

    Args:
      filenames: a path or a list of paths (``gs://...`` and other registered
        filesystems work).

    Returns:
      Two int64 arrays with one count per file.
    """
    n, labelled = load_library().bzna_num_samples(_filenames(filenames))
    return n.numpy(), labelled.numpy()


class BznaDataset(dataset_ops.DatasetSource):
    """The samples of one or more .bzna files as ``tf.data`` elements, in a given order.

    Each element is a dict of scalars:

    - ``"data"``: tf.string, the picture as H.265 Annex-B (parameter sets from
      the sample's own hvcC, then its NAL units): what FFmpeg's or NVDEC's
      HEVC decoder takes.
    - ``"width"``, ``"height"``: tf.int32, the picture's size from its track's
      ``tkhd``. The decoded frame is at least as large (padded right and
      bottom: to multiples of 512 in the benzina layout, of 64 and at least
      144 in the compact one): the image is ``frame[:height, :width]``.
    - ``"index"``: tf.int64, the global sample index.
    - ``"target"``: tf.int64, the class, or -1 for an unlabelled sample.
    - ``"filename"``: tf.string, the stored basename as UTF-8 bytes, only
      with ``with_filenames=True``. A name that is not UTF-8 raises
      ``tf.errors.DataLossError``, as
      :meth:`bzna_tf.format.BznaFile.filenames` raises ``BznaFormatError``.

    Several files are concatenated: the first sample of the second file has
    global index ``len(first file)``. The files are read with TensorFlow's
    filesystem layer (local paths, ``gs://``, ...), two positioned reads per
    sample, and their indices are parsed once per process and shared. The
    dataset has a known cardinality (``len(indices)``), its iterators can be
    checkpointed, and it serialises to a graph (tf.data service ships it).

    Malformed files raise ``tf.errors.DataLossError`` naming the file, the
    sample (index within that file), the box and the byte offset; so does a
    picture whose CRC-32C (stored by bzna_tf's writer since the checksum
    box; files without one are not checked) does not match.

    Args:
      filenames: a path or a list of paths.
      indices: the global sample indices to read, in order (any integer
        vector: a shuffled epoch, a split, a shard). Default: every sample in
        file order.
      track: ``"thumb"`` (default) for the ``bzna_thumb`` picture, at most
        512x512 (the full picture when the image needs no thumbnail), or
        ``"input"`` for the full-size picture.
      with_filenames: add the stored basename as ``"filename"``. Formerly
        ``with_filename``, which still works until the next release, with a
        ``FutureWarning``.
      identities: None, or one :attr:`bzna_tf.format.BznaFile.identity` per
        file: the files ``indices`` were chosen from. A file that is not that
        one any more (converted again or replaced since: another size, other
        index checksums, or, without a checksum table, another modification
        time) is refused with ``tf.errors.FailedPreconditionError``.

    A relative path is opened from the working directory when the dataset
    is made (errors name it as given): a later ``os.chdir`` does not lead
    the dataset to another file.

    Iterators check that the files are still those the dataset opened (size,
    modification time, the same file), and refuse one that changed with
    ``tf.errors.FailedPreconditionError``: make the dataset again. A sample
    that fails to read is checked so too: a file truncated or rewritten in
    place (``cp`` over it) during an iteration raises that error, not a
    ``DataLossError`` about the sample.

    Raises:
      ValueError: bad ``track`` or argument shapes.
      tf.errors.InvalidArgumentError: an index out of range.
      tf.errors.DataLossError: a file that is not a readable .bzna.
      tf.errors.FailedPreconditionError: a file that is not the one its
        identity describes.

    Examples:
      >>> ds = BznaDataset("demo.bzna")                      # doctest: +SKIP
      >>> next(iter(ds))["data"][:4].numpy()                 # doctest: +SKIP
      b'\\x00\\x00\\x00\\x01'
    """

    @keywords(renamed={"with_filename": "with_filenames"})
    def __init__(
        self, filenames, indices=None, *, track: str = "thumb", with_filenames: bool = False, identities=None
    ):
        if track not in TRACKS:
            raise ValueError(f"Expected track to be one of {TRACKS}. Received: track={track!r}")
        lib = load_library()
        self._filenames = _filenames(filenames)
        identities = _identities(identities, self._filenames)
        if indices is None:
            total = tf.reduce_sum(lib.bzna_num_samples(self._filenames)[0])
            indices = tf.range(total, dtype=tf.int64)
        else:
            indices = _int64_indices(indices)
            if indices.shape.rank is not None and indices.shape.rank != 1:
                raise ValueError(
                    f"Expected indices as a vector. Received: indices with shape {indices.shape}"
                )
        self._indices = indices
        self._track = track
        self._with_filenames = flag(with_filenames, "with_filenames")
        spec = {
            "data": tf.TensorSpec([], tf.string),
            "height": tf.TensorSpec([], tf.int32),
            "index": tf.TensorSpec([], tf.int64),
            "target": tf.TensorSpec([], tf.int64),
            "width": tf.TensorSpec([], tf.int32),
        }
        if self._with_filenames:
            spec["filename"] = tf.TensorSpec([], tf.string)
        self._spec = spec
        # The op's attribute keeps its first name: graphs saved with it still load.
        variant = lib.bzna_dataset(
            self._filenames,
            indices,
            track=track,
            with_filename=self._with_filenames,
            identities=identities,
            working_directory=_working_directory(self._filenames),
        )
        super().__init__(variant)

    @property
    def element_spec(self):
        return self._spec


@tf.autograph.experimental.do_not_convert
def epoch_schedule(positions, selection, seed, *, shuffle=False, shard=(1, 0)):
    """(global sample indices, epochs) of positions in an endless stream of epochs (the C++ op).

    Epoch ``e`` of shard ``(count, index)`` is entries ``index, index + count,
    ...`` of that epoch's order of ``selection``; position ``p`` of the stream
    is epoch ``p // per_epoch``, entry ``p % per_epoch``. With ``shuffle``,
    epoch ``e``'s order is a uniform random permutation drawn from ``(seed,
    e)`` only, the same in every process: shards of one epoch are disjoint.

    Args:
      positions: int64 vector of stream positions.
      selection: int64 vector, the global sample indices of one epoch.
      seed: int64 scalar.
      shuffle: permute each epoch.
      shard: ``(count, index)``.
    """
    count, index = shard
    return load_library().bzna_epoch_schedule(
        positions, selection, seed, shuffle=bool(shuffle), shard_count=int(count), shard_index=int(index)
    )


class _EpochPositions(dataset_ops.DatasetSource):
    """The BznaEpochPositions op's dataset (int64 scalars); see :func:`epoch_positions`."""

    @property
    def element_spec(self):
        return tf.TensorSpec([], tf.int64)


def epoch_positions(counter, *, per_epoch: int, stride: int, batch_size: int, endless_stop: int = 0):
    """One iteration's stream positions (a dataset of int64 scalars), from an ``[iteration, skip]`` counter.

    When an iterator's first element is asked for, the op reads the counter
    and sets it to ``[iteration + 1, 0]`` (one step, under the variable's
    lock). The positions are ``first .. stop - 1``: ``first = iteration *
    stride * per_epoch`` (plus ``skip * batch_size`` when endless), ``stop =
    first + stride * per_epoch``, or ``endless_stop`` when that is > 0. The
    iterator's place in that range is its checkpointed state.

    Args:
      counter: the resource handle of the counter variable.
      per_epoch: positions per data epoch.
      stride: data epochs per iteration.
      batch_size: positions per batch (what ``skip`` counts).
      endless_stop: > 0: each iteration is endless, up to this position.
    """
    lib = load_library()
    args = [tf.constant(int(v), tf.int64) for v in (per_epoch, stride, batch_size, endless_stop)]
    return _EpochPositions(lib.bzna_epoch_positions(counter, *args))


ON_ERROR = ("raise", "skip")


def check_on_error(on_error) -> str:
    if on_error not in ON_ERROR:
        raise ValueError(f"Expected `on_error` in {ON_ERROR}. Received: on_error={on_error!r}")
    return on_error


@keywords(renamed={"with_filename": "with_filenames"})
@tf.autograph.experimental.do_not_convert
def read_samples(
    filenames,
    indices,
    *,
    track: str = "thumb",
    with_filenames: bool = False,
    on_error: str = "raise",
    identities=None,
) -> dict:
    """The samples ``indices`` (global, any order) as :class:`BznaDataset` gives them, batched.

    Returns a dict of vectors: ``data``, ``height``, ``width``, ``target``,
    ``errors`` and, with ``with_filenames``, ``filename`` (formerly
    ``with_filename``, which still works until the next release, with a
    ``FutureWarning``). The files' indices are parsed once per process. A
    relative path is opened from the working directory when the op is made
    (for a pipeline, when it is built), as :class:`BznaDataset` does. Each
    call reads the file at its path then: one renamed over it since an
    earlier call (a conversion, ``mv``) is opened again and its index read.

    ``on_error="raise"`` (default): a sample that cannot be read (malformed,
    damaged, a checksum mismatch, a short or failed read) fails the op with an
    error naming the file and the sample's index in it; ``errors`` is all
    empty. ``"skip"``: such a sample gets an empty ``data``, sizes 0 and its
    reason (``"<file>, sample <i>: ..."``) in ``errors``; the others are read.
    A file that cannot be opened or indexed fails the op either way, and so
    does one that is not what its entry of ``identities`` (None, or one
    :attr:`bzna_tf.format.BznaFile.identity` per file, as :class:`BznaDataset`
    takes them) describes, or one that changed since the op opened it
    (truncated, or rewritten in place: looked at when a sample fails to
    read): ``tf.errors.FailedPreconditionError``.
    """
    if track not in TRACKS:
        raise ValueError(f"Expected track to be one of {TRACKS}. Received: track={track!r}")
    files = _filenames(filenames)
    data, names, height, target, width, errors = load_library().bzna_read_samples(
        files,
        _int64_indices(indices),
        track=track,
        with_filename=flag(with_filenames, "with_filenames"),
        on_error=check_on_error(on_error),
        identities=_identities(identities, files),
        working_directory=_working_directory(files),
    )
    out = {"data": data, "height": height, "index": indices, "target": target, "width": width}
    out["errors"] = errors
    if with_filenames:
        out["filename"] = names
    return out


def sample_names(filenames, starts, indices) -> tf.Tensor:
    """``"<file>, sample <i>"`` for global ``indices``: how errors name a sample.

    Args:
      filenames: the files, a string vector.
      starts: int64 vector, each file's first global index, then the total.
      indices: int64 vector of global indices.
    """
    starts = tf.convert_to_tensor(starts, tf.int64)
    f = tf.searchsorted(starts[:-1], indices, side="right") - 1
    local = indices - tf.gather(starts, f)
    files = tf.gather(tf.convert_to_tensor(filenames, tf.string), f)
    return tf.strings.join([files, ", sample ", tf.strings.as_string(local)])


class SkippedSamples:
    """The samples a pipeline made with ``on_error="skip"`` dropped, in this process.

    ``count`` is how many so far and ``recent`` the reasons of the last ones
    (at most 100, each naming the file and the sample). Counting happens where
    the pipeline runs: in a tf.data service worker, not in the trainer.
    """

    def __init__(self, counter: str):
        self.counter = counter

    def _read(self):
        return load_library().bzna_skip_counts(counter=self.counter)

    @property
    def count(self) -> int:
        return int(self._read()[0].numpy())

    @property
    def recent(self) -> list[str]:
        return [r.decode("utf-8", "replace") for r in self._read()[1].numpy()]

    def __repr__(self):
        return f"SkippedSamples(count={self.count})"


@tf.autograph.experimental.do_not_convert
def report_skips(errors, counter: str) -> tf.Tensor:
    """True where ``errors`` is empty; each other sample is counted under ``counter`` and logged."""
    return load_library().bzna_report_skips(errors, counter=counter)
