"""Reading a .bzna file: the outer index, targets, filenames and samples.

::

    ftyp   'isom', 0, ['bzna', 'isom']                                   24 bytes
    mdat   16-byte header (size32 = 1, then a 64-bit largesize)
           [per-image mp4 0] ... [per-image mp4 N-1]   the samples of bzna_input
           [target 0 .. T-1]                           int64 LE (T <= N: unlabelled last)
           [name 0 .. N-1]                             UTF-8 name + NUL (a basename, or a relative path)
    moov   mvhd + traks found by hdlr name:
           bzna_input (meta), bzna_target (meta), bzna_fname (meta), bzna_thumb (vide:
           its samples point inside the per-image mp4s, at each thumbnail)

Opening reads the top-level box headers, the ``moov`` (about 45 MB for
ImageNet's 1.43 M entries) and the checksum table's fixed fields (the index
checksums of :class:`FileIdentity`) and nothing else: the sample tables stay
as views of those bytes until a whole array is asked for, and a sample is
read with one positioned read of its own bytes.

A ``BznaFile`` keeps its file open until :meth:`BznaFile.close` (or its
``with`` block ends; a finaliser closes one dropped unclosed);
``keep_open=False`` holds it open only during reads, which is how the
datasets open their files.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import struct
import threading
import weakref
from typing import BinaryIO, NamedTuple

import numpy as np

from bzna_tf.format.boxes import Where, parse_boxes, read_header
from bzna_tf.format.checksums import ALGORITHM as CHECKSUMS_ALGORITHM
from bzna_tf.format.checksums import (
    CHECKSUMS_UUID,
    ChecksumTable,
    crc32c,
    mismatch_reason,
    parse_checksum_box,
    thumb_head_end,
)
from bzna_tf.format.checksums import VERSION as CHECKSUMS_VERSION
from bzna_tf.format.errors import BznaFormatError
from bzna_tf.format.hints import missing_file
from bzna_tf.format.labels import UNLABELLED, count_labelled
from bzna_tf.format.metadata import MAX_METADATA_BYTES, METADATA_UUID, parse_metadata
from bzna_tf.format.sample import FNAME, INPUT, TARGET, THUMB, ImageMp4, decode_name, parse_image_mp4
from bzna_tf.format.sniff import SNIFF_BYTES, not_bzna_reason
from bzna_tf.format.tracks import Trak, parse_trak
from bzna_tf.format.wording import count

__all__ = ["BznaFile", "FileIdentity", "Source"]


def is_url(path) -> bool:
    """Whether ``path`` names a file of another filesystem (``gs://...``, ``ram://...``)."""
    return isinstance(path, str) and "://" in path


def local_path(p: str) -> str | None:
    """The local path a ``file://`` URL names, else None: what follows its host (TensorFlow reads
    ``file://HOST/PATH`` as ``/PATH`` whatever the host)."""
    if not p.lower().startswith("file://"):
        return None
    rest = p[len("file://") :]
    slash = rest.find("/")
    return rest[slash:] if slash >= 0 else None


class _Handle:
    """What a :class:`Source` has open: a descriptor, or a file object (its own, or its caller's).

    Kept apart from the Source so that the Source's finaliser can close it
    without holding the Source alive.
    """

    __slots__ = ("obj", "owned")

    def __init__(self):
        self.obj = None
        self.owned = True

    def close(self):
        obj, self.obj = self.obj, None
        if obj is None or not self.owned:
            return
        if isinstance(obj, int):
            os.close(obj)
        else:
            obj.close()


class Source:
    """Positioned, bounds-checked reads from a path or a binary file object.

    Local paths use ``os.pread`` (thread-safe, no shared file position); URLs
    of TensorFlow's filesystems (``gs://...``) are read through
    ``tf.io.gfile``, and file objects under a lock.

    The file is opened here. What the Source opened (a path's descriptor, a
    URL's file object) is closed by :meth:`close`, or by a finaliser when the
    Source is dropped unclosed (also in a reference cycle, and at interpreter
    exit). A file object passed in stays the caller's: it is never closed
    here.

    Args:
      source: a path or URL, or a binary file object open for reading.
      name: how to name the file in errors (default: the path or ``.name``).
      keep_open: False (paths only) closes the file at the end of the first
        read (or :meth:`held` block) and opens it again for each later one,
        which checks that it is still the same file.
    """

    def __init__(self, source, name: str | None = None, *, keep_open: bool = True):
        self._lock = threading.Lock()
        self._handle = _Handle()
        self._held = 0  # reads and held() blocks under way: the file stays open while any is
        self._closed = False
        self._keep_open = keep_open
        self._path = None
        if isinstance(source, (str, os.PathLike)):
            self._path = os.fspath(source)
            self.name = name or self._path
            self._closer = weakref.finalize(self, self._handle.close)
            self.size, self._identity = None, None
            self._handle.obj = self._open_path()
            if not is_url(self._path):
                # Opened again by this path: the file opened now, whatever the working directory is then.
                self._path = os.path.abspath(self._path)
        elif hasattr(source, "read") and hasattr(source, "seek"):
            if not keep_open:
                raise ValueError(
                    f"keep_open=False opens the file again by its path: expected a path. Received: {source!r}"
                )
            self.name = name or getattr(source, "name", None) or repr(source)
            self._handle.obj, self._handle.owned = source, False
            end = source.seek(0, io.SEEK_END)
            # io objects return the new position; some (tf.io.gfile.GFile) return None.
            self.size = end if end is not None else source.tell()
        else:
            raise TypeError(f"expected a path or a binary file object. Received: source={source!r}")
        self.where = Where(str(self.name))

    def _open_path(self):
        """Opens the path: a descriptor, or a URL's file object. The first time it learns the file's size
        and identity; after, it refuses a file that is no longer the one first opened."""
        if is_url(self._path):
            import tensorflow as tf

            local = local_path(self._path)  # a file:// URL: refused as its path is, if not a regular file
            if local is not None:
                _refuse_special_file(local, self.name)
            st = tf.io.gfile.stat(self._path)
            size, identity = st.length, (st.length, st.mtime_nsec)
            opened = tf.io.gfile.GFile(self._path, "rb")
        else:
            try:
                # Looked at first: opening a FIFO for reading would wait for a writer, forever.
                _refuse_special_file(self._path, self.name)
                opened = os.open(self._path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            except FileNotFoundError:
                if self._identity is not None:
                    # One argument, no errno: str() is then the message alone.
                    raise FileNotFoundError(
                        f"{self.name}: no such file any more (it was there when opened: moved or removed "
                        "since?)"
                    ) from None
                being_written = missing_file(self._path)
                if being_written is None:
                    raise
                raise being_written from None
            try:
                st = os.fstat(opened)
                if stat.S_ISDIR(st.st_mode):  # Linux opens a directory; reading it fails with no name
                    raise _is_a_directory(self.name)
                if not stat.S_ISREG(st.st_mode):  # replaced since it was looked at
                    raise _special_file(st.st_mode, self.name)
            except BaseException:
                os.close(opened)
                raise
            size, identity = st.st_size, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if self._identity is None:
            self.size, self._identity = size, identity
        elif identity != self._identity:
            if isinstance(opened, int):
                os.close(opened)
            else:
                opened.close()
            raise BznaFormatError(
                "the file changed since it was opened (rewritten or replaced: its index as read then no "
                "longer describes it): open it again",
                path=self.name,
            )
        return opened

    @property
    def mtime_ns(self) -> int | None:
        """The modification time of the file first opened, in ns (None for a file object): ``os.stat``'s
        for a local path, ``tf.io.gfile.stat``'s for a URL."""
        identity = getattr(self, "_identity", None)
        return None if identity is None else identity[-1]

    @contextlib.contextmanager
    def held(self):
        """A block during which the file stays open; yields the descriptor or file object.

        Only ``keep_open=False`` needs it: a run of reads in one block opens
        the file once. Reads of several threads may share one.

        Raises:
          ValueError: the Source is closed.
        """
        opened = self._hold()
        try:
            yield opened
        finally:
            self._release()

    def _hold(self):
        """The open descriptor or file object, opening it if need be; counted until :meth:`_release`, so
        that neither close() nor the end of another read closes it under a read (nor lets its number
        go to another file)."""
        with self._lock:
            if self._closed:
                raise ValueError(
                    f"{self.name} is closed (it was read after close(), or after its with block): "
                    "open it again"
                )
            if self._handle.obj is None:
                self._handle.obj = self._open_path()
            self._held += 1
            return self._handle.obj

    def _release(self):
        with self._lock:
            self._held -= 1
            if not self._held and (self._closed or not self._keep_open):
                self._handle.close()

    def read(self, offset: int, size: int, *, box: str | None = None, sample: int | None = None) -> bytes:
        """Exactly ``size`` bytes at ``offset``, or a BznaFormatError (a ValueError once closed)."""
        if offset < 0 or size < 0 or offset + size > self.size:
            raise BznaFormatError(
                f"needs bytes [{offset}, {offset + size}) but the file has {self.size} bytes",
                path=self.where.path,
                offset=offset,
                box=box,
                sample=sample,
            )
        opened = self._hold()
        try:
            if isinstance(opened, int):
                parts = []
                got = 0
                while got < size:
                    b = os.pread(opened, size - got, offset + got)
                    if not b:
                        break
                    parts.append(b)
                    got += len(b)
                data = b"".join(parts)
            else:
                with self._lock:
                    opened.seek(offset)
                    data = opened.read(size)
        finally:
            self._release()
        if len(data) != size:
            raise BznaFormatError(
                f"short read: {len(data)} of {size} bytes (file truncated while open?)",
                path=self.where.path,
                offset=offset,
                box=box,
                sample=sample,
            )
        return data

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self):
        """Closes what the Source opened (a file object passed in is left open); again: nothing."""
        with self._lock:
            self._closed = True
            if not self._held:  # else the last read under way closes it
                self._handle.close()


def _refuse_special_file(path: str, name: str) -> None:
    """Refuses a path that leads to a FIFO, a socket or a device (a directory is the caller's to name)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # opening it says why
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise _special_file(mode, name)


def _special_file(mode: int, name: str) -> BznaFormatError:
    return BznaFormatError(
        f"not a regular file but {_file_kind(mode)}: a .bzna file is read at offsets from its index, so it "
        "must be a file on a disk (copy the data to one)",
        path=name,
    )


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "a special file"


def _is_a_directory(path: str) -> IsADirectoryError:
    # One argument, no errno: str() is then the message alone, not "[Errno 21] ...".
    return IsADirectoryError(
        f"{path} is a directory, expected a .bzna file (bzna_tf.open_bzna, the datasets and the bzna-tf "
        "commands take a directory and read the .bzna files in it)"
    )


# A checksum table's fixed fields: version/flags, algorithm, sample count, moov, targets, names.
_CHECKSUM_FIELDS = 24


class FileIdentity(NamedTuple):
    """Which file an index was read from (:attr:`BznaFile.identity`): what the source ops
    (:class:`bzna_tf.ops.BznaDataset`, :func:`bzna_tf.ops.read_samples`, ``identities=``) compare the
    file they open with, refusing another one (converted again or replaced since).

    Attributes:
      size: the file's size in bytes.
      mtime_ns: its modification time in ns (``os.stat``'s for a local path,
        ``tf.io.gfile.stat``'s for a URL).
      moov, targets, names: the checksums of the outer index stored in its
        checksum table (:mod:`bzna_tf.format.checksums`), or -1 each without
        one. With them the ops compare these and the size (two conversions of
        a file differ in them also when their sizes agree and the
        modification times cannot tell: whole seconds on some filesystems);
        without, the size and the modification time.
    """

    size: int
    mtime_ns: int
    moov: int = -1
    targets: int = -1
    names: int = -1


class BznaFile:
    """One .bzna file, read lazily.

    The file stays open while the ``BznaFile`` is used: close it with
    :meth:`close`, or use it in a ``with`` block. One that is dropped
    unclosed is closed when it is collected (also in a reference cycle, and
    at interpreter exit), so forgetting to close leaks no descriptor, but
    ``with`` closes it at a known time. Reading after close raises a
    ``ValueError`` naming the file. A file object passed in stays the
    caller's: closing the ``BznaFile`` does not close it.

    Args:
      source: a path (or a URL of TensorFlow's filesystems, ``gs://...``,
        read through ``tf.io.gfile``), or a binary file object open for
        reading (seekable).
      name: how to name the file in errors (default: the path or ``.name``).
      keep_open: False (paths only) holds no descriptor between reads:
        opening reads the index and closes the file, and each later read
        opens it again for its duration (:meth:`held_open` keeps it open for
        a run of reads), refusing a file that changed meanwhile.
        :class:`bzna_tf.BznaShards` and the datasets open their files so, so
        that a dataset of many files holds none of them open.
      read_metadata: read :attr:`metadata` now, in the same opening as the
        index (a malformed metadata box is then refused here), rather than
        on first use.

    Raises:
      BznaFormatError: the file is not a readable .bzna.

    Examples:
      >>> with BznaFile("ilsvrc2012.bzna") as f:          # doctest: +SKIP
      ...     len(f), f.target(0), f.filename(0)
      ...     pic = f.sample(0).thumb.annexb()   # H.265 Annex-B for a decoder
    """

    def __init__(
        self,
        source: str | os.PathLike | BinaryIO,
        *,
        name: str | None = None,
        keep_open: bool = True,
        read_metadata: bool = False,
    ):
        self._targets = None
        self._names_checked = False
        self._metadata = None
        self._checksums = False  # not looked up yet
        self._src = Source(source, name, keep_open=keep_open)
        try:
            with self._src.held():
                self._open()
                if read_metadata:
                    self.metadata  # noqa: B018 (read now, while the file is open)
        except BaseException:
            self._src.close()
            raise

    def _open(self):
        src = self._src
        # The first bytes of each top-level uuid box, read with the headers: which uuid box is which,
        # and the checksum table's fixed fields, without a read of their own (each one a request on gs://).
        self._uuid_heads = {}
        self.top_level = _top_level(src, self._uuid_heads)
        moov = [b for b in self.top_level if b[0] == "moov"]
        if not moov:
            raise src.where.error(f"no 'moov' box among the top-level boxes {[b[0] for b in self.top_level]}")
        _, off, _, size = moov[0]
        data = src.read(off, size, box="moov")
        self.moov = parse_boxes(data, 0, size, base=off, where=src.where)[0]
        self.tracks: dict[str, Trak] = {}
        for b in self.moov.children():
            if b.type == "trak":
                t = parse_trak(b, limit=src.size)
                if t.name in self.tracks:
                    raise b.error(f"a second track named '{t.name}'")
                self.tracks[t.name] = t
        if INPUT not in self.tracks:
            raise self.moov.error(f"no '{INPUT}' track (found {list(self.tracks)})")
        n = len(self.tracks[INPUT])
        for name in (FNAME, THUMB):
            t = self.tracks.get(name)
            if t is not None and len(t) != n:
                raise t.box.error(
                    f"track '{name}' has {count(len(t), 'sample', grouped=False)}, '{INPUT}' has {n}"
                )
        t = self.tracks.get(TARGET)
        if t is not None and len(t) > n:
            raise t.box.error(
                f"track '{TARGET}' has {count(len(t), 'sample', grouped=False)}, more than the {n} inputs"
            )
        self._checksum_head = _checksum_head(src, self.top_level, self._uuid_heads)

    # Basic facts.

    @property
    def name(self) -> str:
        return self._src.name

    @property
    def file_size(self) -> int:
        return self._src.size

    @property
    def path(self) -> str | None:
        """The path the file is read from: absolute for a local file (a later ``os.chdir`` does not lead
        it to another file), the URL for a remote one; None for a file object."""
        return self._src._path

    def __len__(self) -> int:
        return len(self.tracks[INPUT])

    @property
    def num_targets(self) -> int:
        """How many samples have a stored target (they come first; the rest read as -1)."""
        t = self.tracks.get(TARGET)
        return 0 if t is None else len(t)

    @property
    def num_labelled(self) -> int:
        """How many samples are labelled: their target is a class, 0 or more (:mod:`bzna_tf.format.labels`).

        A stored negative target (``--missing-label -1``) counts as unlabelled.
        """
        return count_labelled(self.targets) if self.num_targets else 0

    def __repr__(self):
        return f"BznaFile({self.name!r}, samples={len(self)}, targets={self.num_targets})"

    @property
    def metadata(self) -> dict:
        """bzna_tf's facts stored in the file (:mod:`bzna_tf.format.metadata`); {} when it has none.

        Files of the original tools have none. Read on first use.
        """
        if self._metadata is None:
            found = {}
            with self._src.held():  # one open for the run of reads, when not kept open
                for off, header, size in _uuid_boxes(
                    self._src, self.top_level, METADATA_UUID, self._uuid_heads
                ):
                    length = size - header - 16
                    if length > MAX_METADATA_BYTES:
                        raise self._src.where.error(
                            f"bzna_tf metadata of {length} bytes (at most {MAX_METADATA_BYTES} expected)",
                            offset=off,
                            box="uuid",
                        )
                    payload = self._src.read(off + header + 16, length, box="uuid")
                    found = parse_metadata(payload, self._src.where, off)
                    break
            self._metadata = found
        return self._metadata

    @property
    def class_names(self) -> list[str | None] | None:
        """The class names stored by the converter, indexed by target (None where unknown), or None."""
        names = self.metadata.get("class_names")
        if names is None:
            return None
        # The types of the names at C speed: a dataset's files are checked when it is opened.
        if not isinstance(names, list) or not set(map(type, names)) <= {str, type(None)}:
            raise self._src.where.error("bzna_tf metadata: class_names is not a list of strings", box="uuid")
        return list(names)

    @property
    def checksums(self) -> ChecksumTable | None:
        """The per-picture checksum table (:mod:`bzna_tf.format.checksums`), or None without one.

        Read on first use. A table in a version or algorithm this reader does
        not know has ``supported`` False and no columns.

        Raises:
          BznaFormatError: a malformed table.
        """
        if self._checksums is False:
            found = None
            with self._src.held():
                for off, header, size in _uuid_boxes(
                    self._src, self.top_level, CHECKSUMS_UUID, self._uuid_heads
                ):
                    found = parse_checksum_box(
                        self._src.read,
                        off,
                        header,
                        size,
                        num_samples=len(self),
                        has_thumb=THUMB in self.tracks,
                        where=self._src.where,
                    )
                    break
            self._checksums = found
        return self._checksums

    @property
    def identity(self) -> FileIdentity | None:
        """Which file the index was read from, as the source ops check it (:class:`FileIdentity`).

        None for a file object (the ops open paths). Known from opening: the
        stored index checksums are read in the same opening as the index.
        """
        mtime_ns = self._src.mtime_ns
        if mtime_ns is None:
            return None
        sums = _index_checksums(self._checksum_head) or (-1, -1, -1)
        return FileIdentity(self.file_size, mtime_ns, *sums)

    def check_sample(self, i: int, data: bytes | None = None, *, tracks=None) -> tuple[str, ...]:
        """Checks sample i's pictures against the file's checksums, as the source op does.

        Args:
          i: the sample index.
          data: its per-image mp4 (:meth:`sample_bytes`), if already read.
          tracks: the tracks to check (hdlr names); default all that have checksums.

        Returns:
          The tracks checked (``()`` when the file has no usable checksums).

        Raises:
          BznaFormatError: a checksum mismatch (naming the file, the sample and
            the track, stored and computed values), or a thumbnail the
            checksum cannot be defined for.
        """
        sums = self.sample_checksums(i, data, tracks=tracks)
        for name, (stored, computed, covered) in sums.items():
            if stored != computed:
                raise self._where(self._index(i)).error(
                    mismatch_reason(name, stored, computed, covered, self.sample_location(i)[0])
                )
        return tuple(sums)

    def sample_checksums(self, i: int, data: bytes | None = None, *, tracks=None) -> dict:
        """``{track: (stored, computed, bytes covered)}`` for sample i's pictures that have checksums.

        Args: as :meth:`check_sample`, which raises on the first mismatch.

        Raises:
          BznaFormatError: a thumbnail the checksum cannot be defined for.
        """
        i = self._index(i)
        table = self.checksums
        columns = {} if table is None else table.tracks
        if tracks is not None:
            columns = {k: v for k, v in columns.items() if k in tracks}
        if not columns:
            return {}
        if data is None:
            data = self.sample_bytes(i)
        mv = memoryview(data)
        whole = None
        out = {}
        for name, column in columns.items():
            head = t = 0
            if name == THUMB:  # the per-image mp4 without [head, t): see bzna_tf.format.checksums
                t = self.thumb_location(i)[0] - self.sample_location(i)[0]
                head = thumb_head_end(mv, t, self._where(i))
            if head != t:
                covered, computed = head + len(data) - t, crc32c(mv[t:], crc32c(mv[:head]))
            else:
                whole = crc32c(mv) if whole is None else whole
                covered, computed = len(data), whole
            out[name] = (int(column[i]), computed, covered)
        return out

    def check_index(self) -> list[str]:
        """What differs from the checksums of the outer index (moov, targets, names): [] when all match.

        Nothing is checked without a usable checksum table. The source op does
        not check these (``bzna-tf verify`` does).
        """
        table = self.checksums
        if table is None or not table.supported:
            return []
        problems = []
        moov = next(b for b in self.top_level if b[0] == "moov")
        parts = [
            ("moov", table.moov, lambda: self._src.read(moov[1], moov[3], box="moov")),
            (
                "targets",
                table.targets,
                lambda: self._gather(self.tracks[TARGET]) if TARGET in self.tracks else b"",
            ),
            ("names", table.names, lambda: self._gather(self.tracks[FNAME]) if FNAME in self.tracks else b""),
        ]
        with self._src.held():
            for what, stored, read in parts:
                computed = crc32c(read())
                if computed != stored:
                    problems.append(
                        f"{self.name}: checksum mismatch of the {what} (stored 0x{stored:08x}, computed "
                        f"0x{computed:08x}): the outer index changed since the file was written"
                    )
        return problems

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes the file (not a file object the caller passed in). Closing again does nothing."""
        self._src.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (a ``keep_open=False`` file is not closed between reads)."""
        return self._src.closed

    def held_open(self):
        """A ``with`` block during which the file stays open (for a run of reads of a ``keep_open=False``
        file, which otherwise opens it for each read; a no-op for the others).

        Raises:
          ValueError: the file is closed.
        """
        return self._src.held()

    def _index(self, i: int) -> int:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample index {i} out of range: {self.name} holds {count(n, 'sample')}")
        return i + n if i < 0 else i

    # Targets and names.

    def target(self, i: int) -> int:
        """The target of sample i, or -1 when it has none (in a file with checksums, from :attr:`targets`,
        checked: every target is read once)."""
        i = self._index(i)
        if self._targets is not None or _index_checksums(self._checksum_head) is not None:
            return int(self.targets[i])
        if i >= self.num_targets:
            return UNLABELLED
        t = self.tracks[TARGET]
        return int(np.frombuffer(self._read_track(t, i, expect_size=8), "<i8")[0])

    @property
    def targets(self) -> np.ndarray:
        """Every target as int64, -1 for the unlabelled tail (read once, cached).

        In a file with checksums, the targets read are checked against the
        index's checksum of them (a changed byte would otherwise be a wrong
        label, or a made-up class).

        Raises:
          BznaFormatError: a malformed target track, or targets that differ
            from their checksum.
        """
        if self._targets is None:
            out = np.full(len(self), UNLABELLED, dtype=np.int64)
            t = self.tracks.get(TARGET)
            if t is None or not len(t):
                self._check_index_part("targets", 1, b"", TARGET)
            else:
                bad = np.flatnonzero(t.sizes != 8)
                if bad.size:
                    i = int(bad[0])
                    raise BznaFormatError(
                        f"target sample is {int(t.sizes[i])} bytes, expected 8",
                        path=self.name,
                        offset=int(t.offsets[i]),
                        box=f"trak[{TARGET}]",
                        sample=i,
                    )
                data = self._gather(t)
                self._check_index_part("targets", 1, data, TARGET)
                out[: len(t)] = np.frombuffer(data, "<i8")
            self._targets = out
            self._targets.flags.writeable = False
        return self._targets

    def filename(self, i: int) -> str | None:
        """The stored filename of sample i (None if the file has no name track), its track checked against
        the index's checksum of the names first in a file with checksums (:meth:`check_names`)."""
        i = self._index(i)
        self.check_names()
        t = self.tracks.get(FNAME)
        if t is None:
            return None
        return decode_name(self._read_track(t, i), self._where(i), t.offset(i))

    def filenames(self) -> list[str] | None:
        """Every filename (None if the file has no name track), checked against the index's checksum of
        them in a file with checksums (as :attr:`targets`)."""
        t = self.tracks.get(FNAME)
        if t is None:
            self.check_names()
            return None
        data = self._gather(t)
        if not self._names_checked:
            self._check_index_part("names", 2, data, FNAME)
            self._names_checked = True
        ends = np.cumsum(t.sizes)
        starts = ends - t.sizes
        offs = t.offsets
        return [
            decode_name(data[s:e], self._where(i), int(offs[i]))
            for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True))
        ]

    def check_names(self) -> None:
        """Checks the names against the index's checksum of them (once; nothing in a file without
        checksums), without decoding them: before a pipeline carries them.

        Raises:
          BznaFormatError: names that differ from their checksum.
        """
        if not self._names_checked:
            t = self.tracks.get(FNAME)
            self._check_index_part("names", 2, self._gather(t) if t is not None else b"", FNAME)
            self._names_checked = True

    def _check_index_part(self, what: str, k: int, data: bytes, track: str) -> None:
        """Refuses ``data`` (a track's samples, gathered) that differ from checksum ``k`` of the outer index
        (1: targets, 2: names) in a file whose checksum table holds them."""
        sums = _index_checksums(self._checksum_head)
        if sums is None:
            return
        computed = crc32c(data)
        if computed != sums[k]:
            raise BznaFormatError(
                f"checksum mismatch of the {what} (stored 0x{sums[k]:08x}, computed 0x{computed:08x}): the "
                f"index changed since the file was written (a damaged copy?), and its {what} cannot be "
                "trusted; `bzna-tf verify` checks the whole file. Restore or convert the file again",
                path=self.name,
                box=f"trak[{track}]",
            )

    def _where(self, i: int) -> Where:
        return Where(self.name, i)

    def _read_track(self, t: Trak, i: int, expect_size: int | None = None) -> bytes:
        size = t.size(i)
        if expect_size is not None and size != expect_size:
            raise BznaFormatError(
                f"'{t.name}' sample is {size} bytes, expected {expect_size}",
                path=self.name,
                offset=t.box.offset,
                box=f"trak[{t.name}]",
                sample=i,
            )
        return self._src.read(t.offset(i), size, box=f"trak[{t.name}]", sample=i)

    def _gather(self, t: Trak) -> bytes:
        """All samples of a small-sample track concatenated, in one read when contiguous."""
        offs, sizes = t.offsets, t.sizes
        if not len(offs):
            return b""
        if (offs[1:] == offs[:-1] + sizes[:-1]).all():
            return self._src.read(int(offs[0]), int(sizes.sum()), box=f"trak[{t.name}]")
        with self._src.held():
            return b"".join(self._read_track(t, i) for i in range(len(offs)))

    # Samples.

    def sample_location(self, i: int) -> tuple[int, int]:
        """(offset, size) of sample i's per-image mp4 in the file."""
        i = self._index(i)
        t = self.tracks[INPUT]
        return t.offset(i), t.size(i)

    def sample_bytes(self, i: int) -> bytes:
        """The whole per-image mp4 of sample i.

        Raises:
          BznaFormatError: the outer index gives it 0 bytes (named so, not as
            a per-image mp4 with no boxes).
        """
        i = self._index(i)
        t = self.tracks[INPUT]
        if not t.size(i):
            raise BznaFormatError(
                "input sample is 0 bytes, expected a per-image mp4",
                path=self.name,
                offset=t.offset(i),
                box=f"trak[{INPUT}]",
                sample=i,
            )
        return self._read_track(t, i)

    def sample(self, i: int, *, verify: bool = True) -> ImageMp4:
        """Sample i's per-image mp4, parsed (sizes, hvcC, clap, H.265 samples).

        Its nested ``target``/``filename`` are None in the compact layout,
        which stores them only in the outer tracks: use :meth:`target` and
        :meth:`filename`, which read those.

        Args:
          i: the sample index.
          verify: check both pictures against the file's checksums, when it has
            them (:meth:`check_sample`), after parsing.
        """
        i = self._index(i)
        off, _ = self.sample_location(i)
        data = self.sample_bytes(i)
        parsed = parse_image_mp4(data, base=off, where=self._where(i))
        if verify:
            self.check_sample(i, data)
        return parsed

    def __getitem__(self, i: int) -> ImageMp4:
        return self.sample(i)

    def thumb_location(self, i: int) -> tuple[int, int]:
        """(offset, size) of sample i's thumbnail H.265 sample, from the outer index."""
        i = self._index(i)
        t = self.tracks.get(THUMB)
        if t is None:
            raise KeyError(f"{self.name} has no '{THUMB}' track")
        return t.offset(i), t.size(i)


