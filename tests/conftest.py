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


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order and group the tests for ``make test``'s pytest-xdist workers (``--dist loadgroup``).

    A module (or package) with a fixture of that scope, such as a server that its tests share,
    runs whole in one worker: its fixture is set up once, and its tests run in their order.
    Tried first, so that pytest-xdist's own hook sees the groups.

    Modules holding a test marked ``slow`` run first, in their order, so that no minute-long
    test is left to start last while the other worker has nothing to do.
    """
    for item in items:
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: order kept within


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The module's or package's path, when a fixture of that scope is shared by its tests."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    defs = [d for defs in info.name2fixturedefs.values() for d in defs]
    packages = sorted(d.baseid for d in defs if d.scope == "package")
    if packages:
        return packages[0] or "."
    if any(d.scope in ("module", "class") for d in defs):
        return str(item.path)
    return None
