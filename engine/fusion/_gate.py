"""The gate of the mixture of experts and the pieces of EM around it.

The gate is a softmax over the inputs, linear in ``x``: ``g(x) = softmax(W x + b)``, an engine
:class:`~engine.linear.LogisticRegression` over the expert indices. Its M-step fits soft
targets (responsibilities) by weighting K copies of the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.linear import LogisticRegression

__all__ = [
    "fit_gate",
    "gate_log_proba",
    "initial_responsibilities",
    "l2_penalty",
    "logsumexp",
    "standardise",
]

_INIT_SCALE = 3.0  # logit spread of the random initial gate across the standardised data


def logsumexp(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log Σ_k exp(values[:, k])`` per row, without overflow; shape (n_samples,)."""
    top = values.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return top[:, 0] + np.log(np.exp(values - top).sum(axis=1))


def standardise(X: NDArray[np.float64], weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """Columns centred and scaled by their weighted mean and standard deviation."""
    mean = weights @ X / weights.sum()
    scale = np.sqrt(weights @ (X - mean) ** 2 / weights.sum())
    return (X - mean) / np.where(scale > 0, scale, 1.0)


def initial_responsibilities(
    standardised: NDArray[np.float64], n_experts: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Responsibilities (n_samples, K) from a random linear gate on standardised inputs."""
    n_features = standardised.shape[1]
    directions = rng.normal(size=(n_features, n_experts)) * (_INIT_SCALE / np.sqrt(n_features))
    logits = standardised @ directions
    return np.exp(logits - logsumexp(logits)[:, None])


def fit_gate(
    X: NDArray[np.float64],
    responsibilities: NDArray[np.float64],
    weights: NDArray[np.float64],
    C: float,
) -> LogisticRegression:
    """The gate's M-step: multinomial logistic regression on soft targets.

    ``Σ_i w_i Σ_k h_ik log g_k(x_i)`` is the weighted log-likelihood of K copies of the rows,
    copy k labelled k with weight ``w_i h_ik``, so the engine's logistic regression solves it.
    """
    n_samples, n_experts = responsibilities.shape
    gate = LogisticRegression(C=C)
    if n_experts == 1:
        return gate.fit(X, np.zeros(n_samples, dtype=np.int64))
    copies = np.tile(X, (n_experts, 1))
    labels = np.repeat(np.arange(n_experts), n_samples)
    copy_weights = (weights[:, None] * responsibilities).T.ravel()
    return gate.fit(copies, labels, sample_weight=copy_weights)


def gate_log_proba(gate: LogisticRegression, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log g_k(x)``, shape (n_samples, K)."""
    return gate.predict_log_proba(X)


def l2_penalty(model: Any) -> float:
    """The penalty an engine logistic regression's fit subtracts from its log-likelihood."""
    if isinstance(model, LogisticRegression):
        return 0.5 * float((model.coef_**2).sum()) / float(model.C)
    return 0.0
