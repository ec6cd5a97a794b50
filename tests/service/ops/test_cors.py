"""CORS: off unless COPPICE_CORS_ORIGINS names origins; then browsers there may call the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from service.app import create_app
from service.config import Settings

pytestmark = pytest.mark.anyio

ORIGIN = "https://app.example.com"
KEY = "cors-key-Qw3Er5Ty7Ui9"
PREFLIGHT = {
    "Origin": ORIGIN,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


@pytest.fixture
async def cors_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings.model_validate(
        settings.model_dump()
        | {"cors_origins": f"{ORIGIN}/, http://localhost:3000", "api_keys": f"{KEY}:admin"}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http


async def test_off_by_default(client: httpx.AsyncClient) -> None:
    preflight = await client.options("/v1/jobs", headers=PREFLIGHT)
    simple = await client.get("/v1/methods", headers={"Origin": ORIGIN})

    assert "access-control-allow-origin" not in preflight.headers
    assert "access-control-allow-origin" not in simple.headers


async def test_preflight_needs_no_key(cors_client: httpx.AsyncClient) -> None:
    response = await cors_client.options("/v1/jobs", headers=PREFLIGHT)

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "authorization" in response.headers["access-control-allow-headers"].lower()


async def test_responses_are_readable_from_the_origin(cors_client: httpx.AsyncClient) -> None:
    ok = await cors_client.get(
        "/v1/methods", headers={"Origin": ORIGIN, "Authorization": f"Bearer {KEY}"}
    )
    refused = await cors_client.get("/v1/methods", headers={"Origin": ORIGIN})

    for response in (ok, refused):
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert "x-request-id" in response.headers["access-control-expose-headers"].lower()
    assert refused.status_code == 401


async def test_other_origins_get_nothing(cors_client: httpx.AsyncClient) -> None:
    response = await cors_client.options(
        "/v1/jobs", headers={**PREFLIGHT, "Origin": "https://evil.example"}
    )

    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


def test_origins_setting_forms(coppice_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPPICE_CORS_ORIGINS", '["https://a.example/", "*"]')
    assert Settings().cors_origins == ["https://a.example", "*"]
    monkeypatch.setenv("COPPICE_CORS_ORIGINS", "https://a.example, https://b.example:8443")
    assert Settings().cors_origins == ["https://a.example", "https://b.example:8443"]
    monkeypatch.setenv("COPPICE_CORS_ORIGINS", "")
    assert Settings().cors_origins == []
