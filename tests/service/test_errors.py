"""Every error renders as RFC 9457 problem details through one renderer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI, HTTPException

from service.errors import (
    PROBLEM_MEDIA_TYPE,
    PROBLEM_SCHEMA,
    Conflict,
    NotFound,
    ServiceError,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def app_with_failing_routes(app: FastAPI) -> FastAPI:
    @app.get("/v1/things/{thing_id}")
    async def get_thing(thing_id: str) -> None:
        raise NotFound(f"There is no thing with id '{thing_id}'.")

    @app.post("/v1/things/{thing_id}/freeze")
    async def freeze_thing(thing_id: str) -> None:
        raise Conflict()

    @app.get("/v1/things")
    async def list_things(limit: int) -> None:
        raise HTTPException(status_code=400, detail="Never reached when limit is invalid.")

    @app.get("/v1/teapot")
    async def teapot() -> None:
        raise HTTPException(status_code=418)

    return app


@pytest.fixture
async def failing_client(app_with_failing_routes: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app_with_failing_routes)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http


async def test_domain_error_renders_problem(failing_client: httpx.AsyncClient) -> None:
    response = await failing_client.get("/v1/things/abc")

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "There is no thing with id 'abc'.",
        "instance": "/v1/things/abc",
    }


async def test_domain_error_defaults_detail_to_docstring(
    failing_client: httpx.AsyncClient,
) -> None:
    response = await failing_client.post("/v1/things/abc/freeze")

    assert response.status_code == 409
    assert response.json()["detail"] == (Conflict.__doc__ or "").strip()


async def test_validation_error_lists_fields(failing_client: httpx.AsyncClient) -> None:
    response = await failing_client.get("/v1/things", params={"limit": "many"})

    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == 422
    assert body["detail"].startswith("query.limit: ")
    assert body["errors"] == [{"loc": ["query", "limit"], "msg": body["errors"][0]["msg"]}]


async def test_http_exception_without_detail_uses_phrase(
    failing_client: httpx.AsyncClient,
) -> None:
    response = await failing_client.get("/v1/teapot")

    assert response.status_code == 418
    assert response.json()["detail"] == "I'm a Teapot"


async def test_method_not_allowed_keeps_allow_header(client: httpx.AsyncClient) -> None:
    response = await client.post("/v2/health/live")

    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


def test_subclass_status_and_title() -> None:
    error: ServiceError = NotFound("gone")

    assert (error.status, error.title, error.detail) == (404, "Not Found", "gone")


async def test_unexpected_exception_is_problem_without_internals(app: FastAPI) -> None:
    @app.get("/v1/crash")
    async def crash() -> None:
        raise RuntimeError("secret internal state")

    # The server re-raises after responding (so the traceback is logged); keep the response.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        response = await http.get("/v1/crash")

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "secret" not in response.text


async def test_openapi_documents_v1_errors_as_problems(client: httpx.AsyncClient) -> None:
    # Found by the Schemathesis fuzzer: the document promised FastAPI's own 422 body
    # (application/json, "detail" a list), which the service never sends.
    document = (await client.get("/openapi.json")).json()

    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            errors = {code: r for code, r in operation["responses"].items() if code[0] == "4"}
            assert "4XX" in errors, f"{method.upper()} {path}"
            for code, response in errors.items():
                assert list(response["content"]) == [PROBLEM_MEDIA_TYPE], f"{code} of {path}"
                assert response["content"][PROBLEM_MEDIA_TYPE]["schema"] == PROBLEM_SCHEMA
