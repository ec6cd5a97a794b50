"""The method catalog and the JSON Schema of each method's params."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from service.methods.catalog import CATALOG, SERVICE_CONTROLLED, Task
from service.methods.schema import params_schema

EXPECTED = {
    "decision_tree": {"classification", "regression"},
    "bagging": {"classification", "regression"},
    "random_forest": {"classification", "regression"},
    "extra_trees": {"classification", "regression"},
    "adaboost": {"classification", "regression"},
    "arc_x4": {"classification"},
    "region_boost": {"classification"},
    "gradient_boosting": {"classification", "regression"},
    "xgboost": {"classification", "regression"},
    "logistic_regression": {"classification"},
    "linear_regression": {"regression"},
    "ridge": {"regression"},
    "perceptron": {"classification"},
    "k_neighbors": {"classification", "regression"},
    "gaussian_nb": {"classification"},
    "voting": {"classification", "regression"},
    "stacking": {"classification", "regression"},
    "grading": {"classification"},
    "naive_bayes_combiner": {"classification"},
    "bks_combiner": {"classification"},
    "wernecke_combiner": {"classification"},
    "dependence_tree_combiner": {"classification"},
    "svd_combiner": {"classification"},
    "mixture_of_experts": {"classification", "regression"},
}
KEYWORDS = {
    "$schema", "$defs", "$ref", "type", "enum", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "anyOf", "properties", "additionalProperties", "required", "default",
    "description", "items", "minItems", "x-tasks",
}  # fmt: skip
TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def _check_schema(schema: Any) -> None:
    """The schema uses only keywords of draft 2020-12 we know, each well-formed."""
    assert isinstance(schema, dict)
    assert set(schema) <= KEYWORDS, set(schema) - KEYWORDS
    kinds = schema.get("type")
    if kinds is not None:
        assert set([kinds] if isinstance(kinds, str) else kinds) <= TYPES
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            assert isinstance(schema[key], int | float) and math.isfinite(schema[key])
    for sub in schema.get("anyOf", []):
        _check_schema(sub)
    for sub in schema.get("properties", {}).values():
        _check_schema(sub)
    for sub in schema.get("$defs", {}).values():
        _check_schema(sub)
    if isinstance(schema.get("additionalProperties"), dict):
        _check_schema(schema["additionalProperties"])


def _valid(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """A small validator for the keywords the catalog uses."""
    if "$ref" in schema:
        return _valid(value, root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root)
    if "anyOf" in schema and not any(_valid(value, s, root) for s in schema["anyOf"]):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        checks = {
            "null": value is None,
            "boolean": isinstance(value, bool),
            "string": isinstance(value, str),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "object": isinstance(value, dict),
            "array": isinstance(value, list),
        }
        if not any(checks[k] for k in kinds):
            return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return False
        if "maximum" in schema and value > schema["maximum"]:
            return False
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return False
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return False
    if isinstance(value, dict):
        if any(name not in value for name in schema.get("required", [])):
            return False
        properties = schema.get("properties", {})
        for name, item in value.items():
            if name in properties:
                if not _valid(item, properties[name], root):
                    return False
            elif schema.get("additionalProperties") is False:
                return False
    return True


def test_catalog_holds_every_method_with_its_tasks() -> None:
    assert {name: {t.value for t in m.tasks} for name, m in CATALOG.items()} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_params_schema_is_valid_and_accepts_the_defaults(name: str) -> None:
    method = CATALOG[name]
    schema = params_schema(method)
    _check_schema(schema)
    json.dumps(schema, allow_nan=False)  # plain JSON, no NaN or infinity
    assert schema["additionalProperties"] is False
    assert not set(schema["properties"]) & set(SERVICE_CONTROLLED)
    assert not set(schema["properties"]) & set(method.fixed_params)
    for task in method.tasks:
        cls = method.estimator_class(task)
        for param, default in cls.parameter_defaults().items():
            if param in SERVICE_CONTROLLED or param in method.fixed_params:
                continue
            assert param in schema["properties"]
            assert _valid({param: default}, schema, schema), (param, default)


def test_schema_carries_bounds_defaults_and_rejects_bad_values() -> None:
    schema = params_schema(CATALOG["random_forest"])
    n_estimators = schema["properties"]["n_estimators"]
    assert n_estimators == {"type": "integer", "minimum": 1, "default": 100} | {
        k: v for k, v in n_estimators.items() if k == "description"
    }
    assert not _valid({"n_estimators": 0}, schema, schema)
    assert not _valid({"bogus": 1}, schema, schema)
    assert _valid({"n_estimators": 5, "max_features": "sqrt"}, schema, schema)


def test_task_specific_params_are_marked() -> None:
    schema = params_schema(CATALOG["random_forest"])
    class_weight = schema["properties"]["class_weight"]
    assert class_weight["x-tasks"] == ["classification"]
    assert "Classification only" in class_weight["description"]
    # Defaults that differ by task are named per task instead of one "default".
    max_features = schema["properties"]["max_features"]
    assert "default" not in max_features
    assert "(classification)" in max_features["description"]


def test_nested_learners_use_the_learner_shape() -> None:
    schema = params_schema(CATALOG["adaboost"])
    estimator = schema["properties"]["estimator"]
    assert {"$ref": "#/$defs/learner"} in estimator["anyOf"]
    assert schema["$defs"]["learner"]["required"] == ["method"]
    learner = {"method": "decision_tree", "params": {"max_depth": 2}}
    assert _valid({"estimator": learner}, schema, schema)
    assert not _valid({"estimator": {"params": {}}}, schema, schema)
    assert not _valid({"estimator": {"method": "svm"}}, schema, schema)


def test_estimator_class_refuses_an_unsupported_task() -> None:
    with pytest.raises(KeyError):
        CATALOG["arc_x4"].estimator_class(Task.REGRESSION)
