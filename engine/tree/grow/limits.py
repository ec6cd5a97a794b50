"""The stopping rules and feature sampling of one tree, as the estimators resolve them."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GrowthLimits"]


@dataclass(frozen=True)
class GrowthLimits:
    """Stopping rules and feature sampling of one tree."""

    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    min_weight_leaf: float = 0.0
    min_impurity_decrease: float = 0.0
    max_features: int | None = None  # candidate features drawn per split; None = all
    # Candidate features drawn once per depth level (XGBoost's colsample_bylevel), from which
    # each split then draws its max_features; None = all.
    level_features: int | None = None
    max_leaf_nodes: int | None = None
    min_split_gain: float = 0.0  # γ: a Newton split must gain more than this
