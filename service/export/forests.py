"""Averaged trees: a decision tree, random forests, extra trees and bagging of trees.

Each predicts the mean of its trees' leaf values (class proportions, or the mean target), the
engine computing the sum over trees and then one division (``BaseTreeEnsemble``); the graph
does the same: one ``TreeEnsemble`` summing the leaves per class, then ``Div`` by the number of
trees. Hard-voting bagging averages one-hot votes instead, so each leaf's weight is the one-hot
of its most probable class, the first on ties, as ``argmax`` picks it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.export.graph import Answer, Graph
from service.export.trees import TreeEnsemble, model_categories


class NotTrees(ValueError):
    """The ensemble's members are not trees (bagging of another learner)."""


def export_decision_tree(graph: Graph, estimator: Any) -> Answer:
    return _averaged(graph, estimator, [estimator.tree_], estimator.bin_mapper_, hard=False)


def export_forest(graph: Graph, estimator: Any) -> Answer:
    """Random forests, extra trees and bagging whose members are trees."""
    members = list(estimator.members_)
    if not all(_is_tree(member) for member in members):
        raise NotTrees(
            "bagging exports only when its members are decision trees; these are "
            f"{type(getattr(members[0], 'estimator', members[0])).__name__} models"
        )
    hard = getattr(estimator, "voting", "soft") == "hard" and graph.model.task == "classification"
    return _averaged(graph, estimator, members, estimator.bin_mapper_, hard=hard)


def _is_tree(member: Any) -> bool:
    return all(hasattr(member, name) for name in ("nodes", "values", "category_bitsets"))


def _averaged(graph: Graph, estimator: Any, trees: list[Any], mapper: Any, *, hard: bool) -> Answer:
    classification = graph.model.task == "classification"
    n_targets = int(trees[0].values.shape[1])
    ensemble = TreeEnsemble(n_targets=n_targets, categorical=model_categories(graph))
    weights = []
    for tree in trees:
        values = np.asarray(tree.values, dtype=np.float64)
        if hard:
            votes = np.zeros_like(values)
            votes[np.arange(values.shape[0]), values.argmax(axis=1)] = 1.0
            values = votes
        weights.append(values)
    targets = [np.broadcast_to(np.arange(n_targets), w.shape) for w in weights]
    ensemble.add(trees, mapper, weights, targets)
    total = ensemble.output(graph, graph.X)
    mean = total
    if len(trees) > 1:
        mean = graph.add("Div", [total, graph.constant("n_trees", float(len(trees)))], "mean")
    return Answer(proba=mean) if classification else Answer(prediction=mean)
