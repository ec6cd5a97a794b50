"""Prometheus metrics: one registry per app, served at ``GET /metrics``.

What the API process sees itself — its requests, its model cache — is counted as it happens.
What the workers do is read from the database when Prometheus scrapes (:class:`JobsCollector`):
workers may run in other processes or on other hosts and the database is what they all share,
so every API replica reports the same, complete numbers, which survive restarts. Each scrape
costs four aggregate queries over the jobs table.

docs/operations.md lists every metric with its labels.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from sqlalchemy import Engine, case, extract, func, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from service.db.tables import JobRecord, JobStatus
from service.db.types import utc_now
from service.deps import Resources
from service.monitoring.gauges import MonitoringCollector
from service.training.cluster import DASK_STAGE_PREFIX

logger = logging.getLogger(__name__)

# Upper bounds of the training-time buckets, in seconds: a stump takes well under one, a large
# boosted ensemble hours.
TRAINING_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class HttpMetrics:
    """The request metrics the observability middleware records."""

    requests: Counter
    duration: Histogram

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        labels = {"method": method, "route": route, "status": str(status)}
        self.requests.labels(**labels).inc()
        self.duration.labels(**labels).observe(seconds)


def create_registry(app: FastAPI, version: str) -> tuple[CollectorRegistry, HttpMetrics]:
    """A registry of its own for ``app``, so apps in one process (tests) never collide."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Info("coppice_build", "The running Coppice release.", registry=registry).info(
        {"version": version}
    )
    http = HttpMetrics(
        requests=Counter(
            "coppice_http_requests",
            "HTTP requests answered, by method, route template and status code.",
            ["method", "route", "status"],
            registry=registry,
        ),
        duration=Histogram(
            "coppice_http_request_duration_seconds",
            "Time from receiving a request to sending its response's last byte.",
            ["method", "route", "status"],
            registry=registry,
        ),
    )

    def resources() -> Resources | None:
        # Set by the lifespan; a scrape before start-up or after shutdown has nothing to read.
        return getattr(app.state, "resources", None)

    registry.register(ModelCacheCollector(resources))
    registry.register(JobsCollector(resources))
    registry.register(MonitoringCollector(lambda: getattr(resources(), "prediction_log", None)))
    return registry, http


def metrics_endpoint(registry: CollectorRegistry) -> Callable[[Request], Response]:
    # A plain `def`: FastAPI runs it in a thread, so the scrape's queries never block the loop.
    def metrics(request: Request) -> Response:
        """Prometheus metrics, in the text format or OpenMetrics (by ``Accept``)."""
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(registry), media_type=content_type)

    return metrics


class ModelCacheCollector(Collector):
    """Hits, misses and size of the app's model cache, read when scraped."""

    def __init__(self, resources: Callable[[], Resources | None]) -> None:
        self._resources = resources

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        return iter(self._families(self._resources()))

    @staticmethod
    def _families(resources: Resources | None = None) -> list[Metric]:
        hits = CounterMetricFamily(
            "coppice_model_cache_hits", "Model lookups served from the model cache."
        )
        misses = CounterMetricFamily(
            "coppice_model_cache_misses", "Model lookups that had to load the model's artifact."
        )
        size = GaugeMetricFamily(
            "coppice_model_cache_bytes", "Total artifact size of the models in the cache."
        )
        count = GaugeMetricFamily("coppice_model_cache_models", "Models in the model cache.")
        if resources is not None:
            cache = resources.model_cache
            hits.add_metric([], cache.hits)
            misses.add_metric([], cache.misses)
            size.add_metric([], cache.total_bytes)
            count.add_metric([], len(cache))
        return [hits, misses, size, count]


def _seconds_between(engine: Engine) -> ColumnElement[float]:
    """``finished_at - started_at`` in seconds, in the database's own dialect."""
    if engine.dialect.name == "sqlite":
        # SQLite keeps times as text; julianday() turns them into fractional days.
        days = func.julianday(JobRecord.finished_at) - func.julianday(JobRecord.started_at)
        return days * 86400.0
    return cast(
        "ColumnElement[float]", extract("epoch", JobRecord.finished_at - JobRecord.started_at)
    )


