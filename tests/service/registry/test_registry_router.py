"""/v1/registered-models: names, versions never reused, audited alias moves, delete rules."""

from __future__ import annotations

import pytest

from tests.service.registry.conftest import BOTH_BACKENDS, Registry

pytestmark = pytest.mark.anyio


async def test_a_name_is_created_once_and_read_back(registry: Registry) -> None:
    client = registry.client
    created = await client.post(
        "/v1/registered-models", json={"name": "churn", "description": "who leaves"}
    )
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/registered-models/churn"
    assert created.json() | {"created_at": None} == {
        "name": "churn",
        "description": "who leaves",
        "versions": [],
        "aliases": {},
        "latest_version": None,
        "created_at": None,
    }
    again = await client.post("/v1/registered-models", json={"name": "churn"})
    assert again.status_code == 409
    assert again.headers["content-type"] == "application/problem+json"
    assert "'churn' exists already" in again.json()["detail"]


# A fixed model id (a name shaped like one is refused): parameters, and so test ids, must be
# the same in every pytest-xdist worker.
MODEL_ID = "0f8fad5b-d9cb-469f-a165-70867728950e"


@pytest.mark.parametrize("name", ["-lead", "has space", "a" * 129, "x@y", MODEL_ID, ""], ids=repr)
async def test_a_bad_name_is_a_422_naming_the_field(registry: Registry, name: str) -> None:
    response = await registry.client.post("/v1/registered-models", json={"name": name})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["body", "name"]


