"""The prediction log's hourly counts: ``prediction_counts`` and ``prediction_unseen``; and
a partial index of the log's labelled rows (``ix_prediction_log_labelled``: model, time, where
``actual`` is set), through which a report reads a window's labelled rows alone.

The log's writer adds each batch's counts per model and hour (rows logged, rows per baseline
bin of each feature and of the prediction, unseen values) in the batch's transaction, and a
drift report sums them instead of reading a blob per logged row.

The rows already logged are counted here, a chunk of rows at a time, in plain SQL and NumPy
(not the service's code, which may change after this revision): per model and hour, the rows,
the bins of each row's ``bins`` blob (uint16 per feature and then the prediction), and its
unseen values by the feature's position in the model's ``features`` (at most 100 distinct
values per model, hour and feature, as the writer keeps). The counts are held in memory
until the end: a few hundred integers per model and hour of log.

Revision ID: 0012
Revises: 0011_batch_predictions
Create Date: 2026-11-28 19:30:00
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011_batch_predictions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHUNK = 50_000
UNSEEN_VALUES_PER_HOUR = 100


def upgrade() -> None:
    op.create_table(
        "prediction_counts",
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("column_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("bin", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_prediction_counts_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "hour", "column_index", "bin", name=op.f("pk_prediction_counts")
        ),
    )
    op.create_table(
        "prediction_unseen",
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("column_index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_prediction_unseen_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "hour", "column_index", "value", name=op.f("pk_prediction_unseen")
        ),
    )
    op.create_index(
        "ix_prediction_log_labelled",
        "prediction_log",
        ["model_id", "logged_at"],
        unique=False,
        sqlite_where=sa.text("actual IS NOT NULL"),
        postgresql_where=sa.text("actual IS NOT NULL"),
    )
    _count_logged_rows()


def _hour(moment: datetime) -> datetime:
    if moment.tzinfo is None:  # SQLite holds naive UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _count_logged_rows() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    log = sa.table(
        "prediction_log",
        sa.column("id", sa.Integer()),
        sa.column("model_id", sa.String()),
        sa.column("logged_at", sa.DateTime(timezone=True)),
        sa.column("bins", sa.LargeBinary()),
        sa.column("unseen", sa.JSON()),
    )
    models = sa.table("models", sa.column("id", sa.String()), sa.column("features", sa.JSON()))
    positions: dict[str, dict[str, int]] = {}
    rows: Counter[tuple[str, datetime]] = Counter()
    bins: dict[tuple[str, datetime], np.ndarray] = {}
    unseen: dict[tuple[str, datetime, int], Counter[str]] = {}
    last = 0
    while True:
        chunk = bind.execute(
            sa.select(log.c.id, log.c.model_id, log.c.logged_at, log.c.bins, log.c.unseen)
            .where(log.c.id > last)
            .order_by(log.c.id)
            .limit(CHUNK)
        ).all()
        if not chunk:
            break
        last = chunk[-1][0]
        for _, model_id, logged_at, blob, found in chunk:
            key = (model_id, _hour(logged_at))
            rows[key] += 1
            if blob:
                row = np.frombuffer(bytes(blob), dtype=np.uint16).astype(np.int64)
                width = int(row.max()) + 1
                grid = np.zeros((row.size, width), dtype=np.int64)
                grid[np.arange(row.size), row] = 1
                held = bins.get(key)
                if held is None:
                    bins[key] = grid
                else:
                    grown = np.zeros(
                        (max(held.shape[0], row.size), max(held.shape[1], width)), dtype=np.int64
                    )
                    grown[: held.shape[0], : held.shape[1]] += held
                    grown[: row.size, :width] += grid
                    bins[key] = grown
            if isinstance(found, str):
                found = json.loads(found)
            if found:
                if model_id not in positions:
                    features = bind.execute(
                        sa.select(models.c.features).where(models.c.id == model_id)
                    ).scalar()
                    if isinstance(features, str):
                        features = json.loads(features)
                    positions[model_id] = {f["name"]: j for j, f in enumerate(features or [])}
                for name, value in found.items():
                    if name in positions[model_id]:
                        values = unseen.setdefault((*key, positions[model_id][name]), Counter())
                        if value in values or len(values) < UNSEEN_VALUES_PER_HOUR:
                            values[str(value)] += 1
    counts_table = sa.table(
        "prediction_counts",
        sa.column("model_id", sa.String()),
        sa.column("hour", sa.DateTime(timezone=True)),
        sa.column("column_index", sa.Integer()),
        sa.column("bin", sa.Integer()),
        sa.column("count", sa.BigInteger()),
    )
    unseen_table = sa.table(
        "prediction_unseen",
        sa.column("model_id", sa.String()),
        sa.column("hour", sa.DateTime(timezone=True)),
        sa.column("column_index", sa.Integer()),
        sa.column("value", sa.String()),
        sa.column("count", sa.BigInteger()),
    )

    def stored(hour: datetime) -> datetime:
        return hour.replace(tzinfo=None) if sqlite else hour

    out: list[dict[str, Any]] = []
    for (model_id, hour), n in sorted(rows.items()):
        out.append({"model_id": model_id, "hour": stored(hour), "column_index": -1, "bin": 0,
                    "count": n})  # fmt: skip
        held = bins.get((model_id, hour))
        if held is not None:
            for column, bin_ in zip(*np.nonzero(held), strict=True):
                out.append({"model_id": model_id, "hour": stored(hour),
                            "column_index": int(column), "bin": int(bin_),
                            "count": int(held[column, bin_])})  # fmt: skip
    for start in range(0, len(out), CHUNK):
        bind.execute(sa.insert(counts_table), out[start : start + CHUNK])
    kept = [
        {"model_id": model_id, "hour": stored(hour), "column_index": column, "value": value,
         "count": n}
        for (model_id, hour, column), values in sorted(unseen.items())
        for value, n in values.items()
    ]  # fmt: skip
    for start in range(0, len(kept), CHUNK):
        bind.execute(sa.insert(unseen_table), kept[start : start + CHUNK])


def downgrade() -> None:
    op.drop_index("ix_prediction_log_labelled", table_name="prediction_log")
    op.drop_table("prediction_unseen")
    op.drop_table("prediction_counts")
