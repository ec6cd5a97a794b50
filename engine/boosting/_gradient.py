"""Gradient tree boosting: ``GradientBoostingClassifier`` and ``GradientBoostingRegressor``.

Friedman's gradient boosting machine (2001) with shrinkage and stochastic subsampling
(Friedman 2002): an additive model F(x) = F0 + ν Σ_m Σ_j γ_jm 1(x ∈ R_jm) built stage by
stage, each stage a regression tree fitted to the negative gradient of the loss and its leaf
values set by the loss's own line search. The stage loop lives in
:mod:`engine.boosting._stages`, the losses in :mod:`engine.boosting._losses`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Options
from engine._targets import encode_labels
from engine.base import ClassifierMixin, RegressorMixin
from engine.boosting._gradient_base import BOOSTING_CONSTRAINTS, BaseGradientBoosting
from engine.boosting._losses import CLASSIFICATION_LOSSES, REGRESSION_LOSSES, Loss, softmax
from engine.callbacks import Callback
from engine.tree._binning import MAX_BINS

__all__ = ["GradientBoostingClassifier", "GradientBoostingRegressor"]

FloatArray = NDArray[np.float64]

_SHARED_DOC = """
    learning_rate : float
        Shrinkage ν applied to every tree's contribution.
    n_estimators : int
        Number of boosting stages M (the maximum, with early stopping).
    subsample : float in (0, 1]
        Fraction of rows drawn without replacement for each stage (stochastic gradient
        boosting); below 1 the OOB losses ``oob_scores_``/``oob_improvement_`` are tracked.
    max_depth, max_leaf_nodes : int or None
        Tree size, i.e. the interaction order of the model (depth 1: additive stumps).
        ``max_leaf_nodes`` grows trees best-first with at most that many leaves.
    min_samples_split, min_samples_leaf, min_weight_fraction_leaf, min_impurity_decrease,
    max_features :
        As for :class:`engine.DecisionTreeRegressor`, applied to every tree.
    validation_fraction, n_iter_no_change, tol :
        With ``n_iter_no_change`` set, ``validation_fraction`` of the rows (stratified for
        classification) is held out and training stops once the validation loss has not
        improved by more than ``tol`` on any of the last ``n_iter_no_change`` stages.
    categorical_features : indices, boolean mask or None
        Integer-coded categorical columns (trees split them by category partitions).
    max_bins : int
        Bins per numeric feature (≤ 255); NaN values are learned as missing.
    n_jobs : int or None
        Threads that share each tree's histogram building (stages stay sequential); ``-1``
        uses every CPU. The model is the same for any value.
    random_state : int, Generator or None
