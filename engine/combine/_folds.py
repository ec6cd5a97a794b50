"""Folds for out-of-fold (held-out) predictions, the training data of every learned combiner.

Stacking, grading and log-odds voting learn how to combine members from predictions the members
made on rows they were *not* fitted on (seed 004: "we can train the fusion model on a validation
set or a portion of training data that we have not used in training the initial models"). Each
row is given one of ``k`` folds; the member fitted on the other ``k − 1`` folds predicts it.

Rows are shuffled once from ``random_state`` and then dealt round-robin, after a stable sort
by class when stratifying, so every class is spread over the folds as evenly as possible
(counts differ by at most one per fold) and fold sizes differ by at most one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import resolve_seed_sequence

__all__ = ["check_n_splits", "cv_folds", "fold_splits", "folds_from_splits", "resolve_folds"]


def check_n_splits(n_samples: int, n_splits: int) -> None:
    """Refuse more folds than rows: some fold would be empty."""
    if n_splits > n_samples:
        raise ValueError(
            f"Cannot have number of folds cv={n_splits} greater than the number of samples: "
            f"n_samples={n_samples}."
        )


def cv_folds(
    n_splits: int,
    *,
    n_samples: int | None = None,
    classes: NDArray[np.int64] | None = None,
    random_state: Any = None,
) -> NDArray[np.int64]:
    """The fold (0 … n_splits − 1) of every row, shape (n_samples,), int64.

    Parameters
    ----------
    n_splits : int
        Number of folds, at least 2 and at most the number of rows.
    n_samples : int, optional
        Number of rows, for plain (unstratified) folds.
    classes : ndarray of shape (n_samples,), int, optional
        Encoded class of every row; when given, the folds are stratified by it.
    random_state : None, int or numpy Generator
        Seeds the one shuffle of the rows.
    """
    if classes is not None:
        n_samples = classes.shape[0]
    if n_samples is None:
        raise ValueError("cv_folds needs n_samples or classes.")
    check_n_splits(n_samples, n_splits)
    rng = np.random.default_rng(resolve_seed_sequence(random_state))
    order = rng.permutation(n_samples)
    if classes is not None:
        order = order[np.argsort(classes[order], kind="stable")]
    folds = np.empty(n_samples, dtype=np.int64)
    folds[order] = np.arange(n_samples, dtype=np.int64) % n_splits
    return folds


def fold_splits(
    folds: NDArray[np.int64], n_splits: int
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """``(train_rows, test_rows)`` per fold: the form scikit-learn's ``cv`` accepts."""
    return [(np.flatnonzero(folds != k), np.flatnonzero(folds == k)) for k in range(n_splits)]


def folds_from_splits(splits: Any, n_samples: int) -> NDArray[np.int64]:
    """The fold of every row from explicit ``(train_rows, test_rows)`` pairs.

    The test sets must partition the rows and each training set must be the complement of
    its test set (as for k-fold and leave-one-group-out splits): every row then gets exactly
    one held-out output, from a member fitted on all other folds.
    """
    folds = np.full(n_samples, -1, dtype=np.int64)
    for k, (train, test) in enumerate(splits):
        test_rows = np.unique(np.asarray(test, dtype=np.int64))
        train_rows = np.unique(np.asarray(train, dtype=np.int64))
        if test_rows.size and (test_rows.min() < 0 or test_rows.max() >= n_samples):
            raise ValueError(f"cv split {k} holds row indices outside [0, {n_samples}).")
        if (folds[test_rows] >= 0).any():
            raise ValueError("The cv test sets overlap; they must partition the rows.")
        folds[test_rows] = k
        complement = np.setdiff1d(np.arange(n_samples), test_rows)
        if not np.array_equal(train_rows, complement):
            raise ValueError(
                f"cv split {k}: the training rows must be exactly the rows not held out."
            )
    if (folds < 0).any():
        raise ValueError("The cv test sets do not cover every row; they must partition the rows.")
    return folds


def resolve_folds(
    cv: Any,
    *,
    n_samples: int,
    classes: NDArray[np.int64] | None,
    random_state: Any,
) -> tuple[NDArray[np.int64], int]:
    """``(fold of every row, number of folds)`` from ``cv``: a fold count or explicit splits."""
    if isinstance(cv, int | np.integer) and not isinstance(cv, bool):
        folds = cv_folds(int(cv), n_samples=n_samples, classes=classes, random_state=random_state)
        return folds, int(cv)
    splits = list(cv)
    return folds_from_splits(splits, n_samples), len(splits)
