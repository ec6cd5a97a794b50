"""Metrics of real-valued predictions: squared, absolute and Poisson errors, and R²."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.metrics._checks import _as_1d, _check_lengths, _weights


def _target_pair(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    true = _as_1d(y_true, "y_true").astype(np.float64)
    pred = _as_1d(y_pred, "y_pred").astype(np.float64)
    _check_lengths(y_true=true, y_pred=pred, sample_weight=sample_weight)
    if not (np.isfinite(true).all() and np.isfinite(pred).all()):
        raise ValueError("y_true and y_pred must be finite.")
    return true, pred, _weights(sample_weight, true.shape[0])


def mean_squared_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean of ``(y_true - y_pred) ** 2``; inputs are 1-D arrays of shape (n_samples,)."""
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    return float(np.average((true - pred) ** 2, weights=weight))


def root_mean_squared_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Square root of :func:`mean_squared_error`."""
    return math.sqrt(mean_squared_error(y_true, y_pred, sample_weight))


def mean_absolute_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean of ``|y_true - y_pred|``; inputs are 1-D arrays of shape (n_samples,)."""
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    return float(np.average(np.abs(true - pred), weights=weight))


def r2_score(y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot.

    Follows scikit-learn's default ``force_finite=True``: a constant ``y_true`` scores 1.0
    when predicted perfectly and 0.0 otherwise, instead of NaN or -inf. Fewer than two samples
    give NaN (scikit-learn also warns), as R² is not defined there.
    """
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    if true.shape[0] < 2:
        return float("nan")
    w = np.ones_like(true) if weight is None else weight
    residual = float(np.sum(w * (true - pred) ** 2))
    total = float(np.sum(w * (true - np.average(true, weights=weight)) ** 2))
    if residual == 0:
        return 1.0
    if total == 0:
        return 0.0
    return 1.0 - residual / total


def mean_poisson_deviance(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean Poisson deviance 2·(y·log(y/μ) - y + μ), with y·log(y/μ) = 0 where y = 0.

    Requires ``y_true >= 0`` and ``y_pred > 0`` (the loss of Poisson boosting).
    """
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    if (true < 0).any() or (pred <= 0).any():
        raise ValueError("Poisson deviance needs y_true >= 0 and y_pred > 0.")
    positive = true > 0
    y_log_ratio = np.where(positive, true * np.log(np.where(positive, true, 1.0) / pred), 0.0)
    return float(np.average(2.0 * (y_log_ratio - true + pred), weights=weight))
