"""CRC-32C (Castagnoli) in NumPy, and TFRecord's masked form of it.

The checksums box (:mod:`bzna_tf.format.checksums`) stores CRC-32C of
pictures; TFRecord files carry masked CRC-32C in their record headers (read by
``bzna_tf.convert.tfrecord`` and recognised by :mod:`bzna_tf.format.sniff`).
The C++ readers compute the same with SSE4.2 (``custom_ops/lib/crc32c.cc``).
This module needs NumPy only, and nothing else of the package.
"""

from __future__ import annotations

import numpy as np

__all__ = ["crc32c", "masked_crc32c"]

_POLY = 0x82F63B78  # Castagnoli, bit-reflected
_LANE = 64  # bytes per independent lane (measured fastest from 4 to 256)


def _byte_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


_T8 = _byte_table()


def _advance(state: np.ndarray, nbytes: int) -> np.ndarray:
    """The CRC register after ``nbytes`` zero bytes, from each ``state`` (table-driven)."""
    for _ in range(nbytes):
        state = _T8[state & 0xFF] ^ (state >> 8)
    return state


# One 4-byte step: s ^= word; s = _W0[s & 0xffff] ^ _W1[s >> 16] (the register is linear over GF(2)).
_W0 = _advance(np.arange(1 << 16, dtype=np.uint32), 4)
_W1 = _advance(np.arange(1 << 16, dtype=np.uint32) << np.uint32(16), 4)


def _mulmod(a: int, b: int) -> int:
    """a * b modulo the polynomial, both bit-reflected (x^0 is bit 31)."""
    p = 0
    m = 1 << 31
    while a:
        if a & m:
            p ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return p


_X2N = [1 << 30]  # x^(2^k) mod P, reflected
for _ in range(63):
    _X2N.append(_mulmod(_X2N[-1], _X2N[-1]))


def _zeros_operator(n: int) -> int:
    """x^(8n) mod P: feeding n zero bytes multiplies the register by it."""
    p, k = 1 << 31, 3
    while n:
        if n & 1:
            p = _mulmod(_X2N[k], p)
        n >>= 1
        k += 1
    return p


_shift_tables: dict[int, tuple[np.ndarray, ...]] = {}


def _shift(states: np.ndarray, n: int) -> np.ndarray:
    """Each register after n zero bytes, through four byte-indexed tables cached per n."""
    tabs = _shift_tables.get(n)
    if tabs is None:
        c = _zeros_operator(n)
        basis = np.array([_mulmod(c, 1 << i) for i in range(32)], dtype=np.uint32)
        bits = np.arange(256)
        tabs = []
        for j in range(4):
            t = np.zeros(256, np.uint32)
            for i in range(8):
                t ^= np.where((bits >> i) & 1, basis[8 * j + i], np.uint32(0)).astype(np.uint32)
            tabs.append(t)
        tabs = _shift_tables[n] = tuple(tabs)
    t0, t1, t2, t3 = tabs
    return t0[states & 0xFF] ^ t1[(states >> 8) & 0xFF] ^ t2[(states >> 16) & 0xFF] ^ t3[states >> 24]


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc`` (the CRC of what came before).

    ``crc32c(b + c) == crc32c(c, crc32c(b))``; ``crc32c(b"123456789") == 0xE3069283``.

    The message is cut into 64-byte lanes (zero-padded at the front, which
    leaves a CRC register that starts at 0 unchanged), all lanes advance
    together 4 bytes per NumPy step, and the lane registers are then merged
    pairwise, each left one shifted over its right neighbour's length.

    Args:
      data: bytes, a bytearray, a memoryview or a uint8 array.
      crc: the CRC-32C of the preceding bytes (0 to start).
    """
    buf = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    n = buf.size
    lanes = -(-n // _LANE)
    pad = lanes * _LANE - n
    if pad:
        buf = np.concatenate([np.zeros(pad, np.uint8), buf])
    words = buf.view("<u4").reshape(lanes, _LANE // 4).T.copy()
    s = np.zeros(lanes, np.uint32)
    for w in words:
        s ^= w
        s = _W0[s & 0xFFFF] ^ _W1[s >> 16]
    width = _LANE
    while s.size > 1:
        if s.size & 1:  # a zero lane in front keeps the pairs aligned on the message's end
            s = np.concatenate([np.zeros(1, np.uint32), s])
        s = _shift(s[0::2], width) ^ s[1::2]
        width *= 2
    raw = int(s[0]) if s.size else 0
    return _mulmod(_zeros_operator(n), (crc ^ 0xFFFFFFFF) & 0xFFFFFFFF) ^ raw ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (its record headers and payloads carry one)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
