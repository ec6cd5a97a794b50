"""Batch predictions (service.batch): one row per scoring of a dataset, keyed by its job.

Revision ID: 0011_batch_predictions
Revises: 0009_dataset_parts
Create Date: 2026-11-28 19:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_batch_predictions"
down_revision: str | None = "0009_dataset_parts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "batch_predictions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("model_ref", sa.Text(), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("dataset_id", sa.String(length=36), nullable=False),
        sa.Column("keep_columns", sa.JSON(), nullable=False),
        sa.Column("return_proba", sa.Boolean(), nullable=False),
        sa.Column("explain", sa.Boolean(), nullable=False),
        sa.Column("n_rows", sa.BigInteger(), nullable=False),
        sa.Column("output_dataset_id", sa.String(length=36), nullable=True),
        sa.Column("metrics", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["id"], ["jobs.id"], name=op.f("fk_batch_predictions_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch_predictions")),
    )
    op.create_index(
        "ix_batch_predictions_created_at", "batch_predictions", ["created_at"], unique=False
    )
    op.create_index(
        "ix_batch_predictions_model_id_created_at",
        "batch_predictions",
        ["model_id", "created_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_batch_predictions_model_id_created_at", table_name="batch_predictions")
    op.drop_index("ix_batch_predictions_created_at", table_name="batch_predictions")
    op.drop_table("batch_predictions")
