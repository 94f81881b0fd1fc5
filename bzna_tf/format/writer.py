"""Writing a .bzna file (the layout is drawn in :mod:`bzna_tf.format.reader`).

The writer streams each per-image mp4 into ``mdat`` as it is appended, keeps
only the small per-sample tables in memory (a few bytes per sample), and at
the end writes the targets block, the names block and the ``moov``. It writes
under a temporary name in the destination folder and renames on success, so
an exception, an interrupt or a crash never leaves a file at the final name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import struct
import weakref
from array import array

import numpy as np

from bzna_tf.format.atomic import file_error, make_parent
from bzna_tf.format.boxes import box
from bzna_tf.format.checksums import ALGORITHM, VERSION, build_checksum_box, crc32c, picture_checksums
from bzna_tf.format.metadata import build_metadata_box
from bzna_tf.format.sample import (
    FNAME,
    INPUT,
    TARGET,
    THUMB,
    Picture,
    build_image_mp4,
    frame_key,
    mett_entry,
    mvhd,
    outer_thumb_entry,
    parse_image_mp4,
)
from bzna_tf.format.tracks import TrakSpec, build_trak

try:
    import fcntl
except ImportError:  # not POSIX: no lock, deterministic partial names are then only reused
    fcntl = None

__all__ = ["BznaWriter", "build_moov", "FTYP", "MDAT_HEADER_SIZE"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A partial name is never followed out (a link's target is not ours to truncate), and a FIFO put there
# does not block the open (no reader: ENXIO).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

FTYP = box(b"ftyp", b"isom", struct.pack(">I", 0), b"bzna", b"isom")
MDAT_HEADER_SIZE = 16


class BznaWriter:
    """Writes a .bzna file; use it as a context manager.

    Args:
      path: the final file name. Nothing appears there until the writer
        closes without error.
      force_co64: write 64-bit chunk offsets (``co64``) even when every offset
        fits in 32 bits. Offsets past 4 GiB always get ``co64``.
      metadata: a JSON-serialisable dict stored after ``moov`` in a ``uuid``
        box the original tools ignore (:mod:`bzna_tf.format.metadata`); the
        ``metadata`` attribute may be changed until :meth:`close`. None or {}
        (with ``checksums=False``): no box, the original tools' layout byte
        for byte.
      partial: the temporary file to write (default: a new randomly named
        ``.NAME.XXXXXXXX.partial`` beside ``path``). A given name is taken
        over (truncated) unless another live process holds it, which is an
        error: resumable conversions use deterministic names. Either way the
        file is created with mode 0666 minus the umask, like any other file.
      checksums: store a CRC-32C of each picture (both tracks) and of the
        outer index in a last ``uuid`` box the original tools ignore
        (:mod:`bzna_tf.format.checksums`); readers verify them. False: no box.
      replace: True (default): :meth:`close` puts the file at ``path``
        whatever is there. False: ``close`` never replaces a file that
        appeared at ``path`` while this one was written (another process
        wrote it): it raises :class:`FileExistsError` naming ``path``, and
        the finished partial file is removed.

    Examples:
      >>> with BznaWriter("small.bzna") as w:                     # doctest: +SKIP
      ...     w.append(picture, target=3, filename="cat.jpg")
      ...     w.append(big_picture, thumb=thumbnail, target=5, filename="dog.jpg")
      ...     w.append(other, filename="unlabelled.jpg")           # no target: last

    Raises:
      ValueError: on close with no sample; on a labelled sample after an
        unlabelled one (the format stores targets for a prefix of the samples).
      FileExistsError: on close with ``replace=False``, when a file exists at
        ``path``.
      OSError: the partial file cannot be created or written (a full disk, a
        read-only file system, no permission): the error names it and says
        which (``cannot write it: the disk is full (No space left on device,
        errno 28)``); the writer then removes it and is closed.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        force_co64: bool = False,
        metadata: dict | None = None,
        partial: str | os.PathLike | None = None,
        checksums: bool = True,
        replace: bool = True,
    ):
        self.path = os.fspath(path)
        self.replace = bool(replace)
        self.force_co64 = force_co64
        self.checksums = bool(checksums)
        self.metadata = dict(metadata) if metadata else {}
        make_parent(self.path)
        folder = os.path.dirname(os.path.abspath(self.path))
        if partial is None:
            fd, self._tmp = _create_partial(folder, os.path.basename(self.path))
        else:
            self._tmp = os.fspath(partial)
            fd = _claim_partial(self._tmp)
        try:
            self._file = os.fdopen(fd, "wb")
            # Removes the partial file if the writer is dropped without closing.
            self._cleanup = weakref.finalize(self, _discard, self._file, self._tmp)
        except BaseException:  # a Ctrl-C before the cleanup holds the file: nothing left behind either
            _discard(fd, self._tmp)
            raise
        try:
            self._file.write(FTYP)
            self._file.write(struct.pack(">I4sQ", 1, b"mdat", 0))  # largesize patched at close
        except OSError as e:
            raise self._failed(e) from e
        self._pos = len(FTYP) + MDAT_HEADER_SIZE
        self._in_off, self._in_size = array("Q"), array("Q")
        self._th_off, self._th_size = array("Q"), array("Q")
        self._targets = array("q")
        self._names: list[bytes] = []
        self._in_crc, self._th_crc = array("I"), array("I")
        # The outer thumbnail track's sample entries: one per coded frame (and, for compact pictures,
        # parameter sets), in order of first use, and each sample's (1-based, as stsc numbers them).
        self._thumb_entries: list[bytes] = []
        self._frame_index: dict[tuple, int] = {}
        self._th_entry = array("I")
        self._closed = False

    @property
    def partial_path(self) -> str:
        """Where the file is being written until :meth:`close` renames it."""
        return self._tmp

    def __len__(self) -> int:
        return len(self._in_off)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def append(
        self, input: Picture, *, thumb: Picture | None = None, target: int | None = None, filename: str
    ) -> int:
        """Append one image.

        Args:
          input: the full-size picture.
          thumb: its thumbnail (at most 512x512), or None when the image itself
            fits 512x512: the thumbnail track then points at the input.
          target: the class index, or None for an unlabelled image. Labelled
            images must all come before the first unlabelled one.
          filename: the name to store: a base name, or a relative path with '/'
            separators (no empty, '.' or '..' part, no NUL).

        Returns:
          The sample's index.
        """
        name = _check_name(filename)
        target = self._check_target(target)
        built = build_image_mp4(input, thumb, target, name)
        exact = input.layout == "compact"
        return self._add(
            built.data, built.thumb_offset, built.thumb_size, built.thumb_entry, target, name, exact
        )

    def append_mp4(self, data: bytes, *, target: int | None, filename: str) -> int:
        """Append an existing per-image mp4 unchanged (to repack or subset files).

        The mp4 is parsed to find its thumbnail; ``target`` and ``filename`` go
        in the outer target and name tracks (pass those of the source file).
        """
        name = _check_name(filename)
        target = self._check_target(target)
        img = parse_image_mp4(data)
        exact = FNAME not in img.track_order  # the compact layout's: video traks only
        thumb = img.thumb
        return self._add(
            bytes(data), thumb.sample_offset, len(thumb.sample), thumb.sample_entry, target, name, exact
        )

    def _check_target(self, target):
        if target is None:
            return None
        if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
            raise TypeError(f"target must be an int or None. Received: target={target!r}")
        if not -(1 << 63) <= int(target) < 1 << 63:
            raise ValueError(f"target must fit in int64. Received: target={target}")
        if len(self._targets) < len(self):
            raise ValueError(
                "labelled samples must all come before the first unlabelled one (the format "
                f"stores targets for a prefix of the samples). Received: target={target} for "
                f"sample {len(self)} after unlabelled sample {len(self._targets)}"
            )
        return int(target)

    def _add(self, data, thumb_off, thumb_size, thumb_entry, target, name, exact=False) -> int:
        if self._closed:
            raise ValueError(f"the writer for {self.path} is closed")
        entry = self._thumb_entry_index(thumb_entry, exact)
        if self.checksums:
            in_crc, th_crc = picture_checksums(data, thumb_off)
            self._in_crc.append(in_crc)
            self._th_crc.append(th_crc)
        try:
            self._file.write(data)
        except OSError as e:
            raise self._failed(e) from e
        self._in_off.append(self._pos)
        self._in_size.append(len(data))
        self._th_off.append(self._pos + thumb_off)
        self._th_size.append(thumb_size)
        self._th_entry.append(entry)
        if target is not None:
            self._targets.append(target)
        self._names.append(name.encode() + b"\0")
        self._pos += len(data)
        return len(self) - 1

    def _thumb_entry_index(self, thumb_entry: bytes, exact: bool) -> int:
        """The outer thumbnail entry (1-based) that decodes this thumbnail, added if none does.

        The original tools write one entry, sample 0's: all their thumbnails are
        coded 512 x 512 by one setting. A compact picture's (``exact``) gets the
        entry of its own frame and parameter sets, or a standard reader of the
        track would decode it with another frame's or setting's (see
        :func:`bzna_tf.format.sample.frame_key`).
        """
        key = frame_key(thumb_entry, parameter_sets=exact)
        index = self._frame_index.get(key)
        if index is None:
            self._thumb_entries.append(outer_thumb_entry(thumb_entry))
            index = self._frame_index[key] = len(self._thumb_entries)
        return index

    def close(self) -> None:
        """Write the targets, names and moov, and move the file into place."""
        if self._closed:
            return
        if not len(self):
            self.abort()
            raise ValueError(f"no sample was appended: {self.path} was not written")
        try:
            f = self._file
            tg_off = self._pos
            targets = np.asarray(self._targets, dtype="<i8").tobytes()
            f.write(targets)
            fn_off = tg_off + 8 * len(self._targets)
            names = b"".join(self._names)
            f.write(names)
            name_sizes = np.fromiter(map(len, self._names), dtype=np.int64, count=len(self._names))
            end = fn_off + int(name_sizes.sum())
            moov = build_moov(
                input_offsets=np.asarray(self._in_off, np.int64),
                input_sizes=np.asarray(self._in_size, np.int64),
                num_targets=len(self._targets),
                targets_offset=tg_off,
                name_sizes=name_sizes,
                names_offset=fn_off,
                thumb_offsets=np.asarray(self._th_off, np.int64),
                thumb_sizes=np.asarray(self._th_size, np.int64),
                thumb_entry=self._thumb_entries[0],
                more_thumb_entries=self._thumb_entries[1:],
                thumb_entry_of=np.asarray(self._th_entry, np.int64),
                force_co64=self.force_co64,
            )
            f.write(moov)
            # The metadata (before the checksum box) says the file has one: a reader then knows a
            # table cut off or damaged from a file written without one (bzna-tf verify).
            metadata = {k: v for k, v in self.metadata.items() if k != "checksums"}
            if self.checksums:
                metadata["checksums"] = {"version": VERSION, "algorithm": ALGORITHM.decode()}
            if metadata:
                f.write(build_metadata_box(metadata))
            if self.checksums:
                f.write(
                    build_checksum_box(
                        {INPUT: self._in_crc, THUMB: self._th_crc},
                        moov=crc32c(moov),
                        targets=crc32c(targets),
                        names=crc32c(names),
                    )
                )
            f.seek(len(FTYP) + 8)
            f.write(struct.pack(">Q", end - len(FTYP)))
            f.flush()
            os.fsync(f.fileno())
            # Renamed while still open, so still locked: closed first, the lock would go with it, and
            # another process claiming the partial name (_claim_partial) could truncate the finished
            # file just before this rename put it under the final name.
            if self.replace:
                os.replace(self._tmp, self.path)
            else:
                _rename_no_replace(self._tmp, self.path)
            f.close()
        except FileExistsError as e:
            if self.replace:
                raise self._failed(e) from e
            self.abort()
            raise FileExistsError(
                e.errno,
                f"{self.path} appeared while this file was being written (another process wrote it); "
                "it was not replaced, and the file written here is removed",
            ) from None
        except OSError as e:
            raise self._failed(e) from e
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._cleanup.detach()

    def _failed(self, e: OSError) -> OSError:
        """Aborts after ``e`` (the file cannot be written) and gives the error to raise: names the file."""
        self.abort()
        after = f"; this unfinished file is removed, and {self.path} was not written"
        return file_error(e, self._tmp, "cannot write it", after)

    def abort(self) -> None:
        """Stop and delete the partial file; nothing is left at the final name."""
        self._closed = True
        self._cleanup()


