"""Structured logs: JSON lines with context, request ids, one access line per request, the 500."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from service.cli import main
from service.logs import (
    JsonFormatter,
    TextFormatter,
    bound,
    configure_logging,
    job_id_var,
    request_id_var,
)
from service.worker.job_watch import JobRun

pytestmark = pytest.mark.anyio


class Capture(logging.Handler):
    """Formats every record as the service would write it, while the record's context holds."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))

    def of(self, logger: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["logger"] == logger]


@pytest.fixture
def captured() -> Iterator[Capture]:
    capture = Capture()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(capture)
    root.setLevel(logging.DEBUG)
    yield capture
    root.removeHandler(capture)
    root.setLevel(previous)


def _record(message: str = "hello %s", *args: Any, **extra: Any) -> logging.LogRecord:
    record = logging.LogRecord("coppice.test", logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_json_line_has_the_documented_fields() -> None:
    with bound(request_id_var, "req-1"), bound(job_id_var, "job-1"):
        line = JsonFormatter().format(_record("hello %s", "world", route="/v1/x", status=200))

    document = json.loads(line)
    assert "\n" not in line
    assert document.pop("timestamp").endswith("Z")
    assert document == {
        "level": "WARNING",
        "logger": "coppice.test",
        "message": "hello world",
        "request_id": "req-1",
        "job_id": "job-1",
        "route": "/v1/x",
        "status": 200,
    }


def test_json_line_carries_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "coppice.test", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )

    document = json.loads(JsonFormatter().format(record))

    assert "ValueError: boom" in document["exception"]
    assert "request_id" not in document, "no context outside a request"


def test_text_line() -> None:
    with bound(request_id_var, "req-2"):
        line = TextFormatter().format(_record("hello", status=201))

    assert line.endswith(" WARNING coppice.test: hello request_id=req-2 status=201")


def test_configure_logging_replaces_only_its_own_handler(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    # A test that ran `coppice ...` in this process may have left one installed already.
    others = [handler for handler in before if type(handler).__module__ != "service.logs"]
    try:
        configure_logging("INFO", "text")
        handler = configure_logging("WARNING", "json")
        logging.getLogger("coppice.test").info("dropped")
        logging.getLogger("coppice.test").warning("kept")
        assert root.handlers == [*others, handler]
    finally:
        for extra in set(root.handlers) - set(before):
            root.removeHandler(extra)
        for missing in set(before) - set(root.handlers):
            root.addHandler(missing)
        root.setLevel(level)

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["message"] for line in lines] == ["kept"]


def test_cli_logs_json_lines(
    coppice_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COPPICE_LOG_FORMAT", "JSON")
    monkeypatch.setenv("COPPICE_LOG_LEVEL", "info")
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        assert main(["migrate"]) == 0
    finally:
        for extra in set(root.handlers) - set(before):
            root.removeHandler(extra)
        root.setLevel(level)

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert any(line["message"].startswith("Running upgrade") for line in lines)
    assert all({"timestamp", "level", "logger", "message"} <= set(line) for line in lines)


async def test_request_id_is_generated_and_echoed(
    client: httpx.AsyncClient, captured: Capture
) -> None:
    first = await client.get("/v1/methods")
    second = await client.get("/v1/methods")

    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
    access = captured.of("coppice.access")
    assert [line["request_id"] for line in access] == ids
    assert request_id_var.get() is None, "the id does not outlive its request"


async def test_client_request_id_is_kept_when_sane(client: httpx.AsyncClient) -> None:
    kept = await client.get("/v1/methods", headers={"X-Request-ID": "trace-abc.123"})
    replaced = await client.get("/v1/methods", headers={"X-Request-ID": "bad id\n{json}"})
    too_long = await client.get("/v1/methods", headers={"X-Request-ID": "x" * 200})

    assert kept.headers["x-request-id"] == "trace-abc.123"
    assert len(replaced.headers["x-request-id"]) == 32
    assert len(too_long.headers["x-request-id"]) == 32


async def test_one_access_line_per_request(client: httpx.AsyncClient, captured: Capture) -> None:
    await client.get("/v1/models/abc", headers={"X-Request-ID": "r-1"})

    [line] = captured.of("coppice.access")
    assert line["level"] == "INFO"
    assert line["request_id"] == "r-1"
    assert line["method"] == "GET"
    assert line["route"] == "/v1/models/{model_id}"
    assert line["path"] == "/v1/models/abc"
    assert line["status"] == 404
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert line["message"].startswith("GET /v1/models/abc 404 ")


async def test_health_probes_log_at_debug(client: httpx.AsyncClient, captured: Capture) -> None:
    await client.get("/v2/health/live")

    [line] = captured.of("coppice.access")
    assert line["level"] == "DEBUG"


async def test_logs_inside_a_handler_carry_the_request_id(
    app: FastAPI, client: httpx.AsyncClient, captured: Capture
) -> None:
    @app.get("/v1/logs-something")
    def logs_something() -> None:  # a plain def: runs in a worker thread
        logging.getLogger("coppice.test").info("inside")

    await client.get("/v1/logs-something", headers={"X-Request-ID": "r-2"})

    [line] = captured.of("coppice.test")
    assert line["request_id"] == "r-2"


async def test_a_crash_is_a_500_with_only_the_request_id(
    app: FastAPI, client: httpx.AsyncClient, captured: Capture
) -> None:
    @app.get("/v1/crash")
    async def crash() -> None:
        raise RuntimeError("secret internal state")

    response = await client.get("/v1/crash", headers={"X-Request-ID": "r-500"})

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-request-id"] == "r-500"
    assert response.headers.get_list("x-request-id") == ["r-500"]
    body = response.json()
    assert body["detail"] == (
        "The server failed to handle this request; it has been logged with request id r-500."
    )
    assert "secret" not in response.text
    [error] = [line for line in captured.lines if line["level"] == "ERROR"]
    assert error["request_id"] == "r-500"
    assert "RuntimeError: secret internal state" in error["exception"]
    [access] = captured.of("coppice.access")
    assert (access["status"], access["route"]) == (500, "/v1/crash")


def test_worker_job_threads_log_with_the_job_id(
    monkeypatch: pytest.MonkeyPatch, captured: Capture
) -> None:
    class Context:
        wake = threading.Event()

    def fake_run(self: JobRun) -> None:
        logging.getLogger("service.worker.job_watch").info("fitting")

    monkeypatch.setattr(JobRun, "_run", fake_run)
    job: Any = type("Job", (), {"id": "0123456789abcdef"})()
    run = JobRun(Context(), job)  # type: ignore[arg-type]
    run.start()
    run.join()

    [line] = captured.of("service.worker.job_watch")
    assert line["job_id"] == "0123456789abcdef"
    assert job_id_var.get() is None
