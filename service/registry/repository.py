"""All SQL about registered models, versions, aliases and alias moves; never a commit."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.pages import page_of
from service.db.tables import (
    AliasMoveRecord,
    ModelRecord,
    RegisteredModelAliasRecord,
    RegisteredModelRecord,
    RegisteredModelVersionRecord,
)

# The PostgreSQL channel every API replica listens on; the payload is the registered name.
NOTIFY_CHANNEL = "coppice_registry"


def get(session: Session, name: str) -> RegisteredModelRecord | None:
    return session.get(RegisteredModelRecord, name)


def add(session: Session, record: RegisteredModelRecord) -> bool:
    """Insert ``record``; False (and nothing written) if the name is taken."""
    try:
        with session.begin_nested():
            session.add(record)
            session.flush()
    except IntegrityError:
        return False
    return True


def lock(session: Session, name: str) -> bool:
    """Take the write lock that serialises changes to ``name``; False if there is no such name.

    A no-op UPDATE and the transaction's first statement: on PostgreSQL it locks the row, on
    SQLite it takes the database's write lock, so what is read after it cannot change before
    the commit (a SELECT ... FOR UPDATE would be ignored by SQLite).
    """
    result = session.execute(
        update(RegisteredModelRecord)
        .where(RegisteredModelRecord.name == name)
        .values(last_version=RegisteredModelRecord.last_version)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def next_version(session: Session, name: str) -> int:
    """Count ``name``'s versions up by one and return the new number (never reused)."""
    number = session.execute(
        update(RegisteredModelRecord)
        .where(RegisteredModelRecord.name == name)
        .values(last_version=RegisteredModelRecord.last_version + 1)
        .returning(RegisteredModelRecord.last_version)
        .execution_options(synchronize_session=False)
    ).scalar_one()
    return int(number)


def list_page(
    session: Session, *, limit: int, offset: int
) -> tuple[list[RegisteredModelRecord], int]:
    order = (RegisteredModelRecord.name,)
    return page_of(session, RegisteredModelRecord, order_by=order, limit=limit, offset=offset)


def versions(session: Session, names: Sequence[str]) -> list[RegisteredModelVersionRecord]:
    """Every version of ``names``, by name then version."""
    if not names:
        return []
    return list(
        session.scalars(
            select(RegisteredModelVersionRecord)
            .where(RegisteredModelVersionRecord.name.in_(names))
            .order_by(RegisteredModelVersionRecord.name, RegisteredModelVersionRecord.version)
        ).all()
    )


def version(session: Session, name: str, number: int) -> RegisteredModelVersionRecord | None:
    return session.get(RegisteredModelVersionRecord, (name, number))


def latest_version(session: Session, name: str) -> RegisteredModelVersionRecord | None:
    return session.scalars(
        select(RegisteredModelVersionRecord)
        .where(RegisteredModelVersionRecord.name == name)
        .order_by(RegisteredModelVersionRecord.version.desc())
        .limit(1)
    ).one_or_none()


def aliases(session: Session, names: Sequence[str]) -> list[RegisteredModelAliasRecord]:
    if not names:
        return []
    return list(
        session.scalars(
            select(RegisteredModelAliasRecord)
            .where(RegisteredModelAliasRecord.name.in_(names))
            .order_by(RegisteredModelAliasRecord.name, RegisteredModelAliasRecord.alias)
        ).all()
    )


def alias(session: Session, name: str, alias_name: str) -> RegisteredModelAliasRecord | None:
    return session.get(RegisteredModelAliasRecord, (name, alias_name))


def aliased_version(
    session: Session, name: str, alias_name: str
) -> RegisteredModelVersionRecord | None:
    """The version ``name@alias`` points at, in one query (the hot path of resolution)."""
    return session.scalars(
        select(RegisteredModelVersionRecord)
        .join(
            RegisteredModelAliasRecord,
            (RegisteredModelAliasRecord.name == RegisteredModelVersionRecord.name)
            & (RegisteredModelAliasRecord.version == RegisteredModelVersionRecord.version),
        )
        .where(
            RegisteredModelAliasRecord.name == name, RegisteredModelAliasRecord.alias == alias_name
        )
    ).one_or_none()


def model_exists(session: Session, model_id: str) -> bool:
    return session.scalar(select(ModelRecord.id).where(ModelRecord.id == model_id)) is not None


def versions_of_model(session: Session, model_id: str) -> list[RegisteredModelVersionRecord]:
    return versions_of_models(session, [model_id]).get(model_id, [])


def versions_of_models(
    session: Session, model_ids: Sequence[str]
) -> dict[str, list[RegisteredModelVersionRecord]]:
    """The registered versions each of ``model_ids`` is, by name and version; one query (by
    the index on ``model_id``) for a page of models."""
    found: dict[str, list[RegisteredModelVersionRecord]] = {}
    if not model_ids:
        return found
    records = session.scalars(
        select(RegisteredModelVersionRecord)
        .where(RegisteredModelVersionRecord.model_id.in_(list(model_ids)))
        .order_by(RegisteredModelVersionRecord.name, RegisteredModelVersionRecord.version)
    )
    for record in records:
        found.setdefault(record.model_id, []).append(record)
    return found


def insert(session: Session, record: RegisteredModelVersionRecord | AliasMoveRecord) -> None:
    """Add a version or an alias move (neither is ever updated)."""
    session.add(record)
    session.flush()


def delete_version(session: Session, name: str, number: int) -> None:
    session.execute(
        delete(RegisteredModelVersionRecord)
        .where(
            RegisteredModelVersionRecord.name == name,
            RegisteredModelVersionRecord.version == number,
        )
        .execution_options(synchronize_session=False)
    )
    session.flush()


def put_alias(session: Session, record: RegisteredModelAliasRecord) -> None:
    """Insert or replace ``record`` (the caller holds the name's lock, so no race)."""
    session.merge(record)
    session.flush()


def delete_alias(session: Session, name: str, alias_name: str) -> None:
    session.execute(
        delete(RegisteredModelAliasRecord)
        .where(
            RegisteredModelAliasRecord.name == name,
            RegisteredModelAliasRecord.alias == alias_name,
        )
        .execution_options(synchronize_session=False)
    )
    session.flush()


def moves_page(
    session: Session, name: str, *, limit: int, offset: int
) -> tuple[list[AliasMoveRecord], int]:
    """Newest first; ids grow with time, so they order the history without ties."""
    return page_of(
        session,
        AliasMoveRecord,
        order_by=(AliasMoveRecord.id.desc(),),
        limit=limit,
        offset=offset,
        where=[AliasMoveRecord.name == name],
    )


def delete_registered_model(session: Session, name: str) -> None:
    """The name; its versions, aliases and history go with it (``ON DELETE CASCADE``, which
    tests/service/db/test_cascades.py holds on both databases)."""
    session.execute(
        delete(RegisteredModelRecord)
        .where(RegisteredModelRecord.name == name)
        .execution_options(synchronize_session=False)
    )
    session.flush()


def notify(session: Session, name: str) -> None:
    """Tell every replica's resolver that ``name`` changed; PostgreSQL delivers it at commit,
    and drops it on rollback. A no-op on SQLite, whose replicas poll instead."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_notify(:channel, :name)"), {"channel": NOTIFY_CHANNEL, "name": name}
        )
