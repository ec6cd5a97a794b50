"""The prediction log, feedback and the monitoring report, through the app (SQLite, PostgreSQL)."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from service.db.tables import ModelRecord, PredictionLogRecord
from service.monitoring.log import LoggedRequest, PredictionLog
from tests.service.models.helpers import Service
from tests.service.monitoring.conftest import OpenService
from tests.service.monitoring.helpers import (
    RECORDS,
    logged_ids,
    predict,
    prediction_log,
    written,
)

pytestmark = pytest.mark.anyio


async def report(svc: Service, model_id: str, **params: Any) -> dict[str, Any]:
    response = await svc.client.get(f"/v1/models/{model_id}/monitoring", params=params)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_rows_are_logged_with_ids_and_reported(svc: Service) -> None:
    model_id = await svc.train("random_forest", validation={"holdout": 0.25})
    given = await predict(svc, model_id, records=RECORDS, ids=["a", "b", "c", "d"])
    made = await predict(
        svc, model_id, columns=["x", "z"], rows=[[0.1, 0.2], [0.3, None]], return_proba=True
    )
    assert given["ids"] == ["a", "b", "c", "d"]
    assert len(made["ids"]) == 2 and len(set(made["ids"])) == 2
    written(svc)
    assert logged_ids(svc, model_id) == ["a", "b", "c", "d", *made["ids"]]

    body = await report(svc, model_id)

    assert body["model_id"] == model_id and body["baseline"] is True
    assert body["n_predictions"] == 6
    features = {f["name"]: f for f in body["features"]}
    assert list(features) == ["x", "z", "colour"]
    for feature in features.values():
        assert feature["psi"] is not None and feature["psi"] >= 0
        assert feature["drift"] in ("none", "moderate", "major")
        assert len(feature["training"]) == len(feature["live"]) == len(feature["bins"])
        assert abs(sum(feature["training"]) - 1) < 1e-9
    colour = features["colour"]
    assert colour["kind"] == "categorical"
    assert colour["bins"][-2:] == ["missing", "unseen"]
    assert colour["unseen"] == {"count": 1, "top": [{"value": "purple", "count": 1}]}
    # Missing: row c's colour, and both tabular rows lack it; purple is unseen, not missing.
    assert colour["missing_rate"]["live"] == pytest.approx(3 / 6)
    assert features["x"]["missing_rate"]["live"] == pytest.approx(1 / 6)
    assert features["x"]["unseen"] is None
    # Six live rows against a training histogram: a large shift, and the report says so.
    assert body["prediction"]["bins"] == ["no", "yes", "missing", "unseen"]
    assert body["performance"] == {"n_labelled": 0}


async def test_rows_of_a_batch_are_stored_each_with_its_own_values(svc: Service) -> None:
    # Requests with and without probabilities and unseen colours, most likely in one batch
    # (the log lingers): the writer gets one stack of arrays per model and cuts it into rows.
    model_id = await svc.train("random_forest")
    with_proba = await predict(svc, model_id, records=RECORDS[:2], return_proba=True)
    without = await predict(svc, model_id, records=RECORDS[2:])
    again = await predict(svc, model_id, records=RECORDS[3:], return_proba=True)
    written(svc)
    with Session(svc.db_engine) as session:
        stored = session.execute(
            select(PredictionLogRecord)
            .where(PredictionLogRecord.model_id == model_id)
            .order_by(PredictionLogRecord.id)
        ).scalars().all()  # fmt: skip
        rows = [(r.row_id, r.features, r.proba, r.unseen) for r in stored]
    assert [r[0] for r in rows] == with_proba["ids"] + without["ids"] + again["ids"]
    expected_proba = [*with_proba["probabilities"], None, None, *again["probabilities"]]
    for (_, features, proba, _), want in zip(rows, expected_proba, strict=True):
        assert len(features) == 3 * 4  # three float32 features
        if want is None:
            assert proba is None
        else:
            np.testing.assert_allclose(np.frombuffer(proba, np.float32), want, rtol=1e-6)
    x = [float(np.frombuffer(r[1], np.float32)[0]) for r in rows]
    np.testing.assert_allclose(x[:2], [1.2, -1.5], rtol=1e-6)
    assert np.isnan(x[2]) and x[3] == pytest.approx(0.3) and x[4] == pytest.approx(0.3)
    assert [r[3] for r in rows] == [None, None, None, {"colour": "purple"}, {"colour": "purple"}]


async def test_feedback_joins_by_id_and_reports_performance(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    answer = await predict(svc, model_id, records=RECORDS, return_proba=True)
    ids = answer["ids"]
    response = await svc.client.post(
        f"/v1/models/{model_id}/feedback",
        json={"ids": [*ids, "never-logged"], "actuals": ["yes", "no", "no", "yes", "no"]},
    )
    assert response.status_code == 202, response.text
    assert response.json() == {
        "model_id": model_id,
        "received": 5,
        "matched": 4,
        "unknown": 1,
        "unknown_ids": ["never-logged"],
    }

    performance = (await report(svc, model_id))["performance"]

    assert performance["n_labelled"] == 4
    correct = sum(
        p == a for p, a in zip(answer["predictions"], ["yes", "no", "no", "yes"], strict=True)
    )
    assert performance["accuracy"] == pytest.approx(correct / 4)
    assert "log_loss" in performance and "confusion_matrix" in performance


async def test_regression_feedback_scores_rmse(svc: Service) -> None:
    model_id = await svc.train("random_forest", target="amount")
    answer = await predict(svc, model_id, records=RECORDS[:2], ids=["r1", "r2"])
    response = await svc.client.post(
        f"/v1/models/{model_id}/feedback", json={"ids": ["r1", "r2"], "actuals": [1.0, 2]}
    )
    assert response.status_code == 202, response.text
    performance = (await report(svc, model_id))["performance"]
    errors = [answer["predictions"][0] - 1.0, answer["predictions"][1] - 2.0]
    assert performance["rmse"] == pytest.approx((sum(e * e for e in errors) / 2) ** 0.5)


@pytest.mark.parametrize(
    ("target", "actual", "fragment"),
    [("label", "maybe", "not a class"), ("label", None, "not a class"),
     ("amount", "1.5", "not a number"), ("amount", True, "not a number")],
)  # fmt: skip
async def test_wrong_actuals_are_422(svc: Service, target: str, actual: Any, fragment: str) -> None:
    model_id = await svc.train("random_forest", target=target)
    response = await svc.client.post(
        f"/v1/models/{model_id}/feedback", json={"ids": ["a"], "actuals": [actual]}
    )
    assert response.status_code == 422, response.text
    assert fragment in response.json()["detail"]
    assert response.json()["errors"][0]["loc"] == ["body", "actuals", 0]


async def test_a_window_that_ends_before_it_starts_is_422(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    now = datetime.now(UTC)
    response = await svc.client.get(
        f"/v1/models/{model_id}/monitoring",
        params={"since": now.isoformat(), "until": (now - timedelta(hours=1)).isoformat()},
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["query", "since"]


async def test_ids_of_the_wrong_length_are_422(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    response = await svc.client.post(
        f"/v1/models/{model_id}/predict", json={"records": RECORDS, "ids": ["a"]}
    )
    assert response.status_code == 422, response.text


async def test_a_model_without_a_baseline_is_reported_without_drift(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with Session(svc.db_engine) as session:
        metrics = dict(session.scalars(select(ModelRecord.metrics).where(
            ModelRecord.id == model_id)).one())  # fmt: skip
        metrics.pop("monitoring")
        session.execute(update(ModelRecord).where(ModelRecord.id == model_id).values(
            metrics=metrics))  # fmt: skip
        session.commit()
    await predict(svc, model_id, records=RECORDS)
    written(svc)

    body = await report(svc, model_id)

    assert body["baseline"] is False and "trained before" in body["note"]
    assert body["n_predictions"] == 4
    assert body["features"] == [] and body["prediction"] is None


async def test_the_log_is_sampled_and_capped(open_service: OpenService) -> None:
    async with open_service(prediction_log_max_rows=3) as svc:
        model_id = await svc.train("random_forest")
        await predict(svc, model_id, records=RECORDS, ids=["a", "b", "c", "d"])
        await predict(svc, model_id, records=RECORDS[:2], ids=["e", "f"])
        written(svc)
        assert logged_ids(svc, model_id) == ["d", "e", "f"]  # the oldest dropped first
    async with open_service(prediction_log_rate=0.0) as svc:
        model_id = await svc.train("random_forest")
        answer = await predict(svc, model_id, records=RECORDS)
        assert "ids" not in answer or answer["ids"] is None
        written(svc)
        assert logged_ids(svc, model_id) == []


@pytest.mark.parametrize("table", ["prediction_log", "prediction_counts"])
async def test_a_failing_log_never_fails_a_predict(svc: Service, table: str) -> None:
    # Either table refusing its batch rolls the other back: rows and counts go together.
    model_id = await svc.train("random_forest")
    with svc.db_engine.begin() as connection:
        connection.execute(text(f"DROP TABLE {table}"))
    for _ in range(3):
        await predict(svc, model_id, records=RECORDS)
    log = written(svc)
    assert log.counts.failed == 12
    if table == "prediction_counts":
        assert logged_ids(svc, model_id) == []
    metrics = (await svc.client.get("/metrics")).text
    assert 'coppice_prediction_log_dropped_total{reason="write_failed"} 12.0' in metrics


async def test_v2_inference_is_logged(svc: Service) -> None:
    model_id = await svc.train("random_forest", features=["x", "z"])
    response = await svc.client.post(
        f"/v2/models/{model_id}/infer",
        json={
            "id": "req-1",
            "inputs": [
                {
                    "name": "input",
                    "shape": [2, 2],
                    "datatype": "FP64",
                    "data": [0.1, 0.2, 0.3, 0.4],
                }
            ],
        },
    )
    assert response.status_code == 200, response.text
    written(svc)
    assert logged_ids(svc, model_id) == ["req-1-0", "req-1-1"]


async def test_v2_text_categories_training_never_saw_are_unseen(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    inputs = [
        {"name": "x", "shape": [3], "datatype": "FP64", "data": [0.1, 0.2, 0.3]},
        {"name": "colour", "shape": [3, 1], "datatype": "BYTES", "data": ["red", "purple", None]},
    ]
    response = await svc.client.post(f"/v2/models/{model_id}/infer", json={"inputs": inputs})
    assert response.status_code == 200, response.text
    written(svc)

    colour = next(f for f in (await report(svc, model_id))["features"] if f["name"] == "colour")

    assert colour["unseen"] == {"count": 1, "top": [{"value": "purple", "count": 1}]}
    assert colour["missing_rate"]["live"] == pytest.approx(1 / 3)


async def test_gauges_carry_the_latest_report(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    await predict(svc, model_id, records=RECORDS)
    written(svc)
    body = await report(svc, model_id)
    metrics = (await svc.client.get("/metrics")).text
    x = next(f for f in body["features"] if f["name"] == "x")
    assert f'coppice_feature_psi{{feature="x",model="{model_id}"}} {x["psi"]}' in metrics
    assert f'coppice_prediction_psi{{model="{model_id}"}}' in metrics
    assert f'coppice_predictions_logged_total{{model="{model_id}"}} 4.0' in metrics
    assert prediction_log(svc).counts.logged[model_id] == 4


async def test_gauges_follow_the_log_without_a_report(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    await predict(svc, model_id, records=RECORDS)
    log = written(svc)

    metrics = (await svc.client.get("/metrics")).text

    # Set by the writer from the last day's hourly counts, as the default report reads them.
    assert set(log.feature_psi[model_id]) == {"x", "z", "colour"}
    x = log.feature_psi[model_id]["x"]
    assert f'coppice_feature_psi{{feature="x",model="{model_id}"}} {x}' in metrics
    assert f'coppice_prediction_psi{{model="{model_id}"}}' in metrics
    body = await report(svc, model_id)
    assert next(f["psi"] for f in body["features"] if f["name"] == "x") == pytest.approx(x)


async def test_a_full_queue_drops_rows_without_waiting(svc: Service) -> None:
    # A log of its own on the app's database, its writer not started yet: the queue holds one
    # request, so the second is counted as dropped at once, and the first is written later.
    model_id = await svc.train("random_forest", features=["x", "z"])
    log = PredictionLog(svc.db_engine, rate=1.0, max_rows=100, queue_size=1)

    def request(ids: list[str]) -> LoggedRequest:
        return LoggedRequest(
            model_id=model_id,
            logged_at=datetime.now(UTC),
            X=np.zeros((len(ids), 2)),
            predictions=["no"] * len(ids),
            proba=None,
            ids=ids,
            features=["x", "z"],
            categories={},
            classes=["no", "yes"],
            cell=None,
        )

    log.submit(request(["a", "b"]))
    log.submit(request(["c", "d", "e"]))
    assert log.counts.dropped == 3
    log.start()
    try:
        assert log.drain(30)
    finally:
        log.stop()
    assert log.counts.logged[model_id] == 2 and log.counts.failed == 0
    assert logged_ids(svc, model_id) == ["a", "b"]


async def test_the_writer_is_a_process_started_again_when_it_dies(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    await predict(svc, model_id, records=RECORDS, ids=["a", "b", "c", "d"])
    log = written(svc)
    first = log.writer_process
    assert first is not None and first.pid not in (None, os.getpid())
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    first.join(30)

    await predict(svc, model_id, records=RECORDS[:2], ids=["e", "f"])
    written(svc)

    again = log.writer_process
    assert again is not None and again.pid != first.pid and again.is_alive()
    assert logged_ids(svc, model_id) == ["a", "b", "c", "d", "e", "f"]
    assert log.counts.failed == 0 and log.counts.logged[model_id] == 6


async def test_forgetting_a_model_starts_no_writer(svc: Service) -> None:
    # A log that never wrote has no writer process; forgetting a model must not start one.
    log = PredictionLog(svc.db_engine, rate=1.0, max_rows=100, queue_size=10)
    log.start()
    try:
        log.forget("a-model")
        assert log.drain(30)
        assert log.writer_process is None
    finally:
        log.stop()
