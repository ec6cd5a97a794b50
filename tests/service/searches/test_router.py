"""``/v1/searches`` through the real ASGI app: every check before anything is queued, the
search's jobs on the queue, listing, reading and cancelling (no worker runs here)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest

from tests.service.searches.helpers import PROBLEM, add_dataset

pytestmark = pytest.mark.anyio

FOREST = {"method": "random_forest", "params": {"n_estimators": 5, "min_samples_leaf": [1, 5]}}


def _problem(response: httpx.Response, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    return body


async def _search(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/v1/searches", json={"target": "label", **body})


async def test_a_search_queues_its_candidates_as_jobs(any_client: httpx.AsyncClient) -> None:
    dataset_id = await add_dataset(any_client)
    response = await _search(
        any_client,
        dataset_id=dataset_id,
        candidates=[FOREST, {"method": "logistic_regression", "params": {"C": [0.1, 1.0]}}],
        strategy="grid",
        validation={"folds": 3},
        seed=7,
    )
    assert response.status_code == 202, response.text
    search = response.json()
    assert response.headers["location"] == f"/v1/searches/{search['id']}"
    assert search["status"] == "running" and search["metric"] == "roc_auc"
    assert search["direction"] == "maximize" and search["jobs"]["queued"] == 4
    assert search["leaderboard"] == [] and search["n_models"] == 0

    jobs = (await any_client.get("/v1/jobs", params={"search_id": search["id"]})).json()
    assert jobs["total"] == 4
    assert {job["search_id"] for job in jobs["items"]} == {search["id"]}
    # One seed, so one fold assignment for every candidate; out-of-fold predictions kept.
    assert {job["seed"] for job in jobs["items"]} == {7}
    assert all(job["validation"]["keep_predictions"] for job in jobs["items"])
    assert sorted(str(job["params"]) for job in jobs["items"]) == sorted(
        str(p)
        for p in (
            {"n_estimators": 5, "min_samples_leaf": 1},
            {"n_estimators": 5, "min_samples_leaf": 5},
            {"C": 0.1},
            {"C": 1.0},
        )
    )
    # Other jobs stay out of the filter.
    assert (await any_client.get("/v1/jobs", params={"search_id": "other"})).json()["total"] == 0

    listed = (await any_client.get("/v1/searches")).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == search["id"]
    assert (await any_client.get("/v1/searches", params={"status": "succeeded"})).json()[
        "total"
    ] == 0


async def test_cancel_stops_what_is_left_then_409(any_client: httpx.AsyncClient) -> None:
    dataset_id = await add_dataset(any_client)
    created = await _search(any_client, dataset_id=dataset_id, candidates=[FOREST])
    search_id = created.json()["id"]

    cancelled = await any_client.post(f"/v1/searches/{search_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["jobs"]["cancelled"] == 2
    _problem(await any_client.post(f"/v1/searches/{search_id}/cancel"), 409)


async def test_unknown_ids_are_404(any_client: httpx.AsyncClient) -> None:
    _problem(await any_client.get("/v1/searches/nope"), 404)
    _problem(await any_client.post("/v1/searches/nope/cancel"), 404)
    _problem(await _search(any_client, dataset_id="nope", candidates=[FOREST]), 404)


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        (
            {"candidates": [FOREST, {"method": "nope", "params": {}}]},
            ["body", "candidates", 1, "method"],
            "There is no method 'nope'",
        ),
        (
            {"candidates": [{"method": "random_forest", "params": {"max_depth": [3, -1]}}]},
            ["body", "candidates", 0, "params", "max_depth"],
            "Method 'random_forest', parameter 'max_depth'",
        ),
        (
            {
                "candidates": [
                    {"method": "xgboost", "params": {"learning_rate": {"uniform": [0, 2]}}}
                ]
            },
            ["body", "candidates", 0, "params", "learning_rate"],
            "Method 'xgboost', parameter 'learning_rate'",
        ),
        (
            {"candidates": [{"method": "random_forest", "params": {"bogus": [1, 2]}}]},
            ["body", "candidates", 0, "params", "bogus"],
            "'bogus'",
        ),
        (
            {"candidates": [{"method": "xgboost", "params": {"max_depth": {"int": [9, 3]}}}]},
            ["body", "candidates", 0, "params", "max_depth"],
            "above its high end",
        ),
        (
            {
                "strategy": "grid",
                "candidates": [{"method": "xgboost", "params": {"max_depth": {"int": [3, 9]}}}],
            },
            ["body", "candidates", 0, "params", "max_depth"],
            "a grid needs lists",
        ),
        (
            {"candidates": [{"method": "ridge", "params": {}}]},
            ["body", "candidates", 0, "method"],
            "does not do classification",
        ),
        ({"candidates": [FOREST], "auto": True}, ["body", "candidates"], "not both"),
        ({}, ["body", "candidates"], "not neither"),
        ({"candidates": [FOREST], "metric": "rmse"}, ["body", "metric"], "not a classification"),
        ({"candidates": [FOREST], "register_as": "no spaces"}, ["body", "register_as"], ""),
        ({"candidates": [FOREST], "target": "nope"}, ["body", "target"], "no column"),
        ({"candidates": [FOREST], "validation": {"folds": 500}}, None, ""),
        (
            {
                "strategy": "grid",
                "candidates": [
                    {"method": "decision_tree", "params": {"max_depth": list(range(1, 21))}},
                    {
                        "method": "random_forest",
                        "params": {
                            "min_samples_leaf": list(range(1, 30)),
                            "n_estimators": list(range(1, 20)),
                        },
                    },
                ],
            },
            ["body", "budget", "max_models"],
            "at most 500",
        ),
    ],
)
async def test_every_problem_is_a_422_naming_its_field_and_nothing_is_queued(
    client: httpx.AsyncClient, body: dict[str, Any], loc: list[Any] | None, words: str
) -> None:
    # SQLite only: the checks are the service's, the same whatever the database.
    dataset_id = await add_dataset(client)
    problem = _problem(await _search(client, dataset_id=dataset_id, **body))
    assert words in problem["detail"]
    if loc is not None:
        assert loc in [error["loc"] for error in problem["errors"]], problem
    assert (await client.get("/v1/jobs")).json()["total"] == 0
    assert (await client.get("/v1/searches")).json()["total"] == 0


HUGE_GRID = {
    "method": "random_forest",
    "params": {
        "n_estimators": list(range(1, 31)),
        "min_samples_leaf": list(range(1, 21)),
        "max_depth": list(range(1, 21)),
    },
}  # 12,000 points


async def test_max_models_cuts_a_grid_of_any_size_and_without_it_a_huge_one_is_422(
    client: httpx.AsyncClient,
) -> None:
    dataset_id = await add_dataset(client)
    grid = {"dataset_id": dataset_id, "candidates": [HUGE_GRID], "strategy": "grid"}

    unbounded = _problem(await _search(client, **grid))
    bounded = await _search(client, **grid, budget={"max_models": 3})

    assert "12000 points" in unbounded["detail"]
    assert ["body", "candidates", 0, "params"] in [e["loc"] for e in unbounded["errors"]]
    assert bounded.status_code == 202, bounded.text
    jobs = (await client.get("/v1/jobs", params={"search_id": bounded.json()["id"]})).json()
    # The first three points in the order written (the last parameter changes fastest).
    assert sorted(job["params"]["max_depth"] for job in jobs["items"]) == [1, 2, 3]
    assert {job["params"]["n_estimators"] for job in jobs["items"]} == {1}


async def test_auto_plans_every_family_sized_to_the_data(client: httpx.AsyncClient) -> None:
    dataset_id = await add_dataset(client)
    response = await _search(
        client, dataset_id=dataset_id, auto=True, budget={"max_models": 7}, seed=1
    )
    assert response.status_code == 202, response.text
    search = response.json()
    families = {"xgboost", "gradient_boosting", "random_forest", "extra_trees"}
    assert {c["method"] for c in search["candidates"]} == families | {"logistic_regression"}
    assert search["plan"]["auto"]["random_forest_trees"] == 300  # a tiny table: many trees
    jobs = (await client.get("/v1/jobs", params={"search_id": search["id"]})).json()
    methods = [job["method"] for job in sorted(jobs["items"], key=lambda j: j["name"])]
    assert len(methods) == 7 and set(methods) >= families  # defaults of every family first


async def test_halving_starts_on_a_share_of_the_rows(client: httpx.AsyncClient) -> None:
    dataset_id = await add_dataset(client, n=300)
    response = await _search(
        client,
        dataset_id=dataset_id,
        candidates=[{"method": "decision_tree", "params": {"min_samples_leaf": {"int": [1, 30]}}}],
        strategy="halving",
        budget={"max_models": 9},
        validation={"folds": 2},
    )
    assert response.status_code == 202, response.text
    rungs = response.json()["plan"]["rungs"]
    assert rungs == [{"candidates": 9, "rows": 100}, {"candidates": 3, "rows": 300}]
    jobs = (await client.get("/v1/jobs", params={"search_id": response.json()["id"]})).json()
    assert {job["validation"]["rows"] for job in jobs["items"]} == {100}


async def test_get_waits_for_the_search_to_end(any_client: httpx.AsyncClient) -> None:
    dataset_id = await add_dataset(any_client)
    created = await _search(any_client, dataset_id=dataset_id, candidates=[FOREST], strategy="grid")
    search_id = created.json()["id"]

    async def cancel_soon() -> None:
        await anyio.sleep(0.4)
        assert (await any_client.post(f"/v1/searches/{search_id}/cancel")).status_code == 202

    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(cancel_soon)
        response = await any_client.get(f"/v1/searches/{search_id}", params={"wait": 10})
    waited = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    # Answered once the search ended (looked at every 0.1 s), not when the 10 s ran out; the
    # margin is for a loaded machine, not the server.
    assert 0.4 <= waited < 8.0, waited

    started = time.monotonic()
    ended = await any_client.get(f"/v1/searches/{search_id}", params={"wait": 30})
    # An ended search is answered at once, not after the 30 s asked for.
    assert ended.json()["status"] == "cancelled" and time.monotonic() - started < 15.0
    for bad in ("31", "-1", "soon"):
        problem = _problem(await any_client.get(f"/v1/searches/{search_id}", params={"wait": bad}))
        assert problem["errors"][0]["loc"] == ["query", "wait"], problem
    _problem(await any_client.get("/v1/searches/nope", params={"wait": 5}), 404)


async def test_get_answers_with_the_state_when_the_wait_runs_out(
    any_client: httpx.AsyncClient,
) -> None:
    dataset_id = await add_dataset(any_client)
    created = await _search(any_client, dataset_id=dataset_id, candidates=[FOREST], strategy="grid")
    started = time.monotonic()
    running = await any_client.get(f"/v1/searches/{created.json()['id']}", params={"wait": 0.5})
    assert running.status_code == 200 and running.json()["status"] == "running"
    assert time.monotonic() - started >= 0.5
