"""Fixtures for the whole suite. Service fixtures live in tests/service/conftest.py, so the
engine's tests never depend on the web stack."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    # Async tests use anyio's pytest plugin (shipped with anyio, a FastAPI dependency);
    # asyncio is what uvicorn runs the app on.
    return "asyncio"
