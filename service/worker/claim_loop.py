"""The worker: a claim loop that keeps up to N jobs running, takes back dead workers' jobs,
and shuts down gracefully.

One :class:`Supervisor` is one worker (one ``lease_owner``). Its loop thread, every
``poll_seconds`` or as soon as a job ends: takes back running jobs whose lease expired
(:func:`recovery.reap_expired`; every worker does this, so recovery needs no special
process), then claims queued jobs until ``concurrency`` are running, each watched by a
:class:`~service.worker.job_watch.JobRun` thread with its own fit process. A search's last
step (stacking) runs on a thread of its own beside the loop. ``coppice worker`` runs one
worker in the foreground (:func:`run_worker`); ``coppice serve`` runs one beside the API,
started and stopped by the app's lifespan.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import Any

from sqlalchemy import Engine

from engine.process_setup import process_context
from service.config import Settings
from service.db.session import create_db_engine, transaction
from service.db.types import utc_now
from service.searches.driver import advance_searches
from service.worker import queue, recovery
from service.worker.fit_process import (
    JobSnapshot,
    StoreConfig,
    TrainFunction,
    default_train,
    warm_up_process,
)
from service.worker.job_watch import JobRun, RunContext
from service.worker.lease import LeasePolicy

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """The worker's share of :class:`~service.config.Settings`."""

    concurrency: int
    processes_per_job: int
    policy: LeasePolicy
    poll_seconds: float
    shutdown_grace_seconds: float
    max_runtime_seconds: float | None = None
    dask_scheduler: str | None = None
    dask_connect_timeout_seconds: float = 10.0
    # The data store the fits write artifacts to (COPPICE_STORE_URL, resolved); required.
    store_url: str | None = None
    store_options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerConfig:
        return cls(
            concurrency=settings.worker_concurrency,
            processes_per_job=settings.processes_per_job,
            policy=LeasePolicy(
                lease=timedelta(seconds=settings.job_lease_seconds),
                heartbeat=timedelta(seconds=settings.heartbeat_seconds),
                backoff=timedelta(seconds=settings.retry_backoff_seconds),
            ),
            poll_seconds=settings.poll_seconds,
            shutdown_grace_seconds=settings.shutdown_grace_seconds,
            max_runtime_seconds=settings.max_runtime_seconds,
            dask_scheduler=settings.dask_scheduler,
            dask_connect_timeout_seconds=settings.dask_connect_timeout_seconds,
            store_url=settings.resolved_store_url,
            store_options=settings.store_options,
        )

    @property
    def store(self) -> StoreConfig:
        if self.store_url is None:
            raise ValueError("a worker needs a data store: set WorkerConfig.store_url")
        return StoreConfig(self.store_url, dict(self.store_options))


