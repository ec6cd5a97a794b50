"""One claimed job, seen from the worker: start its fit process, watch it, record how it ended.

A :class:`JobRun` is a thread of the worker. It starts the fit process
(:func:`service.worker.execution.fit_process_main`), then loops until the process ends:
it reads the process's messages, writes progress to the job row (at most once a second),
renews the lease every heartbeat, and polls ``cancel_requested``. On a cancel it sets the
process's stop event and kills the process if it has not stopped within ``STOP_GRACE``
seconds. When the worker shuts down past its grace period, the run kills its process and
queues the job again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from service.db.tables import JobStatus
from service.db.types import utc_now
from service.logs import bound, job_id_var
from service.worker import queue, recovery
from service.worker.execution import JobSnapshot, TrainFunction, fit_process_main
from service.worker.lease import LeasePolicy, describe_exit
from service.worker.progress import ProgressThrottle

logger = logging.getLogger(__name__)

# Seconds a fit may take to honour a stop request before it is killed.
STOP_GRACE = 5.0
# Longest wait between two looks at the database while a fit runs; bounds cancel latency.
TICK = 0.5
# The job row gets at most one progress write per this many seconds.
PROGRESS_WRITE_INTERVAL = 1.0
# Seconds between two attempts to record how a run ended while the database is away.
RECORD_RETRY = 0.5


@dataclass(frozen=True, slots=True)
class RunContext:
    """What every run of one worker shares."""

    engine: Engine
    database_url: str
    worker_id: str
    policy: LeasePolicy
    train: TrainFunction
    mp_context: BaseContext
    # Set when the worker's shutdown grace has run out: kill the fit, queue the job again.
    abort: threading.Event
    # Set when a run ends, so the claim loop fills the free slot at once.
    wake: threading.Event
    # Longest a fit may run (COPPICE_MAX_RUNTIME_SECONDS); past it the job fails. None: no limit.
    max_runtime_seconds: float | None = None


class JobRun(threading.Thread):
    """Runs one claimed job to its end; the thread finishes when the job is no longer held."""

    def __init__(self, context: RunContext, job: JobSnapshot) -> None:
        super().__init__(name=f"coppice-job-{job.id[:8]}", daemon=True)
        self.context = context
        self.job = job
        self.process: BaseProcess | None = None

    def run(self) -> None:
        # Every log line of this thread carries the job's id (see service.logs).
        with bound(job_id_var, self.job.id):
            try:
                self._run()
            except Exception:
                logger.exception("job %s: the worker failed while running it", self.job.id)
                self._kill()
                # Leave the job to its lease: the reaper takes it back when the lease lapses,
                # by which time the database (the likely culprit) may be back.
            finally:
                self.context.wake.set()

    # --- the watch loop -------------------------------------------------------------------

    def _run(self) -> None:
        ctx = self.context
        receiver, sender = ctx.mp_context.Pipe(duplex=False)
        stop = ctx.mp_context.Event()
        self.process = ctx.mp_context.Process(  # type: ignore[attr-defined]  # typeshed: BaseContext
            target=fit_process_main,
            args=(sender, stop, ctx.database_url, self.job, ctx.train),
            name=f"coppice-fit-{self.job.id[:8]}",
            # Not daemonic: the engine's own worker processes are children of this one.
            daemon=False,
        )
        self.process.start()
        sender.close()  # so the fit's end reads as EOF here
        logger.info("job %s: fitting in process %s", self.job.id, self.process.pid)
        try:
            # Starting a process can take a while on a busy machine; renew the lease at once.
            if self._touch(beat=True, progress=None) is None:
                logger.warning("job %s: taken back before its fit started", self.job.id)
                self._kill()
                return
            verdict = self._watch(receiver, stop)
        finally:
            receiver.close()
        self._record_while_held(verdict)

    def _watch(self, receiver: Connection, stop: Any) -> tuple[Any, ...]:
        """Follow the fit until it ends; returns its last message or why it ended without one."""
        process = self.process
        assert process is not None
        heartbeat = self.context.policy.heartbeat.total_seconds()
        lease = self.context.policy.lease.total_seconds()
        last_beat_ok = time.monotonic()
        throttle = ProgressThrottle(PROGRESS_WRITE_INTERVAL)
        next_beat = time.monotonic() + heartbeat
        next_poll = time.monotonic() + TICK
        kill_at: float | None = None
        limit = self._runtime_limit()
        out_of_time_at = None if limit is None else time.monotonic() + limit
        timed_out = False
        final: tuple[Any, ...] | None = None
        while final is None:
            ready = wait([receiver, process.sentinel], timeout=TICK)
            if receiver in ready:
                try:
                    message = receiver.recv()
                except EOFError:
                    final = ("crashed",)
                    break
                if message[0] != "progress":
                    final = message
                    break
                throttle.offer(message[1], message[2], time.monotonic())
            elif process.sentinel in ready and not receiver.poll():
                final = ("crashed",)
                break
            now = time.monotonic()
            if self.context.abort.is_set():
                self._kill()
                return ("shutdown",)
            if kill_at is not None and now >= kill_at:
                self._kill()
                return self._runtime_exceeded() if timed_out else ("stopped",)
            if out_of_time_at is not None and now >= out_of_time_at and kill_at is None:
                logger.warning(
                    "job %s: ran past its %g s limit; stopping the fit", self.job.id, limit
                )
                stop.set()
                kill_at, timed_out = now + STOP_GRACE, True
            if now < next_poll and not throttle.due(now):
                continue
            beat = now >= next_beat
            progress = throttle.take(now) if throttle.due(now) else None
            next_poll = now + TICK
            try:
                held = self._touch(beat, progress)
            except SQLAlchemyError as error:
                # A database blip need not cost the fit, as long as the lease still holds.
                if now - last_beat_ok > lease:
                    logger.error("job %s: lease lapsed while the database was away", self.job.id)
                    self._kill()
                    return ("lost",)
                logger.warning("job %s: could not reach the database (%s)", self.job.id, error)
                continue
            if beat:
                next_beat, last_beat_ok = now + heartbeat, now
            if held is None:
                logger.warning("job %s: no longer held by this worker; stopping it", self.job.id)
                self._kill()
                return ("lost",)
            if held.cancel_requested and kill_at is None:
                logger.info("job %s: cancel requested; stopping the fit", self.job.id)
                stop.set()
                kill_at = now + STOP_GRACE
        process.join(STOP_GRACE)
        # Also when the fit has ended: one killed outright (the out-of-memory killer, say)
        # leaves its engine workers behind, blocked for ever on a pipe it can no longer close.
        self._kill()
        if final[0] == "stopped" and timed_out:
            return self._runtime_exceeded()
        if final[0] == "stopped" and kill_at is None:
            return ("error", "training stopped although no cancel was requested")
        return final

    def _runtime_limit(self) -> float | None:
        """The tighter of the server's limit and the job's own, in seconds; None: no limit."""
        limits = [self.context.max_runtime_seconds, self.job.max_runtime_seconds]
        return min((limit for limit in limits if limit is not None), default=None)

    def _runtime_exceeded(self) -> tuple[Any, ...]:
        # Deterministic enough to fail at once: a retry would take as long again.
        limit = self._runtime_limit()
        assert limit is not None  # only a run with a limit can exceed it
        whose = (
            "the job's limit (max_runtime_seconds)"
            if limit == self.job.max_runtime_seconds
            else "this server's limit (COPPICE_MAX_RUNTIME_SECONDS)"
        )
        return (
            "failed",
            "runtime_exceeded",
            f"Training ran longer than {limit:g} seconds, {whose}. Use fewer estimators, "
            "shallower learners or fewer rows, or ask for a higher limit.",
        )

    def _touch(self, beat: bool, progress: tuple[float, str] | None) -> queue.Held | None:
        now = utc_now()
        with queue.transaction(self.context.engine) as session:
            return queue.touch(
                session,
                self.job.id,
                self.context.worker_id,
                now=now,
                lease_expires_at=self.context.policy.expires_at(now) if beat else None,
                progress=progress,
            )

    def _kill(self) -> None:
        """Kill the fit, if it still runs, and every process left in its process group."""
        process = self.process
        if process is None or process.pid is None:
            return
        # The fit leads its own group (see fit_process_main); its workers outlive it otherwise.
        # The kernel does not reuse a pid while a live process's group bears it, so the group
        # is still the fit's even after the fit itself has exited.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if process.exitcode is None:
            process.kill()
        process.join(STOP_GRACE)

    # --- recording the end ----------------------------------------------------------------

    def _record_while_held(self, verdict: tuple[Any, ...]) -> None:
        """Record how the run ended, trying again while the database is away, for up to a lease.

        A trained model exists only in this process until it is stored: given up, the job waits
        out its lease and trains again. Every write is guarded, so a write that did land before
        its connection broke, or a job taken back meanwhile, makes a retry a no-op.
        """
        give_up_at = time.monotonic() + self.context.policy.lease.total_seconds()
        while True:
            try:
                self._record(verdict)
                return
            except OperationalError as error:
                if time.monotonic() >= give_up_at or self.context.abort.is_set():
                    raise
                logger.warning(
                    "job %s: could not record its end (%s); retrying",
                    self.job.id,
                    type(error.orig).__name__ if error.orig else error,
                )
                time.sleep(RECORD_RETRY)

    def _record(self, verdict: tuple[Any, ...]) -> None:
        kind = verdict[0]
        job_id, worker_id, engine = self.job.id, self.context.worker_id, self.context.engine
        now = utc_now()
        if kind == "lost":
            return
        if kind == "shutdown":
            with queue.transaction(engine) as session:
                recovery.requeue_for_shutdown(session, job_id, worker_id)
            logger.info("job %s: queued again because the worker is shutting down", job_id)
            return
        if kind == "succeeded":
            self._record_success(verdict[1], now)
            return
        if kind == "stopped":
            with queue.transaction(engine) as session:
                queue.finish(session, job_id, worker_id, JobStatus.CANCELLED, now=now)
            logger.info("job %s: cancelled", job_id)
            return
        if kind == "failed":
            with queue.transaction(engine) as session:
                queue.finish(
                    session,
                    job_id,
                    worker_id,
                    JobStatus.FAILED,
                    now=now,
                    error=(verdict[1], verdict[2]),
                )
            logger.info("job %s: failed (%s)", job_id, verdict[1])
            return
        if kind == "error":
            self._retry_or_fail(now, "training_error", str(verdict[1]))
            return
        exitcode = self.process.exitcode if self.process is not None else None
        self._retry_or_fail(
            now, "training_crashed", f"the training process was {describe_exit(exitcode)}"
        )

    def _record_success(self, outcome: Any, now: datetime) -> None:
        job_id, worker_id = self.job.id, self.context.worker_id
        try:
            with queue.transaction(self.context.engine) as session:
                model_id = queue.finish_succeeded(session, self.job, worker_id, outcome, now=now)
        except queue.ArtifactMismatch as error:
            self._retry_or_fail(now, "artifact_corrupt", str(error))
            return
        except OperationalError:
            raise  # the database is away, the model is fine: the caller tries again
        except SQLAlchemyError as error:
            # Nothing was written (one transaction); retried, the job may well store next time.
            logger.exception("job %s: the model could not be stored", job_id)
            self._retry_or_fail(now, "result_not_stored", f"the model could not be stored: {error}")
            return
        if model_id is not None:
            logger.info("job %s: succeeded with model %s", job_id, model_id)
            return
        # Not held, or a cancel arrived while the fit was finishing: the cancel wins.
        with queue.transaction(self.context.engine) as session:
            queue.finish(session, job_id, worker_id, JobStatus.CANCELLED, now=now)

    def _retry_or_fail(self, now: datetime, code: str, reason: str) -> None:
        with queue.transaction(self.context.engine) as session:
            status = recovery.retry_or_fail(
                session,
                self.job.id,
                self.context.worker_id,
                now=now,
                policy=self.context.policy,
                code=code,
                reason=reason,
            )
        logger.warning("job %s: %s; now %s", self.job.id, reason, status)
