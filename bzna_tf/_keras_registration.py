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
finished; the finder then removes itself. When that import was started by one
of bzna_tf's own modules (``import bzna_tf.ops`` imports TensorFlow), the
layers, which import those modules, wait until the last of bzna_tf's modules
under way has finished too: each such module's spec is told to call back when
the import system marks it initialised.
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


def _bzna_tf_initializing() -> list:
    """The specs of bzna_tf's submodules being imported now (the layers import some of them)."""
    specs = []
    for name, module in list(sys.modules.items()):
        if name.startswith("bzna_tf."):
            spec = getattr(module, "__spec__", None)
            if getattr(spec, "_initializing", False):
                specs.append(spec)
    return specs


def _maybe_register(finished: str) -> None:
    if "keras" not in sys.modules or _initializing(finished):
        return  # Keras not loaded yet, or one of the two still importing: a later end of import fires
    for f in [f for f in sys.meta_path if isinstance(f, _Watcher)]:
        sys.meta_path.remove(f)
    busy = _bzna_tf_initializing()
    if busy:  # importing the layers now would meet those modules half made: wait for them
        for spec in busy:
            _call_back_when_initialised(spec)
        return
    _import_layers()


def _after_bzna_tf_module() -> None:
    if "bzna_tf.layers" not in sys.modules and not _bzna_tf_initializing():
        _maybe_register("")


def _call_back_when_initialised(spec) -> None:
    """Makes ``spec`` call :func:`_after_bzna_tf_module` when its module's import ends.

    The import system sets ``spec._initializing`` to False when a module's code
    has run (or failed); a subclass of the spec's class turns that assignment
    into a call. Where that is not possible the layers are not registered
    here, and importing ``bzna_tf.layers`` (or using a layer) registers them.
    """
    cls = type(spec)
    if getattr(cls, "_bzna_tf_notifying", False):
        return
    try:
        value = spec.__dict__.pop("_initializing", False)
        spec.__class__ = _notifying_class(cls)
        spec.__dict__["_bzna_tf_initializing"] = value
    except (TypeError, AttributeError):
        spec.__dict__.setdefault("_initializing", False)


_NOTIFYING: dict = {}


def _notifying_class(cls):
    if cls not in _NOTIFYING:

        def get(self):
            return self.__dict__.get("_bzna_tf_initializing", False)

        def set_(self, value):
            self.__dict__["_bzna_tf_initializing"] = value
            if not value:
                try:
                    _after_bzna_tf_module()
                except Exception:  # never let an import fail because of the registration
                    pass

        _NOTIFYING[cls] = type(
            cls.__name__, (cls,), {"_initializing": property(get, set_), "_bzna_tf_notifying": True}
        )
    return _NOTIFYING[cls]


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
