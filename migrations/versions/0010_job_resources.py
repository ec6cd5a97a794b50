"""What an ended fit cost: the jobs' ``resources`` (API.md, "Jobs").

Revision ID: 0010_job_resources
Revises: 0012 (prediction counts)
Create Date: 2026-11-28 19:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_job_resources"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column: on SQLite an ADD COLUMN, no copy of the table.
    op.add_column("jobs", sa.Column("resources", sa.JSON(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Native since SQLite 3.35; batch mode would copy the table, which the models' foreign
        # keys to jobs refuse as soon as one model exists.
        op.execute("ALTER TABLE jobs DROP COLUMN resources")
    else:
        op.drop_column("jobs", "resources")