def default_worker_id() -> str:
    """``host:pid:random``: unique per worker, and says where to look when one misbehaves."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


# A fork server forks each fit from a clean single-threaded process with the training stack
# already imported and the engine's compiled kernels loaded.
FIT_PRELOAD = ("service.worker.fit_process", "service.batch.process", "engine._preload")


class Supervisor:
    """One worker: claims jobs and runs up to ``config.concurrency`` of them at once.

    ``train`` is the training function fit processes call (a module-level function; see
    :data:`~service.worker.fit_process.TrainFunction`).
    """

    def __init__(
        self,
        database_url: str,
        config: WorkerConfig,
        *,
        train: TrainFunction = default_train,
        worker_id: str | None = None,
    ) -> None:
        self.config = config
        self.worker_id = worker_id or default_worker_id()
        self._engine: Engine = create_db_engine(database_url)
        self.store = config.store.open()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._context = RunContext(
            engine=self._engine,
            database_url=database_url,
            store=self.store,
            store_config=config.store,
            worker_id=self.worker_id,
            policy=config.policy,
            train=train,
            # Never a plain fork: the worker runs threads (this loop, one per running job).
            mp_context=process_context(FIT_PRELOAD, allow_fork=False),
            abort=threading.Event(),
            wake=self._wake,
            max_runtime_seconds=config.max_runtime_seconds,
        )
        self._runs: list[JobRun] = []
        self._thread: threading.Thread | None = None
        # A search's last step (stacking, ranking, registering) runs here, so the loop goes
        # on claiming and reaping meanwhile; one at a time, as each holds a search's lease.
        self._search_steps = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coppice-search")

    @property
    def running_jobs(self) -> list[str]:
        """Ids of the jobs this worker is running now."""
        return [run.job.id for run in self._runs if run.is_alive()]

    def start(self) -> None:
        """Start the claim loop in a background thread and return."""
        if self._thread is not None:
            raise RuntimeError("this worker has already been started")
        self._thread = threading.Thread(target=self._loop, name="coppice-worker", daemon=True)
        self._thread.start()
        logger.info(
            "worker %s started: %d concurrent job(s), %d process(es) each",
            self.worker_id,
            self.config.concurrency,
            self.config.processes_per_job,
        )

    def stop(self, grace: float | None = None) -> None:
        """Stop claiming; give running fits ``grace`` seconds, then kill them and requeue.

        ``grace`` defaults to ``config.shutdown_grace_seconds``. Blocks until every job this
        worker held is finished or queued again.
        """
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        # Search steps already claimed finish (seconds each): left undone, each would wait out
        # its lease (STACKING_LEASE) before another worker took it over.
        self._search_steps.shutdown(wait=True)
        grace = self.config.shutdown_grace_seconds if grace is None else grace
        deadline = time.monotonic() + grace
        for run in self._runs:
            run.join(max(0.0, deadline - time.monotonic()))
        if any(run.is_alive() for run in self._runs):
            logger.info("worker %s: grace period over; requeueing unfinished jobs", self.worker_id)
            self.abort()
        for run in self._runs:
            run.join()
        self._engine.dispose()
        logger.info("worker %s stopped", self.worker_id)

    def wake(self) -> None:
        """Look for queued jobs now rather than at the next poll (the API calls this once a
        job it queued is committed, so an embedded worker starts it without waiting)."""
        self._wake.set()

    def abort(self) -> None:
        """Kill every running fit now and queue its job again (the end of a shutdown)."""
        self._stopping.set()
        self._context.abort.set()
        self._wake.set()

    # --- the loop -------------------------------------------------------------------------

    def _loop(self) -> None:
        self._warm_up()
        while not self._stopping.is_set():
            try:
                self._reap()
                # Searches have no process of their own: each worker moves them on (halving's
                # next rung, the deadline, the stacked ensemble) before it claims.
                advance_searches(self._engine, self.store, self._search_steps.submit)
                self._fill_slots()
            except Exception:
                # Most likely the database is away; leases protect the jobs meanwhile.
                logger.exception("worker %s: claim loop error; retrying", self.worker_id)
            self._wake.wait(self.config.poll_seconds)
            self._wake.clear()

    def _warm_up(self) -> None:
        """Start one empty process before the first claim.

        The fork server imports the training stack when it starts, which takes seconds on a
        busy machine; spent inside the first job's lease, that time could let the lease lapse.
        """
        try:
            process = self._context.mp_context.Process(  # type: ignore[attr-defined]
                target=warm_up_process, name="coppice-warm-up"
            )
            process.start()
            process.join()
        except Exception:
            logger.exception("worker %s: could not start a process", self.worker_id)

    def _reap(self) -> None:
        with transaction(self._engine) as session:
            reaped = recovery.reap_expired(session, now=utc_now(), policy=self.config.policy)
        with transaction(self._engine) as session:
            recovery.cancel_requested_queued(session, now=utc_now())
        for job_id, status in reaped:
            logger.warning(
                "job %s: lease expired; now %s", job_id, status.value, extra={"job_id": job_id}
            )

    def _fill_slots(self) -> None:
        self._runs = [run for run in self._runs if run.is_alive()]
        while len(self._runs) < self.config.concurrency and not self._stopping.is_set():
            with transaction(self._engine) as session:
                job = queue.claim(
                    session, worker_id=self.worker_id, now=utc_now(), policy=self.config.policy
                )
                if job is None:
                    return
                snapshot = JobSnapshot.of(
                    job,
                    n_jobs=self.config.processes_per_job,
                    dask_scheduler=self.config.dask_scheduler,
                    dask_connect_timeout=self.config.dask_connect_timeout_seconds,
                )
            logger.info(
                "job %s: claimed (attempt %d)",
                snapshot.id,
                snapshot.attempts,
                extra={"job_id": snapshot.id},
            )
            run = JobRun(self._context, snapshot)
            self._runs.append(run)
            run.start()


def run_worker(settings: Settings, *, train: TrainFunction = default_train) -> int:
    """Run one worker in the foreground until SIGTERM or SIGINT; the ``coppice worker`` command.

    The first signal stops claiming and lets running fits finish within
    ``shutdown_grace_seconds``; a second one requeues them at once.
    """
    supervisor = Supervisor(
        settings.resolved_database_url, WorkerConfig.from_settings(settings), train=train
    )
    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stop_requested.is_set():
            logger.info("second %s: requeueing running jobs now", signal.Signals(signum).name)
            supervisor.abort()
            return
        logger.info("%s: finishing running jobs, then stopping", signal.Signals(signum).name)
        stop_requested.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    supervisor.start()
    # A timed wait keeps the main thread responsive to signals.
    while not stop_requested.wait(1.0):
        pass
    supervisor.stop()
    return 0
