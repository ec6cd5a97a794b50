"""Fitting one weak learner of a boosting round, by reweighting or by resampling.

A boosted learner can see the round's weights in two ways (boosting by reweighting and by
resampling; Freund and Schapire 1996): a learner that takes weights uses them (a stump's
weighted information gain), or it is fitted on a new sample drawn from the training set with
the weights as probabilities. ``boosting_mode="reweight"`` passes the weights as
``sample_weight``; ``"resample"`` draws a weighted bootstrap of ``n_samples`` rows (the row
counts become ``sample_weight`` when the learner accepts weights, rows are repeated
otherwise).

When the learner is an engine decision tree, :func:`share_bins` bins the training set once per
boosting fit and every round grows its tree on that one binned matrix
(``BaseDecisionTree._fit_binned``), as forests and bagging do: re-binning all of ``X`` for
every member was most of a boosting fit's time. The members stay ordinary fitted trees (they
predict on raw features, persist and explain as before) and share one ``BinMapper``. The edges
come from every row of positive ``sample_weight`` — the rows the ensemble was given — rather
than from each round's weighted rows: in "reweight" mode those are the same rows (boosting
weights are positive wherever the sample weight is), and in "resample" mode a member grows on
its bootstrap's rows of the shared matrix, so all members split on the same candidate
thresholds and encode categories alike.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, ClassVar

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
from engine.tree._binning import BinMapper
from engine.tree._classes import BaseDecisionTree, DecisionTreeClassifier, DecisionTreeRegressor

__all__ = [
    "BOOSTING_CONSTRAINTS",
    "SharedBins",
    "ThreadedRounds",
    "WeakFit",
    "accepts_sample_weight",
    "fit_weak_learner",
    "share_bins",
    "weighted_bootstrap_counts",
]

BOOSTING_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimator": [EstimatorValue(), NoneValue()],
    "n_estimators": [Interval("int", 1, None)],
    "boosting_mode": [Options(("reweight", "resample"))],
    "random_state": [RandomStateValue()],
    "n_jobs": [Interval("int", None, None), NoneValue()],
}


class ThreadedRounds:
    """``n_jobs`` of a boosting loop: threads inside each round's tree, not processes.

    Rounds are sequential, so the parallel part is within a member: the features of its
    histograms are shared out among ``n_jobs`` threads (:mod:`engine._threads`), which
    gives the same model for any ``n_jobs``. Only tree members that share the ensemble's
    bins use them; other learners fit as they would alone.
    """

    n_jobs: int | None = None  # models saved before it existed load with this default
    # Tells the service not to charge the fit for extra processes (service.jobs.service).
    n_jobs_kind: ClassVar[str] = "threads"


def accepts_sample_weight(estimator: Any) -> bool:
    """Whether ``estimator.fit`` takes a ``sample_weight`` argument."""
    fit = getattr(type(estimator), "fit", None)
    if fit is None:  # fit set on the instance: nothing to share between rounds
        return "sample_weight" in inspect.signature(estimator.fit).parameters
    return _fit_takes_sample_weight(fit)


@functools.cache
def _fit_takes_sample_weight(fit: Callable[..., Any]) -> bool:
    # Asked every boosting round; reading a signature costs more than a stump's split search.
    return "sample_weight" in inspect.signature(fit).parameters


def weighted_bootstrap_counts(
    rng: np.random.Generator, weights: NDArray[np.float64], n_draws: int | None = None
) -> NDArray[np.int64]:
    """How often each row is drawn in ``n_draws`` draws (default ``n_samples``) with
    probabilities proportional to ``weights``; shape (n_samples,), int64.

    The counts are one multinomial draw, which is what counting ``n_draws`` weighted draws
    gives: ``Generator.choice`` with ``p`` searched a cumulative sum for every draw, three
    times the time and half of an AdaBoost.R2 fit.
    """
    n_samples = weights.shape[0]
    probabilities = weights / weights.sum()
    counts = rng.multinomial(n_samples if n_draws is None else n_draws, probabilities)
    return np.asarray(counts, dtype=np.int64)


@dataclass(frozen=True)
class SharedBins:
    """The training set binned once for all tree members of one boosting fit.

    Attributes
    ----------
    mapper : BinMapper
        Fitted with the prototype tree's ``max_bins`` and ``categorical_features``; every
        member keeps this object as its ``bin_mapper_``.
    binned : ndarray of uint8, shape (n_samples, n_features)
    """

    mapper: BinMapper
    binned: NDArray[np.unsignedinteger[Any]]


def share_bins(
    prototype: Any,
    X: NDArray[np.float64],
    sample_weight: NDArray[np.float64],
    root: np.random.SeedSequence,
) -> SharedBins | None:
    """Bin ``X`` once for every member when the weak learner is an engine decision tree.

    Parameters
    ----------
    prototype : engine estimator
        The weak learner; anything but a ``DecisionTreeClassifier`` or
        ``DecisionTreeRegressor`` (exactly, not a subclass that may fit differently) gives
        None, and its members fit on raw ``X``.
    X : ndarray of shape (n_samples, n_features), float64
    sample_weight : ndarray of shape (n_samples,), float64
        The ensemble's sample weights; rows of weight 0 place no bin edges.
    root : SeedSequence
        The fit's root seed. The binning's subsample seed is drawn from the root itself, not
        from a spawned child, so the members' seeds are those of an unshared fit and the
        binning does not depend on ``n_estimators``.
    """
    if type(prototype) not in (DecisionTreeClassifier, DecisionTreeRegressor):
        return None
    tree: BaseDecisionTree = clone(prototype)
    tree._validate_params()  # a bad max_bins is named as the member's fit would name it
    mapper, binned = tree._bin(X, sample_weight, int(root.generate_state(1)[0]))
    return SharedBins(mapper, binned)


@dataclass(frozen=True)
class WeakFit:
    """One round's fitted learner and its predictions on every training row."""

    estimator: Any
    predicted: NDArray[Any]  # estimator.predict(X), shape (n_samples,)


