"""Split criteria on aggregated channel sums.

A node is summarised by float *channels*: the weighted count of each class (classification)
or ``(Σw, Σw·y)`` (regression). Each criterion defines a *score* of a channel vector such that
the weighted impurity decrease of a split is ``score(left) + score(right) − score(parent)``:

* gini: ``W·gini = W − Σ_k w_k²/W``, so ``score = Σ_k w_k² / W``;
* entropy (information gain, log base 2): ``W·H = W log W − Σ_k w_k log w_k``, so
  ``score = Σ_k w_k log w_k − W log W``;
* squared_error: ``W·var = Σ w y² − (Σ w y)²/W``; the first term is shared by parent and
  children, so ``score = (Σ w y)² / W``.

Dividing a decrease by the root's weight gives scikit-learn's ``min_impurity_decrease`` units.

:class:`Newton` is the second-order criterion of XGBoost (Chen and Guestrin 2016, §2.2): the
channels are the summed gradients and hessians ``(G, H)`` of the loss, and
``score = ½·T(G)² / (H + λ)`` with ``T`` the L1 soft-threshold, so that a split's decrease is
XGBoost's gain ``½[G_L²/(H_L+λ) + G_R²/(H_R+λ) − (G_L+G_R)²/(H_L+H_R+λ)]`` (before γ). A
node's weight is its cover ``H`` (``min_child_weight`` applies to it) and its value the optimal
leaf weight ``w* = −T(G)/(H+λ)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CLASSIFICATION_CRITERIA",
    "Criterion",
    "Newton",
    "impurity",
    "node_weight",
    "score",
]


@dataclass(frozen=True)
class Newton:
    """Second-order (gradient, hessian) criterion with XGBoost's regularisation.

    Attributes
    ----------
    l2 : float
        λ, added to the hessian sum in scores and leaf weights.
    l1 : float
        α, soft-thresholds the gradient sum.
    max_delta_step : float
        Leaf weights are clipped to ±max_delta_step when positive.
    """

    l2: float = 1.0
    l1: float = 0.0
    max_delta_step: float = 0.0

    def thresholded(self, gradient: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.l1 <= 0:
            return gradient
        return np.sign(gradient) * np.maximum(np.abs(gradient) - self.l1, 0.0)

    def leaf_weight(self, channels: NDArray[np.float64]) -> NDArray[np.float64]:
        """Optimal leaf weight −T(G)/(H+λ) of channel vectors (..., 2) → (...)."""
        weight = -self.thresholded(channels[..., 0]) / (channels[..., 1] + self.l2)
        if self.max_delta_step > 0:
            weight = np.clip(weight, -self.max_delta_step, self.max_delta_step)
        return weight


Criterion = Literal["gini", "entropy", "log_loss", "squared_error"] | Newton
CLASSIFICATION_CRITERIA = ("gini", "entropy", "log_loss")


def _xlog2x(values: NDArray[np.float64]) -> NDArray[np.float64]:
    positive = values > 0
    out = np.zeros_like(values)
    np.log2(values, out=out, where=positive)
    return out * values


def sum_channels(values: NDArray[np.float64]) -> NDArray[np.float64]:
    # Summing a handful of channels one by one beats numpy's reduction over a tiny axis.
    total = values[..., 0].copy()
    for k in range(1, values.shape[-1]):
        total += values[..., k]
    return total


def score(channels: NDArray[np.float64], criterion: Criterion) -> NDArray[np.float64]:
    """Criterion score of channel vectors, shape (..., n_channels) → (...)."""
    if isinstance(criterion, Newton):
        gradient = criterion.thresholded(channels[..., 0])
        denominator = channels[..., 1] + criterion.l2
        with np.errstate(divide="ignore", invalid="ignore"):
            result = 0.5 * gradient * gradient / denominator
        return np.where(denominator > 0, result, 0.0)
    if criterion == "squared_error":
        weight = channels[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            result = channels[..., 1] ** 2 / weight
        return np.where(weight > 0, result, 0.0)
    weight = sum_channels(channels)
    if criterion == "gini":
        with np.errstate(divide="ignore", invalid="ignore"):
            result = sum_channels(channels * channels) / weight
        return np.where(weight > 0, result, 0.0)
    return sum_channels(_xlog2x(channels)) - _xlog2x(weight)


def node_weight(channels: NDArray[np.float64], criterion: Criterion) -> NDArray[np.float64]:
    """The weight (cover) of channel vectors: Σw, or the hessian sum H for Newton."""
    if isinstance(criterion, Newton):
        return channels[..., 1]
    if criterion == "squared_error":
        return channels[..., 0]
    return sum_channels(channels)


def impurity(channels: NDArray[np.float64], criterion: Criterion) -> NDArray[np.float64]:
    """Impurity of classification nodes from their class weights, shape (..., K) → (...).

    Regression impurity (the weighted variance) needs the targets themselves and is computed
    by the grower with a two-pass formula that does not cancel catastrophically.
    """
    weight = channels.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        proportions = np.where(weight > 0, channels / weight, 0.0)
    if criterion == "gini":
        return 1.0 - (proportions**2).sum(axis=-1)
    if criterion in ("entropy", "log_loss"):
        return -_xlog2x(proportions).sum(axis=-1)
    raise ValueError(f"impurity() is for classification criteria, not {criterion!r}.")
