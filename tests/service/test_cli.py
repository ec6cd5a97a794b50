"""The ``coppice`` command: migrations on SQLite and PostgreSQL, and a real server process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
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
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            status = _wait_until_ready(f"http://127.0.0.1:{port}/v2/health/ready", server)
            assert status == 200, log_path.read_text()
        finally:
            server.terminate()
            returncode = server.wait(timeout=15)

    # A container stop sends SIGTERM: uvicorn must finish the lifespan, then exit (recent
    # uvicorn re-raises the signal after a clean shutdown, hence -SIGTERM as well as 0).
    log_text = log_path.read_text()
    assert returncode in (0, -signal.SIGTERM), log_text
    assert "Application shutdown complete" in log_text
    assert _revision(f"sqlite:///{tmp_path / 'coppice.db'}") == HEAD_REVISION


def _wait_until_ready(url: str, server: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
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
