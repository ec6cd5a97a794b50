"""The prediction log loses ``ix_prediction_log_model_id_actual``: no query reads it.

A drift report finds a window's labelled rows through the partial index of revision 0012
(``ix_prediction_log_labelled``: model, time, where ``actual`` is set), and feedback finds its
rows by ``(model_id, row_id)``. Every logged row still paid for the unused index in the log
writer's inserts, and every feedback update again.

Revision ID: 0013
Revises: 0010_oof_store
Create Date: 2026-11-29 06:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0010_oof_store"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_prediction_log_model_id_actual", table_name="prediction_log")


def downgrade() -> None:
    op.create_index(
        "ix_prediction_log_model_id_actual", "prediction_log", ["model_id", "actual"], unique=False
    )
