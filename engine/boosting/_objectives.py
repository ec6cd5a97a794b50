"""Objectives of XGBoost-style boosting: per-row gradient and hessian of the loss.

Each objective maps raw scores F (shape (n, K), K = 1 except softmax) to the first and second
derivatives of the loss with respect to F, which is all the second-order trees need (seeds
002/003: the Taylor expansion ``L(y, F + f) ≈ L + g·f + ½·h·f²``). The names follow
XGBoost's. A user objective is any callable ``objective(y, raw) -> (grad, hess)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["OBJECTIVES", "Objective", "resolve_objective", "sigmoid"]

Array = NDArray[np.float64]
# Hessians are floored here so that a saturated logistic row never divides by zero.
MIN_HESSIAN = 1e-16


@dataclass(frozen=True)
class Objective:
    """A named objective: derivatives, its starting score and how scores become outputs."""

    name: str
    gradients: Callable[[Array, Array], tuple[Array, Array]]
    base_score: Callable[[Array, Array], Array]  # (y, weights) -> (K,) initial raw score
    classification: bool = False
    # The same derivatives written into the two columns of an (n, 2) array, for the
    # objectives that compute them so without temporaries beyond one array a row.
    into_pairs: Callable[[Array, Array, Array], None] | None = None

    def __call__(self, y: Array, raw: Array) -> tuple[Array, Array]:
        return self.gradients(y, raw)

    def pairs(self, y: Array, raw: Array) -> Array:
        """A single-output objective's gradients and hessians side by side, shape (n, 2):
        the layout of a second-order tree's channels (``engine.tree.grow.build``), which on
        unit weights then take the array itself rather than a product of it, instead of the
        gradients, the hessians and the channels all held while the tree grows (24 bytes a
        row). The values are those of :meth:`__call__`, bit for bit."""
        out = np.empty((raw.shape[0], 2))
        if self.into_pairs is not None:
            self.into_pairs(y, raw, out)
            return out
        gradient, hessian = self.gradients(y, raw)
        out[:, 0] = gradient.reshape(-1)
        del gradient
        out[:, 1] = hessian.reshape(-1)
        return out


def _weighted_quantile(values: Array, weights: Array, q: float) -> float:
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, q * cumulative[-1]))
    return float(values[order][min(index, values.size - 1)])


def _squared(y: Array, raw: Array) -> tuple[Array, Array]:
    return raw[:, 0] - y, np.ones_like(y)


def _pseudo_huber(y: Array, raw: Array) -> tuple[Array, Array]:
    # δ = 1 (XGBoost's huber_slope default): L = √(1 + r²) − 1.
    residual = raw[:, 0] - y
    scale = np.sqrt(1.0 + residual * residual)
    return residual / scale, 1.0 / scale**3


def _absolute(y: Array, raw: Array) -> tuple[Array, Array]:
    return np.sign(raw[:, 0] - y), np.ones_like(y)


def _logistic(y: Array, raw: Array) -> tuple[Array, Array]:
    probability = sigmoid(raw[:, 0])
    hessian = np.subtract(1.0, probability)
    hessian *= probability  # p(1 − p), in place: one array a row fewer at the peak
    return probability - y, np.maximum(hessian, MIN_HESSIAN, out=hessian)


def _logistic_pairs(y: Array, raw: Array, out: Array) -> None:
    # _logistic's operations, in its order, written into out's columns.
    probability = sigmoid(raw[:, 0])
    hessian = out[:, 1]
    np.subtract(1.0, probability, out=hessian)
    hessian *= probability
    np.maximum(hessian, MIN_HESSIAN, out=hessian)
    np.subtract(probability, y, out=out[:, 0])


def sigmoid(raw: Array) -> Array:
    """``1 / (1 + exp(-raw))`` in one new array (the expression's temporaries reuse it):
    boosting evaluates it over every training row each round, where four arrays of the
    rows' size at once were most of a round's peak memory. The same values bit for bit."""
    out = np.negative(raw)
    np.exp(out, out=out)
    out += 1.0
    return np.divide(1.0, out, out=out)


def _poisson(y: Array, raw: Array) -> tuple[Array, Array]:
    mean = np.exp(raw[:, 0])
    return mean - y, np.maximum(mean, MIN_HESSIAN)


def _softmax_probabilities(raw: Array) -> Array:
    shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _softmax(y: Array, raw: Array) -> tuple[Array, Array]:
    probability = _softmax_probabilities(raw)
    one_hot = np.zeros_like(probability)
    one_hot[np.arange(y.size), y.astype(np.intp)] = 1.0
    # XGBoost's diagonal approximation of the softmax hessian, 2p(1 − p).
    return probability - one_hot, np.maximum(2.0 * probability * (1.0 - probability), MIN_HESSIAN)


def _quantile(alpha: float) -> Callable[[Array, Array], tuple[Array, Array]]:
    def gradients(y: Array, raw: Array) -> tuple[Array, Array]:
        below = y < raw[:, 0]
        return np.where(below, 1.0 - alpha, -alpha), np.ones_like(y)

    return gradients


def _mean(y: Array, w: Array) -> Array:
    return np.array([np.average(y, weights=w)])


def _log_odds(y: Array, w: Array) -> Array:
    p = float(np.clip(np.average(y, weights=w), 1e-6, 1 - 1e-6))
    return np.array([np.log(p / (1.0 - p))])


def _log_mean(y: Array, w: Array) -> Array:
    return np.array([np.log(max(float(np.average(y, weights=w)), 1e-12))])


OBJECTIVES: dict[str, Objective] = {
    "reg:squarederror": Objective("reg:squarederror", _squared, _mean),
    "reg:pseudohubererror": Objective(
        "reg:pseudohubererror",
        _pseudo_huber,
        lambda y, w: np.array([_weighted_quantile(y, w, 0.5)]),
    ),
    "reg:absoluteerror": Objective(
        "reg:absoluteerror", _absolute, lambda y, w: np.array([_weighted_quantile(y, w, 0.5)])
    ),
    "count:poisson": Objective("count:poisson", _poisson, _log_mean),
    "binary:logistic": Objective(
        "binary:logistic", _logistic, _log_odds, classification=True, into_pairs=_logistic_pairs
    ),
    "multi:softprob": Objective(
        "multi:softprob", _softmax, lambda y, w: np.zeros(1), classification=True
    ),
}


def resolve_objective(
    objective: str | Callable[..., tuple[Array, Array]], alpha: float
) -> Objective:
    """The :class:`Objective` for a name (``reg:quantileerror`` takes ``quantile_alpha``)."""
    if callable(objective):
        user = objective

        def gradients(y: Array, raw: Array) -> tuple[Array, Array]:
            # A single-output user objective sees scores of shape (n,), as in XGBoost.
            grad, hess = user(y, raw[:, 0] if raw.shape[1] == 1 else raw)
            return np.asarray(grad, dtype=np.float64), np.asarray(hess, dtype=np.float64)

        return Objective("custom", gradients, lambda y, w: np.zeros(1))
    if objective == "reg:quantileerror":
        return Objective(
            "reg:quantileerror",
            _quantile(alpha),
            lambda y, w: np.array([_weighted_quantile(y, w, alpha)]),
        )
    return OBJECTIVES[objective]


def softmax(raw: Array) -> Array:
    """Row-wise softmax of raw scores, shape (n, K)."""
    return _softmax_probabilities(raw)
