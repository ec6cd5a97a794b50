"""Batch prediction rules: checking a request up front, queueing it, reading and cancelling.

Everything a request can get wrong is found before anything is queued: the dataset and the
model (404 naming them, a registry reference resolved as ``/v1/models/{ref}`` resolves it),
the kept columns, a dataset column whose kind the model cannot take, and outputs the model
cannot give (422 naming the field). A feature the dataset lacks is not an error: it is
missing in every row, as ``/v1`` predict treats an absent feature, and the job's notes say so.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.batch import repository
from service.batch.repository import Batch
from service.batch.schemas import BatchCreate
from service.batch.scoring import reserved
from service.config import Settings
from service.datasets import repository as datasets_repository
from service.datasets.ingest import is_storable_text
from service.db.tables import (
    BATCH_METHOD,
    BatchPredictionRecord,
    ColumnKind,
    JobRecord,
    JobStatus,
    new_id,
)
from service.db.types import utc_now
from service.errors import Conflict, FieldError, InvalidInput, NotFound
from service.jobs import repository as jobs_repository
from service.jobs.service import cancel_job
from service.models import explanations
from service.models.cache import ModelCache
from service.models.service import get_model, loaded_model
from service.registry.cache import ReferenceCache
from service.registry.resolve import resolve
from service.store import DataStore


def create_batch(
    session: Session,
    refs: ReferenceCache,
    cache: ModelCache,
    store: DataStore,
    request: BatchCreate,
    settings: Settings,
) -> Batch:
    """Check the request and queue the batch's job; the batch and its job."""
    dataset = datasets_repository.get(session, request.dataset_id, for_update=True)
    if dataset is None:
        raise NotFound(
            f"There is no dataset with id '{request.dataset_id}'.",
            errors=[{"loc": ["body", "dataset_id"], "msg": "unknown dataset"}],
        )
    try:
        model_id = resolve(session, refs, request.model).model_id
        record = get_model(session, model_id)
    except NotFound as error:
        raise NotFound(
            error.detail, errors=[{"loc": ["body", "model"], "msg": "unknown model"}]
        ) from None
    kinds = {c.name: c.kind for c in datasets_repository.columns(session, dataset.id)}
    _check_keep(request.keep_columns, kinds)
    _check_kinds(record.features, kinds, dataset.id)
    if request.name is not None and not is_storable_text(request.name):
        raise InvalidInput(
            "The name holds a NUL character or a lone surrogate, which cannot be stored.",
            errors=[{"loc": ["body", "name"], "msg": "unstorable characters"}],
        )
    if request.explain or (request.return_proba and record.task == "classification"):
        # Loaded (and cached) now, as /v1 predict would, so the refusal comes before queueing.
        model = loaded_model(session, cache, store, record.id)
        if request.explain:
            refused = explanations.refusal(model.method, model.estimator)
            if refused is not None:
                raise InvalidInput(
                    f'{refused} Or send "explain": false.',
                    errors=[{"loc": ["body", "explain"], "msg": "not supported by this model"}],
                )
        if request.return_proba and not hasattr(model.estimator, "predict_proba"):
            raise InvalidInput(
                f"A '{model.method}' model predicts labels only, without probabilities. "
                'Send "return_proba": false.',
                errors=[{"loc": ["body", "return_proba"], "msg": "not supported by this model"}],
            )
    now = utc_now()
    features = [str(feature["name"]) for feature in record.features]
    job = JobRecord(
        id=new_id(),
        name=request.name,
        dataset_id=dataset.id,
        method=BATCH_METHOD,
        task=record.task,
        target=record.target,
        features=features,
        params={"model_id": record.id},
        validation={},
        seed=None,
        status=JobStatus.QUEUED,
        progress=0.0,
        stage="queued",
        attempts=0,
        max_attempts=settings.max_attempts,
        cancel_requested=False,
        created_at=now,
    )
    jobs_repository.add(session, job)
    batch = BatchPredictionRecord(
        id=job.id,
        name=request.name,
        model_ref=request.model,
        model_id=record.id,
        dataset_id=dataset.id,
        keep_columns=list(request.keep_columns),
        return_proba=request.return_proba,
        explain=request.explain,
        n_rows=dataset.n_rows,
        output_dataset_id=None,
        metrics=None,
        notes=[],
        created_at=now,
    )
    repository.add(session, batch)
    return batch, job


def _check_keep(keep: list[str], kinds: dict[str, str]) -> None:
    errors: list[FieldError] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, name in enumerate(keep):
        loc: list[str | int] = ["body", "keep_columns", index]
        if name not in kinds:
            problems.append(f"the dataset has no column named '{name}'")
            errors.append({"loc": loc, "msg": f"unknown column '{name}'"})
        elif name in seen:
            problems.append(f"'{name}' is listed twice")
            errors.append({"loc": loc, "msg": "repeated"})
        elif reserved(name):
            problems.append(
                f"'{name}' would clash with an output column (prediction, proba_*, "
                "contribution_*, bias)"
            )
            errors.append({"loc": loc, "msg": "clashes with an output column"})
        seen.add(name)
    if errors:
        detail = "; ".join(problems)
        raise InvalidInput(detail[0].upper() + detail[1:] + ".", errors=errors)


def _check_kinds(features: list[dict[str, Any]], kinds: dict[str, str], dataset_id: str) -> None:
    """A text column for a numeric feature is what ``/v1`` refuses per cell: refuse it here."""
    wrong = [
        str(f["name"])
        for f in features
        if f.get("kind") == ColumnKind.NUMERIC and kinds.get(str(f["name"])) == "categorical"
    ]
    if wrong:
        raise InvalidInput(
            f"Dataset '{dataset_id}' holds text in "
            + ", ".join(f"'{name}'" for name in wrong)
            + ", which the model takes as numeric; score a dataset whose column is numeric.",
            errors=[
                {"loc": ["body", "dataset_id"], "msg": f"column '{name}' is categorical"}
                for name in wrong
            ],
        )


def get_batch(session: Session, batch_id: str) -> Batch:
    found = repository.get(session, batch_id)
    if found is None:
        raise NotFound(f"There is no batch prediction with id '{batch_id}'.")
    return found


def list_batches(
    session: Session,
    *,
    status: JobStatus | None,
    model_id: str | None,
    limit: int,
    offset: int,
) -> tuple[list[Batch], int]:
    return repository.list_page(
        session, status=status, model_id=model_id, limit=limit, offset=offset
    )


def cancel_batch(session: Session, batch_id: str) -> Batch:
    """Cancel: a queued batch at once, a running one within seconds; 409 once it ended."""
    get_batch(session, batch_id)
    try:
        cancel_job(session, batch_id)
    except Conflict:
        _, job = get_batch(session, batch_id)
        raise Conflict(
            f"Batch prediction '{batch_id}' has already ended ({job.status}); only queued or "
            "running ones can be cancelled."
        ) from None
    return get_batch(session, batch_id)
