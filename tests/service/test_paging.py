"""``limit`` and ``offset`` of the list endpoints: the database's integer range is the bound."""

from __future__ import annotations

import httpx
import pytest

from service.paging import MAX_OFFSET

pytestmark = pytest.mark.anyio

LISTS = ["/v1/datasets", "/v1/jobs", "/v1/models"]


@pytest.mark.parametrize("path", LISTS)
async def test_an_offset_past_64_bits_is_a_422_naming_it(
    client: httpx.AsyncClient, path: str
) -> None:
    # Found by the Schemathesis fuzzer: SQLite's driver raised OverflowError, a 500.
    response = await client.get(path, params={"offset": MAX_OFFSET + 1})

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["errors"][0]["loc"] == ["query", "offset"]


@pytest.mark.parametrize("path", LISTS)
async def test_the_largest_offset_is_an_empty_page(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path, params={"offset": MAX_OFFSET, "limit": 1000})

    assert response.status_code == 200, response.text
    assert response.json()["items"] == []
