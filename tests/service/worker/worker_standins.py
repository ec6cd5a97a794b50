"""Stand-in training functions for worker tests, chosen per job by ``params["behaviour"]``.

Fit processes import this module by name (it is on ``sys.path`` via the worker conftest), so
everything here is module-level. ``params`` may also hold ``log`` (a file each run appends its
job id to), ``pidfile`` (where the fit writes its pid), ``marker`` (for ``crash_once``) and
``seconds`` (for the sleeping behaviours).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine import ProgressEvent, RandomForestRegressor, TrainingInterrupted, save_model
from service.training import TrainingError
from service.worker.fit_process import JobSnapshot


@dataclass(frozen=True)
class Outcome:
    """Shaped like ``service.training.TrainingOutcome``."""

    artifact: bytes
    sha256: str
    size: int
    features: list[dict[str, Any]]
    classes: list[Any] | None
    encoding: dict[str, Any]
    resolved_params: dict[str, Any]
    metrics: dict[str, Any]
    curves: dict[str, Any] | None
    importances: dict[str, list[Any]] = field(default_factory=dict)
    n_estimators: int | None = 1

    def artifact_pieces(self) -> list[bytes]:
        return [self.artifact]


def make_outcome(job: JobSnapshot, artifact: bytes = b"fitted-model-bytes") -> Outcome:
    return Outcome(
        artifact=artifact,
        sha256=hashlib.sha256(artifact).hexdigest(),
        size=len(artifact),
        features=[{"name": name, "kind": "numeric"} for name in job.features],
        classes=None,
        encoding={},
        resolved_params=dict(job.params),
        metrics={"train": {"rmse": 0.0}},
        curves=None,
        importances={
            "impurity": [{"name": name, "importance": 1.0, "std": 0.0} for name in job.features]
        },
    )


def standin(
    job: JobSnapshot,
    columns: Mapping[str, Any],
    on_progress: Callable[[float, str], None],
    should_stop: Callable[[], bool],
) -> Outcome:
    params = job.params
    if "log" in params:
        with open(params["log"], "a") as log:
            log.write(f"{job.id} {os.getpid()}\n")
    if "pidfile" in params:
        Path(params["pidfile"]).write_text(str(os.getpid()))
    assert set(columns) == {*job.features, job.target}
    behaviour = params.get("behaviour", "succeed")
    if behaviour == "fail":
        raise TrainingError("invalid_params", "max_depth must be at least 1 for this data.")
    if behaviour == "raise":
        raise RuntimeError("an unexpected bug")
    if behaviour in ("crash", "ignore_stop") and "pidfile" in params:
        # A grandchild, as the engine's worker processes are: a kill must reach it too, and
        # so must the clean-up after a fit killed outright.
        grandchild = subprocess.Popen(["sleep", "60"])
        Path(params["pidfile"] + ".child").write_text(str(grandchild.pid))
    if behaviour == "crash" or (behaviour == "crash_once" and not Path(params["marker"]).exists()):
        if behaviour == "crash_once":
            Path(params["marker"]).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    if behaviour in ("sleep", "ignore_stop"):
        deadline = time.monotonic() + float(params.get("seconds", 3.0))
        while (now := time.monotonic()) < deadline:
            on_progress(1 - (deadline - now) / float(params.get("seconds", 3.0)), "sleeping")
            if behaviour == "sleep" and should_stop():
                raise TrainingInterrupted
            time.sleep(0.05)
    if behaviour == "forest":
        return _fit_forest(job, columns, on_progress, should_stop)
    on_progress(1.0, "done")
    return make_outcome(job)


def _fit_forest(
    job: JobSnapshot,
    columns: Mapping[str, Any],
    on_progress: Callable[[float, str], None],
    should_stop: Callable[[], bool],
) -> Outcome:
    """A real engine fit with ``n_jobs`` worker processes of its own, as training will do."""
    X = np.column_stack([columns[name].as_float() for name in job.features])
    y = columns[job.target].as_float()

    def callback(event: ProgressEvent) -> None:
        on_progress(event.fraction, event.stage)
        if should_stop():
            raise TrainingInterrupted

    forest = RandomForestRegressor(n_estimators=8, n_jobs=job.n_jobs, random_state=job.seed)
    forest.fit(X, y, callbacks=[callback])
    return make_outcome(job, save_model(forest))
