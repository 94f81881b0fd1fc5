"""The base of bzna_tf's layers: TensorFlow ops, whichever Keras backend is loaded."""

from __future__ import annotations

import sys

import keras
import numpy as np
import tensorflow as tf

from bzna_tf._legacy_keras import legacy_keras_message


class BackendError(RuntimeError, ValueError):
    """A bzna_tf layer given another backend's tensors: it runs TensorFlow ops only.

    Also a ``ValueError``: Keras' automatic build of a subclassed model
    re-raises those unchanged (others it wraps in a ``RuntimeError`` of its own).
    """


def _is_tensorflow_input(value) -> bool:
    """True for what TensorFlow ops take as they are: tf tensors, NumPy arrays, Python values."""
    if isinstance(value, (tf.Tensor, tf.Variable, tf.RaggedTensor, tf.SparseTensor, np.ndarray, np.generic)):
        return True
    # KerasTensors (a model being built) and the backend's own arrays (JAX arrays and tracers,
    # torch tensors: a model running) are what the layer cannot compute on.
    return not (isinstance(value, keras.KerasTensor) or keras.ops.is_tensor(value))


class TensorFlowLayer(keras.layers.Layer):
    """A Keras layer whose ``call`` runs TensorFlow ops (bzna_tf's warp and decode ops).

    Under Keras' TensorFlow backend it is an ordinary layer: in models,
    ``fit``, ``.keras`` files and ``tf.data``. Under another backend (JAX,
    PyTorch, NumPy) it does what Keras' own preprocessing layers do in
    ``tf.data``: given TensorFlow values (the symbolic tensors of a
    ``tf.data.Dataset.map`` or ``tf.function``, eager tensors, NumPy arrays)
    it computes with TensorFlow and returns ``tf.Tensor``, bypassing Keras'
    conversion of the inputs to the backend's arrays. Given the backend's own
    tensors, the ``KerasTensor`` of a model being built or the arrays of a
    model running, it raises :class:`BackendError`, which says what to do.
    """

    # Not converted by AutoGraph (in a tf.data function), as Keras' own __call__ is not: the layers'
    # code is plain TensorFlow.
    @tf.autograph.experimental.do_not_convert
    def __call__(self, *args, **kwargs):
        if "tf_keras" in sys.modules:
            for value in tf.nest.flatten((args, kwargs)):
                message = legacy_keras_message(f"bzna_tf.layers.{type(self).__name__}", value)
                if message:
                    raise TypeError(message)
        if keras.backend.backend() == "tensorflow":
            return super().__call__(*args, **kwargs)
        for value in tf.nest.flatten((args, kwargs)):
            if not _is_tensorflow_input(value):
                raise BackendError(self._backend_message(value))
        # An explicit training=None reaches call as it does under Keras' TensorFlow backend (which passes it
        # on): inference there, so here too, as a preprocess(x, training=None) function would give it. The
        # call-context arguments a layer's call does not take are dropped, as Keras' Layer.__call__ does
        # (by the names Keras read from call's signature when the layer was made).
        for name in ("training", "mask"):
            if name in kwargs and name not in self.call_signature_parameters:
                del kwargs[name]
        return self.call(*args, **kwargs)

    def _backend_message(self, value):
        backend = keras.backend.backend()
        what = "a model being built" if isinstance(value, keras.KerasTensor) else f"{backend}'s own tensor"
        return (
            f"bzna_tf.layers.{type(self).__name__} runs TensorFlow ops, so inside a Keras model it needs "
            f"Keras' TensorFlow backend; Keras' backend is {backend!r} and the layer received a value of "
            f"type {type(value).__name__} ({what}). Either set KERAS_BACKEND=tensorflow before importing "
            "keras, or apply the layer in the tf.data pipeline that feeds the model, where it works under "
            "any backend: dataset.map(lambda x, y: (layer(x), y))."
        )
