"""SQLite under concurrency: one ``coppice serve`` and its database file, hammered at once.

Twelve clients, each on its own connection, upload datasets, submit and poll jobs, predict and
list for several seconds while the embedded worker trains those jobs (two at a time) and
writes their models. SQLite allows one writer at a time; WAL mode and the busy timeout
(service/db/session.py) must absorb that, so no client ever sees a 5xx or a "database is
locked", and every job submitted ends succeeded.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.e2e.processes import serving, wait_for_jobs
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = pytest.mark.slow

CLIENTS = 12
SECONDS = 8.0
# Each client submits a few jobs, enough to keep both fit slots writing models during the run;
# unbounded, the clients queue hundreds and the test waits on the queue, not on SQLite.
JOBS_PER_CLIENT = 3
RECORDS = [{"x": 0.3, "z": -1.0, "colour": "red"}, {"x": None, "z": 0.5, "colour": None}]


@dataclass
class Tally:
    """What the clients saw, shared between their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)

    def record(self, action: str, response: httpx.Response, expected: int) -> None:
        with self.lock:
            self.statuses[f"{action} {response.status_code}"] += 1
            if response.status_code != expected or "locked" in response.text:
                self.failures.append(f"{action}: {response.status_code} {response.text[:300]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("sqlite-concurrency")) as (base_url, _):
        yield base_url


def _client_loop(base_url: str, model_id: str, index: int, stop: float, tally: Tally) -> None:
    rows = dataset_rows(40, seed=index)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        step = jobs = 0
        while time.monotonic() < stop:
            action = ("upload", "job", "predict", "list")[(index + step) % 4]
            step += 1
            if action == "job" and jobs == JOBS_PER_CLIENT:
                action = "upload"
            if action == "upload":
                body = {"name": f"client-{index}", "columns": COLUMNS, "rows": rows}
                tally.record(action, client.post("/v1/datasets", json=body), 201)
            elif action == "job":
                uploaded = client.post("/v1/datasets", json={"columns": COLUMNS, "rows": rows})
                tally.record("upload", uploaded, 201)
                if uploaded.status_code != 201:
                    continue
                job = {
                    "dataset_id": uploaded.json()["id"],
                    "target": "label",
                    "method": "decision_tree",
                    "features": ["x", "z", "colour"],
                    "params": {"max_depth": 3},
                    "validation": {"holdout": 0},
                }
                response = client.post("/v1/jobs", json=job)
                tally.record(action, response, 202)
                jobs += 1
                if response.status_code == 202:
                    with tally.lock:
                        tally.job_ids.append(response.json()["id"])
            elif action == "predict":
                response = client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})
                tally.record(action, response, 200)
            else:
                tally.record(action, client.get("/v1/jobs", params={"limit": 20}), 200)
                tally.record(action, client.get("/v1/datasets", params={"limit": 20}), 200)


def test_parallel_uploads_jobs_and_predictions_never_see_a_locked_database(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        dataset = client.post("/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows()})
        first = client.post(
            "/v1/jobs",
            json={"dataset_id": dataset.json()["id"], "target": "label", "method": "decision_tree"},
        )
        model_id: Any = wait_for_jobs(client, [first.json()["id"]], timeout=60)[first.json()["id"]][
            "model_id"
        ]

        tally = Tally()
        stop = time.monotonic() + SECONDS
        threads = [
            threading.Thread(target=_client_loop, args=(server, model_id, i, stop, tally))
            for i in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=SECONDS + 120)

        jobs = wait_for_jobs(client, tally.job_ids, timeout=180)

    assert not tally.failures, tally.failures[:5]
    # Enough of each kind for the test to mean something, even on a slow machine.
    assert tally.statuses["upload 201"] >= CLIENTS and tally.statuses["predict 200"] >= CLIENTS
    assert len(tally.job_ids) >= CLIENTS
    assert {job["status"] for job in jobs.values()} == {"succeeded"}
