"""Cross-validation splits for the members' out-of-fold labels.

``cv`` is a number of stratified folds or explicit ``(train_indices, test_indices)`` pairs
(scikit-learn's form). Rows of zero weight take no fold: they sit in every training set (where
a zero weight makes them absent) and are never held out.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint
from engine._validation import resolve_seed_sequence

__all__ = ["CVSplits", "resolve_splits", "stratified_folds"]

_NO_FOLD = -1  # the fold of a row of zero weight: never held out


@dataclass(frozen=True)
class CVSplits(Constraint):
    """Explicit cross-validation splits: a list of ``(train_indices, test_indices)`` pairs."""

    def is_satisfied_by(self, value: Any) -> bool:
        return (
            isinstance(value, list | tuple)
            and bool(value)
            and all(isinstance(pair, list | tuple) and len(pair) == 2 for pair in value)
        )

    def describe(self) -> str:
        return "a list of (train_indices, test_indices) pairs"

    def json_schema(self) -> dict[str, Any]:
        indices = {"type": "array", "items": {"type": "integer", "minimum": 0}}
        pair = {"type": "array", "prefixItems": [indices, indices], "minItems": 2, "maxItems": 2}
        return {"type": "array", "items": pair, "minItems": 1}


def stratified_folds(
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_splits: int,
    random_state: Any,
) -> NDArray[np.int64]:
    """The fold (0 … n_splits − 1) of every row; −1 for rows of zero weight.

    The rows of positive weight are shuffled once, sorted (stably) by class and dealt
    round-robin, so each class is spread over the folds as evenly as possible.
    """
    positive = np.flatnonzero(weights > 0)
    if n_splits > positive.size:
        raise ValueError(
            f"Cannot have number of folds cv={n_splits} greater than the number of samples "
            f"of positive weight: n_samples={positive.size}."
        )
    rng = np.random.default_rng(resolve_seed_sequence(random_state))
    order = positive[rng.permutation(positive.size)]
    order = order[np.argsort(target[order], kind="stable")]
    folds = np.full(target.shape[0], _NO_FOLD, dtype=np.int64)
    folds[order] = np.arange(order.size, dtype=np.int64) % n_splits
    return folds


def resolve_splits(
    cv: Any,
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    random_state: Any,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Training and held-out rows of every split, two bool arrays of shape (n_splits, n).

    ``cv`` is a number of stratified folds, or explicit ``(train_indices, test_indices)``
    pairs (scikit-learn's form) whose test sets must be disjoint.
    """
    n_samples = target.shape[0]
    if isinstance(cv, numbers.Integral):
        folds = stratified_folds(target, weights, int(cv), random_state)
        test = folds[None, :] == np.arange(int(cv))[:, None]
        return ~test, test
    train = np.zeros((len(cv), n_samples), dtype=bool)
    test = np.zeros((len(cv), n_samples), dtype=bool)
    for k, (train_rows, test_rows) in enumerate(cv):
        for mask, rows in ((train[k], train_rows), (test[k], test_rows)):
            indices = np.asarray(rows).reshape(-1)
            if indices.size and (
                indices.dtype.kind not in "iu" or indices.min() < 0 or indices.max() >= n_samples
            ):
                raise ValueError(f"cv split {k} has row indices outside [0, {n_samples}).")
            mask[indices] = True
    if (test.sum(axis=0) > 1).any():
        raise ValueError("The test sets of the cv splits overlap; each row needs one label.")
    if not train.any(axis=1).all():
        raise ValueError("A cv split has no training rows.")
    return train, test
