"""All SQL of the prediction log: batch inserts, the per-model cap, feedback, report reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, update
from sqlalchemy.orm import Session

from service.db.tables import ModelRecord, PredictionLogRecord

LOG = cast(Table, PredictionLogRecord.__table__)


def insert_rows(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """One executemany of ``rows`` (dicts of the table's columns)."""
    if rows:
        session.execute(insert(LOG), list(rows))


def trim(session: Session, model_id: str, keep: int) -> int:
    """Delete all but the newest ``keep`` rows of the model (by id, the order they were
    written in); returns how many went."""
    cut = session.scalar(
        select(PredictionLogRecord.id)
        .where(PredictionLogRecord.model_id == model_id)
        .order_by(PredictionLogRecord.id.desc())
        .offset(keep)
        .limit(1)
    )
    if cut is None:
        return 0
    result = session.execute(
        delete(PredictionLogRecord).where(
            PredictionLogRecord.model_id == model_id, PredictionLogRecord.id <= cut
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def model_baseline(session: Session, model_id: str) -> tuple[bool, dict[str, Any] | None]:
    """``(exists, baseline)``: whether the model exists, and its training baseline if kept."""
    metrics = session.scalar(select(ModelRecord.metrics).where(ModelRecord.id == model_id))
    if metrics is None:
        return False, None
    return True, (metrics or {}).get("monitoring")


def set_actuals(session: Session, model_id: str, actuals: Iterable[tuple[str, float]]) -> int:
    """Join each ``(row id, actual)`` to the model's logged rows with that id; returns how
    many logged rows were updated."""
    pairs = [{"m": model_id, "r": row_id, "a": actual} for row_id, actual in actuals]
    if not pairs:
        return 0
    statement = (
        update(LOG)
        .where(LOG.c.model_id == bindparam("m"), LOG.c.row_id == bindparam("r"))
        .values(actual=bindparam("a"))
    )
    result = session.connection().execute(statement, pairs)
    return int(result.rowcount or 0)


def known_ids(session: Session, model_id: str, row_ids: Sequence[str]) -> set[str]:
    """Which of ``row_ids`` the model's log holds."""
    found: set[str] = set()
    for start in range(0, len(row_ids), 500):
        chunk = list(row_ids[start : start + 500])
        found.update(
            session.scalars(
                select(PredictionLogRecord.row_id).where(
                    PredictionLogRecord.model_id == model_id,
                    PredictionLogRecord.row_id.in_(chunk),
                )
            )
        )
    return found


def window_bins(session: Session, model_id: str, since: datetime, until: datetime) -> bytes:
    """The ``bins`` of every row logged in ``[since, until)``, one after another, fetched
    from the driver's cursor (SQLAlchemy's rows cost as much again as the driver's tuples)."""
    statement = select(LOG.c.bins).where(
        LOG.c.model_id == model_id,
        LOG.c.logged_at >= since,
        LOG.c.logged_at < until,
        LOG.c.bins.is_not(None),
    )
    result = session.connection().execute(statement)
    try:
        return b"".join(bytes(row[0]) for row in result.cursor.fetchall())
    finally:
        result.close()


def window_unseen(
    session: Session, model_id: str, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    return list(
        session.scalars(
            select(PredictionLogRecord.unseen).where(
                PredictionLogRecord.model_id == model_id,
                PredictionLogRecord.logged_at >= since,
                PredictionLogRecord.logged_at < until,
                PredictionLogRecord.unseen.is_not(None),
            )
        )
    )


def window_labelled(
    session: Session, model_id: str, since: datetime, until: datetime
) -> list[tuple[float | None, bytes | None, float]]:
    """``(prediction, proba, actual)`` of the rows in the window that have an actual."""
    rows = session.execute(
        select(
            PredictionLogRecord.prediction, PredictionLogRecord.proba, PredictionLogRecord.actual
        ).where(
            PredictionLogRecord.model_id == model_id,
            PredictionLogRecord.logged_at >= since,
            PredictionLogRecord.logged_at < until,
            PredictionLogRecord.actual.is_not(None),
        )
    )
    return [(p, q, float(a)) for p, q, a in rows.all() if a is not None]


def window_count(session: Session, model_id: str, since: datetime, until: datetime) -> int:
    return int(
        session.scalar(
            select(func.count()).where(
                PredictionLogRecord.model_id == model_id,
                PredictionLogRecord.logged_at >= since,
                PredictionLogRecord.logged_at < until,
            )
        )
        or 0
    )
