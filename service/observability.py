"""Request ids, the access log and request metrics: one middleware around every request.

:class:`RequestMiddleware` gives each request an id — the client's ``X-Request-ID`` when it is a
sane token, a fresh one otherwise — binds it to the logging context, echoes it in the response's
``X-Request-ID`` header, and when the response is done writes one access-log line (logger
``coppice.access``) and records the request in the app's metrics under its route template, never
its raw path. An exception no handler took is logged here, once, with its traceback and the
request id, and answered with :func:`service.errors.internal_error_response`, which tells the
client only that id.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import internal_error_response
from service.logs import bound, request_id_var
from service.metrics import HttpMetrics, create_registry, metrics_endpoint
from service.routing import route_template
from service.security import METRICS_ROUTE

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("coppice.access")

REQUEST_ID_HEADER = "X-Request-ID"
# A client's id is kept only if it cannot forge log lines or blow up a header.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
_KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Requests for a path no route matches share one label, so scanners cannot grow the metrics.
UNMATCHED_ROUTE = "<unmatched>"
# Probed every few seconds by orchestrators and Prometheus: logged at DEBUG when they succeed.
_QUIET_ROUTES = frozenset({"/v2/health/live", "/v2/health/ready", METRICS_ROUTE})


def request_id_of(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1").strip()
            if _SANE_REQUEST_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


class RequestMiddleware:
    """Request id, access log, metrics and the last-resort 500, for every HTTP request."""

    def __init__(self, app: ASGIApp, *, fastapi_app: FastAPI, metrics: HttpMetrics) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        header = (REQUEST_ID_HEADER.lower().encode(), request_id.encode("latin-1"))
        status: int | None = None
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                if all(name.lower() != header[0] for name, _ in headers):
                    message = {**message, "headers": [*headers, header]}
            await send(message)

        with bound(request_id_var, request_id):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                logger.exception("unhandled error in %s %s", scope["method"], scope["path"])
                if status is not None:
                    raise  # the response has begun; nothing sensible can be sent now
                # The Request is built from the scope, so it carries the request id.
                await internal_error_response(Request(scope))(scope, receive, send_with_id)
            finally:
                if status is not None:
                    self._record(scope, status, time.perf_counter() - started)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        template = route_template(self.fastapi_app, scope) or UNMATCHED_ROUTE
        method = scope["method"] if scope["method"] in _KNOWN_METHODS else "OTHER"
        self.metrics.observe(method, template, status, seconds)
        fields: dict[str, Any] = {
            "method": scope["method"],
            "path": scope["path"],
            "route": template,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
        }
        client = scope.get("client")
        if client:
            fields["client"] = client[0]
        # The key's name (or digest prefix) that service.security authenticated; never the key.
        key_name = scope.get("state", {}).get("key_name")
        if key_name is not None:
            fields["key_name"] = key_name
        level = logging.DEBUG if template in _QUIET_ROUTES and status < 400 else logging.INFO
        access_logger.log(
            level,
            "%s %s %d %.1fms",
            scope["method"],
            scope["path"],
            status,
            seconds * 1000,
            extra=fields,
        )


def install_observability(app: FastAPI) -> None:
    """Add ``/metrics`` and the request middleware to ``app``; ``create_app`` calls this once."""
    registry, http = create_registry(app, app.version)
    app.state.metrics_registry = registry
    app.add_api_route(
        METRICS_ROUTE,
        metrics_endpoint(registry),
        methods=["GET"],
        include_in_schema=False,
    )
    app.add_middleware(RequestMiddleware, fastapi_app=app, metrics=http)
