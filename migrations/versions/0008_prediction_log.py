"""The prediction log (service.monitoring): one compact row per logged prediction.

Revision ID: 0008_prediction_log
Revises: 0007_artifact_store
Create Date: 2026-11-28 16:45:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_prediction_log"
down_revision: str | None = "0007_artifact_store"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "prediction_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("row_id", sa.String(length=128), nullable=False),
        sa.Column("logged_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("features", sa.LargeBinary(), nullable=False),
        sa.Column("bins", sa.LargeBinary(), nullable=True),
        sa.Column("unseen", sa.JSON(), nullable=True),
        sa.Column("prediction", sa.Float(), nullable=True),
        sa.Column("proba", sa.LargeBinary(), nullable=True),
        sa.Column("actual", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_prediction_log_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prediction_log")),
    )
    op.create_index(
        "ix_prediction_log_model_id_id", "prediction_log", ["model_id", "id"], unique=False
    )
    op.create_index(
        "ix_prediction_log_model_id_actual", "prediction_log", ["model_id", "actual"], unique=False
    )
    op.create_index(
        "ix_prediction_log_model_id_logged_at",
        "prediction_log",
        ["model_id", "logged_at"],
        unique=False,
    )
    op.create_index(
        "ix_prediction_log_model_id_row_id", "prediction_log", ["model_id", "row_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_prediction_log_model_id_row_id", table_name="prediction_log")
    op.drop_index("ix_prediction_log_model_id_logged_at", table_name="prediction_log")
    op.drop_index("ix_prediction_log_model_id_id", table_name="prediction_log")
    op.drop_index("ix_prediction_log_model_id_actual", table_name="prediction_log")
    op.drop_table("prediction_log")
