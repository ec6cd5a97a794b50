"""Request and response bodies of feedback and the monitoring report."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Drift = Literal["none", "moderate", "major"]


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(description="Row ids a predict logged (its `ids`).", max_length=100_000)
    actuals: list[Any] = Field(
        description=(
            "The true value of each row, in `ids` order: a class label (classification) or a "
            "number (regression)."
        ),
        max_length=100_000,
    )


class FeedbackOut(BaseModel):
    model_id: str
    received: int = Field(description="Actuals in the request.")
    matched: int = Field(description="Of them, ids found in the model's prediction log.")
    unknown: int = Field(description="Ids the log does not hold (never logged, or dropped).")
    unknown_ids: list[str] = Field(description="The first 20 unknown ids.")


class Window(BaseModel):
    since: datetime
    until: datetime


class MissingRate(BaseModel):
    training: float | None
    live: float | None


class UnseenValue(BaseModel):
    value: str
    count: int


class Unseen(BaseModel):
    count: int
    top: list[UnseenValue]


class FeatureDrift(BaseModel):
    name: str
    kind: str
    psi: float | None
    drift: Drift | None
    missing_rate: MissingRate
    unseen: Unseen | None = Field(description="Categorical features: values training never saw.")
    training: list[float] = Field(description="Training proportions per bin.")
    live: list[float] = Field(description="Live proportions per bin (the window's rows).")
    bins: list[str] = Field(description="What each bin holds, for a person.")


class PredictionDrift(BaseModel):
    psi: float | None
    drift: Drift | None
    training: list[float]
    live: list[float]
    bins: list[str]


class Period(BaseModel):
    since: datetime
    until: datetime
    n_predictions: int = Field(description="Rows logged in the period.")
    prediction_psi: float | None = Field(description="PSI of the period's predictions.")
    n_labelled: int = Field(description="Of the scored labelled rows, those in the period.")
    accuracy: float | None = Field(default=None, description="Classifiers: on labelled rows.")
    rmse: float | None = Field(default=None, description="Regressors: on labelled rows.")


class MonitoringReport(BaseModel):
    model_id: str
    window: Window = Field(
        description="The whole hours reported on: `since` rounded down to its hour, `until` up."
    )
    n_predictions: int = Field(description="Rows logged in the window.")
    baseline: bool = Field(
        description=(
            "Whether the model kept a training baseline; a model trained before the server "
            "kept one has no drift figures (`features` is empty), only counts and performance."
        )
    )
    note: str | None = None
    features: list[FeatureDrift]
    prediction: PredictionDrift | None
    performance: dict[str, Any] = Field(
        description=(
            "`n_labelled` and the model's metric set on the window's labelled rows (the newest "
            "100,000 of them; `n_scored` says how many when there were more)."
        )
    )
    timeline: list[Period] = Field(
        default_factory=list,
        description=(
            "The window in at most 48 equal periods (1, 2, 3, 6 or 12 hours, or whole days): "
            "rows, prediction PSI and the headline metric on labelled rows in each."
        ),
    )
