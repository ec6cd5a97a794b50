"""Folds for out-of-fold (held-out) outputs, the training data of every learned combiner.

Stacking, grading, log-odds voting and the label-fusion combiners of :mod:`engine.fusion`
learn how to combine members from outputs the members gave for rows they were *not* fitted on
(trained on the members' outputs for their own training rows, a combiner favours the members
that overfit most; Wolpert 1992). Each row is given one of ``k`` folds; the
member fitted on the other ``k − 1`` folds gives its output.

Rows are shuffled once from ``random_state`` and then dealt round-robin, after a stable sort
by class when stratifying, so every class is spread over the folds as evenly as possible
(counts differ by at most one per fold) and fold sizes differ by at most one. Given weights,
rows of zero weight take no fold: they sit in every training set (where a zero weight makes
them absent) and are never held out.

``cv`` may instead give explicit ``(train_indices, test_indices)`` pairs (scikit-learn's form).
Either way a fit sees :class:`Splits`, the training and held-out rows of every split.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import resolve_seed_sequence

__all__ = ["NO_FOLD", "Splits", "check_n_splits", "cv_folds", "fold_splits", "resolve_splits"]

NO_FOLD = -1
"""The fold of a row of zero weight: never held out."""


def check_n_splits(n_samples: int, n_splits: int, *, positive_weight: bool = False) -> None:
    """Refuse more folds than rows: some fold would be empty."""
    if n_splits > n_samples:
        rows = "samples of positive weight" if positive_weight else "samples"
        raise ValueError(
            f"Cannot have number of folds cv={n_splits} greater than the number of {rows}: "
            f"n_samples={n_samples}."
        )


def cv_folds(
    n_splits: int,
    *,
    n_samples: int | None = None,
    classes: NDArray[np.int64] | None = None,
    weights: NDArray[np.float64] | None = None,
    random_state: Any = None,
) -> NDArray[np.int64]:
    """The fold (0 … n_splits − 1) of every row, shape (n_samples,), int64.

    Parameters
    ----------
    n_splits : int
        Number of folds, at least 2 and at most the number of rows (of positive weight).
    n_samples : int, optional
        Number of rows, for plain (unstratified) folds.
    classes : ndarray of shape (n_samples,), int, optional
        Encoded class of every row; when given, the folds are stratified by it.
    weights : ndarray of shape (n_samples,), float64, optional
        When given, only rows of positive weight are dealt into folds; the others get
        :data:`NO_FOLD` (−1).
    random_state : None, int or numpy Generator
        Seeds the one shuffle of the rows.
    """
    if classes is not None:
        n_samples = classes.shape[0]
    elif weights is not None:
        n_samples = weights.shape[0]
    if n_samples is None:
        raise ValueError("cv_folds needs n_samples or classes.")
    rows = np.arange(n_samples) if weights is None else np.flatnonzero(weights > 0)
    check_n_splits(rows.size, n_splits, positive_weight=weights is not None)
    rng = np.random.default_rng(resolve_seed_sequence(random_state))
    order = rows[rng.permutation(rows.size)]
    if classes is not None:
        order = order[np.argsort(classes[order], kind="stable")]
    folds = np.full(n_samples, NO_FOLD, dtype=np.int64)
    folds[order] = np.arange(order.size, dtype=np.int64) % n_splits
    return folds


def fold_splits(
    folds: NDArray[np.int64], n_splits: int
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """``(train_rows, test_rows)`` per fold: the form scikit-learn's ``cv`` accepts."""
    return [(np.flatnonzero(folds != k), np.flatnonzero(folds == k)) for k in range(n_splits)]


@dataclass(frozen=True)
class Splits:
    """The training and the held-out rows of every split.

    Attributes
    ----------
    train, test : ndarray of shape (n_splits, n_samples), bool
        Row masks; the test sets are disjoint.
    """

    train: NDArray[np.bool_]
    test: NDArray[np.bool_]

    @property
    def n_splits(self) -> int:
        return int(self.test.shape[0])

    @property
    def held_out(self) -> NDArray[np.bool_]:
        """Whether some split holds each row out, shape (n_samples,)."""
        return np.asarray(self.test.any(axis=0))

    @classmethod
    def from_folds(cls, folds: NDArray[np.int64], n_splits: int) -> Splits:
        """Split ``k`` holds out fold ``k`` and trains on every other row (−1 rows included)."""
        test = folds[None, :] == np.arange(n_splits)[:, None]
        return cls(~test, test)


def _explicit_splits(cv: Any, n_samples: int, partition: bool) -> Splits:
    """:class:`Splits` of ``(train_indices, test_indices)`` pairs, checked.

    With ``partition`` the test sets must cover every row and each training set must be the
    complement of its test set (as for k-fold and leave-one-group-out splits): every row then
    gets exactly one held-out output, from a member fitted on all other rows.
    """
    pairs = list(cv)
    train = np.zeros((len(pairs), n_samples), dtype=bool)
    test = np.zeros((len(pairs), n_samples), dtype=bool)
    for k, (train_rows, test_rows) in enumerate(pairs):
        for mask, rows in ((train[k], train_rows), (test[k], test_rows)):
            indices = np.asarray(rows, dtype=np.int64)
            if indices.size and (indices.min() < 0 or indices.max() >= n_samples):
                raise ValueError(f"cv split {k} holds row indices outside [0, {n_samples}).")
            mask[indices] = True
    if (test.sum(axis=0) > 1).any():
        raise ValueError("The cv test sets overlap; a row may be held out only once.")
    if partition:
        for k in range(len(pairs)):
            if not np.array_equal(train[k], ~test[k]):
                raise ValueError(
                    f"cv split {k}: the training rows must be exactly the rows not held out."
                )
        if not test.any(axis=0).all():
            raise ValueError(
                "The cv test sets do not cover every row; they must partition the rows."
            )
    if not train.any(axis=1).all():
        raise ValueError("A cv split has no training rows.")
    return Splits(train, test)


def resolve_splits(
    cv: Any,
    *,
    n_samples: int,
    classes: NDArray[np.int64] | None,
    random_state: Any,
    weights: NDArray[np.float64] | None = None,
    partition: bool = True,
) -> Splits:
    """:class:`Splits` from ``cv``, a number of folds or explicit ``(train, test)`` pairs.

    Parameters
    ----------
    cv : int or sequence of (train_indices, test_indices)
    n_samples : int
    classes : ndarray of shape (n_samples,), int, or None
        Stratifies the folds when given.
    random_state : None, int or numpy Generator
    weights : ndarray of shape (n_samples,), float64, optional
        Rows of zero weight take no fold (see :func:`cv_folds`).
    partition : bool
        Explicit splits must partition the rows (else their test sets need only be
        disjoint, and rows no test set holds are never held out).
    """
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        folds = cv_folds(
            int(cv),
            n_samples=n_samples,
            classes=classes,
            weights=weights,
            random_state=random_state,
        )
        return Splits.from_folds(folds, int(cv))
    return _explicit_splits(cv, n_samples, partition)
