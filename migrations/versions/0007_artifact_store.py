"""Model artifacts in the data store: ``model_artifacts.path`` names the object.

Revision ID: 0007_artifact_store
Revises: 0006_column_distributions
Create Date: 2026-11-28 16:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_artifact_store"
down_revision: str | None = "0006_column_distributions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model_artifacts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("path", sa.Text(), nullable=True))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE model_artifacts DROP COLUMN path")
    else:
        op.drop_column("model_artifacts", "path")
