"""Vote weights from member accuracies, and the exact accuracy of a vote (Kuncheva 2004, §4.3).

For ``T`` independent members of accuracies ``pᵢ`` voting between two classes, the weighted
majority vote is right exactly when the members that are right carry more weight than those
that are wrong. Its accuracy is therefore a sum over the 2^T right/wrong patterns ``s``::

    P = Σ_s  Πᵢ pᵢ^{sᵢ} (1 − pᵢ)^{1 − sᵢ} · [Σᵢ wᵢ sᵢ > Σᵢ wᵢ (1 − sᵢ)]

Kuncheva (*Combining Pattern Classifiers*, 2004, §4.3) works the example
``p = (0.9, 0.9, 0.6, 0.6, 0.6)``: the plain majority is right with probability ≈ 0.877 and the
weighted vote with weights (1/3, 1/3, 1/9, 1/9, 1/9) with ≈ 0.927. The weights that maximise
``P`` for independent members are ``wᵢ ∝ log(pᵢ / (1 − pᵢ))`` (ibid., after Shapley and
Grofman 1984); they give the same 0.927 on that example.
With ``K`` classes and errors spread over the wrong classes the optimum is
``wᵢ ∝ log((K − 1) pᵢ / (1 − pᵢ))``, which is the two-class formula for K = 2 and positive
exactly when a member beats chance (pᵢ > 1/K).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["log_odds_weights", "vote_accuracy"]

MAX_MEMBERS = 20  # 2^20 patterns: about a second and 170 MB; beyond that, simulate
ACCURACY_CLIP = 1e-3  # keeps the weight of a perfect (or hopeless) member finite


def _accuracies(accuracies: Any) -> NDArray[np.float64]:
    p = np.asarray(accuracies, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError("accuracies must be a non-empty 1-D sequence.")
    if not np.all((p >= 0.0) & (p <= 1.0)):
        raise ValueError("accuracies must lie in [0, 1].")
    return p


def vote_accuracy(accuracies: Any, weights: Any = None) -> float:
    """Exact accuracy of a (weighted) vote of independent members between two classes.

    Parameters
    ----------
    accuracies : sequence of float in [0, 1], length T (at most 20)
        Each member's probability of being right, independently of the others.
    weights : sequence of float of length T, optional
        Non-negative vote weights; None gives every member one vote.

    Returns
    -------
    float
        The probability that the members voting for the right class outweigh those voting for
        the wrong one. A tie (equal weight on both sides) counts one half, as a fair coin
        breaking it would.

    Examples
    --------
    >>> round(vote_accuracy([0.9, 0.9, 0.6, 0.6, 0.6]), 3)
    0.877
    >>> round(
    ...     vote_accuracy([0.9, 0.9, 0.6, 0.6, 0.6], log_odds_weights([0.9, 0.9, 0.6, 0.6, 0.6])), 3
    ... )
    0.927
    """
    p = _accuracies(accuracies)
    n = p.size
    if n > MAX_MEMBERS:
        raise ValueError(f"vote_accuracy enumerates 2^T patterns; T={n} exceeds {MAX_MEMBERS}.")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite, non-negative and one per member.")
    right = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)  # (2^T, T)
    probability = np.where(right, p, 1.0 - p).prod(axis=1)
    margin = right @ w - (~right) @ w
    # Weights summing to the same total along different paths may differ by rounding only.
    tie = np.abs(margin) <= 1e-12 * max(float(w.sum()), 1.0)
    outcome = np.where(tie, 0.5, (margin > 0).astype(np.float64))
    return float(probability @ outcome)


def log_odds_weights(accuracies: Any, n_classes: int = 2) -> NDArray[np.float64]:
    """Vote weights ``wᵢ = max(0, log((K − 1) pᵢ / (1 − pᵢ)))`` from member accuracies.

    Parameters
    ----------
    accuracies : sequence of float in [0, 1]
        Each member's accuracy (in the combiners: measured on held-out folds).
    n_classes : int
        ``K``; for two classes the weight is the log-odds ``log(pᵢ / (1 − pᵢ))``.

    Returns
    -------
    ndarray of shape (T,), float64
        Accuracies are first clipped to [0.001, 0.999] so that a perfect member gets a large
        but finite weight. A member no better than chance gets weight 0 rather than a
        negative one (it would vote *against* its own prediction). If no member beats chance,
        every member gets weight 1: a plain vote.
    """
    if n_classes < 2:
        return np.ones(_accuracies(accuracies).size)
    p = np.clip(_accuracies(accuracies), ACCURACY_CLIP, 1.0 - ACCURACY_CLIP)
    weights = np.maximum(np.log((n_classes - 1) * p / (1.0 - p)), 0.0)
    if not weights.any():
        return np.ones_like(weights)
    return weights
