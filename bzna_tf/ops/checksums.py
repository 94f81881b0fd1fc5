"""Turning the source ops' checksum verification off and on (for the whole process)."""

from __future__ import annotations

import ctypes

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
    _load.load_library()
    lib = ctypes.CDLL(str(_load._path))
    fn = lib.bzna_tf_verify_checksums
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int]
    return bool(fn(-1 if enabled is None else int(bool(enabled))))


def _verification_offs() -> int:
    """How many times verification was turned off in this process (``verify_checksums(False)``): with
    it on before and after a read and this count unchanged, it was on throughout the read, whatever
    another thread did."""
    _load.load_library()
    fn = ctypes.CDLL(str(_load._path)).bzna_tf_verification_offs
    fn.restype = ctypes.c_int64
    fn.argtypes = []
    return int(fn())
