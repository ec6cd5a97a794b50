"""Which route template a request is for, known before the router runs and after it ran.

The key check needs it before routing (to tell open routes and predict routes apart), and the
metrics and access log after (to label by template, never by raw path). Both ask
:func:`route_template`, which matches the request the way the router does and remembers the
answer in the request's scope.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from weakref import WeakKeyDictionary

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
    templates = _templates.get(app)
    if templates is None or not templates.current(app):
        templates = _templates[app] = _Templates(app)
    template = templates.of(scope)
    scope[_SCOPE_KEY] = template
    return template


class _Templates:
    """An app's routes flattened once, and the templates of the requests last seen.

    Flattening the included routers and matching every route's pattern in turn took 11-18% of
    a one-row predict's time in process (54 routes); a service's requests repeat the same few
    paths (a model's predict, the health checks), so their answers are remembered by what the
    router matches on: the scope's type, method and path.
    """

    REMEMBERED = 1024

    def __init__(self, app: FastAPI) -> None:
        self._n_routes = len(app.router.routes)
        self._routes = all_routes(app)
        self._seen: OrderedDict[tuple[Any, ...], str | None] = OrderedDict()

    def current(self, app: FastAPI) -> bool:
        """Whether the app's routes are still those flattened (none added since)."""
        return len(app.router.routes) == self._n_routes

    def of(self, scope: Scope) -> str | None:
        key = (scope.get("type"), scope.get("method"), scope.get("root_path"), scope.get("path"))
        if key in self._seen:
            self._seen.move_to_end(key)
            return self._seen[key]
        template: str | None = None
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                template = _path_of(route)
                break
            if match is Match.PARTIAL and template is None:
                template = _path_of(route)
        self._seen[key] = template
        if len(self._seen) > self.REMEMBERED:
            self._seen.popitem(last=False)
        return template


_templates: WeakKeyDictionary[FastAPI, _Templates] = WeakKeyDictionary()


def _path_of(route: Any) -> str | None:
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else None
