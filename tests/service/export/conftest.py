"""Export fixtures: an app on SQLite with a dataset of gaps and categories, trained the
worker's way (``tests.service.models.helpers``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.app import create_app
from service.config import Settings
from tests.service.export.data import COLUMNS, rows
from tests.service.models.helpers import Service


@pytest.fixture
async def svc(settings: Settings) -> AsyncIterator[Service]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            service = Service(client=client, app=app, settings=settings)
            response = await client.post("/v1/datasets", json={"columns": COLUMNS, "rows": rows()})
            assert response.status_code == 201, response.text
            service.dataset_id = response.json()["id"]
            yield service
