"""Which route template a request is for, known before the router runs and after it ran.

The key check needs it before routing (to tell open routes and predict routes apart), and the
metrics and access log after (to label by template, never by raw path). Both ask
:func:`route_template`, which matches the request the way the router does and remembers the
answer in the request's scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

try:  # FastAPI keeps included routers nested; this flattens them with their full paths.
    from fastapi.routing import iter_route_contexts
except ImportError:  # pragma: no cover - FastAPI releases that keep app.routes flat
    iter_route_contexts = None  # type: ignore[assignment]

_SCOPE_KEY = "coppice.route_template"
_UNSET = object()


def all_routes(app: FastAPI) -> list[Any]:
    """Every route of ``app``, included routers flattened; each has ``path`` and ``matches``."""
    routes: Sequence[BaseRoute] = app.router.routes
    if iter_route_contexts is None:
        return list(routes)
    return list(iter_route_contexts(routes))


def route_template(app: FastAPI, scope: Scope) -> str | None:
    """The path template of the route the router picks for ``scope``; ``None`` if none matches.

    A route whose path matches but whose methods do not counts, as it does for the router
    (which answers 405 from it).
    """
    cached = scope.get(_SCOPE_KEY, _UNSET)
    if cached is not _UNSET:
        return cached if isinstance(cached, str) else None
    template: str | None = None
    for route in all_routes(app):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            template = _path_of(route)
            break
        if match is Match.PARTIAL and template is None:
            template = _path_of(route)
    scope[_SCOPE_KEY] = template
    return template


def _path_of(route: Any) -> str | None:
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else None
