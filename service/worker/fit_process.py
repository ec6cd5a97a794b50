"""The fit process: one job's training, isolated so a crash or a kill takes only that fit.

The worker starts :func:`fit_process_main` in a fresh process for every claimed job. The
process reads the job's columns from the database itself (big data never crosses a pipe),
calls the training function, and sends the worker small messages over a one-way pipe
(:mod:`service.worker.messages`): :class:`~service.worker.messages.Progress` any number of
times, then exactly one result: ``Succeeded``, ``Failed`` (deterministic: do not retry),
``Stopped`` (it obeyed a stop request) or ``Errored`` (unexpected: retry).

A trained model's artifact is written to the data store here, by the process that holds it
(``models/<model id>/model.cpm``, the id chosen here), and only the object's name, size and
SHA-256 cross the pipe: bytes first, row after, however large the model. The worker checks the
object and commits the row; a crash in between leaves an object ``coppice store gc`` sweeps.

A process that exits without a result crashed; the worker decides what that means. The
process never writes to the jobs table: every transition of the job is the worker's.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

from engine import TrainingInterrupted
from engine.process_setup import limit_blas_threads
from service.datasets.columns import ColumnData
from service.datasets.part_reader import DatasetChanged
from service.datasets.service import DatasetDataCorrupt, load_columns, parts_of_columns
from service.db.session import create_db_engine, reading
from service.db.tables import JobRecord, new_id
from service.errors import InvalidInput, NotFound, ServiceError
from service.models.artifacts import write_artifact
from service.searches import predictions
from service.store import DataStore, ObjectCorrupt, StoreUnavailable
from service.training.spec import TrainingError
from service.worker.messages import (
    Errored,
    Failed,
    FitMessage,
    FitResult,
    Progress,
    Resources,
    Stopped,
    StoredOutcome,
    Succeeded,
    TrainingOutcomeLike,
)
from service.worker.progress import ProgressThrottle

# The fit process tells the worker about progress at most this often; the worker writes even less.
CHILD_PROGRESS_INTERVAL = 0.25


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """How a fit process opens the data store (``COPPICE_STORE_URL``/``_OPTIONS``): a store
    object itself holds a filesystem, which is opened anew in each process, never pickled."""

    url: str
    options: Mapping[str, Any]

    def open(self) -> DataStore:
        return DataStore(self.url, self.options)


@dataclass(frozen=True, slots=True)
class JobSnapshot:
    """What a fit needs to know about its job, taken when the job was claimed."""

    id: str
    dataset_id: str | None
    name: str | None
    method: str
    task: str
    target: str
    features: list[str]
    params: dict[str, Any]
    validation: dict[str, Any]
    seed: int | None
    attempts: int
    n_jobs: int
    max_runtime_seconds: float | None = None
    # Where the fit's parallel part runs (COPPICE_DASK_SCHEDULER); None: the worker's processes.
    dask_scheduler: str | None = None
    dask_connect_timeout: float = 10.0

    @classmethod
    def of(
        cls,
        job: JobRecord,
        *,
        n_jobs: int,
        dask_scheduler: str | None = None,
        dask_connect_timeout: float = 10.0,
    ) -> JobSnapshot:
        return cls(
            id=job.id,
            dataset_id=job.dataset_id,
            name=job.name,
            method=job.method,
            task=job.task,
            target=job.target,
            features=list(job.features),
            params=dict(job.params),
            validation=dict(job.validation),
            seed=job.seed,
            attempts=job.attempts,
            n_jobs=n_jobs,
            max_runtime_seconds=job.max_runtime_seconds,
            dask_scheduler=dask_scheduler,
            dask_connect_timeout=dask_connect_timeout,
        )


ProgressReporter = Callable[[float, str], None]
StopCheck = Callable[[], bool]
TrainFunction = Callable[
    [JobSnapshot, Mapping[str, ColumnData], ProgressReporter, StopCheck], TrainingOutcomeLike
]
"""Trains one job. Raises ``service.training.TrainingError`` for deterministic failures and
``engine.TrainingInterrupted`` when ``should_stop()`` turned true. Must be a module-level
function: the fit process imports it by name."""


def default_train(
    job: JobSnapshot,
    columns: Mapping[str, ColumnData],
    on_progress: ProgressReporter,
    should_stop: StopCheck,
) -> TrainingOutcomeLike:
    """Train with ``service.training``: the function every production worker runs."""
    from service.training import TrainingSpec, run_training
    from service.training.cluster import fit_cluster, stage_on

    if job.seed is None:  # the API records a seed for every job
        raise TrainingError("no_seed", f"Job '{job.id}' has no seed recorded.")
    spec = TrainingSpec(
        method=job.method,
        task=job.task,
        target=job.target,
        features=tuple(job.features),
        params=job.params,
        validation=job.validation,
        seed=job.seed,
        n_jobs=job.n_jobs,
    )
    address = job.dask_scheduler

    def report(fraction: float, stage: str) -> None:
        on_progress(fraction, stage_on(address, stage))  # the job shows where it runs

    with fit_cluster(address, job.dask_connect_timeout) as workers:
        _place["dask_workers"] = workers
        return run_training(spec, columns, report, should_stop)


# Set by the train function while it runs: the Dask workers it ran on (one job a process).
_place: dict[str, int | None] = {}


def measure_resources(started: float, job: JobSnapshot) -> Resources:
    """What this fit process has cost since ``started`` (``time.monotonic``), for the job's
    ``resources``: its CPU time and that of the processes it ran and waited for (the engine's
    ``n_jobs`` processes), and its own peak resident memory (``ru_maxrss``, KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return {
        "wall_seconds": round(time.monotonic() - started, 3),
        "cpu_seconds": round(cpu, 3),
        "peak_rss_bytes": int(own.ru_maxrss) * 1024,
        "backend": "dask" if job.dask_scheduler else "local",
        "dask_workers": _place.get("dask_workers") if job.dask_scheduler else None,
    }


def _dataset_error_code(error: ServiceError) -> str:
    if isinstance(error, NotFound):
        return "dataset_not_found"
    if isinstance(error, DatasetDataCorrupt | ObjectCorrupt):  # a part read during the fit
        return "dataset_corrupt"
    if isinstance(error, DatasetChanged):  # a registered source changed since registration
        return "dataset_changed"
    if isinstance(error, InvalidInput):
        return "invalid_columns"
    return "dataset_unreadable"


def _load(database_url: str, store: StoreConfig, job: JobSnapshot) -> Mapping[str, ColumnData]:
    """The job's columns: left in the dataset's parts (a ``PartTable``, which the fit reads
    part by part into bin codes) for a method that fits from codes, else read whole."""
    from service.training.part_table import PartTable
    from service.training.run import bins_from_parts

    names = list(dict.fromkeys([*job.features, job.target]))
    engine = create_db_engine(database_url)
    try:
        with reading(engine) as session:
            if job.dataset_id is None:
                raise NotFound("The job's dataset has been deleted.")
            opened = store.open()
            if bins_from_parts(job.method, job.params):
                found = parts_of_columns(session, job.dataset_id, names)
                if found is not None:
                    kinds, parts, n_rows = found
                    return PartTable(opened, parts, kinds, n_rows)
            return load_columns(session, job.dataset_id, names, opened)
    finally:
        engine.dispose()


def child_process(conn: Connection, stop: Event) -> tuple[StopCheck, ProgressReporter]:
    """Set up a worker's child process (a fit's, or a batch prediction's); its stop check and
    its progress reporter, which sends throttled ``Progress`` messages over ``conn``."""
    # A group of its own: Ctrl-C at the worker's terminal does not reach the fit (the worker
    # decides whether it stops), and a kill of the group takes the engine's processes too.
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # One BLAS thread: the service runs fits side by side and each fit's n_jobs are processes.
    limit_blas_threads()
    # The parent is the worker, or the fork server: a new parent means the worker is gone. The
    # fork server alone does not tell, because it outlives a killed worker for as long as any
    # child it forked runs (each child holds the write end of its "alive" pipe, CPython's
    # multiprocessing.forkserver), so a progress message the worker's end no longer reads does.
    parent_pid = os.getppid()
    throttle = ProgressThrottle(CHILD_PROGRESS_INTERVAL)
    worker_gone = threading.Event()

    def should_stop() -> bool:
        # Nobody would record this fit once the worker died, so stop.
        return stop.is_set() or worker_gone.is_set() or os.getppid() != parent_pid

    def on_progress(fraction: float, stage: str) -> None:
        now = time.monotonic()
        if throttle.offer(fraction, stage, now) and not _send(conn, Progress(*throttle.take(now))):
            worker_gone.set()

    return should_stop, on_progress


def send_result(conn: Connection, result: FitResult) -> None:
    """Send a child's one result and close its end of the pipe."""
    try:
        conn.send(result)
    except (BrokenPipeError, ConnectionResetError):
        return  # the worker is gone; the lease will bring the job back
    except Exception as error:  # the outcome cannot be pickled
        conn.send(Errored(f"the result could not be sent to the worker: {error}"))
    finally:
        conn.close()


def fit_process_main(
    conn: Connection,
    stop: Event,
    database_url: str,
    store: StoreConfig,
    job: JobSnapshot,
    train: TrainFunction,
) -> None:
    """The fit process's whole life: load, train, report (with what it cost), exit."""
    started = time.monotonic()
    should_stop, on_progress = child_process(conn, stop)
    result = _train(database_url, store, job, train, on_progress, should_stop)
    if isinstance(result, Succeeded | Failed | Stopped | Errored):  # a fit's, never Scored
        result = dataclasses.replace(result, resources=measure_resources(started, job))
    send_result(conn, result)


def _train(
    database_url: str,
    store: StoreConfig,
    job: JobSnapshot,
    train: TrainFunction,
    on_progress: ProgressReporter,
    should_stop: StopCheck,
) -> FitResult:
    """Load the job's columns, train and store the artifact; every way that can end, as the
    result to send."""
    try:
        outcome = train(job, _load(database_url, store, job), on_progress, should_stop)
        # The columns are gone by now (only the call held them): the model streams into the
        # store beside the model alone.
        on_progress(0.995, "storing the model")
        stored = store_outcome(store.open(), outcome)
    except StoreUnavailable as error:  # not the fit's fault: worth another attempt
        return Errored(error.detail)
    except TrainingError as error:  # the fit's own failure, as the fit named it
        return Failed(error.code, error.message)
    except ServiceError as error:
        return Failed(_dataset_error_code(error), error.detail)
    except TrainingInterrupted:
        return Stopped()
    except Exception as error:
        summary = "".join(traceback.format_exception_only(error)).strip()
        return Errored(f"training raised {summary}")
    return Succeeded(stored)


def store_outcome(store: DataStore, outcome: TrainingOutcomeLike) -> StoredOutcome:
    """Write the outcome's artifact to the store under a new model id; what the worker gets."""
    model_id = new_id()
    # Streamed tree by tree (array by array) from the model, sized and hashed in the pass that
    # writes it: peak memory is the model plus one array, not the model plus its bytes.
    artifact = write_artifact(store, model_id, outcome.artifact_pieces())
    # A search candidate's out-of-fold predictions go to the store beside it, never the pipe.
    values = getattr(outcome, "out_of_fold", None)
    kept = None if values is None else predictions.write(store, model_id, values)
    return StoredOutcome.of(outcome, model_id, artifact, kept)


def warm_up_process() -> None:
    """Does nothing: started once so the fork server is up before the first job."""


def _send(conn: Connection, message: FitMessage) -> bool:
    """Send ``message``; False when the pipe is closed, which means the worker is gone."""
    try:
        conn.send(message)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True
