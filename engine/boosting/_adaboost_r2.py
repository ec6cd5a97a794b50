"""AdaBoost.R2 (Drucker, 1997), boosting for regression.

One round m, weights w over the rows summing to one:

1. fit a learner h_m on a weighted bootstrap of the rows (``boosting_mode="resample"``, as
   Drucker and scikit-learn do) or with the weights as ``sample_weight`` (``"reweight"``);
2. per-row loss L_i in [0, 1] from the absolute error e_i = |h_m(x_i) − y_i| scaled by the
   largest e_i of the rows of positive weight: ``linear`` e/e_max, ``square`` (e/e_max)²,
   ``exponential`` 1 − exp(−e/e_max);
3. average loss ε_m = Σ w_i L_i; ε_m ≥ ½ stops boosting (the learner is discarded unless it
   is the first, which is kept with weight 1); ε_m = 0 keeps the learner with the weight of
   ε = 1e-15 and stops;
4. β_m = ε_m/(1 − ε_m), learner weight α_m = ν ln(1/β_m);
5. w_i ← w_i β_m^{ν (1 − L_i)}, renormalised: rows predicted well lose weight.

Prediction is the weighted median of the members' predictions, weights α_m.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, Options
from engine._threads import kernel_threads
from engine._validation import check_sample_weight, check_target, check_X, resolve_seed_sequence
from engine.base import BaseEstimator, RegressorMixin, check_is_fitted
from engine.boosting._adaboost import PERFECT_ERROR, normalise
from engine.boosting._weak import (
    BOOSTING_CONSTRAINTS,
    ThreadedRounds,
    fit_weak_learner,
    share_bins,
)
from engine.callbacks import (
    ESTIMATOR_WEIGHT,
    TRAIN_ERROR,
    Callback,
    ProgressEvent,
    StopTraining,
    notify,
)
from engine.explain._background import background_sample
from engine.metrics import mean_squared_error
from engine.tree._classes import DecisionTreeRegressor

__all__ = ["AdaBoostRegressor", "r2_row_loss", "weighted_median"]


def r2_row_loss(
    errors: NDArray[np.float64], mask: NDArray[np.bool_], loss: str
) -> NDArray[np.float64]:
    """Per-row loss in [0, 1] of absolute ``errors``, scaled by their maximum over ``mask``."""
    largest = errors[mask].max() if mask.any() else 0.0
    scaled = errors / largest if largest > 0 else np.zeros_like(errors)
    scaled = np.minimum(scaled, 1.0)  # rows outside the mask may exceed the masked maximum
    if loss == "square":
        return scaled**2
    if loss == "exponential":
        return 1.0 - np.exp(-scaled)
    return scaled


def weighted_median(
    predictions: NDArray[np.float64], weights: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per row, the smallest prediction whose cumulative weight reaches half the total.

    Parameters
    ----------
    predictions : ndarray of shape (n_samples, n_members)
    weights : ndarray of shape (n_members,)
    """
    order = np.argsort(predictions, axis=1, kind="stable")
    cumulative = np.cumsum(weights[order], axis=1)
    reached = cumulative >= 0.5 * cumulative[:, -1:]
    chosen = order[np.arange(predictions.shape[0]), reached.argmax(axis=1)]
    return predictions[np.arange(predictions.shape[0]), chosen]


