"""Where bzna_tf keeps what it builds, found without importing TensorFlow (``bzna_tf.ops`` imports it)."""

from __future__ import annotations

import os
from pathlib import Path

OPS_LIBRARY_NAME = "libbzna_tf_ops.so"
OPS_LIBRARY_VAR = "BZNA_TF_OPS_LIBRARY"  # a library built elsewhere (by Bazel), loaded instead


def cache_root() -> Path:
    """``$BZNA_TF_CACHE_DIR``, else ``bzna_tf`` in ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    if os.environ.get("BZNA_TF_CACHE_DIR"):
        return Path(os.environ["BZNA_TF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bzna_tf"


def ops_library_may_exist() -> bool:
    """Whether the native ops may load without compiling: ``$BZNA_TF_OPS_LIBRARY`` names a library, or
    the cache holds one built for some TensorFlow (``bzna_tf.ops._build.plan()`` says which one would
    load here)."""
    return bool(os.environ.get(OPS_LIBRARY_VAR)) or any(cache_root().glob(f"ops-tf*/{OPS_LIBRARY_NAME}"))
