"""What a fit process tells its worker, and how the worker sees a run end.

The fit process (:mod:`service.worker.fit_process`) sends :class:`Progress` any number of
times, then exactly one :data:`FitResult`. The watcher of the job
(:mod:`service.worker.job_watch`) adds the ends the fit cannot report itself
(:class:`Crashed`, :class:`ShutDown`, :class:`Lost`) and records a :data:`RunEnd`.

The messages cross a ``multiprocessing`` pipe, so they are pickled there and back; that is
the only place they are pickled (a stored model never is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service.batch.outcome import Scored
from service.store import StoredObject


class TrainingOutcomeLike(Protocol):
    """What a successful training returns (``service.training.TrainingOutcome`` is one)."""

    def artifact_pieces(self) -> Iterable[bytes | memoryview]:
        """The artifact's bytes in pieces, streamed into the store (never held whole)."""
        ...

    @property
    def features(self) -> Any: ...
    @property
    def classes(self) -> Any: ...
    @property
    def encoding(self) -> Any: ...
    @property
    def resolved_params(self) -> Any: ...
    @property
    def metrics(self) -> Any: ...
    @property
    def curves(self) -> Any: ...
    @property
    def importances(self) -> Mapping[str, Any]: ...
    @property
    def n_estimators(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class StoredOutcome:
    """A successful training whose artifact the fit process has written to the data store.

    What crosses the pipe: the model's id (chosen by the fit, which names the object after
    it), the object that holds the artifact, and the small rest of the outcome; never the
    artifact's bytes, however large the model.
    """

    model_id: str
    artifact: StoredObject
    features: Any
    classes: Any
    encoding: Any
    resolved_params: Any
    metrics: Any
    curves: Any
    importances: Mapping[str, Any]
    n_estimators: int | None
    # A search candidate's out-of-fold predictions, written to the store by the fit process
    # (``service.searches.predictions.StoredPredictions``), or None.
    out_of_fold: Any = None

    @classmethod
    def of(
        cls,
        outcome: TrainingOutcomeLike,
        model_id: str,
        artifact: StoredObject,
        out_of_fold: Any = None,
    ) -> StoredOutcome:
        return cls(
            model_id=model_id,
            artifact=artifact,
            features=outcome.features,
            classes=outcome.classes,
            encoding=outcome.encoding,
            resolved_params=outcome.resolved_params,
            metrics=outcome.metrics,
            curves=outcome.curves,
            importances=outcome.importances,
            n_estimators=outcome.n_estimators,
            out_of_fold=out_of_fold,
        )


# --- sent by the fit process ------------------------------------------------------------------

# What the fit cost, as the job's ``resources`` show it (API.md, "Jobs"): wall_seconds,
# cpu_seconds, peak_rss_bytes, backend ("local" | "dask"), dask_workers.
Resources = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Progress:
    """How far training has come, in [0, 1], and what it is doing (``"tree 4/10"``)."""

    fraction: float
    stage: str


@dataclass(frozen=True, slots=True)
class Succeeded:
    """Training finished and its artifact is in the data store; the row is the worker's to add."""

    outcome: StoredOutcome
    resources: Resources | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """Training cannot succeed however often it is tried: fail the job, do not retry."""

    code: str
    message: str
    resources: Resources | None = None


@dataclass(frozen=True, slots=True)
class Stopped:
    """Training obeyed a stop request (a cancel, or the runtime limit)."""

    resources: Resources | None = None


@dataclass(frozen=True, slots=True)
class Errored:
    """Training raised something unexpected: worth another attempt."""

    message: str
    resources: Resources | None = None


# A batch prediction's process (service.batch.process) ends in ``Scored`` where a fit succeeds.
FitMessage = Progress | Succeeded | Scored | Failed | Stopped | Errored
FitResult = Succeeded | Scored | Failed | Stopped | Errored


# --- ends the fit process cannot report ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Crashed:
    """The fit process ended without a result (killed, or a native crash); its exit says how."""


@dataclass(frozen=True, slots=True)
class ShutDown:
    """The worker's shutdown grace ran out and the fit was killed: queue the job again."""


@dataclass(frozen=True, slots=True)
class Lost:
    """The job is no longer this worker's (its lease lapsed): record nothing."""


RunEnd = FitResult | Crashed | ShutDown | Lost
