"""``/v1/jobs`` through the real ASGI app: create (all checks), list, get, cancel."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest
from anyio import to_thread
from sqlalchemy import update
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.session import create_db_engine
from service.db.tables import JobRecord, JobStatus
from service.jobs import estimate
from service.methods.catalog import Task
from service.methods.params import resolve_params
from tests.service.jobs.conftest import app_client

pytestmark = pytest.mark.anyio

PROBLEM = "application/problem+json"
ROWS = [
    [1.0, "red", "yes", 10.0],
    [2.0, "blue", "no", 12.5],
    [3.0, None, "yes", 9.0],
    [4.0, "red", "no", 11.0],
    [5.0, "blue", "yes", 8.0],
    [6.0, "red", None, 7.5],
]


async def _dataset(client: httpx.AsyncClient, rows: list[list[Any]] = ROWS) -> str:
    response = await client.post(
        "/v1/datasets",
        json={"name": "toy", "columns": ["x", "color", "label", "amount"], "rows": rows},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _create(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/v1/jobs", json=body)


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    return body


def _set_status(client: httpx.AsyncClient, job_id: str, status: JobStatus) -> None:
    settings = client.app_settings  # type: ignore[attr-defined]
    engine = create_db_engine(settings.resolved_database_url)
    with Session(engine) as session, session.begin():
        session.execute(update(JobRecord).where(JobRecord.id == job_id).values(status=status))
    engine.dispose()


async def test_create_queues_a_job_with_location_and_defaults(
    any_client: httpx.AsyncClient,
) -> None:
    dataset_id = await _dataset(any_client)
    response = await _create(
        any_client,
        dataset_id=dataset_id,
        target="label",
        method="random_forest",
        params={"n_estimators": 20},
        name="first",
    )

    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] == "queued" and job["progress"] == 0.0
    assert job["task"] == "classification"  # categorical target
    assert job["features"] == ["x", "color", "amount"]
    assert job["validation"] == {"holdout": 0.2}
    assert isinstance(job["seed"], int)  # drawn and recorded
    assert job["error"] is None and job["model_id"] is None and job["attempts"] == 0
    fetched = await any_client.get(f"/v1/jobs/{job['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == job


async def test_task_is_inferred_from_the_target_and_can_be_asked_for(
    any_client: httpx.AsyncClient,
) -> None:
    dataset_id = await _dataset(any_client)
    numeric = await _create(any_client, dataset_id=dataset_id, target="amount", method="adaboost")
    assert numeric.json()["task"] == "regression"
    asked = await _create(
        any_client,
        dataset_id=dataset_id,
        target="x",
        method="decision_tree",
        task="classification",
        features=["amount"],
        validation={"folds": 3},
        seed=42,
    )
    assert asked.status_code == 202, asked.text
    assert asked.json()["task"] == "classification"
    assert asked.json()["seed"] == 42
    assert asked.json()["validation"] == {"folds": 3}
    refused = await _create(
        any_client, dataset_id=dataset_id, target="label", method="adaboost", task="regression"
    )
    assert "categorical" in _problem(refused, 422)["detail"]


async def test_unknown_dataset_is_404(any_client: httpx.AsyncClient) -> None:
    response = await _create(any_client, dataset_id="nope", target="label", method="bagging")
    assert "nope" in _problem(response, 404)["detail"]


async def test_unknown_target_and_features_are_named(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    target = await _create(any_client, dataset_id=dataset_id, target="lbl", method="bagging")
    assert "'lbl'" in _problem(target, 422)["detail"]
    features = await _create(
        any_client,
        dataset_id=dataset_id,
        target="label",
        method="bagging",
        features=["x", "colour", "label", "x", "sizes"],
    )
    body = _problem(features, 422)
    assert "'colour'" in body["detail"] and "'sizes'" in body["detail"]
    assert [e["loc"] for e in body["errors"]] == [
        ["body", "features", 1],
        ["body", "features", 2],
        ["body", "features", 3],
        ["body", "features", 4],
    ]


async def test_method_and_task_are_checked(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    unknown = await _create(any_client, dataset_id=dataset_id, target="label", method="svm")
    assert "'svm'" in _problem(unknown, 422)["detail"]
    unsupported = await _create(any_client, dataset_id=dataset_id, target="amount", method="arc_x4")
    assert "regression" in _problem(unsupported, 422)["detail"]


async def test_params_errors_name_the_parameters(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    base = {"dataset_id": dataset_id, "target": "label", "method": "bagging"}
    unknown = await _create(any_client, **base, params={"n_trees": 3})
    body = _problem(unknown, 422)
    assert "'params.n_trees'" in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "params", "n_trees"]

    nested = await _create(
        any_client,
        **base,
        params={"estimator": {"method": "decision_tree", "params": {"max_depth": 0}}},
    )
    body = _problem(nested, 422)
    assert "'params.estimator.params.max_depth'" in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "params", "estimator", "params", "max_depth"]

    capped = await _create(any_client, **base, params={"n_estimators": 501})
    assert "COPPICE_MAX_ESTIMATORS" in _problem(capped, 422)["detail"]
    seeded = await _create(any_client, **base, params={"random_state": 3})
    assert "seed" in _problem(seeded, 422)["detail"]


async def test_body_shape_errors_are_422(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    base = {"dataset_id": dataset_id, "target": "label", "method": "bagging"}
    for extra in (
        {"validation": {"holdout": 1.5}},
        {"validation": {"folds": 1}},
        {"validation": {"holdout": 0.2, "folds": 3}},
        {"seed": -1},
        {"task": "ranking"},
        {"colour": "red"},
    ):
        _problem(await _create(any_client, **base, **extra), 422)
    too_many_folds = await _create(any_client, **base, validation={"folds": 7})
    assert "7 folds" in _problem(too_many_folds, 422)["detail"]
    holdout_zero = await _create(any_client, **base, validation={"holdout": 0})
    assert holdout_zero.json()["validation"] == {"holdout": 0.0}


async def test_single_class_target_is_refused(any_client: httpx.AsyncClient) -> None:
    rows = [[1.0, "a", "yes", 1.0], [2.0, "b", "yes", 2.0]]
    dataset_id = await _dataset(any_client, rows)
    response = await _create(any_client, dataset_id=dataset_id, target="label", method="bagging")
    assert "at least two" in _problem(response, 422)["detail"]


async def test_list_filters_by_status_newest_first(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    ids = []
    for _ in range(3):
        created = await _create(any_client, dataset_id=dataset_id, target="label", method="bagging")
        ids.append(created.json()["id"])
    await any_client.post(f"/v1/jobs/{ids[0]}/cancel")

    everything = (await any_client.get("/v1/jobs")).json()
    assert everything["total"] == 3
    assert [item["id"] for item in everything["items"]] == ids[::-1]
    queued = (await any_client.get("/v1/jobs", params={"status": "queued"})).json()
    assert queued["total"] == 2 and {item["id"] for item in queued["items"]} == set(ids[1:])
    page = (await any_client.get("/v1/jobs", params={"limit": 1, "offset": 1})).json()
    assert [item["id"] for item in page["items"]] == [ids[1]] and page["total"] == 3
    _problem(await any_client.get("/v1/jobs", params={"status": "stuck"}), 422)


async def test_cancel_queued_running_and_ended(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    body = {"dataset_id": dataset_id, "target": "label", "method": "bagging"}
    queued = (await _create(any_client, **body)).json()
    response = await any_client.post(f"/v1/jobs/{queued['id']}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "cancelled"
    assert response.json()["finished_at"] is not None
    again = await any_client.post(f"/v1/jobs/{queued['id']}/cancel")
    assert "cancelled" in _problem(again, 409)["detail"]

    running = (await _create(any_client, **body)).json()
    _set_status(any_client, running["id"], JobStatus.RUNNING)
    response = await any_client.post(f"/v1/jobs/{running['id']}/cancel")
    assert response.status_code == 202
    assert response.json()["status"] == "running"
    assert response.json()["cancel_requested"] is True

    done = (await _create(any_client, **body)).json()
    _set_status(any_client, done["id"], JobStatus.SUCCEEDED)
    _problem(await any_client.post(f"/v1/jobs/{done['id']}/cancel"), 409)
    _problem(await any_client.post("/v1/jobs/nope/cancel"), 404)
    _problem(await any_client.get("/v1/jobs/nope"), 404)


async def test_failed_job_shows_its_error(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    job = (
        await _create(any_client, dataset_id=dataset_id, target="label", method="bagging")
    ).json()
    settings = any_client.app_settings  # type: ignore[attr-defined]
    engine = create_db_engine(settings.resolved_database_url)
    with Session(engine) as session, session.begin():
        session.execute(
            update(JobRecord)
            .where(JobRecord.id == job["id"])
            .values(status=JobStatus.FAILED, error_code="one_class", error_message="Only one.")
        )
    engine.dispose()
    fetched = (await any_client.get(f"/v1/jobs/{job['id']}")).json()
    assert fetched["error"] == {"code": "one_class", "message": "Only one."}


async def test_dataset_in_use_cannot_be_deleted(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    await _create(any_client, dataset_id=dataset_id, target="label", method="bagging")
    _problem(await any_client.delete(f"/v1/datasets/{dataset_id}"), 409)


async def test_feature_with_too_many_categories_is_refused(any_client: httpx.AsyncClient) -> None:
    rows = [[float(i), f"c{i}", "yes" if i % 2 else "no", 1.0] for i in range(300)]
    dataset_id = await _dataset(any_client, rows)
    response = await _create(any_client, dataset_id=dataset_id, target="label", method="bagging")
    assert "'color' has 300" in _problem(response, 422)["detail"]
    allowed = await _create(
        any_client, dataset_id=dataset_id, target="label", method="bagging", features=["x"]
    )
    assert allowed.status_code == 202


async def test_a_job_s_runtime_limit_is_stored_shown_and_capped(
    any_client: httpx.AsyncClient,
) -> None:
    dataset_id = await _dataset(any_client)
    base = {"dataset_id": dataset_id, "target": "label", "method": "decision_tree"}
    server_limit = any_client.app_settings.max_runtime_seconds  # type: ignore[attr-defined]

    limited = await _create(any_client, **base, max_runtime_seconds=90.5)
    unlimited = await _create(any_client, **base)

    assert limited.status_code == unlimited.status_code == 202, limited.text
    fetched = (await any_client.get(limited.headers["location"])).json()
    assert limited.json()["max_runtime_seconds"] == fetched["max_runtime_seconds"] == 90.5
    assert unlimited.json()["max_runtime_seconds"] is None
    at_the_limit = await _create(any_client, **base, max_runtime_seconds=server_limit)
    assert at_the_limit.status_code == 202, at_the_limit.text
    for bad in (server_limit + 1, 0, -5, "soon"):
        problem = _problem(await _create(any_client, **base, max_runtime_seconds=bad), 422)
        assert ["body", "max_runtime_seconds"] in [e["loc"] for e in problem["errors"]], bad
    above = await _create(any_client, **base, max_runtime_seconds=server_limit * 2)
    assert "COPPICE_MAX_RUNTIME_SECONDS" in _problem(above, 422)["detail"]


async def test_a_job_estimated_past_the_memory_budget_is_refused(
    backend_settings: Settings,
) -> None:
    # The budget admits the smallest fit and not a 500-tree forest on the same rows.
    budget = estimate.BASE + 1024 * 1024
    settings = backend_settings.model_copy(update={"max_job_memory_bytes": budget})
    async with app_client(settings) as client:
        dataset_id = await _dataset(client)
        base = {"dataset_id": dataset_id, "target": "label"}
        small = await _create(client, **base, method="decision_tree")
        big = await _create(client, **base, method="random_forest", params={"n_estimators": 500})

    assert small.status_code == 202, small.text
    problem = _problem(big, 422)
    assert "COPPICE_MAX_JOB_MEMORY_BYTES" in problem["detail"]
    assert problem["errors"] == [
        {"loc": ["body", "params"], "msg": "estimated memory above the server's limit"}
    ]


async def test_only_methods_with_n_jobs_are_charged_for_several_processes(
    backend_settings: Settings,
) -> None:
    # Four processes per job: a forest's estimate pays three more PROCESS charges, gradient
    # boosting (whose n_jobs are threads of its one fit process) pays none.
    budget = estimate.BASE + 2 * estimate.PROCESS
    settings = backend_settings.model_copy(
        update={"max_job_memory_bytes": budget, "processes_per_job": 4}
    )
    async with app_client(settings) as client:
        dataset_id = await _dataset(client)
        base = {"dataset_id": dataset_id, "target": "label", "params": {"n_estimators": 5}}
        boosted = await _create(client, **base, method="gradient_boosting")
        forest = await _create(client, **base, method="random_forest")

    assert boosted.status_code == 202, boosted.text
    assert "COPPICE_MAX_JOB_MEMORY_BYTES" in _problem(forest, 422)["detail"]


async def test_an_out_of_core_job_is_charged_for_its_rows_state_not_the_table(
    backend_settings: Settings,
) -> None:
    # XGBoost-style boosting with a Dask scheduler set fits out of core: the workers hold the
    # parts and the fit process only per-row state, so a budget below the in-process fit's
    # estimate still admits it; without the scheduler the same job is refused. With a holdout
    # the target and split stay on the workers too: a budget below the folds' estimate (their
    # target and split here) admits the holdout job and refuses the folds one.
    rows = [
        [float(i), ("red", "blue")[i % 2], ("yes", "no")[i % 3 == 0], i / 7] for i in range(3000)
    ]
    resolved = resolve_params("xgboost", Task.CLASSIFICATION, {})
    shape = {"n_rows": 3000, "n_features": 3, "n_classes": 2, "n_jobs": 1}
    on_workers, out_of_core, in_process = (
        estimate.estimate_job_bytes("xgboost", resolved, **shape, holding=holding)
        for holding in (
            estimate.TableHolding.WORKERS,
            estimate.TableHolding.CLUSTER,
            estimate.TableHolding.CODES,
        )
    )
    assert on_workers < out_of_core < in_process
    verdicts = []
    for budget, scheduler, validation in [
        ((out_of_core + in_process) // 2, "tcp://127.0.0.1:8786", {"folds": 3}),
        ((out_of_core + in_process) // 2, None, {"folds": 3}),
        ((on_workers + out_of_core) // 2, "tcp://127.0.0.1:8786", {"holdout": 0.2}),
        ((on_workers + out_of_core) // 2, "tcp://127.0.0.1:8786", {"holdout": 0}),
        ((on_workers + out_of_core) // 2, "tcp://127.0.0.1:8786", {"folds": 3}),
    ]:
        settings = backend_settings.model_copy(
            update={"max_job_memory_bytes": budget, "dask_scheduler": scheduler}
        )
        async with app_client(settings) as client:
            body = {"dataset_id": await _dataset(client, rows), "target": "label"}
            created = await _create(client, **body, method="xgboost", validation=validation)
            verdicts.append(created.status_code)

    assert verdicts == [202, 422, 202, 202, 422]


async def test_get_waits_for_the_job_to_end(any_client: httpx.AsyncClient) -> None:
    dataset_id = await _dataset(any_client)
    body = {"dataset_id": dataset_id, "target": "label", "method": "bagging"}
    job_id = (await _create(any_client, **body)).json()["id"]

    async def finish_soon() -> None:
        await anyio.sleep(0.4)
        await to_thread.run_sync(_set_status, any_client, job_id, JobStatus.SUCCEEDED)

    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(finish_soon)
        response = await any_client.get(f"/v1/jobs/{job_id}", params={"wait": 10})
    waited = time.monotonic() - started

    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded"
    # Answered when the job ended (looked at every 0.1 s), not when the 10 s ran out; the
    # margin is for a loaded machine, not the server.
    assert 0.4 <= waited < 8.0, waited


async def test_get_answers_with_the_state_when_the_wait_runs_out(
    any_client: httpx.AsyncClient,
) -> None:
    dataset_id = await _dataset(any_client)
    body = {"dataset_id": dataset_id, "target": "label", "method": "bagging"}
    job_id = (await _create(any_client, **body)).json()["id"]

    started = time.monotonic()
    queued = await any_client.get(f"/v1/jobs/{job_id}", params={"wait": 0.5})
    waited = time.monotonic() - started
    assert queued.status_code == 200 and queued.json()["status"] == "queued"
    assert waited >= 0.5

    _set_status(any_client, job_id, JobStatus.FAILED)
    started = time.monotonic()
    ended = await any_client.get(f"/v1/jobs/{job_id}", params={"wait": 30})
    # An ended job is answered at once, not after the 30 s asked for.
    assert ended.json()["status"] == "failed" and time.monotonic() - started < 15.0

    for bad in ("31", "-1", "soon"):
        problem = _problem(await any_client.get(f"/v1/jobs/{job_id}", params={"wait": bad}), 422)
        assert problem["errors"][0]["loc"] == ["query", "wait"], problem
    _problem(await any_client.get("/v1/jobs/nope", params={"wait": 5}), 404)
