"""Who may call what: API keys checked in one middleware in front of every route.

Keys come from ``COPPICE_API_KEYS`` (:mod:`service.api_keys` parses them). Each has a role:
``admin`` may do everything, ``predict`` may read (``GET``/``HEAD``) and predict
(``POST /v1/models/{id}/predict`` and the ``/v2`` infer routes).

:class:`AuthMiddleware` sits in front of the router, so a route added anywhere, by anyone, is
covered without opting in; the few open routes are listed by :func:`open_routes` (health, the
API docs, and ``/metrics`` unless ``COPPICE_METRICS_REQUIRE_KEY``). It answers before a body is read: ``401`` for a missing
or unknown key (with ``WWW-Authenticate: Bearer``), ``403`` for a role too low, rendered by
:func:`service.errors.problem_response` — problem details on ``/v1``, ``{"error": ...}`` on
``/v2``. With no keys configured the API is open, and start-up says so in a warning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api_keys import KeyRing, Role
from service.errors import Forbidden, Unauthorized, problem_response
from service.routing import route_template

if TYPE_CHECKING:
    from service.config import Settings

logger = logging.getLogger(__name__)

# Routes anyone may call, keys or not: orchestrators probe health without credentials.
HEALTH_ROUTES = frozenset({"/v2/health/live", "/v2/health/ready"})
METRICS_ROUTE = "/metrics"
# POST routes a predict key may call (route templates; the /v2 ones per the KServe protocol).
_PREDICT_POST = re.compile(
    r"/v1/models/\{[^/]+\}/predict|/v2/models/\{[^/]+\}(?:/versions/\{[^/]+\})?/infer"
)
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_REALM = 'Bearer realm="coppice"'


def required_role(method: str, route: str | None) -> Role:
    """The least role that may call ``method`` on ``route`` (a template; ``None`` if unmatched)."""
    if method in _SAFE_METHODS:
        return Role.PREDICT
    if method == "POST" and route is not None and _PREDICT_POST.fullmatch(route):
        return Role.PREDICT
    return Role.ADMIN


def bearer_token(scope: Scope) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or ``None``."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


class AuthMiddleware:
    """Refuses every request to a protected route that lacks a key of a sufficient role."""

    def __init__(
        self, app: ASGIApp, *, fastapi_app: FastAPI, keyring: KeyRing, open_routes: frozenset[str]
    ) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.keyring = keyring
        self.open_routes = open_routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not len(self.keyring):
            await self.app(scope, receive, send)
            return
        template = route_template(self.fastapi_app, scope)
        if template in self.open_routes:
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        key = None if token is None else self.keyring.authenticate(token)
        if key is None:
            error = Unauthorized(
                "This request needs an API key: send it as 'Authorization: Bearer <key>'."
                if token is None
                else "The API key is not valid."
            )
            challenge = _REALM if token is None else f'{_REALM}, error="invalid_token"'
            await self._refuse(scope, receive, send, error, challenge)
            return
        scope.setdefault("state", {})["key_name"] = key.label
        scope["state"]["key_role"] = key.role
        needed = required_role(scope["method"], template)
        if needed is Role.ADMIN and key.role is not Role.ADMIN:
            refusal = Forbidden(
                f"This API key has the '{key.role}' role, which may read and predict only; "
                f"{scope['method']} {template or scope['path']} needs an '{Role.ADMIN}' key."
            )
            await self._refuse(
                scope, receive, send, refusal, f'{_REALM}, error="insufficient_scope"'
            )
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(
        scope: Scope,
        receive: Receive,
        send: Send,
        error: Unauthorized | Forbidden,
        challenge: str,
    ) -> None:
        request = Request(scope, receive)
        response = problem_response(
            request,
            status=error.status,
            title=error.title,
            detail=error.detail,
            headers={"WWW-Authenticate": challenge},
        )
        await response(scope, receive, send)


def open_routes(app: FastAPI, settings: Settings, pages: Iterable[str] = ()) -> frozenset[str]:
    """Routes that need no key: health, the API docs, ``pages`` (the console's), and
    ``/metrics`` unless configured."""
    docs = {app.docs_url, app.redoc_url, app.openapi_url, app.swagger_ui_oauth2_redirect_url}
    routes = set(HEALTH_ROUTES) | {path for path in docs if path} | set(pages)
    if not settings.metrics_require_key:
        routes.add(METRICS_ROUTE)
    return frozenset(routes)


def install_security(app: FastAPI, settings: Settings, open_pages: Iterable[str] = ()) -> None:
    """Put the key check in front of every route of ``app``; ``create_app`` calls this once.

    ``open_pages`` are route templates of pages that hold no data (the console's), open to all.
    """
    keyring = KeyRing(settings.api_keys)
    unguarded = open_routes(app, settings, open_pages)
    if not len(keyring):
        logger.warning(
            "COPPICE_API_KEYS is not set: the API is open to anyone who can reach it; "
            "configure keys before exposing it beyond localhost"
        )
    else:
        logger.info("API keys required: %d key(s) configured", len(keyring))
        _document_bearer_auth(app, unguarded)
    app.add_middleware(AuthMiddleware, fastapi_app=app, keyring=keyring, open_routes=unguarded)


def _document_bearer_auth(app: FastAPI, open_paths: frozenset[str]) -> None:
    """Declare the bearer scheme in the OpenAPI document, so /docs offers to send a key."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["apiKey"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from COPPICE_API_KEYS.",
        }
        schema["security"] = [{"apiKey": []}]
        for path, operations in schema.get("paths", {}).items():
            if path in open_paths:
                for operation in operations.values():
                    operation["security"] = []
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install_cors(app: FastAPI, settings: Settings) -> None:
    """Let browsers on ``COPPICE_CORS_ORIGINS`` call the API; off when that is empty."""
    if not settings.cors_origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=settings.cors_origins,
        allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
        expose_headers=["Location", "X-Request-ID", "WWW-Authenticate"],
        # Keys travel in a header, never in cookies, so credentials mode is not needed.
        allow_credentials=False,
        max_age=600,
    )
