"""Loss functions of gradient boosting, looked up by name.

Each loss knows four things (Friedman 2001, "Greedy Function Approximation"; Hastie,
Tibshirani and Friedman 2009, Algorithm 10.3, "Gradient Tree Boosting"):

- ``init_raw``: F0, the constant raw score minimising the loss;
- ``gradient``: dL/dF per row, whose negative a regression tree is fitted to;
- ``leaf_values``: γ_jm, the loss's own line search in each terminal region R_jm;
- ``pointwise``/``__call__``: the loss itself, per row and as a weighted mean.

Raw scores are always 2-D, shape (n_samples, K): K = 1 for regression and binary
classification, K = n_classes for multinomial deviance. Targets are float64 of shape
(n_samples,), 0/1 for binary classification, or (n_samples, K) one-hot for multinomial.

Losses are rebuilt from the estimator's parameters (``get_loss``), never persisted; the only
state one carries is Huber's δ, recomputed every stage from the residuals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CLASSIFICATION_LOSSES",
    "REGRESSION_LOSSES",
    "Loss",
    "get_loss",
    "grouped_weighted_quantile",
    "safe_divide",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

REGRESSION_LOSSES = ("squared_error", "absolute_error", "huber", "quantile", "poisson")
CLASSIFICATION_LOSSES = ("log_loss", "exponential")

# Probabilities are kept this far from 0 and 1 when they become log-odds (as scikit-learn).
PROBA_EPS = float(np.finfo(np.float64).eps)
# Newton denominators below this mean "no curvature": the leaf keeps γ = 0.
TINY_HESSIAN = 1e-150


def safe_divide(numerator: NDArray[Any], denominator: NDArray[Any]) -> FloatArray:
    """Elementwise ``numerator / denominator``, 0 where the denominator is (nearly) zero."""
    out = np.zeros(np.shape(numerator))
    ok = np.abs(denominator) >= TINY_HESSIAN
    np.divide(numerator, denominator, out=out, where=ok)
    return out


def grouped_weighted_quantile(
    values: FloatArray, weights: FloatArray, groups: IntArray, n_groups: int, q: float
) -> FloatArray:
    """The lower weighted ``q``-quantile of ``values`` within each group, in one sort.

    For each group: the smallest value whose cumulative weight reaches ``q`` × the group's
    total weight, which minimises the weighted pinball loss of level ``q`` (q = 0.5: the
    weighted median, minimiser of the absolute error). Groups without rows get 0.

    Parameters
    ----------
    values, weights : ndarray of float64, shape (n,)
    groups : ndarray of intp, shape (n,)
        Group of each value, in ``[0, n_groups)``.
    """
    result = np.zeros(n_groups)
    if values.size == 0:
        return result
    order = np.lexsort((values, groups))
    sorted_groups = groups[order]
    sorted_weights = weights[order]
    totals = np.bincount(groups, weights=weights, minlength=n_groups)
    cumulative = np.cumsum(sorted_weights)
    # Cumulative weight within each group: subtract what all earlier groups hold.
    before = np.concatenate(([0.0], np.cumsum(totals)[:-1]))
    within = cumulative - before[sorted_groups]
    # A relative tolerance keeps a value whose share equals q exactly despite rounding.
    reached = within >= q * totals[sorted_groups] * (1 - 1e-12)
    hits = np.flatnonzero(reached)
    hit_groups, first = np.unique(sorted_groups[hits], return_index=True)
    result[hit_groups] = values[order][hits[first]]
    return result


class Loss:
    """Base class; subclasses define the loss, its gradient, F0 and the line search."""

    name: str = ""
    n_trees: int = 1  # trees per stage (K)
    is_classification = False

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        """The loss of each row, shape (n_samples,)."""
        raise NotImplementedError

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        """dL/dF, same shape as ``raw``."""
        raise NotImplementedError

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        """F0 = argmin_γ Σ w L(y, γ), shape (K,)."""
        raise NotImplementedError

    def leaf_values(
        self,
        y: FloatArray,
        raw: FloatArray,
        weights: FloatArray,
        leaves: IntArray,
        n_nodes: int,
        k: int,
    ) -> FloatArray:
        """γ of every node of one tree (only leaves are meaningful), shape (n_nodes,).

        ``y``, ``raw``, ``weights`` and ``leaves`` cover the in-bag rows only; ``k`` is the
        class whose tree this is (0 unless multinomial).
        """
        raise NotImplementedError

    def prepare_stage(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> None:
        """Update per-stage state from the in-bag rows before the gradient is taken."""

    # Squared error and binomial deviance are reported doubled (MSE, deviance), as
    # scikit-learn reports them; the pointwise forms are the halves whose gradients are clean.
    report_factor = 1.0

    def __call__(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> float:
        """Weighted mean of the pointwise loss."""
        return float(np.average(self.pointwise(y, raw), weights=weights))

    def report(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> float:
        """The loss as ``train_score_``, ``validation_score_`` and ``oob_scores_`` give it."""
        return self.report_factor * self(y, raw, weights)


class SquaredError(Loss):
    """L = (y − F)² / 2; F0 = mean; γ = the mean residual of the leaf."""

    name = "squared_error"
    report_factor = 2.0

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return 0.5 * (y - raw[:, 0]) ** 2

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return (raw[:, 0] - y)[:, None]

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        return np.array([np.average(y, weights=weights)])

    def leaf_values(
        self,
        y: FloatArray,
        raw: FloatArray,
        weights: FloatArray,
        leaves: IntArray,
        n_nodes: int,
        k: int,
    ) -> FloatArray:
        residual = y - raw[:, 0]
        numerator = np.bincount(leaves, weights=weights * residual, minlength=n_nodes)
        return safe_divide(numerator, np.bincount(leaves, weights=weights, minlength=n_nodes))


class QuantileLoss(Loss):
    """Pinball loss of level α; F0 and γ are weighted α-quantiles of the residuals."""

    name = "quantile"

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        diff = y - raw[:, 0]
        return np.where(diff >= 0, self.alpha * diff, (self.alpha - 1) * diff)

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        # Subgradient: −α above the quantile, 1 − α below (scikit-learn's convention at 0).
        return np.where(y > raw[:, 0], -self.alpha, 1.0 - self.alpha)[:, None]

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        zeros = np.zeros(y.size, dtype=np.intp)
        return grouped_weighted_quantile(y, weights, zeros, 1, self.alpha)

    def leaf_values(
        self,
        y: FloatArray,
        raw: FloatArray,
        weights: FloatArray,
        leaves: IntArray,
        n_nodes: int,
        k: int,
    ) -> FloatArray:
        return grouped_weighted_quantile(y - raw[:, 0], weights, leaves, n_nodes, self.alpha)


class AbsoluteError(QuantileLoss):
    """L = |y − F|: the quantile loss at α = ½ doubled; F0 and γ are weighted medians."""

    name = "absolute_error"

    def __init__(self) -> None:
        super().__init__(0.5)

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return np.abs(y - raw[:, 0])

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return -np.sign(y - raw[:, 0])[:, None]


class HuberLoss(Loss):
    """Huber's loss with δ the α-quantile of |y − F| (recomputed each stage, Friedman 2001).

    F0 is the weighted median (Friedman's M-regression, Algorithm 4); γ is his one-step
    approximation: the leaf's median residual r̃ plus the mean of sign(r − r̃)·min(δ, |r − r̃|).
    """

    name = "huber"

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.delta = 1.0

    def prepare_stage(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> None:
        zeros = np.zeros(y.size, dtype=np.intp)
        absolute = np.abs(y - raw[:, 0])
        self.delta = float(grouped_weighted_quantile(absolute, weights, zeros, 1, self.alpha)[0])

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        absolute = np.abs(y - raw[:, 0])
        delta = self.delta
        return np.where(absolute <= delta, 0.5 * absolute**2, delta * (absolute - 0.5 * delta))

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        diff = y - raw[:, 0]
        return -np.clip(diff, -self.delta, self.delta)[:, None]

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        zeros = np.zeros(y.size, dtype=np.intp)
        return grouped_weighted_quantile(y, weights, zeros, 1, 0.5)

    def leaf_values(
        self,
        y: FloatArray,
        raw: FloatArray,
        weights: FloatArray,
        leaves: IntArray,
        n_nodes: int,
        k: int,
    ) -> FloatArray:
        diff = y - raw[:, 0]
        median = grouped_weighted_quantile(diff, weights, leaves, n_nodes, 0.5)
        centred = diff - median[leaves]
        step = np.sign(centred) * np.minimum(np.abs(centred), self.delta)
        numerator = np.bincount(leaves, weights=weights * step, minlength=n_nodes)
        mean_step = safe_divide(numerator, np.bincount(leaves, weights=weights, minlength=n_nodes))
        return median + mean_step


class NewtonLoss(Loss):
    """A loss whose line search is one Newton step per leaf: γ = −Σ w g / Σ w h."""

    _stage: tuple[FloatArray, FloatArray, tuple[FloatArray, FloatArray]] | None = None

    def hessian(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        """d²L/dF² (the diagonal for multinomial), same shape as ``raw``."""
        raise NotImplementedError

    def derivatives(self, y: FloatArray, raw: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The gradient and the hessian together (a loss may share work between them)."""
        return self.gradient(y, raw), self.hessian(y, raw)

    def prepare_stage(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> None:
        # Every tree of a stage sees the same F_{m−1}: the in-bag rows' derivatives are
        # taken once here, not once per tree (K trees each took the K-class softmax twice,
        # a third of a five-class fit). They serve leaf_values for these very arrays, which
        # the stage leaves unchanged until its trees are all grown.
        self._stage = (y, raw, self.derivatives(y, raw))

    def _derivatives_of(self, y: FloatArray, raw: FloatArray) -> tuple[FloatArray, FloatArray]:
        stage = self._stage
        if stage is not None and stage[0] is y and stage[1] is raw:
            return stage[2]
        return self.derivatives(y, raw)

    def leaf_values(
        self,
        y: FloatArray,
        raw: FloatArray,
        weights: FloatArray,
        leaves: IntArray,
        n_nodes: int,
        k: int,
    ) -> FloatArray:
        gradient, hessian = self._derivatives_of(y, raw)
        g, h = gradient[:, k], hessian[:, k]
        numerator = -np.bincount(leaves, weights=weights * g, minlength=n_nodes)
        denominator = np.bincount(leaves, weights=weights * h, minlength=n_nodes)
        return self.step_factor * safe_divide(numerator, denominator)

    step_factor = 1.0


def _sigmoid(x: FloatArray) -> FloatArray:
    # exp of a non-positive number only, so large |x| never overflows: 1 / (1 + e) where
    # x >= 0, e / (1 + e) elsewhere, as one division of the chosen numerator (the same
    # IEEE operations, so the same bits) into arrays made once, not six of the rows' size.
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    numerator = np.where(x >= 0, 1.0, e)
    np.add(e, 1.0, out=e)
    return np.divide(numerator, e, out=numerator)


def _logit(p: float) -> float:
    p = min(max(p, PROBA_EPS), 1 - PROBA_EPS)
    return float(np.log(p / (1 - p)))


class BinomialDeviance(NewtonLoss):
    """Log loss of two classes, p = σ(F): L = log(1 + e^F) − yF; F0 = logit(ȳ)."""

    name = "log_loss"
    is_classification = True
    report_factor = 2.0

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        f = raw[:, 0]
        return np.logaddexp(0.0, f) - y * f

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        p = _sigmoid(raw[:, 0])
        return np.subtract(p, y, out=p)[:, None]

    def hessian(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        p = _sigmoid(raw[:, 0])
        return (p * (1 - p))[:, None]

    def derivatives(self, y: FloatArray, raw: FloatArray) -> tuple[FloatArray, FloatArray]:
        # One sigmoid for both (a stage's largest temporaries), then each in place.
        p = _sigmoid(raw[:, 0])
        hessian = 1 - p
        hessian *= p  # p (1 − p): multiplication commutes bit for bit
        return np.subtract(p, y, out=p)[:, None], hessian[:, None]

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        return np.array([_logit(float(np.average(y, weights=weights)))])


class MultinomialDeviance(NewtonLoss):
    """Cross-entropy of K classes with p = softmax(F) (Friedman 2001, Algorithm 6).

    F0_k = log p̄_k − mean_j log p̄_j (the prior, symmetric); each leaf takes Friedman's
    Newton step (K − 1)/K · Σ w (y_k − p_k) / Σ w p_k (1 − p_k).
    """

    name = "log_loss"
    is_classification = True

    def __init__(self, n_classes: int) -> None:
        self.n_trees = n_classes
        self.step_factor = (n_classes - 1) / n_classes

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        top = raw.max(axis=1)
        log_norm = top + np.log(np.exp(raw - top[:, None]).sum(axis=1))
        return log_norm - (y * raw).sum(axis=1)

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return softmax(raw) - y

    def hessian(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        p = softmax(raw)
        return p * (1 - p)

    def derivatives(self, y: FloatArray, raw: FloatArray) -> tuple[FloatArray, FloatArray]:
        p = softmax(raw)  # once for both
        return p - y, p * (1 - p)

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        prior = np.average(y, axis=0, weights=weights)
        log_prior = np.log(np.clip(prior, PROBA_EPS, 1 - PROBA_EPS))
        return log_prior - log_prior.mean()


class ExponentialLoss(NewtonLoss):
    """AdaBoost's loss L = e^{−ỹF} with ỹ = 2y − 1 ∈ {−1, 1}; F0 = ½ logit(ȳ).

    F estimates half the log-odds, so P(y = 1 | x) = e^{2F} / (1 + e^{2F}) (Friedman, Hastie
    and Tibshirani 2000, Lemma 1).
    """

    name = "exponential"
    is_classification = True

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return np.exp(-(2 * y - 1) * raw[:, 0])

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        sign = 2 * y - 1
        return (-sign * np.exp(-sign * raw[:, 0]))[:, None]

    def hessian(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return np.exp(-(2 * y - 1) * raw[:, 0])[:, None]

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        return np.array([0.5 * _logit(float(np.average(y, weights=weights)))])


class PoissonDeviance(NewtonLoss):
    """Poisson deviance with a log link, μ = e^F: L = e^F − yF; F0 = log ȳ."""

    name = "poisson"

    def pointwise(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return np.exp(raw[:, 0]) - y * raw[:, 0]

    def gradient(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return (np.exp(raw[:, 0]) - y)[:, None]

    def hessian(self, y: FloatArray, raw: FloatArray) -> FloatArray:
        return np.exp(raw[:, 0])[:, None]

    def report(self, y: FloatArray, raw: FloatArray, weights: FloatArray) -> float:
        """Mean Poisson deviance 2 (y log(y/μ) − y + μ), which is 0 for a perfect fit."""
        mu = np.exp(raw[:, 0])
        y_log_y = y * np.log(np.where(y > 0, y, 1.0))
        deviance = 2.0 * (y_log_y - y * raw[:, 0] - y + mu)
        return float(np.average(deviance, weights=weights))

    def init_raw(self, y: FloatArray, weights: FloatArray) -> FloatArray:
        return np.array([np.log(max(float(np.average(y, weights=weights)), PROBA_EPS))])


def softmax(raw: FloatArray) -> FloatArray:
    """Row-wise softmax of raw scores, shape (n_samples, K)."""
    shifted = np.exp(raw - raw.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def get_loss(name: str, *, n_classes: int = 0, alpha: float = 0.9) -> Loss:
    """The loss called ``name``; ``n_classes`` > 2 turns log_loss into multinomial deviance."""
    if name == "squared_error":
        return SquaredError()
    if name == "absolute_error":
        return AbsoluteError()
    if name == "huber":
        return HuberLoss(alpha)
    if name == "quantile":
        return QuantileLoss(alpha)
    if name == "poisson":
        return PoissonDeviance()
    if name == "log_loss":
        return MultinomialDeviance(n_classes) if n_classes > 2 else BinomialDeviance()
    if name == "exponential":
        if n_classes > 2:
            raise ValueError(
                "loss='exponential' is only suitable for a binary classification problem, "
                f"got n_classes={n_classes}; use loss='log_loss' instead."
            )
        return ExponentialLoss()
    raise ValueError(f"Unknown loss {name!r}.")
