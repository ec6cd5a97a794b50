"""`coppice serve` and `coppice worker` wait for a database that is not there yet."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from service.db.wait import wait_for_database


def test_the_wait_grows_its_pauses_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # SQLite cannot open a database file where a directory stands: until it is removed.
    blocker = tmp_path / "coppice.db"
    blocker.mkdir()
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 6:
            blocker.rmdir()

    with caplog.at_level(logging.INFO, logger="service.db.wait"):
        failures = wait_for_database(f"sqlite:///{blocker}", sleep=sleep, max_delay=4)
    assert failures == 6
    assert pauses == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    messages = [record.getMessage() for record in caplog.records]
    assert "unreachable" in messages[0] and "trying again in 0.5 s" in messages[0]
    assert "reachable after" in messages[-1]


def test_a_malformed_url_is_not_waited_for() -> None:
    with pytest.raises(ArgumentError):
        wait_for_database("not a url")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _started(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=20)


def _wait_for_line(log: Path, text_: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if text_ in log.read_text(errors="replace"):
            return
        assert process.poll() is None, f"exited {process.returncode}:\n{log.read_text()}"
        time.sleep(0.1)
    raise AssertionError(f"no {text_!r} in:\n{log.read_text()}")


@pytest.mark.postgres
def test_serve_and_worker_start_once_the_database_exists(postgres_url: str, tmp_path: Path) -> None:
    """The database is created only after both commands have started and logged the wait."""
    url = make_url(postgres_url)
    late = url.set(database=f"{url.database}_late")
    admin = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPPICE_")}
    env |= {
        "COPPICE_DATA_DIR": str(tmp_path),
        "COPPICE_DATABASE_URL": late.render_as_string(hide_password=False),
        "COPPICE_EMBEDDED_WORKER": "false",
    }
    serve_log, worker_log = tmp_path / "serve.log", tmp_path / "worker.log"
    try:
        with (
            _started(["serve", "--port", str(port)], env, serve_log) as serve,
            _started(["worker"], env, worker_log) as worker,
        ):
            _wait_for_line(serve_log, "unreachable", serve)
            _wait_for_line(worker_log, "unreachable", worker)
            with admin.connect() as connection:
                connection.execute(text(f'CREATE DATABASE "{late.database}"'))
            _wait_for_line(worker_log, "started", worker)
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(httpx.TransportError):
                    ready = httpx.get(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1)
                    if ready.status_code == 200:
                        break
                assert time.monotonic() < deadline, serve_log.read_text()
                assert serve.poll() is None, serve_log.read_text()
                time.sleep(0.1)
            assert "reachable after" in serve_log.read_text()
            assert "Traceback" not in serve_log.read_text() + worker_log.read_text()
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{late.database}" WITH (FORCE)'))
        admin.dispose()
