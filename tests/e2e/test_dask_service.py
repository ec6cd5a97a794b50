"""The service training on a real Dask cluster: ``dask-scheduler`` and two ``dask-worker``
processes started here, and ``coppice serve`` with ``COPPICE_DASK_SCHEDULER`` pointing at them.

Upload, train, predict (a forest, and boosting with its histograms on the workers); a batch
prediction scored by the workers; a Dask worker SIGKILLed mid-fit (the job still succeeds); the
scheduler killed mid-fit (the attempt fails, the queue retries on a new cluster); an
unreachable scheduler (a job error naming the address).
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.e2e.processes import (
    ENDED,
    coppice_environment,
    free_port,
    kill_sessions,
    serving,
    submit_job,
)

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

JOB_TIMEOUT = 120.0


@dataclass
class DaskCluster:
    """A ``dask scheduler`` and its ``dask worker`` processes, each in a session of its own."""

    log_dir: Path
    port: int = field(default_factory=free_port)
    scheduler: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _start(self, name: str, *command: str) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", *command],
                env=coppice_environment({}),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(process)
        return process

    def start(self, n_workers: int = 2) -> None:
        self.scheduler = self._start(
            "scheduler",
            "distributed.cli.dask_scheduler",
            *("--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"),
        )
        # No nanny: a SIGKILLed worker stays dead, as a lost machine does.
        self.workers = [
            self._start(
                f"worker-{index}",
                "distributed.cli.dask_worker",
                self.address,
                *("--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"),
            )
            for index in range(n_workers)
        ]
        with distributed.Client(self.address, timeout=60) as client:
            client.wait_for_workers(n_workers, timeout=60)

    def task_prefixes(self) -> set[str]:
        """Kinds of task the scheduler has seen (``PartsActor``: the out-of-core rows)."""

        def prefixes(dask_scheduler: Any) -> list[str]:
            return sorted(dask_scheduler.task_prefixes)

        with distributed.Client(self.address, timeout=30) as client:
            return set(client.run_on_scheduler(prefixes))

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name} ---\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.log_dir.glob("*.log"))
        )

    def stop(self) -> None:
        kill_sessions(process.pid for process in self.started)
        for process in self.started:
            process.wait()


@dataclass
class Service:
    client: httpx.Client
    cluster: DaskCluster
    logs: Any


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("e2e-dask")
    cluster = DaskCluster(root / "dask")
    try:
        cluster.start()
        with (
            serving(
                root,
                dask_scheduler=cluster.address,
                retry_backoff_seconds="1",
                worker_concurrency="1",
            ) as (base_url, processes),
            httpx.Client(base_url=base_url, timeout=60) as client,
        ):
            yield Service(client, cluster, lambda: processes.logs() + cluster.logs())
    finally:
        cluster.stop()


def _upload(client: httpx.Client, n_rows: int) -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 4))
    label = np.where(X[:, 0] + X[:, 1] * X[:, 2] > 0, "yes", "no")
    text = io.StringIO()
    text.write("a,b,c,d,label\n")
    for row, y in zip(X, label, strict=True):
        text.write(",".join(f"{v:.6f}" for v in row) + f",{y}\n")
    response = client.post(
        "/v1/datasets",
        files={"file": ("dask.csv", text.getvalue().encode(), "text/csv")},
        data={"name": f"dask-{n_rows}"},
    )
    assert response.status_code == 201, response.text
    dataset_id: str = response.json()["id"]
    return dataset_id


def _train(client: httpx.Client, dataset_id: str, n_estimators: int, max_depth: int = 8) -> str:
    return submit_job(
        client,
        dataset_id=dataset_id,
        method="random_forest",
        target="label",
        params={"n_estimators": n_estimators, "max_depth": max_depth},
        seed=1,
    )


# A fit that a kill after its first tree cannot miss: 300 trees 16 deep on 20,000 rows take
# seconds on two workers (150 trees 8 deep on 3,000 rows had ended between two polls once the
# machine was quiet). Sized to the engine's speed: if it gets much faster, raise it.
LONG_ROWS, LONG_TREES, LONG_DEPTH = 20_000, 300, 16


def _follow(service: Service, job_id: str, on_running: Any = None) -> tuple[dict[str, Any], set]:
    """Poll the job to its end; ``on_running(job)`` sees it each time it runs. Returns the
    ended job and every stage seen."""
    stages: set[str] = set()
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        job = service.client.get(f"/v1/jobs/{job_id}").json()
        if job["stage"]:
            stages.add(job["stage"])
        if job["status"] in ENDED:
            return job, stages
        if job["status"] == "running" and on_running is not None:
            on_running(job)
        if time.monotonic() > deadline:
            pytest.fail(f"job stuck: {job}\n{service.logs()}")
        time.sleep(0.05)


def test_train_and_predict_on_the_cluster(service: Service) -> None:
    client = service.client
    dataset_id = _upload(client, 3000)
    seen_metrics: list[str] = []

    def scrape(job: dict[str, Any]) -> None:
        if not seen_metrics and (job["stage"] or "").startswith("[dask "):
            seen_metrics.append(client.get("/metrics").text)

    # Enough trees that a poll sees the fit's per-tree stage (20 had ended between two polls).
    job, stages = _follow(service, _train(client, dataset_id, 200), scrape)
    assert job["status"] == "succeeded", (job, service.logs())
    address = service.cluster.address
    assert any(stage.startswith(f"[dask {address}] tree") for stage in stages), stages
    # What the fit cost says where it ran: on Dask, with the cluster's two workers.
    assert job["resources"]["backend"] == "dask", job["resources"]
    assert job["resources"]["dask_workers"] == 2, job["resources"]
    # Out of core (issue 27): the forest's rows lived in actors on the workers, which read the
    # dataset's parts themselves, and the trees grew from their histograms (no task per tree).
    assert "PartsActor" in service.cluster.task_prefixes()
    if seen_metrics:  # scraped while the job ran: it counts as running on Dask
        assert 'coppice_jobs_running_by_backend{backend="dask"} 1.0' in seen_metrics[0]
    metrics = client.get("/metrics").text
    assert 'coppice_jobs_running_by_backend{backend="dask"} 0.0' in metrics
    predicted = client.post(
        f"/v1/models/{job['model_id']}/predict",
        json={"records": [{"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0}]},
    )
    assert predicted.status_code == 200, predicted.text


def test_boosting_reads_and_keeps_its_rows_on_the_cluster(service: Service) -> None:
    client = service.client
    dataset_id = _upload(client, 2500)
    job_id = submit_job(
        client,
        dataset_id=dataset_id,
        method="xgboost",
        target="label",
        params={"n_estimators": 20, "max_depth": 4},
        seed=1,
    )
    job, _ = _follow(service, job_id)
    assert job["status"] == "succeeded", (job, service.logs())
    # Out of core (issue 27): the rows lived in actors on the Dask workers, which read the
    # dataset's parts from the store themselves; the fit process never scattered them.
    assert "PartsActor" in service.cluster.task_prefixes()
    assert "PartitionActor" not in service.cluster.task_prefixes()
    assert job["resources"]["backend"] == "dask", job["resources"]
    predicted = client.post(
        f"/v1/models/{job['model_id']}/predict",
        json={"records": [{"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0}]},
    )
    assert predicted.status_code == 200, predicted.text


def test_a_batch_prediction_is_scored_by_the_dask_workers(service: Service) -> None:
    client = service.client
    dataset_id = _upload(client, 3000)
    job, _ = _follow(service, _train(client, dataset_id, 10, 6))
    assert job["status"] == "succeeded", (job, service.logs())
    created = client.post(
        "/v1/batch-predictions",
        json={"model": job["model_id"], "dataset_id": dataset_id, "keep_columns": ["a"]},
    )
    assert created.status_code == 202, created.text
    deadline = time.monotonic() + JOB_TIMEOUT
    while (batch := client.get(f"/v1/batch-predictions/{created.json()['id']}").json())[
        "status"
    ] not in ENDED:
        if time.monotonic() > deadline:
            pytest.fail(f"batch stuck: {batch}\n{service.logs()}")
        time.sleep(0.05)
    assert batch["status"] == "succeeded", (batch, service.logs())
    # The workers read, scored and wrote the parts (issue 27); the notes say so.
    assert "score_part" in service.cluster.task_prefixes()
    assert any(service.cluster.address in note for note in batch["notes"]), batch["notes"]
    scored = client.get(f"/v1/datasets/{batch['output_dataset_id']}/data", params={"format": "csv"})
    assert scored.status_code == 200, scored.text
    lines = list(csv.reader(io.StringIO(scored.text)))
    assert lines[0] == ["a", "prediction"] and len(lines) == 3001
    first = lines[1:6]
    answer = client.post(
        f"/v1/models/{job['model_id']}/predict",
        json={"records": _records(dataset_id, client)[:5]},
    )
    assert answer.status_code == 200, answer.text
    assert [row[1] for row in first] == answer.json()["predictions"]


def _records(dataset_id: str, client: httpx.Client) -> list[dict[str, float]]:
    """The dataset's rows as /v1 records (features only), read back through the API."""
    text = client.get(f"/v1/datasets/{dataset_id}/data", params={"format": "csv"}).text
    names, *rows = csv.reader(io.StringIO(text))
    return [
        {name: float(value) for name, value in zip(names, row, strict=True) if name != "label"}
        for row in rows
    ]


