"""The report from the log's hourly counts equals the report from its rows (SQLite, PostgreSQL).

The counts are what the writer adds per model and hour in each batch's transaction and takes
away when the cap trims rows; the rows are the log itself. Both are read by the same report
code (``service.monitoring.service.report`` with and without ``from_rows``), so equal reports
mean equal counts: rows, every bin of every feature and of the prediction, unseen values, and
the timeline.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from alembic import command
from sqlalchemy import func, select

from service.db.migrate import alembic_config, upgrade_to_head
from service.db.session import reading
from service.db.tables import ModelRecord, PredictionCountRecord
from service.monitoring import repository, service
from service.monitoring.aggregates import hour_of, steps, whole_hours
from service.monitoring.log import LoggedRequest
from service.monitoring.schemas import MonitoringReport
from tests.service.models.helpers import Service
from tests.service.monitoring.conftest import OpenService
from tests.service.monitoring.helpers import RECORDS, predict, prediction_log, written

pytestmark = pytest.mark.anyio


def submit_past(svc: Service, model_id: str, hours_ago: float, n: int, seed: int) -> None:
    """Hand the app's log ``n`` rows as if predicted ``hours_ago`` (the writer does the rest)."""
    with reading(svc.db_engine) as session:
        record = session.get(ModelRecord, model_id)
        assert record is not None
        features = [f["name"] for f in record.features]
        categories = (record.encoding or {}).get("categories") or {}
        classes = record.classes
    rng = np.random.default_rng(seed)
    X = rng.normal(0.5, 2.0, size=(n, len(features)))
    for j, name in enumerate(features):
        if name in categories:
            X[:, j] = rng.integers(0, len(categories[name]), size=n)
    X[rng.random(X.shape) < 0.1] = np.nan
    predictions = rng.choice(classes, size=n) if classes else rng.normal(size=n)
    prediction_log(svc).submit(
        LoggedRequest(
            model_id=model_id,
            logged_at=datetime.now(UTC) - timedelta(hours=hours_ago),
            X=X,
            predictions=predictions,
            proba=None,
            ids=[f"past-{seed}-{i}" for i in range(n)],
            features=features,
            categories=categories,
            classes=classes,
            cell=None,
        )
    )


def both(svc: Service, model_id: str, since: datetime, until: datetime) -> tuple[Any, Any]:
    start, end = service.window(since, until, datetime.now(UTC))
    with reading(svc.db_engine) as session:
        counted = service.report(session, None, model_id, start, end)
    with reading(svc.db_engine) as session:
        from_rows = service.report(session, None, model_id, start, end, from_rows=True)
    as_json = [
        MonitoringReport.model_validate(r).model_dump(mode="json") for r in (counted, from_rows)
    ]
    return as_json[0], as_json[1]


