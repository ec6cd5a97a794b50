"""``GET /v1/models/{ref}/export``: formats, the Triton repository, refusals, and that the
trees' categorical subset splits and missing directions reach the graph."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.service.export.data import FEATURES, onnx_inputs, records
from tests.service.models.helpers import Service

ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.anyio


def tree_attribute(model: onnx.ModelProto, name: str) -> np.ndarray:
    (node,) = [n for n in model.graph.node if n.op_type == "TreeEnsemble"]
    (attribute,) = [a for a in node.attribute if a.name == name]
    if attribute.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(attribute.t)
    return np.array(attribute.ints)


async def test_the_graph_has_named_typed_inputs_category_sets_and_missing_directions(
    svc: Service,
) -> None:
    model_id = await svc.train(
        "random_forest", target="species", params={"n_estimators": 5}, features=FEATURES
    )
    response = await svc.client.get(f"/v1/models/{model_id}/export")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    model = onnx.load_from_string(response.content)
    inputs = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert inputs == {
        "x": onnx.TensorProto.DOUBLE,
        "z": onnx.TensorProto.DOUBLE,
        "colour": onnx.TensorProto.STRING,
        "size": onnx.TensorProto.STRING,
    }
    assert [o.name for o in model.graph.output] == ["label", "probabilities"]
    opsets = {o.domain: o.version for o in model.opset_import}
    assert opsets["ai.onnx.ml"] == 5
    assert 6 in tree_attribute(model, "nodes_modes").tolist()  # BRANCH_MEMBER
    assert tree_attribute(model, "nodes_splits").dtype == np.float64
    assert set(tree_attribute(model, "nodes_missing_value_tracks_true").tolist()) == {0, 1}


async def test_triton_repository_holds_config_and_the_same_model(svc: Service) -> None:
    model_id = await svc.train(
        "gradient_boosting", target="amount", params={"n_estimators": 5}, features=FEATURES
    )
    onnx_bytes = (await svc.client.get(f"/v1/models/{model_id}/export")).content
    response = await svc.client.get(f"/v1/models/{model_id}/export", params={"format": "triton"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    name = f"coppice-{model_id}"
    assert sorted(archive.namelist()) == [f"{name}/1/model.onnx", f"{name}/config.pbtxt"]
    config = archive.read(f"{name}/config.pbtxt").decode()
    assert f'name: "{name}"' in config
    assert 'backend: "onnxruntime"' in config
    assert config.count("TYPE_STRING") == 2  # colour and size
    assert 'name: "prediction"' in config
    packed = archive.read(f"{name}/1/model.onnx")
    rows = records(20)
    inputs = onnx_inputs(rows, {"colour", "size"})
    first = ort.InferenceSession(packed).run(None, inputs)[0]
    second = ort.InferenceSession(onnx_bytes).run(None, inputs)[0]
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize(
    ("method", "params", "why"),
    [
        ("k_neighbors", {}, "no exact ONNX form"),
        (
            "bagging",
            {"n_estimators": 3, "estimator": {"method": "logistic_regression", "params": {}}},
            "members are decision trees",
        ),
        (
            "voting",
            {
                "voting": "soft",
                "estimators": [
                    {"name": "tree", "method": "decision_tree", "params": {}},
                    {"name": "knn", "method": "k_neighbors", "params": {}},
                ],
            },
            "KNeighborsClassifier",
        ),
        (
            "stacking",
            {
                "cv": 2,
                "estimators": [{"name": "tree", "method": "decision_tree", "params": {}}],
                "final_estimator": {"method": "decision_tree", "params": {}},
            },
            "final estimator DecisionTreeClassifier",
        ),
        (
            "stacking",
            {
                "cv": 2,
                "estimators": [{"name": "perceptron", "method": "perceptron", "params": {}}],
            },
            "stacked by decision_function",
        ),
    ],
)
async def test_a_method_that_does_not_export_is_a_422_listing_those_that_do(
    svc: Service, method: str, params: dict[str, object], why: str
) -> None:
    model_id = await svc.train(method, params=params, features=FEATURES)
    response = await svc.client.get(f"/v1/models/{model_id}/export")
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert why in problem["detail"]
    for exportable in ("random_forest", "xgboost", "logistic_regression", "adaboost"):
        assert exportable in problem["detail"]
    assert problem["errors"][0]["loc"] == ["path", "model_id"]


async def test_unknown_model_and_unknown_format(svc: Service) -> None:
    missing = await svc.client.get("/v1/models/nope/export")
    assert missing.status_code == 404
    model_id = await svc.train("decision_tree", params={}, features=FEATURES)
    bad = await svc.client.get(f"/v1/models/{model_id}/export", params={"format": "pmml"})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"] == ["query", "format"]
