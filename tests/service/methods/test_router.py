"""``GET /v1/methods`` through the real ASGI app."""

from __future__ import annotations

import httpx
import pytest

from service.methods.catalog import CATALOG

pytestmark = pytest.mark.anyio


async def test_lists_every_method_with_schema(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/methods")

    assert response.status_code == 200
    items = {item["name"]: item for item in response.json()["items"]}
    assert set(items) == set(CATALOG)  # the catalog's own contents: test_catalog.py
    assert items["arc_x4"]["tasks"] == ["classification"]
    assert items["random_forest"]["tasks"] == ["classification", "regression"]
    assert "class_weight" in items["random_forest"]["description"]
    schema = items["random_forest"]["params_schema"]
    assert schema["type"] == "object" and "n_estimators" in schema["properties"]
    assert "random_state" not in schema["properties"]
