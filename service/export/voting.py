"""Voting over exportable members: soft and hard votes of classifiers, averaged regressors.

``VotingClassifier`` fits its members on class codes 0 … K−1; a member's probabilities are over
its own ``classes_`` (codes), placed among the K classes by a 0/1 matrix (exact: a column is
one value times 1 plus zeros), as ``engine.combine``'s ``member_output`` places them. Soft
voting is ``Σ_m share_m · p_m`` with ``share = weights_ / Σ weights_``; hard voting adds
``share_m`` to the class each member predicts (a one-hot of its label); the label is the first
argmax of either. ``VotingRegressor`` is ``[ŷ_1 … ŷ_M] · share``. The engine sums members
with ``einsum``/a matrix product, the graph one member after another: equal up to rounding
(~1e-16 relative), and a tie between classes stays a tie when the shares are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto

from service.export.graph import Answer, Graph

MemberExporter = Callable[[Graph, Any], Answer]


def export_voting(graph: Graph, estimator: Any, member: MemberExporter) -> Answer:
    weights = np.asarray(estimator.weights_, dtype=np.float64)
    share = weights / weights.sum()
    members = list(estimator.estimators_)
    if graph.model.task == "regression":
        columns = [_prediction(member(graph, m)) for m in members]
        stacked = columns[0] if len(columns) == 1 else graph.add("Concat", columns, axis=1)
        weights_column = graph.constant("shares", share.reshape(-1, 1))
        return Answer(prediction=graph.add("MatMul", [stacked, weights_column], "vote"))
    n_classes = int(np.asarray(estimator.classes_).size)
    soft = getattr(estimator, "voting", "hard") == "soft"
    total: str | None = None
    for m, weight in zip(members, share, strict=True):
        answer = member(graph, m)
        seen = np.asarray(m.classes_).astype(np.int64)
        if soft:
            assert answer.proba is not None
            part = over_all_classes(graph, answer.proba, seen, n_classes)
        else:
            index = answer.label_index
            if index is None:
                assert answer.proba is not None
                index = graph.add("ArgMax", [answer.proba], "argmax", axis=1, keepdims=0)
            codes = graph.add("Gather", [graph.constant("codes", seen, np.int64), index], axis=0)
            column = graph.add("Unsqueeze", [codes, graph.constant("axis", [1], np.int64)])
            classes = graph.constant("classes", np.arange(n_classes).reshape(1, -1), np.int64)
            hit = graph.add("Equal", [column, classes], "voted")
            part = graph.add("Cast", [hit], "vote", to=TensorProto.DOUBLE)
        weighted = graph.add("Mul", [part, graph.constant("share", float(weight))])
        total = weighted if total is None else graph.add("Add", [total, weighted], "total")
    assert total is not None
    return Answer(proba=total)


def _prediction(answer: Answer) -> str:
    assert answer.prediction is not None
    return answer.prediction


def over_all_classes(graph: Graph, proba: str, seen: np.ndarray, n_classes: int) -> str:
    """A member's ``[N, len(seen)]`` probabilities over its class codes ``seen`` as
    ``[N, n_classes]``, a class it never saw a column of zeros (``member_output``'s rule)."""
    if np.array_equal(seen, np.arange(n_classes)):
        return proba
    place = np.zeros((seen.size, n_classes))
    place[np.arange(seen.size), seen] = 1.0
    return graph.add("MatMul", [proba, graph.constant("place", place)], "all_classes")
