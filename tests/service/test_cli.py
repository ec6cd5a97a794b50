"""The ``coppice`` command: migrations on SQLite and PostgreSQL, and a real server process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from service.cli import main
from service.db.migrate import alembic_config

# Read from the migrations, so a new revision does not need this test edited.
HEAD_REVISION = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def _revision(database_url: str) -> str | None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def test_migrate_creates_sqlite_database_at_head(
    coppice_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = coppice_env / "not-yet-created"
    monkeypatch.setenv("COPPICE_DATA_DIR", str(data_dir))

    assert main(["migrate"]) == 0
    assert main(["migrate"]) == 0, "a second run must be a no-op"

    assert _revision(f"sqlite:///{data_dir / 'coppice.db'}") == HEAD_REVISION


@pytest.mark.postgres
def test_migrate_postgres(
    coppice_env: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPPICE_DATABASE_URL", postgres_url)

    assert main(["migrate"]) == 0

    assert _revision(postgres_url) == HEAD_REVISION
    assert not (coppice_env / "coppice.db").exists()


def test_no_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_serve_end_to_end(tmp_path: Path) -> None:
    port = _free_port()
    env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
    env["COPPICE_DATA_DIR"] = str(tmp_path)
    env["COPPICE_EMBEDDED_WORKER"] = "false"  # the job below stays queued
    base_url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            status = _wait_until_ready(f"{base_url}/v2/health/ready", server)
            assert status == 200, log_path.read_text()
            job_id = _queue_a_job(base_url)
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(
                    httpx.get, f"{base_url}/v1/jobs/{job_id}", params={"wait": 30}, timeout=60
                )
                time.sleep(0.5)  # the request is in, waiting for a job nobody will run
                stopped_at = time.monotonic()
                server.terminate()
                returncode = server.wait(timeout=15)
                answer = waiting.result(timeout=15)
                shutdown_s = time.monotonic() - stopped_at
        finally:
            server.kill()
            server.wait(timeout=15)

    # A container stop sends SIGTERM: uvicorn must finish the lifespan, then exit (recent
    # uvicorn re-raises the signal after a clean shutdown, hence -SIGTERM as well as 0).
    log_text = log_path.read_text()
    assert returncode in (0, -signal.SIGTERM), log_text
    assert "Application shutdown complete" in log_text
    assert _revision(f"sqlite:///{tmp_path / 'coppice.db'}") == HEAD_REVISION
    # The waiting request was answered when the shutdown began, not after its 30 s.
    assert answer.status_code == 200 and answer.json()["status"] == "queued"
    assert shutdown_s < 10, shutdown_s


def test_serve_on_a_taken_port_exits_with_uvicorn_s_startup_failure(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
    env["COPPICE_DATA_DIR"] = str(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            # For a hang: start-up loads every kernel before it binds (minutes where this
            # checkout's kernels are not compiled yet, on a loaded machine).
            timeout=240,
            check=False,
        )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "address already in use" in (result.stdout + result.stderr).lower()


def _queue_a_job(base_url: str) -> str:
    dataset = httpx.post(
        f"{base_url}/v1/datasets",
        json={"columns": ["x", "label"], "rows": [[1.0, "a"], [2.0, "b"], [3.0, "a"]]},
    )
    assert dataset.status_code == 201, dataset.text
    job = httpx.post(
        f"{base_url}/v1/jobs",
        json={"dataset_id": dataset.json()["id"], "target": "label", "method": "decision_tree"},
    )
    assert job.status_code == 202, job.text
    return str(job.json()["id"])


def _wait_until_ready(url: str, server: subprocess.Popen[bytes], timeout: float = 90.0) -> int:
    # Generous: at load 15 on two cores, importing the app alone takes 18 s.
    deadline = time.monotonic() + timeout
    last_status = 0
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return -1
        # Refused connections are expected until uvicorn has bound the port.
        with contextlib.suppress(httpx.TransportError):
            last_status = httpx.get(url, timeout=1.0).status_code
        if last_status == 200:
            return last_status
        time.sleep(0.2)
    return last_status


def test_serve_freezes_the_start_up_objects_out_of_garbage_collection() -> None:
    # In a child: freezing is for the life of a process. With the app built, as `serve` does
    # before it runs the server, the modules' objects go to the permanent generation, so a
    # large predict body no longer sets off a full collection that walks them all (the 0.1 s
    # steps in benchmarks/README.md's "Service results").
    probe = (
        "import gc\n"
        "from service.app import create_app\n"
        "from service.cli import _freeze_start_up_objects\n"
        "from service.config import Settings\n"
        "create_app(Settings(database_url='sqlite://', embedded_worker=False))\n"
        "_freeze_start_up_objects()\n"
        "print(gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    frozen, still_tracked = map(int, done.stdout.split())
    assert frozen > 50_000 and still_tracked < frozen / 100, (frozen, still_tracked)
