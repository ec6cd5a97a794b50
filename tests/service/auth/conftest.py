"""Auth fixtures: an app that requires keys, with one key of each role (one configured by digest)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from service.app import create_app
from service.config import Settings

ADMIN_KEY = "admin-Zq8v1mW3rT5yU7iO9pA2sD4f"
PREDICT_KEY = "predict-Lk3jH5gF7dS9aQ1wE3rT5yU7"
# Configured only by its SHA-256, as an operator who keeps plaintext keys out of the env would.
HASHED_PREDICT_KEY = "hashed-Nb6vC8xZ0lK2jH4gF6dS8aQ0"
ALL_KEYS = (ADMIN_KEY, PREDICT_KEY, HASHED_PREDICT_KEY)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def keys_setting() -> str:
    digest = hashlib.sha256(HASHED_PREDICT_KEY.encode()).hexdigest()
    return f"{ADMIN_KEY}:admin,{PREDICT_KEY}:predict,sha256:{digest}:predict"


@pytest.fixture
def keyed_settings(settings: Settings) -> Settings:
    return Settings.model_validate(settings.model_dump() | {"api_keys": keys_setting()})


@pytest.fixture
async def keyed_app(keyed_settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(keyed_settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def keyed_client(keyed_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=keyed_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http
