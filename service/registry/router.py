"""HTTP routes of ``/v1/registered-models``: translate requests to service calls and back."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.db.tables import RegisteredModelVersionRecord
from service.deps import ReferenceCacheDep, SessionDep
from service.errors import problem_responses
from service.paging import Limit, Offset
from service.registry import service
from service.registry.schemas import (
    AliasMoveOut,
    AliasMovePage,
    AliasOut,
    AliasSet,
    RegisteredModelCreate,
    RegisteredModelOut,
    RegisteredModelPage,
    RegisteredModelSummaryOut,
    VersionCreate,
    VersionOut,
)
from service.registry.service import RegisteredModelView

router = APIRouter(
    prefix="/v1/registered-models", tags=["registered models"], responses=problem_responses()
)


def _actor(request: Request) -> str | None:
    """The label of the request's API key (``service.security`` sets it); None without keys."""
    return getattr(request.state, "key_name", None)


@router.post("", status_code=201, responses=problem_responses({409: "The name is taken."}))
def create_registered_model(
    body: RegisteredModelCreate, session: SessionDep, response: Response
) -> RegisteredModelOut:
    """Register a name; versions are added to it with `POST .../{name}/versions`."""
    record = service.create(session, body.name, body.description)
    response.headers["Location"] = f"/v1/registered-models/{record.name}"
    return registered_model_out(RegisteredModelView(record, [], {}))


@router.get("")
def list_registered_models(
    session: SessionDep, limit: Limit = 50, offset: Offset = 0
) -> RegisteredModelPage:
    """Registered models by name, each with its aliases and newest version."""
    views, total = service.list_page(session, limit=limit, offset=offset)
    items = [
        RegisteredModelSummaryOut(
            name=view.record.name,
            description=view.record.description,
            n_versions=len(view.versions),
            latest_version=view.versions[-1].version if view.versions else None,
            aliases=view.aliases,
            created_at=view.record.created_at,
        )
        for view in views
    ]
    return RegisteredModelPage(items=items, total=total)


@router.get("/{name}")
def get_registered_model(name: str, session: SessionDep) -> RegisteredModelOut:
    return registered_model_out(service.get(session, name))


@router.delete("/{name}", status_code=204)
def delete_registered_model(name: str, session: SessionDep, cache: ReferenceCacheDep) -> Response:
    """The name, its versions, aliases and history; the models themselves stay."""
    service.delete(session, cache, name)
    return Response(status_code=204)


@router.post("/{name}/versions", status_code=201)
def create_version(
    name: str,
    body: VersionCreate,
    session: SessionDep,
    cache: ReferenceCacheDep,
    request: Request,
    response: Response,
) -> VersionOut:
    """Register a model as the next version (numbers count up from 1 and are never reused)."""
    service.get(session, name)  # over HTTP the name must exist; the function would create it
    record = service.register_model_version(
        session, name, body.model_id, body.alias, actor=_actor(request), cache=cache
    )
    response.headers["Location"] = f"/v1/registered-models/{name}/versions/{record.version}"
    return version_out(record, [body.alias] if body.alias else [])


@router.get("/{name}/versions/{version}")
def get_version(name: str, version: int, session: SessionDep) -> VersionOut:
    record, aliases = service.version(session, name, version)
    return version_out(record, aliases)


@router.delete(
    "/{name}/versions/{version}",
    status_code=204,
    responses=problem_responses({409: "An alias names this version."}),
)
def delete_version(
    name: str, version: int, session: SessionDep, cache: ReferenceCacheDep
) -> Response:
    """Remove a version (its number is never given again); refused while an alias names it."""
    service.delete_version(session, cache, name, version)
    return Response(status_code=204)


@router.get("/{name}/aliases/{alias}")
def get_alias(name: str, alias: str, session: SessionDep) -> AliasOut:
    _, version = service.alias(session, name, alias)
    return AliasOut(name=name, alias=alias, version=version.version, model_id=version.model_id)


@router.put("/{name}/aliases/{alias}")
def set_alias(
    name: str,
    alias: str,
    body: AliasSet,
    session: SessionDep,
    cache: ReferenceCacheDep,
    request: Request,
) -> AliasOut:
    """Point the alias at a version, atomically, and record the move (who, when, from, to)."""
    version, previous = service.set_alias(
        session, cache, name, alias, body.version, actor=_actor(request)
    )
    return AliasOut(
        name=name,
        alias=alias,
        version=version.version,
        model_id=version.model_id,
        previous_version=previous,
    )


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(
    name: str, alias: str, session: SessionDep, cache: ReferenceCacheDep, request: Request
) -> Response:
    """Remove the alias; the removal is recorded in the history too."""
    service.delete_alias(session, cache, name, alias, actor=_actor(request))
    return Response(status_code=204)


@router.get("/{name}/history")
def alias_history(
    name: str, session: SessionDep, limit: Limit = 50, offset: Offset = 0
) -> AliasMovePage:
    """Every alias move of the name, newest first: which version served under which alias when."""
    records, total = service.history(session, name, limit=limit, offset=offset)
    return AliasMovePage(
        items=[
            AliasMoveOut(
                alias=r.alias,
                from_version=r.from_version,
                to_version=r.to_version,
                from_model_id=r.from_model_id,
                to_model_id=r.to_model_id,
                actor=r.actor,
                moved_at=r.moved_at,
            )
            for r in records
        ],
        total=total,
    )


def version_out(record: RegisteredModelVersionRecord, aliases: list[str]) -> VersionOut:
    return VersionOut(
        name=record.name,
        version=record.version,
        model_id=record.model_id,
        aliases=aliases,
        created_by=record.created_by,
        created_at=record.created_at,
    )


def registered_model_out(view: RegisteredModelView) -> RegisteredModelOut:
    return RegisteredModelOut(
        name=view.record.name,
        description=view.record.description,
        versions=[version_out(v, view.aliases_of(v.version)) for v in view.versions],
        aliases=view.aliases,
        latest_version=view.versions[-1].version if view.versions else None,
        created_at=view.record.created_at,
    )
