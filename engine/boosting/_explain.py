"""TreeSHAP descriptions of the boosted models: their raw score as a weighted sum of trees.

Contributions plus bias then equal ``decision_function`` (the additive score), for one
output (regression, binary) or per class (multiclass, one tree per class and round).

AdaBoost over decision trees is additive too once each member is seen as a tree whose leaves
hold the member's *vote*: its class prediction at that leaf (after any reversal) coded as
``decision_function`` codes it — ±1 for two classes, SAMME's ``g_k = 1`` for the predicted
class and ``−1/(K−1)`` for the others beyond — weighted by α_m. AdaBoost.R2 (a weighted
median of the members) and RegionBoost (input-dependent member weights) are not sums of
per-tree functions of the leaves, so TreeSHAP refuses them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_X
from engine.base import check_is_fitted
from engine.boosting._adaboost import AdaBoostClassifier
from engine.boosting._adaboost_r2 import AdaBoostRegressor
from engine.boosting._arcing import RegionBoostClassifier
from engine.boosting._gradient_base import BaseGradientBoosting
from engine.boosting._xgboost import BaseXGBoost
from engine.shap import ExplainedTrees, explained_trees
from engine.tree._classes import DecisionTreeClassifier
from engine.tree._tree import Tree


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


def _vote_tree(member: DecisionTreeClassifier, reversed_: bool, n_classes: int) -> Tree:
    """The member's tree with every node's value replaced by the member's coded vote there.

    The member predicts ``classes_[argmax(values[leaf])]`` (an encoded class index of the
    ensemble); two classes code class 1 as +1 and class 0 as −1, K classes give the
    predicted class 1 and the others −1/(K−1).
    """
    tree = member.tree_
    predicted = np.asarray(member.classes_, dtype=np.intp)[tree.values.argmax(axis=1)]
    if reversed_:
        predicted = 1 - predicted
    values: NDArray[np.float64]
    if n_classes == 2:
        values = np.where(predicted == 1, 1.0, -1.0)[:, None]
    else:
        values = np.full((tree.node_count, n_classes), -1.0 / (n_classes - 1))
        values[np.arange(tree.node_count), predicted] = 1.0
    return Tree(tree.nodes, values, tree.category_bitsets, tree.n_features)


def _shared_encoding(members: list[DecisionTreeClassifier]) -> None:
    """Refuse members that encode categorical columns differently (one X feeds every tree)."""
    first = members[0].bin_mapper_
    for member in members[1:]:
        mapper = member.bin_mapper_
        same = np.array_equal(mapper.is_categorical_, first.is_categorical_) and (
            not first.is_categorical_.any()
            or np.array_equal(mapper.categories_, first.categories_, equal_nan=True)
        )
        if not same:
            raise ValueError(
                "TreeSHAP needs AdaBoost's trees to share one categorical encoding; these "
                "members saw different categories (e.g. a weak learner that bins its own "
                "rows, such as a tree subclass, under boosting_mode='resample')."
            )


@explained_trees.register
def _explain_adaboost(model: AdaBoostClassifier) -> ExplainedTrees:
    check_is_fitted(model, "estimators_")
    members = list(model.estimators_)
    others = sorted(
        {type(m).__name__ for m in members if not isinstance(m, DecisionTreeClassifier)}
    )
    if others:
        raise ValueError(
            "TreeSHAP explains AdaBoost over decision trees; this model's members are "
            f"{', '.join(others)}."
        )
    _shared_encoding(members)
    n_classes = int(model.n_classes_)
    trees = [
        _vote_tree(member, bool(flipped), n_classes)
        for member, flipped in zip(members, model.estimator_reversed_, strict=True)
    ]

    def prepare(X: Any) -> Any:
        return members[0].bin_mapper_.encode_for_prediction(model._prepare(X))

    return ExplainedTrees(
        trees=trees,
        weights=np.asarray(model.estimator_weights_, dtype=np.float64),
        base=np.zeros(1 if n_classes == 2 else n_classes),
        prepare=prepare,
        output=0 if n_classes == 2 else None,
    )


@explained_trees.register
def _refuse_adaboost_r2(model: AdaBoostRegressor) -> ExplainedTrees:
    raise ValueError(
        "TreeSHAP cannot explain AdaBoostRegressor: AdaBoost.R2 predicts the weighted median "
        "of its members, which is not a sum of per-tree outputs."
    )


@explained_trees.register
def _refuse_region_boost(model: RegionBoostClassifier) -> ExplainedTrees:
    raise ValueError(
        "TreeSHAP cannot explain RegionBoostClassifier: its members' vote weights depend on "
        "the input (their accuracy on its nearest neighbours), so the score is not a sum of "
        "per-tree outputs."
    )
