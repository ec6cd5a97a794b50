"""``/v1/models``: listing, reading, deleting and learning curves."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db.tables import ImportanceRecord, JobRecord, ModelArtifactRecord
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


async def test_get_describes_the_model(svc: Service) -> None:
    model_id = await svc.train("random_forest", name="churn-rf")

    response = await svc.client.get(f"/v1/models/{model_id}")

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "id", "name", "job_id", "dataset_id", "method", "task", "target", "features",
        "classes", "params", "metrics", "n_estimators", "size_bytes", "created_at", "registered",
        "importance_kinds",
    }  # fmt: skip
    assert body["registered"] == []  # registered versions: tests/service/registry
    assert body["id"] == model_id
    assert body["name"] == "churn-rf"
    assert body["dataset_id"] == svc.dataset_id
    assert (body["method"], body["task"], body["target"]) == (
        "random_forest",
        "classification",
        "label",
    )
    assert body["features"] == [
        {"name": "x", "kind": "numeric"},
        {"name": "z", "kind": "numeric"},
        {"name": "colour", "kind": "categorical"},
    ]
    assert body["classes"] == ["no", "yes"]
    assert body["params"]["n_estimators"] == 10 and "max_features" in body["params"]
    assert set(body["metrics"]) == {"train", "validation", "oob", "cv"}
    assert 0 <= body["metrics"]["validation"]["accuracy"] <= 1
    assert body["metrics"]["oob"] is not None and body["metrics"]["cv"] is None
    assert body["n_estimators"] == 10 and body["size_bytes"] > 0

    job = (await svc.client.get(f"/v1/jobs/{body['job_id']}")).json()
    assert job["model_id"] == model_id


async def test_list_filters_by_method_and_pages(svc: Service) -> None:
    forest = await svc.train("random_forest")
    boosted = await svc.train("gradient_boosting", target="amount")

    everything = (await svc.client.get("/v1/models")).json()
    forests = (await svc.client.get("/v1/models", params={"method": "random_forest"})).json()
    page = (await svc.client.get("/v1/models", params={"limit": 1, "offset": 1})).json()

    assert everything["total"] == 2
    assert [item["id"] for item in everything["items"]] == [boosted, forest]  # newest first
    assert forests == {"items": [everything["items"][1]], "total": 1}
    assert page["total"] == 2 and [item["id"] for item in page["items"]] == [forest]
    bad = await svc.client.get("/v1/models", params={"limit": 0})
    assert bad.status_code == 422


async def test_delete_removes_artifact_importances_and_job_link(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    job_id = (await svc.client.get(f"/v1/models/{model_id}")).json()["job_id"]
    predicted = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": [{"x": 1.0}]}
    )
    assert predicted.status_code == 200
    assert [info.path for info in svc.store.walk("models")] == [f"models/{model_id}/model.cpm"]

    response = await svc.client.delete(f"/v1/models/{model_id}")

    assert response.status_code == 204 and response.content == b""
    assert (await svc.client.get(f"/v1/models/{model_id}")).status_code == 404
    gone = await svc.client.post(f"/v1/models/{model_id}/predict", json={"records": [{"x": 1}]})
    assert gone.status_code == 404  # evicted from the cache too
    assert (await svc.client.get(f"/v1/jobs/{job_id}")).json()["model_id"] is None
    with Session(svc.db_engine) as session:
        for table in (ModelArtifactRecord, ImportanceRecord):
            assert session.scalar(select(func.count()).select_from(table)) == 0
        assert session.get(JobRecord, job_id) is not None
    assert list(svc.store.walk("models")) == []  # the artifact's object went once the rows had
    again = await svc.client.delete(f"/v1/models/{model_id}")
    assert again.status_code == 404
    assert again.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "path", ["", "/curves", "/feature-importance", "/predict"], ids=lambda p: p or "get"
)
async def test_unknown_model_is_404_problem(svc: Service, path: str) -> None:
    url = f"/v1/models/no-such-model{path}"
    if path == "/predict":
        response = await svc.client.post(url, json={"records": [{"x": 1.0}]})
    else:
        response = await svc.client.get(url)

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert "no-such-model" in response.json()["detail"]


async def test_curves_of_boosting(svc: Service) -> None:
    model_id = await svc.train("gradient_boosting", params={"n_estimators": 6})

    response = await svc.client.get(f"/v1/models/{model_id}/curves")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metric"] == "log_loss"
    assert body["iterations"] == [1, 2, 3, 4, 5, 6]
    assert len(body["train"]) == len(body["validation"]) == 6
    assert body["oob"] == []
    assert body["train"][-1] < body["train"][0]


async def test_curves_of_a_forest_are_oob(svc: Service) -> None:
    model_id = await svc.train("random_forest")

    body = (await svc.client.get(f"/v1/models/{model_id}/curves")).json()

    assert len(body["oob"]) == len(body["iterations"]) > 0
    assert body["train"] == [] and body["validation"] == []


async def test_a_single_tree_has_no_curves(svc: Service) -> None:
    model_id = await svc.train("decision_tree", params={"max_depth": 3})

    response = await svc.client.get(f"/v1/models/{model_id}/curves")

    assert response.status_code == 404
    assert "no learning curves" in response.json()["detail"]
