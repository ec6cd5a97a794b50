"""The one place the client speaks HTTP: base URL, API key, retries, errors.

The ``httpx.Client`` is made on first use and never copied: :class:`Transport` deep-copies and
pickles as its settings alone, because scikit-learn's ``clone`` deep-copies a
``RemoteEstimator``'s client, and a connection pool holds locks and sockets that cannot be
copied (``keras-team/keras#14194`` is that failure in another library).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from coppice.errors import (
    ConnectionFailedError,
    ServiceUnavailableError,
    error_from_response,
)

DEFAULT_URL = "http://127.0.0.1:8000"
# Long enough for the slowest ordinary answer (importances computed on first request, a
# large prediction), and past the 30 s a job GET may wait on the server.
DEFAULT_TIMEOUT = 300.0
DEFAULT_RETRIES = 3
# The first retry waits this long, each later one twice as long, none longer than the cap.
BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 8.0

# Failures after which the request certainly or possibly did not reach the application;
# repeating an idempotent call is then harmless. Read timeouts are not among them: the
# server may still be working on the first request.
_RETRIED_TRANSPORT_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    httpx.PoolTimeout,
)


class Transport:
    """Sends requests to one Coppice server; raises :mod:`coppice.errors` on failure."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int | None = None,
    ) -> None:
        if max_retries is None:
            max_retries = int(os.environ.get("COPPICE_MAX_RETRIES", DEFAULT_RETRIES))
        self.url = (url or os.environ.get("COPPICE_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("COPPICE_API_KEY")
        self.timeout = timeout
        self.max_retries = max_retries
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def http(self) -> httpx.Client:
        """The connection pool, made on first use."""
        if self._http is None:
            with self._lock:
                if self._http is None:
                    headers = {"User-Agent": "coppice-python"}
                    if self.api_key:
                        headers["Authorization"] = f"Bearer {self.api_key}"
                    self._http = httpx.Client(
                        base_url=self.url, headers=headers, timeout=self.timeout
                    )
        return self._http

    def request(
        self, method: str, path: str, *, idempotent: bool | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send one request; the answer when it is a success, else the matching error.

        ``idempotent`` defaults to true for GET, HEAD and PUT: only those calls (and others the
        caller vouches for, such as a prediction) are repeated after a 503 or a broken
        connection. A retried upload or training request could create a second dataset or job.
        """
        if idempotent is None:
            idempotent = method in ("GET", "HEAD", "PUT")
        attempts = 1 + (self.max_retries if idempotent else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self.http.request(method, path, **kwargs)
            except _RETRIED_TRANSPORT_ERRORS as error:
                if last:
                    raise ConnectionFailedError(
                        f"cannot reach the Coppice server at {self.url}: {error}"
                    ) from error
                time.sleep(_backoff(attempt, None))
                continue
            except httpx.TransportError as error:
                raise ConnectionFailedError(
                    f"request to the Coppice server at {self.url} failed: {error!r}"
                ) from error
            if response.is_success:
                return response
            failure = error_from_response(response)
            if isinstance(failure, ServiceUnavailableError) and not last:
                time.sleep(_backoff(attempt, response.headers.get("Retry-After")))
                continue
            raise failure
        raise AssertionError("unreachable: the last attempt returns or raises")

    @contextmanager
    def stream(self, method: str, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        """One request whose answer's body is read as it comes (a download); not retried,
        since part of the body may already have been consumed."""
        try:
            with self.http.stream(method, path, **kwargs) as response:
                if not response.is_success:
                    response.read()
                    raise error_from_response(response)
                yield response
        except httpx.TransportError as error:
            raise ConnectionFailedError(
                f"request to the Coppice server at {self.url} failed: {error!r}"
            ) from error

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request`, then the answer's JSON body."""
        return self.request(method, path, **kwargs).json()

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # Copies and pickles carry the settings only; each copy opens its own connections.
    def __getstate__(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "api_key": self.api_key,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> Transport:
        return Transport(**self.__getstate__())


def _backoff(attempt: int, retry_after: str | None) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``Retry-After`` when it gave one."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), MAX_BACKOFF_SECONDS)
        except ValueError:
            pass  # an HTTP date: fall back to our own schedule
    return float(min(BACKOFF_SECONDS * 2**attempt, MAX_BACKOFF_SECONDS))
