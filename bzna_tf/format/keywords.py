"""Keyword arguments under their old names, and hints for the names users of Keras or TFDS type.

:func:`keywords` wraps a function whose signature stays the one written in its
``def`` (``inspect.signature``, ``help()`` and the API pages show it; static
tools such as IDEs read the ``def`` itself). Only the keywords the signature
lacks go through it:

- an old name (``renamed``) still works, with a ``FutureWarning`` naming the
  new one; both names at once are a ``TypeError``;
- a name with a hint (``hints``), or one a letter or two from a parameter
  (``normalise``, ``drop_reminder``), is a ``TypeError`` worded as Python's
  own ("got an unexpected keyword argument") followed by what to use;
- any other unknown name reaches the function, so Python raises its own error.

Why ``FutureWarning``: Python shows it by default wherever it is raised, while a
``DeprecationWarning`` is hidden unless the call is in ``__main__`` (or tests
turn it on): a training script that imports its data pipeline from a module of
its own would never see it.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np

from bzna_tf.format.wording import user_stacklevel

__all__ = ["flag", "keywords"]


def flag(value, arg: str) -> bool:
    """``value`` as a bool: True or False (NumPy's too), not a truthy string such as "False"; else a
    TypeError naming ``arg``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"Expected `{arg}` as True or False. Received: {arg}={value!r}")
    return bool(value)


F = TypeVar("F", bound=Callable)

# How close an unknown keyword must be to a parameter's name to be offered as a typo of it
# (difflib's ratio: "drop_reminder" ~ "drop_remainder" is 0.96, "batch" ~ "patch"-like pairs stay out).
_TYPO_CUTOFF = 0.8


def keywords(*, renamed: Mapping[str, str] | None = None, hints: Mapping[str, str] | None = None):
    """A decorator: old keyword names still accepted (with a warning), and hints for unknown ones.

    Args:
      renamed: old name -> the parameter that replaced it. The old name works
        for one release, with a ``FutureWarning``.
      hints: a keyword the function does not take -> a parameter it may mean
        (the error says "did you mean `shape`?"), or a sentence saying what to
        do instead (for a keyword that belongs elsewhere, e.g. ``split``).

    Returns:
      A decorator that keeps the function's signature (``functools.wraps``).
    """
    renamed = dict(renamed or {})
    hints = dict(hints or {})

    def decorate(func: F) -> F:
        parameters = inspect.signature(func).parameters
        names = {n for n, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        for old, new in renamed.items():
            if new not in names or old in names:
                raise AssertionError(f"{func.__qualname__}: cannot rename {old!r} to {new!r}")
        public = sorted(n for n in names if not n.startswith("_") and n not in ("self", "cls"))
        title = _title(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if not kwargs.keys() <= names:
                kwargs = _resolve(title, kwargs, names, public, renamed, hints)
            return func(*args, **kwargs)

        return wrapper

    return decorate


def _title(func) -> str:
    """How Python names the function in its own errors: ``Dataset.as_dataset()``, ``ImageNet()``."""
    owner, _, name = func.__qualname__.rpartition(".")
    return f"{owner}()" if name == "__init__" and owner else f"{func.__qualname__}()"


def _resolve(title, kwargs, names, public, renamed, hints) -> dict:
    """``kwargs`` with old names replaced by new ones; a TypeError for a name with a suggestion."""
    out = dict(kwargs)
    for key in kwargs:
        if key in names:
            continue
        if key in renamed:
            new = renamed[key]
            if new in kwargs:
                raise TypeError(
                    f"{title} got both `{key}` and `{new}`: `{key}` is the old name of `{new}`. Give only "
                    f"`{new}`. Received: {key}={kwargs[key]!r}, {new}={kwargs[new]!r}"
                )
            warnings.warn(
                f"{title}: `{key}` is now called `{new}`; the old name will be removed in the next "
                f"release. Write {new}={kwargs[key]!r}",
                FutureWarning,
                stacklevel=user_stacklevel(),
            )
            out[new] = out.pop(key)
            continue
        hint = hints.get(key)
        if hint is None:
            close = difflib.get_close_matches(key, public, n=1, cutoff=_TYPO_CUTOFF)
            hint = close[0] if close else None
        if hint is not None:
            advice = f"did you mean `{hint}`?" if hint in names else hint
            raise TypeError(f"{title} got an unexpected keyword argument '{key}': {advice}")
    return out
