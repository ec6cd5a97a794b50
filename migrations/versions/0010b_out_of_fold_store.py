"""Out-of-fold predictions move out of SQL into the data store: ``out_of_fold_predictions``
gains ``path``, ``size`` and ``sha256`` naming ``models/<model id>/out_of_fold.f8`` (raw
little-endian float64, row-major), and its ``data`` BLOB is emptied.

Each row's zlib BLOB is decompressed and written to the store; the row then names the object
and its ``data`` becomes empty (the column stays, as revision 0009 leaves
``dataset_columns.data``: dropping it on SQLite would copy the table). The move goes row by row
(ids read in batches, one BLOB in memory at a time) and is resumable: a re-run skips rows that
already name an object, and does not write again an object the store already holds with the
row's size and SHA-256. The store is the one ``upgrade_to_head`` is given, else the
``COPPICE_*`` settings'; it is opened only when there is a row to move.

Revision ID: 0010_oof_store
Revises: 0010_job_resources
Create Date: 2026-11-28 20:00:00
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op

revision: str = "0010_oof_store"
down_revision: str | None = "0010_job_resources"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

logger = logging.getLogger("alembic.runtime.migration")

# Ids read per query; the BLOBs themselves are read one at a time.
BATCH = 100

kept = sa.table(
    "out_of_fold_predictions",
    sa.column("model_id", sa.String),
    sa.column("data", sa.LargeBinary),
    sa.column("path", sa.Text),
    sa.column("size", sa.BigInteger),
    sa.column("sha256", sa.String),
)


def _object_path(model_id: str) -> str:
    # Fixed here, not imported: a revision must keep doing what it did when service code moves.
    return f"models/{model_id}/out_of_fold.f8"


def _store() -> Any:
    store = context.config.attributes.get("store")
    if store is None:
        from service.config import Settings
        from service.store import store_from_settings

        store = store_from_settings(Settings())
    return store


def _columns() -> set[str]:
    inspector = sa.inspect(op.get_bind())
    return {column["name"] for column in inspector.get_columns("out_of_fold_predictions")}


def upgrade() -> None:
    present = _columns()
    # Nullable columns: plain ADD COLUMNs, no copy of the table on SQLite.
    if "path" not in present:
        op.add_column("out_of_fold_predictions", sa.Column("path", sa.Text(), nullable=True))
    if "size" not in present:
        op.add_column("out_of_fold_predictions", sa.Column("size", sa.BigInteger(), nullable=True))
    if "sha256" not in present:
        op.add_column(
            "out_of_fold_predictions", sa.Column("sha256", sa.String(length=64), nullable=True)
        )
    _move_to_store()


def _move_to_store() -> None:
    bind = op.get_bind()
    store = None
    moved = 0
    after = ""
    while True:
        ids = list(
            bind.execute(
                sa.select(kept.c.model_id)
                .where(kept.c.path.is_(None), kept.c.model_id > after)
                .order_by(kept.c.model_id)
                .limit(BATCH)
            ).scalars()
        )
        if not ids:
            break
        store = store or _store()
        for model_id in ids:
            blob = bind.execute(
                sa.select(kept.c.data).where(kept.c.model_id == model_id)
            ).scalar_one()
            data = zlib.decompress(bytes(blob or b"")) if blob else b""
            path = _object_path(model_id)
            sha256 = _write_unless_there(store, path, data)
            bind.execute(
                sa.update(kept)
                .where(kept.c.model_id == model_id)
                .values(path=path, size=len(data), sha256=sha256, data=b"")
            )
            moved += 1
        after = ids[-1]
        logger.info("0010_oof_store: %d out-of-fold prediction set(s) moved to the store", moved)


def _write_unless_there(store: Any, path: str, data: bytes) -> str:
    """Write ``data`` at ``path``, unless a crashed earlier run already wrote exactly it."""
    from service.store import ObjectCorrupt, StoredObject

    digest = hashlib.sha256(data).hexdigest()
    try:
        for _ in store.chunks(StoredObject(path, len(data), digest)):
            pass
        return digest  # there, whole and the same: a re-run after a crash
    except ObjectCorrupt:  # ObjectMissing too: not written yet, or written partly
        pass
    return str(store.put(path, data).sha256)


def downgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(kept.c.model_id, kept.c.path, kept.c.size, kept.c.sha256).where(
            kept.c.path.is_not(None)
        )
    ).all()
    if rows:
        from service.store import StoredObject

        store = _store()
        for model_id, path, size, sha256 in rows:
            # Read back as recorded: a damaged object stops the downgrade, naming it.
            data = store.get(StoredObject(path, size, sha256))
            bind.execute(
                sa.update(kept)
                .where(kept.c.model_id == model_id)
                .values(data=zlib.compress(bytes(data), level=1))
            )
    for column in ("sha256", "size", "path"):
        if bind.dialect.name == "sqlite":  # native since SQLite 3.35: no copy of the table
            op.execute(f"ALTER TABLE out_of_fold_predictions DROP COLUMN {column}")
        else:
            op.drop_column("out_of_fold_predictions", column)
