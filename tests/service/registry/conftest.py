"""Registry fixtures: an app on SQLite or PostgreSQL holding two trained models.

On SQLite the two models are trained once per package into a template file that each test
copies; PostgreSQL tests train their own (there are few of them).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.models.helpers import Service


@dataclass
class Registry:
    """The running app, its client, and two models with different predictions."""

    svc: Service
    first: str  # random_forest on "label"
    second: str  # logistic regression on "label"

    @property
    def client(self) -> httpx.AsyncClient:
        return self.svc.client

    async def register(self, name: str, *model_ids: str) -> None:
        """Create ``name`` with ``model_ids`` as versions 1, 2, ..."""
        created = await self.client.post("/v1/registered-models", json={"name": name})
        assert created.status_code == 201, created.text
        for model_id in model_ids:
            response = await self.client.post(
                f"/v1/registered-models/{name}/versions", json={"model_id": model_id}
            )
            assert response.status_code == 201, response.text

    async def move(self, name: str, alias: str, version: int) -> httpx.Response:
        return await self.client.put(
            f"/v1/registered-models/{name}/aliases/{alias}", json={"version": version}
        )


async def train_two(svc: Service) -> tuple[str, str]:
    first = await svc.train("random_forest", params={"n_estimators": 5})
    second = await svc.train("logistic_regression", params={})
    return first, second


@pytest.fixture(scope="package")
def sqlite_seed(
    tmp_path_factory: pytest.TempPathFactory, migrated_sqlite_template: Path
) -> tuple[Path, str, str]:
    data_dir = tmp_path_factory.mktemp("registry-seed")
    shutil.copyfile(migrated_sqlite_template, data_dir / "coppice.db")
    settings = Settings(data_dir=data_dir, database_url=None, embedded_worker=False)

    async def seed() -> tuple[str, str]:
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await train_two(Service(client=client, app=app, settings=settings))

    first, second = anyio.run(seed)
    return data_dir / "coppice.db", first, second


# Marks a test to run on PostgreSQL as well (tests run on SQLite only otherwise: training the
# models for each PostgreSQL test costs a second or two).
BOTH_BACKENDS = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
async def registry(
    request: pytest.FixtureRequest, backend: str, sqlite_seed: tuple[Path, str, str]
) -> AsyncIterator[Registry]:
    if backend == "sqlite":
        settings: Settings = request.getfixturevalue("settings")
        shutil.copyfile(sqlite_seed[0], settings.data_dir / "coppice.db")
        # The models' artifacts live in the data store beside the database: copied together.
        shutil.copytree(sqlite_seed[0].parent / "store", settings.data_dir / "store")
    else:
        settings = request.getfixturevalue("postgres_settings")
    settings = settings.model_copy(update={"model_cache_bytes": 64 * 2**20})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            svc = Service(client=client, app=app, settings=settings)
            if backend == "sqlite":
                first, second = sqlite_seed[1], sqlite_seed[2]
            else:
                first, second = await train_two(svc)
            yield Registry(svc, first, second)
