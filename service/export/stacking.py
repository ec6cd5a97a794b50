"""Stacking over exportable members, combined by a linear final estimator.

``engine.combine``'s stacking predicts from meta-features built by ``_stack``: each refitted
member's output side by side (``member_output``: ``predict_proba`` over all K class codes, a
class the member never saw a column of zeros, or ``predict``, the class code or the regression
value, as one column); with two classes a member's first probability column is dropped; with
``passthrough`` the feature matrix follows. The final estimator, fitted on those columns, is a
linear model in its dense encoding (the service builds it with no categorical columns, so the
passed-through category codes are numeric columns there too), whose graph
``service.export.linear`` builds on the meta-features instead of on the features.

Every column is a member's exact graph (or a 0/1 placement of it, or a code looked up by an
index), so the meta-features equal the engine's up to the members' own rounding, and the final
linear model adds only a matrix product's. Members stacked by ``decision_function`` (a
perceptron's scores) and final estimators other than the linear models are refused (422).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto

from service.export.graph import Answer, Graph
from service.export.linear import export_linear
from service.export.voting import over_all_classes

MemberExporter = Callable[[Graph, Any], Answer]
FINAL_CLASSES = ("EncodedClassifier", "EncodedRegressor")


class NotStackable(ValueError):
    """A stacking model with a part or an option that has no exact graph."""


def export_stacking(graph: Graph, estimator: Any, member: MemberExporter) -> Answer:
    final = estimator.final_estimator_
    if type(final).__name__ not in FINAL_CLASSES:
        raise NotStackable(f"its final estimator {type(final).__name__} does not export")
    classification = graph.model.task == "classification"
    n_classes = int(np.asarray(estimator.classes_).size) if classification else 0
    columns = []
    for m, method in zip(estimator.estimators_, estimator.stack_method_, strict=True):
        answer = member(graph, m)
        if not classification:
            assert answer.prediction is not None
            columns.append(answer.prediction)
        elif method == "predict_proba":
            assert answer.proba is not None
            seen = np.asarray(m.classes_).astype(np.int64)
            proba = over_all_classes(graph, answer.proba, seen, n_classes)
            columns.append(graph.column_slice(proba, 1, 2) if n_classes == 2 else proba)
        elif method == "predict":
            columns.append(_code_column(graph, m, answer))
        else:
            raise NotStackable(f"its member {type(m).__name__} is stacked by {method}")
    if estimator.passthrough:
        columns.append(graph.X)
    meta = columns[0] if len(columns) == 1 else graph.add("Concat", columns, "meta", axis=1)
    if classification and not np.array_equal(
        np.asarray(final.classes_).astype(np.int64), np.arange(n_classes)
    ):
        raise NotStackable("its final estimator did not see every class")
    # The final estimator's classes are the class codes, so its label index is the code,
    # the stacking model's class at that index (``classes_[final.predict(meta)]``).
    return export_linear(graph, final, meta)


def _code_column(graph: Graph, m: Any, answer: Answer) -> str:
    """A member's ``predict`` as ``member_output`` gives it: its class code, ``[N, 1]`` double."""
    index = answer.label_index
    if index is None:
        assert answer.proba is not None
        index = graph.add("ArgMax", [answer.proba], "argmax", axis=1, keepdims=0)
    seen = np.asarray(m.classes_).astype(np.int64)
    codes = graph.add("Gather", [graph.constant("codes", seen, np.int64), index], axis=0)
    column = graph.add("Unsqueeze", [codes, graph.constant("axis", [1], np.int64)])
    return graph.add("Cast", [column], "code", to=TensorProto.DOUBLE)
