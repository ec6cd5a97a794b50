"""Request bodies the JSON parser chokes on are a 400 that says why, never a 500.

The same for /v2 inference requests: tests/service/inference/test_errors.py.
"""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.anyio

# Deep enough to exhaust Python's recursive JSON parser (its limit is about 1,000 levels).
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/datasets", '{"columns": ["a"], "rows": ' + DEEP + "}"),
        ("/v1/models/some-model/predict", '{"rows": ' + DEEP + "}"),
        ("/v1/datasets", "{not json"),
        ("/v1/datasets", b'{"columns": ["\xff"]}'),
        # Past Python's 4,300-digit limit on int(); found by tests/service/fuzz (was a 500).
        ("/v1/datasets", '{"columns": ["a"], "rows": [[' + "9" * 5000 + "]]}"),
        ("/v1/models/some-model/predict", '{"records": [{"x": ' + "9" * 5000 + "}]}"),
    ],
    ids=["deep-upload", "deep-predict", "malformed", "not-utf8", "digits-upload", "digits-predict"],
)
async def test_unparseable_json_is_a_400_problem(
    client: httpx.AsyncClient, path: str, body: str | bytes
) -> None:
    response = await client.post(path, content=body, headers={"content-type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"].startswith("The body ")
