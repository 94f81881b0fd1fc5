"""Legacy Keras (tf_keras) objects told apart: bzna_tf's layers and callbacks are Keras 3's."""

from __future__ import annotations

import sys


def legacy_keras_message(what: str, value) -> str | None:
    """Why ``value`` cannot be used, where it is a legacy Keras (tf_keras, Keras 2) object; else None.

    With ``TF_USE_LEGACY_KERAS=1``, ``tf.keras`` is tf_keras, whose models, inputs and callback lists
    are not Keras 3's: bzna_tf's layers and callbacks would fail deep inside it, or dissolve into its
    op layers. Only looked for where tf_keras was imported.
    """
    if "tf_keras" not in sys.modules:
        return None
    if not any(c.__module__.split(".")[0] == "tf_keras" for c in type(value).__mro__):
        return None
    return (
        f"{what} is a Keras 3 object, and it was given a {type(value).__name__} of legacy Keras, the "
        "tf_keras package (Keras 2; tf.keras is tf_keras where TF_USE_LEGACY_KERAS=1). Build the model "
        "with Keras 3 (`import keras`, not tf.keras), or unset TF_USE_LEGACY_KERAS before importing "
        "TensorFlow"
    )
