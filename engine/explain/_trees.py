"""Tree models, through exact path-dependent TreeSHAP (:mod:`engine.explain.treeshap`).

Single trees, forests, extra trees and bagging of trees explain ``predict_proba`` (their trees
average class probabilities); gradient boosting, XGBoost and AdaBoost (SAMME over decision
trees, Lundberg, Erion & Lee 2018 applied to each member's vote) their decision function.
Arc-x4 votes unweighted, so its vote shares (``predict_proba``) are the mean of one tree per
member whose leaves hold that member's one-hot vote, registered here with TreeSHAP.

A member of these families that TreeSHAP cannot explain (hard voting, boosting of other
learners) is explained by sampling in the same space; bagging of other learners is exact when
its members are (:mod:`engine.explain._bagging`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.boosting._adaboost import AdaBoostClassifier
from engine.boosting._arcing import ArcX4Classifier
from engine.boosting._gradient_base import BaseGradientBoosting
from engine.boosting._xgboost_base import BaseXGBoost
from engine.ensemble._tree_ensemble import BaseTreeEnsemble
from engine.explain._explainer import (
    DECISION,
    Explainer,
    class_count,
    decision_output,
    describe,
    native_output,
)
from engine.explain._tree_sums import tree_contributions
from engine.explain.treeshap.models import explained_trees
from engine.tree._classes import BaseDecisionTree


def tree_explainer(model: Any, space: str, output: Any) -> Explainer:
    """TreeSHAP of ``model`` in ``space`` when it is made of trees; else sampled there."""
    try:
        explained_trees(model)
    except (TypeError, ValueError, AttributeError):
        return Explainer(space, output, background=getattr(model, "background_", None))

    def exact(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        contributions, bias = tree_contributions(model, X)
        phi = np.asarray(contributions, dtype=np.float64)
        return (phi[:, :, None] if phi.ndim == 2 else phi), np.atleast_1d(bias)

    return Explainer(space, output, exact, getattr(model, "background_", None))


@describe.register(BaseDecisionTree)
@describe.register(BaseTreeEnsemble)
@describe.register(ArcX4Classifier)
def _averaged_trees(model: Any) -> Explainer:
    return tree_explainer(model, *native_output(model))


@describe.register(BaseGradientBoosting)
@describe.register(BaseXGBoost)
@describe.register(AdaBoostClassifier)
def _boosted_trees(model: Any) -> Explainer:
    if class_count(model):
        return tree_explainer(model, DECISION, decision_output(model))
    return tree_explainer(model, *native_output(model))
