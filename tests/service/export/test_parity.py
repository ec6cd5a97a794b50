"""Exported models answer as ``/v1`` predict does: the same labels, and probabilities and
predictions within 1e-9 relative, through onnxruntime, for every exportable family on binary,
multiclass and regression targets, on rows with gaps, absent features and unseen categories."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest

from tests.service.export.data import FEATURES, onnx_inputs, records
from tests.service.models.helpers import Service

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.anyio

TARGETS = {"binary": "label", "multiclass": "species", "regression": "amount"}
RTOL = 1e-9
# A linear model's scores are a matrix product, which onnxruntime sums in another order than
# NumPy's BLAS: a score may differ in its last bit, and 1 − p of a probability p near 1 then
# differs by one unit in the last place of 1.0 (~1.1e-16), more than 1e-9 of a tiny 1 − p.
LINEAR_PROBABILITY_ATOL = 1e-15
LINEAR = {"logistic_regression", "perceptron", "linear_regression", "ridge", "voting", "stacking"}

MEMBERS = [
    {"name": "tree", "method": "decision_tree", "params": {"max_depth": 4}},
    {"name": "boosting", "method": "gradient_boosting", "params": {"n_estimators": 10}},
    {"name": "logistic", "method": "logistic_regression", "params": {}},
]
REGRESSION_MEMBERS = [
    {"name": "forest", "method": "random_forest", "params": {"n_estimators": 5}},
    {"name": "xgb", "method": "xgboost", "params": {"n_estimators": 10}},
    {"name": "ridge", "method": "ridge", "params": {}},
]

# (method, params) per task kind; every exportable family, with the options that change the
# graph (hard voting, the exponential loss, AdaBoost's full alpha, subspaces).
CLASSIFIERS: list[tuple[str, dict[str, Any]]] = [
    ("decision_tree", {"max_depth": 6}),
    ("random_forest", {"n_estimators": 12}),
    ("extra_trees", {"n_estimators": 12}),
    ("bagging", {"n_estimators": 8, "max_features": 0.75}),
    ("bagging", {"n_estimators": 7, "voting": "hard"}),
    ("adaboost", {"n_estimators": 15}),
    (
        "adaboost",
        {
            "n_estimators": 10,
            "alpha": "full",
            "estimator": {"method": "decision_tree", "params": {"max_depth": 3}},
        },
    ),
    ("gradient_boosting", {"n_estimators": 20}),
    ("xgboost", {"n_estimators": 20}),
    ("logistic_regression", {}),
    ("perceptron", {}),
    ("voting", {"voting": "soft", "estimators": MEMBERS}),
    ("voting", {"voting": "hard", "weights": [1.0, 2.0, 0.5], "estimators": MEMBERS}),
    ("stacking", {"estimators": MEMBERS, "cv": 3}),
    (
        "stacking",
        {"estimators": MEMBERS, "cv": 3, "stack_method": "predict", "passthrough": True},
    ),
]
REGRESSORS: list[tuple[str, dict[str, Any]]] = [
    ("decision_tree", {"max_depth": 6}),
    ("random_forest", {"n_estimators": 12}),
    ("extra_trees", {"n_estimators": 12}),
    ("bagging", {"n_estimators": 8}),
    ("adaboost", {"n_estimators": 15}),
    ("gradient_boosting", {"n_estimators": 20}),
    ("gradient_boosting", {"n_estimators": 20, "loss": "huber"}),
    ("xgboost", {"n_estimators": 20}),
    ("linear_regression", {}),
    ("ridge", {"alpha": 2.0}),
    ("voting", {"weights": [2.0, 1.0, 1.0], "estimators": REGRESSION_MEMBERS}),
    ("stacking", {"estimators": REGRESSION_MEMBERS, "cv": 3}),
    (
        "stacking",
        {
            "estimators": REGRESSION_MEMBERS,
            "cv": 3,
            "passthrough": True,
            "final_estimator": {"method": "linear_regression", "params": {}},
        },
    ),
]
CASES = [
    pytest.param(method, kind, params, id=f"{method}-{kind}-{i}")
    for kind in ("binary", "multiclass")
    for i, (method, params) in enumerate(CLASSIFIERS)
] + [
    pytest.param(method, "regression", params, id=f"{method}-regression-{i}")
    for i, (method, params) in enumerate(REGRESSORS)
]


async def export(svc: Service, model_id: str, fmt: str = "onnx") -> bytes:
    response = await svc.client.get(f"/v1/models/{model_id}/export", params={"format": fmt})
    assert response.status_code == 200, response.text
    return response.content


def run(model_bytes: bytes, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, inputs), strict=True))


@pytest.mark.parametrize(("method", "kind", "params"), CASES)
async def test_onnxruntime_answers_as_v1_predict(
    svc: Service, method: str, kind: str, params: dict[str, Any]
) -> None:
    model_id = await svc.train(method, target=TARGETS[kind], params=params, features=FEATURES)
    model_bytes = await export(svc, model_id)
    onnx.checker.check_model(onnx.load_from_string(model_bytes), full_check=True)

    rows = records()
    classification = kind != "regression"
    body: dict[str, Any] = {"records": rows}
    if classification and method != "perceptron":
        body["return_proba"] = True
    response = await svc.client.post(f"/v1/models/{model_id}/predict", json=body)
    assert response.status_code == 200, response.text
    expected = response.json()

    got = run(model_bytes, onnx_inputs(rows, {"colour", "size"}))
    if classification:
        assert got["label"].tolist() == expected["predictions"]
        if method == "perceptron":
            assert "probabilities" not in got
        else:
            assert got["probabilities"].dtype == np.float64
            np.testing.assert_allclose(
                got["probabilities"],
                np.array(expected["probabilities"]),
                rtol=RTOL,
                atol=LINEAR_PROBABILITY_ATOL if method in LINEAR else 0,
            )
    else:
        assert got["prediction"].dtype == np.float64
        np.testing.assert_allclose(
            got["prediction"], np.array(expected["predictions"]), rtol=RTOL, atol=0
        )
