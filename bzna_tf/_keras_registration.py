"""bzna_tf's Keras layers registered with Keras once bzna_tf and Keras are both imported, in either order.

``keras.models.load_model`` finds a saved model's custom layers by their
registered names (``"bzna_tf>RandomResizedCrop"``): the layer modules must
have been imported first, or Keras fails with "Could not locate class
'RandomResizedCrop'". Keras has no plugin mechanism that would let it import
them by itself, so a process that loads such a model must ``import bzna_tf``;
this module makes that enough (``bzna_tf.layers`` itself is imported lazily).

``import bzna_tf`` stays light (no TensorFlow, no Keras): when Keras is not
loaded yet, a finder on ``sys.meta_path`` waits for it. TensorFlow imports
Keras in the middle of its own import, and Keras with the TensorFlow backend
imports TensorFlow in the middle of its own, so the layers (which need both)
are imported once the last of ``keras`` and ``tensorflow`` under way has
finished; the finder then removes itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading

__all__ = ["register_layers_with_keras"]

_WATCHED = ("keras", "tensorflow")


def register_layers_with_keras() -> None:
    """Registers the layers now if Keras is loaded, else as soon as it is."""
    if "keras" in sys.modules and not _initializing():
        _import_layers()
        return
    if not any(isinstance(f, _Watcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watcher())


def _initializing(finished: str | None = None) -> bool:
    """Whether keras or tensorflow is being imported (``finished``: the one whose import just ended)."""
    for name in _WATCHED:
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if name != finished and getattr(spec, "_initializing", False):
            return True
    return False


def _maybe_register(finished: str) -> None:
    if "keras" not in sys.modules or _initializing(finished):
        return  # Keras not loaded yet, or one of the two still importing: a later end of import fires
    for f in [f for f in sys.meta_path if isinstance(f, _Watcher)]:
        sys.meta_path.remove(f)
    _import_layers()


def _import_layers() -> None:
    try:
        importlib.import_module("bzna_tf.layers")
    except Exception as e:  # never let `import keras` fail because of bzna_tf
        import warnings

        warnings.warn(
            f"bzna_tf could not register its Keras layers ({type(e).__name__}: {e}): "
            "keras.models.load_model will not find them",
            stacklevel=2,
        )


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loaders of ``keras`` and ``tensorflow`` to register the layers
    after the last of their imports ends. A probe (``importlib.util.find_spec("keras")``, which
    TensorFlow does while importing) gets a wrapped spec too and loads nothing: the watcher stays."""

    def __init__(self):
        self._busy = threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _WATCHED or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.on = False
        if spec is not None and spec.loader is not None and not isinstance(spec.loader, _ThenRegister):
            spec.loader = _ThenRegister(spec.loader, fullname)
        return spec


class _ThenRegister(importlib.abc.Loader):
    """A package's loader, which then registers the layers if Keras and TensorFlow are both ready."""

    def __init__(self, loader, name: str):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _maybe_register(self._name)

    def __getattr__(self, name):
        return getattr(self._loader, name)