def _rename_no_replace(src, dst):
    """Renames ``src`` to ``dst`` unless something exists at ``dst``: then :class:`FileExistsError`.

    A hard link is created at ``dst`` (which fails atomically on an existing
    name), then ``src`` is unlinked. Where the file system has no hard links,
    an existence check then ``os.replace`` (a window of a few system calls).
    """
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst) from None
        os.replace(src, dst)
        return
    os.unlink(src)


# What os.link raises on a file system without hard links (FAT, some network and FUSE file systems).
_NO_HARD_LINKS = frozenset(
    getattr(errno, name)
    for name in ("EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EMLINK", "EXDEV", "EACCES")
    if hasattr(errno, name)
)


def _create_partial(folder, base):
    """A new ``.BASE.XXXXXXXX.partial`` in ``folder``: (fd, path), mode 0666 minus the umask."""
    for _ in range(100):
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.partial")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as e:
            raise file_error(e, tmp, "cannot create it") from e
    raise FileExistsError(f"{folder}: could not create a temporary file for {base}")


def _claim_partial(tmp):
    """Opens ``tmp`` for writing from scratch, locked: an fd, or an error if a live process writes it.

    The lock (``flock``) dies with its process, however it dies, so the
    partial file of a killed conversion is simply taken over. A symbolic link
    at ``tmp`` is never followed (its target is not ours to truncate): it is
    removed as the stale temporary it is, as are a FIFO, a socket or a device
    node there (:func:`_remove_non_file`); a folder there is an error.
    """
    for _ in range(100):
        _remove_non_file(tmp)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | _CLOEXEC | _NOFOLLOW | _NONBLOCK, 0o666)
        except OSError as e:
            # A link or a FIFO put at the name since the check: removed on the next round.
            if e.errno in (errno.ELOOP, errno.ENXIO) and _remove_non_file(tmp):
                continue
            raise file_error(e, tmp, "cannot create it") from e
        locked = False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a device node put there since the check
                os.close(fd)
                continue
            if fcntl is not None:
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise FileExistsError(
                        f"{tmp} is being written by another live process (a second conversion of the same "
                        "shard?); stop it first"
                    ) from None
                # The lock is on the file opened; the name may have moved on meanwhile (its writer
                # finished and renamed it, or gave up and removed it): then that file is not ours to
                # truncate. Open the name again.
                try:
                    named = os.lstat(tmp)
                except FileNotFoundError:
                    named = None
                mine = os.fstat(fd)
                if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
                    os.close(fd)
                    continue
            if os.fstat(fd).st_nlink > 1:
                # Another name holds the file too: a finished file moved into place by a hard link
                # (replace=False) whose writer died before it removed this name. Never truncated: only
                # this name goes, and the next round creates a new file.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)  # while still locked
                os.close(fd)
                continue
            locked = True
            os.ftruncate(fd, 0)
        except BaseException:
            # Ours once locked (a Ctrl-C just then leaves no partial file); else another process's: kept.
            if locked:
                _discard(fd, tmp)
            else:
                os.close(fd)
            raise
        return fd
    raise FileExistsError(f"{tmp}: other processes keep replacing this partial file; stop them first")