def _uuid_boxes(src: Source, top_level, usertype: bytes, heads):
    """(offset, header size, size) of each top-level ``uuid`` box of this usertype, in file order.

    ``heads``: {offset: the box's first bytes} (:func:`_top_level`'s), which spare reading the usertypes.
    """
    for btype, off, header, size in top_level:
        if btype != "uuid" or size < header + 16:
            continue
        head = heads.get(off, b"")
        found = (
            head[header : header + 16] if len(head) >= header + 16 else src.read(off + header, 16, box="uuid")
        )
        if found == usertype:
            yield off, header, size


def _checksum_head(src: Source, top_level, heads) -> bytes | None:
    """The checksum table's fixed fields (version, algorithm, count, and the checksums of the outer
    index), or None without a table that holds them. Read when the file is opened: a malformed table is
    :attr:`BznaFile.checksums`' and the source ops' to refuse."""
    for off, header, size in _uuid_boxes(src, top_level, CHECKSUMS_UUID, heads):
        if size - header - 16 < _CHECKSUM_FIELDS:
            return None
        start = header + 16
        head = heads.get(off, b"")
        if len(head) >= start + _CHECKSUM_FIELDS:
            return head[start : start + _CHECKSUM_FIELDS]
        return src.read(off + start, _CHECKSUM_FIELDS, box="uuid")
    return None


