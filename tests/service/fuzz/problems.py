"""What every answer to a fuzzed request must be: a 2xx, or a 4xx that says what is wrong."""

from __future__ import annotations

import os
from typing import Any

import httpx
from hypothesis import HealthCheck, settings

PROBLEM = "application/problem+json"


def examples(default: int) -> int:
    """Examples per fuzz test: ``default`` in ``make test``; ``COPPICE_FUZZ_EXAMPLES`` (``make fuzz``)."""
    return int(os.environ.get("COPPICE_FUZZ_EXAMPLES", default))


# The Hypothesis fuzzers' settings: reproducible, no deadline (the machine is shared), one app
# per test shared by its examples (every upload is a new dataset; nothing needs resetting).
FUZZ = settings(
    max_examples=examples(40),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def problem_fault(status: int, content_type: str, body: Any) -> str | None:
    """Why a 4xx ``/v1`` answer is not a usable problem document, or None when it is one."""
    if content_type.split(";", 1)[0].strip() != PROBLEM:
        return f"a {status} answered with Content-Type {content_type!r}, not {PROBLEM}"
    if not isinstance(body, dict):
        return f"a {status} problem body is not a JSON object: {body!r}"
    missing = [key for key in ("title", "status", "detail") if key not in body]
    if missing:
        return f"a {status} problem body lacks {missing}: {body!r}"
    if body["status"] != status or not isinstance(body["detail"], str) or not body["detail"]:
        return f"a {status} problem body has a wrong status or an empty detail: {body!r}"
    return None


def assert_answered(response: httpx.Response) -> dict[str, Any] | None:
    """Fail on a 5xx; for a 4xx, check the problem document and return it (None on a 2xx)."""
    status = response.status_code
    assert status < 500, (
        f"{status} for {response.request.method} {response.request.url}: {response.text}"
    )
    if status < 400:
        return None
    body: dict[str, Any] = response.json()
    fault = problem_fault(status, response.headers.get("content-type", ""), body)
    assert fault is None, fault
    return body


def assert_names(response: httpx.Response, *names: str) -> dict[str, Any]:
    """The answer is a 4xx problem whose detail or field errors name one of ``names``."""
    body = assert_answered(response)
    assert body is not None, f"expected a 4xx naming one of {names}, got {response.status_code}"
    text = body["detail"] + " " + " ".join(str(e) for e in body.get("errors") or [])
    assert any(name in text for name in names), f"no mention of any of {names} in {body!r}"
    return body
