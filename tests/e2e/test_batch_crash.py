"""A worker killed in the middle of a batch prediction: retried, and the output written once.

A real ``coppice serve`` (API only) and a ``coppice worker`` share a SQLite file. The test
holds SQLite's write lock from the moment the batch runs, so the worker can score and write
the output's parts but never commit them; once the parts are in the store it SIGKILLs the
worker's whole session (the worker, its fork server, the batch process). Nothing of the output
may be visible then. A second worker takes the batch back when its lease lapses, scores it
again and commits its own output: one output dataset, whole, equal to ``/v1`` predict; the
killed attempt's parts are named by no row, and ``coppice store gc`` sweeps them.
"""

from __future__ import annotations

import io
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from tests.e2e.processes import kill_sessions, serving, submit_job, wait_for_jobs
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = pytest.mark.slow

# Short leases, so the second worker takes the batch back within seconds.
WORKER_SETTINGS = {
    "job_lease_seconds": "10",
    "heartbeat_seconds": "2",
    "retry_backoff_seconds": "0.2",
}
N_ROWS = 6000


def _wait_until(predicate: Any, what: str, timeout: float, logs: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} did not happen in {timeout} s\n{logs.logs() if logs else ''}"
            )
        time.sleep(0.05)


def _output_parts(store: Path, known: set[str]) -> list[Path]:
    """Complete parts (a local store renames a finished write into place) of datasets other
    than ``known``."""
    root = store / "datasets"
    if not root.exists():
        return []
    return sorted(
        part
        for folder in root.iterdir()
        if folder.name not in known
        for part in folder.glob("part-*.parquet")
    )


def test_a_worker_killed_mid_batch_is_retried_and_writes_the_output_once(
    tmp_path: Path,
) -> None:
    store = tmp_path / "data" / "store"
    database = tmp_path / "data" / "coppice.db"
    with (
        serving(tmp_path, embedded_worker="false", **WORKER_SETTINGS) as (base_url, processes),
        httpx.Client(base_url=base_url, timeout=120) as client,
    ):
        first = processes.start("worker-1", "worker")
        rows = dataset_rows(N_ROWS, seed=4)
        upload = client.post("/v1/datasets", json={"columns": COLUMNS, "rows": rows})
        assert upload.status_code == 201, upload.text
        dataset_id = upload.json()["id"]
        job_id = submit_job(
            client,
            dataset_id=dataset_id,
            target="label",
            method="random_forest",
            features=["x", "z", "colour"],
            params={"n_estimators": 20},
            seed=1,
        )
        [job] = wait_for_jobs(client, [job_id], timeout=300, logs=processes).values()
        assert job["status"] == "succeeded", job
        model_id = job["model_id"]

        created = client.post(
            "/v1/batch-predictions",
            json={
                "model": model_id,
                "dataset_id": dataset_id,
                "keep_columns": ["amount"],
                "return_proba": True,
            },
        )
        assert created.status_code == 202, created.text
        batch_id = created.json()["id"]
        url = f"/v1/batch-predictions/{batch_id}"
        _wait_until(
            lambda: client.get(url).json()["status"] == "running", "the batch starting", 120
        )
        # From here on no writer but this connection: the worker cannot commit the output.
        lock = sqlite3.connect(database, timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")
            _wait_until(
                lambda: _output_parts(store, {dataset_id}),
                "the batch writing its output's parts",
                180,
                processes,
            )
            kill_sessions([first.pid])  # the worker, its fork server and the batch process
            first.process.wait()
        finally:
            lock.execute("ROLLBACK")
            lock.close()

        [orphan] = _output_parts(store, {dataset_id})
        check = sqlite3.connect(database)
        try:
            assert check.execute("SELECT count(*) FROM datasets").fetchone() == (1,)
            state = check.execute(
                "SELECT status, attempts FROM jobs WHERE id = ?", (batch_id,)
            ).fetchone()
            assert state == ("running", 1)  # its lease brings it back to the next worker
        finally:
            check.close()
        assert client.get(url).json()["output_dataset_id"] is None

        processes.start("worker-2", "worker")
        batch = client.get(url).json()
        deadline = time.monotonic() + 300
        while batch["status"] in ("queued", "running") and time.monotonic() < deadline:
            batch = client.get(url, params={"wait": 10}).json()
        assert batch["status"] == "succeeded", f"{batch}\n{processes.logs()}"
        assert batch["attempts"] == 2

        # One output, whole; the killed attempt's parts are no dataset's.
        datasets = client.get("/v1/datasets").json()
        assert datasets["total"] == 2
        output_id = batch["output_dataset_id"]
        assert output_id not in orphan.parts and orphan.exists()
        described = client.get(f"/v1/datasets/{output_id}").json()
        assert described["n_rows"] == N_ROWS
        download = client.get(f"/v1/datasets/{output_id}/data", params={"format": "parquet"})
        table = pq.read_table(io.BytesIO(download.content))
        assert table.column_names == ["amount", "prediction", "proba_no", "proba_yes"]
        assert table.num_rows == N_ROWS
        sample = [{"x": row[0], "z": row[1], "colour": row[2]} for row in rows[:40]]
        answer = client.post(
            f"/v1/models/{model_id}/predict", json={"records": sample, "return_proba": True}
        ).json()
        assert table.column("prediction").to_pylist()[:40] == answer["predictions"]
        assert table.column("proba_yes").to_pylist()[:40] == pytest.approx(
            [p[1] for p in answer["probabilities"]]
        )

        relative = orphan.relative_to(store).as_posix()
        swept = processes.run("store", "gc", "--older-than", "0")
        assert f"deleted {relative}" in swept
        assert "deleted 1 object(s)" in swept  # the input, the model and the output are named
        assert not orphan.exists()
        kept = client.get(f"/v1/datasets/{output_id}/data", params={"format": "parquet"})
        assert kept.status_code == 200 and kept.content == download.content, kept.text
