"""Exact path-dependent TreeSHAP (Lundberg, Erion & Lee 2018): the public names, kept here.

The implementation lives in :mod:`engine.explain.treeshap` (one tree; the kernels and their
NumPy twin) and :mod:`engine.explain._tree_sums` (every model as a weighted sum of trees).
"""

from engine.explain._tree_sums import tree_contributions
from engine.explain.treeshap.models import (
    ExplainedTrees,
    explained_trees,
    tree_expected_value,
    tree_shap,
)

__all__ = [
    "ExplainedTrees",
    "explained_trees",
    "tree_contributions",
    "tree_expected_value",
    "tree_shap",
]
