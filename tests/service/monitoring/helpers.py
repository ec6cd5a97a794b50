"""Helpers of the monitoring tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.tables import PredictionLogRecord
from service.monitoring.log import PredictionLog
from tests.service.models.helpers import Service

RECORDS: list[dict[str, Any]] = [
    {"x": 1.2, "z": 0.1, "colour": "red"},
    {"x": -1.5, "z": None, "colour": "blue"},
    {"x": None, "z": 0.4, "colour": None},
    {"x": 0.3, "z": 0.0, "colour": "purple"},  # a colour training never saw
]


async def predict(svc: Service, model_id: str, **body: Any) -> dict[str, Any]:
    """``POST /v1/models/{id}/predict`` with ``body``; the answer must be a 200."""
    response = await svc.client.post(f"/v1/models/{model_id}/predict", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def prediction_log(svc: Service) -> PredictionLog:
    log = svc.app.state.resources.prediction_log
    assert isinstance(log, PredictionLog)
    return log


def written(svc: Service) -> PredictionLog:
    """The app's log once everything submitted so far is written."""
    log = prediction_log(svc)
    assert log.drain(30)
    return log


def logged_ids(svc: Service, model_id: str) -> list[str]:
    with Session(svc.db_engine) as session:
        return list(
            session.scalars(
                select(PredictionLogRecord.row_id)
                .where(PredictionLogRecord.model_id == model_id)
                .order_by(PredictionLogRecord.id)
            )
        )
