"""All SQL of the prediction log: batch inserts, the per-model cap, feedback, report reads,
and the hourly counts (``prediction_counts``, ``prediction_unseen``) the writer keeps."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Dialect, Table, and_, bindparam, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from service.db.tables import (
    ModelRecord,
    PredictionCountRecord,
    PredictionLogRecord,
    PredictionUnseenRecord,
)

LOG = cast(Table, PredictionLogRecord.__table__)
COUNTS = cast(Table, PredictionCountRecord.__table__)
UNSEEN = cast(Table, PredictionUnseenRecord.__table__)
# Newest labelled rows a report scores at most (docs/monitoring.md).
LABELLED_ROWS = 100_000


# The columns of a row as ``insert_rows`` takes it, in this order.
# ``actual`` is not among them: it is NULL until feedback sets it, and a column left out of
# the INSERT is NULL without a ninth parameter bound for each row.
ROW_COLUMNS = (
    "model_id", "row_id", "logged_at", "features", "bins", "unseen", "prediction", "proba",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class RowBinders:
    """The database's form of the columns whose Python values need converting (timestamps,
    a JSON document), as SQLAlchemy's own types convert them."""

    logged_at: Callable[[datetime], Any]
    unseen: Callable[[dict[str, str]], Any]
    hour: Callable[[datetime], Any]


def row_binders(dialect: Dialect) -> RowBinders:
    def binder(table: Table, column: str) -> Callable[[Any], Any]:
        processor = table.c[column].type.dialect_impl(dialect).bind_processor(dialect)
        return processor if processor is not None else _same

    return RowBinders(
        logged_at=binder(LOG, "logged_at"),
        unseen=binder(LOG, "unseen"),
        hour=binder(COUNTS, "hour"),
    )


def _same(value: Any) -> Any:
    return value


def insert_rows(session: Session, rows: Sequence[tuple[Any, ...]]) -> None:
    """One executemany of ``rows`` (tuples in ``ROW_COLUMNS`` order, timestamps and JSON
    bound by ``row_binders``) straight through the driver: SQLAlchemy's ``insert`` builds a
    dict and runs a bind processor per cell, which cost more than the database's insert."""
    if not rows:
        return
    connection = session.connection()
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    statement = (
        f"INSERT INTO {LOG.name} ({', '.join(ROW_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(ROW_COLUMNS))})"
    )
    connection.exec_driver_sql(statement, list(rows))


def trim(
    session: Session, model_id: str, keep: int
) -> list[tuple[datetime, bytes | None, dict[str, Any] | None]]:
    """Delete all but the newest ``keep`` rows of the model (by id, the order they were
    written in); returns the deleted rows' ``(logged_at, bins, unseen)``, whose counts the
    caller takes away."""
    cut = session.scalar(
        select(PredictionLogRecord.id)
        .where(PredictionLogRecord.model_id == model_id)
        .order_by(PredictionLogRecord.id.desc())
        .offset(keep)
        .limit(1)
    )
    if cut is None:
        return []
    going = [LOG.c.model_id == model_id, LOG.c.id <= cut]
    rows = session.execute(select(LOG.c.logged_at, LOG.c.bins, LOG.c.unseen).where(*going))
    found = [(t, b, u) for t, b, u in rows.all()]
    session.execute(delete(LOG).where(*going))
    return found


def count_rows(session: Session, model_id: str) -> int:
    return int(
        session.scalar(select(func.count()).select_from(LOG).where(LOG.c.model_id == model_id)) or 0
    )


def _adding_upsert(session: Session, table: Table, keys: list[str]) -> Any:
    """``INSERT … ON CONFLICT (keys) DO UPDATE SET count = count + excluded.count``: adding is
    atomic in the database, so API replicas writing the same hour never lose a count."""
    dialect = session.get_bind().dialect.name
    statement = (postgresql if dialect == "postgresql" else sqlite).insert(table)
    return statement.on_conflict_do_update(
        index_elements=keys, set_={"count": table.c.count + statement.excluded.count}
    )


