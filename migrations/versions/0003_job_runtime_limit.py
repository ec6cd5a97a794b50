"""Jobs: a per-job limit on the fit's running time, ``max_runtime_seconds``.

A nullable column, so existing rows need no value (NULL: only the server's limit applies).
On SQLite, batch mode adds it with a plain ``ALTER TABLE ... ADD COLUMN``: no table copy,
and the models' foreign keys to ``jobs`` are never touched.

Revision ID: 0003_job_runtime_limit
Revises: 0002_schema
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_job_runtime_limit"
down_revision: str | None = "0002_schema"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_runtime_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Native since SQLite 3.35. Batch mode would copy the table and drop the old one,
        # which the models' foreign keys to jobs refuse as soon as one model exists.
        op.execute("ALTER TABLE jobs DROP COLUMN max_runtime_seconds")
    else:
        op.drop_column("jobs", "max_runtime_seconds")
