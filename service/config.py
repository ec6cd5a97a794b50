"""Service configuration: one typed object, read from ``COPPICE_*`` environment variables.

``Settings`` is built once at the edge (the CLI, or a test) and passed into ``create_app``;
nothing below the app reads the environment on its own, so tests can run many differently
configured apps in one process.

To add a setting, add a typed field with a default here (it becomes ``COPPICE_<NAME>``),
document it in the README's configuration table, and read it from the injected object.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service can be configured with; the defaults run on one machine."""

    model_config = SettingsConfigDict(env_prefix="COPPICE_", extra="ignore")

    data_dir: Path = Field(
        default=Path("./coppice-data"),
        description="Directory for local state, including the default SQLite database.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the database, e.g. "
            "postgresql+psycopg://user:pass@host:5432/coppice. "
            "Unset means a SQLite file inside data_dir."
        ),
    )
    host: str = Field(default="127.0.0.1", description="Interface `coppice serve` binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `coppice serve` binds to.")
    max_upload_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1,
        description="Largest CSV file `POST /v1/datasets` accepts, in bytes; larger is a 413.",
    )
    max_request_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1,
        description="Largest JSON request body accepted, in bytes; larger is a 413.",
    )
    max_columns: int = Field(
        default=10_000, ge=1, description="Most columns a dataset may have; more is a 422."
    )

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one, or SQLite inside ``data_dir``."""
        if self.database_url:
            return self.database_url
        # An absolute path keeps the URL valid whatever the working directory is later.
        return f"sqlite:///{(self.data_dir / 'coppice.db').resolve()}"
