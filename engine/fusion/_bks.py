"""Behaviour knowledge space (BKS; Huang and Suen 1995; Kuncheva, *Combining Pattern
Classifiers*, 2004, §4.5.1).

Every possible label vector ``s = (s_1, …, s_L)`` is a cell of a look-up table. Fitting counts,
in each cell, the (weighted) training rows of each true class, ``n_k(s)``; a new row falls in
the cell of its members' labels and takes the class most frequent there,

    D(x) = argmax_k n_k(s(x)).

Kuncheva leaves empty cells and ties to a fallback ("a label at random or the majority vote");
here both go to the majority vote of ``s`` (its own ties to the class first in ``classes_``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.fusion._base import BaseLabelCombiner
from engine.fusion._tables import match_rows, vote_shares, weighted_counts

__all__ = ["BKSCombiner", "cell_table"]


def cell_table(
    labels: NDArray[np.int64],
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_classes: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The BKS table: distinct label vectors (n_cells, L) and their class weights (n_cells, c).

    Cells are sorted lexicographically; a cell seen only in rows of zero weight has zero counts
    and is treated like an unseen one.
    """
    cells, inverse = np.unique(labels, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = weighted_counts(inverse * n_classes + target, weights, cells.shape[0] * n_classes)
    return cells.astype(np.int64), counts.reshape(cells.shape[0], n_classes)


def cell_counts(
    cells: NDArray[np.int64], counts: NDArray[np.float64], labels: NDArray[np.int64]
) -> NDArray[np.float64]:
    """The class counts of the cell of every row of ``labels``; zeros for unseen cells."""
    index = match_rows(cells, labels)
    found = np.zeros((labels.shape[0], counts.shape[1]))
    seen = index >= 0
    found[seen] = counts[index[seen]]
    return found


class BKSCombiner(BaseLabelCombiner):
    """Behaviour-knowledge-space combiner: a look-up table from label vectors to classes.

    Parameters
    ----------
    estimators : list of (str, classifier)
        The members, by distinct names; cloned before fitting (unless ``prefit``).
    cv : int or list of (train_indices, test_indices)
        Number of stratified folds for the members' out-of-fold labels, or explicit splits
        with disjoint test sets (rows in no test set are left out of the combiner's fit).
    prefit : bool
        Use the members as already fitted; the table is built from their labels of the rows
        passed to ``fit``.
    n_jobs : int or None
        Worker processes for the member fits.
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    estimators_ : list of fitted members
    cells_ : ndarray of shape (n_cells, n_members), int64
        The label vectors seen in training (as indices into ``classes_``), sorted.
    cell_counts_ : ndarray of shape (n_cells, n_classes)
        Weight of the training rows of each true class in each cell.

    Notes
    -----
    ``predict_proba`` gives the class frequencies ``n_k(s) / n(s)`` of the row's cell when one
    class is the most frequent there, and otherwise (unseen cell, or a tie for the most
    frequent class) the majority vote's shares, so ``predict`` is always its argmax.
    ``sample_weight`` weighs each row's count in its cell.
    """

    cells_: NDArray[np.int64]
    cell_counts_: NDArray[np.float64]

    def __init__(
        self,
        estimators: Any,
        *,
        cv: Any = 5,
        prefit: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.cv = cv
        self.prefit = prefit
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _fit_combiner(
        self,
        labels: NDArray[np.int64],
        target: NDArray[np.int64],
        weights: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        self.cells_, self.cell_counts_ = cell_table(labels, target, weights, n_classes)

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        counts = cell_counts(self.cells_, self.cell_counts_, labels)
        totals = counts.sum(axis=1)
        top = counts.max(axis=1)
        decided = (totals > 0) & ((counts == top[:, None]).sum(axis=1) == 1)
        proba = vote_shares(labels, counts.shape[1])
        proba[decided] = counts[decided] / totals[decided, None]
        return proba
