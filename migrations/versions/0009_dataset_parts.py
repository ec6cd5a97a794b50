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

The BLOB decoder and the part writer this revision uses are its own copies, frozen as they were
when it was written (the parts' layout and types of ``notes/distributed-data.md``): a later
change to the service's must not change what an old revision does. Only the store's interface
(``writer``, ``delete``), like Alembic's, is shared.

Revision ID: 0009_dataset_parts
Revises: 0008_prediction_log
Create Date: 2026-11-28 16:30:00
"""

from __future__ import annotations

import contextlib
import json
import logging
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
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


def _decoded(connection: sa.Connection, dataset_id: str) -> list[tuple[str, pa.Array]] | None:
    rows = connection.execute(
        sa.select(_columns.c.name, _columns.c.kind, _columns.c.data, _columns.c.data_format)
        .where(_columns.c.dataset_id == dataset_id)
        .order_by(_columns.c.position)
    ).all()
    try:
        return [(r.name, _decode(r.name, r.kind, r.data, r.data_format)) for r in rows]
    except _Unreadable as error:
        logger.warning("dataset %s left in the database, unreadable: %s", dataset_id, error)
        return None


def _store() -> Any:
    attributes = context.config.attributes if context.config is not None else {}
    if attributes.get("store") is not None:
        return attributes["store"]
    from service.config import Settings
    from service.store import store_from_settings

    return store_from_settings(Settings())


def _move_one(
    connection: sa.Connection, store: Any, dataset_id: str, columns: list[tuple[str, pa.Array]]
) -> None:
    # A run that stopped after inserting parts but before emptying the columns: start again.
    connection.execute(sa.delete(_parts).where(_parts.c.dataset_id == dataset_id))
    table = pa.table(dict(columns))
    del columns
    written = _write_parts(store, dataset_id, table)
    del table
    if written:
        connection.execute(
            sa.insert(_parts),
            [
                {
                    "dataset_id": dataset_id,
                    "part": index,
                    "row_offset": row_offset,
                    "n_rows": n_rows,
                    "path": stored.path,
                    "size": stored.size,
                    "sha256": stored.sha256,
                    "source_stamp": None,
                }
                for index, row_offset, n_rows, stored in written
            ],
        )
    connection.execute(
        sa.update(_columns)
        .where(_columns.c.dataset_id == dataset_id)
        .values(data=b"", data_format=2)
    )


# --- frozen: the format-1 BLOBs, and the parts as this revision writes them -------------------

_LENGTH = struct.Struct("<I")
_MAX_GROUP_ROWS = 1 << 17
_MIN_GROUP_ROWS = 1 << 10
_GROUP_BYTES = 32 * 1024 * 1024
_PART_BYTES = 128 * 1024 * 1024


class _Unreadable(ValueError):
    """A column BLOB that does not decode."""


def _decode(name: str, kind: str, data: bytes, data_format: int) -> pa.Array:
    """A format-1 BLOB (zlib of little-endian float64, NaN missing; or of a 4-byte length, a
    JSON list of categories and int32 codes, -1 missing) as the parts' column: float64 or
    strings, null missing."""
    if data_format != 1:
        raise _Unreadable(f"column '{name}' has unknown data format {data_format}")
    try:
        payload = zlib.decompress(data)
    except zlib.error as error:
        raise _Unreadable(f"column '{name}' data is not zlib-compressed: {error}") from None
    if kind == "numeric":
        if len(payload) % 8:
            raise _Unreadable(f"column '{name}' data is not a whole number of float64 values")
        values = np.frombuffer(payload, dtype="<f8").astype(np.float64)
        return pa.array(values, type=pa.float64(), from_pandas=True)
    if kind != "categorical":
        raise _Unreadable(f"column '{name}' has unknown kind '{kind}'")
    try:
        (length,) = _LENGTH.unpack_from(payload)
        categories = json.loads(payload[_LENGTH.size : _LENGTH.size + length])
        codes_bytes = payload[_LENGTH.size + length :]
    except (struct.error, ValueError) as error:
        raise _Unreadable(f"column '{name}' categories are unreadable: {error}") from None
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise _Unreadable(f"column '{name}' categories are not a list of strings")
    if len(codes_bytes) % 4:
        raise _Unreadable(f"column '{name}' data is not a whole number of int32 codes")
    codes = np.frombuffer(codes_bytes, dtype="<i4").astype(np.int32)
    if codes.size and (codes.min() < -1 or codes.max() >= len(categories)):
        raise _Unreadable(f"column '{name}' has codes outside its categories")
    indices = pa.array(codes, type=pa.int32(), mask=codes < 0)
    dictionary = pa.array(categories, type=pa.string())
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.string())


def _layout(table: pa.Table) -> tuple[int, int]:
    """Rows a row group, row groups a part: the largest power of two of rows (2^17 down to
    2^10) whose group fits 32 MiB, as many groups a part as fit 128 MiB."""
    first = table.slice(0, _MAX_GROUP_ROWS).combine_chunks()
    row_bytes = max(1.0, first.nbytes / first.num_rows) if first.num_rows else 1.0
    rows = _MAX_GROUP_ROWS
    while rows > _MIN_GROUP_ROWS and rows * row_bytes > _GROUP_BYTES:
        rows //= 2
    return rows, max(1, int(_PART_BYTES // max(1.0, rows * row_bytes)))


def _write_parts(store: Any, dataset_id: str, table: pa.Table) -> list[tuple[int, int, int, Any]]:
    """``datasets/<id>/part-NNNNN.parquet``, zstd, strings dictionary-encoded, statistics on;
    ``(index, row_offset, n_rows, stored object)`` each. Written parts are deleted on failure."""
    group_rows, groups = _layout(table)
    part_rows = group_rows * groups
    strings = [field.name for field in table.schema if not pa.types.is_floating(field.type)]
    written: list[tuple[int, int, int, Any]] = []
    try:
        for index, offset in enumerate(range(0, table.num_rows, part_rows)):
            rows = table.slice(offset, part_rows)
            path = f"datasets/{dataset_id}/part-{index:05d}.parquet"
            with store.writer(path) as sink:
                parquet = pq.ParquetWriter(
                    sink,
                    table.schema,
                    compression="zstd",
                    use_dictionary=strings,
                    write_statistics=True,
                )
                parquet.write_table(rows, row_group_size=group_rows)
                parquet.close()
            written.append((index, offset, rows.num_rows, sink.stored()))
    except BaseException:
        for _, _, _, stored in written:
            with contextlib.suppress(Exception):  # what is left, store gc sweeps
                store.delete(stored.path)
        raise
    return written


def downgrade() -> None:
    # The parts are not moved back: a downgrade past this revision loses uploaded datasets'
    # values (their rows stay, with empty data), as the store keeps them for a re-upgrade.
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("source_url")
    op.drop_table("dataset_parts")