async def test_versions_count_up_and_are_never_reused(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    client = registry.client
    body = (await client.get("/v1/registered-models/churn")).json()
    assert [(v["version"], v["model_id"]) for v in body["versions"]] == [
        (1, registry.first),
        (2, registry.second),
    ]
    assert body["latest_version"] == 2
    assert (await client.delete("/v1/registered-models/churn/versions/2")).status_code == 204
    third = await client.post(
        "/v1/registered-models/churn/versions", json={"model_id": registry.second}
    )
    assert third.status_code == 201 and third.json()["version"] == 3
    assert third.headers["location"] == "/v1/registered-models/churn/versions/3"
    missing = await client.get("/v1/registered-models/churn/versions/2")
    assert missing.status_code == 404
    assert "its versions are 1, 3" in missing.json()["detail"]
    # One model may be a version of several names.
    await registry.register("fraud", registry.second)
    assert (await client.get("/v1/registered-models/fraud/versions/1")).json()[
        "model_id"
    ] == registry.second


async def test_registering_an_unknown_model_or_under_an_unknown_name_is_a_404(
    registry: Registry,
) -> None:
    client = registry.client
    absent = await client.post("/v1/registered-models/nope/versions", json={"model_id": "m"})
    assert absent.status_code == 404
    await registry.register("churn")
    unknown = await client.post("/v1/registered-models/churn/versions", json={"model_id": "m"})
    assert unknown.status_code == 404
    assert unknown.json()["errors"] == [{"loc": ["body", "model_id"], "msg": "unknown model"}]


@BOTH_BACKENDS
async def test_alias_moves_are_atomic_and_every_one_is_recorded(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    client = registry.client
    first = await registry.move("churn", "production", 1)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "name": "churn",
        "alias": "production",
        "version": 1,
        "model_id": registry.first,
        "previous_version": None,
    }
    moved = (await registry.move("churn", "production", 2)).json()
    assert (moved["version"], moved["previous_version"]) == (2, 1)
    assert (await registry.move("churn", "production", 2)).status_code == 200  # no change
    assert (
        await client.delete("/v1/registered-models/churn/aliases/production")
    ).status_code == 204
    history = (await client.get("/v1/registered-models/churn/history")).json()
    assert history["total"] == 3
    assert [
        (m["alias"], m["from_version"], m["to_version"], m["to_model_id"], m["actor"])
        for m in history["items"]
    ] == [
        ("production", 2, None, None, None),
        ("production", 1, 2, registry.second, None),
        ("production", None, 1, registry.first, None),
    ]
    assert history["items"][0]["from_model_id"] == registry.second
    times = [m["moved_at"] for m in history["items"]]
    assert times == sorted(times, reverse=True)
    page = (await client.get("/v1/registered-models/churn/history?limit=1&offset=1")).json()
    assert [m["to_version"] for m in page["items"]] == [2]


async def test_aliases_are_read_with_their_versions(registry: Registry) -> None:
    await registry.register("churn", registry.first, registry.second)
    client = registry.client
    await registry.move("churn", "production", 1)
    await registry.move("churn", "staging", 2)
    await registry.move("churn", "champion", 1)
    body = (await client.get("/v1/registered-models/churn")).json()
    assert body["aliases"] == {"champion": 1, "production": 1, "staging": 2}
    assert [v["aliases"] for v in body["versions"]] == [["champion", "production"], ["staging"]]
    alias = (await client.get("/v1/registered-models/churn/aliases/staging")).json()
    assert (alias["version"], alias["model_id"]) == (2, registry.second)
    listing = (await client.get("/v1/registered-models")).json()
    assert listing["total"] == 1
    item = listing["items"][0]
    assert (item["name"], item["n_versions"], item["latest_version"]) == ("churn", 2, 2)
    assert item["aliases"] == body["aliases"]


@pytest.mark.parametrize("alias", ["latest", "3", "v3", "V12", "-x", "a b"])
async def test_aliases_that_read_as_versions_are_refused(registry: Registry, alias: str) -> None:
    await registry.register("churn", registry.first)
    response = await registry.move("churn", alias, 1)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["loc"] == ["path", "alias"]


async def test_an_alias_to_a_missing_version_is_a_404_naming_the_field(registry: Registry) -> None:
    await registry.register("churn", registry.first)
    response = await registry.move("churn", "production", 7)
    assert response.status_code == 404
    assert response.json()["errors"] == [{"loc": ["body", "version"], "msg": "unknown version"}]
    assert (await registry.move("nope", "production", 1)).status_code == 404
    gone = await registry.client.delete("/v1/registered-models/churn/aliases/production")
    assert gone.status_code == 404


async def test_a_version_named_by_an_alias_cannot_be_deleted(registry: Registry) -> None:
    await registry.register("churn", registry.first)
    await registry.move("churn", "production", 1)
    response = await registry.client.delete("/v1/registered-models/churn/versions/1")
    assert response.status_code == 409
    assert "'production'" in response.json()["detail"]


@BOTH_BACKENDS
async def test_a_registered_model_cannot_be_deleted_until_its_versions_are(
    registry: Registry,
) -> None:
    await registry.register("churn", registry.first)
    await registry.register("fraud", registry.second, registry.first)
    client = registry.client
    refused = await client.delete(f"/v1/models/{registry.first}")
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    assert "'churn@1', 'fraud@2'" in refused.json()["detail"]
    assert (await client.delete("/v1/registered-models/churn")).status_code == 204
    assert (await client.get("/v1/registered-models/churn")).status_code == 404
    assert (await client.get("/v1/registered-models/churn/history")).status_code == 404
    assert (await client.delete("/v1/registered-models/fraud/versions/2")).status_code == 204
    assert (await client.delete(f"/v1/models/{registry.first}")).status_code == 204
    # The name can be created afresh; its versions start again at 1.
    await registry.register("churn", registry.second)
    assert (await client.get("/v1/registered-models/churn")).json()["latest_version"] == 1


async def test_a_description_that_cannot_be_stored_is_a_422(registry: Registry) -> None:
    response = await registry.client.post(
        "/v1/registered-models", json={"name": "churn", "description": "a\u0000b"}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["body", "description"]


@BOTH_BACKENDS
async def test_a_model_says_which_registered_versions_it_is(registry: Registry) -> None:
    client = registry.client
    assert (await client.get(f"/v1/models/{registry.first}")).json()["registered"] == []
    await registry.register("churn", registry.first, registry.second)
    await registry.register("fraud", registry.second)
    assert (await registry.move("churn", "production", 2)).status_code == 200

    # Fetched by reference: the model it resolved to, and every version it is.
    by_alias = (await client.get("/v1/models/churn@production")).json()
    assert by_alias["id"] == registry.second
    assert by_alias["registered"] == [
        {"name": "churn", "version": 2},
        {"name": "fraud", "version": 1},
    ]
    # The listing says it too, for every model on the page.
    listed = {m["id"]: m["registered"] for m in (await client.get("/v1/models")).json()["items"]}
    assert listed[registry.first] == [{"name": "churn", "version": 1}]
    assert listed[registry.second] == by_alias["registered"]
