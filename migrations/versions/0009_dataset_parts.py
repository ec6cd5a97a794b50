"""Datasets as Parquet parts in the data store: ``dataset_parts``, ``datasets.source_url``, and
the column BLOBs of existing datasets moved into parts.

``dataset_parts`` names each part (path, size, SHA-256, global row offset); a registered table's
parts are its source's files, with their size and modification stamp instead of a digest.

Existing datasets are moved one at a time, a batch of ids read at a time: each dataset's
columns are decoded from their BLOBs, written to the store as parts (the store first), its part
rows inserted and its columns' ``data`` emptied with ``data_format`` 2 (in the parts). Only
columns still at format 1 are picked up, so a run that stops part-way (a crash, a store that
went away) is resumed by running the upgrade again: datasets already moved are skipped, and
objects a failed run wrote but no row names are swept by ``coppice store gc``. The column is
kept (empty) rather than dropped: on SQLite dropping it would copy the whole table.

This revision uses the service's column decoder and part writer: the BLOB format they read is
frozen (format 1 stays readable by the service for as long as this revision exists).

Revision ID: 0009_dataset_parts
Revises: 0008_prediction_log
Create Date: 2026-11-28 16:30:00
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision: str = "0009_dataset_parts"
down_revision: str | None = "0008_prediction_log"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger("alembic.runtime.migration")

# Datasets whose ids are read at once; each dataset is then moved on its own.
BATCH = 50

_datasets = sa.table(
    "datasets",
    sa.column("id", sa.String),
    sa.column("n_rows", sa.Integer),
)
_columns = sa.table(
    "dataset_columns",
    sa.column("dataset_id", sa.String),
    sa.column("position", sa.Integer),
    sa.column("name", sa.Text),
    sa.column("kind", sa.String),
    sa.column("data_format", sa.Integer),
    sa.column("data", sa.LargeBinary),
)
_parts = sa.table(
    "dataset_parts",
    sa.column("dataset_id", sa.String),
    sa.column("part", sa.Integer),
    sa.column("row_offset", sa.BigInteger),
    sa.column("n_rows", sa.BigInteger),
    sa.column("path", sa.Text),
    sa.column("size", sa.BigInteger),
    sa.column("sha256", sa.String),
    sa.column("source_stamp", sa.Text),
)


def upgrade() -> None:
    op.create_table(
        "dataset_parts",
        sa.Column("dataset_id", sa.String(length=36), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("row_offset", sa.BigInteger(), nullable=False),
        sa.Column("n_rows", sa.BigInteger(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("source_stamp", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_parts_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("dataset_id", "part", name=op.f("pk_dataset_parts")),
    )
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_url", sa.Text(), nullable=True))
    move_blobs_to_parts(op.get_bind())


def move_blobs_to_parts(connection: sa.Connection, store: Any = None) -> int:
    """Move every dataset still holding format-1 BLOBs into parts; the number moved.

    Datasets are visited in id order, a batch of ids at a time. One whose BLOBs cannot be
    decoded is left as it is, with a warning: the service reports it as corrupt when a job
    reads it, as it did before this revision.
    """
    moved = 0
    after = ""
    while True:
        ids = list(
            connection.execute(
                sa.select(_columns.c.dataset_id)
                .where(_columns.c.data_format == 1, _columns.c.dataset_id > after)
                .group_by(_columns.c.dataset_id)
                .order_by(_columns.c.dataset_id)
                .limit(BATCH)
            ).scalars()
        )
        if not ids:
            return moved
        for dataset_id in ids:
            columns = _decoded(connection, dataset_id)
            if columns is None:
                continue
            if store is None:
                store = _store()
            _move_one(connection, store, dataset_id, columns)
            moved += 1
        after = ids[-1]
        logger.info("moved %d datasets' columns into the data store", moved)


def _decoded(connection: sa.Connection, dataset_id: str) -> list[Any] | None:
    from service.datasets.columns import ColumnDataError, decode_column

    rows = connection.execute(
        sa.select(_columns.c.name, _columns.c.kind, _columns.c.data, _columns.c.data_format)
        .where(_columns.c.dataset_id == dataset_id)
        .order_by(_columns.c.position)
    ).all()
    try:
        return [decode_column(r.name, r.kind, r.data, r.data_format) for r in rows]
    except ColumnDataError as error:
        logger.warning("dataset %s left in the database, unreadable: %s", dataset_id, error)
        return None


def _store() -> Any:
    attributes = context.config.attributes if context.config is not None else {}
    if attributes.get("store") is not None:
        return attributes["store"]
    from service.config import Settings
    from service.store import store_from_settings

    return store_from_settings(Settings())


def _move_one(connection: sa.Connection, store: Any, dataset_id: str, columns: list[Any]) -> None:
    from service.datasets.arrow_columns import column_batches, schema_of
    from service.datasets.parts import PartWriter

    # A run that stopped after inserting parts but before emptying the columns: start again.
    connection.execute(sa.delete(_parts).where(_parts.c.dataset_id == dataset_id))
    writer = PartWriter(store, dataset_id, schema_of(columns))
    try:
        for batch in column_batches(columns, writer.row_group_rows):
            writer.write(batch)
        written = writer.finish()
    except BaseException:
        writer.abort()
        raise
    del columns
    if written:
        connection.execute(
            sa.insert(_parts),
            [
                {
                    "dataset_id": dataset_id,
                    "part": part.index,
                    "row_offset": part.row_offset,
                    "n_rows": part.n_rows,
                    "path": part.stored.path,
                    "size": part.stored.size,
                    "sha256": part.stored.sha256,
                    "source_stamp": None,
                }
                for part in written
            ],
        )
    connection.execute(
        sa.update(_columns)
        .where(_columns.c.dataset_id == dataset_id)
        .values(data=b"", data_format=2)
    )


def downgrade() -> None:
    # The parts are not moved back: a downgrade past this revision loses uploaded datasets'
    # values (their rows stay, with empty data), as the store keeps them for a re-upgrade.
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("source_url")
    op.drop_table("dataset_parts")
