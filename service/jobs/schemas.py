"""Request and response bodies of the ``/v1/jobs`` endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.db.tables import JobStatus
from service.methods.catalog import Task

# The seed column is a 32-bit signed integer on PostgreSQL.
MAX_SEED = 2**31 - 1
DEFAULT_HOLDOUT = 0.2
MAX_FOLDS = 100


class HoldoutValidation(BaseModel):
    """Hold out this fraction of the rows (stratified for classification); 0 means none."""

    model_config = ConfigDict(extra="forbid")

    holdout: float = Field(ge=0, lt=1)


class FoldsValidation(BaseModel):
    """k-fold cross-validation metrics, then a final fit on all rows."""

    model_config = ConfigDict(extra="forbid")

    folds: int = Field(ge=2, le=MAX_FOLDS)


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str
    target: str = Field(description="The column to predict.")
    method: str = Field(description="A method name from GET /v1/methods.")
    task: Task | None = Field(
        default=None,
        description="Default: classification for a categorical target, regression for a numeric one.",
    )
    features: list[str] | None = Field(
        default=None, description="Columns to learn from; default: every column but the target."
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="The method's hyperparameters (see GET /v1/methods)."
    )
    validation: HoldoutValidation | FoldsValidation = Field(
        default_factory=lambda: HoldoutValidation(holdout=DEFAULT_HOLDOUT)
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SEED,
        description="Seed of every random choice; default: drawn at random and recorded.",
    )
    name: str | None = None
    max_runtime_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Longest this job's fit may run, in seconds; past it the job fails with "
            "'runtime_exceeded'. At most the server's limit (COPPICE_MAX_RUNTIME_SECONDS), "
            "which applies when this is left out."
        ),
    )


class JobError(BaseModel):
    code: str
    message: str


class JobResources(BaseModel):
    """What an ended fit cost, measured by its fit process."""

    wall_seconds: float = Field(description="From the fit process's start to its result.")
    cpu_seconds: float = Field(
        description="CPU time of the fit process and the processes it ran (user + system)."
    )
    peak_rss_bytes: int = Field(description="The fit process's peak resident memory.")
    backend: Literal["local", "dask"] = Field(description="Where the fit's parallel part ran.")
    dask_workers: int | None = Field(
        default=None, description="Workers of the Dask cluster when the fit began (dask only)."
    )


class JobOut(BaseModel):
    id: str
    name: str | None
    status: JobStatus
    progress: float = Field(ge=0, le=1)
    stage: str | None = Field(description="What the job is doing, e.g. 'tree 37/200'.")
    method: str
    task: Task
    dataset_id: str | None = Field(description="Null once the dataset has been deleted.")
    target: str
    features: list[str]
    params: dict[str, Any] = Field(description="The params as requested.")
    validation: dict[str, Any]
    seed: int | None
    max_runtime_seconds: float | None = Field(
        description="The job's own limit on its fit's seconds; null: the server's limit."
    )
    model_id: str | None
    search_id: str | None = Field(
        default=None, description="The search this job is a candidate of (/v1/searches)."
    )
    error: JobError | None
    cancel_requested: bool
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    resources: JobResources | None = Field(
        default=None, description="What the fit cost, once it has ended; null before."
    )


class JobPage(BaseModel):
    items: list[JobOut]
    total: int
