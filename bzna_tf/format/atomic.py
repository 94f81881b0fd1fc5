"""Writing a small file whole or not at all; errors that say which file and what went wrong."""

from __future__ import annotations

import errno
import os

__all__ = ["file_error", "final_path", "make_parent", "partial_path", "write_atomic"]

# What the errors of writing a file mean, in words (the C library's own words follow in brackets):
# "No space left on device" says nothing of which device, and a read-only file system must not read
# as a permission to ask for.
_MEANING = {
    errno.ENOSPC: "the disk is full",
    getattr(errno, "EDQUOT", -1): "the disk quota is used up",
    errno.EFBIG: "the file is larger than the file system or the file size limit (ulimit -f) allows",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted",
    errno.EIO: "an input/output error (a failing disk, or a network file system that went away)",
}


def file_error(e: OSError, path, doing: str = "cannot write it", after: str = "") -> OSError:
    """``e``, met while working on the file ``path``, as an OSError naming ``path`` and saying which error.

    The message (``strerror``, which the command line prints after the name)
    reads ``cannot write it: the disk is full (No space left on device, errno
    28)``, then ``after`` (what was left, say); the errno, and so the class
    (PermissionError for EACCES), stays. An error without an errno (bzna_tf's
    own words) is returned as it is.
    """
    if e.errno is None:
        return e
    words = os.strerror(e.errno)
    meaning = _MEANING.get(e.errno)
    said = f"{meaning} ({words}, errno {e.errno})" if meaning else f"{words} (errno {e.errno})"
    return OSError(e.errno, f"{doing}: {said}{after}", os.fspath(path))


def make_parent(path) -> str:
    """Creates the folder ``path`` goes in (as ``mkdir -p``) and checks that ``path`` can be written there.

    Every writer of bzna_tf calls this before any work, so a missing folder
    is made and an unusable one is reported at once, not after the work.
    Returns ``path`` (``~`` not expanded: callers expand what users type).

    Raises:
      IsADirectoryError: ``path`` is a directory.
      OSError: the folder cannot be made (a file in the way: NotADirectoryError or
        FileExistsError) or written (PermissionError; errno EROFS on a read-only
        file system), naming the folder and saying which.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory, expected a file name", path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        if e.errno not in _MEANING:  # a file in the way: its own name and words say it
            raise
        raise file_error(e, e.filename or folder, "cannot make this folder") from e
    if not os.access(folder, os.W_OK | os.X_OK):
        raise file_error(OSError(_why_not_writable(folder), ""), folder, "cannot write in this folder")
    return path


def _why_not_writable(folder) -> int:
    """The errno of a folder that ``os.access`` says cannot be written: EROFS or EACCES."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except (OSError, AttributeError):  # no statvfs (Windows): the usual reason
        pass
    return errno.EACCES


def partial_path(path) -> str:
    """The deterministic temporary name a conversion writes ``path`` under: ``.NAME.partial`` beside it.

    A conversion renames it ``path`` when the file is complete; a rerun of a
    killed conversion takes it over. Readers name it when ``path`` is missing.
    """
    folder, base = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{base}.partial")


def final_path(partial) -> str | None:
    """The file a conversion's partial file becomes (the inverse of :func:`partial_path`), or None."""
    folder, base = os.path.split(os.fspath(partial))
    path = os.path.join(folder, base[1:].removesuffix(".partial"))
    return path if partial_path(path) == os.fspath(partial) else None


def write_atomic(path, data: bytes) -> str:
    """Writes ``data`` to a temporary file beside ``path`` and renames it into place.

    Readers never see a half-written file under ``path``; on any error the
    temporary file is removed and ``path`` is left as it was. The folder is
    created when missing (:func:`make_parent`). Returns the path.

    Raises:
      OSError: ``path`` cannot be written, naming it and saying which
        (:func:`file_error`: a full disk, a read-only file system, ...).
    """
    path = make_parent(path)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError):
            raise file_error(e, path, "cannot write it") from e
        raise
    return path
