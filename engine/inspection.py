"""Model-agnostic inspection: permutation feature importance.

A feature matters as much as the model's score drops when that feature's column is shuffled,
breaking its link with the target while keeping its distribution (missing values included).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_sample_weight, check_X, resolve_seed_sequence, spawn_seeds
from engine.metrics import default_scorer, get_scorer

__all__ = ["PermutationImportance", "permutation_importance"]


@dataclass(frozen=True, eq=False)
class PermutationImportance:
    """The result of :func:`permutation_importance`; arrays are read-only.

    Attributes
    ----------
    importances_mean : ndarray of shape (n_features,), dtype float64
        Mean over repeats of ``importances``.
    importances_std : ndarray of shape (n_features,), dtype float64
        Standard deviation over repeats (``ddof=0``, as scikit-learn).
    importances : ndarray of shape (n_features, n_repeats), dtype float64
        Baseline score minus the score with the feature's column permuted, per repeat.
    baseline_score : float
        The score on the unpermuted rows the permutations were scored on.
    """

    importances_mean: NDArray[np.float64]
    importances_std: NDArray[np.float64]
    importances: NDArray[np.float64]
    baseline_score: float

    def __post_init__(self) -> None:
        for array in (self.importances_mean, self.importances_std, self.importances):
            array.flags.writeable = False


def permutation_importance(
    estimator: Any,
    X: Any,
    y: Any,
    *,
    scoring: str | Callable[..., float] | None = None,
    n_repeats: int = 5,
    random_state: Any = None,
    sample_weight: Any = None,
    n_jobs: int | None = None,
    max_samples: float = 1.0,
) -> PermutationImportance:
    """Decrease of a fitted model's score when each feature's values are shuffled.

    Parameters
    ----------
    estimator : fitted estimator
        Anything the scorer can call (``predict``, or ``predict_proba`` for probability scores).
    X : array-like of shape (n_samples, n_features)
        Converted to float64; NaN marks missing values and is permuted like any other value.
    y : array-like of shape (n_samples,)
    scoring : str or callable, optional
        A name from :func:`engine.metrics.get_scorer_names` or a callable
        ``scorer(estimator, X, y, sample_weight=None) -> float`` (greater is better; it is
        called without ``sample_weight`` when none is given, so scikit-learn scorers work).
        Default: accuracy for classifiers, R² for regressors.
    n_repeats : int, default 5
        Permutations per feature.
    random_state : int, numpy Generator or None
        Resolved once; each feature then gets its own child seed, so a feature's importances
        depend only on ``random_state`` and its column index, not on evaluation order.
    sample_weight : array-like of shape (n_samples,), optional
        Passed to the scorer.
    n_jobs : int, optional
        Accepted and ignored: features are scored one after another, and the parallelism is
        the model's own (a forest's or booster's ``predict`` runs on its ``n_jobs`` threads).
        Scoring features side by side would give the same numbers, since every feature has
        its own seed, at the cost of one copy of ``X`` per thread.
    max_samples : int or float, default 1.0
        Rows to score on: a count, or a fraction of ``n_samples``. One subsample without
        replacement is drawn and shared by all features; the baseline is scored on it too.

    Returns
    -------
    PermutationImportance

    Notes
    -----
    With ``max_samples`` below all rows scikit-learn scores the baseline on all rows but the
    permutations on the subsample, so its importances include the score gap between the two;
    here both use the subsample, so a feature the model ignores scores exactly 0. With all
    rows (the default) the definitions agree.
    """
    X = check_X(X)
    n_samples, n_features = X.shape
    y = _check_y(y, n_samples)
    weight = None if sample_weight is None else check_sample_weight(sample_weight, n_samples)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, numbers.Integral) or n_repeats < 1:
        raise ValueError(f"n_repeats must be an integer >= 1; got {n_repeats!r}.")
    n_rows = _resolve_max_samples(max_samples, n_samples)
    scorer: Callable[..., float] = (
        default_scorer(estimator) if scoring is None else get_scorer(scoring)
    )

    rows_seed, features_seed = spawn_seeds(resolve_seed_sequence(random_state), 2)
    if n_rows < n_samples:
        rows = np.sort(np.random.default_rng(rows_seed).choice(n_samples, n_rows, replace=False))
        X, y = X[rows], y[rows]
        weight = None if weight is None else weight[rows]

    baseline = _score(scorer, estimator, X, y, weight)
    scratch = X.copy()  # one writable copy, each column restored after use: X stays untouched
    permuted = np.empty((n_features, int(n_repeats)), dtype=np.float64)
    for column, seed in enumerate(spawn_seeds(features_seed, n_features)):
        permuted[column] = _permuted_scores(
            scorer, estimator, scratch, y, weight, column, seed, int(n_repeats)
        )

    importances = baseline - permuted
    return PermutationImportance(
        importances_mean=importances.mean(axis=1),
        importances_std=importances.std(axis=1),
        importances=importances,
        baseline_score=baseline,
    )


def _permuted_scores(
    scorer: Callable[..., float],
    estimator: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    weight: NDArray[np.float64] | None,
    column: int,
    seed: np.random.SeedSequence,
    n_repeats: int,
) -> NDArray[np.float64]:
    """Scores with ``X[:, column]`` shuffled, once per repeat.

    ``X`` is modified during the call and restored before it returns. Each repeat permutes the
    original column (not the previous permutation), so repeats are independent draws.

    Returns
    -------
    ndarray of shape (n_repeats,), dtype float64
    """
    rng = np.random.default_rng(seed)
    original = X[:, column].copy()
    scores = np.empty(n_repeats, dtype=np.float64)
    try:
        for repeat in range(n_repeats):
            X[:, column] = original[rng.permutation(original.shape[0])]
            scores[repeat] = _score(scorer, estimator, X, y, weight)
    finally:
        X[:, column] = original
    return scores


def _score(
    scorer: Callable[..., float],
    estimator: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    weight: NDArray[np.float64] | None,
) -> float:
    if weight is None:
        return float(scorer(estimator, X, y))
    return float(scorer(estimator, X, y, sample_weight=weight))


def _check_y(y: Any, n_samples: int) -> NDArray[Any]:
    array = np.asarray(y)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.ravel()
    if array.ndim != 1 or array.shape[0] != n_samples:
        raise ValueError(f"y must have shape ({n_samples},) to match X; got {array.shape}.")
    return array


def _resolve_max_samples(max_samples: float, n_samples: int) -> int:
    if isinstance(max_samples, bool) or not isinstance(max_samples, numbers.Real):
        raise TypeError(f"max_samples must be an int or a float; got {max_samples!r}.")
    if isinstance(max_samples, numbers.Integral):
        if not 1 <= max_samples <= n_samples:
            raise ValueError(f"max_samples must be in [1, {n_samples}] rows; got {max_samples}.")
        return int(max_samples)
    if not 0.0 < max_samples <= 1.0:
        raise ValueError(f"A fractional max_samples must be in (0, 1]; got {max_samples}.")
    n_rows = int(max_samples * n_samples)
    if n_rows < 1:
        raise ValueError(f"max_samples={max_samples} selects no rows out of {n_samples}.")
    return n_rows
