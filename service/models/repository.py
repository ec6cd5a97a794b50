"""All SQL about models, their artifacts and importances: never a commit (the caller owns it)."""

from __future__ import annotations

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

    Children are deleted explicitly rather than trusting ``ON DELETE CASCADE``, which SQLite
    only honours with foreign keys switched on. ``jobs.model_id`` has no foreign key, so the
    job that produced the model is told explicitly that its model is gone.
    """
    session.execute(delete(ImportanceRecord).where(ImportanceRecord.model_id == model_id))
    session.execute(delete(ModelArtifactRecord).where(ModelArtifactRecord.model_id == model_id))
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
