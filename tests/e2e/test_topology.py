"""The docker-compose topology without Docker: one API process and two workers on PostgreSQL.

``coppice migrate`` prepares a throwaway database, then ``coppice serve`` runs with
``COPPICE_EMBEDDED_WORKER=false`` (so it never trains) beside two ``coppice worker``
processes, all configured by ``COPPICE_*`` variables as the compose file configures its
containers. Jobs go in over HTTP; who claimed what is read from the job rows
(``lease_owner``) and from the workers' own log lines.
"""

from __future__ import annotations

import math
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, select

from service.db.tables import JobRecord
from service.methods.catalog import Task
from tests.e2e.processes import Processes, Started, start_server, submit_job, wait_for_jobs
from tests.postgres import throwaway_database
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

N_ROWS = 200
FEATURES = ["x", "z", "colour"]
TARGETS = {Task.CLASSIFICATION: "label", Task.REGRESSION: "amount"}
# Two tasks each: twelve jobs.
METHODS = ["random_forest", "extra_trees", "bagging", "adaboost", "gradient_boosting", "xgboost"]
# Fits that a signal cannot miss. The job row first shows progress 1 to 2 s into a fit (the
# worker writes it at most once a second), so a fit must last several times that: each of these
# takes 3.5 to 4 s of CPU here, model of about 8 MB (600 trees, once seconds, now end in one,
# often before any progress shows). On a loaded machine a fit only lasts longer, and the tests
# check that it was still running when signalled.
LONG_FITS = {
    Task.CLASSIFICATION: {"n_estimators": 2500},
    Task.REGRESSION: {"n_estimators": 2500, "min_samples_leaf": 5},
}
# Worker timings for a test: quick polls and heartbeats; a shutdown grace far longer than the
# long fit, even on a loaded machine.
WORKER_SETTINGS = {
    "worker_concurrency": "1",
    "poll_seconds": "0.2",
    "heartbeat_seconds": "0.5",
    "job_lease_seconds": "10",
    "retry_backoff_seconds": "0",
    "shutdown_grace_seconds": "120",
}


