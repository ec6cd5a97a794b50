"""Model references: name@alias, name@N and name@latest under /v1; registered names under /v2."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy.orm import Session

from service.app import create_app
from service.registry.cache import POLL_SECONDS
from service.registry.service import register_model_version
from tests.service.inference.helpers import RECORDS, matrix_input
from tests.service.registry.conftest import BOTH_BACKENDS, Registry

pytestmark = pytest.mark.anyio

ROWS = {"records": RECORDS[:3]}


async def _predicted_by(registry: Registry, ref: str) -> str:
    response = await registry.client.post(f"/v1/models/{ref}/predict", json=ROWS)
    assert response.status_code == 200, response.text
    return str(response.json()["model_id"])


async def _inferred_by(registry: Registry, path: str) -> dict[str, Any]:
    body = {"inputs": [matrix_input(RECORDS[:3])]}
    response = await registry.client.post(f"/v2/models/{path}/infer", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_v1_routes_take_aliases_and_versions(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    await registry.move("churn", "production", 1)
    client = registry.client
    assert (await client.get("/v1/models/churn@production")).json()["id"] == registry.first
    assert (await client.get("/v1/models/churn@2")).json()["id"] == registry.second
    assert (await client.get("/v1/models/churn@latest")).json()["id"] == registry.second
    curves = (await client.get("/v1/models/churn@1/curves")).json()
    assert curves["model_id"] == registry.first
    importance = await client.get("/v1/models/churn@production/feature-importance")
    assert importance.status_code == 200 and importance.json()["model_id"] == registry.first
    assert await _predicted_by(registry, "churn@production") == registry.first
    assert await _predicted_by(registry, "churn@2") == registry.second


async def test_a_moved_alias_is_served_at_once_by_the_replica_that_moved_it(
    registry: Registry,
) -> None:
    await registry.register("churn", registry.first, registry.second)
    await registry.move("churn", "production", 1)
    assert await _predicted_by(registry, "churn@production") == registry.first  # now cached
    await registry.move("churn", "production", 2)
    assert await _predicted_by(registry, "churn@production") == registry.second
    await registry.client.delete("/v1/registered-models/churn/aliases/production")
    gone = await registry.client.post("/v1/models/churn@production/predict", json=ROWS)
    assert gone.status_code == 404


async def test_another_replica_on_sqlite_follows_a_move_by_polling(
    registry: Registry,
) -> None:
    """SQLite has no notices: a replica that did not make the move re-reads a reference once
    its entry is POLL_SECONDS old. (That answers sent past REGISTRY_BOUND_SECONDS are never
    stale is test_two_replicas.py's; how soon the new version comes is printed, not judged:
    a loaded machine stretches every request.)"""
    await registry.register("churn", registry.first, registry.second)
    await registry.move("churn", "production", 1)
    other = create_app(registry.svc.settings)
    async with (
        other.router.lifespan_context(other),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://o") as peer,
    ):

        async def served() -> str:
            response = await peer.post("/v1/models/churn@production/predict", json=ROWS)
            assert response.status_code == 200, response.text
            return str(response.json()["model_id"])

        assert await served() == registry.first  # now in the other replica's cache
        assert (await registry.move("churn", "production", 2)).status_code == 200
        moved = time.monotonic()
        answers = [await served()]
        while answers[-1] != registry.second and time.monotonic() - moved < 30 * POLL_SECONDS:
            await anyio.sleep(0.02)
            answers.append(await served())
        lag = time.monotonic() - moved

    print(f"the other replica served the move {lag:.2f} s after it (poll {POLL_SECONDS} s)")
    assert answers[-1] == registry.second
    assert set(answers[:-1]) <= {registry.first}  # before it: the old version, never an error


@pytest.mark.parametrize(
    ("ref", "detail"),
    [
        ("nope@production", "no registered model named 'nope'"),
        ("churn@staging", "'churn' has no alias 'staging'"),
        ("churn@9", "'churn' has no version 9"),
        ("churn@99999999999999999999", "has no version"),
    ],
)
async def test_an_unknown_reference_is_a_404_saying_what_is_missing(
    registry: Registry, ref: str, detail: str
) -> None:
    await registry.register("churn", registry.first)
    response = await registry.client.post(f"/v1/models/{ref}/predict", json=ROWS)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert detail in response.json()["detail"]


@BOTH_BACKENDS
async def test_v2_serves_production_else_the_latest_version(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    latest = await _inferred_by(registry, "churn")
    assert (latest["model_name"], latest["model_version"]) == ("churn", "2")
    assert latest["parameters"] == {"model_id": registry.second}
    await registry.move("churn", "production", 1)
    production = await _inferred_by(registry, "churn")
    assert (production["model_version"], production["parameters"]["model_id"]) == (
        "1",
        registry.first,
    )
    pinned = await _inferred_by(registry, "churn/versions/2")
    assert (pinned["model_version"], pinned["parameters"]["model_id"]) == ("2", registry.second)
    staged = await _inferred_by(registry, "churn@2")
    assert staged["parameters"]["model_id"] == registry.second
    # A model id is still served as itself, with its one version.
    plain = await _inferred_by(registry, registry.first)
    assert (plain["model_name"], plain["model_version"]) == (registry.first, "1")
    assert "parameters" not in plain


async def test_v2_metadata_and_readiness_of_a_registered_name(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    await registry.move("churn", "production", 1)
    client = registry.client
    metadata = (await client.get("/v2/models/churn")).json()
    assert (metadata["name"], metadata["versions"]) == ("churn", ["1", "2"])
    assert metadata["parameters"]["model_id"] == registry.first
    assert metadata["parameters"]["version"] == "1"
    second = (await client.get("/v2/models/churn/versions/2")).json()
    assert second["parameters"]["model_id"] == registry.second
    assert (await client.get("/v2/models/churn/versions/2/ready")).status_code == 200
    assert (await client.get("/v2/models/churn/ready")).json() == {"name": "churn", "ready": True}
    for path in ("churn/versions/7", "churn/versions/x", "churn@1/versions/1", "nope"):
        missing = await client.get(f"/v2/models/{path}")
        assert missing.status_code == 404, path
        assert set(missing.json()) == {"error"}


async def test_register_model_version_creates_the_name_and_sets_the_alias(
    registry: Registry,
) -> None:
    """The function other domains (a search's register_as) call, in their own transaction."""
    with Session(registry.svc.db_engine, expire_on_commit=False) as session, session.begin():
        first = register_model_version(session, "best", registry.first, alias="candidate")
        second = register_model_version(session, "best", registry.second, alias="candidate")
    assert (first.version, second.version) == (1, 2)
    body = (await registry.client.get("/v1/registered-models/best")).json()
    assert body["aliases"] == {"candidate": 2}
    history = (await registry.client.get("/v1/registered-models/best/history")).json()
    assert [(m["from_version"], m["to_version"]) for m in history["items"]] == [(1, 2), (None, 1)]
