"""Fitting the members of a combiner: on all rows, and split by split for held-out outputs.

Every fit is an independent task (member × split, plus the refit on all rows), so all of them go
through one executor (:mod:`engine.parallel`): serially for ``n_jobs=1``, otherwise in worker
processes that see the training matrix and the split masks through shared memory. A split task
returns only its member's output on the held-out rows; a refit task returns the fitted member.
Results come back in task order, so the model is the same for any ``n_jobs``.

Both :mod:`engine.combine` (voting, stacking, grading) and :mod:`engine.fusion` (label fusion)
fit their members here; they differ only in the output they collect (:class:`HeldOutOutput`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from engine.base import clone
from engine.callbacks import Callback, ProgressEvent, notify
from engine.combine._folds import Splits
from engine.parallel import SharedData, make_executor

__all__ = [
    "OUTPUT_METHODS",
    "FitPlan",
    "HeldOutOutput",
    "MemberOutput",
    "Progress",
    "accepts_sample_weight",
    "check_accepts_sample_weight",
    "fit_members",
    "member_output",
]

OUTPUT_METHODS = ("predict_proba", "decision_function", "predict")

_REFIT = -1  # the task's split number for a refit on every row


def accepts_sample_weight(estimator: Any) -> bool:
    return "sample_weight" in inspect.signature(estimator.fit).parameters


def check_accepts_sample_weight(names: Sequence[str], prototypes: Sequence[Any]) -> None:
    """Refuse, before anything is fitted, a member whose ``fit`` takes no ``sample_weight``."""
    for name, prototype in zip(names, prototypes, strict=True):
        if not accepts_sample_weight(prototype):
            raise TypeError(
                f"Member {name!r} ({type(prototype).__name__}) does not accept sample_weight."
            )


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


class HeldOutOutput(Protocol):
    """What a member fitted on a split gives for its held-out rows (picklable: it travels
    to the workers with the task)."""

    def __call__(self, estimator: Any, X: NDArray[np.float64]) -> NDArray[Any]: ...


@dataclass(frozen=True)
class MemberOutput:
    """:func:`member_output` with ``method`` over ``n_classes`` classes, as a held-out output."""

    method: str
    n_classes: int

    def __call__(self, estimator: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return member_output(estimator, X, self.method, self.n_classes)


@dataclass(frozen=True, eq=False)
class _FitTask:
    estimator: Any  # unfitted prototype, cloned in the worker
    column: int  # which column of the shared targets is this member's target
    split: int  # _REFIT: fit on every row and return the member; else hold this split out
    output: HeldOutOutput | None  # what to compute on the held-out rows
    target_labels: NDArray[Any] | None  # the member learns target_labels[code], not the code
    weighted: bool


def _run_fit_task(shared: SharedData, task: _FitTask) -> Any:
    """Fit one member (runs in a worker); the refit member, or its held-out output."""
    X, target = shared["X"], shared["targets"][:, task.column]
    rows: Any = slice(None) if task.split == _REFIT else shared["train"][task.split]
    estimator = clone(task.estimator)
    weights = {"sample_weight": shared["sample_weight"][rows]} if task.weighted else {}
    target = target[rows]
    if task.target_labels is not None:
        target = task.target_labels[target]
    estimator.fit(X[rows], target, **weights)
    if task.split == _REFIT:
        return estimator
    assert task.output is not None
    return task.output(estimator, X[shared["test"][task.split]])


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


@dataclass(frozen=True, eq=False)
class FitPlan:
    """What to fit: each member on its target column, with or without held-out output.

    ``outputs[i]`` is the output collected split by split for member ``i`` (None: none, and
    ``splits`` may then be None). With ``target_labels`` the members learn
    ``target_labels[code]`` (the user's labels) instead of the encoded targets.
    """

    members: Sequence[Any]
    columns: Sequence[int]
    outputs: Sequence[HeldOutOutput | None]
    splits: Splits | None
    target_labels: NDArray[Any] | None = None

    @property
    def n_splits(self) -> int:
        return 0 if self.splits is None else self.splits.n_splits

    @property
    def n_fits(self) -> int:
        return sum(1 + (self.n_splits if out is not None else 0) for out in self.outputs)


def fit_members(
    plan: FitPlan,
    X: NDArray[np.float64],
    targets: NDArray[Any],
    sample_weight: NDArray[np.float64] | None,
    *,
    n_jobs: int | None,
    progress: Progress,
) -> tuple[list[Any], list[NDArray[Any] | None]]:
    """Fit every member on all rows and, where asked, split by split.

    Parameters
    ----------
    plan : FitPlan
    X : ndarray of shape (n_samples, n_features), float64 (NaN allowed)
    targets : ndarray of shape (n_samples, n_targets)
        Column ``plan.columns[i]`` is member ``i``'s target (encoded int64 classes, or floats).
    sample_weight : ndarray of shape (n_samples,) or None
        Passed to every fit when given (on the split's training rows).

    Returns
    -------
    fitted : list
        The members refitted on all rows, in plan order.
    held_out : list of (ndarray of shape (n_samples, ...) or None)
        Each member's held-out output (``plan.outputs[i]`` of the rows split by split), in
        plan order; rows no split holds out are 0.
    """
    weighted = sample_weight is not None
    tasks: list[_FitTask] = []
    for member, column, output in zip(plan.members, plan.columns, plan.outputs, strict=True):
        tasks.append(_FitTask(member, column, _REFIT, None, plan.target_labels, weighted))
        if output is not None:
            tasks += [
                _FitTask(member, column, split, output, plan.target_labels, weighted)
                for split in range(plan.n_splits)
            ]
    n_samples = X.shape[0]
    no_splits = np.zeros((0, n_samples), dtype=bool)
    shared: dict[str, NDArray[Any]] = {
        "X": X,
        "targets": targets,
        "sample_weight": np.ones(n_samples) if sample_weight is None else sample_weight,
        "train": no_splits if plan.splits is None else plan.splits.train,
        "test": no_splits if plan.splits is None else plan.splits.test,
    }
    fitted: list[Any] = []
    held_out: list[NDArray[Any] | None] = []
    with make_executor(shared, n_jobs, len(tasks)) as executor:
        for task, result in zip(tasks, executor.map(_run_fit_task, tasks), strict=True):
            progress.step()
            if task.split == _REFIT:
                fitted.append(result)
                held_out.append(None)
                continue
            assert plan.splits is not None
            current = held_out[-1]
            if current is None:
                shape = (n_samples, *result.shape[1:])
                current = held_out[-1] = np.zeros(shape, dtype=result.dtype)
            current[plan.splits.test[task.split]] = result
    return fitted, held_out