def fit_weak_learner(
    prototype: Any,
    X: NDArray[np.float64],
    y: NDArray[Any],
    weights: NDArray[np.float64],
    seed: np.random.SeedSequence,
    mode: str,
    shared: SharedBins | None = None,
    threads: Executor | None = None,
) -> WeakFit:
    """A fitted clone of ``prototype`` for one boosting round, with its training predictions.

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
    shared : SharedBins or None
        From :func:`share_bins`: the tree grows on these bins instead of binning ``X``.
    threads : Executor, optional
        Threads a shared-bins tree's kernels may share (the ensemble's ``n_jobs``).
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
        if shared is None:
            return _with_predictions(estimator.fit(X, y, sample_weight=weights), X)
        leaves = np.empty(X.shape[0], dtype=np.intp)
        estimator._fit_binned(
            shared.mapper, shared.binned, y, sample_weight=weights, threads=threads, leaves=leaves
        )
        return _with_predictions(estimator, X, leaves)
    counts = weighted_bootstrap_counts(rng, weights)
    rows = np.flatnonzero(counts)
    if shared is not None:
        row_weights = counts[rows].astype(np.float64)
        estimator._fit_binned(
            shared.mapper, shared.binned[rows], y[rows], row_weights, threads=threads
        )
    elif weighted:
        estimator.fit(X[rows], y[rows], sample_weight=counts[rows].astype(np.float64))
    else:
        rows = np.repeat(rows, counts[rows])
        estimator.fit(X[rows], y[rows])
    return _with_predictions(estimator, X)


def _with_predictions(
    estimator: Any, X: NDArray[np.float64], leaves: NDArray[np.intp] | None = None
) -> WeakFit:
    """The learner with ``estimator.predict(X)``, read off the leaves its growth assigned
    to the training rows when it assigned one to every row: descending the new tree over
    all of ``X`` again, every round, was a third of a stump-boosting fit."""
    if leaves is None or leaves.size == 0 or leaves.min() < 0:
        return WeakFit(estimator, np.asarray(estimator.predict(X)))
    values = estimator.tree_.values
    if isinstance(estimator, DecisionTreeClassifier):
        # Each node's class once, then gathered per row: the rows of a leaf share its values.
        return WeakFit(estimator, estimator.classes_[values.argmax(axis=1)][leaves])
    return WeakFit(estimator, values[leaves, 0])


def softmax(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise softmax of (n_samples, n_classes) scores, computed stably."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
