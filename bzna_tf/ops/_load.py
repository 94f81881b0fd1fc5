"""Loading the compiled ops (building them on first use)."""

from __future__ import annotations

import json
import threading

from bzna_tf.ops._build import BuildError, build, plan

__all__ = ["load_library"]

_lock = threading.Lock()
_module = None


def load_library():
    """The op module of ``libbzna_tf_ops.so``, built for the installed TensorFlow if needed.

    Raises:
      BuildError: no compiler, a failed build, or a library TensorFlow refuses to load.
    """
    global _module
    with _lock:
        if _module is None:
            import tensorflow as tf

            path = build()
            try:
                _module = tf.load_op_library(str(path))
            except Exception as e:  # tf raises NotFoundError or RuntimeError with the dlerror text
                try:
                    built_for = json.loads((path.parent / "build.json").read_text())["tensorflow"]
                except (OSError, ValueError, KeyError):
                    built_for = "unknown"
                raise BuildError(
                    f"TensorFlow {tf.__version__} could not load {path} (built for TensorFlow {built_for}): "
                    f"{e}. Rebuild it with: python -m bzna_tf.ops build --force (key {plan().key})"
                ) from e
        return _module
