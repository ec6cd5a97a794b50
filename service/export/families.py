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
from service.export.graph import Answer, Graph
from service.export.linear import NotLinear, export_linear
from service.export.stacking import NotStackable, export_stacking
from service.export.voting import export_voting
from service.models.cache import LoadedModel

Exporter = Callable[[Graph, Any], Answer]


def _adaboost(graph: Graph, estimator: Any) -> Answer:
    if graph.model.task == "classification":
        return export_adaboost_samme(graph, estimator)
    return export_adaboost_r2(graph, estimator)


def _member(graph: Graph, estimator: Any) -> Answer:
    """A combiner's member, exported by its estimator class (the service's members are the
    catalog's estimators, linear ones inside their dense encoding)."""
    exporter = MEMBER_EXPORTERS.get(type(estimator).__name__)
    if exporter is None:
        raise NotExportableMember(f"its member {type(estimator).__name__} does not export")
    return exporter(graph, estimator)


def _voting(graph: Graph, estimator: Any) -> Answer:
    return export_voting(graph, estimator, _member)


def _stacking(graph: Graph, estimator: Any) -> Answer:
    return export_stacking(graph, estimator, _member)


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
        "voting": _voting,
        "stacking": _stacking,
    }
)
_BY_CLASS: dict[str, Exporter] = {
    "DecisionTree": export_decision_tree,
    "RandomForest": export_forest,
    "ExtraTrees": export_forest,
    "Bagging": export_forest,
    "AdaBoost": _adaboost,
    "GradientBoosting": export_gradient_boosting,
    "XGBoost": export_xgboost,
    "Encoded": export_linear,
    "Voting": _voting,
    "Stacking": _stacking,
}
MEMBER_EXPORTERS: Mapping[str, Exporter] = MappingProxyType(
    {
        f"{family}{kind}": exporter
        for family, exporter in _BY_CLASS.items()
        for kind in ("Classifier", "Regressor")
    }
)
EXPORTABLE_METHODS = tuple(EXPORTERS)


class NotExportableMember(ValueError):
    """A combiner whose member has no exact ONNX form."""


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
    estimator = model.estimator
    try:
        answer = exporter(graph, estimator)
    except (NotTrees, NotTreeMembers, NotLinear, NotExportableMember, NotStackable) as error:
        return _fail(model, str(error))
    if model.task == "classification":
        graph.classifier_outputs(answer.proba, estimator.classes_, answer.label_index)
    else:
        assert answer.prediction is not None
        graph.regressor_output(answer.prediction)
    exported = graph.to_model(
        f"Coppice model {model.id}: {model.method} {model.task} of '{model.target}'."
    )
    onnx.checker.check_model(exported)
    return exported


def _fail(model: LoadedModel, why: str) -> onnx.ModelProto:
    raise _refuse(model, why)