def test_a_worker_killed_mid_fit_does_not_fail_the_job(service: Service) -> None:
    client = service.client
    dataset_id = _upload(client, LONG_ROWS)
    victim = service.cluster.workers[0]

    def kill_once(job: dict[str, Any]) -> None:
        if victim.poll() is None and "tree" in (job["stage"] or ""):
            os.kill(victim.pid, signal.SIGKILL)

    job, _ = _follow(service, _train(client, dataset_id, LONG_TREES, LONG_DEPTH), kill_once)
    assert victim.poll() == -signal.SIGKILL, "the fit ended before the worker was killed"
    assert job["status"] == "succeeded", (job, service.logs())
    assert job["attempts"] == 1


def test_the_cluster_lost_mid_fit_and_restarted_the_job_still_succeeds(
    service: Service,
) -> None:
    """The scheduler and every worker killed mid-fit, a new cluster started at the same
    address: the out-of-core forest replaces its lost actors on the new workers (they read
    their rows again and replay the trees) and goes on in the same attempt when its client
    has reconnected by then, else the attempt fails and the queue's retry succeeds. Which
    of the two depends on timing; the job ends in success either way, never stuck."""
    client = service.client
    cluster = service.cluster
    dataset_id = _upload(client, LONG_ROWS)
    killed: list[bool] = []

    def kill_scheduler_then_restart(job: dict[str, Any]) -> None:
        if not killed and "tree" in (job["stage"] or ""):
            killed.append(True)
            kill_sessions([process.pid for process in cluster.started])
            cluster.started.clear()
            cluster.start()  # same address: the retry finds a cluster again

    job, _ = _follow(
        service,
        _train(client, dataset_id, LONG_TREES, LONG_DEPTH),
        kill_scheduler_then_restart,
    )
    assert killed, "the fit ended before the scheduler was killed"
    assert job["status"] == "succeeded", (job, service.logs())
    assert job["attempts"] in (1, 2), job


def test_an_unreachable_scheduler_is_a_job_error_naming_it(service: Service) -> None:
    # ``service`` only keeps this test in the module's xdist group (tests/conftest.py), so the
    # cluster and server are not torn down and started again around it.
    from service.training import TrainingError
    from service.worker.fit_process import JobSnapshot, default_train

    address = f"tcp://127.0.0.1:{free_port()}"
    job = JobSnapshot(
        id="job",
        dataset_id="data",
        name=None,
        method="random_forest",
        task="classification",
        target="label",
        features=["a"],
        params={},
        validation={},
        seed=1,
        attempts=1,
        n_jobs=1,
        dask_scheduler=address,
        dask_connect_timeout=1.0,
    )
    with pytest.raises(TrainingError) as failed:
        default_train(job, {}, lambda fraction, stage: None, lambda: False)
    assert failed.value.code == "dask_unreachable"
    assert address in failed.value.message
