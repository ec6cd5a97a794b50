"""Fixtures for the whole suite. Service fixtures live in tests/service/conftest.py, so the
engine's tests never depend on the web stack."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.process_setup import limit_blas_threads
from tests.s3server import S3Server, running_s3_server


@pytest.fixture
def anyio_backend() -> str:
    # Async tests use anyio's pytest plugin (shipped with anyio, a FastAPI dependency);
    # asyncio is what uvicorn runs the app on.
    return "asyncio"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 server (SeaweedFS on loopback) for this test process, started on first use.

    Tests share its bucket; each uses a prefix of its own (``s3_store_url``)."""
    with running_s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def pytest_configure(config: pytest.Config) -> None:
    # One BLAS thread, as in the service's fit processes: the suite runs on 2 shared cores,
    # where a BLAS pool per core makes the linear learners' tiny products slower, not faster.
    limit_blas_threads()


# Folders whose tests share one server that stops when the run leaves the folder (a session
# fixture; see tests/client/conftest.py): their tests must run together, in one worker.
SHARED_SERVER_FOLDERS = ("tests/client/",)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group and order the tests for ``make test``'s pytest-xdist workers (``--dist loadgroup``).

    Tests that share a fixture wider than a test (a module's or a package's, such as a server)
    form one group, run whole by one worker, in order: the fixture is set up once. So do the
    folders of :data:`SHARED_SERVER_FOLDERS`. Tried first, so pytest-xdist's hook sees the marks.

    Groups and modules holding a test marked ``slow`` run first (in their order, and this
    order within them), so that no minute-long test starts last while the other worker idles.
    """
    units = {item: _unit(item) for item in items}
    for item, (name, grouped) in units.items():
        if grouped:
            item.add_marker(pytest.mark.xdist_group(name))
    slow = {units[item][0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: units[item][0] not in slow)  # stable


def _unit(item: pytest.Item) -> tuple[str, bool]:
    """The group a test must run in (and True), else its module (and False)."""
    module = item.nodeid.split("::")[0]
    for folder in SHARED_SERVER_FOLDERS:
        if module.startswith(folder):
            return folder, True
    info = getattr(item, "_fixtureinfo", None)
    defs = [d for ds in info.name2fixturedefs.values() for d in ds] if info is not None else []
    packages = sorted(d.baseid for d in defs if d.scope == "package")
    if packages:
        return packages[0] or ".", True
    if any(d.scope in ("module", "class") for d in defs):
        return module, True
    return module, False
