"""All SQL about models, their artifacts and importances: never a commit (the caller owns it)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.pages import newest_first, page_of
from service.db.tables import ImportanceRecord, JobRecord, ModelArtifactRecord, ModelRecord


def get(session: Session, model_id: str) -> ModelRecord | None:
    return session.get(ModelRecord, model_id)


def list_page(
    session: Session, *, method: str | None, limit: int, offset: int
) -> tuple[list[ModelRecord], int]:
    """Newest first. Artifacts are never read."""
    where = [] if method is None else [ModelRecord.method == method]
    order = newest_first(ModelRecord)
    return page_of(session, ModelRecord, order_by=order, limit=limit, offset=offset, where=where)


def artifact(session: Session, model_id: str) -> ModelArtifactRecord | None:
    return session.get(ModelArtifactRecord, model_id)


def job(session: Session, job_id: str) -> JobRecord | None:
    return session.get(JobRecord, job_id)


def importance(session: Session, model_id: str, kind: str) -> ImportanceRecord | None:
    return session.scalars(
        select(ImportanceRecord).where(
            ImportanceRecord.model_id == model_id, ImportanceRecord.kind == kind
        )
    ).one_or_none()


def stored_importance_kinds(session: Session, model_id: str) -> list[str]:
    return list(
        session.scalars(
            select(ImportanceRecord.kind).where(ImportanceRecord.model_id == model_id)
        ).all()
    )


def add_trained_model(
    session: Session,
    *,
    model_id: str,
    job_id: str,
    name: str | None,
    dataset_id: str | None,
    method: str,
    task: str,
    target: str,
    features: Sequence[Mapping[str, Any]],
    classes: Sequence[Any] | None,
    params: Mapping[str, Any],
    encoding: Mapping[str, Any],
    metrics: Mapping[str, Any],
    curves: Mapping[str, Any] | None,
    n_estimators: int | None,
    artifact: bytes,
    importances: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    created_at: datetime,
) -> ModelRecord:
    """Add a fitted model: its row, its artifact and the importances computed with it.

    ``model_id`` is the caller's, so the job that made the model can name it in the same
    transaction; ``job_id`` is that job (one model per job). ``dataset_id`` is ``None`` when
    the training data has been deleted since. The artifact's size and SHA-256 are taken from
    ``artifact`` itself. ``importances`` maps a kind (``"impurity"``) to its per-feature
    entries. Flushed, never committed: the caller's transaction makes it all or nothing.
    """
    model = ModelRecord(
        id=model_id,
        name=name,
        job_id=job_id,
        # No foreign key (a model outlives its data), so no NULL either: "" is "deleted".
        dataset_id=dataset_id or "",
        method=method,
        task=task,
        target=target,
        features=[dict(feature) for feature in features],
        classes=None if classes is None else list(classes),
        params=dict(params),
        encoding=dict(encoding),
        metrics=dict(metrics),
        curves=None if curves is None else dict(curves),
        n_estimators=n_estimators,
        size_bytes=len(artifact),
        created_at=created_at,
    )
    session.add(model)
    session.flush()  # the model row first: the artifact and importances refer to it
    session.add(
        ModelArtifactRecord(
            model_id=model_id,
            data=artifact,
            size_bytes=len(artifact),
            sha256=hashlib.sha256(artifact).hexdigest(),
        )
    )
    for kind, entries in (importances or {}).items():
        session.add(
            ImportanceRecord(
                model_id=model_id,
                kind=kind,
                payload={"features": entries},
                created_at=created_at,
            )
        )
    session.flush()
    return model


def add_importance(session: Session, record: ImportanceRecord) -> ImportanceRecord:
    """Store a computed importance; if a concurrent request stored it first, return theirs."""
    try:
        with session.begin_nested():
            session.add(record)
            session.flush()
    except IntegrityError:
        existing = importance(session, record.model_id, record.kind)
        if existing is None:
            raise
        return existing
    return record


def delete_model(session: Session, model_id: str) -> bool:
    """Delete the model with its artifact and importances; True if it existed.

    The artifact, the importances and any out-of-fold predictions go with the model by the
    schema's ``ON DELETE CASCADE`` (on SQLite too: every connection switches foreign keys on,
    see :mod:`service.db.session`). ``jobs.model_id`` has no foreign key, so the job that
    produced the model is told explicitly that its model is gone.
    """
    session.execute(
        update(JobRecord)
        .where(JobRecord.model_id == model_id)
        .values(model_id=None)
        .execution_options(synchronize_session=False)
    )
    result = session.execute(
        delete(ModelRecord)
        .where(ModelRecord.id == model_id)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return bool(result.rowcount)  # type: ignore[attr-defined]
