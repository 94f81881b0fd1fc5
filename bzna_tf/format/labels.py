"""What "labelled" means, said once: a sample is labelled when its target is 0 or more.

A .bzna file stores int64 targets for a prefix of its samples (the
``bzna_target`` track); the samples after it have none, and readers give them
:data:`UNLABELLED` (-1). A stored negative target (the converter's
``--missing-label -1`` for an unlabelled image followed by labelled ones, or
any other negative value) is no class either. ``bzna-tf info``, ``bzna-tf
samplelist --labelled-only``, ``BznaFile.num_labelled`` and
``ClassificationDataset`` all count with :func:`is_labelled`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["UNLABELLED", "count_labelled", "is_labelled"]

UNLABELLED = -1  # the target readers give a sample without one


def is_labelled(targets) -> np.ndarray:
    """A boolean mask: True where a target is a class (>= 0)."""
    return np.asarray(targets) >= 0


def count_labelled(targets) -> int:
    """How many of ``targets`` are classes (>= 0)."""
    return int(np.count_nonzero(is_labelled(targets)))
