"""Request and response bodies of the ``/v1/models`` endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from engine.explain import DEFAULT_PERMUTATIONS
from service.methods.catalog import Task
from service.models.explanations import MAX_EXPLAIN_SAMPLES


class FeatureOut(BaseModel):
    name: str
    kind: str = Field(description="`numeric` or `categorical`.")


class MetricsOut(BaseModel):
    train: dict[str, Any] | None = None
    validation: dict[str, Any] | None = None
    oob: dict[str, Any] | None = None
    cv: dict[str, Any] | None = Field(
        default=None, description='Per metric `{"mean", "std"}` over the folds.'
    )


class RegisteredAs(BaseModel):
    name: str
    version: int


class ModelOut(BaseModel):
    id: str
    name: str | None
    job_id: str
    dataset_id: str | None = Field(
        description="The dataset trained on; it may have been deleted since."
    )
    method: str
    task: Task
    target: str
    features: list[FeatureOut]
    classes: list[str] | None = Field(description="Class labels (classification), in order.")
    params: dict[str, Any] = Field(description="Resolved hyperparameters, defaults included.")
    metrics: MetricsOut
    n_estimators: int | None
    size_bytes: int
    created_at: datetime
    registered: list[RegisteredAs] = Field(
        default_factory=list,
        description=(
            "The registered versions this model is, by name: what `name@alias` or `name@N` "
            "resolved to when the model was fetched by a reference."
        ),
    )
    importance_kinds: list[str] | None = Field(
        default=None,
        description=(
            "The kinds `GET /v1/models/{id}/feature-importance?kind=` gives for this model, in "
            "the API's order. Null in listings for a model trained before the server kept "
            "them (`GET /v1/models/{id}` asks the model), and for such a model whose stored "
            "artifact cannot be loaded."
        ),
    )


class ModelPage(BaseModel):
    items: list[ModelOut]
    total: int


class CurvesOut(BaseModel):
    model_id: str = Field(description="The model's id (what a `name@alias` resolved to).")
    iterations: list[int]
    train: list[float | None]
    validation: list[float | None]
    oob: list[float | None]
    metric: str | None


class RocCurveOut(BaseModel):
    fpr: list[float] = Field(description="False positive rates, from 0 to 1.")
    tpr: list[float] = Field(description="True positive rates, from 0 to 1.")
    auc: float | None = Field(description="Area under the whole curve (before thinning).")


class ResidualsOut(BaseModel):
    predicted: list[float | None]
    actual: list[float | None]


class DiagnosticsOut(BaseModel):
    model_id: str = Field(description="The model's id (what a `name@alias` resolved to).")
    validation_rows: int | None = Field(
        description="The holdout rows these were computed on; null when there are none."
    )
    roc: dict[str, RocCurveOut] | None = Field(
        description=(
            "Per class label, its ROC curve against the other classes on the validation rows "
            "(binary: the second class's only), at most 200 points each; null for regressors, "
            "models without probabilities or validation rows, more than 10 classes, and "
            "models trained before the server kept curves."
        )
    )
    residuals: ResidualsOut | None = Field(
        description=(
            "Predicted and actual values of at most 500 validation rows drawn with the job's "
            "seed (regressors); null otherwise, as `roc`."
        )
    )


class PredictRequest(BaseModel):
    """Rows to predict: ``records`` (one object per row) or ``columns`` with ``rows``."""

    model_config = ConfigDict(extra="forbid")

    records: list[dict[str, Any]] | None = Field(
        default=None, description="One object per row; an absent feature is missing."
    )
    columns: list[str] | None = Field(default=None, description="Column names of `rows`.")
    # Each row is checked to be a list by the encoder, with the row named in the error:
    # validating 800,000 cells as ``list[list[Any]]`` here costs pydantic 30 ms per 20,000
    # rows and proves nothing the encoder does not check again. The schema is unchanged.
    rows: list[Annotated[Any, WithJsonSchema({"type": "array", "items": {}})]] | None = Field(
        default=None, description="Cells in `columns` order."
    )
    return_proba: bool = Field(
        default=False, description="Also return class probabilities (classification)."
    )
    ids: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] | None = Field(
        default=None,
        description=(
            "An id per row for the prediction log, to send feedback by later "
            "(`POST /v1/models/{id}/feedback`); without it the server makes them up and "
            "returns them as `ids`."
        ),
    )
    explain: bool = Field(
        default=False,
        description=(
            "Also return per-feature contributions to each row's raw score and their bias: "
            "exact where the model's structure gives them, else sampled Shapley values."
        ),
    )
    explain_samples: int | None = Field(
        default=None,
        ge=2,
        le=MAX_EXPLAIN_SAMPLES,
        description=(
            "Permutations sampled per row for sampled explanations (rounded up to an even "
            f"number; default {DEFAULT_PERMUTATIONS}); exact explanations ignore it."
        ),
    )

    # Set by the router (never by the client: not a field) when the body's bytes show every
    # cell of ``rows`` is a number or null, so the encoder converts them in one NumPy call
    # without a type check per cell.
    _numbers_only: bool = PrivateAttr(default=False)
    # Set by the router when it read ``rows`` straight from the body's bytes into floats
    # (``service.models.json_rows``; null is NaN): ``rows`` then holds a placeholder per row,
    # and this matrix the cells, in ``columns`` order.
    _matrix: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_shape(self) -> PredictRequest:
        tabular = self.columns is not None or self.rows is not None
        if self.records is not None and tabular:
            raise ValueError("send either 'records' or 'columns' with 'rows', not both")
        if self.records is None and (self.columns is None or self.rows is None):
            raise ValueError("send 'records', or 'columns' with 'rows'")
        if self.ids is not None and len(self.ids) != self.n_rows:
            raise ValueError(f"'ids' has {len(self.ids)} items for {self.n_rows} rows")
        return self

    @property
    def numbers_only(self) -> bool:
        return self._numbers_only

    @numbers_only.setter
    def numbers_only(self, value: bool) -> None:
        self._numbers_only = value

    @property
    def matrix(self) -> Any:
        return self._matrix

    def read_as(self, matrix: Any) -> None:
        """``rows`` are ``matrix`` (the router read them into floats): numbers only."""
        self._matrix = matrix
        self._numbers_only = True

    @property
    def n_rows(self) -> int:
        return len(self.records if self.records is not None else self.rows or [])


# What ``records_only`` fills a body with: each field's default (all immutable: None, False).
_PREDICT_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in PredictRequest.model_fields.items()
}
_PREDICT_PRIVATE = {"_numbers_only": False, "_matrix": None}


def records_only(document: Any) -> PredictRequest | None:
    """``PredictRequest.model_validate(document)`` without pydantic, for a body that is only
    ``{"records": [object, ...]}`` (what the Python client sends); None for anything else.

    Such a body always validates (JSON keys are strings, cells are ``Any``), and on a server
    the caches have let pydantic's validator go between requests: validating cost a one-row
    predict ~70 us more than this. The instance is as ``model_construct`` makes it (its
    documented attributes), and tests hold it equal to the validated one."""
    if type(document) is not dict or len(document) != 1:
        return None
    records = document.get("records")
    if type(records) is not list or not records:
        return None
    for record in records:
        if type(record) is not dict:
            return None
    body = object.__new__(PredictRequest)
    state = _PREDICT_DEFAULTS.copy()
    state["records"] = records
    object.__setattr__(body, "__dict__", state)
    object.__setattr__(body, "__pydantic_fields_set__", {"records"})
    object.__setattr__(body, "__pydantic_extra__", None)
    object.__setattr__(body, "__pydantic_private__", _PREDICT_PRIVATE.copy())
    return body


class PredictResponse(BaseModel):
    model_id: str
    ids: list[str] | None = Field(
        default=None,
        description=(
            "Each row's id in the prediction log (the request's, or made up): what feedback "
            "joins actuals to. Absent when the server does not log predictions."
        ),
    )
    predictions: list[Any] = Field(description="Class labels, or numbers (regression).")
    probabilities: list[list[float]] | None = Field(
        default=None, description="Per row, per class in `classes` order (return_proba)."
    )
    classes: list[str] | None = None
    contributions: list[Any] | None = Field(
        default=None,
        description=(
            "Per row, per feature (per class for multiclass) contributions to the raw score "
            "(explain)."
        ),
    )
    bias: list[Any] | None = Field(
        default=None,
        description="Per row, the expected raw score (per class for multiclass) (explain).",
    )
    explanation: Literal["exact", "sampled"] | None = Field(
        default=None,
        description=(
            "How the contributions were computed (explain): exactly from the model's "
            "structure, or as sampled Shapley values whose sum is still exact."
        ),
    )


class FeatureImportanceItem(BaseModel):
    name: str
    importance: float | None
    std: float | None


class FeatureImportanceOut(BaseModel):
    model_id: str
    kind: str
    features: list[FeatureImportanceItem]
