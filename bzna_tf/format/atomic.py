"""Writing a small file whole or not at all."""

from __future__ import annotations

import os

__all__ = ["write_atomic"]


def write_atomic(path, data: bytes) -> str:
    """Writes ``data`` to a temporary file beside ``path`` and renames it into place.

    Readers never see a half-written file under ``path``; on any error the
    temporary file is removed and ``path`` is left as it was. Returns the path.
    """
    path = os.fspath(path)
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
