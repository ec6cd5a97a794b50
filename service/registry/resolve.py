"""Model references to model ids: what ``/v1/models/{ref}`` and ``/v2/models/{name}`` call.

A plain model id resolves to itself without a query. A registry reference is looked up once
and then kept in the replica's ``ReferenceCache`` (briefly, or until a notice drops it), so a
prediction through ``churn@production`` on a loaded model still reads nothing from the
database most of the time.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from service.errors import NotFound
from service.registry import references, repository
from service.registry.cache import ReferenceCache, Resolved
from service.registry.references import DEFAULT_ALIAS, RegistryRef
from service.registry.schemas import MAX_VERSION


def _registry_ref(ref: str, bare_names: bool) -> RegistryRef | None:
    parsed = references.parse(ref)
    if parsed is None and bare_names and references.name_problem(ref) is None:
        # /v2 has one path segment for "the model": a registered name serves its default.
        return RegistryRef(ref)
    return parsed


def peek(cache: ReferenceCache, ref: str, *, bare_names: bool = False) -> Resolved | None:
    """What ``ref`` resolves to if that is known without the database, else ``None``."""
    if _registry_ref(ref, bare_names) is None:
        return Resolved(ref)
    return cache.get(ref)


def resolve(
    session: Session, cache: ReferenceCache, ref: str, *, bare_names: bool = False
) -> Resolved:
    """The model ``ref`` names. ``bare_names``: a plain name (no ``@``) may be a registered
    name, served at its default alias, else its latest version; if no such name is
    registered, it is taken for a model id. Raises ``NotFound`` naming what is missing."""
    parsed = _registry_ref(ref, bare_names)
    if parsed is None:
        return Resolved(ref)
    known = cache.get(ref)
    if known is not None:
        return known
    generation = cache.generation()
    resolved = _lookup(
        session, parsed, bare=parsed.alias is None and parsed.version is None and not parsed.latest
    )
    cache.put(ref, resolved, parsed.name, generation)
    return resolved


def _lookup(session: Session, ref: RegistryRef, *, bare: bool) -> Resolved:
    if ref.version is not None:
        found = (
            repository.version(session, ref.name, ref.version)
            if ref.version <= MAX_VERSION
            else None
        )
        if found is None:
            _missing_name(session, ref)
            raise NotFound(f"Registered model '{ref.name}' has no version {ref.version}.")
    elif ref.alias is not None:
        found = repository.aliased_version(session, ref.name, ref.alias)
        if found is None:
            _missing_name(session, ref)
            raise NotFound(f"Registered model '{ref.name}' has no alias '{ref.alias}'.")
    else:
        found = None
        if bare:
            found = repository.aliased_version(session, ref.name, DEFAULT_ALIAS)
        if found is None:
            found = repository.latest_version(session, ref.name)
        if found is None:
            if bare and repository.get(session, ref.name) is None:
                return Resolved(ref.name)  # not a registered name: a model id, then
            _missing_name(session, ref)
            raise NotFound(f"Registered model '{ref.name}' has no versions yet.")
    return Resolved(found.model_id, found.name, found.version)


def _missing_name(session: Session, ref: RegistryRef) -> None:
    if repository.get(session, ref.name) is None:
        raise NotFound(
            f"There is no registered model named '{ref.name}' (in the reference '{ref}')."
        )
