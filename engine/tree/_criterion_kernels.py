"""Split criteria as scalar functions for the compiled kernels.

Kernels compile with NumPy's error model (division by zero gives ±inf or NaN, as in the twins,
instead of raising). These are :mod:`engine.tree._criteria` and :mod:`engine.tree._monotone` for one channel vector
at a time, written with the same operations in the same order so that a kernel's gains agree
with the NumPy twin's to the last bit wherever the channel sums themselves do. A criterion is
passed to a kernel as an integer code plus Newton's three constants (:func:`criterion_code`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel
from engine.tree._criteria import Criterion, Newton

__all__ = [
    "ENTROPY",
    "GINI",
    "NEWTON",
    "SQUARED_ERROR",
    "bounded_weight",
    "class_score",
    "class_weight",
    "criterion_code",
    "pair_score",
    "pair_weight",
    "score_at_weight",
]

GINI = 0
ENTROPY = 1  # "entropy" and "log_loss": the same information gain
SQUARED_ERROR = 2
NEWTON = 3


def criterion_code(criterion: Criterion) -> tuple[int, float, float, float]:
    """``(code, l1, l2, max_delta_step)`` of a criterion, as kernels take it."""
    if isinstance(criterion, Newton):
        return NEWTON, criterion.l1, criterion.l2, criterion.max_delta_step
    if criterion == "squared_error":
        return SQUARED_ERROR, 0.0, 0.0, 0.0
    if criterion == "gini":
        return GINI, 0.0, 0.0, 0.0
    return ENTROPY, 0.0, 0.0, 0.0


@inline_kernel
def _xlog2x(value: float) -> float:
    return value * math.log2(value) if value > 0 else 0.0


@inline_kernel
def _thresholded(gradient: float, l1: float) -> float:
    """XGBoost's soft threshold T(G) of the gradient sum by α."""
    if l1 <= 0:
        return gradient
    return np.sign(gradient) * max(abs(gradient) - l1, 0.0)


@inline_kernel
def pair_score(a: float, b: float, criterion: int, l1: float, l2: float) -> float:
    """``score`` of a two-channel vector ``(a, b)``: (G, H), (Σw, Σwy) or two class weights.

    Scalars, not a view of a row: in the scan's inner loop, arrays cost loads and stores
    that two registers do not (a 2-channel scan ran 5 ns per bin this way, 35 ns with views).
    """
    if criterion == NEWTON:
        gradient = _thresholded(a, l1)
        denominator = b + l2
        return 0.5 * gradient * gradient / denominator if denominator > 0 else 0.0
    if criterion == SQUARED_ERROR:
        return b * b / a if a > 0 else 0.0
    weight = a + b
    if criterion == GINI:
        return (a * a + b * b) / weight if weight > 0 else 0.0
    return _xlog2x(a) + _xlog2x(b) - _xlog2x(weight)


@inline_kernel
def pair_weight(a: float, b: float, criterion: int) -> float:
    """The weight (cover) of a two-channel vector: Σw, or the hessian sum for Newton."""
    if criterion == NEWTON:
        return b
    if criterion == SQUARED_ERROR:
        return a
    return a + b


@inline_kernel
def class_score(channels: NDArray[np.float64], criterion: int) -> float:
    """``score`` of the class weights of a node (gini or entropy, any number of classes)."""
    weight = channels[0]
    for k in range(1, channels.size):
        weight += channels[k]
    if criterion == GINI:
        squares = channels[0] * channels[0]
        for k in range(1, channels.size):
            squares += channels[k] * channels[k]
        return squares / weight if weight > 0 else 0.0
    total = _xlog2x(channels[0])
    for k in range(1, channels.size):
        total += _xlog2x(channels[k])
    return total - _xlog2x(weight)


@inline_kernel
def class_weight(channels: NDArray[np.float64]) -> float:
    """Total weight of a node's class weights, summed in channel order as NumPy does."""
    weight = channels[0]
    for k in range(1, channels.size):
        weight += channels[k]
    return weight


@inline_kernel
def bounded_weight(
    gradient: float,
    hessian: float,
    l1: float,
    l2: float,
    max_delta_step: float,
    lower: float,
    upper: float,
) -> float:
    """Newton leaf weight ``−T(G)/(H+λ)``, clipped by max_delta_step, then to the bounds."""
    weight = -_thresholded(gradient, l1) / (hessian + l2)
    if math.isnan(weight):
        return weight  # an empty side: np.clip keeps NaN, and so does this
    if max_delta_step > 0:
        weight = min(max(weight, -max_delta_step), max_delta_step)
    return min(max(weight, lower), upper)


@inline_kernel
def score_at_weight(gradient: float, hessian: float, l1: float, l2: float, weight: float) -> float:
    """Loss reduction ``−(G·w + ½(H+λ)·w² + α|w|)`` at the leaf weight ``w``."""
    denominator = hessian + l2
    if not denominator > 0:
        return 0.0
    reduction = -(gradient * weight + 0.5 * denominator * weight * weight)
    if l1 > 0:
        reduction -= l1 * abs(weight)
    return reduction
