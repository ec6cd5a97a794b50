"""SVD combination: correspondence analysis of the decision profiles (Merz 1999's SCANN, as
Kuncheva, *Combining Pattern Classifiers*, 2004, §4.7, describes it).

Each training row becomes a 0/1 indicator row of ``(L + 1)·c`` columns: one block of ``c``
per member (a 1 at the label it gave) and a last block for the true class. Correspondence
analysis of this N × (L + 1)c matrix ``M`` — the singular value decomposition of its
standardised residuals

    S = D_r^{-1/2} (P − r cᵀ) D_c^{-1/2},   P = M / Σ M,   r, c = row and column masses,
    S = U Σ Vᵀ,

places the columns in a low-dimensional space where columns with similar profiles lie close:
a member label that usually co-occurs with true class ω_k lies near ω_k's column. The class
templates are the principal coordinates ``G = D_c^{-1/2} V Σ`` of the last block's columns. A new
row, whose true class is unknown, is projected as a supplementary row from its member block
alone: its profile (1/L at each member's label) times the standard column coordinates,

    f(x) = (1/L) Σᵢ D_c^{-1/2} V[col(i, sᵢ)],

and takes the class of the nearest template (Euclidean distance over the kept dimensions).

``sample_weight`` scales each row of ``M``. The decomposition is computed from the small
(L + 1)c × (L + 1)c matrix ``SᵀS`` (whose eigenvalues are the squared singular values), so
the cost is linear in the number of rows.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue
from engine.fusion._base import FUSION_CONSTRAINTS, BaseLabelCombiner
from engine.fusion._tables import normalise_log_scores

__all__ = ["SVDCombiner", "indicator_matrix"]

_RELATIVE_ZERO = 1e-10  # squared singular values below this (relative) are rounding noise


def indicator_matrix(labels: NDArray[np.int64], n_classes: int) -> NDArray[np.float64]:
    """The 0/1 matrix of label vectors, shape (n_samples, n_columns · n_classes).

    Column ``j·c + s`` is 1 where column ``j`` of ``labels`` equals ``s``.
    """
    n_samples, n_columns = labels.shape
    indicators = np.zeros((n_samples, n_columns * n_classes))
    columns = np.arange(n_columns)[None, :] * n_classes + labels
    indicators[np.arange(n_samples)[:, None], columns] = 1.0
    return indicators


def _n_kept(eigenvalues: NDArray[np.float64], n_components: Any) -> int:
    if n_components is None:
        return int(eigenvalues.size)
    if isinstance(n_components, numbers.Integral):
        return min(int(n_components), int(eigenvalues.size))
    if eigenvalues.size == 0:
        return 0
    shares = np.cumsum(eigenvalues) / eigenvalues.sum()
    return int(np.searchsorted(shares, float(n_components) - 1e-12) + 1)


class SVDCombiner(BaseLabelCombiner):
    """Merz's SVD (correspondence analysis) combiner: nearest class template in CA space.

    Parameters
    ----------
    estimators : list of (str, classifier)
        The members, by distinct names; cloned before fitting (unless ``prefit``).
    n_components : int, float or None
        Dimensions kept: an int keeps that many (at most all non-trivial ones); a float in
        (0, 1] keeps the fewest whose share of the total inertia reaches it; None keeps all
        non-trivial dimensions.
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
    singular_values_ : ndarray of shape (n_components_,), decreasing
    explained_inertia_ : ndarray of shape (n_components_,)
        Each kept dimension's share of the total inertia (χ² / total mass of ``M``).
    column_coordinates_ : ndarray of shape ((n_members + 1) · n_classes, n_components_)
        Standard coordinates ``D_c^{-1/2} V`` of every column of ``M`` (zero for a column no
        training row has: a label never given, or a class of zero weight).
    class_templates_ : ndarray of shape (n_classes, n_components_)
        Principal coordinates of the true-class columns.
    class_seen_ : ndarray of shape (n_classes,), bool
        Classes with positive training weight; the others have no template and get
        probability zero.
    n_components_ : int

    Notes
    -----
    ``predict_proba`` is a softmax of the negative squared distances to the templates,
    ``p_k ∝ exp(−‖f(x) − g_k‖²)``: a soft version of the nearest-template rule whose argmax
    is that rule's decision (the rule itself gives no probabilities).
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **FUSION_CONSTRAINTS,
        "n_components": [
            Interval("int", 1, None),
            Interval("real", 0.0, 1.0, closed="right"),
            NoneValue(),
        ],
    }

    singular_values_: NDArray[np.float64]
    explained_inertia_: NDArray[np.float64]
    column_coordinates_: NDArray[np.float64]
    class_templates_: NDArray[np.float64]
    class_seen_: NDArray[np.bool_]
    n_components_: int

    def __init__(
        self,
        estimators: Any,
        *,
        n_components: int | float | None = None,
        cv: Any = 5,
        prefit: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.n_components = n_components
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
        n_members = labels.shape[1]
        blocks = n_members + 1
        M = indicator_matrix(np.column_stack([labels, target]), n_classes)
        cross = (M * weights[:, None]).T @ M  # Mᵀ W M: the weighted Burt matrix
        grand_total = blocks * weights.sum()
        masses = np.diag(cross) / grand_total
        kept = masses > 0
        # SᵀS = D_c^{-1/2} (Pᵀ D_r^{-1} P − c cᵀ) D_c^{-1/2}, and Pᵀ D_r^{-1} P is the Burt
        # matrix over (grand total × blocks), since every row of M sums to ``blocks``.
        root = np.sqrt(masses[kept])
        inner = cross[np.ix_(kept, kept)] / (grand_total * blocks)
        inner -= np.outer(masses[kept], masses[kept])
        gram = inner / np.outer(root, root)
        eigenvalues, vectors = np.linalg.eigh((gram + gram.T) / 2.0)
        order = np.argsort(eigenvalues)[::-1]
        eigenvalues, vectors = eigenvalues[order], vectors[:, order]
        non_trivial = eigenvalues > _RELATIVE_ZERO * max(1.0, float(eigenvalues.max(initial=0)))
        eigenvalues, vectors = eigenvalues[non_trivial], vectors[:, non_trivial]
        total_inertia = float(eigenvalues.sum())
        n_components = _n_kept(eigenvalues, self.n_components)
        eigenvalues, vectors = eigenvalues[:n_components], vectors[:, :n_components]
        standard = np.zeros((blocks * n_classes, n_components))
        standard[kept] = vectors / root[:, None]
        singular_values = np.sqrt(eigenvalues)
        class_columns = slice(n_members * n_classes, blocks * n_classes)
        self.singular_values_ = singular_values
        self.explained_inertia_ = (
            eigenvalues / total_inertia if total_inertia > 0 else np.zeros(n_components)
        )
        self.column_coordinates_ = standard
        self.class_templates_ = standard[class_columns] * singular_values
        self.class_seen_ = kept[class_columns].copy()
        self.n_components_ = n_components

    def _project(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        """Supplementary-row coordinates (n_samples, n_components_) of encoded label vectors."""
        n_classes = self.class_templates_.shape[0]
        columns = np.arange(labels.shape[1])[None, :] * n_classes + labels
        return self.column_coordinates_[columns].mean(axis=1)

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        points = self._project(labels)
        differences = points[:, None, :] - self.class_templates_[None, :, :]
        distances = (differences**2).sum(axis=2)
        scores = np.where(self.class_seen_[None, :], -distances, -np.inf)
        return normalise_log_scores(scores)
