"""Validation splits in NumPy: stratified holdout and (stratified) k folds."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from service.training.spec import TrainingError

Indices = npt.NDArray[np.intp]


def holdout_split(
    y: npt.NDArray[Any], fraction: float, *, classification: bool, seed: int
) -> tuple[Indices, Indices]:
    """(train, validation) row indices, both sorted.

    Classification is stratified: each class gives ``round(fraction * n_class)`` rows, but
    always keeps at least one in training.
    """
    rng = np.random.default_rng(seed)
    n = y.shape[0]
    if classification:
        chosen: list[Indices] = []
        for label in np.unique(y):
            members = rng.permutation(np.flatnonzero(y == label))
            take = min(round(fraction * members.size), members.size - 1)
            chosen.append(members[:take])
        validation = np.sort(np.concatenate(chosen)).astype(np.intp)
    else:
        take = min(round(fraction * n), n - 2)
        validation = np.sort(rng.permutation(n)[: max(take, 0)]).astype(np.intp)
    if validation.size == 0:
        raise TrainingError(
            "too_few_rows",
            f"A holdout of {fraction:g} of {n} rows leaves no validation rows; use a larger "
            'holdout, more rows, or {"holdout": 0} for no validation.',
        )
    # The complement through a mask: setdiff1d sorts copies of both arrays, some 70 bytes a
    # row at its peak (a fit process's largest transient on a 2 M-row table, issue 27).
    in_validation = np.zeros(n, dtype=bool)
    in_validation[validation] = True
    train = np.flatnonzero(~in_validation).astype(np.intp)
    return train, validation


def fold_assignments(
    y: npt.NDArray[Any], folds: int, *, classification: bool, seed: int
) -> npt.NDArray[np.intp]:
    """The fold (0..folds-1) of each row; classes are dealt round-robin across folds."""
    n = y.shape[0]
    if folds > n:
        raise TrainingError(
            "too_few_rows",
            f"{folds} folds need at least {folds} rows with a target; there are {n}.",
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    if classification:
        # Grouping rows by class (in random order within each) and dealing them out in turn
        # gives every fold about the same share of each class.
        order = order[np.argsort(y[order], kind="stable")]
    assignment = np.empty(n, dtype=np.intp)
    assignment[order] = np.arange(n) % folds
    return assignment
