"""Service configuration: one typed object, read from ``COPPICE_*`` environment variables.

``Settings`` is built once at the edge (the CLI, or a test) and passed into ``create_app``;
nothing below the app reads the environment on its own, so tests can run many differently
configured apps in one process.

To add a setting, add a typed field with a default here (it becomes ``COPPICE_<NAME>``),
document it in the README's configuration table, and read it from the injected object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.api_keys import ApiKey, check_unique, parse_api_keys


class Settings(BaseSettings):
    """Everything the service can be configured with; the defaults run on one machine."""

    # hide_input_in_errors: a rejected value may be a secret (an API key, a database password),
    # and the CLI prints validation errors; they name the setting and the problem instead.
    model_config = SettingsConfigDict(
        env_prefix="COPPICE_", extra="ignore", hide_input_in_errors=True
    )

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
    store_url: str | None = Field(
        default=None,
        description=(
            "fsspec URL of the data store that holds dataset parts and model artifacts: a "
            "directory, or s3://bucket/prefix for several hosts. Unset means data_dir/store."
        ),
    )
    # repr=False: the options may hold the store's keys.
    store_options: dict[str, Any] = Field(
        default_factory=dict,
        repr=False,
        description=(
            "The data store's filesystem options as JSON, e.g. "
            '{"endpoint_url": "http://store:8333", "key": "...", "secret": "..."} for S3; '
            "empty uses the filesystem's defaults (for S3, the usual AWS_* variables)."
        ),
    )
    host: str = Field(default="127.0.0.1", description="Interface `coppice serve` binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `coppice serve` binds to.")
    max_upload_bytes: int = Field(
        # A disk's bound, not RAM's: every file format is spooled and streamed into parts, and
        # the server's memory does not grow with the file (benchmarks/README.md).
        default=10 * 1024**3,
        ge=1,
        description="Largest file `POST /v1/datasets` accepts, in bytes; larger is a 413.",
    )
    import_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Where tables may be registered in place (POST /v1/datasets with a source URL): "
            "comma-separated (or a JSON list of) directory paths or URLs, e.g. "
            "s3://lake/tables,/data/shared. Empty (the default) turns registration off."
        ),
    )
    max_request_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1,
        description="Largest JSON request body accepted, in bytes; larger is a 413.",
    )
    max_columns: int = Field(
        default=10_000, ge=1, description="Most columns a dataset may have; more is a 422."
    )
    max_estimators: int = Field(
        default=5000,
        ge=1,
        description="Largest n_estimators a job may ask for (at any nesting level); more is a 422.",
    )
    max_depth: int = Field(
        default=64,
        ge=1,
        description="Largest explicit max_depth a job may ask for; more is a 422.",
    )
    max_predict_rows: int = Field(
        default=100_000,
        ge=1,
        description="Most rows one predict request may hold; more is a 413.",
    )
    prediction_log_rate: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description=(
            "Share of predicted rows written to the prediction log (0 turns logging off); "
            "docs/monitoring.md."
        ),
    )
    prediction_log_max_rows: int = Field(
        default=1_000_000,
        ge=1,
        description="Most logged rows kept per model; the oldest are dropped first.",
    )
    prediction_log_queue: int = Field(
        default=10_000,
        ge=1,
        description=(
            "Requests waiting for the prediction log's writer; past it a request's rows are "
            "counted as dropped, never waited for."
        ),
    )
    model_cache_bytes: int = Field(
        default=512 * 1024 * 1024,
        ge=0,
        description=(
            "Bound on the loaded models kept in memory for predictions, as the total size "
            "of their artifacts in bytes; least recently used models are dropped first."
        ),
    )

    embedded_worker: bool = Field(
        default=True,
        description="Whether `coppice serve` also runs a training worker in its own process.",
    )
    worker_concurrency: int = Field(
        default=1, ge=1, description="Training jobs one worker runs at the same time."
    )
    processes_per_job: int = Field(
        default=1,
        ge=1,
        description="Processes one training job may use (the estimator's n_jobs).",
    )
    predict_threads: int = Field(
        default=2,
        ge=1,
        description=(
            "Threads one predict request's tree ensemble may use (a batch of at least 2,048 "
            "rows a thread is shared among them; answers are the same whatever the count)."
        ),
    )
    job_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description=(
            "How long a claimed job stays reserved without a heartbeat; after that any "
            "worker may take it back (requeue it or, out of attempts, fail it)."
        ),
    )
    heartbeat_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How often a worker renews the lease of each job it runs.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Times a job is tried (the first run included) before it fails for good.",
    )
    retry_backoff_seconds: float = Field(
        default=5.0,
        ge=0,
        description="Wait before the first retry of a crashed job; doubles each retry, at most 5 min.",
    )
    poll_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How often an idle worker looks for queued jobs and expired leases.",
    )
    shutdown_grace_seconds: float = Field(
        default=30.0,
        ge=0,
        description=(
            "On SIGTERM, how long running fits may take to finish before they are stopped "
            "and their jobs requeued."
        ),
    )
    max_runtime_seconds: float = Field(
        default=24 * 3600.0,
        gt=0,
        description=(
            "Longest one training job may run; past it the fit is stopped and the job fails "
            "with error code 'runtime_exceeded'."
        ),
    )
    max_job_memory_bytes: int = Field(
        default=8 * 1024**3,
        ge=1,
        description=(
            "Most memory one training job may be estimated to need, in bytes (from the "
            "dataset's rows and features and the method's params, before it is queued); "
            "a job estimated above it is a 422."
        ),
    )
    dask_scheduler: str | None = Field(
        default=None,
        description=(
            "Address of a Dask scheduler (tcp://host:8786) on whose cluster every fit runs its "
            "parallel part (trees, members, folds, boosting histograms); the fit process is "
            "the client. Unset means the worker's own processes. Needs coppice[dask]."
        ),
    )
    dask_connect_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description=(
            "How long a fit waits for the Dask scheduler when its job starts; an unreachable "
            "scheduler fails the job with 'dask_unreachable'."
        ),
    )

    # NoDecode: these arrive as plain strings too, not only as JSON; the validators parse them.
    # repr=False: even digests of keys stay out of tracebacks and debug output.
    api_keys: Annotated[list[ApiKey], NoDecode] = Field(
        default_factory=list,
        repr=False,
        description=(
            "API keys and their roles (admin, predict): 'key:role,...', "
            "'sha256:<hex digest>:role,...' or a JSON list of {key|sha256, role, name}. "
            "Empty means the API is open."
        ),
    )
    metrics_require_key: bool = Field(
        default=False,
        description="Whether GET /metrics needs an API key (any role) when keys are configured.",
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description=(
            "Origins browsers may call the API from ('https://app.example.com,...' or a JSON "
            "list; '*' for any). Empty turns CORS off."
        ),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        default="INFO", description="Least severe log records written."
    )
    log_format: Literal["json", "text"] = Field(
        default="json", description="Log lines as JSON objects, or as text for a terminal."
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: Any) -> list[Any]:
        return parse_api_keys(value)

    @field_validator("api_keys")
    @classmethod
    def _unique_api_keys(cls, keys: list[ApiKey]) -> list[ApiKey]:
        check_unique(keys)
        return keys

    @field_validator("store_url", mode="before")
    @classmethod
    def _blank_store_is_default(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value

    @field_validator("dask_scheduler", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # COPPICE_DASK_SCHEDULER= (as compose files leave it) means no cluster.
        return (value.strip() or None) if isinstance(value, str) else value

    @field_validator("import_roots", mode="before")
    @classmethod
    def _parse_roots(cls, value: Any) -> Any:
        return _text_list(value)

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _parse_origins(cls, value: Any) -> Any:
        value = _text_list(value)
        if isinstance(value, list):
            # A browser sends its Origin without a trailing slash; a pasted URL may have one.
            return [origin.rstrip("/") for origin in value]
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _lower_format(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> Settings:
        if self.heartbeat_seconds >= self.job_lease_seconds:
            raise ValueError(
                "heartbeat_seconds must be shorter than job_lease_seconds, or leases expire "
                "between heartbeats and running jobs are taken back."
            )
        return self

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one, or SQLite inside ``data_dir``."""
        if self.database_url:
            return self.database_url
        # An absolute path keeps the URL valid whatever the working directory is later.
        return f"sqlite:///{(self.data_dir / 'coppice.db').resolve()}"

    @property
    def resolved_store_url(self) -> str:
        """The data store's URL in force: the configured one, or ``data_dir/store``."""
        if self.store_url:
            return self.store_url
        return str((self.data_dir / "store").resolve())


def _text_list(value: Any) -> Any:
    """A list setting given as comma-separated text or a JSON list: its non-blank items."""
    if isinstance(value, str):
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else text.split(",")
    if isinstance(value, list | tuple):
        return [str(item).strip() for item in value if str(item).strip()]
    return value
