"""The /v2 health endpoints and the error shape of unknown paths, through the real ASGI app."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import create_engine

from service.deps import Resources

pytestmark = pytest.mark.anyio


async def test_live(client: httpx.AsyncClient) -> None:
    response = await client.get("/v2/health/live")

    assert response.status_code == 200
    assert response.json() == {"live": True}


async def test_ready(client: httpx.AsyncClient) -> None:
    response = await client.get("/v2/health/ready")

    assert response.status_code == 200
    assert response.json() == {"ready": True}


async def test_not_ready_when_database_unreachable(app: FastAPI, client: httpx.AsyncClient) -> None:
    resources: Resources = app.state.resources
    unreachable = create_engine("sqlite:////nonexistent-dir/coppice.db")
    app.state.resources = Resources(settings=resources.settings, db_engine=unreachable)

    response = await client.get("/v2/health/ready")

    assert response.status_code == 503
    assert response.json() == {"ready": False}


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/models/some-model"])
async def test_requests_while_the_database_is_away_are_503_with_retry_after(
    app: FastAPI, client: httpx.AsyncClient, path: str
) -> None:
    # A restarting database is no bug of the server's: the client should retry, not give up.
    resources: Resources = app.state.resources
    unreachable = create_engine("sqlite:////nonexistent-dir/coppice.db")
    app.state.resources = Resources(settings=resources.settings, db_engine=unreachable)

    response = await client.get(path)

    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "2"
    assert response.headers["Content-Type"] == "application/problem+json"
    assert "database" in response.json()["detail"]


async def test_unknown_v1_path_is_problem_json(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/no-such-resource")

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == "about:blank"
    assert body["title"] == "Not Found"
    assert body["status"] == 404
    assert body["instance"] == "/v1/no-such-resource"
    assert "/v1/no-such-resource" in body["detail"]


async def test_unknown_v2_path_uses_inference_protocol_error(client: httpx.AsyncClient) -> None:
    response = await client.get("/v2/no-such-thing")

    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert set(response.json()) == {"error"}
