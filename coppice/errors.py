"""What the client raises: one class per kind of failure, the server's ``detail`` as message.

Every ``/v1`` error is an RFC 9457 problem document; :func:`error_from_response` turns one
into the class for its status, so that callers can catch "not found" or "invalid" without
reading status codes, and still reach the whole document (``error.problem``) and the field
errors (``error.errors``) when they need them.
"""

from __future__ import annotations

from typing import Any

import httpx


class CoppiceError(Exception):
    """Anything the Coppice client raises."""


class APIError(CoppiceError):
    """The server answered with an error; ``str(error)`` is its ``detail``."""

    def __init__(self, detail: str, *, status: int, problem: dict[str, Any] | None = None):
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.problem: dict[str, Any] = problem or {}

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The invalid fields (``{"loc", "msg"}``), when the server named any."""
        found = self.problem.get("errors")
        return list(found) if isinstance(found, list) else []

    @property
    def title(self) -> str:
        return str(self.problem.get("title", ""))


class ClientError(APIError):
    """A 4xx: the request cannot be served as it is."""


class BadRequestError(ClientError):
    """400: the body is malformed (bad CSV, bad JSON)."""


class AuthenticationError(ClientError):
    """401: no API key, or an unknown one."""


class PermissionDeniedError(ClientError):
    """403: the key's role may not do this (a ``predict`` key training, say)."""


class NotFoundError(ClientError):
    """404: no such dataset, job or model (or no such resource of it, e.g. curves)."""


class ConflictError(ClientError):
    """409: the resource is in the wrong state (cancelling a finished job, say)."""


class PayloadTooLargeError(ClientError):
    """413: an upload or a prediction over the server's limits."""


class ValidationError(ClientError):
    """422 (and 415): values the server refuses; ``errors`` names the fields."""


class ServerError(APIError):
    """A 5xx: the server failed; retrying later may help."""


class ServiceUnavailableError(ServerError):
    """503: the server is not ready (its database unreachable, say)."""


class ConnectionFailedError(CoppiceError):
    """No answer at all: the server is unreachable, or the connection broke."""


class JobFailedError(CoppiceError):
    """A training job ended ``failed``; ``code`` is the server's error code."""

    def __init__(self, job_id: str, code: str, message: str):
        super().__init__(f"job {job_id} failed ({code}): {message}")
        self.job_id = job_id
        self.code = code
        self.message = message


class JobCancelledError(CoppiceError):
    """A training job ended ``cancelled`` before it produced a model."""

    def __init__(self, job_id: str):
        super().__init__(f"job {job_id} was cancelled")
        self.job_id = job_id


class SearchFailedError(CoppiceError):
    """A search ended ``failed``: no candidate succeeded. ``notes`` are the server's reasons."""

    def __init__(self, search_id: str, notes: list[str]):
        reason = "; ".join(notes) or "no candidate succeeded"
        super().__init__(f"search {search_id} failed: {reason}")
        self.search_id = search_id
        self.notes = notes


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: ValidationError,
    422: ValidationError,
    503: ServiceUnavailableError,
}


def error_from_response(response: httpx.Response) -> APIError:
    """The exception for an error response, carrying its problem document when it has one."""
    problem: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        problem = body
    detail = problem.get("detail") or problem.get("error") or problem.get("title")
    if not detail:
        # Not a problem document (a proxy's HTML page, say): the status line is all there is.
        detail = f"{response.status_code} {response.reason_phrase}".strip()
    status = response.status_code
    default = ServerError if status >= 500 else ClientError
    return _BY_STATUS.get(status, default)(str(detail), status=status, problem=problem)
