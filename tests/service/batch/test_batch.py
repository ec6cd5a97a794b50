"""Batch predictions through the app and its worker's real batch processes (SQLite, PostgreSQL).

Each batch is queued with ``POST /v1/batch-predictions``, claimed by the app's embedded worker,
scored in a process of its own, and its output dataset downloaded with
``GET /v1/datasets/{id}/data``; every value is compared with what ``/v1`` predict answers for
the same records.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.batch import process
from service.batch.process import outcome_of
from service.datasets import parts as parts_module
from service.db.tables import DatasetPartRecord, DatasetRecord
from service.worker.messages import Failed, Stopped
from tests.service.models.helpers import COLUMNS, Service, dataset_rows

pytestmark = pytest.mark.anyio

# Small parts, so the input is scored part by part.
SMALL_PARTS = (16, 1)


async def upload(svc: Service, columns: list[str], rows: list[list[Any]]) -> str:
    response = await svc.client.post(
        "/v1/datasets", json={"name": "to score", "columns": columns, "rows": rows}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def run_batch(svc: Service, **body: Any) -> dict[str, Any]:
    """Queue a batch and wait until it has ended; its body."""
    created = await svc.client.post("/v1/batch-predictions", json=body)
    assert created.status_code == 202, created.text
    assert created.headers["location"] == f"/v1/batch-predictions/{created.json()['id']}"
    assert created.json()["status"] == "queued"
    batch: dict[str, Any] = created.json()
    for _ in range(60):
        response = await svc.client.get(f"/v1/batch-predictions/{batch['id']}", params={"wait": 10})
        assert response.status_code == 200, response.text
        batch = response.json()
        if batch["status"] not in ("queued", "running"):
            break
    return batch


async def output(svc: Service, batch: dict[str, Any]) -> dict[str, list[Any]]:
    assert batch["status"] == "succeeded", batch
    response = await svc.client.get(
        f"/v1/datasets/{batch['output_dataset_id']}/data", params={"format": "parquet"}
    )
    assert response.status_code == 200, response.text
    table = pq.read_table(io.BytesIO(response.content))
    return {name: table.column(name).to_pylist() for name in table.column_names}


async def predict(svc: Service, model: str, records: list[dict[str, Any]], **body: Any) -> Any:
    response = await svc.client.post(
        f"/v1/models/{model}/predict", json={"records": records, **body}
    )
    assert response.status_code == 200, response.text
    return response.json()


def records_of(columns: list[str], rows: list[list[Any]], keep: list[str]) -> list[dict[str, Any]]:
    return [{c: v for c, v in zip(columns, row, strict=True) if c in keep} for row in rows]


async def test_classification_with_proba_equals_v1_predict_part_by_part(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = await svc.train("random_forest", params={"n_estimators": 8})
    monkeypatch.setattr(parts_module, "layout", lambda row_bytes: SMALL_PARTS)
    rows = dataset_rows(70, seed=3)
    dataset = await upload(svc, COLUMNS, rows)
    with Session(svc.db_engine) as session:
        n_parts = session.scalar(
            select(func.count()).where(DatasetPartRecord.dataset_id == dataset)
        )
    assert n_parts == 5  # 70 rows in parts of 16

    batch = await run_batch(
        svc, model=model, dataset_id=dataset, keep_columns=["amount"], return_proba=True
    )
    scored = await output(svc, batch)

    assert list(scored) == ["amount", "prediction", "proba_no", "proba_yes"]
    answer = await predict(
        svc, model, records_of(COLUMNS, rows, ["x", "z", "colour"]), return_proba=True
    )
    assert scored["prediction"] == answer["predictions"]
    assert np.array(scored["proba_no"]) == pytest.approx(np.array(answer["probabilities"])[:, 0])
    assert np.array(scored["proba_yes"]) == pytest.approx(np.array(answer["probabilities"])[:, 1])
    assert scored["amount"] == [row[3] for row in rows]
    assert batch["n_rows"] == 70 and batch["progress"] == 1.0
    assert batch["model_id"] == model and batch["dataset_id"] == dataset
    # The target is in the dataset: the model's metric set on these rows.
    metrics = batch["metrics"]
    assert set(metrics) >= {"accuracy", "log_loss", "roc_auc", "f1_macro", "confusion_matrix"}
    labels = [row[4] for row in rows]
    hits = sum(p == t for p, t in zip(answer["predictions"], labels, strict=True))
    assert metrics["accuracy"] == pytest.approx(hits / len(rows))
    assert np.array(metrics["confusion_matrix"]).sum() == len(rows)
    assert any("target 'label'" in note for note in batch["notes"])
    # The output is an ordinary dataset, listed and described like an upload.
    described = (await svc.client.get(f"/v1/datasets/{batch['output_dataset_id']}")).json()
    assert described["n_rows"] == 70
    assert [(c["name"], c["kind"]) for c in described["columns"]] == [
        ("amount", "numeric"),
        ("prediction", "categorical"),
        ("proba_no", "numeric"),
        ("proba_yes", "numeric"),
    ]


async def test_regression_with_contributions_equals_v1_predict(svc: Service) -> None:
    model = await svc.train("gradient_boosting", target="amount", params={"n_estimators": 10})
    rows = dataset_rows(40, seed=5)
    dataset = await upload(svc, COLUMNS, rows)

    batch = await run_batch(svc, model=model, dataset_id=dataset, explain=True)
    scored = await output(svc, batch)

    assert list(scored) == [
        "prediction",
        "contribution_x",
        "contribution_z",
        "contribution_colour",
        "bias",
    ]
    answer = await predict(
        svc, model, records_of(COLUMNS, rows, ["x", "z", "colour"]), explain=True
    )
    assert scored["prediction"] == pytest.approx(answer["predictions"])
    contributions = np.array(answer["contributions"])
    for j, name in enumerate(["x", "z", "colour"]):
        assert scored[f"contribution_{name}"] == pytest.approx(contributions[:, j].tolist())
    assert scored["bias"] == pytest.approx(answer["bias"])
    assert set(batch["metrics"]) == {"rmse", "mae", "r2"}
    amounts = np.array([row[3] for row in rows])
    rmse = math.sqrt(float(np.mean((np.array(answer["predictions"]) - amounts) ** 2)))
    assert batch["metrics"]["rmse"] == pytest.approx(rmse)


async def test_multiclass_contributions_per_class(svc: Service) -> None:
    model = await svc.train("random_forest", target="species", params={"n_estimators": 5})
    rows = dataset_rows(20, seed=9)
    dataset = await upload(svc, COLUMNS, rows)

    batch = await run_batch(svc, model=model, dataset_id=dataset, explain=True, return_proba=True)
    scored = await output(svc, batch)

    answer = await predict(
        svc, model, records_of(COLUMNS, rows, ["x", "z", "colour"]), explain=True
    )
    contributions = np.array(answer["contributions"])  # [row][feature][class]
    assert scored["prediction"] == answer["predictions"]
    for k, label in enumerate(["a", "b", "c"]):
        assert f"proba_{label}" in scored
        assert scored[f"bias_{label}"] == pytest.approx(np.array(answer["bias"])[:, k].tolist())
        for j, name in enumerate(["x", "z", "colour"]):
            assert scored[f"contribution_{name}_{label}"] == pytest.approx(
                contributions[:, j, k].tolist()
            )


async def test_a_missing_feature_is_missing_and_noted(svc: Service) -> None:
    model = await svc.train("random_forest", params={"n_estimators": 6}, name="churn-rf")
    columns = ["customer", "x", "colour"]  # no "z", and no target
    rows: list[list[Any]] = [
        ["c1", 0.3, "red"],
        ["c2", None, "blue"],
        ["c3", -1.2, "purple"],  # a colour training never saw
        ["c4", 2.0, None],
    ]
    dataset = await upload(svc, columns, rows)

    batch = await run_batch(svc, model=model, dataset_id=dataset, keep_columns=["customer"])
    scored = await output(svc, batch)

    answer = await predict(svc, model, records_of(columns, rows, ["x", "colour"]))
    assert scored["customer"] == ["c1", "c2", "c3", "c4"]
    assert scored["prediction"] == answer["predictions"]
    assert batch["metrics"] is None
    notes = " ".join(batch["notes"])
    assert "'z'" in notes and "treated as missing in every row" in notes
    assert "Feature 'colour': 1 value training never saw" in notes


async def test_a_registered_alias_names_the_model(svc: Service) -> None:
    model = await svc.train("random_forest", params={"n_estimators": 4})
    await svc.client.post("/v1/registered-models", json={"name": "churn"})
    await svc.client.post("/v1/registered-models/churn/versions", json={"model_id": model})
    await svc.client.put("/v1/registered-models/churn/aliases/production", json={"version": 1})
    dataset = await upload(svc, COLUMNS, dataset_rows(12))

    batch = await run_batch(svc, model="churn@production", dataset_id=dataset)

    assert batch["status"] == "succeeded" and batch["model"] == "churn@production"
    assert batch["model_id"] == model
    listed = (await svc.client.get("/v1/batch-predictions", params={"model_id": model})).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == batch["id"]
    # Batches queue through the jobs table, but are not training jobs.
    jobs = (await svc.client.get("/v1/jobs")).json()
    assert batch["id"] not in [job["id"] for job in jobs["items"]]


async def test_bad_requests_are_problems_naming_the_field(svc: Service) -> None:
    model = await svc.train("random_forest", params={"n_estimators": 3})
    dataset = await upload(svc, COLUMNS, dataset_rows(10))
    text_x = await upload(svc, ["x", "z"], [["high", 1.0], ["low", 2.0]])

    async def refused(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = await svc.client.post("/v1/batch-predictions", json=body)
        assert response.headers["content-type"] == "application/problem+json", response.text
        return response.status_code, response.json()

    status, problem = await refused({"model": model, "dataset_id": "nope"})
    assert status == 404 and problem["errors"][0]["loc"] == ["body", "dataset_id"]
    status, problem = await refused({"model": "nope", "dataset_id": dataset})
    assert status == 404 and problem["errors"][0]["loc"] == ["body", "model"]
    status, problem = await refused({"model": "churn@production", "dataset_id": dataset})
    assert status == 404 and "churn" in problem["detail"]
    status, problem = await refused(
        {"model": model, "dataset_id": dataset, "keep_columns": ["amount", "nope", "amount"]}
    )
    assert status == 422
    assert [e["loc"] for e in problem["errors"]] == [
        ["body", "keep_columns", 1],
        ["body", "keep_columns", 2],
    ]
    renamed = await upload(svc, ["x", "prediction"], [[1.0, 2.0]])
    status, problem = await refused(
        {"model": model, "dataset_id": renamed, "keep_columns": ["prediction"]}
    )
    assert status == 422 and problem["errors"][0]["loc"] == ["body", "keep_columns", 0]
    status, problem = await refused({"model": model, "dataset_id": text_x})
    assert status == 422 and "'x'" in problem["detail"]
    status, problem = await refused({"model": model, "dataset_id": dataset, "colour": 1})
    assert status == 422 and problem["errors"][0]["loc"][-1] == "colour"
    status, problem = await refused({"dataset_id": dataset})
    assert status == 422 and problem["errors"][0]["loc"] == ["body", "model"]
    perceptron = await svc.train("perceptron", params={})
    status, problem = await refused(
        {"model": perceptron, "dataset_id": dataset, "return_proba": True}
    )
    assert status == 422 and problem["errors"][0]["loc"] == ["body", "return_proba"]
    missing = await svc.client.get("/v1/batch-predictions/nope")
    assert missing.status_code == 404
    with Session(svc.db_engine) as session:
        assert session.scalar(select(func.count()).select_from(DatasetRecord)) == 4


async def test_cancel_a_queued_batch_and_an_ended_one(open_service: Any) -> None:
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("random_forest", params={"n_estimators": 3})
        dataset = await upload(svc, COLUMNS, dataset_rows(10))
        created = await svc.client.post(
            "/v1/batch-predictions", json={"model": model, "dataset_id": dataset}
        )
        batch_id = created.json()["id"]

        cancelled = await svc.client.post(f"/v1/batch-predictions/{batch_id}/cancel")
        again = await svc.client.post(f"/v1/batch-predictions/{batch_id}/cancel")

        assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
        assert again.status_code == 409
        assert "already ended" in again.json()["detail"]
        # A dataset in use by a queued batch cannot be deleted; a cancelled one frees it.
        assert (await svc.client.delete(f"/v1/datasets/{dataset}")).status_code == 204


async def test_a_stop_between_parts_leaves_no_output(
    open_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel is obeyed between parts, and what was written of the output is removed."""
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("random_forest", params={"n_estimators": 3})
        monkeypatch.setattr(parts_module, "layout", lambda row_bytes: SMALL_PARTS)
        dataset = await upload(svc, COLUMNS, dataset_rows(64))
        before = {info.path for info in svc.store.walk()}
        created = await svc.client.post(
            "/v1/batch-predictions", json={"model": model, "dataset_id": dataset}
        )
        batch_id = created.json()["id"]
        progress: list[str] = []

        result = outcome_of(
            lambda: process.run_batch(
                svc.settings.resolved_database_url,
                svc.store,
                batch_id,
                lambda fraction, stage: progress.append(stage),
                lambda: len(progress) >= 2,
            )
        )

        assert isinstance(result, Stopped)
        assert progress == ["rows 16/64", "rows 32/64"]
        assert {info.path for info in svc.store.walk()} == before


async def test_a_model_deleted_before_its_batch_ran_fails_it(open_service: Any) -> None:
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("decision_tree", params={})
        dataset = await upload(svc, COLUMNS, dataset_rows(10))
        created = await svc.client.post(
            "/v1/batch-predictions", json={"model": model, "dataset_id": dataset}
        )
        assert (await svc.client.delete(f"/v1/models/{model}")).status_code == 204

        result = outcome_of(
            lambda: process.run_batch(
                svc.settings.resolved_database_url,
                svc.store,
                created.json()["id"],
                lambda fraction, stage: None,
                lambda: False,
            )
        )

        assert isinstance(result, Failed) and result.code == "model_not_found"
