"""PostgreSQL stops and starts again under Coppice: nothing is restarted, nothing is lost.

An API process and a ``coppice worker`` run on a throwaway database of the local cluster while
jobs train and a client predicts with a loaded model. The test stops the cluster with
``pg_ctlcluster`` (fast mode: every connection is cut), holds it down a few seconds, and starts
it again. Meanwhile ``/v2/health/ready`` must say 503 and a /v1 request 503 with Retry-After,
while the loaded model goes on predicting; afterwards ready must say 200 on its own, the worker
must still be running and claiming, and every job must end succeeded at its first attempt (no
fit is thrown away), or failed with a reason.

It restarts the whole cluster, so it is skipped unless the test database is the local cluster
and this user may control it (root, or ``postgres``). PostgreSQL is started again whatever
happens in between.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import Processes, Started, start_server, submit_job, wait_for_jobs
from tests.postgres import admin_url, server_to_myself, throwaway_database
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

WORKER_SETTINGS = {
    "worker_concurrency": "2",
    "poll_seconds": "0.2",
    "heartbeat_seconds": "0.5",
    # Longer than the outage: a fit that runs through it keeps its lease.
    "job_lease_seconds": "15",
    "retry_backoff_seconds": "0",
    "shutdown_grace_seconds": "5",
    "log_format": "text",
}
OUTAGE_SECONDS = 4.0
# Fits mid-way when the server stops: the job row first shows progress 1 to 2 s into a fit
# (the worker writes it at most once a second), and 2500 trees take 5 s of CPU here; the
# server is stopped at the first look that finds both long fits running with progress.
LONG_FIT = {"n_estimators": 2500}
SHORT_FIT = {"n_estimators": 100}
RECORDS = [{"x": 0.1, "z": -1.0, "colour": "red"}]
JOB = {"target": "label", "features": ["x", "z", "colour"], "task": "classification", "seed": 0}


@pytest.fixture
def cluster() -> Iterator[tuple[str, str]]:
    """``(version, name)`` of the local cluster tests use, or skip saying why there is none.

    Held to this test alone while it lives: tests in other pytest-xdist workers (or another
    pytest) that use the server finish first, and those that start meanwhile wait for it.
    """
    url = admin_url()
    if shutil.which("pg_ctlcluster") is None or shutil.which("pg_lsclusters") is None:
        pytest.skip("pg_ctlcluster is not installed: cannot restart PostgreSQL")
    if os.geteuid() != 0 and getpass.getuser() != "postgres":
        pytest.skip("restarting PostgreSQL needs root or the postgres user")
    if url.host not in ("127.0.0.1", "localhost", "::1"):
        pytest.skip(f"the test database is not on this machine ({url.host})")
    listing = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=False)
    for line in listing.stdout.splitlines():
        version, name, port, status = line.split()[:4]
        if int(port) == (url.port or 5432) and status == "online":
            with server_to_myself():
                yield version, name
            return
    pytest.skip(f"no online local cluster on port {url.port or 5432}: {listing.stdout!r}")


def _pg_ctl(cluster: tuple[str, str], action: str) -> None:
    subprocess.run(
        ["pg_ctlcluster", *cluster, action], check=True, capture_output=True, timeout=120
    )


def _pg_online(cluster: tuple[str, str]) -> bool:
    status = subprocess.run(["pg_ctlcluster", *cluster, "status"], capture_output=True, check=False)
    return status.returncode == 0


@dataclass
class Predictor:
    """A client predicting in a loop, noting each answer's status (or a transport error)."""

    base_url: str
    model_id: str
    answers: list[tuple[float, int | str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=30) as client:
            while not self.stop.is_set():
                try:
                    response = client.post(
                        f"/v1/models/{self.model_id}/predict", json={"records": RECORDS}
                    )
                    self.answers.append((time.monotonic(), response.status_code))
                except httpx.TransportError as error:
                    self.answers.append((time.monotonic(), type(error).__name__))
                time.sleep(0.1)


@dataclass
class Service:
    client: httpx.Client
    processes: Processes
    api: Started
    worker: Started
    dataset_id: str


@pytest.fixture
def service(cluster: tuple[str, str], tmp_path: Path) -> Iterator[Service]:
    # After `cluster`: its database is made while the server is held to this test.
    with throwaway_database() as database_url:
        processes = Processes(tmp_path / "logs", database_url=database_url, **WORKER_SETTINGS)
        try:
            processes.run("migrate")
            base_url, api = start_server(processes, "api", embedded_worker="false")
            worker = processes.start("worker", "worker")
            with httpx.Client(base_url=base_url, timeout=60) as client:
                response = client.post(
                    "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows(300)}
                )
                assert response.status_code == 201, response.text
                yield Service(client, processes, api, worker, response.json()["id"])
        finally:
            processes.stop_all()


def _ready(client: httpx.Client) -> int | str:
    try:
        return client.get("/v2/health/ready", timeout=10).status_code
    except httpx.TransportError as error:
        return type(error).__name__


def _wait_for_ready(client: httpx.Client, wanted: int, timeout: float) -> float:
    """Seconds until ``/v2/health/ready`` answers ``wanted``; fails after ``timeout``."""
    began = time.monotonic()
    while (answer := _ready(client)) != wanted:
        assert time.monotonic() - began < timeout, f"ready still answers {answer}, not {wanted}"
        time.sleep(0.1)
    return time.monotonic() - began


def _wait_mid_fit(client: httpx.Client, job_ids: list[str], processes: Processes) -> None:
    """Wait until every job is running and its fit has reported progress, at one look."""
    deadline = time.monotonic() + 60
    while True:
        jobs = [client.get(f"/v1/jobs/{job_id}").json() for job_id in job_ids]
        if all(job["status"] == "running" and job["progress"] > 0 for job in jobs):
            return
        assert all(job["status"] in ("queued", "running") for job in jobs), jobs
        assert time.monotonic() < deadline, f"{jobs}\n{processes.logs()}"
        time.sleep(0.1)


def test_postgres_restart_loses_nothing_and_needs_no_coppice_restart(
    cluster: tuple[str, str], service: Service
) -> None:
    client = service.client
    job = dict(JOB, dataset_id=service.dataset_id)
    first = submit_job(client, **job, method="decision_tree", params={})
    model_id = wait_for_jobs(client, [first], timeout=60)[first]["model_id"]
    assert model_id is not None
    # Loaded once before the outage, the model is in the API's cache from then on.
    warm = client.post(f"/v1/models/{model_id}/predict", json={"records": RECORDS})
    assert warm.status_code == 200, warm.text
    # Two long fits run through the outage (the worker runs two at a time); two short ones
    # queue behind them and are claimed after it.
    jobs = [submit_job(client, **job, method="random_forest", params=LONG_FIT) for _ in range(2)]
    jobs += [submit_job(client, **job, method="random_forest", params=SHORT_FIT) for _ in range(2)]
    _wait_mid_fit(client, jobs[:2], service.processes)
    predictor = Predictor(str(client.base_url), model_id)
    thread = threading.Thread(target=predictor.run, daemon=True)
    thread.start()

    try:
        _pg_ctl(cluster, "stop")
        stopped_at = time.monotonic()
        down_within = _wait_for_ready(client, 503, timeout=15)
        # The /v1 API says the same: not a failure of its own, but "try again shortly".
        away = client.get(f"/v1/jobs/{jobs[0]}")
        assert (away.status_code, away.headers.get("Retry-After")) == (503, "2"), away.text
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped_at)))
    finally:
        starting_at = time.monotonic()
        if not _pg_online(cluster):
            _pg_ctl(cluster, "start")
    started_at = time.monotonic()
    ready_after = _wait_for_ready(client, 200, timeout=30)
    time.sleep(1.0)  # a few predictions after the return
    predictor.stop.set()
    thread.join(30)

    # Nothing of Coppice was restarted, and both processes lived through it.
    assert service.api.alive() and service.worker.alive(), service.processes.logs()
    during = Counter(answer for at, answer in predictor.answers if stopped_at < at < started_at)
    print(
        f"ready: 503 {down_within:.2f} s after the stop; the start took "
        f"{started_at - starting_at:.2f} s, then 200 after {ready_after:.2f} s; "
        f"predictions while down: {dict(during)}"
    )
    # A loaded model needs no database: it served all along, through the outage too.
    assert during and set(during) == {200}, predictor.answers
    after = [answer for at, answer in predictor.answers if at > started_at + ready_after]
    assert after and set(after) == {200}, predictor.answers
    # Every job ends, failed only with a reason.
    ended = wait_for_jobs(client, jobs, timeout=120, logs=service.processes)
    for outcome in ended.values():
        assert outcome["status"] in ("succeeded", "failed"), outcome
        if outcome["status"] == "failed":
            assert outcome["error"]["code"] and outcome["error"]["message"], outcome
    # And no training was thrown away: a fit that ended while the database was away had its
    # model stored when it returned, instead of training again after its lease.
    assert [job["attempts"] for job in ended.values()] == [1] * len(jobs), ended
    # The worker's loop is alive: it claims and trains a job submitted after the restart.
    late = submit_job(client, **job, method="decision_tree", params={})
    assert wait_for_jobs(client, [late], timeout=60)[late]["status"] == "succeeded"
    assert service.worker.alive(), service.worker.log_text()