"""


class GradientBoostingRegressor(RegressorMixin, BaseGradientBoosting):
    """Gradient tree boosting for regression.

    Parameters
    ----------
    loss : {"squared_error", "absolute_error", "huber", "quantile", "poisson"}
        ``huber`` takes δ as the ``alpha`` quantile of the absolute residuals at each stage;
        ``quantile`` fits the ``alpha`` quantile; ``poisson`` uses a log link (predictions
        are e^F).
    alpha : float in (0, 1)
        Quantile of ``quantile`` and ``huber``.
    """

    __doc__ = (__doc__ or "") + _SHARED_DOC

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **BOOSTING_CONSTRAINTS,
        "loss": [Options(REGRESSION_LOSSES)],
    }

    def __init__(
        self,
        *,
        loss: str = "squared_error",
        learning_rate: float = 0.1,
        n_estimators: int = 100,
        subsample: float = 1.0,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_depth: int | None = 3,
        min_impurity_decrease: float = 0.0,
        max_features: int | float | str | None = None,
        max_leaf_nodes: int | None = None,
        alpha: float = 0.9,
        validation_fraction: float = 0.1,
        n_iter_no_change: int | None = None,
        tol: float = 1e-4,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.subsample = subsample
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_depth = max_depth
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.alpha = alpha
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> GradientBoostingRegressor:
        self._fit(X, y, sample_weight, callbacks)
        return self

    def _loss_target(self, target: NDArray[Any], codes: Any, loss: Loss) -> FloatArray:
        y = np.asarray(target, dtype=np.float64)
        if self.loss == "poisson" and ((y < 0).any() or y.sum() <= 0):
            raise ValueError("loss='poisson' needs y >= 0 with a positive sum.")
        return y

    def _output(self, raw: FloatArray) -> FloatArray:
        return np.exp(raw[:, 0]) if self.loss == "poisson" else raw[:, 0]

    def predict(self, X: Any) -> FloatArray:
        """Predicted targets, shape (n_samples,) (e^F for the Poisson loss)."""
        return self._output(self._raw_predict(X))

    def staged_predict(self, X: Any) -> Iterator[FloatArray]:
        """Predictions after each stage."""
        for raw in self._staged_raw_predict(X):
            yield self._output(raw)


class GradientBoostingClassifier(ClassifierMixin, BaseGradientBoosting):
    """Gradient tree boosting for classification.

    Parameters
    ----------
    loss : {"log_loss", "exponential"}
        ``log_loss``: binomial deviance for two classes, multinomial deviance (K trees per
        stage, softmax) for more. ``exponential``: AdaBoost's loss, two classes only, with
        P(y = 1 | x) = e^{2F} / (1 + e^{2F}).
    alpha : float
        Unused by the classification losses; kept for a uniform parameter set.
    """

    __doc__ = (__doc__ or "") + _SHARED_DOC

    _classification = True
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **BOOSTING_CONSTRAINTS,
        "loss": [Options(CLASSIFICATION_LOSSES)],
    }

    def __init__(
        self,
        *,
        loss: str = "log_loss",
        learning_rate: float = 0.1,
        n_estimators: int = 100,
        subsample: float = 1.0,
        min_samples_split: int | float = 2,
        min_samples_leaf: int | float = 1,
        min_weight_fraction_leaf: float = 0.0,
        max_depth: int | None = 3,
        min_impurity_decrease: float = 0.0,
        max_features: int | float | str | None = None,
        max_leaf_nodes: int | None = None,
        alpha: float = 0.9,
        validation_fraction: float = 0.1,
        n_iter_no_change: int | None = None,
        tol: float = 1e-4,
        categorical_features: Any = None,
        max_bins: int = MAX_BINS,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.subsample = subsample
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_depth = max_depth
        self.min_impurity_decrease = min_impurity_decrease
        self.max_features = max_features
        self.max_leaf_nodes = max_leaf_nodes
        self.alpha = alpha
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.categorical_features = categorical_features
        self.max_bins = max_bins
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> GradientBoostingClassifier:
        self._fit(X, y, sample_weight, callbacks)
        return self

    def _encode_target(self, target: NDArray[Any]) -> tuple[Any, int, Any]:
        classes, codes = encode_labels(target)
        if classes.size < 2:
            raise ValueError(
                f"The classifier needs samples of at least 2 classes in the data, but the data "
                f"contains only one class: {classes[0]!r}."
            )
        return codes, int(classes.size), classes

    def _loss_target(self, target: NDArray[Any], codes: Any, loss: Loss) -> FloatArray:
        if loss.n_trees == 1:
            return np.asarray(codes, dtype=np.float64)
        one_hot = np.zeros((codes.size, loss.n_trees))
        one_hot[np.arange(codes.size), codes] = 1.0
        return one_hot

    def _decision(self, raw: FloatArray) -> FloatArray:
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def _proba(self, raw: FloatArray) -> FloatArray:
        if raw.shape[1] > 1:
            return softmax(raw)
        # Exponential loss fits half the log-odds, so P = e^{2F} / (1 + e^{2F}).
        scale = 2.0 if self.loss == "exponential" else 1.0
        positive = 1.0 / (1.0 + np.exp(-scale * raw[:, 0]))
        return np.column_stack([1.0 - positive, positive])

    def decision_function(self, X: Any) -> FloatArray:
        """The raw additive score F(x): shape (n_samples,) for two classes, else (n, K)."""
        return self._decision(self._raw_predict(X))

    def staged_decision_function(self, X: Any) -> Iterator[FloatArray]:
        for raw in self._staged_raw_predict(X):
            yield self._decision(raw)

    def predict_proba(self, X: Any) -> FloatArray:
        """Class probabilities, shape (n_samples, n_classes)."""
        return self._proba(self._raw_predict(X))

    def staged_predict_proba(self, X: Any) -> Iterator[FloatArray]:
        for raw in self._staged_raw_predict(X):
            yield self._proba(raw)

    def predict(self, X: Any) -> NDArray[Any]:
        return np.asarray(self.classes_[self.predict_proba(X).argmax(axis=1)])

    def staged_predict(self, X: Any) -> Iterator[NDArray[Any]]:
        for proba in self.staged_predict_proba(X):
            yield self.classes_[proba.argmax(axis=1)]
