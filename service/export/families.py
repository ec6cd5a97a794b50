"""Which methods export, and the one entry point: a loaded model to ONNX bytes.

A method exports when ONNX reproduces its answers exactly (see docs/export.md); any other is
refused with a 422 that lists the methods that export, so a caller can pick one and retrain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import onnx

from service.errors import InvalidInput
from service.export.adaboost import NotTreeMembers, export_adaboost_r2, export_adaboost_samme
from service.export.boosting import export_gradient_boosting, export_xgboost
from service.export.forests import NotTrees, export_decision_tree, export_forest
from service.export.graph import Graph
from service.export.linear import NotLinear, export_linear
from service.models.cache import LoadedModel

Exporter = Callable[[Graph, Any], None]


def _adaboost(graph: Graph, estimator: Any) -> None:
    if graph.model.task == "classification":
        export_adaboost_samme(graph, estimator)
    else:
        export_adaboost_r2(graph, estimator)


EXPORTERS: Mapping[str, Exporter] = MappingProxyType(
    {
        "decision_tree": export_decision_tree,
        "bagging": export_forest,
        "random_forest": export_forest,
        "extra_trees": export_forest,
        "adaboost": _adaboost,
        "gradient_boosting": export_gradient_boosting,
        "xgboost": export_xgboost,
        "logistic_regression": export_linear,
        "linear_regression": export_linear,
        "ridge": export_linear,
        "perceptron": export_linear,
    }
)
EXPORTABLE_METHODS = tuple(EXPORTERS)


class NotExportable(InvalidInput):
    """The model's method (or its members) has no exact ONNX form."""

    type = "urn:coppice:problem:not-exportable"

    @property
    def title(self) -> str:
        return "Model not exportable"


def _refuse(model: LoadedModel, why: str) -> NotExportable:
    return NotExportable(
        f"Model '{model.id}' ({model.method}) cannot be exported: {why}. Methods that export: "
        + ", ".join(EXPORTABLE_METHODS)
        + ".",
        errors=[{"loc": ["path", "model_id"], "msg": f"method '{model.method}' does not export"}],
    )


def to_onnx(model: LoadedModel) -> onnx.ModelProto:
    """The model as an ONNX graph whose answers equal ``/v1`` predict's (checked by
    ``onnx.checker``); ``NotExportable`` when there is no exact one."""
    exporter = EXPORTERS.get(model.method)
    if exporter is None:
        return _fail(model, "its method has no exact ONNX form")
    graph = Graph(model)
    try:
        exporter(graph, model.estimator)
    except (NotTrees, NotTreeMembers, NotLinear) as error:
        return _fail(model, str(error))
    exported = graph.to_model(
        f"Coppice model {model.id}: {model.method} {model.task} of '{model.target}'."
    )
    onnx.checker.check_model(exported)
    return exported


def _fail(model: LoadedModel, why: str) -> onnx.ModelProto:
    raise _refuse(model, why)
