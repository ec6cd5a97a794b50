"""Gradient tree boosting: Friedman's gradient boosting and XGBoost-style boosting.

Gradient boosting: ``F_k = init_k + learning_rate · Σ_m tree_mk`` (``BaseGradientBoosting``),
XGBoost-style: ``F_k = base_score_k + Σ_m tree_mk`` (its leaves already carry the shrinkage).
One ``TreeEnsemble`` sums the trees of output k into target k; ``Mul`` and ``Add`` follow in
the engine's order. Probabilities: the logistic ``1/(1 + e^(−s·F))`` (s = 2 for gradient
boosting's exponential loss, which fits half the log-odds) as ``[1 − p, p]``, or the softmax
over K outputs; Poisson regressors predict ``e^F``. The initial score is an ``Add`` node, as
opset 5 of the operator dropped ``base_values`` (onnx/onnx#5874).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.export.graph import Answer, Graph
from service.export.trees import TreeEnsemble, model_categories


def _stage_sums(graph: Graph, estimator: Any) -> tuple[str, int]:
    """The ``[N, K]`` per-output sums of the trees of ``estimators_[m][k]``."""
    stages = list(estimator.estimators_)
    n_outputs = len(stages[0]) if stages else 1
    ensemble = TreeEnsemble(n_targets=n_outputs, categorical=model_categories(graph))
    trees = [tree for stage in stages for tree in stage]
    weights = [np.asarray(tree.values, dtype=np.float64)[:, :1] for tree in trees]
    targets = [np.full(w.shape, k % n_outputs) for k, w in enumerate(weights)]
    if trees:
        ensemble.add(trees, estimator.bin_mapper_, weights, targets)
    return ensemble.output(graph, graph.X), n_outputs


def export_gradient_boosting(graph: Graph, estimator: Any) -> Answer:
    sums, n_outputs = _stage_sums(graph, estimator)
    shrunk = graph.add(
        "Mul", [sums, graph.constant("learning_rate", float(estimator.learning_rate))]
    )
    init = np.atleast_1d(np.asarray(estimator.init_, dtype=np.float64)).reshape(1, n_outputs)
    raw = graph.add("Add", [graph.constant("init", init), shrunk], "raw")
    if graph.model.task == "classification":
        if n_outputs > 1:
            proba = graph.softmax(raw)
        else:
            scale = 2.0 if getattr(estimator, "loss", "") == "exponential" else 1.0
            proba = graph.two_columns(graph.logistic(raw, scale))
        return Answer(proba=proba)
    out = graph.add("Exp", [raw]) if getattr(estimator, "loss", "") == "poisson" else raw
    return Answer(prediction=out)


def export_xgboost(graph: Graph, estimator: Any) -> Answer:
    sums, n_outputs = _stage_sums(graph, estimator)
    base = np.asarray(estimator.base_score_, dtype=np.float64).reshape(1, -1)
    raw = graph.add("Add", [graph.constant("base_score", base), sums], "raw")
    if graph.model.task == "classification":
        proba = graph.softmax(raw) if n_outputs > 1 else graph.two_columns(graph.logistic(raw))
        return Answer(proba=proba)
    out = graph.add("Exp", [raw]) if estimator.objective_ == "count:poisson" else raw
    return Answer(prediction=out)
