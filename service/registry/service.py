"""Rules of the registry: names, versions counted up and never reused, audited alias moves.

Routers call these; so may other domains: ``register_model_version`` is how a search registers
its best model. Every change takes the name's write lock first (``repository.lock``), so a
move reads the alias it replaces and writes the new one and its history row in one
transaction, with no other move in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from service.datasets.ingest import is_storable_text
from service.db.tables import (
    AliasMoveRecord,
    RegisteredModelAliasRecord,
    RegisteredModelRecord,
    RegisteredModelVersionRecord,
)
from service.errors import Conflict, InvalidInput, NotFound
from service.registry import references, repository
from service.registry.cache import ReferenceCache
from service.registry.schemas import MAX_VERSION


@dataclass(frozen=True, slots=True)
class RegisteredModelView:
    """A registered model with its versions and aliases, read together."""

    record: RegisteredModelRecord
    versions: list[RegisteredModelVersionRecord]
    aliases: dict[str, int]

    def aliases_of(self, version: int) -> list[str]:
        return sorted(alias for alias, number in self.aliases.items() if number == version)


class NameTaken(Conflict):
    """A registered model with that name exists already."""


class ModelIsRegistered(Conflict):
    """The model is a registered version and cannot be deleted until that version is."""


# --- names ----------------------------------------------------------------------------------


def create(session: Session, name: str, description: str = "") -> RegisteredModelRecord:
    _check_name(name)
    _check_description(description)
    record = RegisteredModelRecord(name=name, description=description, last_version=0)
    if not repository.add(session, record):
        raise NameTaken(f"A registered model named '{name}' exists already.")
    return record


def get(session: Session, name: str) -> RegisteredModelView:
    record = _existing(session, name)
    return _views(session, [record])[0]


def list_page(
    session: Session, *, limit: int, offset: int
) -> tuple[list[RegisteredModelView], int]:
    records, total = repository.list_page(session, limit=limit, offset=offset)
    return _views(session, records), total


def delete(session: Session, cache: ReferenceCache, name: str) -> None:
    """The name with every version, alias and move; its models stay (and become deletable)."""
    if not repository.lock(session, name):
        raise _no_name(name)
    repository.delete_registered_model(session, name)
    _changed(session, cache, name)


# --- versions -------------------------------------------------------------------------------


def register_model_version(
    session: Session,
    name: str,
    model_id: str,
    alias: str | None = None,
    *,
    description: str = "",
    actor: str | None = None,
    cache: ReferenceCache | None = None,
) -> RegisteredModelVersionRecord:
    """Make ``model_id`` the next version of ``name``, creating the name if it is missing, and
    point ``alias`` at it when given. Adds and flushes; the caller commits.

    Raises ``NotFound`` for an unknown model and ``InvalidInput`` for a bad name or alias.
    ``cache``, when the caller has the app's, is told at once (other replicas learn by notice
    or polling either way).
    """
    _check_name(name)
    _check_description(description)
    if alias is not None:
        _check_alias(alias)
    if not repository.lock(session, name):
        repository.add(session, RegisteredModelRecord(name=name, description=description))
        repository.lock(session, name)
    if not repository.model_exists(session, model_id):
        raise NotFound(
            f"There is no model with id '{model_id}' to register.",
            errors=[{"loc": ["body", "model_id"], "msg": "unknown model"}],
        )
    record = RegisteredModelVersionRecord(
        name=name,
        version=repository.next_version(session, name),
        model_id=model_id,
        created_by=actor,
    )
    repository.insert(session, record)
    if alias is not None:
        _move(session, name, alias, record, actor)
    _changed(session, cache, name)
    return record


def version(
    session: Session, name: str, number: int
) -> tuple[RegisteredModelVersionRecord, list[str]]:
    """Version ``number`` of ``name`` and the aliases that name it."""
    view = get(session, name)
    for record in view.versions:
        if record.version == number:
            return record, view.aliases_of(number)
    raise _no_version(name, number, view)


def delete_version(session: Session, cache: ReferenceCache, name: str, number: int) -> None:
    """Refused while an alias names the version: moving production away is a decision."""
    if not repository.lock(session, name):
        raise _no_name(name)
    view = get(session, name)
    if all(record.version != number for record in view.versions):
        raise _no_version(name, number, view)
    held = view.aliases_of(number)
    if held:
        raise Conflict(
            f"Version {number} of '{name}' is named by alias "
            + ", ".join(f"'{alias}'" for alias in held)
            + "; move or delete the alias first."
        )
    repository.delete_version(session, name, number)
    _changed(session, cache, name)


def registered_as(session: Session, model_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
    """The ``(name, version)`` pairs each model is registered as (absent: none)."""
    return {
        model_id: [(record.name, record.version) for record in records]
        for model_id, records in repository.versions_of_models(session, model_ids).items()
    }


def ensure_deletable(session: Session, model_id: str) -> None:
    """Refuse to delete a model that is a registered version, naming the versions."""
    held = repository.versions_of_model(session, model_id)
    if held:
        listed = ", ".join(f"'{record.name}@{record.version}'" for record in held)
        raise ModelIsRegistered(
            f"Model '{model_id}' is registered as {listed}; delete "
            + ("that version" if len(held) == 1 else "those versions")
            + " (DELETE /v1/registered-models/{name}/versions/{version}) before the model."
        )


# --- aliases --------------------------------------------------------------------------------


def set_alias(
    session: Session,
    cache: ReferenceCache,
    name: str,
    alias: str,
    number: int,
    *,
    actor: str | None = None,
) -> tuple[RegisteredModelVersionRecord, int | None]:
    """Point ``alias`` at version ``number``; returns the version and the one it named before."""
    _check_alias(alias, loc=["path", "alias"])
    if not repository.lock(session, name):
        raise _no_name(name)
    target = repository.version(session, name, number) if number <= MAX_VERSION else None
    if target is None:
        raise _no_version(name, number, get(session, name), loc=["body", "version"])
    previous = _move(session, name, alias, target, actor)
    _changed(session, cache, name)
    return target, previous


def alias(
    session: Session, name: str, alias_name: str
) -> tuple[RegisteredModelAliasRecord, RegisteredModelVersionRecord]:
    """The alias and the version it names."""
    _existing(session, name)
    record = repository.alias(session, name, alias_name)
    target = None if record is None else repository.version(session, name, record.version)
    if record is None or target is None:
        raise NotFound(f"Registered model '{name}' has no alias '{alias_name}'.")
    return record, target


def delete_alias(
    session: Session, cache: ReferenceCache, name: str, alias: str, *, actor: str | None = None
) -> None:
    if not repository.lock(session, name):
        raise _no_name(name)
    current = repository.alias(session, name, alias)
    if current is None:
        raise NotFound(f"Registered model '{name}' has no alias '{alias}'.")
    old = repository.version(session, name, current.version)
    repository.delete_alias(session, name, alias)
    repository.insert(
        session,
        AliasMoveRecord(
            name=name,
            alias=alias,
            from_version=current.version,
            to_version=None,
            from_model_id=None if old is None else old.model_id,
            to_model_id=None,
            actor=actor,
        ),
    )
    _changed(session, cache, name)


def history(
    session: Session, name: str, *, limit: int, offset: int
) -> tuple[list[AliasMoveRecord], int]:
    _existing(session, name)
    return repository.moves_page(session, name, limit=limit, offset=offset)


def _move(
    session: Session,
    name: str,
    alias: str,
    target: RegisteredModelVersionRecord,
    actor: str | None,
) -> int | None:
    """Point ``alias`` at ``target`` and record the move (the caller holds the lock).
    Setting an alias to the version it names already changes nothing and records nothing."""
    current = repository.alias(session, name, alias)
    previous = None if current is None else current.version
    if previous == target.version:
        return previous
    old = None if previous is None else repository.version(session, name, previous)
    repository.put_alias(
        session, RegisteredModelAliasRecord(name=name, alias=alias, version=target.version)
    )
    repository.insert(
        session,
        AliasMoveRecord(
            name=name,
            alias=alias,
            from_version=previous,
            to_version=target.version,
            from_model_id=None if old is None else old.model_id,
            to_model_id=target.model_id,
            actor=actor,
        ),
    )
    return previous


# --- helpers --------------------------------------------------------------------------------


def _changed(session: Session, cache: ReferenceCache | None, name: str) -> None:
    """Tell the other replicas (at commit, on PostgreSQL) and this one's cache: now, and again
    after the commit, so a read racing the transaction cannot keep the old answer here."""
    repository.notify(session, name)
    if cache is None:
        return
    cache.invalidate(name)

    def after_commit(_session: Any) -> None:
        cache.invalidate(name)

    event.listen(session, "after_commit", after_commit, once=True)


def _views(session: Session, records: list[RegisteredModelRecord]) -> list[RegisteredModelView]:
    names = [record.name for record in records]
    versions: dict[str, list[RegisteredModelVersionRecord]] = {name: [] for name in names}
    for record in repository.versions(session, names):
        versions[record.name].append(record)
    aliases: dict[str, dict[str, int]] = {name: {} for name in names}
    for alias in repository.aliases(session, names):
        aliases[alias.name][alias.alias] = alias.version
    return [RegisteredModelView(r, versions[r.name], aliases[r.name]) for r in records]


def _existing(session: Session, name: str) -> RegisteredModelRecord:
    record = repository.get(session, name)
    if record is None:
        raise _no_name(name)
    return record


def _no_name(name: str) -> NotFound:
    return NotFound(f"There is no registered model named '{name}'.")


def _no_version(
    name: str, number: int, view: RegisteredModelView, loc: list[str | int] | None = None
) -> NotFound:
    numbers = [str(record.version) for record in view.versions]
    has = f"its versions are {', '.join(numbers)}" if numbers else "it has no versions yet"
    return NotFound(
        f"Registered model '{name}' has no version {number}; {has}.",
        errors=None if loc is None else [{"loc": loc, "msg": "unknown version"}],
    )


def _check_name(name: str) -> None:
    problem = references.name_problem(name)
    if problem is not None:
        raise InvalidInput(
            f"The name '{name}' cannot be registered: it {problem}.",
            errors=[{"loc": ["body", "name"], "msg": problem}],
        )


def _check_description(description: str) -> None:
    if not is_storable_text(description):
        raise InvalidInput(
            "The description holds a NUL character or a lone surrogate, which cannot be stored.",
            errors=[{"loc": ["body", "description"], "msg": "unstorable characters"}],
        )


def _check_alias(alias: str, loc: list[str | int] | None = None) -> None:
    problem = references.alias_problem(alias)
    if problem is not None:
        raise InvalidInput(
            f"'{alias}' cannot be an alias: it {problem}.",
            errors=[{"loc": loc or ["body", "alias"], "msg": problem}],
        )