class AdaBoostRegressor(ThreadedRounds, RegressorMixin, BaseEstimator):
    """AdaBoost.R2 regression.

    Parameters
    ----------
    estimator : engine regressor or None
        None means ``DecisionTreeRegressor(max_depth=3)`` (as scikit-learn).
    n_estimators : int
    learning_rate : float
        ν > 0, scaling both α_m and the weight update.
    loss : {"linear", "square", "exponential"}
    boosting_mode : {"resample", "reweight"}
        Default "resample", Drucker's original (and scikit-learn's only) way.
    random_state : int, Generator or None
    n_jobs : int or None
        Threads for each tree member's kernels (see ``ThreadedRounds``); the model is the
        same for any value.

    Attributes
    ----------
    estimators_, estimator_weights_ (α_m), estimator_errors_ (ε_m), n_features_in_,
    feature_importances_
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **BOOSTING_CONSTRAINTS,
        "learning_rate": [Interval("real", 0.0, None, closed="neither")],
        "loss": [Options(("linear", "square", "exponential"))],
    }

    def __init__(
        self,
        estimator: Any = None,
        n_estimators: int = 50,
        *,
        learning_rate: float = 1.0,
        loss: str = "linear",
        boosting_mode: str = "resample",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.loss = loss
        self.boosting_mode = boosting_mode
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _prototype(self) -> Any:
        return DecisionTreeRegressor(max_depth=3) if self.estimator is None else self.estimator

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> AdaBoostRegressor:
        """Boost up to ``n_estimators`` learners; reports ``train_error`` (training MSE of the
        weighted median) after each round when callbacks are given."""
        self._validate_params()
        X = check_X(X, estimator=type(self).__name__)
        target = check_target(y, X.shape[0], numeric=True)
        user_weights = check_sample_weight(sample_weight, X.shape[0])
        weights = normalise(user_weights)
        mask = weights > 0
        prototype = self._prototype()
        root = resolve_seed_sequence(self.random_state)
        seeds = root.spawn(self.n_estimators)
        shared = share_bins(prototype, X, user_weights, root)
        estimators: list[Any] = []
        alphas: list[float] = []
        errors: list[float] = []
        columns: list[NDArray[np.float64]] = []
        with kernel_threads(self.n_jobs) as threads:
            for seed in seeds:
                learner = fit_weak_learner(
                    prototype, X, target, weights, seed, self.boosting_mode, shared, threads
                )
                estimator = learner.estimator
                predicted = np.asarray(learner.predicted, dtype=np.float64)
                row_loss = r2_row_loss(np.abs(predicted - target), mask, self.loss)
                # A NumPy sum, not a BLAS dot: OpenBLAS's threads spin for a while after each
                # call, and here they burnt a second core through the whole fit.
                error = float(np.multiply(weights, row_loss).sum())
                if error >= 0.5:
                    if not estimators:
                        estimators, alphas, errors = [estimator], [1.0], [error]
                        columns.append(predicted)
                        self._report(callbacks, columns, alphas, target, user_weights)
                    break
                beta = max(error, PERFECT_ERROR) / (1.0 - error)
                estimators.append(estimator)
                alphas.append(self.learning_rate * math.log(1.0 / beta))
                errors.append(error)
                columns.append(predicted)
                if stop := self._report(callbacks, columns, alphas, target, user_weights):
                    keep = len(estimators) if stop.keep is None else stop.keep
                    del estimators[keep:], alphas[keep:], errors[keep:]
                    break
                if error <= 0.0:
                    break
                weights = normalise(weights * beta ** ((1.0 - row_loss) * self.learning_rate))
        self.estimators_ = estimators
        self.estimator_weights_ = np.array(alphas, dtype=np.float64)
        self.estimator_errors_ = np.array(errors, dtype=np.float64)
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, user_weights)  # for sampled explanations
        return self

    def _report(
        self,
        callbacks: list[Callback] | None,
        columns: list[NDArray[np.float64]],
        alphas: list[float],
        target: NDArray[np.float64],
        user_weights: NDArray[np.float64],
    ) -> StopTraining | None:
        if not callbacks:
            return None  # the weighted median over all members so far costs O(n m log m)
        fitted = weighted_median(np.stack(columns, axis=1), np.array(alphas))
        metrics = {
            TRAIN_ERROR: mean_squared_error(target, fitted, sample_weight=user_weights),
            ESTIMATOR_WEIGHT: alphas[-1],
        }
        return notify(
            callbacks, ProgressEvent(type(self).__name__, len(alphas), self.n_estimators, metrics)
        )

    def _member_predictions(self, X: Any) -> NDArray[np.float64]:
        check_is_fitted(self, "estimators_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        return np.stack(
            [np.asarray(e.predict(X), dtype=np.float64) for e in self.estimators_], axis=1
        )

    def predict(self, X: Any) -> NDArray[np.float64]:
        """The α-weighted median of the members' predictions, shape (n_samples,)."""
        return weighted_median(self._member_predictions(X), self.estimator_weights_)

    def staged_predict(self, X: Any) -> Iterator[NDArray[np.float64]]:
        predictions = self._member_predictions(X)
        for m in range(1, predictions.shape[1] + 1):
            yield weighted_median(predictions[:, :m], self.estimator_weights_[:m])

    def staged_score(self, X: Any, y: Any, sample_weight: Any = None) -> Iterator[float]:
        """R² after each member."""
        from engine.metrics import r2_score

        for predicted in self.staged_predict(X):
            yield r2_score(y, predicted, sample_weight=sample_weight)

    @property
    def feature_importances_(self) -> NDArray[np.float64]:
        """Members' importances averaged with weights α_m."""
        check_is_fitted(self, "estimators_")
        importances = np.array([e.feature_importances_ for e in self.estimators_])
        return (self.estimator_weights_ @ importances) / self.estimator_weights_.sum()
