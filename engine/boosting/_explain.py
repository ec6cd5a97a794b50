"""TreeSHAP descriptions of the boosted models: their raw score as a weighted sum of trees.

Contributions plus bias then equal ``decision_function`` (the additive score), for one
output (regression, binary) or per class (multiclass, one tree per class and round).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._validation import check_X
from engine.base import check_is_fitted
from engine.boosting._gradient_base import BaseGradientBoosting
from engine.boosting._xgboost import BaseXGBoost
from engine.shap import ExplainedTrees, explained_trees


@explained_trees.register
def _explain_gradient_boosting(model: BaseGradientBoosting) -> ExplainedTrees:
    check_is_fitted(model, "estimators_")
    n_outputs = model.n_trees_per_iteration_
    trees = [tree for stage in model.estimators_ for tree in stage]
    return ExplainedTrees(
        trees=trees,
        weights=np.full(len(trees), float(model.learning_rate)),
        base=np.atleast_1d(np.asarray(model.init_, dtype=np.float64)),
        prepare=model._prepare,
        output=0 if n_outputs == 1 else None,
        tree_outputs=[k for _ in model.estimators_ for k in range(n_outputs)],
    )


@explained_trees.register
def _explain_xgboost(model: BaseXGBoost) -> ExplainedTrees:
    check_is_fitted(model, "estimators_")
    n_outputs = model.base_score_.size
    trees = [tree for stage in model.estimators_ for tree in stage]

    def prepare(X: Any) -> Any:
        return model.bin_mapper_.encode_for_prediction(check_X(X, n_features=model.n_features_in_))

    return ExplainedTrees(
        trees=trees,
        weights=np.ones(len(trees)),  # the learning rate is already in the leaf values
        base=model.base_score_,
        prepare=prepare,
        output=0 if n_outputs == 1 else None,
        tree_outputs=[k for _ in model.estimators_ for k in range(n_outputs)],
    )
