"""GET /metrics: request metrics by route template, jobs and training times from the database,
the model cache, all in a registry of the app's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from service.app import create_app
from service.config import Settings
from service.db.tables import JobRecord, JobStatus
from service.deps import Resources
from service.models.cache import LoadedModel

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def add_job(engine: Any, status: JobStatus, *, seconds: float | None = None, **fields: Any) -> None:
    now = datetime.now(UTC)
    record = JobRecord(
        method=fields.pop("method", "random_forest"),
        task="classification",
        target="label",
        features=["x"],
        params={},
        validation={},
        status=status,
        **fields,
    )
    if seconds is not None:
        record.started_at = now - timedelta(seconds=seconds)
        record.finished_at = now
    with Session(engine) as session, session.begin():
        session.add(record)


async def test_requests_are_counted_by_route_template(client: httpx.AsyncClient) -> None:
    await client.get("/v1/models/abc")
    await client.get("/v1/models/def")
    await client.get("/v1/nowhere/42")

    samples = await scrape(client)

    labels = {"method": "GET", "route": "/v1/models/{model_id}", "status": "404"}
    assert value(samples, "coppice_http_requests_total", **labels) == 2
    assert value(samples, "coppice_http_request_duration_seconds_count", **labels) == 2
    unmatched = {"method": "GET", "route": "<unmatched>", "status": "404"}
    assert value(samples, "coppice_http_requests_total", **unmatched) == 1
    routes = {dict(labels)["route"] for _, labels in samples if dict(labels).get("route")}
    assert not any("abc" in route or "42" in route for route in routes)


async def test_jobs_queue_and_training_times_come_from_the_database(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    engine = app.state.resources.db_engine
    future = datetime.now(UTC) + timedelta(hours=1)
    add_job(engine, JobStatus.QUEUED, created_at=datetime.now(UTC) - timedelta(seconds=120))
    add_job(engine, JobStatus.QUEUED)
    add_job(engine, JobStatus.QUEUED, cancel_requested=True)  # about to be cancelled
    add_job(engine, JobStatus.QUEUED, run_after=future)  # waiting out a retry back-off
    add_job(engine, JobStatus.RUNNING, started_at=datetime.now(UTC))
    add_job(engine, JobStatus.SUCCEEDED, seconds=3)
    add_job(engine, JobStatus.SUCCEEDED, seconds=40)
    add_job(engine, JobStatus.FAILED, seconds=0.5, method="adaboost")
    add_job(engine, JobStatus.CANCELLED)  # cancelled while queued: never started

    samples = await scrape(client)

    assert value(samples, "coppice_database_up") == 1
    counts = {status: value(samples, "coppice_jobs", status=status) for status in JobStatus}
    assert counts == {"queued": 4, "running": 1, "succeeded": 2, "failed": 1, "cancelled": 1}
    assert value(samples, "coppice_job_queue_depth") == 2
    oldest = value(samples, "coppice_job_queue_oldest_age_seconds")
    assert oldest is not None and 119 <= oldest < 180

    forest = {"method": "random_forest", "status": "succeeded"}
    assert value(samples, "coppice_training_seconds_count", **forest) == 2
    total = value(samples, "coppice_training_seconds_sum", **forest)
    assert total == pytest.approx(43, abs=0.1)
    assert value(samples, "coppice_training_seconds_bucket", le="1.0", **forest) == 0
    assert value(samples, "coppice_training_seconds_bucket", le="5.0", **forest) == 1
    assert value(samples, "coppice_training_seconds_bucket", le="60.0", **forest) == 2
    assert value(samples, "coppice_training_seconds_bucket", le="+Inf", **forest) == 2
    failed = {"method": "adaboost", "status": "failed"}
    assert value(samples, "coppice_training_seconds_bucket", le="1.0", **failed) == 1
    assert value(samples, "coppice_training_seconds_count", status="cancelled") is None


@pytest.mark.postgres
async def test_database_metrics_on_postgres(postgres_settings: Settings) -> None:
    app = create_app(postgres_settings)
    async with app.router.lifespan_context(app):
        engine = app.state.resources.db_engine
        add_job(engine, JobStatus.QUEUED)
        add_job(engine, JobStatus.SUCCEEDED, seconds=12.5)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            samples = await scrape(client)

    assert value(samples, "coppice_job_queue_depth") == 1
    forest = {"method": "random_forest", "status": "succeeded"}
    assert value(samples, "coppice_training_seconds_sum", **forest) == pytest.approx(12.5)
    assert value(samples, "coppice_training_seconds_bucket", le="15.0", **forest) == 1
    assert value(samples, "coppice_training_seconds_bucket", le="5.0", **forest) == 0


async def test_an_unreachable_database_does_not_fail_the_scrape(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    resources: Resources = app.state.resources
    app.state.resources = Resources(
        settings=resources.settings,
        db_engine=create_engine("sqlite:////nonexistent-dir/coppice.db"),
    )

    samples = await scrape(client)

    assert value(samples, "coppice_database_up") == 0
    assert value(samples, "coppice_jobs", status="queued") is None
    assert value(samples, "coppice_model_cache_hits_total") == 0


async def test_model_cache_hits_and_misses(app: FastAPI, client: httpx.AsyncClient) -> None:
    cache = app.state.resources.model_cache
    model = LoadedModel(
        id="m",
        method="decision_tree",
        task="classification",
        target="y",
        estimator=None,
        features=[],
        encoding={},
        classes=None,
        size_bytes=10,
    )
    cache.get("m")
    cache.put(model)
    cache.get("m")
    cache.get("m")

    samples = await scrape(client)

    assert value(samples, "coppice_model_cache_hits_total") == 2
    assert value(samples, "coppice_model_cache_misses_total") == 1
    assert value(samples, "coppice_model_cache_models") == 1
    assert value(samples, "coppice_model_cache_bytes") == 10


@pytest.fixture
async def second_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http


async def test_each_app_has_its_own_registry(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient
) -> None:
    for _ in range(3):
        await client.get("/v1/methods")

    labels = {"method": "GET", "route": "/v1/methods", "status": "200"}
    assert value(await scrape(client), "coppice_http_requests_total", **labels) == 3
    assert value(await scrape(second_client), "coppice_http_requests_total", **labels) is None


async def test_process_and_build_metrics(client: httpx.AsyncClient) -> None:
    samples = await scrape(client)

    assert any(name == "coppice_build_info" for name, _ in samples)
    assert any(name.startswith("process_") for name, _ in samples)


async def test_openmetrics_on_request(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )

    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.rstrip().endswith("# EOF")
