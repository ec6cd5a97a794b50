"""Datasets: each column's distribution, ``dataset_columns.distribution``.

A nullable JSON column, so existing rows need no value: columns stored before this revision
keep NULL, which the API returns as ``"distribution": null`` and the console shows as "not
computed". Not backfilled here: a backfill would decompress and decode every column of every
dataset inside the migration's transaction (unbounded time and memory for ``coppice migrate``
on a production database, with the table locked meanwhile), and it would import the service's
column format and summary code into a revision, which must keep doing the same thing after
that code changes. Re-uploading a dataset computes its distributions.

On SQLite, batch mode adds the column with a plain ``ALTER TABLE ... ADD COLUMN``: no copy of
the table, whose rows hold every dataset's column data.

Revision ID: 0006_column_distributions
Revises: 0005_searches
Create Date: 2026-11-26 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_column_distributions"
down_revision: str | None = "0005_searches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("dataset_columns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("distribution", sa.JSON(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Native since SQLite 3.35; batch mode would copy the table with every column's data.
        op.execute("ALTER TABLE dataset_columns DROP COLUMN distribution")
    else:
        op.drop_column("dataset_columns", "distribution")
