"""Voting: fixed combiners of heterogeneous members (Kuncheva 2004, §4.2–4.3 and ch. 5).

Classification takes the (weighted) majority of the members' predicted classes (``"hard"``) or
the (weighted) average of their class probabilities (``"soft"``); regression takes the
(weighted) average of their predictions, ``C̄(x) = Σᵢ wᵢ Cᵢ(x)``. Weights
are given, or, for classification, learned as ``wᵢ ∝ log(pᵢ / (1 − pᵢ))`` from each member's
accuracy ``pᵢ`` on held-out folds (see :mod:`engine.combine._weights`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, NoneValue, Options
from engine.base import ClassifierMixin, RegressorMixin
from engine.callbacks import Callback
from engine.combine._base import (
    COMBINER_CONSTRAINTS,
    CV_CONSTRAINTS,
    BaseCombiner,
    NumberSequence,
    TransformMixin,
)
from engine.combine._members import FitPlan, MemberOutput, Progress, fit_members, member_output
from engine.combine._weights import log_odds_weights
from engine.explain._background import background_sample

__all__ = ["VotingClassifier", "VotingRegressor"]


class _BaseVoting(TransformMixin, BaseCombiner):
    weights: Any
    weights_: NDArray[np.float64]

    def _given_weights(self, positions: list[int]) -> NDArray[np.float64]:
        """The weights of the members not dropped, from ``weights`` (ones when None)."""
        if self.weights is None:
            return np.ones(len(positions))
        weights = np.asarray(self.weights, dtype=np.float64)
        if weights.size != len(self.estimators):
            raise ValueError(
                f"Number of `estimators` and weights must be equal; got {weights.size} weights, "
                f"{len(self.estimators)} estimators."
            )
        active = weights[positions]
        if active.sum() <= 0:
            raise ValueError("The weights of the members not dropped sum to zero.")
        return active

    def _fit_voting(
        self,
        X: Any,
        y: Any,
        sample_weight: Any,
        callbacks: list[Callback] | None,
        learn_weights: bool,
    ) -> None:
        self._validate_params()
        self._forget_fit()
        names, prototypes, positions = self._active_members()
        self._check_members(names, prototypes)
        given = None if learn_weights else self._given_weights(positions)
        X, target, weights, classes = self._fit_input(X, y, sample_weight, names, prototypes)
        n_classes = classes.size
        splits = self._splits(target) if learn_weights else None
        output = MemberOutput("predict", n_classes) if learn_weights else None
        plan = FitPlan(prototypes, [0] * len(prototypes), [output] * len(prototypes), splits)
        progress = Progress(type(self).__name__, plan.n_fits, callbacks)
        fitted, held_out = fit_members(
            plan, X, target[:, None], weights, n_jobs=self.n_jobs, progress=progress
        )
        if given is None:
            accuracies = np.array(
                [
                    np.average(out[:, 0] == target, weights=weights)
                    for out in held_out
                    if out is not None
                ]
            )
            self.oof_accuracies_ = accuracies
            self.weights_ = log_odds_weights(accuracies, n_classes)
        else:
            self.weights_ = given
        if self._classification:
            self.classes_ = classes
        self.estimators_ = fitted
        self.member_names_ = names
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations

    def _check_members(self, names: list[str], prototypes: list[Any]) -> None:
        """Refuse members that cannot take part, before anything is fitted."""


class VotingClassifier(ClassifierMixin, _BaseVoting):
    """Majority (hard) or probability-averaging (soft) vote of heterogeneous classifiers.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        The members; an estimator may be ``"drop"``. Each is cloned and fitted on the
        encoded labels 0 … n_classes − 1.
    voting : {"hard", "soft"}
        ``"hard"``: predict the class with the largest total weight of members predicting
        it (ties go to the first class in ``classes_``). ``"soft"``: the argmax of the
        weighted mean of the members' ``predict_proba`` (every member needs one).
    weights : None, list of float, or "log_odds"
        One non-negative weight per entry of ``estimators`` (dropped ones included); None is
        equal weights. ``"log_odds"`` learns ``wᵢ = log((K − 1) pᵢ / (1 − pᵢ))`` (the log-odds
        ``log(pᵢ / (1 − pᵢ))`` for two classes) from each member's accuracy ``pᵢ`` on ``cv``
        stratified held-out folds, clipped at 0 for members no better than chance (the
        optimal weights of independent members, Kuncheva 2004, §4.3).
    cv : int or sequence of (train_rows, test_rows) pairs
        Folds for ``weights="log_odds"`` (unused otherwise): a number of stratified folds, or
        explicit splits whose test sets partition the rows (training set = the other rows).
    n_jobs : int or None
        Worker processes for fitting members (and folds) in parallel; None or 1: serially.
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    estimators_ : list
        The fitted members that were not dropped.
    named_estimators_ : dict of str to estimator
    member_names_ : list of str
    weights_ : ndarray of shape (n_members,)
        The weights in use (of the members not dropped).
    oof_accuracies_ : ndarray of shape (n_members,)
        Held-out accuracies behind learned weights (only with ``weights="log_odds"``).
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    """

    _classification = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **COMBINER_CONSTRAINTS,
        **CV_CONSTRAINTS,
        "voting": [Options(("hard", "soft"))],
        "weights": [NoneValue(), Options(("log_odds",)), NumberSequence()],
    }

    def __init__(
        self,
        estimators: Any,
        *,
        voting: str = "hard",
        weights: Any = None,
        cv: int = 5,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.voting = voting
        self.weights = weights
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_members(self, names: list[str], prototypes: list[Any]) -> None:
        if self.voting != "soft":
            return
        for name, prototype in zip(names, prototypes, strict=True):
            if not hasattr(prototype, "predict_proba"):
                raise ValueError(
                    f"voting='soft' averages probabilities, but member {name!r} "
                    f"({type(prototype).__name__}) has no predict_proba; use voting='hard'."
                )

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> VotingClassifier:
        """Fit every member on ``X`` (n_samples, n_features) and labels ``y``.

        ``sample_weight`` is passed to every member's ``fit`` (and weighs the held-out
        accuracies of ``weights="log_odds"``). One progress event per member fit.
        """
        learn = isinstance(self.weights, str) and self.weights == "log_odds"
        self._fit_voting(X, y, sample_weight, callbacks, learn_weights=learn)
        return self

    def _member_outputs(self, X: NDArray[np.float64]) -> list[NDArray[np.float64]]:
        method = "predict_proba" if self.voting == "soft" else "predict"
        n_classes = self.classes_.size
        return [member_output(est, X, method, n_classes) for est in self.estimators_]

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Weighted mean of member probabilities (soft) or weighted vote shares (hard).

        Returns
        -------
        ndarray of shape (n_samples, n_classes), rows summing to one.
        """
        X = self._check_X(X)
        share = self.weights_ / self.weights_.sum()
        outputs = self._member_outputs(X)
        if self.voting == "soft":
            return np.einsum("m,mnk->nk", share, np.stack(outputs))
        votes = np.zeros((X.shape[0], self.classes_.size))
        rows = np.arange(X.shape[0])
        for w, out in zip(share, outputs, strict=True):
            votes[rows, out[:, 0].astype(np.int64)] += w
        return votes

    def predict(self, X: Any) -> NDArray[Any]:
        """The class with the largest (weighted) vote or mean probability, (n_samples,)."""
        probabilities = self.predict_proba(X)
        return self.classes_[probabilities.argmax(axis=1)]

    def transform(self, X: Any) -> NDArray[Any]:
        """Members' outputs side by side.

        Returns
        -------
        ndarray
            Soft voting: probabilities, shape (n_samples, n_members · n_classes), float64.
            Hard voting: predicted class codes (indices into ``classes_``), shape
            (n_samples, n_members), int64.
        """
        outputs = self._member_outputs(self._check_X(X))
        if self.voting == "soft":
            return np.hstack(outputs)
        return np.hstack(outputs).astype(np.int64)