def _remove_non_file(tmp) -> bool:
    """Removes what is at ``tmp`` when it is neither a regular file nor a folder (a symbolic link, a FIFO,
    a socket, a device node: never a partial file, and removing the name leaves what it points at as it
    is); True when something was removed.

    Raises:
      OSError: it cannot be removed (a link another user put in a shared folder with the sticky bit),
        naming it and saying what it is.
    """
    try:
        st = os.lstat(tmp)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise file_error(e, tmp, "cannot create it") from e
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return False
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    except OSError as e:
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
        raise file_error(
            e, tmp, f"is {what}, where this partial file goes (never followed), and cannot be removed"
        ) from e
    return True


def _discard(f, tmp):
    """Removes ``tmp`` and closes ``f`` (a file object or a descriptor), in that order.

    Removed while still open, so still locked: closed first, another process could claim the name's
    file between the close and the removal, and write on into a file without a name.
    """
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    finally:
        try:
            if isinstance(f, int):
                os.close(f)
            else:
                f.close()
        except OSError:  # the buffered bytes cannot be written (a full disk): discarded with the file
            pass


def _check_name(filename) -> str:
    """A name to store: a base name, or a relative path with '/' separators (``"cat/sub/1.jpg"``).

    The original tools store base names (SPEC section 1); bzna_tf's folder
    converter stores paths relative to the source folder so that names are
    unique, which every reader takes (they are bytes up to a NUL).
    """
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str. Received: filename={filename!r}")
    parts = filename.split("/")
    if "\0" in filename or any(p in ("", ".", "..") for p in parts):
        raise ValueError(
            "filename must be a base name or a relative path with '/' separators (no empty, '.' or '..' "
            f"part, no NUL). Received: filename={filename!r}"
        )
    return filename


