"""AdaBoost of decision trees: SAMME for classification, AdaBoost.R2 for regression.

SAMME (Zhu et al. 2009): each member votes α_m for the class it predicts, so each leaf of
member m is one weight α_m on the target of its class (its most probable class, flipped for a
member whose vote the fit reversed); the votes are summed per class, the label is their first
argmax, and the probabilities are ``softmax(c · votes)`` (c = 2 for ``alpha="half"``).

AdaBoost.R2 (Drucker 1997) predicts the α-weighted median of its members: per row, the
smallest prediction whose cumulative weight, in ascending order of prediction, reaches half
the total (``engine.boosting``'s ``weighted_median``). Every step has an exact ONNX twin: the
members' predictions are one target each of a ``TreeEnsemble``; ``TopK`` (ascending, ties by
lower index, as the engine's stable ``argsort``) orders them; ``Gather`` and ``CumSum`` give the
same cumulative weights, added in the same order; ``GreaterOrEqual`` against half the last one,
and ``ArgMax`` takes the first position that reaches it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto, helper

from service.export.graph import Answer, Graph
from service.export.trees import TreeEnsemble, model_categories


class NotTreeMembers(ValueError):
    """An AdaBoost model whose members are not decision trees."""


def _tree_of(member: Any) -> Any:
    tree = getattr(member, "tree_", None)
    if tree is None:
        raise NotTreeMembers(
            "AdaBoost exports only when its members are decision trees; these are "
            f"{type(member).__name__} models"
        )
    return tree


def export_adaboost_samme(graph: Graph, estimator: Any) -> Answer:
    n_classes = int(estimator.n_classes_)
    ensemble = TreeEnsemble(n_targets=n_classes, categorical=model_categories(graph))
    reversed_ = np.asarray(estimator.estimator_reversed_, dtype=bool)
    for member, alpha, flip in zip(
        estimator.estimators_, estimator.estimator_weights_, reversed_, strict=True
    ):
        tree = _tree_of(member)
        values = np.asarray(tree.values, dtype=np.float64)
        voted = np.asarray(member.classes_, dtype=np.int64)[values.argmax(axis=1)]
        if flip:
            voted = 1 - voted
        weights = np.full((values.shape[0], 1), float(alpha))
        ensemble.add([tree], member.bin_mapper_, [weights], [voted[:, None]])
    votes = ensemble.output(graph, graph.X, "votes")
    label = graph.add("ArgMax", [votes], "argmax", axis=1, keepdims=0)
    to_full = 2.0 if getattr(estimator, "alpha", "half") == "half" else 1.0
    scaled = graph.add("Mul", [votes, graph.constant("to_full", to_full)])
    return Answer(proba=graph.softmax(scaled), label_index=label)


def export_adaboost_r2(graph: Graph, estimator: Any) -> Answer:
    members = list(estimator.estimators_)
    ensemble = TreeEnsemble(n_targets=len(members), categorical=model_categories(graph))
    for m, member in enumerate(members):
        tree = _tree_of(member)
        weights = np.asarray(tree.values, dtype=np.float64)[:, :1]
        ensemble.add([tree], member.bin_mapper_, [weights], [np.full(weights.shape, m)])
    predictions = ensemble.output(graph, graph.X, "member_predictions")
    count = graph.constant("n_members", [len(members)], np.int64)
    ordered = graph.name("ordered")
    order = graph.name("order")
    topk = graph.new_node("TopK", [predictions, count], [ordered, order])
    topk.attribute.extend(
        [
            helper.make_attribute("axis", 1),
            helper.make_attribute("largest", 0),
            helper.make_attribute("sorted", 1),
        ]
    )
    alphas = graph.constant("alphas", np.asarray(estimator.estimator_weights_, np.float64))
    sorted_alphas = graph.add("Gather", [alphas, order], "sorted_alphas", axis=0)
    cumulative = graph.add(
        "CumSum", [sorted_alphas, graph.constant("axis", 1, np.int64)], "cumulative"
    )
    last = graph.column_slice(cumulative, len(members) - 1, len(members))
    half = graph.add("Mul", [graph.constant("half", 0.5), last], "half_total")
    reached = graph.add("GreaterOrEqual", [cumulative, half])
    as_number = graph.add("Cast", [reached], to=TensorProto.INT32)
    first = graph.add("ArgMax", [as_number], "first_reached", axis=1, keepdims=1)
    median = graph.add("GatherElements", [ordered, first], "median", axis=1)
    return Answer(prediction=median)
