"""Classification targets: label encoding and class weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["class_weight_per_row", "encode_labels"]


# Non-negative integer labels up to this are counted instead of sorted (see encode_labels).
_COUNTED_LABELS = 1 << 16


def encode_labels(y: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Sorted distinct labels and each row's index into them (as ``np.unique`` gives them).

    Small non-negative integer labels are counted rather than sorted: ensembles fit every
    member on labels they have already encoded, and sorting them again took a tenth of a
    200-stump AdaBoost fit.
    """
    labels = np.asarray(y).ravel()
    if (
        labels.dtype.kind in "iu"
        and labels.size
        and 0 <= labels.min() <= labels.max() < _COUNTED_LABELS
    ):
        present = np.bincount(labels) > 0
        classes = np.flatnonzero(present).astype(labels.dtype)
        index_of = np.cumsum(present) - 1
        return classes, index_of[labels].astype(np.int64)
    classes, encoded = np.unique(y, return_inverse=True)
    return classes, encoded.astype(np.int64).ravel()


def class_weight_per_row(
    class_weight: Mapping[Any, float] | str | None,
    encoded: NDArray[np.int64],
    classes: NDArray[Any],
) -> NDArray[np.float64]:
    """Per-row multiplier from ``class_weight``.

    ``"balanced"`` weights class k by ``n_samples / (n_classes · n_k)``, so every class
    carries the same total weight; a mapping gives weights by label (absent labels: 1).
    """
    if class_weight is None:
        return np.ones(encoded.size)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be 'balanced' or a mapping; got {class_weight!r}.")
        counts = np.bincount(encoded, minlength=classes.size).astype(np.float64)
        per_class = encoded.size / (classes.size * np.maximum(counts, 1.0))
        return per_class[encoded]
    unknown = [label for label in class_weight if label not in set(classes.tolist())]
    if unknown:
        raise ValueError(f"class_weight names labels absent from y: {unknown!r}.")
    per_class = np.array([float(class_weight.get(label, 1.0)) for label in classes.tolist()])
    return per_class[encoded]
