"""Turning the source ops' checksum verification off and on (for the whole process)."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

import bzna_tf.ops._load as _load  # the module: _load._path is set when it loads

__all__ = ["verify_checksums"]


def verify_checksums(enabled: bool | None = None) -> bool:
    """Whether ``BznaDataset`` and ``read_samples`` verify pictures against the files' checksums.

    Verification is on by default; ``BZNA_TF_VERIFY_CHECKSUMS=0`` in the
    environment before the first read turns it off. A picture whose bytes do
    not match the checksum stored when the file was written raises
    ``tf.errors.DataLossError`` (``"<file>, sample <i>: checksum mismatch
    ..."``). The setting is process-wide and takes effect for the next picture
    read; files without checksums are never verified. ``bzna-tf verify``
    checks the checksums whatever this says.

    Args:
      enabled: True or False to set it; None only asks.

    Returns:
      The setting before the call.
    """
    if enabled is not None and not isinstance(enabled, (bool, np.bool_)):  # "no" would turn it on
        raise TypeError(f"Expected `enabled` as True, False or None. Received: enabled={enabled!r}")
    fn = _c_function("bzna_tf_verify_checksums", ctypes.c_int, ctypes.c_int)
    return bool(fn(-1 if enabled is None else int(bool(enabled))))


def _verification_offs() -> int:
    """How many times verification was turned off in this process (``verify_checksums(False)``): with
    it on before and after a read and this count unchanged, it was on throughout the read, whatever
    another thread did."""
    return int(_c_function("bzna_tf_verification_offs", ctypes.c_int64)())


@functools.cache
def _c_function(name: str, restype, *argtypes):
    """The ops library's C function ``name`` (loading the library first), looked up once."""
    _load.load_library()
    fn = getattr(ctypes.CDLL(str(_load._path)), name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn
