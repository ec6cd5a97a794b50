"""Arcing (Arc-x4) and RegionBoost, two relatives of AdaBoost (Freund and Schapire 1997).

**Arc-x4** (Breiman, 1998, "Arcing classifiers"). After t members, m(i) counts how many of
them misclassify training row i; member t + 1 is fitted on a bootstrap sample drawn with
probabilities p(i) = (1 + m(i)^4) / Σ_j (1 + m(j)^4). Members vote unweighted (plain
majority, as Breiman's arc-x4 does). ``power`` is the exponent: 4 is Arc-x4 as Breiman
defines it and as the method's name says; 1 weights rows by the plain count, (1 + m(i))/Z.

**RegionBoost** (Maclin, 1998). Trained as AdaBoost, but a member's vote weight depends on
the input: at x it is the member's local accuracy on the K training rows nearest x,
kNN(K, C_t, x) = (1/K) Σ_{x_s ∈ N(K, x)} I(C_t(x_s) = y_s), and the class is
argmax_k (1/T) Σ_t kNN(K, C_t, x) · I(C_t(x) = k) (the weights averaged over the T members;
Khanchel and Limam 2000 compare it with the other arcing algorithms). The model keeps what
this needs: the training rows and, per member, which training rows it classifies correctly.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval
from engine._targets import encode_labels
from engine._threads import kernel_threads
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, ClassifierMixin, check_is_fitted
from engine.boosting._adaboost import (
    ADABOOST_CLASSIFIER_CONSTRAINTS,
    BaseAdaBoostClassifier,
    BoostRound,
)
from engine.boosting._knn import nearest_neighbours
from engine.boosting._weak import (
    BOOSTING_CONSTRAINTS,
    ThreadedRounds,
    fit_weak_learner,
    share_bins,
)
from engine.callbacks import ESTIMATOR_ERROR, TRAIN_ERROR, Callback, ProgressEvent, notify
from engine.explain._background import background_sample
from engine.tree._classes import DecisionTreeClassifier

__all__ = ["ArcX4Classifier", "RegionBoostClassifier", "arc_x4_probabilities", "local_accuracy"]

_CHUNK_CELLS = 2**24


def arc_x4_probabilities(
    misclassified: NDArray[np.int64], power: float = 4.0, sample_weight: Any = None
) -> NDArray[np.float64]:
    """p(i) ∝ w_i (1 + m(i)^power) for misclassification counts m, normalised to sum to one."""
    raw = 1.0 + np.asarray(misclassified, dtype=np.float64) ** power
    if sample_weight is not None:
        raw = raw * np.asarray(sample_weight, dtype=np.float64)
    return raw / raw.sum()


class ArcX4Classifier(ThreadedRounds, ClassifierMixin, BaseEstimator):
    """Breiman's Arc-x4: adaptive resampling, unweighted vote.

    Parameters
    ----------
    estimator : engine classifier or None
        None means a full ``DecisionTreeClassifier()``, the learner Breiman arced (an
        *unweighted* vote of stumps is a weak combiner; AdaBoost's α-weighted vote is what
        makes stumps work).
    n_estimators : int
    power : float
        The exponent of m(i); 4 is Arc-x4.
    boosting_mode : {"resample", "reweight"}
        Members fit a bootstrap drawn with p (Breiman), or take p as ``sample_weight``.
    random_state : int, Generator or None
    n_jobs : int or None
        Threads for each tree member's kernels (see ``ThreadedRounds``); the model is the
        same for any value.

    Attributes
    ----------
    estimators_ : list of fitted members
    misclassification_counts_ : ndarray of shape (n_train,), int64
        m(i) after the last member.
    classes_, n_classes_, n_features_in_, feature_importances_ (mean over members)
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **BOOSTING_CONSTRAINTS,
        "power": [Interval("real", 0.0, None)],
    }

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 50,
        *,
        power: float = 4.0,
        boosting_mode: str = "resample",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.power = power
        self.boosting_mode = boosting_mode
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> ArcX4Classifier:
        """Fit ``n_estimators`` members; reports ``train_error`` (majority vote) after each."""
        self._validate_params()
        X = check_X(X, estimator=type(self).__name__)
        target = check_target(y, X.shape[0], numeric=False)
        user_weights = check_sample_weight(sample_weight, X.shape[0])
        classes, encoded = encode_labels(target)
        prototype = DecisionTreeClassifier() if self.estimator is None else self.estimator
        root = resolve_seed_sequence(self.random_state)
        seeds = root.spawn(self.n_estimators)
        shared = share_bins(prototype, X, user_weights, root)
        counts = np.zeros(X.shape[0], dtype=np.int64)
        votes = np.zeros((X.shape[0], classes.size))
        rows = np.arange(X.shape[0])
        estimators = []
        misses: list[NDArray[np.bool_]] = []
        with kernel_threads(self.n_jobs) as threads:
            for t, seed in enumerate(seeds, start=1):
                probabilities = arc_x4_probabilities(counts, self.power, user_weights)
                learner = fit_weak_learner(
                    prototype, X, encoded, probabilities, seed, self.boosting_mode, shared, threads
                )
                predicted = np.asarray(learner.predicted, dtype=np.int64)
                wrong = predicted != encoded
                counts += wrong
                if callbacks:  # only a callback's answer can drop members
                    misses.append(wrong)
                votes[rows, predicted] += 1.0
                estimators.append(learner.estimator)
                error = float(np.average(votes.argmax(axis=1) != encoded, weights=user_weights))
                event = ProgressEvent(
                    type(self).__name__, t, self.n_estimators, {TRAIN_ERROR: error}
                )
                if stop := notify(callbacks, event):
                    if stop.keep is not None and stop.keep < t:
                        # Arc-x4's first members are the ensemble of that many, with the
                        # misclassification counts of those members alone.
                        del estimators[stop.keep :]
                        counts = np.stack(misses[: stop.keep]).sum(axis=0, dtype=np.int64)
                    break
        self.estimators_ = estimators
        self.misclassification_counts_ = counts
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, user_weights)  # for sampled explanations
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Vote shares, shape (n_samples, n_classes)."""
        check_is_fitted(self, "estimators_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        shares = np.zeros((X.shape[0], self.n_classes_))
        rows = np.arange(X.shape[0])
        for estimator in self.estimators_:
            shares[rows, np.asarray(estimator.predict(X), dtype=np.int64)] += 1.0
        return shares / len(self.estimators_)

    def predict(self, X: Any) -> NDArray[Any]:
        """The plurality vote (ties go to the first class in ``classes_``)."""
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        check_is_fitted(self, "estimators_")
        return np.mean([e.feature_importances_ for e in self.estimators_], axis=0)


def local_accuracy(correct: NDArray[np.bool_], neighbours: NDArray[np.intp]) -> NDArray[np.float64]:
    """RegionBoost's local accuracy kNN(K, C_t, x) (Maclin 1998) for every query and member.

    Parameters
    ----------
    correct : ndarray of shape (n_train, n_members), bool
        Whether member t classifies training row s correctly.
    neighbours : ndarray of shape (n_queries, K), intp
        The K training rows nearest each query.

    Returns
    -------
    ndarray of shape (n_queries, n_members), float64
    """
    return correct[neighbours].mean(axis=1)


class RegionBoostClassifier(BaseAdaBoostClassifier):
    """AdaBoost whose members vote with their accuracy on the K nearest training rows.

    Parameters
    ----------
    estimator, n_estimators, learning_rate, alpha, worse_than_chance, boosting_mode, n_jobs,
    random_state :
        Those of :class:`AdaBoostClassifier`; they shape training only (the α_m are kept in
        ``estimator_weights_`` but do not vote).
    n_neighbors : int
        K. Distances are Euclidean on the raw features (scale features that differ in
        units); a missing value is replaced by its column's training mean for distances only.

    Attributes
    ----------
    estimators_, estimator_weights_, estimator_errors_, estimator_reversed_ :
        As in :class:`AdaBoostClassifier`.
    fit_X_ : ndarray of shape (n_train, n_features), the training rows (NaN filled)
    correct_ : ndarray of shape (n_train, n_members), bool
    fill_values_ : ndarray of shape (n_features,), the column means used for NaN
    classes_, n_classes_, n_features_in_, feature_importances_
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **{k: v for k, v in ADABOOST_CLASSIFIER_CONSTRAINTS.items() if k != "algorithm"},
        "n_neighbors": [Interval("int", 1, None)],
    }

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 50,
        *,
        n_neighbors: int = 5,
        learning_rate: float = 1.0,
        alpha: str = "half",
        worse_than_chance: str = "reverse",
        boosting_mode: str = "reweight",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.n_neighbors = n_neighbors
        self.learning_rate = learning_rate
        self.alpha = alpha
        self.worse_than_chance = worse_than_chance
        self.boosting_mode = boosting_mode
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> RegionBoostClassifier:
        """Boost as AdaBoost; with callbacks, reports the RegionBoost vote's ``train_error``
        after each round (this finds the training rows' neighbours once, O(n² p))."""
        X, encoded, weights, classes = self._check_fit_input(X, y, sample_weight)
        fill = np.nan_to_num(np.nanmean(np.where(np.isnan(X).all(axis=0), 0.0, X), axis=0))
        filled = np.where(np.isnan(X), fill, X)
        k = min(self.n_neighbors, X.shape[0])
        neighbours = nearest_neighbours(filled, filled, k) if callbacks else None
        rounds: list[BoostRound] = []
        votes = np.zeros((X.shape[0], classes.size))
        rows = np.arange(X.shape[0])
        for boost_round in self._boost(X, encoded, weights, int(classes.size)):
            rounds.append(boost_round)
            if neighbours is None:
                continue
            local = local_accuracy((boost_round.predicted == encoded)[:, None], neighbours)
            votes[rows, boost_round.predicted] += local[:, 0]
            wrong = votes.argmax(axis=1) != encoded
            metrics = {
                TRAIN_ERROR: float(np.average(wrong, weights=weights)),
                ESTIMATOR_ERROR: boost_round.error,
            }
            event = ProgressEvent(type(self).__name__, len(rounds), self.n_estimators, metrics)
            if stop := notify(callbacks, event):
                del rounds[len(rounds) if stop.keep is None else stop.keep :]
                break
        self._store_rounds(rounds)
        self.correct_ = np.stack([r.predicted == encoded for r in rounds], axis=1)
        self.fit_X_ = filled
        self.fill_values_ = fill
        self.classes_ = classes
        self.n_classes_ = int(classes.size)
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations
        return self

    def _k(self) -> int:
        return min(self.n_neighbors, self.fit_X_.shape[0])

    def member_weights(self, X: Any) -> NDArray[np.float64]:
        """Each member's vote weight kNN(K, C_t, x) at each row, (n_samples, n_members)."""
        X = self._prepare(X)
        filled = np.where(np.isnan(X), self.fill_values_, X)
        k, n_members = self._k(), self.correct_.shape[1]
        chunk = max(1, _CHUNK_CELLS // (k * n_members))  # bounds the (chunk, K, T) gather
        weights = np.empty((X.shape[0], n_members))
        for start in range(0, X.shape[0], chunk):
            neighbours = nearest_neighbours(filled[start : start + chunk], self.fit_X_, k)
            weights[start : start + chunk] = local_accuracy(self.correct_, neighbours)
        return weights

    def _votes(self, X: Any) -> NDArray[np.float64]:
        """(1/T) Σ_t kNN(K, C_t, x) I(C_t(x) = k), shape (n_samples, n_classes)."""
        X = self._prepare(X)
        weights = self.member_weights(X)
        predicted = self._member_predictions(X)
        votes = np.zeros((X.shape[0], self.n_classes_))
        for k in range(self.n_classes_):
            votes[:, k] = (weights * (predicted == k)).sum(axis=1)
        return votes / len(self.estimators_)

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """Two classes: P(class 1) − P(class 0) from :meth:`predict_proba`, (n_samples,), whose
        sign is the vote's; K classes: the vote shares, (n_samples, n_classes)."""
        shares = self.predict_proba(X)
        return shares[:, 1] - shares[:, 0] if self.n_classes_ == 2 else shares

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Vote shares (uniform where no member has any local accuracy)."""
        votes = self._votes(X)
        total = votes.sum(axis=1, keepdims=True)
        uniform = np.full_like(votes, 1.0 / self.n_classes_)
        return np.divide(votes, total, out=uniform, where=total > 0)

    def predict(self, X: Any) -> NDArray[Any]:
        return self.classes_[self._votes(X).argmax(axis=1)]

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Members' importances averaged with weights = their training accuracy (the mean of
        their local weights over the training rows, up to neighbourhood overlap)."""
        check_is_fitted(self, "estimators_")
        importances = np.array([e.feature_importances_ for e in self.estimators_])
        accuracy = self.correct_.mean(axis=0)
        return (accuracy @ importances) / max(accuracy.sum(), 1e-300)
