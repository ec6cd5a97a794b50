"""Searches: the search rows, their candidates, the candidates' out-of-fold predictions, and
``jobs.search_id``.

New tables, and one nullable column on ``jobs`` without a foreign key: on SQLite, batch mode
adds it with a plain ``ALTER TABLE ... ADD COLUMN`` (no table copy, which the models' foreign
keys to ``jobs`` would refuse once a model exists). ``UTCDateTime`` is written as its portable
implementation, ``sa.DateTime(timezone=True)``.

Revision ID: 0005_searches
Revises: 0004_registry
Create Date: 2026-11-25 21:39:27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_searches"
down_revision: str | None = "0004_registry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "searches",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("dataset_id", sa.String(length=36), nullable=True),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("task", sa.String(length=32), nullable=False),
        sa.Column("features", sa.JSON(), nullable=False),
        sa.Column("strategy", sa.String(length=16), nullable=False),
        sa.Column("auto", sa.Boolean(), nullable=False),
        sa.Column("candidates", sa.JSON(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("budget", sa.JSON(), nullable=False),
        sa.Column("folds", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("stack", sa.Boolean(), nullable=False),
        sa.Column("register_as", sa.Text(), nullable=True),
        sa.Column("registration", sa.JSON(), nullable=True),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("rung", sa.Integer(), nullable=False),
        sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("best_model_id", sa.String(length=36), nullable=True),
        sa.Column("stack_model_id", sa.String(length=36), nullable=True),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("stacking_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('running', 'stacking', 'succeeded', 'failed', 'cancelled')",
            name=op.f("ck_searches_status"),
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_searches_dataset_id_datasets"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_searches")),
    )
    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.create_index("ix_searches_created_at", ["created_at"], unique=False)
        batch_op.create_index("ix_searches_status", ["status"], unique=False)

    op.create_table(
        "search_candidates",
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("search_id", sa.String(length=36), nullable=False),
        sa.Column("config_index", sa.Integer(), nullable=False),
        sa.Column("rung", sa.Integer(), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_search_candidates_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["searches.id"],
            name=op.f("fk_search_candidates_search_id_searches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_search_candidates")),
    )
    with op.batch_alter_table("search_candidates", schema=None) as batch_op:
        batch_op.create_index(
            "ix_search_candidates_search_id_rung", ["search_id", "rung"], unique=False
        )

    op.create_table(
        "out_of_fold_predictions",
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("n_columns", sa.Integer(), nullable=False),
        sa.Column("folds", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_out_of_fold_predictions_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("model_id", name=op.f("pk_out_of_fold_predictions")),
    )
    with op.batch_alter_table("out_of_fold_predictions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_out_of_fold_predictions_job_id"), ["job_id"], unique=False
        )

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("search_id", sa.String(length=36), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_search_id"), ["search_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_jobs_search_id"), table_name="jobs")
    if op.get_bind().dialect.name == "sqlite":
        # Native since SQLite 3.35; batch mode would copy the table (see the module's note).
        op.execute("ALTER TABLE jobs DROP COLUMN search_id")
    else:
        op.drop_column("jobs", "search_id")

    with op.batch_alter_table("out_of_fold_predictions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_out_of_fold_predictions_job_id"))

    op.drop_table("out_of_fold_predictions")
    with op.batch_alter_table("search_candidates", schema=None) as batch_op:
        batch_op.drop_index("ix_search_candidates_search_id_rung")

    op.drop_table("search_candidates")
    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.drop_index("ix_searches_status")
        batch_op.drop_index("ix_searches_created_at")

    op.drop_table("searches")
