"""Registered models: names, their numbered versions, aliases, and every alias move.

New tables only, so nothing existing is rebuilt on SQLite. A version refers to its model with
no ``ON DELETE``: the database itself refuses to delete a model that is a registered version.
``UTCDateTime`` is written as its portable implementation, ``sa.DateTime(timezone=True)``.

Revision ID: 0004_registry
Revises: 0003_job_runtime_limit
Create Date: 2026-11-25 21:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_registry"
down_revision: str | None = "0003_job_runtime_limit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "registered_models",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("last_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_registered_models")),
    )
    op.create_table(
        "registered_model_alias_moves",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("from_model_id", sa.String(length=36), nullable=True),
        sa.Column("to_model_id", sa.String(length=36), nullable=True),
        sa.Column("actor", sa.Text(), nullable=True),
        sa.Column("moved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["name"],
            ["registered_models.name"],
            name=op.f("fk_registered_model_alias_moves_name_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registered_model_alias_moves")),
    )
    with op.batch_alter_table("registered_model_alias_moves", schema=None) as batch_op:
        batch_op.create_index(
            "ix_registered_model_alias_moves_name_id", ["name", "id"], unique=False
        )

    op.create_table(
        "registered_model_versions",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=36), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], ["models.id"], name=op.f("fk_registered_model_versions_model_id_models")
        ),
        sa.ForeignKeyConstraint(
            ["name"],
            ["registered_models.name"],
            name=op.f("fk_registered_model_versions_name_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("name", "version", name=op.f("pk_registered_model_versions")),
    )
    with op.batch_alter_table("registered_model_versions", schema=None) as batch_op:
        batch_op.create_index("ix_registered_model_versions_model_id", ["model_id"], unique=False)

    op.create_table(
        "registered_model_aliases",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["name", "version"],
            ["registered_model_versions.name", "registered_model_versions.version"],
            name=op.f("fk_registered_model_aliases_name_registered_model_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["name"],
            ["registered_models.name"],
            name=op.f("fk_registered_model_aliases_name_registered_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("name", "alias", name=op.f("pk_registered_model_aliases")),
    )


def downgrade() -> None:
    op.drop_table("registered_model_aliases")
    with op.batch_alter_table("registered_model_versions", schema=None) as batch_op:
        batch_op.drop_index("ix_registered_model_versions_model_id")

    op.drop_table("registered_model_versions")
    with op.batch_alter_table("registered_model_alias_moves", schema=None) as batch_op:
        batch_op.drop_index("ix_registered_model_alias_moves_name_id")

    op.drop_table("registered_model_alias_moves")
    op.drop_table("registered_models")
