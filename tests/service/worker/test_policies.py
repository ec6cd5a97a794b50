"""Small rules: retry back-off, the progress throttle, worker settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from service.config import Settings
from service.worker.claim_loop import WorkerConfig
from service.worker.lease import MAX_RETRY_DELAY, LeasePolicy
from service.worker.progress import ProgressThrottle

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_retry_delay_doubles_up_to_a_cap() -> None:
    policy = LeasePolicy(
        lease=timedelta(seconds=60), heartbeat=timedelta(seconds=10), backoff=timedelta(seconds=5)
    )
    delays = [policy.retry_at(NOW, attempts) - NOW for attempts in (1, 2, 3, 50)]
    assert delays == [
        timedelta(seconds=5),
        timedelta(seconds=10),
        timedelta(seconds=20),
        MAX_RETRY_DELAY,
    ]
    assert policy.expires_at(NOW) == NOW + timedelta(seconds=60)


def test_progress_throttle_passes_the_newest_report_at_most_once_per_interval() -> None:
    throttle = ProgressThrottle(1.0)
    assert throttle.offer(0.1, "tree 1/10", now=0.0)
    assert throttle.take(now=0.0) == (0.1, "tree 1/10")
    assert not throttle.offer(0.2, "tree 2/10", now=0.5)
    assert not throttle.offer(0.3, "tree 3/10", now=0.9)
    assert throttle.due(now=1.0)
    assert throttle.take(now=1.0) == (0.3, "tree 3/10")
    # The last report always goes through, and values are kept inside [0, 1].
    assert throttle.offer(1.5, "done", now=1.1)
    assert throttle.take(now=1.1) == (1.0, "done")
    assert not throttle.due(now=5.0)


def test_worker_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPPICE_WORKER_CONCURRENCY", "4")
    monkeypatch.setenv("COPPICE_PROCESSES_PER_JOB", "2")
    monkeypatch.setenv("COPPICE_JOB_LEASE_SECONDS", "30")
    monkeypatch.setenv("COPPICE_HEARTBEAT_SECONDS", "5")
    monkeypatch.setenv("COPPICE_EMBEDDED_WORKER", "false")
    settings = Settings()
    config = WorkerConfig.from_settings(settings)
    assert (config.concurrency, config.processes_per_job) == (4, 2)
    assert config.policy.lease == timedelta(seconds=30)
    assert config.policy.heartbeat == timedelta(seconds=5)
    assert settings.embedded_worker is False


def test_a_heartbeat_as_long_as_the_lease_is_refused() -> None:
    with pytest.raises(ValidationError, match="heartbeat_seconds must be shorter"):
        Settings(job_lease_seconds=10, heartbeat_seconds=10)
