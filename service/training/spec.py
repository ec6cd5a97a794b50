"""What a training run takes and gives back, and how it fails."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from service.db.tables import JobRecord


class TrainingError(Exception):
    """Training cannot succeed with this job's data or settings; retrying will not help.

    ``code`` is short and stable (``one_class``, ``constant_target``, ``too_few_rows``, ...);
    ``message`` says what to change. The worker stores both as the job's ``error``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class TrainingSpec:
    """Everything a training run needs besides the column data."""

    method: str
    task: str  # "classification" | "regression"
    target: str
    features: tuple[str, ...]
    params: Mapping[str, Any]  # as the job asked; defaults are filled in by the run
    # {"holdout": f} or {"folds": k}; a search adds "keep_predictions" and halving "rows".
    validation: Mapping[str, Any]
    seed: int
    n_jobs: int = 1

    def __post_init__(self) -> None:
        # Callers may pass lists (JSON columns); a tuple keeps the spec immutable.
        object.__setattr__(self, "features", tuple(self.features))
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TrainingError("no_seed", "The job has no integer seed recorded.")

    @classmethod
    def from_job(cls, job: JobRecord, *, n_jobs: int = 1) -> TrainingSpec:
        """The spec of a job row; ``n_jobs`` is the service's ``processes_per_job``."""
        if job.seed is None:  # every job created through the API has one
            raise TrainingError("no_seed", f"Job '{job.id}' has no seed recorded.")
        return cls(
            method=job.method,
            task=job.task,
            target=job.target,
            features=tuple(job.features),
            params=dict(job.params),
            validation=dict(job.validation),
            seed=int(job.seed),
            n_jobs=n_jobs,
        )

    @property
    def columns(self) -> tuple[str, ...]:
        """The dataset columns the run reads: the features, then the target."""
        return (*self.features, self.target)


@dataclass(frozen=True, slots=True)
class TrainingOutcome:
    """A fitted model and everything known about it, ready to store.

    Attributes
    ----------
    model : the fitted estimator. Its artifact is streamed from it
        (:meth:`artifact_pieces`, what the fit process writes to the store): the bytes are
        never held whole (a 100-tree forest on a million noisy rows weighs about 7 GB).
        ``artifact``, ``sha256`` and ``size`` are the ``engine.save_model`` bytes, their
        SHA-256 (hex) and length, for callers in one process (tests, benchmarks).
    features : ``[{"name", "kind"}]`` in the model's column order.
    classes : class labels (strings) in the order of ``predict_proba``'s columns; None for
        regression.
    encoding : ``{"categories": {feature: [category, ...]}, "classes": [...] | None}``: how
        predict inputs are encoded (a categorical feature's value is its index in the list).
    resolved_params : every parameter with defaults filled in, nested learners expanded.
    metrics : ``{"train", "validation", "oob", "cv", "diagnostics", "importance_kinds"}``,
        each a dict or None; besides the metric sets, ``diagnostics`` (``{"rows", "roc",
        "residuals"}``, ``service.training.diagnostics``) holds the points the model page plots
        (with ``validation``), and ``importance_kinds`` the kinds of feature importance the
        model has (``service.models.importance.available_kinds``), both not metrics.
    curves : ``{"iterations", "train", "validation", "oob", "metric"}`` or None.
    importances : ``{"impurity": [{"name", "importance", "std"}, ...]}``, each list sorted by
        importance, descending; the worker stores ``{"features": list}`` as the payload of one
        ``ImportanceRecord`` per kind.
    n_estimators : members actually fitted (1 for a single tree).
    n_rows : rows used (rows whose target is missing are left out); n_train_rows,
        n_validation_rows: the split.
    out_of_fold : with ``validation = {"folds": k, "keep_predictions": True}``, float64 of
        shape (n_rows, n_classes) (probabilities) or (n_rows, 1) (regression): each row as
        predicted by the fold model that did not train on it; None otherwise.
    """

    model: Any
    features: list[dict[str, str]]
    classes: list[str] | None
    encoding: dict[str, Any]
    resolved_params: dict[str, Any]
    metrics: dict[str, Any]
    curves: dict[str, Any] | None
    importances: dict[str, Any] = field(default_factory=dict)
    n_estimators: int = 1
    n_rows: int = 0
    n_train_rows: int = 0
    n_validation_rows: int = 0
    out_of_fold: npt.NDArray[np.float64] | None = None

    def artifact_pieces(self) -> Iterable[bytes | memoryview]:
        """The artifact as pieces to stream: the model plus one array in memory at a time."""
        import engine  # here: the spec is imported where the engine need not be

        return engine.save_model_pieces(self.model)

    @property
    def artifact(self) -> bytes:
        """The whole artifact (the model's size again in memory): for small models only."""
        import engine

        return engine.save_model(self.model)

    @property
    def size(self) -> int:
        import engine

        return engine.save_model_pieces(self.model).nbytes

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for piece in self.artifact_pieces():
            digest.update(piece)
        return digest.hexdigest()
