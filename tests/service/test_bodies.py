"""Request bodies the JSON parser chokes on are a 400 that says why, never a 500.

The same for /v2 inference requests: tests/service/inference/test_errors.py.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from service.bodies import parse_json
from service.errors import BadRequest

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


@pytest.mark.parametrize(
    "body",
    [
        b'{"records": [{"x": 1, "y": -2.5e-3, "z": null, "c": "r\\u00e9d", "b": true}]}',
        b'{"rows": [[18446744073709551616, 1e308, -0.0, 123456789012345678901234567890]]}',
        b'{"a": 1, "a": 2}',
    ],
    ids=["scalars", "big-numbers", "repeated-key"],
)
def test_parsing_for_floats_reads_numbers_as_float_does(body: bytes) -> None:
    fast = parse_json(body, numbers_as_floats=True)
    plain = parse_json(body)
    assert json.dumps(fast) == json.dumps(as_floats(plain))


def as_floats(value: Any) -> Any:
    """``value`` with integers past 64 bits turned into floats, as a predict body reads them."""
    if isinstance(value, dict):
        return {key: as_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_floats(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**64:
        return float(value)
    return value


@pytest.mark.parametrize(
    "body",
    [
        b"NaN",
        b"[1e400]",
        b"{not json",
        b'["\xff"]',
        b"[" * 5000 + b"]" * 5000,
        b"[" + b"9" * 5000 + b"]",
    ],
    ids=["nan", "overflow", "malformed", "not-utf8", "deep", "digits"],
)
def test_parsing_for_floats_keeps_the_standard_library_s_verdict(body: bytes) -> None:
    def verdict(**options: Any) -> Any:
        try:
            return ("parsed", json.dumps(parse_json(body, **options)))
        except BadRequest as error:
            return ("refused", error.detail)

    assert verdict(numbers_as_floats=True) == verdict()