async def test_counts_equal_rows_over_hours_unseen_and_feedback(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    for k, hours_ago in enumerate([0.0, 1.0, 1.0, 5.5, 30.0]):
        submit_past(svc, model_id, hours_ago, n=40 + k, seed=k)
    answer = await predict(svc, model_id, records=RECORDS * 3, return_proba=True)
    await predict(svc, model_id, records=[{"x": 1.0, "z": 2.0, "colour": "teal"}] * 2)
    response = await svc.client.post(
        f"/v1/models/{model_id}/feedback",
        json={"ids": answer["ids"][:6], "actuals": ["yes", "no", "no", "yes", "no", "yes"]},
    )
    assert response.status_code == 202, response.text
    written(svc)
    now = datetime.now(UTC)

    for since in (now - timedelta(hours=48), now - timedelta(hours=3), now - timedelta(minutes=1)):
        counted, from_rows = both(svc, model_id, since, now)
        assert counted == from_rows

    counted, _ = both(svc, model_id, now - timedelta(hours=48), now)
    assert counted["n_predictions"] == sum(40 + k for k in range(5)) + 14
    colour = next(f for f in counted["features"] if f["name"] == "colour")
    assert colour["unseen"] == {"count": 5, "top": [{"value": "purple", "count": 3},
                                                    {"value": "teal", "count": 2}]}  # fmt: skip
    assert counted["performance"]["n_labelled"] == 6
    timeline = counted["timeline"]
    assert sum(p["n_predictions"] for p in timeline) == counted["n_predictions"]
    assert sum(p["n_labelled"] for p in timeline) == 6
    assert timeline[-1]["accuracy"] is not None


async def test_counts_follow_the_cap(open_service: OpenService) -> None:
    async with open_service(prediction_log_max_rows=10) as svc:
        model_id = await svc.train("random_forest")
        submit_past(svc, model_id, 2.0, n=8, seed=1)
        for _ in range(3):
            await predict(svc, model_id, records=RECORDS)
        written(svc)
        now = datetime.now(UTC)
        counted, from_rows = both(svc, model_id, now - timedelta(hours=24), now)
        assert counted == from_rows
        assert counted["n_predictions"] == 10
        colour = next(f for f in counted["features"] if f["name"] == "colour")
        assert colour["unseen"]["count"] == 3
        with reading(svc.db_engine) as session:  # counts that fell to zero are gone
            assert not session.scalar(select(func.count()).where(PredictionCountRecord.count <= 0))


async def test_a_model_without_a_baseline_counts_its_rows(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with reading(svc.db_engine) as session:
        record = session.get(ModelRecord, model_id)
        assert record is not None
        metrics = dict(record.metrics or {})
    metrics.pop("monitoring")
    with svc.db_engine.begin() as connection:
        connection.execute(
            ModelRecord.__table__.update().where(ModelRecord.id == model_id).values(metrics=metrics)
        )
    await predict(svc, model_id, records=RECORDS)
    written(svc)
    now = datetime.now(UTC)
    counted, from_rows = both(svc, model_id, now - timedelta(hours=1), now)
    assert counted == from_rows and counted["n_predictions"] == 4


async def test_unseen_values_kept_per_hour_are_capped(svc: Service) -> None:
    prediction_log(svc).unseen_values = 2  # before the writer process starts with it
    model_id = await svc.train("random_forest")
    rows = [{"x": 1.0, "z": 0.0, "colour": c} for c in ["u1", "u1", "u1", "u2", "u2", "u3"]]
    await predict(svc, model_id, records=rows)
    await predict(svc, model_id, records=[{"x": 1.0, "z": 0.0, "colour": "u4"}])
    written(svc)
    now = datetime.now(UTC)
    counted, _ = both(svc, model_id, now - timedelta(hours=1), now)
    colour = next(f for f in counted["features"] if f["name"] == "colour")
    # Every unseen row is counted; the values listed are the first two kept this hour.
    assert colour["unseen"] == {"count": 7, "top": [{"value": "u1", "count": 3},
                                                    {"value": "u2", "count": 2}]}  # fmt: skip


async def test_the_window_is_whole_hours(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    since = datetime(2026, 3, 1, 10, 17, 5, tzinfo=UTC)
    until = datetime(2026, 3, 1, 12, 0, 0, 1, tzinfo=UTC)
    response = await svc.client.get(
        f"/v1/models/{model_id}/monitoring",
        params={"since": since.isoformat(), "until": until.isoformat()},
    )
    assert response.status_code == 200, response.text
    window = response.json()["window"]
    assert datetime.fromisoformat(window["since"]) == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert datetime.fromisoformat(window["until"]) == datetime(2026, 3, 1, 13, tzinfo=UTC)
    assert [p["n_predictions"] for p in response.json()["timeline"]] == [0, 0, 0]


def test_whole_hours_and_steps() -> None:
    at = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert whole_hours(at, at) == (at, at)
    assert whole_hours(at + timedelta(minutes=1), at + timedelta(minutes=2)) == (
        at,
        at + timedelta(hours=1),
    )
    assert hour_of(datetime(2026, 3, 1, 11, 30, tzinfo=UTC)) == at + timedelta(hours=1)
    day = steps(at, at + timedelta(hours=25))
    assert len(day) == 25 and day[0] == (at, at + timedelta(hours=1))
    week = steps(at, at + timedelta(days=7))
    assert len(week) == 28 and all(b - a == timedelta(hours=6) for a, b in week)
    quarter = steps(at, at + timedelta(days=90))
    assert len(quarter) == 45 and quarter[0] == (at, at + timedelta(days=2))


async def test_the_migration_counts_rows_logged_before_it(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    submit_past(svc, model_id, 3.0, n=30, seed=3)
    await predict(svc, model_id, records=RECORDS)
    written(svc)
    now = datetime.now(UTC)
    before, _ = both(svc, model_id, now - timedelta(hours=24), now)
    url = svc.settings.resolved_database_url
    config = alembic_config(url)
    with svc.db_engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0011_batch_predictions")
    upgrade_to_head(url)

    after, from_rows = both(svc, model_id, now - timedelta(hours=24), now)
    assert after == before == from_rows


async def test_the_cap_is_applied_past_one_percent_of_it(open_service: OpenService) -> None:
    async with open_service(prediction_log_max_rows=100) as svc:
        model_id = await svc.train("random_forest")
        held = []
        for n in (104, 1, 1):
            if n == 1:
                await predict(svc, model_id, records=RECORDS[:1])
            else:
                submit_past(svc, model_id, 0.0, n=n, seed=5)
            written(svc)
            with reading(svc.db_engine) as session:
                held.append(repository.count_rows(session, model_id))
            now = datetime.now(UTC)
            counted, from_rows = both(svc, model_id, now - timedelta(hours=24), now)
            assert counted == from_rows
        # 104 rows trimmed to 100 at once; 101 is within 1% of the cap; 102 is past it.
        assert held == [100, 101, 100]
