"""One error hierarchy and one renderer: every ``/v1`` failure is RFC 9457 problem details.

Domain code raises a ``ServiceError`` subclass and never builds HTTP responses; the handlers
registered by ``install_error_handlers`` turn those, FastAPI's ``HTTPException`` (including
Starlette's 404 for unknown paths) and request-validation failures into
``application/problem+json``. The ``/v2`` inference protocol has its own error shape,
``{"error": "..."}``, which clients such as tritonclient expect, so ``/v2`` paths get that one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any, ClassVar, TypedDict

import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
INFERENCE_PREFIX = "/v2/"


class FieldError(TypedDict):
    """One invalid field: where it is in the request and what is wrong with it."""

    loc: list[str | int]
    msg: str


# The OpenAPI description of a problem document, so clients and generated code (and the
# Schemathesis fuzzer, which checks every answer against it) know the /v1 error shape instead
# of FastAPI's default 422 body, which this service never sends.
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string", "description": "What is wrong, in a sentence."},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "The invalid fields, when there are any.",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {
                        "type": "array",
                        "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                    "msg": {"type": "string"},
                },
            },
        },
    },
}


def problem_responses(described: Mapping[int, str] | None = None) -> dict[int | str, Any]:
    """OpenAPI ``responses`` for ``/v1`` routes: every 4xx, and each ``described`` status, is
    a problem document. Declaring ``4XX`` also keeps FastAPI from documenting its own 422."""
    content = {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}}
    responses: dict[int | str, Any] = {
        "4XX": {"description": "The request cannot be served; see detail.", "content": content}
    }
    for status, description in (described or {}).items():
        responses[status] = {"description": description, "content": content}
    return responses


class ServiceError(Exception):
    """The server could not complete the request.

    The root of the server's errors, named apart from the client's ``coppice.CoppiceError``
    (what a caller of the Python client catches) so that a traceback or an import says which
    side of the wire an error belongs to.
    """

    status: ClassVar[int] = HTTPStatus.INTERNAL_SERVER_ERROR
    # "about:blank" tells clients the status code says it all (RFC 9457, section 4.2.1);
    # a subclass with a documented problem page sets its own URI.
    type: ClassVar[str] = "about:blank"

    def __init__(
        self,
        detail: str | None = None,
        *,
        errors: Sequence[FieldError] | None = None,
    ) -> None:
        # The docstring is the default message, so each subclass documents itself once.
        self.detail = detail or (self.__doc__ or "").strip()
        self.errors = list(errors) if errors is not None else None
        super().__init__(self.detail)

    @property
    def title(self) -> str:
        return HTTPStatus(self.status).phrase


class BadRequest(ServiceError):
    """The request is malformed: it cannot be read as what it claims to be."""

    status = HTTPStatus.BAD_REQUEST


class UnsupportedMediaType(ServiceError):
    """The request body is in a format this endpoint does not accept."""

    status = HTTPStatus.UNSUPPORTED_MEDIA_TYPE


class InvalidInput(ServiceError):
    """The request is well-formed but its values cannot be used."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY


class NotFound(ServiceError):
    """No resource has that id."""

    status = HTTPStatus.NOT_FOUND


class Conflict(ServiceError):
    """The resource is in a state that does not allow this request."""

    status = HTTPStatus.CONFLICT


class PayloadTooLarge(ServiceError):
    """The request body is larger than this server accepts."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE


class NotReady(ServiceError):
    """The service is not ready to handle this request; try again shortly."""

    status = HTTPStatus.SERVICE_UNAVAILABLE


class Unauthorized(ServiceError):
    """This request needs a valid API key."""

    status = HTTPStatus.UNAUTHORIZED


class Forbidden(ServiceError):
    """This API key's role does not allow this request."""

    status = HTTPStatus.FORBIDDEN


def problem_response(
    request: Request,
    *,
    status: int,
    detail: str,
    title: str | None = None,
    type_: str = "about:blank",
    errors: Sequence[FieldError] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """Render one problem; ``/v2`` paths get the inference protocol's ``{"error": ...}``."""
    path = request.url.path
    # "/v2" itself is the protocol's server metadata route.
    if path.startswith(INFERENCE_PREFIX) or path == INFERENCE_PREFIX.rstrip("/"):
        return JSONResponse({"error": detail}, status_code=status, headers=headers)
    body: dict[str, Any] = {
        "type": type_,
        "title": title or HTTPStatus(status).phrase,
        "status": int(status),
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = list(errors)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


async def _service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return problem_response(
        request,
        status=exc.status,
        title=exc.title,
        detail=exc.detail,
        type_=exc.type,
        errors=exc.errors,
    )


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    phrase = HTTPStatus(exc.status_code).phrase
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail else phrase
    if exc.status_code == HTTPStatus.NOT_FOUND and detail == phrase:
        detail = f"There is nothing at {request.url.path}; check the path against /docs."
    return problem_response(request, status=exc.status_code, detail=detail, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: list[FieldError] = [
        {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", ""))}
        for error in exc.errors()
    ]
    if len(errors) == 1:
        location = ".".join(str(part) for part in errors[0]["loc"])
        detail = f"{location}: {errors[0]['msg']}."
    else:
        detail = f"{len(errors)} fields of the request are invalid; see errors."
    return problem_response(
        request, status=HTTPStatus.UNPROCESSABLE_ENTITY, detail=detail, errors=errors
    )


def internal_error_response(request: Request) -> JSONResponse:
    """The answer to an unexpected failure: no internals, only the request id to quote.

    The request id is the one ``service.observability`` gave the request (and logged the
    traceback with); it is also in the ``X-Request-ID`` header.
    """
    request_id = getattr(request.state, "request_id", None)
    detail = "The server failed to handle this request; it has been logged"
    detail += f" with request id {request_id}." if request_id else "."
    headers = {"X-Request-ID": request_id} if request_id else None
    return problem_response(
        request, status=HTTPStatus.INTERNAL_SERVER_ERROR, detail=detail, headers=headers
    )


# Seconds a client is asked to wait before retrying while the database is away.
DATABASE_RETRY_AFTER = 2


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    # The database is restarting, unreachable or busy past its timeout: no bug of this server,
    # and a retry may well succeed. One line in the log, without the URL (it may hold a password).
    cause = getattr(exc, "orig", None) or exc
    logger.warning(
        "database unavailable in %s %s: %s",
        request.method,
        request.url.path,
        f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}",
    )
    return problem_response(
        request,
        status=HTTPStatus.SERVICE_UNAVAILABLE,
        detail="The database is not answering; try again in a few seconds.",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    # Reached only by failures outside the request middleware of service.observability (which
    # answers, and logs, the others itself); Starlette re-raises after this response is sent,
    # so the server logs the traceback.
    return internal_error_response(request)


def install_error_handlers(app: FastAPI) -> None:
    """Register the renderers on ``app``; ``create_app`` calls this once."""
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(sqlalchemy.exc.OperationalError, _database_unavailable)
    app.add_exception_handler(sqlalchemy.exc.TimeoutError, _database_unavailable)
    app.add_exception_handler(Exception, _unhandled)
