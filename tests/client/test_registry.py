"""Registered models through the client, against a real server: registering, aliases and their
history, references that resolve to a version, and the server's refusals as exceptions."""

from __future__ import annotations

import uuid

import pytest

from coppice import (
    Alias,
    Client,
    ConflictError,
    Model,
    ModelVersion,
    NotFoundError,
    RegisteredModel,
    ValidationError,
)


def fresh_name(prefix: str) -> str:
    """The shared server outlives a test: each test registers names of its own."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def second_model(server_url: str, churn_model: Model) -> Model:
    client = Client(server_url)
    job = client.train(
        churn_model.info["dataset_id"],
        target="churned",
        method="decision_tree",
        params={"max_depth": 2},
        seed=2,
    )
    return job.wait(timeout=120)


def test_register_creates_the_name_and_aliases_move_with_a_history(
    client: Client, churn_model: Model, second_model: Model
) -> None:
    name = fresh_name("churn")

    first = client.register(churn_model, name, alias="production", description="churn, v1")
    second = second_model.register(name, alias="staging")  # the name exists now

    assert isinstance(first, ModelVersion) and (first.name, first.version) == (name, 1)
    assert first.model_id == churn_model.id and first.aliases == ["production"]
    assert (second.version, second.model_id, second.ref) == (2, second_model.id, f"{name}@2")
    registered = client.registered_model(name)
    assert isinstance(registered, RegisteredModel)
    assert registered.description == "churn, v1"  # given when it was created, kept after
    assert registered.aliases == {"production": 1, "staging": 2}
    assert registered.latest_version == 2
    assert [(v.version, v.aliases) for v in registered.versions] == [
        (1, ["production"]),
        (2, ["staging"]),
    ]

    moved = client.set_alias(name, "production", 2)

    assert isinstance(moved, Alias)
    assert (moved.version, moved.model_id, moved.previous_version) == (2, second_model.id, 1)
    client.delete_alias(name, "staging")
    history = client.alias_history(name)
    assert history.total == 4
    assert [(m.alias, m.from_version, m.to_version) for m in history] == [
        ("staging", 2, None),  # removed; newest first
        ("production", 1, 2),
        ("staging", None, 2),  # set by register(alias=...)
        ("production", None, 1),
    ]
    assert history[1].from_model_id == churn_model.id and history[1].to_model_id == second_model.id
    assert [(m.alias, m.to_version) for m in registered.alias_history(limit=1)] == [
        ("staging", None)
    ]


def test_a_reference_resolves_to_a_version_and_stays_pinned_to_its_model(
    client: Client, churn_model: Model, second_model: Model
) -> None:
    name = fresh_name("pinned")
    client.register(churn_model.id, name, alias="production")
    client.register(f"{name}@production", name)  # a reference registers its model: version 2
    client.register(second_model, name)

    production = client.model(f"{name}@production")

    assert production.id == churn_model.id
    assert (production.registered_name, production.version) == (name, 1)
    assert production.ref == f"{name}@production"
    assert f"{name}@1 ({name}@production)" in repr(production)
    assert client.model(f"{name}@2").id == churn_model.id
    latest = client.model(f"{name}@latest")
    assert (latest.id, latest.version) == (second_model.id, 3)
    by_id = client.model(churn_model.id)
    assert by_id.registered_version is None  # an id names no version,
    assert (name, 1) in by_id.registered and (name, 2) in by_id.registered  # but the server
    assert (name, 3) not in by_id.registered  # says which versions the model is

    client.set_alias(name, "production", 3)

    # The object already fetched keeps answering from the model it resolved to ...
    assert production.id == churn_model.id
    assert list(production.predict({"age": 30.0, "plan": "pro", "monthly": 80.0})) in (
        ["yes"],
        ["no"],
    )
    # ... and the reference, asked again, follows the alias.
    assert client.model(f"{name}@production").version == 3
    assert client.model_version(name, "production").version == 3
    assert client.model_version(name, 2).model_id == churn_model.id
    assert client.model_version(name, "latest").model().id == second_model.id


def test_listing_gives_summaries_whose_versions_are_read_on_first_use(
    client: Client, churn_model: Model
) -> None:
    name = fresh_name("aaa-listed")  # sorts early: the listing is by name
    client.register(churn_model, name, alias="champion")

    page = client.registered_models(limit=500)

    listed = next(r for r in page if r.name == name)
    assert page.total >= 1 and "versions" not in listed.info
    assert listed.aliases == {"champion": 1} and listed.latest_version == 1
    assert [v.model_id for v in listed.versions] == [churn_model.id]
    assert listed.version("champion") is not None and listed.version("9") is None


def test_unknown_names_aliases_and_versions_are_not_found_errors_naming_them(
    client: Client, churn_model: Model
) -> None:
    missing = fresh_name("missing")
    for call in (
        lambda: client.registered_model(missing),
        lambda: client.model(f"{missing}@production"),
        lambda: client.alias_history(missing),
        lambda: client.set_alias(missing, "production", 1),
    ):
        with pytest.raises(NotFoundError, match=missing):
            call()
    name = fresh_name("known")
    client.register(churn_model, name)
    with pytest.raises(NotFoundError, match="no alias 'nope'"):
        client.model(f"{name}@nope")
    with pytest.raises(NotFoundError, match="no version 9"):
        client.model(f"{name}@9")
    with pytest.raises(NotFoundError, match="no alias 'nope'"):
        client.model_version(name, "nope")
    with pytest.raises(NotFoundError, match="no versions"):
        client.model_version(client.create_registered_model(fresh_name("empty")).name, "latest")


def test_conflicts_and_invalid_names_are_refused(client: Client, churn_model: Model) -> None:
    name = fresh_name("guarded")
    version = client.register(churn_model, name, alias="production")

    with pytest.raises(ConflictError, match="production"):
        version.delete()  # an alias names it
    with pytest.raises(ConflictError, match=f"{name}@1"):
        churn_model.delete()  # a registered version's model
    with pytest.raises(ConflictError):
        client.create_registered_model(name)
    with pytest.raises(ValidationError) as invalid:
        client.set_alias(name, "latest", 1)  # reserved: name@latest means the newest version
    assert invalid.value.errors[0]["loc"] == ["path", "alias"]
    with pytest.raises(ValidationError):
        client.register(churn_model, "not a name")

    client.delete_alias(name, "production")
    version.delete()
    client.registered_model(name).delete()
    with pytest.raises(NotFoundError):
        client.registered_model(name)
    assert client.model(churn_model.id).id == churn_model.id  # the model stays
