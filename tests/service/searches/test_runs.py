"""Searches run by real workers on SQLite: halving promotes the best, regression ranks by RMSE,
cancel and the deadline keep what finished, and a worker killed mid-search costs no candidate.
Two API and two worker processes on PostgreSQL, and the ensemble's members: test_processes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.config import Settings
from service.db.session import create_db_engine
from service.db.tables import JobRecord, OutOfFoldRecord
from service.searches import predictions, stacking
from service.store import store_from_settings
from tests.service.jobs.conftest import app_client
from tests.service.searches.helpers import (
    add_dataset,
    running_worker,
    wait_for_search,
)
from tests.service.stored_models import load_stored_model

pytestmark = pytest.mark.anyio


def _artifact(settings: Settings, model_id: str) -> Any:
    db = create_db_engine(settings.resolved_database_url)
    try:
        with Session(db) as session:
            return load_stored_model(session, store_from_settings(settings), model_id)
    finally:
        db.dispose()


def _jobs(settings: Settings, search_id: str) -> list[JobRecord]:
    db = create_db_engine(settings.resolved_database_url)
    try:
        with Session(db) as session:
            return list(session.scalars(select(JobRecord).where(JobRecord.search_id == search_id)))
    finally:
        db.dispose()


async def test_halving_trains_the_best_third_on_every_row(settings: Settings) -> None:
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client, n=240)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "candidates": [
                    {"method": "decision_tree", "params": {"min_samples_leaf": {"int": [1, 40]}}}
                ],
                "strategy": "halving",
                "budget": {"max_models": 6},
                "validation": {"folds": 2},
                "stack": True,
                "seed": 1,
            },
        )
        assert created.status_code == 202, created.text
        with running_worker(settings):
            search = await wait_for_search(client, created.json()["id"])

    board = search["leaderboard"]
    assert [(row["iter"], row["n_resources"]) for row in board] == [(1, None)] * 2 + [(0, 80)] * 6
    assert board[0]["model_id"] == search["best_model_id"]  # the winner is from the last rung
    last_rung = {str(row["params"]) for row in board[:2]}
    first_rung = [row for row in board if row["iter"] == 0]
    assert last_rung == {str(row["params"]) for row in first_rung[:2]}  # the best third went on
    assert any("at least two methods" in note for note in search["notes"])  # one family only


async def test_cancel_keeps_what_finished(settings: Settings) -> None:
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "candidates": [{"method": "logistic_regression", "params": {"C": [0.1, 1, 10]}}],
                "strategy": "grid",
                "validation": {"folds": 2},
                "stack": True,
            },
        )
        search_id = created.json()["id"]
        with running_worker(settings, concurrency=1):
            deadline = time.monotonic() + 30
            while (await client.get(f"/v1/searches/{search_id}")).json()["n_models"] < 1:
                assert time.monotonic() < deadline, "no candidate finished"
                await anyio.sleep(0.05)
            cancelled = await client.post(f"/v1/searches/{search_id}/cancel")
            assert cancelled.status_code == 202
            # A running candidate stops within seconds (the worker polls its cancel flag).
            while True:
                search = (await client.get(f"/v1/searches/{search_id}")).json()
                if search["jobs"]["queued"] == search["jobs"]["running"] == 0:
                    break
                assert time.monotonic() < deadline + 30, search["jobs"]
                await anyio.sleep(0.05)

    assert search["status"] == "cancelled" and search["n_models"] >= 1
    assert len(search["leaderboard"]) == search["n_models"] == search["jobs"]["succeeded"]
    assert search["stack_model_id"] is None  # a cancelled search builds no ensemble


def _start_worker(database_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPPICE_")} | {
        "COPPICE_DATABASE_URL": database_url,
        "COPPICE_WORKER_CONCURRENCY": "2",
        "COPPICE_JOB_LEASE_SECONDS": "2",
        "COPPICE_HEARTBEAT_SECONDS": "0.5",
        "COPPICE_POLL_SECONDS": "0.1",
        "COPPICE_RETRY_BACKOFF_SECONDS": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "service", "worker"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: the kill takes its fit processes too
    )


async def test_a_worker_killed_mid_search_loses_no_candidate(
    settings: Settings, tmp_path: Path
) -> None:
    url = settings.resolved_database_url
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "candidates": [
                    # Long enough to be seen running and killed: 200 trees on 90 rows now fit
                    # in under a second, and the search could end between two polls.
                    {"method": "random_forest", "params": {"n_estimators": 3000}},
                    {"method": "logistic_regression", "params": {"C": [0.1, 1.0]}},
                ],
                "strategy": "grid",
                "validation": {"folds": 2},
                "stack": True,
            },
        )
        search_id = created.json()["id"]
        doomed = _start_worker(url, tmp_path / "killed.log")
        try:
            deadline = time.monotonic() + 60
            while not any(job.status == "running" for job in _jobs(settings, search_id)):
                assert time.monotonic() < deadline and doomed.poll() is None, "nothing ran"
                await anyio.sleep(0.05)
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait()
            # The survivor takes the dead worker's job back once its lease (2 s) has lapsed.
            with running_worker(settings):
                search = await wait_for_search(client, search_id, timeout=90)
        finally:
            if doomed.poll() is None:
                os.killpg(doomed.pid, signal.SIGKILL)
                doomed.wait()

    assert search["status"] == "succeeded", search
    assert search["jobs"]["succeeded"] == 4 and search["jobs"]["failed"] == 0
    assert len(search["leaderboard"]) == 4  # three candidates and the ensemble
    assert any(job.attempts == 2 for job in _jobs(settings, search_id))  # retried, not lost
    db = create_db_engine(url)
    try:
        with Session(db) as session:
            kept = session.scalars(select(OutOfFoldRecord.model_id)).all()
            assert len(predictions.load(session, store_from_settings(settings), kept)) == 3
            # In the data store, beside each model; nothing left in SQL.
            named = session.execute(select(OutOfFoldRecord.path, OutOfFoldRecord.data)).all()
            assert all(path.endswith("/out_of_fold.f8") and not data for path, data in named)
    finally:
        db.dispose()


async def test_a_regression_search_ranks_by_rmse_ascending_and_stacks_with_ridge(
    settings: Settings,
) -> None:
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "x1",
                "features": ["x2", "noise", "label"],
                "candidates": [
                    {"method": "ridge", "params": {"alpha": [0.1, 100.0]}},
                    {"method": "decision_tree", "params": {"max_depth": 2}},
                ],
                "strategy": "grid",
                "validation": {"folds": 2},
                "stack": True,
            },
        )
        assert created.status_code == 202, created.text
        with running_worker(settings):
            search = await wait_for_search(client, created.json()["id"])

    assert search["metric"] == "rmse" and search["direction"] == "minimize"
    scores = [row["metric"]["mean"] for row in search["leaderboard"]]
    assert len(scores) == 4 and scores == sorted(scores)
    stack = next(row for row in search["leaderboard"] if row["kind"] == "stack")
    assert stack["params"]["final_estimator"] == "ridge"


async def test_the_deadline_stops_the_rest_and_keeps_what_finished(settings: Settings) -> None:
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                # A quick candidate that may finish in time, then two that cannot: 2,500
                # trees per fold (with compiled kernels, 100-tree forests all ended within
                # 1.5 s on a quiet machine, leaving nothing for the deadline to stop).
                "candidates": [
                    {"method": "logistic_regression", "params": {}},
                    {"method": "random_forest", "params": {"n_estimators": [2500, 2501]}},
                ],
                "strategy": "grid",
                "validation": {"folds": 5},
                "budget": {"max_seconds": 3},
            },
        )
        assert created.status_code == 202, created.text
        with running_worker(settings, concurrency=1):
            search = await wait_for_search(client, created.json()["id"])

    jobs = search["jobs"]
    assert jobs["cancelled"] >= 1 and jobs["queued"] == jobs["running"] == 0
    assert len(search["leaderboard"]) == jobs["succeeded"]
    assert search["status"] == ("succeeded" if jobs["succeeded"] else "failed")


async def test_the_worker_claims_jobs_while_a_search_is_being_stacked(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real stacking step, held at its start until the test lets it go: while it is held,
    # the same worker must still claim and train an ordinary job (the step used to run on the
    # claim loop's own thread, which then claimed nothing until it was done).
    held, release = threading.Event(), threading.Event()
    build = stacking.build

    def held_build(*args: Any, **kwargs: Any) -> Any:
        held.set()
        assert release.wait(60), "the test never released the stacking step"
        return build(*args, **kwargs)

    monkeypatch.setattr(stacking, "build", held_build)
    async with app_client(settings) as client:
        dataset_id = await add_dataset(client)
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset_id,
                "target": "label",
                "candidates": [
                    {"method": "logistic_regression", "params": {"C": [1.0]}},
                    {"method": "decision_tree", "params": {"max_depth": [2]}},
                ],
                "strategy": "grid",
                "validation": {"folds": 2},
                "stack": True,
            },
        )
        assert created.status_code == 202, created.text
        with running_worker(settings, concurrency=1):
            try:
                assert await anyio.to_thread.run_sync(held.wait, 60), "stacking never began"
                job = await client.post(
                    "/v1/jobs",
                    json={"dataset_id": dataset_id, "target": "label", "method": "gaussian_nb"},
                )
                assert job.status_code == 202, job.text
                ended = await client.get(f"/v1/jobs/{job.json()['id']}", params={"wait": 30})
                assert ended.json()["status"] == "succeeded", ended.json()
                running = (await client.get(f"/v1/searches/{created.json()['id']}")).json()
                assert running["status"] == "stacking"
            finally:
                release.set()
            search = await wait_for_search(client, created.json()["id"])

    assert search["status"] == "succeeded", search
    assert search["stack_model_id"] is not None, search["notes"]


async def test_a_search_whose_candidates_all_fail_says_why(settings: Settings) -> None:
    async with app_client(settings) as client:
        # One row of class "a": the fold without it trains on one class only, and fails.
        dataset = await client.post(
            "/v1/datasets",
            json={
                "columns": ["x", "y"],
                "rows": [[float(i), "a" if i == 0 else "b"] for i in range(10)],
            },
        )
        created = await client.post(
            "/v1/searches",
            json={
                "dataset_id": dataset.json()["id"],
                "target": "y",
                "candidates": [{"method": "decision_tree", "params": {"max_depth": [1, 2]}}],
                "strategy": "grid",
                "validation": {"folds": 2},
            },
        )
        assert created.status_code == 202, created.text
        with running_worker(settings):
            search = await wait_for_search(client, created.json()["id"])

    assert search["status"] == "failed" and search["best_model_id"] is None
    [note] = search["notes"]
    assert note.startswith("no candidate succeeded (2 failed); the first failure, job "), note
    assert "one_class" in note
