"""Steps every fit of a job takes, whether ``service.training.run`` or its out-of-core
sibling ``service.training.out_of_core`` runs it: the engine progress callback, the job's
estimator, the impurity importances, the fitted size, and dropping prediction caches before
the artifact is streamed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from engine.base import BaseEstimator
from engine.callbacks import ProgressEvent, TrainingInterrupted
from service.methods.catalog import Method, Task
from service.methods.params import build_estimator
from service.training.data import TrainingData
from service.training.spec import TrainingSpec

ProgressReport = Callable[[float, str], None]
StopCheck = Callable[[], bool]
# Fitting is most of the work; the rest (metrics, curves, saving) gets the last stretch.
FIT_SHARE = 0.95
# Most training rows scored for the train metrics and curves (see scored_training_rows).
TRAIN_SCORE_ROWS = 10_000


class Progress:
    """The engine callback: reports each iteration, stops when asked, keeps the events."""

    def __init__(self, report: ProgressReport, should_stop: StopCheck, unit: str, fits: int):
        self.report, self.should_stop, self.unit, self.fits = report, should_stop, unit, fits
        self.index, self.prefix = 0, ""
        self.events: list[ProgressEvent] = []

    def start(self, index: int, prefix: str) -> None:
        self.index, self.prefix, self.events = index, prefix, []
        self._check()
        self.report(FIT_SHARE * index / self.fits, f"{prefix}fitting")

    def __call__(self, event: ProgressEvent) -> None:
        self._check()
        self.events.append(event)
        fraction = FIT_SHARE * (self.index + min(event.fraction, 1.0)) / self.fits
        self.report(fraction, f"{self.prefix}{self.unit} {event.done}/{event.total}")

    def note(self, what: str) -> None:
        """A step of the fit before its first iteration (reading parts, binning)."""
        self._check()
        self.report(FIT_SHARE * self.index / self.fits, f"{self.prefix}{what}")

    def _check(self) -> None:
        if self.should_stop():
            raise TrainingInterrupted("training was asked to stop")


def job_estimator(
    method: Method,
    task: Task,
    resolved: Mapping[str, Any],
    spec: TrainingSpec,
    categorical_features: list[int],
) -> Any:
    """The job's estimator, unfitted."""
    return build_estimator(
        method.name,
        task,
        resolved,
        random_state=spec.seed,
        n_jobs=spec.n_jobs,
        categorical_features=categorical_features,
    )


def impurity_importances(model: Any, data: TrainingData) -> dict[str, Any]:
    try:
        values = np.asarray(model.feature_importances_, dtype=np.float64)
    except (AttributeError, ValueError, NotImplementedError):
        return {}
    if values.shape != (len(data.features),) or not np.all(np.isfinite(values)):
        return {}
    ranked = sorted(
        (
            {"name": feature["name"], "importance": float(value), "std": None}
            for feature, value in zip(data.features, values, strict=True)
        ),
        key=lambda item: -float(item["importance"] or 0.0),
    )
    return {"impurity": ranked}


def n_estimators_of(model: Any) -> int:
    if hasattr(model, "n_estimators_"):
        return int(model.n_estimators_)
    if hasattr(model, "estimators_"):
        return len(model.estimators_)
    return 1


def drop_prediction_caches(model: Any, depth: int = 0) -> None:
    """Drop what the model built to predict the metrics (a forest's packed trees, about half
    the trees' size again) before the artifact is streamed: a class lists such rebuildable
    attributes in ``_persistence_exclude``, and the serving process rebuilds them on first use.
    """
    if depth > 8:  # as deep as any nesting of learners the catalogue builds
        return
    state = getattr(model, "__dict__", None)
    if not isinstance(state, dict):
        return
    for name in getattr(type(model), "_persistence_exclude", ()):
        state.pop(name, None)
    for value in state.values():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, BaseEstimator) or hasattr(item, "_persistence_exclude"):
                drop_prediction_caches(item, depth + 1)
