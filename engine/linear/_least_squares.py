"""Weighted least squares: ``LinearRegression`` and ``Ridge``.

Both minimise ``Σ sᵢ (yᵢ − xᵢ·w − b)² + α‖w‖²`` (α = 0 for ``LinearRegression``) with the
intercept ``b`` unpenalised. The intercept is removed by centring on the weighted means; the
rest is one ``np.linalg.lstsq`` on √s-scaled rows, with Ridge's penalty appended as ``√α·I``
rows (the augmented system), which is better conditioned than the normal equations.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, Interval
from engine._validation import CompleteInputMixin, check_sample_weight, check_target
from engine.base import BaseEstimator, RegressorMixin
from engine.callbacks import Callback, ProgressEvent, notify
from engine.explain._background import training_mean

__all__ = ["LinearRegression", "Ridge"]


def weighted_least_squares(
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    weights: NDArray[np.float64],
    *,
    alpha: float,
    fit_intercept: bool,
) -> tuple[NDArray[np.float64], float]:
    """Coefficients (n_features,) and intercept minimising the weighted ridge objective.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float64, no NaN
    y : ndarray of shape (n_samples,), float64
    weights : ndarray of shape (n_samples,), non-negative, positive sum
    alpha : float
        L2 penalty on the coefficients; 0 gives ordinary least squares (minimum-norm solution
        when ``X`` is rank-deficient).
    fit_intercept : bool
    """
    if fit_intercept:
        x_mean = weights @ X / weights.sum()
        y_mean = float(weights @ y / weights.sum())
    else:
        x_mean = np.zeros(X.shape[1])
        y_mean = 0.0
    root = np.sqrt(weights)
    design = (X - x_mean) * root[:, None]
    response = (y - y_mean) * root
    if alpha > 0:
        n_features = X.shape[1]
        design = np.vstack([design, np.sqrt(alpha) * np.eye(n_features)])
        response = np.concatenate([response, np.zeros(n_features)])
    coef = np.linalg.lstsq(design, response, rcond=None)[0]
    intercept = y_mean - float(x_mean @ coef) if fit_intercept else 0.0
    return coef, intercept


class _BaseLeastSquares(CompleteInputMixin, RegressorMixin, BaseEstimator):
    fit_intercept: bool
    coef_: NDArray[np.float64]
    intercept_: float
    n_features_in_: int

    def _alpha(self) -> float:
        raise NotImplementedError

    def _fit(self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None) -> None:
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        target = check_target(y, X.shape[0], numeric=True)
        weights = check_sample_weight(sample_weight, X.shape[0])
        coef, intercept = weighted_least_squares(
            X, target, weights, alpha=self._alpha(), fit_intercept=self.fit_intercept
        )
        notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
        self.coef_ = coef
        self.intercept_ = intercept
        self.n_features_in_ = X.shape[1]
        self.X_mean_ = training_mean(X, weights)  # the reference of exact explanations

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Predicted targets, shape (n_samples,)."""
        X = self._check_complete_X(X, fitted=True)
        return X @ self.coef_ + self.intercept_


class LinearRegression(_BaseLeastSquares):
    """Ordinary (weighted) least squares.

    Parameters
    ----------
    fit_intercept : bool
        Fit an unpenalised intercept (by centring on the weighted means).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Minimum-norm solution when the features are collinear, as ``np.linalg.lstsq`` gives.
    intercept_ : float
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "fit_intercept": [Boolean()],
    }

    def __init__(self, *, fit_intercept: bool = True) -> None:
        self.fit_intercept = fit_intercept

    def _alpha(self) -> float:
        return 0.0

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> LinearRegression:
        self._fit(X, y, sample_weight, callbacks)
        return self


class Ridge(_BaseLeastSquares):
    """Least squares with an L2 penalty ``alpha·‖w‖²`` on the coefficients (not the intercept).

    Parameters
    ----------
    alpha : float
        Penalty strength, ≥ 0; the objective is ``Σ sᵢ (yᵢ − xᵢ·w − b)² + alpha·‖w‖²`` exactly
        as in scikit-learn, so weights and alpha trade off the same way.
    fit_intercept : bool
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "alpha": [Interval("real", 0.0, None)],
        "fit_intercept": [Boolean()],
    }

    def __init__(self, alpha: float = 1.0, *, fit_intercept: bool = True) -> None:
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def _alpha(self) -> float:
        return float(self.alpha)

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> Ridge:
        self._fit(X, y, sample_weight, callbacks)
        return self
