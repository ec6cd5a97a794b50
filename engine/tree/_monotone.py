"""Monotone constraints on second-order trees, as XGBoost enforces them.

A constraint of +1 (−1) on feature f asks the model to be non-decreasing (non-increasing) in
f, all other features fixed. Every node carries bounds ``[lower, upper]`` on its leaf weight
(the root ``[−∞, ∞]``) and:

* a node's weight is its Newton weight ``w* = −T(G)/(H+λ)`` clipped to its bounds, and every
  score in the split search is the loss reduction *at the clipped weights*:
  ``−(G·w + ½(H+λ)·w² + α|w|)``, which equals ``½·T(G)²/(H+λ)`` when nothing is clipped;
* a split on a constrained feature is valid only when its children's (clipped) weights
  respect the direction: ``w_L ≤ w_R`` for +1, ``w_L ≥ w_R`` for −1;
* the children inherit the parent's bounds, and a split on a constrained feature cuts them at
  the midpoint ``m = (w_L + w_R)/2``: for +1 the left child's upper bound and the right
  child's lower bound become ``m`` (the reverse for −1).

Any leaf values within their bounds then make the tree monotone: below a split on a +1
feature every leaf of the left subtree is at most ``m`` and every leaf of the right subtree
at least ``m``. Splits on unconstrained features only pass the bounds down, which is what
keeps constraints of deeper splits consistent with those above them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import Newton

__all__ = ["UNBOUNDED", "MonotoneBounds", "children_scores", "score_given_weight"]

UNBOUNDED = np.array([-np.inf, np.inf])


def score_given_weight(
    criterion: Newton, channels: NDArray[np.float64], weight: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Loss reduction ``−(G·w + ½(H+λ)·w² + α|w|)`` of channels (..., 2) at weights (...)."""
    gradient, hessian = channels[..., 0], channels[..., 1]
    denominator = hessian + criterion.l2
    # Empty sides (H + λ = 0) have undefined weights; they score 0, as in score().
    with np.errstate(invalid="ignore", over="ignore"):
        reduction = -(gradient * weight + 0.5 * denominator * weight * weight)
        if criterion.l1 > 0:
            reduction -= criterion.l1 * np.abs(weight)
    return np.where(denominator > 0, reduction, 0.0)


def bounded_weight(
    criterion: Newton, channels: NDArray[np.float64], bounds: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Newton weights of channels (..., 2) clipped to bounds (..., 2) → (...)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = criterion.leaf_weight(channels)
    return np.clip(weight, bounds[..., 0], bounds[..., 1])


def children_scores(
    criterion: Newton,
    left: NDArray[np.float64],
    right: NDArray[np.float64],
    bounds: NDArray[np.float64],
    constraint: NDArray[np.int8],
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Summed scores of candidate children and whether they respect the constraint.

    Parameters
    ----------
    left, right : ndarray of float64, shape (..., 2)
        Channel sums ``(G, H)`` of each candidate's children.
    bounds : ndarray of float64, shape (..., 2)
        Bounds of the node each candidate splits (broadcast against the children).
    constraint : ndarray of int8, shape (...)
        Constraint of each candidate's feature: −1, 0 or +1.
    """
    w_left = bounded_weight(criterion, left, bounds)
    w_right = bounded_weight(criterion, right, bounds)
    total = score_given_weight(criterion, left, w_left) + score_given_weight(
        criterion, right, w_right
    )
    respects = ((constraint >= 0) | (w_left >= w_right)) & ((constraint <= 0) | (w_left <= w_right))
    return total, respects


class MonotoneBounds:
    """Bounds bookkeeping of one tree: node weights, impurities and children's bounds.

    Parameters
    ----------
    criterion : Newton
    constraints : ndarray of int8, shape (n_features,)
        −1, 0 or +1 per feature.
    """

    def __init__(self, criterion: Newton, constraints: NDArray[np.int8]) -> None:
        self.criterion = criterion
        self.constraints = constraints

    def node_statistics(
        self, totals: NDArray[np.float64], bounds: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Values (n, 1) and impurities (n,) of nodes with channel totals (n, 2).

        The impurity is ``−score/H`` at the clipped weight, so that the recorded impurity
        decrease of a split (``H·impurity`` of the parent minus the children's) is the
        constrained gain the split search maximised.
        """
        weight = bounded_weight(self.criterion, totals, bounds)
        cover = totals[:, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            impurity = np.where(
                cover > 0, -score_given_weight(self.criterion, totals, weight) / cover, 0.0
            )
        return weight[:, None], impurity

    def children(
        self,
        parent_bounds: NDArray[np.float64],
        parent_feature: NDArray[np.int64],
        child_totals: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Bounds (2P, 2) of the children (left, right per parent) of P split nodes.

        Parameters
        ----------
        parent_bounds : ndarray of float64, shape (P, 2)
        parent_feature : ndarray of int64, shape (P,)
        child_totals : ndarray of float64, shape (2P, 2)
            Channel totals of the children, the left child of parent p at row 2p.
        """
        inherited = np.repeat(parent_bounds, 2, axis=0)
        weight = bounded_weight(self.criterion, child_totals, inherited).reshape(-1, 2)
        middle = weight.mean(axis=1)
        constraint = self.constraints[parent_feature]
        bounds = inherited.reshape(-1, 2, 2).copy()  # (parent, side, lower/upper)
        increasing, decreasing = constraint > 0, constraint < 0
        bounds[increasing, 0, 1] = middle[increasing]
        bounds[increasing, 1, 0] = middle[increasing]
        bounds[decreasing, 0, 0] = middle[decreasing]
        bounds[decreasing, 1, 1] = middle[decreasing]
        return bounds.reshape(-1, 2)


def resolve_monotone_constraints(constraints: object, n_features: int) -> NDArray[np.int8] | None:
    """Validate ``monotone_constraints``: None when absent or all zero (nothing to enforce)."""
    if constraints is None:
        return None
    values = np.asarray(constraints)
    if values.ndim != 1 or values.size != n_features:
        raise ValueError(
            f"monotone_constraints must have one entry per feature ({n_features}); "
            f"got {values.size}."
        )
    if not np.isin(values, (-1, 0, 1)).all():
        raise ValueError("monotone_constraints entries must be -1, 0 or 1.")
    resolved = values.astype(np.int8)
    return resolved if resolved.any() else None
