"""Request and response bodies of the ``/v1/searches`` endpoints."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.db.tables import SearchStatus
from service.jobs.schemas import MAX_SEED
from service.methods.catalog import Task

MAX_MODELS = 500
MAX_SEARCH_FOLDS = 20
DEFAULT_FOLDS = 5


class Strategy(StrEnum):
    GRID = "grid"
    RANDOM = "random"
    HALVING = "halving"


class Budget(BaseModel):
    """When the search stops queueing candidates: whichever limit comes first."""

    model_config = ConfigDict(extra="forbid")

    max_models: int | None = Field(
        default=None,
        ge=1,
        le=MAX_MODELS,
        description=(
            "Most candidates to train (halving: configurations on its first rung). Default: "
            "every grid point for grid, 20 for random and halving, sized by auto."
        ),
    )
    max_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Wall-clock seconds from the request; then queued candidates are cancelled, running "
            "ones stopped, and the leaderboard (and ensemble) made of what finished."
        ),
    )


class SearchValidation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    folds: int = Field(
        default=DEFAULT_FOLDS,
        ge=2,
        le=MAX_SEARCH_FOLDS,
        description="k of the k-fold CV every candidate is scored by (one fold assignment).",
    )


class CandidateSpace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = Field(description="A method name from GET /v1/methods.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Per parameter: a list (choose one), {'int': [lo, hi]}, {'uniform': [lo, hi]}, "
            "{'log_uniform': [lo, hi]}, or a plain value (fixed; a list value is written [[...]])."
        ),
    )


class SearchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str
    target: str = Field(description="The column to predict.")
    task: Task | None = Field(
        default=None,
        description="Default: classification for a categorical target, regression otherwise.",
    )
    features: list[str] | None = Field(
        default=None, description="Columns to learn from; default: every column but the target."
    )
    candidates: list[CandidateSpace] | None = Field(
        default=None, min_length=1, max_length=50, description="Methods and their spaces."
    )
    auto: bool = Field(
        default=False,
        description="Let the service choose the families and ranges (instead of 'candidates').",
    )
    strategy: Strategy = Strategy.RANDOM
    budget: Budget = Field(default_factory=Budget)
    validation: SearchValidation = Field(default_factory=SearchValidation)
    metric: str | None = Field(
        default=None,
        description=(
            "What ranks the candidates: roc_auc (default), accuracy, log_loss or f1_macro for "
            "classification; rmse (default), mae or r2 for regression."
        ),
    )
    stack: bool = Field(
        default=False,
        description="Stack the best candidate of each family on their out-of-fold predictions.",
    )
    register_as: str | None = Field(
        default=None,
        description="Registered name the best model becomes the next version of (alias 'candidate').",
    )
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    name: str | None = None


class MetricScore(BaseModel):
    mean: float
    std: float | None


class LeaderboardRow(BaseModel):
    rank: int
    model_id: str
    job_id: str
    method: str
    params: dict[str, Any]
    metric: MetricScore
    source: Literal["cv"] = Field(default="cv", description="k-fold CV on the search's folds.")
    fit_seconds: float | None
    iter: int = Field(description="Halving's rung (0 for grid and random).")
    n_resources: int | None = Field(description="Rows the candidate trained on; null: all.")
    kind: Literal["candidate", "stack"]


class Registration(BaseModel):
    status: Literal["pending", "registered", "failed"]
    name: str
    version: int | None = None
    model_id: str | None = None
    detail: str | None = None


class JobCounts(BaseModel):
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0


class SearchSummary(BaseModel):
    id: str
    name: str | None
    status: SearchStatus
    progress: float = Field(ge=0, le=1)
    strategy: Strategy
    auto: bool
    metric: str
    direction: Literal["maximize", "minimize"]
    dataset_id: str | None
    target: str
    task: Task
    n_models: int
    best_model_id: str | None
    stack_model_id: str | None
    jobs: JobCounts
    created_at: datetime
    finished_at: datetime | None


class SearchOut(SearchSummary):
    features: list[str]
    candidates: list[dict[str, Any]] = Field(description="The spaces searched.")
    plan: dict[str, Any] = Field(description="What the search decided: auto's choices, rungs.")
    budget: dict[str, Any]
    folds: int
    stack: bool
    register_as: str | None
    registration: Registration | None
    seed: int
    notes: list[str]
    leaderboard: list[LeaderboardRow] = Field(description="Best first.")


class SearchPage(BaseModel):
    items: list[SearchSummary]
    total: int
