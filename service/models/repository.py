"""All SQL about models, their artifacts and importances: never a commit (the caller owns it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.pages import newest_first, page_of
from service.db.tables import (
    ImportanceRecord,
    JobRecord,
    ModelArtifactRecord,
    ModelRecord,
    OutOfFoldRecord,
)
from service.store import StoredObject


def get(session: Session, model_id: str) -> ModelRecord | None:
    return session.get(ModelRecord, model_id)


def list_page(
    session: Session, *, method: str | None, limit: int, offset: int
) -> tuple[list[ModelRecord], int]:
    """Newest first. Artifacts are never read."""
    where = [] if method is None else [ModelRecord.method == method]
    order = newest_first(ModelRecord)
    return page_of(session, ModelRecord, order_by=order, limit=limit, offset=offset, where=where)


def artifact(session: Session, model_id: str) -> StoredObject | None:
    """The stored object holding the model's artifact, as its row names it."""
    record = session.get(ModelArtifactRecord, model_id)
    if record is None:
        return None
    return StoredObject(record.path, record.size_bytes, record.sha256)


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
    artifact: StoredObject,
    importances: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    created_at: datetime,
) -> ModelRecord:
    """Add a fitted model: its row, its artifact and the importances computed with it.

    ``model_id`` is the caller's, so the job that made the model can name it in the same
    transaction; ``job_id`` is that job (one model per job). ``dataset_id`` is ``None`` when
    the training data has been deleted since. ``artifact`` is the object already written to the
    data store (bytes first, row after), named here with its size and SHA-256. ``importances`` maps a kind (``"impurity"``) to its per-feature
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
        size_bytes=artifact.size,
        created_at=created_at,
    )
    session.add(model)
    session.flush()  # the model row first: the artifact and importances refer to it
    session.add(
        ModelArtifactRecord(
            model_id=model_id,
            path=artifact.path,
            size_bytes=artifact.size,
            sha256=artifact.sha256,
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


def delete_model(session: Session, model_id: str) -> list[str] | None:
    """Delete the model with its artifact row and importances; the store paths its rows named
    (to delete once this commits), or None if there was no such model.

    The artifact, the importances and any out-of-fold predictions go with the model by the
    schema's ``ON DELETE CASCADE`` (on SQLite too: every connection switches foreign keys on,
    see :mod:`service.db.session`). ``jobs.model_id`` has no foreign key, so the job that
    produced the model is told explicitly that its model is gone.
    """
    paths = list(
        session.scalars(
            select(ModelArtifactRecord.path).where(ModelArtifactRecord.model_id == model_id)
        )
    )
    # A search candidate's out-of-fold predictions are an object of their own.
    paths += [
        path
        for path in session.scalars(
            select(OutOfFoldRecord.path).where(OutOfFoldRecord.model_id == model_id)
        )
        if path
    ]
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
    return paths if result.rowcount else None  # type: ignore[attr-defined]
