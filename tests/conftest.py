"""Fixtures for the whole suite. Service fixtures live in tests/service/conftest.py, so the
engine's tests never depend on the web stack."""

from __future__ import annotations

import pytest

from engine.process_setup import limit_blas_threads


@pytest.fixture
def anyio_backend() -> str:
    # Async tests use anyio's pytest plugin (shipped with anyio, a FastAPI dependency);
    # asyncio is what uvicorn runs the app on.
    return "asyncio"


def pytest_configure(config: pytest.Config) -> None:
    # One BLAS thread, as in the service's fit processes: the suite runs on 2 shared cores,
    # where a BLAS pool per core makes the linear learners' tiny products slower, not faster.
    limit_blas_threads()
