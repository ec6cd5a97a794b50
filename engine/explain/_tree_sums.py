"""Every tree model as a weighted sum of trees: the one place TreeSHAP's descriptions register.

Single trees, forests, extra trees and bagging of trees average their trees' outputs
(class probabilities). The boosted models sum theirs into a raw score: contributions plus bias
then equal ``decision_function`` (the additive score), for one output (regression, binary) or
per class (multiclass, one tree per class and round). Arc-x4 votes unweighted, so its vote
shares are the mean of one tree per member whose leaves hold that member's one-hot vote.

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
from engine.boosting._arcing import ArcX4Classifier, RegionBoostClassifier
from engine.boosting._gradient_base import BaseGradientBoosting
from engine.boosting._xgboost import BaseXGBoost
from engine.ensemble._tree_ensemble import BaseTreeEnsemble
from engine.explain.treeshap.models import ExplainedTrees, contributions_of, explained_trees
from engine.tree._classes import BaseDecisionTree, DecisionTreeClassifier
from engine.tree._tree import Tree

__all__ = ["shared_encoding", "tree_contributions"]


def tree_contributions(model: Any, X: Any) -> tuple[NDArray[np.float64], Any]:
    """Exact path-dependent TreeSHAP contributions of a fitted tree model.

    Parameters
    ----------
    model : fitted DecisionTree*, RandomForest*, ExtraTrees*, Bagging* of trees (soft
        voting), gradient boosting, XGBoost, AdaBoost over decision trees (explaining
        ``decision_function``), Arc-x4 over decision trees, or any model registered with
        :func:`~engine.explain.treeshap.models.explained_trees`.
    X : array-like of shape (n_samples, n_features)
        Raw features, as given to ``predict``.

    Returns
    -------
    contributions : ndarray of float64
        ``(n_samples, n_features)`` for regression (explaining ``predict``) and binary
        classification (explaining ``predict_proba(X)[:, 1]``: the engine's classifiers
        average class probabilities, so the positive-class probability is the raw score);
        ``(n_samples, n_features, n_classes)`` for multiclass (explaining ``predict_proba``).
    bias : float or ndarray of float64 of shape (n_classes,)
        The expected output (cover-weighted over each tree): ``contributions.sum(axis=1) +
        bias`` equals the explained output.
    """
    return contributions_of(explained_trees(model), X)


def _explained_output(model: Any) -> int | None:
    """Binary classifiers explain the positive class; regressors their only output."""
    if not hasattr(model, "classes_"):
        return 0
    return 1 if len(model.classes_) == 2 else None


@explained_trees.register
def _explain_single_tree(model: BaseDecisionTree) -> ExplainedTrees:
    check_is_fitted(model, "tree_")
    tree = model.tree_
    return ExplainedTrees(
        trees=[tree],
        weights=np.ones(1),
        base=np.zeros(tree.values.shape[1]),
        prepare=model._prepare,
        output=_explained_output(model),
    )


@explained_trees.register
def _explain_tree_ensemble(model: BaseTreeEnsemble) -> ExplainedTrees:
    # Hard voting averages one-hot votes, a non-additive function of the leaf values.
    if getattr(model, "_classification", False) and model._hard_voting:
        raise ValueError("TreeSHAP cannot explain hard voting; use voting='soft'.")
    trees = model.trees_  # raises AttributeError for bagging of non-tree estimators
    n_outputs = trees[0].values.shape[1]
    return ExplainedTrees(
        trees=trees,
        weights=np.full(len(trees), 1.0 / len(trees)),
        base=np.zeros(n_outputs),
        prepare=model._prepare,
        output=_explained_output(model),
    )


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


def shared_encoding(members: list[DecisionTreeClassifier]) -> None:
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
    shared_encoding(members)
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


def _one_hot_vote_tree(member: DecisionTreeClassifier, n_classes: int) -> Tree:
    """The member's tree with every node's value replaced by its one-hot vote there."""
    tree = member.tree_
    predicted = np.asarray(member.classes_, dtype=np.intp)[tree.values.argmax(axis=1)]
    values = np.zeros((tree.node_count, n_classes))
    values[np.arange(tree.node_count), predicted] = 1.0
    return Tree(tree.nodes, values, tree.category_bitsets, tree.n_features)


@explained_trees.register
def _arc_x4_trees(model: ArcX4Classifier) -> ExplainedTrees:
    check_is_fitted(model, "estimators_")
    members = list(model.estimators_)
    if not all(isinstance(member, DecisionTreeClassifier) for member in members):
        raise ValueError("TreeSHAP explains Arc-x4 over decision trees only.")
    shared_encoding(members)
    n_classes = int(model.n_classes_)

    def prepare(X: Any) -> Any:
        X = check_X(X, n_features=model.n_features_in_, estimator=type(model).__name__)
        return members[0].bin_mapper_.encode_for_prediction(X)

    return ExplainedTrees(
        trees=[_one_hot_vote_tree(member, n_classes) for member in members],
        weights=np.full(len(members), 1.0 / len(members)),
        base=np.zeros(n_classes),
        prepare=prepare,
        output=1 if n_classes == 2 else None,
    )
