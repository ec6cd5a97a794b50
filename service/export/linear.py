"""Linear models behind the service's dense encoding: logistic, linear, ridge, perceptron.

The service trains them wrapped in ``EncodedClassifier``/``EncodedRegressor``, whose fitted
``encoding_`` (``engine.preprocessing.DenseEncoding``) turns the feature matrix into the
learner's input: numeric columns with NaN replaced by the training median, a 0/1 column per
numeric column that had gaps in training, one 0/1 column per known category code (missing and
unseen codes are all zeros), then ``(x − mean) / scale``. The graph builds the same matrix
with ``Gather``/``IsNaN``/``Where``/``Equal`` and the same subtraction and division, then
``scores = Z · coefᵀ + intercept`` (``MatMul``, ``Add``).

Labels are the learner's own rule: for two classes the second when its score is positive
(``scores > 0``), else the first highest score; probabilities (logistic regression only; a
perceptron has none, as ``/v1`` says) are ``0.5 · (1 + tanh(0.5 · s))`` for two classes, as
the engine writes the logistic, or the softmax of the scores.

The matrix product sums in the runtime's order rather than NumPy's, so a score differs from
the engine's by rounding (~1e-16 of the terms' magnitude): well within 1e-9 relative for any
score not itself the near-cancellation of much larger terms.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto

from service.export.graph import Answer, Graph


class NotLinear(ValueError):
    """A dense-input model whose learner is not one of the linear models."""


LINEAR_LEARNERS = ("LogisticRegression", "Perceptron", "LinearRegression", "Ridge")


def export_linear(graph: Graph, estimator: Any, X: str | None = None) -> Answer:
    """The model on the graph's feature matrix, or on ``X`` (stacking's meta-features)."""
    learner = estimator.estimator_
    if type(learner).__name__ not in LINEAR_LEARNERS:
        raise NotLinear(f"{type(learner).__name__} is not a linear model")
    Z = _dense(graph, estimator.encoding_, graph.X if X is None else X)
    coef = np.asarray(learner.coef_, dtype=np.float64)
    if graph.model.task == "regression":
        product = graph.add("MatMul", [Z, graph.constant("coef", coef.reshape(-1, 1))])
        intercept = np.asarray(learner.intercept_, dtype=np.float64).reshape(1, 1)
        return Answer(
            prediction=graph.add("Add", [product, graph.constant("intercept", intercept)])
        )
    product = graph.add("MatMul", [Z, graph.constant("coef", coef.T)])
    intercept = np.asarray(learner.intercept_, dtype=np.float64).reshape(1, -1)
    scores = graph.add("Add", [product, graph.constant("intercept", intercept)], "scores")
    if coef.shape[0] == 1:  # two classes: one score, of the second
        positive = graph.add("Greater", [scores, graph.constant("zero", 0.0)])
        as_index = graph.add("Cast", [positive], to=TensorProto.INT64)
        label = graph.add("Squeeze", [as_index, graph.constant("axis", [1], np.int64)], "label")
    else:
        label = graph.add("ArgMax", [scores], "argmax", axis=1, keepdims=0)
    proba: str | None = None
    if hasattr(learner, "predict_proba"):
        if coef.shape[0] == 1:
            half = graph.constant("half", 0.5)
            tanh = graph.add("Tanh", [graph.add("Mul", [half, scores])])
            positive_p = graph.add(
                "Mul", [half, graph.add("Add", [graph.constant("one", 1.0), tanh])]
            )
            proba = graph.two_columns(positive_p)
        else:
            proba = graph.softmax(scores)
    return Answer(proba=proba, label_index=label)


def _dense(graph: Graph, encoding: Any, X: str) -> str:
    """``encoding.transform(X)`` as graph nodes; returns the ``[N, width]`` matrix."""
    blocks: list[str] = []
    numeric = np.asarray(encoding.numeric, dtype=np.int64)
    if numeric.size:
        values = graph.add("Gather", [X, graph.constant("numeric", numeric, np.int64)], axis=1)
        gaps = graph.add("IsNaN", [values])
        medians = graph.constant("medians", np.asarray(encoding.medians).reshape(1, -1))
        blocks.append(graph.add("Where", [gaps, medians, values], "filled"))
    indicators = np.asarray(encoding.indicators, dtype=np.int64)
    if indicators.size:
        flagged = graph.add(
            "Gather", [X, graph.constant("indicators", indicators, np.int64)], axis=1
        )
        flags = graph.add("IsNaN", [flagged])
        blocks.append(graph.add("Cast", [flags], "indicator", to=TensorProto.DOUBLE))
    for column, known in zip(encoding.categorical, encoding.categories, strict=True):
        known = np.asarray(known, dtype=np.float64)
        if not known.size:
            continue
        codes = graph.add("Gather", [X, graph.constant("column", [int(column)], np.int64)], axis=1)
        equal = graph.add("Equal", [codes, graph.constant("known", known.reshape(1, -1))])
        blocks.append(graph.add("Cast", [equal], "one_hot", to=TensorProto.DOUBLE))
    unscaled = blocks[0] if len(blocks) == 1 else graph.add("Concat", blocks, "unscaled", axis=1)
    means = graph.constant("means", np.asarray(encoding.means).reshape(1, -1))
    scales = graph.constant("scales", np.asarray(encoding.scales).reshape(1, -1))
    return graph.add("Div", [graph.add("Sub", [unscaled, means]), scales], "Z")