def build_moov(
    *,
    input_offsets,
    input_sizes,
    num_targets,
    targets_offset,
    name_sizes,
    names_offset,
    thumb_offsets,
    thumb_sizes,
    thumb_entry,
    force_co64=False,
    more_thumb_entries=(),
    thumb_entry_of=None,
) -> bytes:
    """The outer ``moov`` of a .bzna, as the original tools write it.

    Targets and names are laid out back to back from ``targets_offset`` and
    ``names_offset``. ``thumb_entry`` is the outer ``hvc1`` (see
    :func:`bzna_tf.format.sample.outer_thumb_entry`), the only one the original
    tools write; thumbnails coded otherwise have ``more_thumb_entries``, and
    ``thumb_entry_of`` gives each thumbnail's, 1-based (None: all the first).
    """
    n = len(input_offsets)
    tg_off = targets_offset + 8 * np.arange(num_targets, dtype=np.int64)
    fn_off = names_offset + np.cumsum(name_sizes) - name_sizes
    # The thumbnails' largest coded frame, as written in the outer tkhd: the
    # original tools put the integer in both halves of the 16.16 value
    # (512 + 512/65536); readers use the integer part.
    entries = (thumb_entry, *more_thumb_entries)
    cw = max(struct.unpack_from(">H", e, 8 + 24)[0] for e in entries)
    ch = max(struct.unpack_from(">H", e, 8 + 26)[0] for e in entries)

    def spec(track_id, name, handler, entry, sizes, offsets, **kw):
        d = 20 * len(sizes)  # one sample every 20 ticks of a 20 Hz timescale
        return TrakSpec(track_id, name, handler, entry, sizes, offsets, tkhd_duration=d,
                        mdhd_duration=d, force_co64=force_co64, **kw)  # fmt: skip

    specs = [
        spec(1, INPUT, b"meta", mett_entry("video/mp4"), input_sizes, input_offsets),
        spec(
            2,
            TARGET,
            b"meta",
            mett_entry("application/octet-stream"),
            np.full(num_targets, 8, np.int64),
            tg_off,
        ),
        spec(3, FNAME, b"meta", mett_entry("text/plain"), name_sizes, fn_off),
        spec(
            4,
            THUMB,
            b"vide",
            thumb_entry,
            thumb_sizes,
            thumb_offsets,
            more_entries=tuple(more_thumb_entries),
            entry_of=thumb_entry_of if more_thumb_entries else None,
            tkhd_flags=3,
            width_fixed=(cw << 16) | cw,
            height_fixed=(ch << 16) | ch,
        ),
    ]
    return box(b"moov", mvhd(1, 20 * n, 5, volume=0), *(build_trak(s) for s in specs))
