"""Mixture of experts (Jacobs, Jordan, Nowlan and Hinton 1991): the regressor and the classifier.

Both are :class:`~engine.fusion._em.BaseMixtureOfExperts` (a softmax gate over the inputs,
experts, EM; see that module) with their experts' likelihood: Gaussian around a regressor's
prediction with a variance per expert, or a classifier's probability of the observed class.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval
from engine._targets import encode_labels
from engine._validation import check_target
from engine.base import ClassifierMixin, RegressorMixin, clone
from engine.callbacks import Callback
from engine.fusion._em import MOE_CONSTRAINTS, BaseMixtureOfExperts
from engine.fusion._gate import gate_log_proba
from engine.linear import LinearRegression, LogisticRegression

__all__ = ["MixtureOfExpertsClassifier", "MixtureOfExpertsRegressor"]

_MIN_PROBABILITY = 1e-300  # an expert's probability of an observed class, before the log


class MixtureOfExpertsRegressor(RegressorMixin, BaseMixtureOfExperts):
    """Mixture of regression experts with a softmax gate, trained by EM.

    Parameters
    ----------
    estimator : engine regressor or None
        The expert, cloned ``n_experts`` times; it must accept ``sample_weight``. None means
        ``LinearRegression()``.
    n_experts : int
    max_iter : int
        EM iterations at most (per initialisation).
    tol : float
        Stop when the objective (log-likelihood per unit weight, less penalties) improves by
        less than this.
    gate_C : float
        Inverse L2 penalty of the gate's logistic regression (as ``LogisticRegression.C``).
    min_variance : float
        Floor of every expert's variance, as a fraction of the (weighted) variance of ``y``:
        without it an expert that fits a few rows exactly makes the likelihood unbounded.
    n_init : int
        EM runs from different random starts; the one with the best objective is kept.
    random_state : None, int or numpy Generator
        Seeds the random initial responsibilities.

    Attributes
    ----------
    experts_ : list of fitted regressors, length n_experts
    gate_ : LogisticRegression
        The gate; ``predict_gate`` gives its weights.
    variances_ : ndarray of shape (n_experts,), each expert's noise variance σ_k²
    log_likelihood_ : float, the final objective
    log_likelihood_history_ : ndarray of shape (n_iter_,), the objective after every iteration
    n_iter_ : int
    converged_ : bool
    n_features_in_ : int

    Notes
    -----
    ``predict`` returns the mixture's mean ``Σ_k g_k(x) f_k(x)``. ``sample_weight`` multiplies
    the responsibilities in every M-step and the rows' terms of the likelihood.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **MOE_CONSTRAINTS,
        "min_variance": [Interval("real", 0.0, None, closed="neither")],
    }

    variances_: NDArray[np.float64]

    def __init__(
        self,
        estimator: Any = None,
        n_experts: int = 2,
        *,
        max_iter: int = 100,
        tol: float = 1e-5,
        gate_C: float = 1.0,
        min_variance: float = 1e-6,
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.n_experts = n_experts
        self.max_iter = max_iter
        self.tol = tol
        self.gate_C = gate_C
        self.min_variance = min_variance
        self.n_init = n_init
        self.random_state = random_state

    def _default_expert(self) -> Any:
        return LinearRegression()

    def _prepare_target(self, y: Any, n_samples: int) -> NDArray[Any]:
        return check_target(y, n_samples, numeric=True)

    def _fit_experts(
        self,
        prototype: Any,
        X: NDArray[np.float64],
        target: NDArray[Any],
        weights: NDArray[np.float64],
        responsibilities: NDArray[np.float64],
    ) -> tuple[list[Any], NDArray[np.float64] | None]:
        spread = float(weights @ (target - weights @ target / weights.sum()) ** 2 / weights.sum())
        floor = self.min_variance * (spread if spread > 0 else 1.0)
        experts, variances = [], []
        for k in range(responsibilities.shape[1]):
            expert_weights = weights * responsibilities[:, k]
            expert = clone(prototype).fit(X, target, sample_weight=expert_weights)
            residuals = target - np.asarray(expert.predict(X), dtype=np.float64)
            variance = float(expert_weights @ residuals**2 / expert_weights.sum())
            experts.append(expert)
            variances.append(max(variance, floor))
        return experts, np.asarray(variances)

    def _log_densities(
        self,
        experts: list[Any],
        variances: NDArray[np.float64] | None,
        X: NDArray[np.float64],
        target: NDArray[Any],
    ) -> NDArray[np.float64]:
        assert variances is not None
        predictions = self._expert_predictions(experts, X)
        residuals = target[:, None] - predictions
        return -0.5 * (np.log(2.0 * np.pi * variances) + residuals**2 / variances)

    @staticmethod
    def _expert_predictions(experts: list[Any], X: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.column_stack([np.asarray(e.predict(X), dtype=np.float64) for e in experts])

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> MixtureOfExpertsRegressor:
        """Fit by EM on ``X`` (n_samples, n_features) and targets ``y`` (n_samples,).

        ``callbacks`` receive one event per EM iteration, with the objective as
        ``metrics[LOG_LIKELIHOOD]`` (``"log_likelihood"``).
        """
        self._em_fit(X, y, sample_weight, callbacks)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """The mixture's mean ``Σ_k g_k(x) f_k(x)``, shape (n_samples,)."""
        X = self._check_complete_X(X, fitted=True)
        gate = np.exp(gate_log_proba(self.gate_, X))
        return (gate * self._expert_predictions(self.experts_, X)).sum(axis=1)


class MixtureOfExpertsClassifier(ClassifierMixin, BaseMixtureOfExperts):
    """Mixture of classification experts with a softmax gate, trained by EM.

    Parameters
    ----------
    estimator : engine classifier or None
        The expert, cloned ``n_experts`` times; it must accept ``sample_weight`` and have
        ``predict_proba``. None means ``LogisticRegression()``.
    n_experts, max_iter, tol, gate_C, n_init, random_state :
        As in :class:`MixtureOfExpertsRegressor`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    experts_ : list of fitted classifiers, length n_experts
    gate_ : LogisticRegression
    log_likelihood_ : float
    log_likelihood_history_ : ndarray of shape (n_iter_,)
    n_iter_ : int
    converged_ : bool
    n_features_in_ : int

    Notes
    -----
    ``predict_proba`` returns ``Σ_k g_k(x) P_k(class | x)``. An expert that never saw a class
    gives it probability zero.
    """

    classes_: NDArray[Any]

    def __init__(
        self,
        estimator: Any = None,
        n_experts: int = 2,
        *,
        max_iter: int = 100,
        tol: float = 1e-5,
        gate_C: float = 1.0,
        n_init: int = 1,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.n_experts = n_experts
        self.max_iter = max_iter
        self.tol = tol
        self.gate_C = gate_C
        self.n_init = n_init
        self.random_state = random_state

    def _default_expert(self) -> Any:
        return LogisticRegression()

    def _check_expert(self, prototype: Any) -> None:
        if not hasattr(prototype, "predict_proba"):
            raise TypeError(
                f"The expert {type(prototype).__name__} has no predict_proba; a classification "
                "expert must give class probabilities."
            )

    def _prepare_target(self, y: Any, n_samples: int) -> NDArray[Any]:
        classes, target = encode_labels(check_target(y, n_samples, numeric=False))
        self.classes_ = classes
        return target

    def _fit_experts(
        self,
        prototype: Any,
        X: NDArray[np.float64],
        target: NDArray[Any],
        weights: NDArray[np.float64],
        responsibilities: NDArray[np.float64],
    ) -> tuple[list[Any], NDArray[np.float64] | None]:
        labels = self.classes_[target]
        experts = [
            clone(prototype).fit(X, labels, sample_weight=weights * responsibilities[:, k])
            for k in range(responsibilities.shape[1])
        ]
        return experts, None

    def _expert_proba(self, expert: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """An expert's probabilities over all of ``classes_``, shape (n_samples, n_classes)."""
        seen = np.searchsorted(self.classes_, expert.classes_)
        proba = np.zeros((X.shape[0], self.classes_.size))
        proba[:, seen] = expert.predict_proba(X)
        return proba

    def _log_densities(
        self,
        experts: list[Any],
        variances: NDArray[np.float64] | None,
        X: NDArray[np.float64],
        target: NDArray[Any],
    ) -> NDArray[np.float64]:
        rows = np.arange(X.shape[0])
        observed = np.column_stack([self._expert_proba(e, X)[rows, target] for e in experts])
        return np.log(np.maximum(observed, _MIN_PROBABILITY))

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> MixtureOfExpertsClassifier:
        """Fit by EM on ``X`` (n_samples, n_features) and labels ``y`` (n_samples,)."""
        self._em_fit(X, y, sample_weight, callbacks)
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """``Σ_k g_k(x) P_k(class | x)``, shape (n_samples, n_classes), rows summing to one."""
        X = self._check_complete_X(X, fitted=True)
        gate = np.exp(gate_log_proba(self.gate_, X))
        proba = np.zeros((X.shape[0], self.classes_.size))
        for k, expert in enumerate(self.experts_):
            proba += gate[:, k : k + 1] * self._expert_proba(expert, X)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> NDArray[Any]:
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]
