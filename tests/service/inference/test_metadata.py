"""Server and model metadata, model readiness, and serving from the model cache."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from sqlalchemy import create_engine, event, update
from sqlalchemy.orm import Session

from service.db.tables import ModelArtifactRecord
from service.deps import Resources
from tests.service.inference.helpers import BOTH_BACKENDS, RECORDS, matrix_input
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


async def test_server_metadata(svc: Service) -> None:
    response = await svc.client.get("/v2")

    assert response.status_code == 200
    assert response.json() == {
        "name": "coppice",
        "version": svc.app.version,
        "extensions": ["binary_tensor_data", "classification"],
    }


@BOTH_BACKENDS
async def test_classifier_metadata(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="species")

    response = await svc.client.get(f"/v2/models/{model_id}")
    versioned = await svc.client.get(f"/v2/models/{model_id}/versions/1")

    assert response.status_code == 200
    body = response.json()
    assert versioned.json() == body
    (tensor,) = body["inputs"]
    parameters = tensor.pop("parameters")
    assert body == {
        "name": model_id,
        "versions": ["1"],
        "platform": "coppice-engine",
        "inputs": [{"name": "input", "datatype": "FP64", "shape": [-1, 3]}],
        "outputs": [
            {"name": "predictions", "datatype": "BYTES", "shape": [-1]},
            {
                "name": "probabilities",
                "datatype": "FP64",
                "shape": [-1, 3],
                "parameters": {"classes": '["a", "b", "c"]'},
            },
        ],
        "parameters": {"task": "classification", "method": "random_forest", "target": "species"},
    }
    # Lists travel as JSON text: the protocol's parameter values are scalars.
    assert json.loads(parameters["feature_names"]) == ["x", "z", "colour"]
    assert json.loads(parameters["feature_kinds"]) == ["numeric", "numeric", "categorical"]
    assert json.loads(parameters["categories"]) == {"colour": ["blue", "green", "red"]}


async def test_regressor_and_label_only_classifier_metadata(svc: Service) -> None:
    regressor = await svc.train("random_forest", target="amount")
    labels_only = await svc.train("perceptron", params={})

    regression = (await svc.client.get(f"/v2/models/{regressor}")).json()
    perceptron = (await svc.client.get(f"/v2/models/{labels_only}")).json()
    refused = await svc.client.post(
        f"/v2/models/{labels_only}/infer",
        json={"inputs": [matrix_input(RECORDS)], "outputs": [{"name": "probabilities"}]},
    )
    default = await svc.client.post(
        f"/v2/models/{labels_only}/infer", json={"inputs": [matrix_input(RECORDS)]}
    )

    assert regression["outputs"] == [{"name": "predictions", "datatype": "FP64", "shape": [-1]}]
    assert regression["parameters"]["task"] == "regression"
    assert perceptron["outputs"] == [{"name": "predictions", "datatype": "BYTES", "shape": [-1]}]
    assert refused.status_code == 400
    assert refused.json()["error"].startswith(
        "outputs[0] ('probabilities'): a 'perceptron' model predicts labels only"
    )
    assert [o["name"] for o in default.json()["outputs"]] == ["predictions"]


@BOTH_BACKENDS
async def test_model_ready(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    ready = await svc.client.get(f"/v2/models/{model_id}/ready")
    versioned = await svc.client.get(f"/v2/models/{model_id}/versions/1/ready")

    assert ready.status_code == 200
    assert ready.json() == {"name": model_id, "ready": True}
    assert versioned.json() == ready.json()


async def test_unknown_model_or_version_is_404(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    paths = [
        ("GET", "/v2/models/nope"),
        ("GET", "/v2/models/nope/ready"),
        ("POST", "/v2/models/nope/infer"),
        ("GET", f"/v2/models/{model_id}/versions/2"),
        ("GET", f"/v2/models/{model_id}/versions/2/ready"),
        ("POST", f"/v2/models/{model_id}/versions/latest/infer"),
    ]
    for method, path in paths:
        response = await svc.client.request(
            method, path, json={"inputs": [matrix_input(RECORDS)]} if method == "POST" else None
        )

        assert response.status_code == 404, path
        assert response.headers["content-type"] == "application/json"
        assert set(response.json()) == {"error"}, path
    nope = await svc.client.get("/v2/models/nope")
    assert nope.json()["error"] == "There is no model with id 'nope'."
    version = await svc.client.get(f"/v2/models/{model_id}/versions/2")
    assert "its only version is '1'" in version.json()["error"]


async def test_damaged_model_is_not_ready(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with Session(svc.db_engine) as session, session.begin():
        session.execute(
            update(ModelArtifactRecord)
            .where(ModelArtifactRecord.model_id == model_id)
            .values(sha256="0" * 64)
        )

    ready = await svc.client.get(f"/v2/models/{model_id}/ready")
    metadata = await svc.client.get(f"/v2/models/{model_id}")
    inferred = await svc.client.post(
        f"/v2/models/{model_id}/infer", json={"inputs": [matrix_input(RECORDS)]}
    )

    assert ready.status_code == 503
    assert ready.json()["ready"] is False
    assert "SHA-256" in ready.json()["error"]
    for response in (metadata, inferred):
        assert response.status_code == 503
        assert set(response.json()) == {"error"}
        assert "SHA-256" in response.json()["error"]


async def test_cached_model_serves_without_the_database(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    other_id = await svc.train("gradient_boosting")
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # The prediction log writes from a thread of its own, off the request path by design.
        if threading.current_thread().name != "prediction-log":
            statements.append(statement)

    body = {"inputs": [matrix_input(RECORDS)]}
    event.listen(svc.db_engine, "before_cursor_execute", record)
    try:
        assert (await svc.client.get(f"/v2/models/{model_id}/ready")).status_code == 200
        loaded = list(statements)
        statements.clear()
        first = await svc.client.post(f"/v2/models/{model_id}/infer", json=body)
    finally:
        event.remove(svc.db_engine, "before_cursor_execute", record)
    assert any("model_artifacts" in s for s in loaded)
    assert statements == []

    # With the database gone, the cached model still serves; an uncached one is not ready.
    resources: Resources = svc.app.state.resources
    unreachable = create_engine("sqlite:////nonexistent-dir/coppice.db")
    svc.app.state.resources = Resources(
        settings=resources.settings, db_engine=unreachable, model_cache=resources.model_cache
    )
    second = await svc.client.post(f"/v2/models/{model_id}/infer", json=body)
    other = await svc.client.post(f"/v2/models/{other_id}/infer", json=body)
    other_ready = await svc.client.get(f"/v2/models/{other_id}/ready")

    assert second.status_code == 200 and second.json() == first.json()
    assert other.status_code == 503
    assert "model store is unreachable" in other.json()["error"]
    assert other_ready.status_code == 503 and other_ready.json()["ready"] is False
