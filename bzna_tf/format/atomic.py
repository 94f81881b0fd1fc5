"""Writing a small file whole or not at all."""

from __future__ import annotations

import os

__all__ = ["final_path", "make_parent", "partial_path", "write_atomic"]


def make_parent(path) -> str:
    """Creates the folder ``path`` goes in (as ``mkdir -p``) and checks that ``path`` can be written there.

    Every writer of bzna_tf calls this before any work, so a missing folder
    is made and an unusable one is reported at once, not after the work.
    Returns ``path`` (``~`` not expanded: callers expand what users type).

    Raises:
      IsADirectoryError: ``path`` is a directory.
      OSError: the folder cannot be made (a file in the way: NotADirectoryError or
        FileExistsError) or written (PermissionError), naming the folder.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "is a directory, expected a file name", path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(13, "Permission denied: cannot write in this folder", folder)
    return path


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
    """
    path = make_parent(path)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
