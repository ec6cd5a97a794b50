"""Run Alembic from code, so migrations work the same from a checkout and an installed wheel."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from service.db.session import create_db_engine

if TYPE_CHECKING:
    from service.store import DataStore

# Any fixed 64-bit number: it only has to be the same for every replica of the service.
_MIGRATION_LOCK_ID = 0x636F7070696365


def migrations_dir() -> str:
    """Where the ``migrations`` package lives, wherever it was installed."""
    return str(files("migrations"))


def alembic_config(database_url: str) -> Config:
    """An Alembic ``Config`` built in code; there is no ``alembic.ini`` to find or keep in sync."""
    config = Config()
    config.set_main_option("script_location", migrations_dir())
    # Passed as an attribute rather than `sqlalchemy.url`, because ini options go through
    # ConfigParser interpolation and a percent-encoded password would break it.
    config.attributes["database_url"] = database_url
    # New revisions come out lint-clean, so `make test` passes on them before review.
    config.set_section_option("post_write_hooks", "hooks", "ruff_fix, ruff_format")
    for hook, options in (("ruff_fix", "check --fix"), ("ruff_format", "format")):
        config.set_section_option("post_write_hooks", f"{hook}.type", "module")
        config.set_section_option("post_write_hooks", f"{hook}.module", "ruff")
        config.set_section_option(
            "post_write_hooks", f"{hook}.options", f"{options} REVISION_SCRIPT_FILENAME"
        )
    return config


def upgrade_to_head(database_url: str, store: DataStore | None = None) -> None:
    """Bring the database at ``database_url`` to the newest revision.

    ``store`` is the data store revisions move bytes into (0007: model artifacts); None: the
    ``COPPICE_*`` settings' store, opened only if a revision has bytes to move.
    """
    config = alembic_config(database_url)
    if store is not None:
        config.attributes["store"] = store
    engine = create_db_engine(database_url)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Several API replicas may start at once; the first migrates, the others wait
                # and then find the database already at head. Released at commit.
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:lock_id)"),
                    {"lock_id": _MIGRATION_LOCK_ID},
                )
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    finally:
        engine.dispose()
