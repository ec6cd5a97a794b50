"""A search across real processes on PostgreSQL: two ``coppice serve`` (no embedded worker)
and two ``coppice worker``, as a deployment runs them. The search is created through one API
and followed through the other; both workers train its candidates. The workers start first, so
their start-up (a fork server that loads the kernels) overlaps the APIs'."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.migrate import upgrade_to_head
from service.db.session import create_db_engine
from service.db.tables import JobRecord
from service.store import DataStore
from tests.e2e.processes import Processes, start_server
from tests.postgres import throwaway_database
from tests.service.searches.helpers import rows
from tests.service.stored_models import load_stored_model

pytestmark = pytest.mark.postgres

SETTINGS = {
    "worker_concurrency": "1",
    "poll_seconds": "0.2",
    "heartbeat_seconds": "0.5",
    "retry_backoff_seconds": "0",
    "shutdown_grace_seconds": "5",
    "log_format": "text",
}


@pytest.fixture
def database_url() -> Iterator[str]:
    with throwaway_database() as url:
        upgrade_to_head(url)
        yield url


def _wait(client: httpx.Client, search_id: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        search: dict[str, Any] = client.get(f"/v1/searches/{search_id}").json()
        if search["status"] in ("succeeded", "failed", "cancelled"):
            return search
        assert time.monotonic() < deadline, search
        time.sleep(0.2)


def test_two_apis_and_two_workers_share_a_search(database_url: str, tmp_path: Path) -> None:
    processes = Processes(
        tmp_path / "logs", database_url=database_url, data_dir=str(tmp_path), **SETTINGS
    )
    try:
        for name in ("worker-1", "worker-2"):
            processes.start(name, "worker")
        first, _ = start_server(processes, "api-1", embedded_worker="false")
        second, _ = start_server(processes, "api-2", embedded_worker="false")
        with (
            httpx.Client(base_url=first, timeout=30) as one,
            httpx.Client(base_url=second, timeout=30) as other,
        ):
            upload = one.post(
                "/v1/datasets",
                json={"columns": ["x1", "x2", "noise", "label"], "rows": rows()},
            )
            assert upload.status_code == 201, upload.text
            created = one.post(
                "/v1/searches",
                json={
                    "dataset_id": upload.json()["id"],
                    "target": "label",
                    "candidates": [
                        {"method": "logistic_regression", "params": {"C": [0.1, 1.0]}},
                        # Long enough that one worker cannot take all four alone.
                        {"method": "random_forest", "params": {"n_estimators": [150, 200]}},
                    ],
                    "strategy": "grid",
                    "validation": {"folds": 3},
                    "stack": True,
                    "register_as": "churn",
                },
            )
            assert created.status_code == 202, created.text
            search = _wait(other, created.json()["id"])
            assert search["status"] == "succeeded", (search, processes.logs())
            registration = search["registration"]
            candidate = other.get("/v1/registered-models/churn/aliases/candidate")
            assert candidate.status_code == 200, candidate.text
    finally:
        processes.stop_all()

    board = search["leaderboard"]
    assert [row["rank"] for row in board] == list(range(1, 6))  # four candidates, one ensemble
    scores = [row["metric"]["mean"] for row in board]
    assert scores == sorted(scores, reverse=True)  # roc_auc: higher first
    assert all(row["metric"]["std"] is not None and row["source"] == "cv" for row in board)
    assert search["best_model_id"] == board[0]["model_id"] and search["n_models"] == 5
    assert search["progress"] == 1.0 and search["jobs"]["succeeded"] == 5
    assert registration == {
        "status": "registered",
        "name": "churn",
        "version": 1,
        "model_id": board[0]["model_id"],
        "detail": "version 1 with alias 'candidate'",
    }
    assert candidate.json()["version"] == 1
    assert candidate.json()["model_id"] == board[0]["model_id"]

    db = create_db_engine(database_url)
    store = DataStore(str(tmp_path / "store"))  # the processes' shared data dir's
    try:
        with Session(db) as session:
            owners = session.scalars(
                select(JobRecord.lease_owner).where(
                    JobRecord.search_id == search["id"], JobRecord.method != "stacking"
                )
            ).all()
            assert len(set(owners)) == 2, owners  # both workers trained candidates
            stack = next(row for row in board if row["kind"] == "stack")
            members = stack["params"]["members"]
            assert {m["method"] for m in members} == {"logistic_regression", "random_forest"}
            # The ensemble's members are the candidates' own fitted models, never refitted.
            ensemble = _model(session, store, stack["model_id"])
            X = np.asarray([r[:3] for r in rows(20, seed=5)])
            for member, fitted in zip(members, ensemble.estimators_, strict=True):
                alone = _model(session, store, member["model_id"])
                assert np.array_equal(fitted.predict_proba(X), alone.predict_proba(X))
    finally:
        db.dispose()


def _model(session: Session, store: DataStore, model_id: str) -> Any:
    return load_stored_model(session, store, model_id)
