"""A server killed between writing a model's artifact and committing its row.

The fit process writes the artifact to the data store, then the worker commits the row that
names it. Here a real ``coppice serve`` (uvicorn and its embedded worker) is SIGKILLed in that
gap: the test holds SQLite's write lock from the moment the job runs, so the worker can never
commit, watches the store until the fit's object appears there, and kills every process of
the server. What is left must be an object no row names, and ``coppice store gc`` removes it.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.processes import kill_sessions, serving, submit_job
from tests.service.models.helpers import COLUMNS, dataset_rows

pytestmark = pytest.mark.slow


def _artifacts(store: Path) -> list[Path]:
    # Complete objects only: a local store renames a finished write into place.
    return sorted((store / "models").glob("*/model.cpm")) if (store / "models").exists() else []


def _wait_until(predicate: object, what: str, timeout: float, logs: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout} s\n{logs}"
        time.sleep(0.02)


def test_a_server_killed_before_the_row_leaves_an_object_store_gc_sweeps(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = data_dir / "store"
    database = data_dir / "coppice.db"
    with (
        serving(tmp_path) as (base_url, processes),
        httpx.Client(base_url=base_url, timeout=60) as client,
    ):
        upload = client.post(
            "/v1/datasets", json={"columns": COLUMNS, "rows": dataset_rows(400, seed=3)}
        )
        assert upload.status_code == 201, upload.text
        job_id = submit_job(
            client,
            dataset_id=upload.json()["id"],
            target="label",
            method="random_forest",
            features=["x", "z", "colour"],
            params={"n_estimators": 200},
            seed=1,
        )
        _wait_until(
            lambda: client.get(f"/v1/jobs/{job_id}").json()["status"] == "running",
            "the job starting",
            60,
        )
        # From here on no writer but this connection: the worker cannot commit the model.
        lock = sqlite3.connect(database, timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")
            _wait_until(lambda: _artifacts(store), "the fit writing its artifact", 120)
            server = processes.started[0]
            kill_sessions([server.pid])  # uvicorn, the worker, its fork server and the fit
            server.process.wait()
        finally:
            lock.execute("ROLLBACK")
            lock.close()

        [orphan] = _artifacts(store)
        check = sqlite3.connect(database)
        try:
            assert check.execute("SELECT count(*) FROM models").fetchone() == (0,)
            assert check.execute("SELECT count(*) FROM model_artifacts").fetchone() == (0,)
            status = check.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone()
            assert status == ("running",)  # its lease brings it back when a worker returns
        finally:
            check.close()

        relative = orphan.relative_to(store).as_posix()
        dry = processes.run("store", "gc", "--older-than", "0", "--dry-run")
        assert f"would delete {relative}" in dry and orphan.exists()
        # The default grace (a day) keeps a fresh object: it may be an upload in progress.
        kept = processes.run("store", "gc")
        assert relative not in kept and orphan.exists()
        swept = processes.run("store", "gc", "--older-than", "0")
        assert f"deleted {relative}" in swept
        assert not orphan.exists()
