"""Fitting one weak learner of a boosting round, by reweighting or by resampling.

Seed 004 gives the two ways a boosted learner can see the round's weights: "use weighted
information gain to find the best next stump, or generate a new sample collection from the
training set based on the sample weights". ``boosting_mode="reweight"`` passes the weights as
``sample_weight``; ``"resample"`` draws a weighted bootstrap of ``n_samples`` rows (the row
counts become ``sample_weight`` when the learner accepts weights, rows are repeated
otherwise).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._params import (
    Constraint,
    EstimatorValue,
    Interval,
    NoneValue,
    Options,
    RandomStateValue,
)
from engine.base import clone

__all__ = [
    "BOOSTING_CONSTRAINTS",
    "accepts_sample_weight",
    "fit_weak_learner",
    "weighted_bootstrap_counts",
]

BOOSTING_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimator": [EstimatorValue(), NoneValue()],
    "n_estimators": [Interval("int", 1, None)],
    "boosting_mode": [Options(("reweight", "resample"))],
    "random_state": [RandomStateValue()],
}


def accepts_sample_weight(estimator: Any) -> bool:
    """Whether ``estimator.fit`` takes a ``sample_weight`` argument."""
    return "sample_weight" in inspect.signature(estimator.fit).parameters


def weighted_bootstrap_counts(
    rng: np.random.Generator, weights: NDArray[np.float64], n_draws: int | None = None
) -> NDArray[np.int64]:
    """How often each row is drawn in ``n_draws`` draws (default ``n_samples``) with
    probabilities proportional to ``weights``; shape (n_samples,), int64."""
    n_samples = weights.shape[0]
    probabilities = weights / weights.sum()
    draws = rng.choice(n_samples, size=n_samples if n_draws is None else n_draws, p=probabilities)
    return np.bincount(draws, minlength=n_samples).astype(np.int64)


def fit_weak_learner(
    prototype: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    weights: NDArray[np.float64],
    seed: np.random.SeedSequence,
    mode: str,
) -> Any:
    """A fitted clone of ``prototype`` for one boosting round.

    Parameters
    ----------
    prototype : engine estimator
        Cloned, never fitted itself.
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,)
        Targets (encoded class indices for classifiers).
    weights : ndarray of shape (n_samples,), float64
        The round's distribution over rows (non-negative, any positive sum).
    seed : SeedSequence
        The round's seed: the bootstrap draw, then the learner's own ``random_state``.
    mode : {"reweight", "resample"}
    """
    rng = np.random.default_rng(seed)
    estimator = clone(prototype)
    if "random_state" in estimator.get_params(deep=False):
        estimator.set_params(random_state=int(rng.integers(2**31)))
    weighted = accepts_sample_weight(estimator)
    if mode == "reweight":
        if not weighted:
            raise ValueError(
                f"{type(estimator).__name__}.fit takes no sample_weight; "
                "use boosting_mode='resample'."
            )
        return estimator.fit(X, y, sample_weight=weights)
    counts = weighted_bootstrap_counts(rng, weights)
    rows = np.flatnonzero(counts)
    if weighted:
        return estimator.fit(X[rows], y[rows], sample_weight=counts[rows].astype(np.float64))
    rows = np.repeat(rows, counts[rows])
    return estimator.fit(X[rows], y[rows])


def softmax(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise softmax of (n_samples, n_classes) scores, computed stably."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
