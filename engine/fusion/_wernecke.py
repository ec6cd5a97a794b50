"""Wernecke's method (Wernecke 1992; Kuncheva, *Combining Pattern Classifiers*, 2004, §4.5.2).

A behaviour-knowledge-space table that resists overtraining: a cell is labelled by its most
frequent class only when that class *dominates* it, i.e. the 95 % confidence interval of its
frequency does not overlap the interval of any other class. Otherwise (and in unseen cells,
whose intervals are all [0, 1]) the "least wrong" member labels the row: the member ``i`` with
the smallest estimate of

    P(error and D_i(x) = s_i) = Σ_{k ≠ s_i} cm^i_{k, s_i} / N,

i.e. the member least often wrong when it says what it says now, gives its label ``s_i``.

Kuncheva does not name the interval; this uses Wilson's score interval, which stays honest for
the few rows a cell usually holds (the normal approximation has zero width at frequencies 0
and 1, so a cell seen once would always "dominate").
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval
from engine.fusion._base import FUSION_CONSTRAINTS, BaseLabelCombiner
from engine.fusion._bks import cell_counts, cell_table
from engine.fusion._tables import confusion_matrices

__all__ = ["WerneckeCombiner", "wilson_interval"]


def wilson_interval(
    counts: NDArray[np.float64], totals: NDArray[np.float64], z: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval (lower, upper) of the proportions ``counts / totals``.

    ``totals`` broadcasts against ``counts``; where it is 0 the interval is [0, 1].
    """
    n = np.broadcast_to(totals, counts.shape).astype(np.float64)
    safe = np.where(n > 0, n, 1.0)
    p = counts / safe
    z2 = z * z
    denominator = 1.0 + z2 / safe
    centre = (p + z2 / (2.0 * safe)) / denominator
    half = z / denominator * np.sqrt(np.maximum(p * (1.0 - p) / safe + z2 / (4.0 * safe**2), 0.0))
    lower = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    upper = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    return lower, upper


def dominating_cells(counts: NDArray[np.float64], z: float) -> NDArray[np.bool_]:
    """Whether each cell's most frequent class has an interval above every other class's."""
    n_classes = counts.shape[1]
    if n_classes == 1:
        return counts[:, 0] > 0
    lower, upper = wilson_interval(counts, counts.sum(axis=1, keepdims=True), z)
    top = counts.argmax(axis=1)
    rows = np.arange(counts.shape[0])
    others = upper.copy()
    others[rows, top] = -np.inf
    return lower[rows, top] > others.max(axis=1)


class WerneckeCombiner(BaseLabelCombiner):
    """Wernecke's combiner: BKS cells labelled only when one class dominates them.

    Parameters
    ----------
    estimators : list of (str, classifier)
        The members, by distinct names; cloned before fitting (unless ``prefit``).
    confidence : float
        Level of the per-class confidence intervals (Kuncheva: 95 %).
    cv : int or list of (train_indices, test_indices)
        Number of stratified folds for the members' out-of-fold labels, or explicit splits
        with disjoint test sets (rows in no test set are left out of the combiner's fit).
    prefit : bool
        Use the members as already fitted.
    n_jobs : int or None
        Worker processes for the member fits.
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    estimators_ : list of fitted members
    cells_ : ndarray of shape (n_cells, n_members), int64, the seen label vectors
    cell_counts_ : ndarray of shape (n_cells, n_classes), weight of each class per cell
    dominant_ : ndarray of shape (n_cells,), bool
        Whether the cell's most frequent class dominates it (labels it).
    error_rates_ : ndarray of shape (n_members, n_classes)
        ``P(error and D_i = s)`` at ``[i, s]``, from the out-of-fold confusion matrices.
    z_ : float, the normal quantile of ``confidence``

    Notes
    -----
    ``predict_proba`` gives the cell's class frequencies where a class dominates, and
    otherwise probability one on the least wrong member's label (the method makes a hard
    choice there). Ties between equally wrong members go to the first listed.
    ``sample_weight`` weighs each row in the cell counts and confusion matrices; the intervals
    treat weighted counts as counts (integer weights mean repeated rows).
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **FUSION_CONSTRAINTS,
        "confidence": [Interval("real", 0.0, 1.0, closed="neither")],
    }

    cells_: NDArray[np.int64]
    cell_counts_: NDArray[np.float64]
    dominant_: NDArray[np.bool_]
    error_rates_: NDArray[np.float64]
    z_: float

    def __init__(
        self,
        estimators: Any,
        *,
        confidence: float = 0.95,
        cv: Any = 5,
        prefit: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.confidence = confidence
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
        z = NormalDist().inv_cdf(0.5 + self.confidence / 2.0)
        cells, counts = cell_table(labels, target, weights, n_classes)
        cm = confusion_matrices(labels, target, weights, n_classes)
        assigned = cm.sum(axis=1)  # (L, c): weight each member gave each label
        correct = np.diagonal(cm, axis1=1, axis2=2)
        self.cells_ = cells
        self.cell_counts_ = counts
        self.dominant_ = dominating_cells(counts, z)
        self.error_rates_ = (assigned - correct) / weights.sum()
        self.z_ = z

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        n_samples, n_members = labels.shape
        n_classes = self.cell_counts_.shape[1]
        counts = cell_counts(
            self.cells_, np.where(self.dominant_[:, None], self.cell_counts_, 0.0), labels
        )
        totals = counts.sum(axis=1)
        decided = totals > 0
        proba = np.zeros((n_samples, n_classes))
        proba[decided] = counts[decided] / totals[decided, None]
        rows = np.flatnonzero(~decided)
        errors = self.error_rates_[np.arange(n_members)[None, :], labels[rows]]
        authority = errors.argmin(axis=1)
        proba[rows, labels[rows, authority]] = 1.0
        return proba
