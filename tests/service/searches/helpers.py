"""Shared pieces of the search tests: a small dataset, a real worker, waiting for a search."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from service.config import Settings
from service.worker.claim_loop import Supervisor, WorkerConfig
from service.worker.lease import LeasePolicy

PROBLEM = "application/problem+json"


def fast_worker_config(store_url: str, concurrency: int = 2) -> WorkerConfig:
    return WorkerConfig(
        store_url=store_url,
        concurrency=concurrency,
        processes_per_job=1,
        # Generous: on a loaded two-core machine starting a fit process can take seconds.
        policy=LeasePolicy(
            lease=timedelta(seconds=10),
            heartbeat=timedelta(seconds=0.5),
            backoff=timedelta(0),
        ),
        poll_seconds=0.1,
        shutdown_grace_seconds=5.0,
    )


@contextmanager
def running_worker(settings: Settings, concurrency: int = 2) -> Iterator[Supervisor]:
    """A real worker (claim loop, fit processes) on the test's database."""
    worker = Supervisor(
        settings.resolved_database_url, fast_worker_config(settings.resolved_store_url, concurrency)
    )
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(grace=0)


def rows(n: int = 90, seed: int = 0) -> list[list[Any]]:
    """A small, learnable binary table: two informative numbers and a noise column."""
    rng = np.random.default_rng(seed)
    x1, x2, noise = rng.normal(size=(3, n))
    label = np.where(x1 + 0.5 * x2 + 0.3 * rng.normal(size=n) > 0, "yes", "no")
    return [
        [float(a), float(b), float(c), str(y)]
        for a, b, c, y in zip(x1, x2, noise, label, strict=True)
    ]


async def add_dataset(client: httpx.AsyncClient, n: int = 90) -> str:
    response = await client.post(
        "/v1/datasets",
        json={"name": "small", "columns": ["x1", "x2", "noise", "label"], "rows": rows(n)},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def wait_for_search(
    client: httpx.AsyncClient, search_id: str, timeout: float = 60.0
) -> dict[str, Any]:
    """The search once it has ended; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        response = await client.get(f"/v1/searches/{search_id}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        if time.monotonic() > deadline:
            pytest.fail(f"search did not end in {timeout} s: {body}")
        await _sleep(0.2)


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)
