"""Two `coppice serve` processes on one PostgreSQL: an alias moved under load is served by
both within the bound, with no error on the way (LISTEN/NOTIFY; polling is the fallback)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import numpy as np
import pytest

from service.app import create_app
from service.config import Settings
from service.db.migrate import upgrade_to_head
from service.registry.cache import REGISTRY_BOUND_SECONDS
from tests.service.inference.helpers import RECORDS, matrix_input, matrix_rows
from tests.service.models.helpers import Service
from tests.service.registry.conftest import Registry, train_two

pytestmark = pytest.mark.postgres

LOAD_THREADS = 4


@dataclass(frozen=True)
class Answer:
    sent: float
    received: float
    status: int
    model_id: str | None


async def _seed(settings: Settings) -> tuple[str, str]:
    """churn: version 1 = first, 2 = second, 3 = first again; production at 1."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            svc = Service(client=client, app=app, settings=settings)
            first, second = await train_two(svc)
            registry = Registry(svc, first, second)
            await registry.register("churn", first, second, first)
            assert (await registry.move("churn", "production", 1)).status_code == 200
    return first, second


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _replicas(settings: Settings, count: int, logs: Path) -> Iterator[list[str]]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("COPPICE_")}
    env |= {
        "COPPICE_DATA_DIR": str(settings.data_dir),
        "COPPICE_DATABASE_URL": str(settings.database_url),
        "COPPICE_EMBEDDED_WORKER": "false",
    }
    processes: list[subprocess.Popen[bytes]] = []
    urls = []
    try:
        for i in range(count):
            port = _free_port()
            with (logs / f"replica-{i}.log").open("wb") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "service", "serve", "--port", str(port)],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            urls.append(f"http://127.0.0.1:{port}")
        for i, (url, process) in enumerate(zip(urls, processes, strict=True)):
            _wait_ready(url, process, logs / f"replica-{i}.log")
        yield urls
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=15)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/v2/health/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"the replica did not become ready:\n{log.read_text()}")


def _load(urls: list[str], stop: threading.Event, answers: list[Answer], worker: int) -> None:
    """Predict through churn's production alias, alternately on each replica and protocol."""
    v1 = {"records": RECORDS[:2]}
    v2 = {"inputs": [matrix_input(RECORDS[:2])]}
    with httpx.Client(timeout=10) as client:
        i = worker
        while not stop.is_set():
            url = urls[i % len(urls)]
            sent = time.monotonic()
            if (i // len(urls)) % 2:
                response = client.post(f"{url}/v1/models/churn@production/predict", json=v1)
                model_id = response.json().get("model_id") if response.is_success else None
            else:
                response = client.post(f"{url}/v2/models/churn/infer", json=v2)
                model_id = (
                    response.json()["parameters"]["model_id"] if response.is_success else None
                )
            answers.append(Answer(sent, time.monotonic(), response.status_code, model_id))
            i += 1


def _stale_after(answers: list[Answer], moved: float, expected: str) -> list[Answer]:
    """Answers sent more than the bound after the move returned that were not ``expected``."""
    return [
        a for a in answers if a.sent > moved + REGISTRY_BOUND_SECONDS and a.model_id != expected
    ]


def test_a_moved_alias_reaches_every_replica_within_the_bound(
    postgres_url: str, tmp_path: Path
) -> None:
    upgrade_to_head(postgres_url)
    settings = Settings(
        data_dir=tmp_path / "data", database_url=postgres_url, embedded_worker=False
    )
    first, second = anyio.run(_seed, settings)
    with _replicas(settings, 2, tmp_path) as urls:
        answers: list[Answer] = []
        stop = threading.Event()
        threads = [
            threading.Thread(target=_load, args=(urls, stop, answers, n))
            for n in range(LOAD_THREADS)
        ]
        for thread in threads:
            thread.start()
        moves = []
        try:
            for version, model_id in ((2, second), (1, first)):
                time.sleep(0.5)
                started = time.monotonic()
                response = httpx.put(
                    f"{urls[0]}/v1/registered-models/churn/aliases/production",
                    json={"version": version},
                )
                assert response.status_code == 200, response.text
                moves.append((started, time.monotonic(), model_id))
                time.sleep(REGISTRY_BOUND_SECONDS + 0.3)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        _check_tritonclient_pins_a_version(urls[1], first)

    assert [a for a in answers if a.status != 200] == []
    (_, to_second, _), (back, to_first, _) = moves
    assert _stale_after([a for a in answers if a.sent < back], to_second, second) == []
    assert _stale_after(answers, to_first, first) == []
    # Nothing served the new version before the move began (a replica never runs ahead).
    assert all(a.model_id == first for a in answers if a.received < moves[0][0])
    lags = [
        a.sent - moved
        for start, moved, expected in moves
        for a in answers
        if a.sent > moved and a.model_id != expected and a.sent < moved + REGISTRY_BOUND_SECONDS
    ]
    print(
        f"{len(answers)} answers; slowest stale answer {max(lags, default=0.0):.3f} s after a move"
    )


def _check_tritonclient_pins_a_version(url: str, model_id: str) -> None:
    httpclient = pytest.importorskip("tritonclient.http")
    rows = matrix_rows(RECORDS[:2])
    X = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype="float64")
    tensor = httpclient.InferInput("input", list(X.shape), "FP64")
    tensor.set_data_from_numpy(X)
    with httpclient.InferenceServerClient(url=url.removeprefix("http://")) as triton:
        result = triton.infer("churn", [tensor], model_version="3")
    response = result.get_response()
    assert (response["model_name"], response["model_version"]) == ("churn", "3")
    assert response["parameters"]["model_id"] == model_id
