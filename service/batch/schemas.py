"""Request and response bodies of the ``/v1/batch-predictions`` endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.db.tables import JobStatus
from service.jobs.schemas import JobError


class BatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str = Field(
        min_length=1,
        max_length=300,
        description="A model id, or a registered model's `name@alias`, `name@N` or `name@latest`.",
    )
    dataset_id: str = Field(min_length=1, max_length=300)
    keep_columns: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="Columns of the dataset copied into the output as they are (ids, say).",
    )
    return_proba: bool = Field(
        default=False, description="One `proba_<class>` column per class (classification)."
    )
    explain: bool = Field(
        default=False,
        description="One `contribution_<feature>` column per feature, plus `bias`.",
    )
    name: str | None = Field(default=None, max_length=1000, description="The output's name.")


class BatchOut(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    id: str
    name: str | None
    status: JobStatus
    progress: float = Field(ge=0, le=1, description="Rows scored, as a fraction of all.")
    stage: str | None = Field(description="What the job is doing, e.g. 'rows 65536/1000000'.")
    model: str = Field(description="The model reference as asked for.")
    model_id: str = Field(description="The model it named when the batch was created.")
    dataset_id: str
    output_dataset_id: str | None = Field(description="The scored dataset, once succeeded.")
    n_rows: int
    keep_columns: list[str]
    return_proba: bool
    explain: bool
    metrics: dict[str, Any] | None = Field(
        description="The model's metric set on the rows whose target is known, when the "
        "dataset has the model's target column."
    )
    notes: list[str] = Field(description="What to know about the scoring (absent features, ...).")
    error: JobError | None
    cancel_requested: bool
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class BatchPage(BaseModel):
    items: list[BatchOut]
    total: int
