"""The two array backends of the transform math, and its random numbers.

The affine math and the samplers are written once, against the handful of
operations below, and run on NumPy (float64 arrays; the reference, and handy
outside a graph) or on TensorFlow (float64 tensors inside, so graphs,
``tf.data.Dataset.map`` and Keras layers can use them).

Random numbers are counter based: the j-th uniform number of sample ``index``
is a pure function of ``(seed, epoch, index, j)`` (SplitMix64's output
function on a key made from the three, see :func:`sample_keys`). Whatever the
batch a sample lands in, the thread that maps it, or the iterator restore
before it, its crop is the same; and NumPy and TensorFlow draw identical
numbers because the integer arithmetic is exact on both.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

# SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
# generators", OOPSLA 2014): the golden-ratio increment and the two
# multipliers of its 64-bit finaliser.
_GAMMA = 0x9E3779B97F4A7C15
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB
_TWO_POW_MINUS_53 = 2.0**-53

BACKENDS = ("tensorflow", "numpy")


class NumpyOps:
    """The operations the transform math needs, on NumPy arrays."""

    pi = math.pi

    @staticmethod
    def f64(x):
        return np.asarray(x, dtype=np.float64)

    sqrt, log, exp, cos, sin = np.sqrt, np.log, np.exp, np.cos, np.sin
    abs, minimum, maximum, where = np.abs, np.minimum, np.maximum, np.where
    round = np.round  # half to even, as Python's round

    @staticmethod
    def clip(x, lo, hi):
        return np.minimum(np.maximum(x, lo), hi)

    @staticmethod
    def stack(values, axis=-1):
        return np.stack(np.broadcast_arrays(*values), axis=axis)

    @staticmethod
    def zeros_like(x):
        return np.zeros_like(x, dtype=np.float64)

    @staticmethod
    def row_indices(x):
        return np.arange(np.shape(x)[0], dtype=np.int64)

    @staticmethod
    def to_float32(x):
        """Matrices as the backend returns them: NumPy keeps float64."""
        return x

    @staticmethod
    def first_true(mask):
        """(index of the first True along the last axis (0 if none), whether there is one)."""
        return np.argmax(mask, axis=-1), np.any(mask, axis=-1)

    @staticmethod
    def take(values, index):
        """values[..., index[...]] along the last axis."""
        return np.take_along_axis(values, index[..., np.newaxis], axis=-1)[..., 0]

    # uint64 arithmetic, wrapping modulo 2**64.
    @staticmethod
    def u64(x):
        if isinstance(x, int) and not isinstance(x, bool):  # any Python int, wrapped (as the TF backend)
            return np.uint64(x % 2**64)
        a = np.asarray(x)
        if a.dtype == np.uint64:
            return a
        if a.dtype.kind not in "iub":
            raise TypeError(f"Expected integer seeds, epochs and indices. Received: dtype={a.dtype}")
        if a.dtype.kind == "i":
            return a.astype(np.int64).view(np.uint64)
        return a.astype(np.uint64)

    @staticmethod
    def u64_const(value):
        return np.uint64(value % 2**64)

    @staticmethod
    def add(a, b):
        with np.errstate(over="ignore"):
            return np.add(a, b, dtype=np.uint64)

    @staticmethod
    def mul(a, b):
        with np.errstate(over="ignore"):
            return np.multiply(a, b, dtype=np.uint64)

    @staticmethod
    def xor(a, b):
        return np.bitwise_xor(a, b)

    @staticmethod
    def shr(a, bits):
        return np.right_shift(a, np.uint64(bits))

    @staticmethod
    def u64_to_f64(a):
        return a.astype(np.float64)

    @staticmethod
    def column(values):
        return np.asarray(values, dtype=np.uint64)


class TensorFlowOps:
    """The same operations on TensorFlow tensors (float64 inside)."""

    pi = math.pi

    @staticmethod
    def f64(x):
        if isinstance(x, (tf.Tensor, tf.Variable)):
            return tf.cast(x, tf.float64)
        if isinstance(x, (list, tuple)) and any(tf.is_tensor(v) for v in tf.nest.flatten(x)):
            # (tf.shape(x)[0], tf.shape(x)[1]): tf.constant takes no tensors; each part cast on its own,
            # so that Python floats beside them stay float64 (a packed tensor would make them float32)
            return tf.stack([TensorFlowOps.f64(v) for v in x])
        return tf.constant(x, tf.float64)

    sqrt, log, exp, cos, sin, abs = tf.sqrt, tf.math.log, tf.exp, tf.cos, tf.sin, tf.abs
    round = tf.round  # half to even, as Python's round

    # The binary ops below would make a Python number float32 when it comes
    # first; the math here is float64 throughout.
    @staticmethod
    def where(condition, x, y):
        return tf.where(condition, TensorFlowOps.f64(x), TensorFlowOps.f64(y))

    @staticmethod
    def minimum(x, y):
        return tf.minimum(TensorFlowOps.f64(x), TensorFlowOps.f64(y))

    @staticmethod
    def maximum(x, y):
        return tf.maximum(TensorFlowOps.f64(x), TensorFlowOps.f64(y))

    @staticmethod
    def clip(x, lo, hi):
        return TensorFlowOps.minimum(TensorFlowOps.maximum(x, lo), hi)

    @staticmethod
    def stack(values, axis=-1):
        values = [tf.convert_to_tensor(v) for v in values]
        shape = values[0].shape if all(v.shape == values[0].shape for v in values) else None
        if shape is None or not shape.is_fully_defined():
            target = tf.shape(values[0])
            for v in values[1:]:
                target = tf.broadcast_dynamic_shape(target, tf.shape(v))
            values = [tf.broadcast_to(v, target) for v in values]
        return tf.stack(values, axis=axis)

    @staticmethod
    def zeros_like(x):
        return tf.zeros_like(x, dtype=tf.float64)

    @staticmethod
    def row_indices(x):
        return tf.range(tf.shape(x)[0], dtype=tf.int64)

    @staticmethod
    def to_float32(x):
        """Matrices as the backend returns them: float32, what the warp ops take."""
        return tf.cast(x, tf.float32)

    @staticmethod
    def first_true(mask):
        return tf.argmax(tf.cast(mask, tf.int32), axis=-1, output_type=tf.int32), tf.reduce_any(mask, axis=-1)

    @staticmethod
    def take(values, index):
        return tf.gather(values, index[..., tf.newaxis], batch_dims=index.shape.rank)[..., 0]

    @staticmethod
    def u64(x):
        if isinstance(x, int) and not isinstance(x, bool):  # 2**63 and above fit no int64 tensor: wrapped
            return tf.constant(x % 2**64, tf.uint64)
        t = tf.convert_to_tensor(x)
        if t.dtype == tf.uint64:
            return t
        if not t.dtype.is_integer and t.dtype != tf.bool:
            raise TypeError(f"Expected integer seeds, epochs and indices. Received: dtype={t.dtype.name}")
        if t.dtype.is_unsigned or t.dtype == tf.bool:
            return tf.cast(t, tf.uint64)
        return tf.bitcast(tf.cast(t, tf.int64), tf.uint64)

    @staticmethod
    def u64_const(value):
        return tf.constant(value % 2**64, tf.uint64)

    @staticmethod
    def add(a, b):
        return tf.add(a, b)

    @staticmethod
    def mul(a, b):
        return tf.multiply(a, b)

    @staticmethod
    def xor(a, b):
        return tf.bitwise.bitwise_xor(a, b)

    @staticmethod
    def shr(a, bits):
        return tf.bitwise.right_shift(a, tf.constant(bits, tf.uint64))

    @staticmethod
    def u64_to_f64(a):
        return tf.cast(a, tf.float64)

    @staticmethod
    def column(values):
        return tf.constant(np.asarray(values, dtype=np.uint64))


def get_ops(backend):
    """The operations of ``backend``: ``"tensorflow"`` or ``"numpy"``."""
    if backend == "tensorflow":
        return TensorFlowOps
    if backend == "numpy":
        return NumpyOps
    raise ValueError(f"Expected `backend` in {BACKENDS}. Received: backend={backend!r}")


def _mix64(xp, z):
    """SplitMix64's finaliser: a bijection of uint64 that mixes every bit into every other."""
    z = xp.mul(xp.xor(z, xp.shr(z, 30)), xp.u64_const(_MUL1))
    z = xp.mul(xp.xor(z, xp.shr(z, 27)), xp.u64_const(_MUL2))
    return xp.xor(z, xp.shr(z, 31))


def _step(xp, z):
    return _mix64(xp, xp.add(z, xp.u64_const(_GAMMA)))


def sample_keys(xp, seed, epoch, indices):
    """One uint64 key per sample, a function of (seed, epoch, index) only.

    ``seed``, ``epoch`` and ``indices`` are integers (Python, NumPy or
    TensorFlow; negative values wrap modulo 2**64) and broadcast together.
    """
    key = _step(xp, xp.u64(seed))
    key = _step(xp, xp.xor(key, xp.u64(epoch)))
    return _step(xp, xp.xor(key, xp.u64(indices)))


def uniform(xp, keys, draws):
    """Uniform float64 numbers in [0, 1), shape ``keys.shape + (len(draws),)``.

    Number j of a key is SplitMix64's output ``draws[j] + 1`` from the state
    ``key``: draw ids name the numbers, so a sampler that stops using one
    draw does not shift the others.
    """
    steps = xp.column([((d + 1) * _GAMMA) % 2**64 for d in draws])
    z = _mix64(xp, xp.add(keys[..., np.newaxis], steps))
    return xp.u64_to_f64(xp.shr(z, 11)) * _TWO_POW_MINUS_53