@dataclass
class Topology:
    client: httpx.Client
    processes: Processes
    api: Started
    workers: list[Started]
    db: Engine
    dataset_id: str

    def start_worker(self, *, wait: bool = True) -> Started:
        worker = self.processes.start(f"worker-{len(self.workers) + 1}", "worker")
        self.workers.append(worker)
        if wait:
            self.worker_id(worker)
        return worker

    def worker_id(self, worker: Started, timeout: float = 30.0) -> str:
        """The worker's ``lease_owner`` id, from its "worker <id> started" log line."""
        deadline = time.monotonic() + timeout
        while not (found := re.search(r"worker (\S+) started", worker.log_text())):
            assert worker.alive(), worker.log_text()
            assert time.monotonic() < deadline, f"{worker.name} did not start"
            time.sleep(0.1)
        return found.group(1)

    def alive_workers(self) -> list[Started]:
        return [worker for worker in self.workers if worker.alive()]

    def owner(self, job_id: str) -> Started:
        """The worker that holds (or last held) the job, by the job row's ``lease_owner``."""
        with self.db.connect() as connection:
            owner = connection.execute(
                select(JobRecord.lease_owner).where(JobRecord.id == job_id)
            ).scalar_one()
        by_id = {self.worker_id(worker): worker for worker in self.workers}
        assert owner in by_id, f"job {job_id} held by {owner!r}, not one of {list(by_id)}"
        return by_id[owner]

    def claimed_by(self, job_id: str) -> list[str]:
        """Names of the processes that logged claiming the job, once per claim."""
        line = f"job {job_id}: claimed"
        return [s.name for s in self.processes.started for _ in range(s.log_text().count(line))]

    def submit(self, method: str, task: Task, params: dict[str, Any], **body: Any) -> str:
        return submit_job(
            self.client,
            **{
                "dataset_id": self.dataset_id,
                "target": TARGETS[task],
                "features": FEATURES,
                "method": method,
                "task": task.value,
                "params": params,
                "seed": 0,
            }
            | body,
        )

    def job(self, job_id: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return job

    def wait_mid_fit(self, job_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the job is running and its fit has reported progress."""
        deadline = time.monotonic() + timeout
        while (job := self.job(job_id))["status"] != "running" or job["progress"] <= 0:
            assert job["status"] in ("queued", "running"), job
            assert time.monotonic() < deadline, f"{job}\n{self.processes.logs()}"
            time.sleep(0.1)
        return job


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    root = tmp_path_factory.mktemp("e2e-topology")
    # Skips the module when PostgreSQL cannot be reached; dropped after the processes stop.
    with throwaway_database() as database_url:
        processes = Processes(
            root / "logs",
            database_url=database_url,
            data_dir=str(root / "data"),
            log_format="text",
            **WORKER_SETTINGS,
        )
        db = create_engine(database_url)
        try:
            processes.run("migrate")
            base_url, api = start_server(processes, "api", embedded_worker="false")
            workers = [processes.start(f"worker-{n}", "worker") for n in (1, 2)]
            with httpx.Client(base_url=base_url, timeout=60) as client:
                rows = dataset_rows(N_ROWS)
                response = client.post("/v1/datasets", json={"columns": COLUMNS, "rows": rows})
                assert response.status_code == 201, response.text
                topology = Topology(client, processes, api, workers, db, response.json()["id"])
                for worker in workers:
                    topology.worker_id(worker)
                yield topology
        finally:
            processes.stop_all()
            db.dispose()


def _score(task: Task, predictions: list[Any], truth: list[Any]) -> float:
    """Training accuracy or RMSE, as the worker computed it for ``metrics.train``."""
    if task == Task.CLASSIFICATION:
        hits = sum(1 for p, t in zip(predictions, truth, strict=True) if p == t)
        return hits / len(truth)
    squares = [float(p - t) ** 2 for p, t in zip(predictions, truth, strict=True)]
    return math.sqrt(sum(squares) / len(squares))


def test_two_workers_share_twelve_jobs_and_the_api_serves_them(topology: Topology) -> None:
    client = topology.client
    jobs = {
        topology.submit(method, task, {"n_estimators": 10}, validation={"holdout": 0}): task
        for method in METHODS
        for task in Task
    }

    # Seconds on a quiet machine; the deadline is for a loaded one.
    ended = wait_for_jobs(client, jobs, timeout=300, logs=topology.processes)

    failures = {i: job["error"] for i, job in ended.items() if job["status"] != "succeeded"}
    assert not failures, failures
    assert all(job["attempts"] == 1 for job in ended.values())
    # Each job was claimed exactly once, by the worker its row names; the API claimed none.
    owners = {job_id: topology.owner(job_id).name for job_id in jobs}
    assert {job_id: topology.claimed_by(job_id) for job_id in jobs} == {
        job_id: [owner] for job_id, owner in owners.items()
    }
    assert sorted(set(owners.values())) == ["worker-1", "worker-2"], "both workers take part"

    # The API process, which trained nothing, predicts with every model from the database:
    # on the training rows (no holdout) its predictions give exactly the training metric the
    # worker recorded.
    rows = dataset_rows(N_ROWS)
    feature_at = [COLUMNS.index(name) for name in FEATURES]
    for job_id, task in jobs.items():
        model = client.get(f"/v1/models/{ended[job_id]['model_id']}").json()
        response = client.post(
            f"/v1/models/{model['id']}/predict",
            json={"columns": FEATURES, "rows": [[row[i] for i in feature_at] for row in rows]},
        )
        assert response.status_code == 200, response.text
        truth = [row[COLUMNS.index(TARGETS[task])] for row in rows]
        metric = "accuracy" if task == Task.CLASSIFICATION else "rmse"
        score = _score(task, response.json()["predictions"], truth)
        assert score == pytest.approx(model["metrics"]["train"][metric], rel=1e-9), model["method"]


def test_sigterm_lets_the_running_fit_finish_within_the_grace(topology: Topology) -> None:
    assert len(topology.alive_workers()) == 2
    long_job = topology.submit("random_forest", Task.CLASSIFICATION, LONG_FITS[Task.CLASSIFICATION])
    mid_fit = topology.wait_mid_fit(long_job)
    holder = topology.owner(long_job)

    holder.process.send_signal(signal.SIGTERM)
    # As an orchestrator would, start its replacement while it drains (the next test uses it).
    replacement = topology.start_worker(wait=False)

    # Meanwhile the other workers go on serving the queue.
    short_job = topology.submit("decision_tree", Task.CLASSIFICATION, {})
    ended = wait_for_jobs(topology.client, [short_job, long_job], timeout=120)
    assert ended[short_job]["status"] == "succeeded"
    assert topology.owner(short_job) is not holder
    # The fit was mid-way when the signal came and simply went on: same worker, one attempt.
    assert mid_fit["progress"] < 0.9
    log = holder.log_text()
    finished = log.find(f"job {long_job}: succeeded")
    assert 0 <= log.find("SIGTERM: finishing running jobs") < finished, log
    assert (ended[long_job]["status"], ended[long_job]["attempts"]) == ("succeeded", 1)
    assert topology.owner(long_job) is holder
    assert topology.claimed_by(long_job) == [holder.name]
    # Then the worker exits cleanly.
    assert holder.process.wait(timeout=30) == 0, holder.log_text()
    assert replacement.alive(), replacement.log_text()
    response = topology.client.post(
        f"/v1/models/{ended[long_job]['model_id']}/predict",
        json={"records": [{"x": 0.1, "z": -1.0, "colour": "red"}]},
    )
    assert response.status_code == 200, response.text


def test_a_second_sigterm_requeues_the_job_for_another_worker(topology: Topology) -> None:
    # Two workers, whatever ran before (the previous test replaced the worker it stopped).
    while len(topology.alive_workers()) < 2:
        topology.start_worker()
    for worker in topology.alive_workers():
        topology.worker_id(worker)
    long_job = topology.submit("random_forest", Task.REGRESSION, LONG_FITS[Task.REGRESSION])
    topology.wait_mid_fit(long_job)
    holder = topology.owner(long_job)

    holder.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while "finishing running jobs" not in holder.log_text():
        assert time.monotonic() < deadline, holder.log_text()
        time.sleep(0.05)
    holder.process.send_signal(signal.SIGTERM)

    # The worker gives the job back at once and exits; another worker trains it from scratch.
    assert holder.process.wait(timeout=15) == 0, holder.log_text()
    ended = wait_for_jobs(topology.client, [long_job], timeout=120)[long_job]
    assert ended["status"] == "succeeded", ended["error"]
    successor = topology.owner(long_job)
    assert successor is not holder
    assert topology.claimed_by(long_job) == sorted([holder.name, successor.name])
    # The interrupted run is not counted against the job's attempts.
    assert ended["attempts"] == 1
