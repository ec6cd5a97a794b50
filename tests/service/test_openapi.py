"""/openapi.json is a document that stands alone: every reference in it resolves inside it."""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.anyio


async def test_every_reference_resolves_within_the_document(client: httpx.AsyncClient) -> None:
    # The predict and infer routes describe bodies they parse themselves; their nested models
    # once pointed at '#/$defs/...', which no document root holds, and ReDoc stopped there.
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    references = set(re.findall(r'"\$ref":\s*"([^"]+)"', response.text))
    assert any("Inference" in reference for reference in references), references
    for reference in references:
        assert reference.startswith("#/"), reference
        node = document
        for part in reference[2:].split("/"):
            assert part in node, f"{reference} does not resolve in /openapi.json"
            node = node[part]
