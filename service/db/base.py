"""The one declarative base every ORM table derives from."""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

# Named constraints let Alembic drop and alter them later, and SQLite batch mode needs
# the names when it recreates a table (Alembic docs, "The Importance of Naming Constraints").
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Base of all tables; ORM classes end in ``Record`` so "model" means the ML model."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
