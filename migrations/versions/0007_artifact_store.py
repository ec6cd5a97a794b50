"""Model artifacts move out of SQL into the data store: ``model_artifacts.path`` names the
object (``models/<model id>/model.cpm``) and the ``data`` BLOB goes.

PostgreSQL's ``bytea`` and SQLite's BLOB stop at 1 GB a value, and a 100-tree forest on a
million rows comes close; the data store (``service.store``) has no such ceiling. Each row's
bytes are written to the store as they are, and the row keeps the size and SHA-256 recorded
at training, so an artifact that was already damaged in SQL is still refused when loaded,
never served.

The move goes row by row (ids read in batches, one BLOB in memory at a time) and is
resumable: a re-run after a crash skips the steps already done (the column added, the rows
already naming an object) and does not write an object again that the store already holds
with the row's size and SHA-256. On PostgreSQL the whole revision is one transaction, so a
crash leaves the database at the previous revision, BLOBs intact, and the objects already
written are found again; objects no row ends up naming are ``coppice store gc``'s.

The store is the one ``service.db.migrate.upgrade_to_head`` is given (``coppice migrate``
and ``serve`` pass ``COPPICE_STORE_URL``'s), else the ``COPPICE_*`` settings'; it is opened
only when there is a row to move.

Revision ID: 0007_artifact_store
Revises: 0006_column_distributions
Create Date: 2026-11-28 16:00:00
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision: str = "0007_artifact_store"
down_revision: str | None = "0006_column_distributions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger("alembic.runtime.migration")

# Ids read per query; the BLOBs themselves are read one at a time.
BATCH = 100

artifacts = sa.table(
    "model_artifacts",
    sa.column("model_id", sa.String),
    sa.column("data", sa.LargeBinary),
    sa.column("path", sa.Text),
    sa.column("size_bytes", sa.BigInteger),
    sa.column("sha256", sa.String),
)


def _object_path(model_id: str) -> str:
    # Fixed here, not imported: a revision must keep doing what it did when service code moves.
    return f"models/{model_id}/model.cpm"


def _store() -> Any:
    store = context.config.attributes.get("store")
    if store is None:
        from service.config import Settings
        from service.store import store_from_settings

        store = store_from_settings(Settings())
    return store


def _columns() -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns("model_artifacts")}


def upgrade() -> None:
    if "path" not in _columns():
        with op.batch_alter_table("model_artifacts", schema=None) as batch_op:
            batch_op.add_column(sa.Column("path", sa.Text(), nullable=True))
    if "data" in _columns():
        _move_to_store()
        with op.batch_alter_table("model_artifacts", schema=None) as batch_op:
            batch_op.alter_column("path", existing_type=sa.Text(), nullable=False)
            batch_op.drop_column("data")


def _move_to_store() -> None:
    bind = op.get_bind()
    store = None
    moved = 0
    after = ""
    while True:
        ids = list(
            bind.execute(
                sa.select(artifacts.c.model_id)
                .where(artifacts.c.path.is_(None), artifacts.c.model_id > after)
                .order_by(artifacts.c.model_id)
                .limit(BATCH)
            ).scalars()
        )
        if not ids:
            break
        store = store or _store()
        for model_id in ids:
            data = bind.execute(
                sa.select(artifacts.c.data).where(artifacts.c.model_id == model_id)
            ).scalar_one()
            path = _object_path(model_id)
            _write_unless_there(store, path, bytes(data or b""))
            bind.execute(
                sa.update(artifacts).where(artifacts.c.model_id == model_id).values(path=path)
            )
            moved += 1
        after = ids[-1]
        logger.info("0007: %d model artifact(s) moved to the data store", moved)


def _write_unless_there(store: Any, path: str, data: bytes) -> None:
    """Write ``data`` at ``path``, unless a crashed earlier run already wrote exactly it."""
    from service.store import ObjectCorrupt, StoredObject

    expected = StoredObject(path, len(data), hashlib.sha256(data).hexdigest())
    try:
        for _ in store.chunks(expected):
            pass
        return  # there, whole and the same: a re-run after a crash
    except ObjectCorrupt:  # ObjectMissing too: not written yet, or written partly
        pass
    store.put(path, data)


def downgrade() -> None:
    with op.batch_alter_table("model_artifacts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(
            artifacts.c.model_id, artifacts.c.path, artifacts.c.size_bytes, artifacts.c.sha256
        )
    ).all()
    if rows:
        from service.store import StoredObject

        store = _store()
        for model_id, path, size, sha256 in rows:
            # Read back as recorded: a damaged object stops the downgrade, naming it.
            data = store.get(StoredObject(path, size, sha256))
            bind.execute(
                sa.update(artifacts).where(artifacts.c.model_id == model_id).values(data=data)
            )
    with op.batch_alter_table("model_artifacts", schema=None) as batch_op:
        batch_op.alter_column("data", existing_type=sa.LargeBinary(), nullable=False)
        batch_op.drop_column("path")
