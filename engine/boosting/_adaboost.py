"""Discrete AdaBoost (Freund and Schapire 1997) and its multiclass form SAMME (Zhu, Zou, Rosset
and Hastie 2009).

One round m, with weights w over the rows summing to one (initially ``1/n``, or the
normalised ``sample_weight``):

1. fit a weak learner h_m to the weighted rows (``boosting_mode``);
2. its weighted error ε_m = Σ_{i misclassified} w_i;
3. two classes, ε_m > ½: the *reverse learner* (predict the other class, ε_m ← 1 − ε_m: a
   learner worse than chance is better than chance flipped), or stop
   (``worse_than_chance="stop"``, as AdaBoost.M1 aborts on ε_t > ½). ε_m at chance
   (½; 1 − 1/K for K classes) stops boosting: the learner carries no information and, the
   weights no longer changing, every later round would refit it;
4. α_m = ν · ½ · (ln((1 − ε_m)/ε_m) + ln(K − 1))  (``alpha="half"``, Schapire and Singer 1999), or
   α_m = ν · (ln((1 − ε_m)/ε_m) + ln(K − 1))      (``alpha="full"``, Freund and Schapire 1997);
   ν is ``learning_rate``, ln(K − 1) is SAMME's term (zero for two classes);
5. "half": w_i ← w_i e^{α_m} if misclassified, w_i e^{−α_m} otherwise;
   "full": w_i ← w_i e^{α_m} if misclassified, unchanged otherwise (Hastie, Tibshirani and
   Friedman 2009, Algorithm 10.1);
   then renormalise to sum to one;
6. ε_m = 0: the learner is perfect on the training rows; it is kept with the weight of
   ε = 1e-15 (finite, so scores and probabilities stay defined) and boosting stops.

The two conventions give the *same* weights after normalisation (misclassified rows gain the
same factor e^{2α_half} = e^{α_full} relative to the others) and the same predictions; they
differ only in the scale of the additive score F(x) = Σ α_m h_m(x). The default is ``"half"``:
it is the α that forward stagewise additive modelling with exponential loss derives
(Friedman, Hastie and Tibshirani 2000), so F estimates ½ · log-odds (ibid., Lemma 1; Hastie et
al. 2009, eq. 10.16) and P(y = 1 | x) = e^{2F}/(1 + e^{2F}) holds as printed. ``predict_proba``
is the same for both conventions (it undoes the factor for ``"full"``); for K classes it is the
softmax of the exponential-loss scores, softmax_k(2 Σ_m α_m^{half} [h_m(x) = k]) — which for
K = 2 is exactly that two-class formula.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, Options
from engine._targets import encode_labels
from engine._threads import kernel_threads
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, ClassifierMixin, check_is_fitted
from engine.boosting._adaboost_kernels import misclassified, reweighted
from engine.boosting._weak import (
    BOOSTING_CONSTRAINTS,
    ThreadedRounds,
    fit_weak_learner,
    share_bins,
    softmax,
)
from engine.callbacks import (
    ESTIMATOR_ERROR,
    ESTIMATOR_WEIGHT,
    TRAIN_ERROR,
    Callback,
    ProgressEvent,
    notify,
)
from engine.explain._background import background_sample
from engine.tree._classes import DecisionTreeClassifier

__all__ = ["AdaBoostClassifier", "learner_weight", "next_weights", "normalise", "reweight"]

PERFECT_ERROR = 1e-15
"""The error a perfect learner (ε = 0) is weighted with: α stays finite (about 17.3 for "half")."""

_CHANCE_TOLERANCE = 1e-12

ADABOOST_CLASSIFIER_CONSTRAINTS: dict[str, list[Constraint]] = {
    **BOOSTING_CONSTRAINTS,
    "learning_rate": [Interval("real", 0.0, None, closed="neither")],
    "algorithm": [Options(("SAMME",))],
    "alpha": [Options(("half", "full"))],
    "worse_than_chance": [Options(("reverse", "stop"))],
}


def learner_weight(
    error: float, n_classes: int = 2, alpha: str = "half", learning_rate: float = 1.0
) -> float:
    """α of a learner with weighted error ``error`` (step 4 of the module docstring)."""
    error = max(error, PERFECT_ERROR)
    raw = math.log((1.0 - error) / error) + math.log(n_classes - 1)
    return learning_rate * (0.5 * raw if alpha == "half" else raw)


def reweight(
    weights: NDArray[np.float64], incorrect: NDArray[np.bool_], alpha_m: float, alpha: str
) -> NDArray[np.float64]:
    """The updated, not yet normalised, row weights (step 5): e^{±α} or e^{α}/1."""
    correct_factor = math.exp(-alpha_m) if alpha == "half" else 1.0
    return weights * np.where(incorrect, math.exp(alpha_m), correct_factor)


def normalise(weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """Weights divided by their sum, a distribution over the rows."""
    return weights / weights.sum()


def next_weights(
    weights: NDArray[np.float64], incorrect: NDArray[np.bool_], alpha_m: float, alpha: str
) -> NDArray[np.float64]:
    """``normalise(reweight(...))`` in the two passes of a compiled kernel: what the
    boosting loop runs (equal to the formula up to the order of the sum's additions)."""
    correct_factor = math.exp(-alpha_m) if alpha == "half" else 1.0
    return reweighted(weights, incorrect, math.exp(alpha_m), correct_factor)


@dataclass
class BoostRound:
    """What one finished round leaves: the learner as used and its place in the vote."""

    estimator: Any
    predicted: NDArray[np.int64]  # class index per training row, after any reversal
    error: float
    alpha: float
    reversed: bool


class BaseAdaBoostClassifier(ThreadedRounds, ClassifierMixin, BaseEstimator):
    """The boosting loop shared by AdaBoost (SAMME) and RegionBoost."""

    estimator: Any
    n_estimators: int
    learning_rate: float
    alpha: str
    worse_than_chance: str
    boosting_mode: str
    random_state: Any
    n_features_in_: int

    def _prototype(self) -> Any:
        return DecisionTreeClassifier(max_depth=1) if self.estimator is None else self.estimator

    def _check_fit_input(
        self, X: Any, y: Any, sample_weight: Any
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[Any]]:
        self._validate_params()
        X = check_X(X, estimator=type(self).__name__)
        target = check_target(y, X.shape[0], numeric=False)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes, encoded = encode_labels(target)
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs at least two classes in y; got 1 class.")
        return X, encoded, weights, classes

    def _boost(
        self,
        X: NDArray[np.float64],
        y: NDArray[np.int64],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> Iterator[BoostRound]:
        """Run the rounds of the module docstring, yielding each learner kept."""
        prototype = self._prototype()
        root = resolve_seed_sequence(self.random_state)
        seeds = root.spawn(self.n_estimators)
        shared = share_bins(prototype, X, sample_weight, root)
        weights = normalise(sample_weight)
        chance = 1.0 - 1.0 / n_classes
        with kernel_threads(self.n_jobs) as threads:
            for m, seed in enumerate(seeds):
                learner = fit_weak_learner(
                    prototype, X, y, weights, seed, self.boosting_mode, shared, threads
                )
                predicted = np.asarray(learner.predicted, dtype=np.int64)
                incorrect, error = misclassified(predicted, y, weights)
                flipped = False
                if n_classes == 2 and error > 0.5 and self.worse_than_chance == "reverse":
                    flipped, predicted, incorrect, error = (
                        True,
                        1 - predicted,
                        ~incorrect,
                        1.0 - error,
                    )
                if error >= chance - _CHANCE_TOLERANCE:
                    if m == 0:
                        raise ValueError(
                            f"The first weak learner of {type(self).__name__} has weighted error "
                            f"{error:.4g}, no better than chance ({chance:.4g}); the ensemble "
                            "cannot be fitted."
                        )
                    return
                alpha_m = learner_weight(error, n_classes, self.alpha, self.learning_rate)
                yield BoostRound(learner.estimator, predicted, error, alpha_m, flipped)
                if error <= 0.0:
                    return
                weights = next_weights(weights, incorrect, alpha_m, self.alpha)

    def _store_rounds(self, rounds: list[BoostRound]) -> None:
        self.estimators_ = [r.estimator for r in rounds]
        self.estimator_weights_ = np.array([r.alpha for r in rounds], dtype=np.float64)
        self.estimator_errors_ = np.array([r.error for r in rounds], dtype=np.float64)
        self.estimator_reversed_ = np.array([r.reversed for r in rounds], dtype=bool)

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self, "estimators_")
        return check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)

    def _member_predictions(self, X: NDArray[np.float64]) -> NDArray[np.int64]:
        """Class index predicted by each member (after reversal), shape (n_samples, n_members)."""
        columns = [np.asarray(e.predict(X), dtype=np.int64) for e in self.estimators_]
        predicted = np.stack(columns, axis=1)
        return np.where(self.estimator_reversed_, 1 - predicted, predicted)

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Members' importances averaged with weights α_m (scikit-learn's definition)."""
        check_is_fitted(self, "estimators_")
        importances = np.array([e.feature_importances_ for e in self.estimators_])
        total = self.estimator_weights_.sum()
        return (self.estimator_weights_ @ importances) / total


class AdaBoostClassifier(BaseAdaBoostClassifier):
    """Discrete AdaBoost; SAMME for more than two classes.

    Parameters
    ----------
    estimator : engine classifier or None
        The weak learner; None means a stump, ``DecisionTreeClassifier(max_depth=1)``.
        With ``boosting_mode="reweight"`` it must accept ``sample_weight``.
    n_estimators : int
        The most rounds; boosting stops earlier on a perfect or chance-level learner.
    learning_rate : float
        Shrinkage ν > 0 multiplying every α_m (Friedman 2001; Hastie et al. 2009, §10.12.1).
    algorithm : {"SAMME"}
        Discrete boosting of class predictions. With two classes SAMME *is* AdaBoost.M1
        (Freund and Schapire 1997; its ln(K − 1) term vanishes); with K classes α_m gains
        ln(K − 1) and a learner must beat chance, 1 − 1/K (Zhu et al. 2009). (Real AdaBoost,
        SAMME.R, is not offered: scikit-learn has removed it too.)
    alpha : {"half", "full"}
        α = ½ ln((1−ε)/ε) with the symmetric e^{±α} update (default), or α = ln((1−ε)/ε)
        with e^{α} on misclassified rows only. Same weights, same predictions; see the
        module docstring for why "half" is the default.
    worse_than_chance : {"reverse", "stop"}
        Two classes, ε > ½: use the reverse learner (its predictions flipped) or stop
        boosting, as AdaBoost.M1 does. K > 2
        classes have no reverse learner: a learner at or past chance (ε ≥ 1 − 1/K) always
        stops boosting. A first learner at chance is a ValueError (nothing to predict with).
    boosting_mode : {"reweight", "resample"}
        Learners see the weights as ``sample_weight``, or fit a weighted bootstrap (boosting
        by reweighting or by resampling; Freund and Schapire 1996).
    random_state : int, Generator or None
    n_jobs : int or None
        Threads for each tree member's kernels (see ``ThreadedRounds``); the model is the
        same for any value.

    Attributes
    ----------
    estimators_ : list of fitted learners (as fitted; see ``estimator_reversed_``)
    estimator_weights_ : ndarray of shape (n_members,), the α_m
    estimator_errors_ : ndarray of shape (n_members,), the ε_m (after any reversal)
    estimator_reversed_ : ndarray of shape (n_members,), bool
    classes_, n_classes_, n_features_in_, feature_importances_
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = ADABOOST_CLASSIFIER_CONSTRAINTS

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 50,
        *,
        learning_rate: float = 1.0,
        algorithm: str = "SAMME",
        alpha: str = "half",
        worse_than_chance: str = "reverse",
        boosting_mode: str = "reweight",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.algorithm = algorithm
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
    ) -> AdaBoostClassifier:
        """Boost up to ``n_estimators`` learners; reports ``train_error`` after each round
        when callbacks are given."""
        X, encoded, weights, classes = self._check_fit_input(X, y, sample_weight)
        n_classes = int(classes.size)
        rounds: list[BoostRound] = []
        votes = np.zeros((X.shape[0], n_classes))
        rows = np.arange(X.shape[0])
        for boost_round in self._boost(X, encoded, weights, n_classes):
            rounds.append(boost_round)
            if not callbacks:
                continue  # the training error is a report: no one to report to, no pass over X
            votes[rows, boost_round.predicted] += boost_round.alpha
            wrong = votes.argmax(axis=1) != encoded
            metrics = {
                TRAIN_ERROR: float(np.average(wrong, weights=weights)),
                ESTIMATOR_ERROR: boost_round.error,
                ESTIMATOR_WEIGHT: boost_round.alpha,
            }
            event = ProgressEvent(type(self).__name__, len(rounds), self.n_estimators, metrics)
            if stop := notify(callbacks, event):
                del rounds[len(rounds) if stop.keep is None else stop.keep :]
                break  # the first rounds of AdaBoost are the ensemble of that many
        self._store_rounds(rounds)
        self.classes_ = classes
        self.n_classes_ = n_classes
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations
        return self

    # --- the additive score, staged and final ------------------------------------------------

    def _staged_votes(self, X: Any) -> Iterator[NDArray[np.float64]]:
        """V_k(x) = Σ_{m ≤ M'} α_m [h_m(x) = k] after each member M', (n_samples, n_classes)."""
        predicted = self._member_predictions(self._prepare(X))
        votes = np.zeros((predicted.shape[0], self.n_classes_))
        rows = np.arange(predicted.shape[0])
        for m, alpha_m in enumerate(self.estimator_weights_):
            votes[rows, predicted[:, m]] += alpha_m
            yield votes.copy()

    def _votes(self, X: Any) -> NDArray[np.float64]:
        predicted = self._member_predictions(self._prepare(X))
        votes = np.zeros((predicted.shape[0], self.n_classes_))
        for k in range(self.n_classes_):
            votes[:, k] = (predicted == k) @ self.estimator_weights_
        return votes

    def _score_from_votes(self, votes: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.n_classes_ == 2:
            return votes[:, 1] - votes[:, 0]  # F(x) = Σ α_m h_m(x), h_m ∈ {−1, +1}
        k = self.n_classes_
        return (k * votes - votes.sum(axis=1, keepdims=True)) / (k - 1)

    def _proba_from_votes(self, votes: NDArray[np.float64]) -> NDArray[np.float64]:
        to_full = 2.0 if self.alpha == "half" else 1.0
        return softmax(to_full * votes)

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """The additive score. Two classes: F(x) = Σ_m α_m h_m(x) with h_m ∈ {−1, +1}
        (class 1 is +1), shape (n_samples,). K classes: SAMME's Σ_m α_m g_m(x) with
        g_mk = 1 for the predicted class and −1/(K−1) otherwise, shape (n_samples, K)."""
        return self._score_from_votes(self._votes(X))

    def staged_decision_function(self, X: Any) -> Iterator[NDArray[np.float64]]:
        for votes in self._staged_votes(X):
            yield self._score_from_votes(votes)

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """P(y = 1 | x) = e^{2F}/(1 + e^{2F}) with F on the "half" scale (Friedman, Hastie
        and Tibshirani 2000); the
        analogous softmax for K classes. Shape (n_samples, n_classes)."""
        return self._proba_from_votes(self._votes(X))

    def staged_predict_proba(self, X: Any) -> Iterator[NDArray[np.float64]]:
        for votes in self._staged_votes(X):
            yield self._proba_from_votes(votes)

    def predict(self, X: Any) -> NDArray[Any]:
        """sign(F(x)) for two classes (a zero score goes to the first class), else argmax."""
        return self.classes_[self._votes(X).argmax(axis=1)]

    def staged_predict(self, X: Any) -> Iterator[NDArray[Any]]:
        for votes in self._staged_votes(X):
            yield self.classes_[votes.argmax(axis=1)]

    def staged_score(self, X: Any, y: Any, sample_weight: Any = None) -> Iterator[float]:
        """Accuracy after each member."""
        truth = np.asarray(y)
        for predicted in self.staged_predict(X):
            yield float(np.average(predicted == truth, weights=sample_weight))