# How much of each top-level box :func:`_top_level` reads: a uuid box's header (8 or 16 bytes), usertype
# (16) and the checksum table's fixed fields (24).
_HEAD_BYTES = 64


def _index_checksums(head: bytes | None) -> tuple[int, int, int] | None:
    """(moov, targets, names) as a checksum table's fixed fields ``head`` store them (what tells one
    conversion of a file from another: :class:`FileIdentity`), or None without a table this reader uses."""
    if head is None or head[0] != CHECKSUMS_VERSION or head[4:8] != CHECKSUMS_ALGORITHM:
        return None
    return struct.unpack_from(">III", head, 12)


def _top_level(src: Source, uuid_heads=None) -> list[tuple[str, int, int, int]]:
    """(type, offset, header_size, size) of each top-level box, from headers alone.

    ``uuid_heads``: a dict that gets {offset: the box's first bytes (at most 64, not past the box)} of
    each uuid box, read with its header.
    """
    first = src.read(0, min(SNIFF_BYTES, src.size), box="file")
    why = not_bzna_reason(first)  # a JPEG or an empty file, say, before its bytes are read as boxes
    if why is not None:
        raise src.where.error(why, offset=0)
    boxes = []
    off = 0
    while off < src.size:
        left = src.size - off
        head = first[:_HEAD_BYTES] if off == 0 else src.read(off, min(_HEAD_BYTES, left), box="file")
        btype, header, size = read_header(head, 0, left, base=off, where=src.where)
        boxes.append((btype, off, header, size))
        if btype == "uuid" and uuid_heads is not None:
            uuid_heads[off] = head[:size]
        off += size
    return boxes