class JobsCollector(Collector):
    """Jobs by status, the queue, and how long finished trainings took, from the database."""

    def __init__(self, resources: Callable[[], Resources | None]) -> None:
        self._resources = resources

    def describe(self) -> list[Metric]:
        return [*self._job_families(), *self._training_families()]

    def collect(self) -> Iterator[Metric]:
        resources = self._resources()
        if resources is None:
            return
        up = GaugeMetricFamily(
            "coppice_database_up", "Whether the last scrape could read the database (1) or not."
        )
        try:
            families = [
                *self._job_families(resources.db_engine),
                *self._training_families(resources.db_engine),
            ]
        except SQLAlchemyError:
            # No URL in the message: it may carry a password.
            logger.warning("metrics: could not read jobs from the database", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    @staticmethod
    def _job_families(engine: Engine | None = None) -> list[Metric]:
        jobs = GaugeMetricFamily("coppice_jobs", "Jobs in each status.", labels=["status"])
        depth = GaugeMetricFamily(
            "coppice_job_queue_depth",
            "Queued jobs a worker could claim now (not cancelled, past any retry back-off).",
        )
        oldest = GaugeMetricFamily(
            "coppice_job_queue_oldest_age_seconds",
            "Age of the oldest claimable queued job; 0 when there is none.",
        )
        backends = GaugeMetricFamily(
            "coppice_jobs_running_by_backend",
            "Running jobs by where their fit runs: 'dask' (COPPICE_DASK_SCHEDULER's cluster, "
            "as the job's stage says) or 'local' (the worker's own processes).",
            labels=["backend"],
        )
        if engine is None:
            return [jobs, depth, oldest, backends]
        now = utc_now()
        claimable = (
            JobRecord.status == JobStatus.QUEUED,
            JobRecord.cancel_requested.is_(False),
            or_(JobRecord.run_after.is_(None), JobRecord.run_after <= now),
        )
        with engine.connect() as connection:
            counts = dict(
                connection.execute(
                    select(JobRecord.status, func.count()).group_by(JobRecord.status)
                ).all()
            )
            queued, first = connection.execute(
                select(func.count(), func.min(JobRecord.created_at)).where(*claimable)
            ).one()
            on_dask = connection.execute(
                select(func.count()).where(
                    JobRecord.status == JobStatus.RUNNING,
                    JobRecord.stage.startswith(DASK_STAGE_PREFIX, autoescape=True),
                )
            ).scalar_one()
        for status in JobStatus:
            jobs.add_metric([status.value], counts.get(status.value, 0))
        depth.add_metric([], queued)
        oldest.add_metric([], _age(first, now))
        backends.add_metric(["dask"], on_dask)
        backends.add_metric(["local"], counts.get(JobStatus.RUNNING.value, 0) - on_dask)
        return [jobs, depth, oldest, backends]

    @staticmethod
    def _training_families(engine: Engine | None = None) -> list[Metric]:
        help_text = (
            "Wall time of finished trainings, from the start of their last attempt to their end, "
            "by method and final status."
        )
        if engine is None:
            return [HistogramMetricFamily("coppice_training_seconds", help_text)]
        seconds = _seconds_between(engine)
        buckets = [
            func.sum(case((seconds <= bound, 1), else_=0)).label(f"le_{i}")
            for i, bound in enumerate(TRAINING_BUCKETS)
        ]
        query = (
            select(
                JobRecord.method,
                JobRecord.status,
                func.count(),
                func.coalesce(func.sum(seconds), 0.0),
                *buckets,
            )
            .where(
                JobRecord.status.in_([status.value for status in FINISHED]),
                JobRecord.started_at.is_not(None),
                JobRecord.finished_at.is_not(None),
            )
            .group_by(JobRecord.method, JobRecord.status)
        )
        with engine.connect() as connection:
            rows = connection.execute(query).all()
        family = HistogramMetricFamily(
            "coppice_training_seconds", help_text, labels=["method", "status"]
        )
        for method, status, count, total, *cumulative in rows:
            bucket_counts = [
                (_bound_label(bound), int(n or 0))
                for bound, n in zip(TRAINING_BUCKETS, cumulative, strict=True)
            ]
            family.add_metric(
                [method, status], [*bucket_counts, ("+Inf", int(count))], float(total)
            )
        return [family]


def _bound_label(bound: float) -> str:
    return repr(float(bound))


def _age(first: datetime | str | None, now: datetime) -> float:
    if first is None:
        return 0.0
    if isinstance(first, str):  # SQLite hands aggregates back untyped
        first = datetime.fromisoformat(first)
    if first.tzinfo is None:
        first = first.replace(tzinfo=now.tzinfo)
    return max(0.0, (now - first).total_seconds())