class VotingRegressor(RegressorMixin, _BaseVoting):
    """Weighted average of heterogeneous regressors: ``ŷ = Σᵢ wᵢ ŷᵢ / Σᵢ wᵢ``.

    Parameters
    ----------
    estimators : list of (str, estimator) pairs
        The members; an estimator may be ``"drop"``.
    weights : None or list of float
        One non-negative weight per entry of ``estimators``; None is equal weights.
    n_jobs : int or None
        Worker processes for fitting members in parallel.

    Attributes
    ----------
    estimators_, named_estimators_, member_names_, weights_, n_features_in_ :
        As in :class:`VotingClassifier`.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **COMBINER_CONSTRAINTS,
        "weights": [NoneValue(), NumberSequence()],
    }

    def __init__(self, estimators: Any, *, weights: Any = None, n_jobs: int | None = None) -> None:
        self.estimators = estimators
        self.weights = weights
        self.n_jobs = n_jobs

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> VotingRegressor:
        """Fit every member; ``sample_weight`` is passed to each. One event per member."""
        self._fit_voting(X, y, sample_weight, callbacks, learn_weights=False)
        return self

    def transform(self, X: Any) -> NDArray[np.float64]:
        """Members' predictions, shape (n_samples, n_members)."""
        X = self._check_X(X)
        return np.hstack([member_output(est, X, "predict", 0) for est in self.estimators_])

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Weighted mean of the members' predictions, shape (n_samples,)."""
        return self.transform(X) @ (self.weights_ / self.weights_.sum())
