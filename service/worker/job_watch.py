"""One claimed job, seen from the worker: start its fit process, watch it, record how it ended.

A :class:`JobRun` is a thread of the worker. It starts the fit process
(:func:`service.worker.fit_process.fit_process_main`), then loops until the process ends:
it reads the process's messages (:mod:`service.worker.messages`), writes progress to the
job row (at most once a second), renews the lease every heartbeat, and polls
``cancel_requested``. On a cancel it sets the
process's stop event and kills the process if it has not stopped within ``STOP_GRACE``
seconds. When the worker shuts down past its grace period, the run kills its process and
queues the job again.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from multiprocessing.synchronize import Event

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from engine.process_setup import describe_exit
from service.batch import finish as batch_finish
from service.batch.outcome import BatchOutcome, Scored
from service.batch.process import batch_process_main
from service.db.session import transaction
from service.db.tables import BATCH_METHOD, JobStatus
from service.db.types import utc_now
from service.logs import bound, job_id_var
from service.models.artifacts import delete_objects
from service.store import DataStore, StoreUnavailable
from service.worker import queue, recovery
from service.worker.fit_process import JobSnapshot, StoreConfig, TrainFunction, fit_process_main
from service.worker.lease import LeasePolicy
from service.worker.messages import (
    Crashed,
    Errored,
    Failed,
    FitResult,
    Lost,
    Progress,
    Resources,
    RunEnd,
    ShutDown,
    Stopped,
    StoredOutcome,
    Succeeded,
)
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
    # The data store: fit processes write artifacts to it, the worker checks and names them.
    store: DataStore
    store_config: StoreConfig
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


@dataclass
class _Watch:
    """The clock of one watch, in ``time.monotonic()`` seconds, and the fit's stop event."""

    stop: Event
    heartbeat: float
    next_beat: float
    next_poll: float
    # The last lease renewal that reached the database: a fit outlives a database blip only
    # while its lease still holds.
    last_beat_ok: float
    # When the runtime limit runs out; None: no limit.
    out_of_time_at: float | None
    # When a fit asked to stop is killed if it has not stopped; None: not asked.
    kill_at: float | None = None
    # Whether it was asked because it ran out of time (then it fails) or for a cancel.
    timed_out: bool = False

    def ask_to_stop(self, now: float, *, timed_out: bool = False) -> None:
        self.stop.set()
        self.kill_at, self.timed_out = now + STOP_GRACE, timed_out


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
        receiver, stop = self._start_fit()
        try:
            # Starting a process can take a while on a busy machine; renew the lease at once.
            if self._touch(beat=True, progress=None) is None:
                logger.warning("job %s: taken back before its fit started", self.job.id)
                self._kill()
                return
            end = self._watch(receiver, stop)
        finally:
            receiver.close()
        self._record_while_held(end)

    def _start_fit(self) -> tuple[Connection, Event]:
        """Start the fit process; the end of its pipe to read, and the event that stops it."""
        ctx = self.context
        receiver, sender = ctx.mp_context.Pipe(duplex=False)
        stop = ctx.mp_context.Event()
        self.process = ctx.mp_context.Process(  # type: ignore[attr-defined]  # typeshed: BaseContext
            # A batch prediction's row is queued like a fit's; its process scores instead.
            target=batch_process_main if self.job.method == BATCH_METHOD else fit_process_main,
            args=(sender, stop, ctx.database_url, ctx.store_config, self.job, ctx.train),
            name=f"coppice-fit-{self.job.id[:8]}",
            # Not daemonic: the engine's own worker processes are children of this one.
            daemon=False,
        )
        self.process.start()
        sender.close()  # so the fit's end reads as EOF here
        logger.info("job %s: fitting in process %s", self.job.id, self.process.pid)
        return receiver, stop

    def _watch(self, receiver: Connection, stop: Event) -> RunEnd:
        """Follow the fit until it ends: its result, or why it ended without one.

        Each turn reads what the fit sent, then enforces the shutdown, the stop grace and the
        runtime limit, then (every ``TICK``, or when progress is due) checks in with the
        database: lease, progress, cancel.
        """
        now = time.monotonic()
        heartbeat = self.context.policy.heartbeat.total_seconds()
        limit = self._runtime_limit()
        watch = _Watch(
            stop=stop,
            heartbeat=heartbeat,
            next_beat=now + heartbeat,
            next_poll=now + TICK,
            last_beat_ok=now,
            out_of_time_at=None if limit is None else now + limit,
        )
        throttle = ProgressThrottle(PROGRESS_WRITE_INTERVAL)
        while True:
            result = self._next_result(receiver, throttle)
            if result is not None:
                return self._settle(result, watch)
            now = time.monotonic()
            ended = self._enforce_deadlines(now, watch)
            if ended is not None:
                return ended
            if now < watch.next_poll and not throttle.due(now):
                continue
            ended = self._check_in(now, watch, throttle)
            if ended is not None:
                return ended

    def _next_result(
        self, receiver: Connection, throttle: ProgressThrottle
    ) -> FitResult | Crashed | None:
        """Wait up to ``TICK`` for the fit: its result, ``Crashed``, or ``None`` (still going)."""
        process = self.process
        assert process is not None
        ready = wait([receiver, process.sentinel], timeout=TICK)
        if receiver in ready:
            try:
                message = receiver.recv()
            except EOFError:
                return Crashed()
            match message:
                case Progress(fraction, stage):
                    throttle.offer(fraction, stage, time.monotonic())
                    return None
                case Succeeded() | Scored() | Failed() | Stopped() | Errored():
                    return message
                case _:
                    return Errored(f"the fit process sent an unknown message: {message!r}")
        # A fit that sent its result and exited is read first: the pipe still holds the result.
        if process.sentinel in ready and not receiver.poll():
            return Crashed()
        return None

    def _enforce_deadlines(self, now: float, watch: _Watch) -> RunEnd | None:
        """End the run when the worker shuts down or a stopped fit outstays its grace."""
        if self.context.abort.is_set():
            self._kill()
            return ShutDown()
        if watch.kill_at is not None and now >= watch.kill_at:
            self._kill()
            return self._runtime_exceeded() if watch.timed_out else Stopped()
        out_of_time = watch.out_of_time_at is not None and now >= watch.out_of_time_at
        if out_of_time and watch.kill_at is None:
            limit = self._runtime_limit()
            logger.warning("job %s: ran past its %g s limit; stopping the fit", self.job.id, limit)
            watch.ask_to_stop(now, timed_out=True)
        return None

    def _check_in(self, now: float, watch: _Watch, throttle: ProgressThrottle) -> RunEnd | None:
        """Renew the lease when due, write due progress, and obey a cancel; ``Lost`` if not held."""
        beat = now >= watch.next_beat
        progress = throttle.take(now) if throttle.due(now) else None
        watch.next_poll = now + TICK
        try:
            held = self._touch(beat, progress)
        except SQLAlchemyError as error:
            # A database blip need not cost the fit, as long as the lease still holds.
            if now - watch.last_beat_ok > self.context.policy.lease.total_seconds():
                logger.error("job %s: lease lapsed while the database was away", self.job.id)
                self._kill()
                return Lost()
            logger.warning("job %s: could not reach the database (%s)", self.job.id, error)
            return None
        if beat:
            watch.next_beat, watch.last_beat_ok = now + watch.heartbeat, now
        if held is None:
            logger.warning("job %s: no longer held by this worker; stopping it", self.job.id)
            self._kill()
            return Lost()
        if held.cancel_requested and watch.kill_at is None:
            logger.info("job %s: cancel requested; stopping the fit", self.job.id)
            watch.ask_to_stop(now)
        return None

    def _settle(self, result: FitResult | Crashed, watch: _Watch) -> RunEnd:
        """The fit has ended: clean up after it and say what its result means."""
        assert self.process is not None
        self.process.join(STOP_GRACE)
        # Also when the fit has ended: one killed outright (the out-of-memory killer, say)
        # leaves its engine workers behind, blocked for ever on a pipe it can no longer close.
        self._kill()
        match result:
            case Stopped(resources) if watch.timed_out:
                return dataclasses.replace(self._runtime_exceeded(), resources=resources)
            case Stopped() if watch.kill_at is None:
                return Errored("training stopped although no cancel was requested")
        return result

    def _runtime_limit(self) -> float | None:
        """The tighter of the server's limit and the job's own, in seconds; None: no limit."""
        limits = [self.context.max_runtime_seconds, self.job.max_runtime_seconds]
        return min((limit for limit in limits if limit is not None), default=None)

    def _runtime_exceeded(self) -> Failed:
        # Deterministic enough to fail at once: a retry would take as long again.
        limit = self._runtime_limit()
        assert limit is not None  # only a run with a limit can exceed it
        whose = (
            "the job's limit (max_runtime_seconds)"
            if limit == self.job.max_runtime_seconds
            else "this server's limit (COPPICE_MAX_RUNTIME_SECONDS)"
        )
        return Failed(
            "runtime_exceeded",
            f"Training ran longer than {limit:g} seconds, {whose}. Use fewer estimators, "
            "shallower learners or fewer rows, or ask for a higher limit.",
        )

    def _touch(self, beat: bool, progress: tuple[float, str] | None) -> queue.Held | None:
        now = utc_now()
        with transaction(self.context.engine) as session:
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

    def _record_while_held(self, end: RunEnd) -> None:
        """Record how the run ended, trying again while the database is away, for up to a lease.

        A trained model exists only in this process until it is stored: given up, the job waits
        out its lease and trains again. Every write is guarded, so a write that did land before
        its connection broke, or a job taken back meanwhile, makes a retry a no-op.
        """
        give_up_at = time.monotonic() + self.context.policy.lease.total_seconds()
        while True:
            try:
                self._record(end)
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

    def _record(self, end: RunEnd) -> None:
        job_id, worker_id, engine = self.job.id, self.context.worker_id, self.context.engine
        now = utc_now()
        match end:
            case Lost():
                pass
            case ShutDown():
                with transaction(engine) as session:
                    recovery.requeue_for_shutdown(session, job_id, worker_id)
                logger.info("job %s: queued again because the worker is shutting down", job_id)
            case Succeeded(outcome):
                self._record_success(outcome, now, end.resources)
            case Scored(scored):
                self._record_scored(scored, now)
            case Stopped():
                with transaction(engine) as session:
                    if queue.finish(session, job_id, worker_id, JobStatus.CANCELLED, now=now):
                        queue.record_resources(session, job_id, end.resources)
                logger.info("job %s: cancelled", job_id)
            case Failed(code, message):
                with transaction(engine) as session:
                    if queue.finish(
                        session, job_id, worker_id, JobStatus.FAILED, now=now, error=(code, message)
                    ):
                        queue.record_resources(session, job_id, end.resources)
                logger.info("job %s: failed (%s)", job_id, code)
            case Errored(message):
                self._retry_or_fail(now, "training_error", message)
            case Crashed():
                exitcode = self.process.exitcode if self.process is not None else None
                reason = f"the training process {describe_exit(exitcode)}"
                self._retry_or_fail(now, "training_crashed", reason)

    def _record_success(
        self, outcome: StoredOutcome, now: datetime, resources: Resources | None = None
    ) -> None:
        job_id, worker_id = self.job.id, self.context.worker_id
        try:
            with transaction(self.context.engine) as session:
                model_id = queue.finish_succeeded(
                    session, self.context.store, self.job, worker_id, outcome, now=now
                )
                if model_id is not None:
                    queue.record_resources(session, job_id, resources)
        except queue.ArtifactMismatch as error:
            self._forget(outcome)
            self._retry_or_fail(now, "artifact_corrupt", str(error))
            return
        except StoreUnavailable as error:
            # The object may be fine; the next attempt writes a new one (gc sweeps this one).
            self._retry_or_fail(now, "store_unavailable", error.detail)
            return
        except OperationalError:
            raise  # the database is away, the model is fine: the caller tries again
        except SQLAlchemyError as error:
            # Nothing was written (one transaction); retried, the job may well store next time.
            logger.exception("job %s: the model could not be stored", job_id)
            self._forget(outcome)
            self._retry_or_fail(now, "result_not_stored", f"the model could not be stored: {error}")
            return
        if model_id is not None:
            logger.info("job %s: succeeded with model %s", job_id, model_id)
            return
        # Not held, or a cancel arrived while the fit was finishing: the cancel wins.
        self._forget(outcome)
        with transaction(self.context.engine) as session:
            queue.finish(session, job_id, worker_id, JobStatus.CANCELLED, now=now)

    def _record_scored(self, outcome: BatchOutcome, now: datetime) -> None:
        """Name a batch's output dataset and end its job, in one transaction (or neither)."""
        job_id, worker_id = self.job.id, self.context.worker_id
        try:
            with transaction(self.context.engine) as session:
                recorded = queue.finish_scored(
                    session, self.context.store, job_id, worker_id, outcome, now=now
                )
        except batch_finish.OutputMismatch as error:
            batch_finish.forget(self.context.store, outcome)
            self._retry_or_fail(now, "output_corrupt", str(error))
            return
        except StoreUnavailable as error:
            self._retry_or_fail(now, "store_unavailable", error.detail)
            return
        except OperationalError:
            raise  # the database is away, the parts are fine: the caller tries again
        except SQLAlchemyError as error:
            logger.exception("job %s: the scored dataset could not be recorded", job_id)
            batch_finish.forget(self.context.store, outcome)
            self._retry_or_fail(
                now, "result_not_stored", f"the output could not be stored: {error}"
            )
            return
        if recorded:
            logger.info("job %s: scored into dataset %s", job_id, outcome.dataset_id)
            return
        batch_finish.forget(self.context.store, outcome)
        with transaction(self.context.engine) as session:
            queue.finish(session, job_id, worker_id, JobStatus.CANCELLED, now=now)

    def _forget(self, outcome: StoredOutcome) -> None:
        """Delete an artifact no row will name (best effort: `coppice store gc` sweeps it)."""
        kept = outcome.out_of_fold
        paths = [outcome.artifact.path] + ([] if kept is None else [kept.stored.path])
        delete_objects(self.context.store, paths)

    def _retry_or_fail(self, now: datetime, code: str, reason: str) -> None:
        with transaction(self.context.engine) as session:
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