COUNT_KEYS = ["model_id", "hour", "column_index", "bin"]


def add_counts(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Add ``rows`` (``model_id, hour, column_index, bin, count``; in key order, so two
    writers lock rows in the same order) to ``prediction_counts``.

    The upsert ``_adding_upsert`` builds, written out (SQLite and PostgreSQL spell it alike)
    and run through the driver's ``executemany``, as ``insert_rows`` does: a batch upserts a
    few hundred counts, and SQLAlchemy's per-row processing cost the writer more than them."""
    if not rows:
        return
    connection = session.connection()
    hour = row_binders(connection.dialect).hour
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    statement = (
        f"INSERT INTO {COUNTS.name} ({', '.join(COUNT_KEYS)}, count) "
        f"VALUES ({', '.join([mark] * (len(COUNT_KEYS) + 1))}) "
        f"ON CONFLICT ({', '.join(COUNT_KEYS)}) "
        f"DO UPDATE SET count = {COUNTS.name}.count + excluded.count"
    )
    # A batch's counts share an hour or two: each bound once (the binder formats a string).
    hours = {moment: hour(moment) for moment in {r["hour"] for r in rows}}
    connection.exec_driver_sql(
        statement,
        [(r["model_id"], hours[r["hour"]], r["column_index"], r["bin"], r["count"]) for r in rows],
    )


def take_counts(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Subtract ``rows`` from ``prediction_counts``; counts that reach zero are deleted."""
    if not rows:
        return
    key = [COUNTS.c[name] == bindparam(f"k_{name}") for name in COUNT_KEYS]
    statement = update(COUNTS).where(*key).values(count=COUNTS.c.count - bindparam("k_count"))
    session.connection().execute(
        statement, [{f"k_{name}": row[name] for name in (*COUNT_KEYS, "count")} for row in rows]
    )
    _drop_zeros(session, COUNTS, rows)


def _drop_zeros(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    for model_id, hour in sorted({(row["model_id"], row["hour"]) for row in rows}):
        session.execute(
            delete(table).where(
                table.c.model_id == model_id, table.c.hour == hour, table.c.count <= 0
            )
        )


def add_unseen(
    session: Session, key: tuple[str, datetime, int], values: dict[str, int], cap: int
) -> None:
    """Add unseen ``values`` of one ``(model id, hour, feature position)``: those already
    kept, and new ones while the key holds fewer than ``cap`` values (most frequent first)."""
    model_id, hour, column = key
    where = and_(UNSEEN.c.model_id == model_id, UNSEEN.c.hour == hour,
                 UNSEEN.c.column_index == column)  # fmt: skip
    kept = set(session.scalars(select(UNSEEN.c.value).where(where)))
    room = max(0, cap - len(kept))
    chosen = [v for v in values if v in kept]
    chosen += sorted((v for v in values if v not in kept), key=lambda v: -values[v])[:room]
    rows = [{"model_id": model_id, "hour": hour, "column_index": column, "value": v,
             "count": values[v]} for v in sorted(chosen)]  # fmt: skip
    if rows:
        keys = ["model_id", "hour", "column_index", "value"]
        session.execute(_adding_upsert(session, UNSEEN, keys), rows)


def take_unseen(session: Session, key: tuple[str, datetime, int], values: dict[str, int]) -> None:
    """Subtract unseen ``values`` kept for ``key``; values never kept (past the cap) are
    skipped, and counts that reach zero deleted."""
    model_id, hour, column = key
    statement = (
        update(UNSEEN)
        .where(UNSEEN.c.model_id == model_id, UNSEEN.c.hour == hour,
               UNSEEN.c.column_index == column, UNSEEN.c.value == bindparam("v"))
        .values(count=UNSEEN.c.count - bindparam("n"))
    )  # fmt: skip
    if values:
        session.connection().execute(statement, [{"v": v, "n": n} for v, n in values.items()])
        _drop_zeros(session, UNSEEN, [{"model_id": model_id, "hour": hour}])


def model_features(session: Session, model_id: str) -> list[str]:
    features = session.scalar(select(ModelRecord.features).where(ModelRecord.id == model_id))
    return [str(f["name"]) for f in features or []]


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


def window_totals(
    session: Session, model_id: str, since: datetime, until: datetime
) -> list[tuple[int, int, int]]:
    """``(column, bin, count)`` summed over the hours in ``[since, until)`` (whole hours)."""
    rows = session.execute(
        select(COUNTS.c.column_index, COUNTS.c.bin, func.sum(COUNTS.c.count))
        .where(COUNTS.c.model_id == model_id, COUNTS.c.hour >= since, COUNTS.c.hour < until)
        .group_by(COUNTS.c.column_index, COUNTS.c.bin)
    )
    return [(int(c), int(b), int(n)) for c, b, n in rows.all()]


def window_hourly(
    session: Session, model_id: str, since: datetime, until: datetime, columns: Sequence[int]
) -> list[tuple[datetime, int, int, int]]:
    """``(hour, column, bin, count)`` of ``columns`` for each hour in ``[since, until)``."""
    rows = session.execute(
        select(COUNTS.c.hour, COUNTS.c.column_index, COUNTS.c.bin, COUNTS.c.count).where(
            COUNTS.c.model_id == model_id,
            COUNTS.c.hour >= since,
            COUNTS.c.hour < until,
            COUNTS.c.column_index.in_(list(columns)),
        )
    )
    return [(h, int(c), int(b), int(n)) for h, c, b, n in rows.all()]


def window_unseen_counts(
    session: Session, model_id: str, since: datetime, until: datetime
) -> list[tuple[int, str, int]]:
    """``(feature position, value, count)`` of the unseen values kept for the window."""
    rows = session.execute(
        select(UNSEEN.c.column_index, UNSEEN.c.value, func.sum(UNSEEN.c.count))
        .where(UNSEEN.c.model_id == model_id, UNSEEN.c.hour >= since, UNSEEN.c.hour < until)
        .group_by(UNSEEN.c.column_index, UNSEEN.c.value)
    )
    return [(int(c), str(v), int(n)) for c, v, n in rows.all()]


def window_rows(
    session: Session, model_id: str, since: datetime, until: datetime
) -> list[tuple[datetime, bytes | None, dict[str, Any] | None]]:
    """``(logged_at, bins, unseen)`` of every row logged in ``[since, until)``: the slow way
    to the counts, which the tests compare the hourly counts with."""
    rows = session.execute(
        select(LOG.c.logged_at, LOG.c.bins, LOG.c.unseen).where(
            LOG.c.model_id == model_id, LOG.c.logged_at >= since, LOG.c.logged_at < until
        )
    )
    return [(t, b, u) for t, b, u in rows.all()]


def window_labelled(
    session: Session, model_id: str, since: datetime, until: datetime, limit: int = LABELLED_ROWS
) -> tuple[int, list[tuple[datetime, float | None, bytes | None, float]]]:
    """How many rows in the window have an actual, and ``(logged_at, prediction, proba,
    actual)`` of the newest ``limit`` of them (oldest first)."""
    where = (
        LOG.c.model_id == model_id,
        LOG.c.actual.is_not(None),
        LOG.c.logged_at >= since,
        LOG.c.logged_at < until,
    )
    total = int(session.scalar(select(func.count()).select_from(LOG).where(*where)) or 0)
    rows = session.execute(
        select(LOG.c.logged_at, LOG.c.prediction, LOG.c.proba, LOG.c.actual)
        .where(*where)
        .order_by(LOG.c.logged_at.desc(), LOG.c.id.desc())
        .limit(limit)
    )
    found = [(t, p, q, float(a)) for t, p, q, a in rows.all() if a is not None]
    found.reverse()
    return total, found
