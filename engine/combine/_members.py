"""Fitting the members of a combiner: on all rows, and fold by fold for held-out predictions.

Every fit is an independent task (member × fold, plus the refit on all rows), so all of them go
through one executor (:mod:`engine.parallel`): serially for ``n_jobs=1``, otherwise in worker
processes that see the training matrix through shared memory. A fold task returns only its
member's output on the held-out rows; a refit task returns the fitted member. Results come back
in task order, so the model is the same for any ``n_jobs``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.base import clone
from engine.callbacks import Callback, ProgressEvent, notify
from engine.parallel import SharedData, make_executor

__all__ = [
    "FitPlan",
    "Progress",
    "accepts_sample_weight",
    "fit_members",
    "member_output",
]

OUTPUT_METHODS = ("predict_proba", "decision_function", "predict")


def accepts_sample_weight(estimator: Any) -> bool:
    return "sample_weight" in inspect.signature(estimator.fit).parameters


def member_output(
    estimator: Any, X: NDArray[np.float64], method: str, n_classes: int
) -> NDArray[np.float64]:
    """A fitted member's output as a 2-D float array over *all* classes of the combiner.

    Members are fitted on encoded labels (0 … n_classes − 1), but one fitted on a fold may
    have seen only some classes; its columns are placed by ``classes_``, and the classes it
    never saw get probability 0 (as scikit-learn's ``cross_val_predict`` does).

    Returns
    -------
    ndarray of shape (n_samples, n_columns), float64
        ``predict_proba``: (n, n_classes). ``decision_function``: (n, 1) for two classes,
        else (n, n_classes). ``predict``: (n, 1), the encoded class or the regression value.
    """
    output = np.asarray(getattr(estimator, method)(X), dtype=np.float64)
    if method == "predict" or not n_classes:
        return output.reshape(X.shape[0], -1)
    seen = np.asarray(estimator.classes_).astype(np.int64)
    if method == "decision_function" and output.ndim == 1:
        if seen.size != 2 or n_classes != 2:
            raise ValueError(
                f"A member fitted on a fold saw {seen.size} of the {n_classes} classes, so its "
                "decision_function cannot be aligned; use stack_method='predict_proba'."
            )
        return output[:, None]
    fill = 0.0 if method == "predict_proba" else np.finfo(np.float64).min
    full = np.full((X.shape[0], n_classes), fill)
    full[:, seen] = output.reshape(X.shape[0], -1)
    return full


@dataclass(frozen=True)
class _FitTask:
    estimator: Any  # unfitted prototype, cloned in the worker
    column: int  # which column of the shared targets is this member's target
    fold: int  # -1: fit on every row and return the member; else hold this fold out
    method: str | None  # output to compute on the held-out fold
    n_classes: int
    weighted: bool


def _run_fit_task(shared: SharedData, task: _FitTask) -> Any:
    """Fit one member (runs in a worker); the refit member, or its held-out output."""
    X, target = shared["X"], shared["targets"][:, task.column]
    estimator = clone(task.estimator)
    if task.fold < 0:
        rows: Any = slice(None)
    else:
        rows = shared["folds"] != task.fold
    weights = {"sample_weight": shared["sample_weight"][rows]} if task.weighted else {}
    estimator.fit(X[rows], target[rows], **weights)
    if task.fold < 0:
        return estimator
    assert task.method is not None
    held_out = X[shared["folds"] == task.fold]
    return member_output(estimator, held_out, task.method, task.n_classes)


class Progress:
    """Sends one :class:`ProgressEvent` per finished fit to the callbacks."""

    def __init__(self, estimator: str, total: int, callbacks: list[Callback] | None) -> None:
        self.estimator = estimator
        self.total = total
        self.callbacks = callbacks
        self.done = 0

    def step(self, metrics: dict[str, float] | None = None) -> None:
        self.done += 1
        notify(self.callbacks, ProgressEvent(self.estimator, self.done, self.total, metrics or {}))


@dataclass(frozen=True)
class FitPlan:
    """What to fit: each member on its target column, with or without held-out output.

    ``methods[i]`` is the output collected fold by fold for member ``i`` (None: none).
    """

    members: Sequence[Any]
    columns: Sequence[int]
    methods: Sequence[str | None]
    n_splits: int

    @property
    def n_fits(self) -> int:
        return sum(1 + (self.n_splits if m is not None else 0) for m in self.methods)


def fit_members(
    plan: FitPlan,
    X: NDArray[np.float64],
    targets: NDArray[Any],
    sample_weight: NDArray[np.float64] | None,
    folds: NDArray[np.int64] | None,
    *,
    n_classes: int,
    n_jobs: int | None,
    progress: Progress,
) -> tuple[list[Any], list[NDArray[np.float64] | None]]:
    """Fit every member on all rows and, where asked, fold by fold.

    Parameters
    ----------
    plan : FitPlan
    X : ndarray of shape (n_samples, n_features), float64 (NaN allowed)
    targets : ndarray of shape (n_samples, n_targets)
        Column ``plan.columns[i]`` is member ``i``'s target (encoded int64 classes, or floats).
    sample_weight : ndarray of shape (n_samples,) or None
        Passed to every fit when given (on the fold's training rows).
    folds : ndarray of shape (n_samples,), int64, or None
        The fold of every row; needed when any ``plan.methods`` is not None.

    Returns
    -------
    fitted : list
        The members refitted on all rows, in plan order.
    held_out : list of (ndarray of shape (n_samples, n_columns) or None)
        Each member's out-of-fold output (see :func:`member_output`).
    """
    weighted = sample_weight is not None
    tasks: list[_FitTask] = []
    for member, column, method in zip(plan.members, plan.columns, plan.methods, strict=True):
        tasks.append(_FitTask(member, column, -1, None, n_classes, weighted))
        if method is not None:
            tasks += [
                _FitTask(member, column, fold, method, n_classes, weighted)
                for fold in range(plan.n_splits)
            ]
    n_samples = X.shape[0]
    shared: dict[str, NDArray[Any]] = {
        "X": X,
        "targets": targets,
        "sample_weight": np.ones(n_samples) if sample_weight is None else sample_weight,
        "folds": folds if folds is not None else np.zeros(n_samples, dtype=np.int64),
    }
    fitted: list[Any] = []
    held_out: list[NDArray[np.float64] | None] = []
    with make_executor(shared, n_jobs, len(tasks)) as executor:
        for task, result in zip(tasks, executor.map(_run_fit_task, tasks), strict=True):
            progress.step()
            if task.fold < 0:
                fitted.append(result)
                held_out.append(None)
                continue
            assert folds is not None
            current = held_out[-1]
            if current is None:
                current = held_out[-1] = np.empty((n_samples, result.shape[1]))
            current[folds == task.fold] = result
    return fitted, held_out
