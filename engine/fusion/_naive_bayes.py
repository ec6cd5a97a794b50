"""Naive Bayes combination of label outputs (Xu, Krzyżak and Suen 1992; Kuncheva, *Combining
Pattern Classifiers*, 2004, §4.4).

Assuming the members' labels independent given the class,

    P(ω_k | s) ∝ P(ω_k) ∏ᵢ P(sᵢ | ω_k),

with P(ω_k) = N_k / N and P(sᵢ | ω_k) read off member i's confusion matrix ``cm^i`` (rows:
true class, columns: assigned label), smoothed as Kuncheva gives it (after Titterington et
al.) so that one empty cell cannot veto a class:

    P(sᵢ | ω_k) = (cm^i_{k,sᵢ} + 1/c) / (N_k + 1).

``alpha`` generalises the pseudo-count ``1/c`` to any α ≥ 0: ``(cm + α) / (N_k + c·α)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue
from engine.fusion._base import FUSION_CONSTRAINTS, BaseLabelCombiner
from engine.fusion._tables import (
    confusion_matrices,
    normalise_log_scores,
    resolve_alpha,
    smoothed_log_ratio,
    weighted_counts,
)

__all__ = ["NaiveBayesCombiner"]


class NaiveBayesCombiner(BaseLabelCombiner):
    """Naive Bayes combiner of the members' crisp labels.

    Parameters
    ----------
    estimators : list of (str, classifier)
        The members, by distinct names; cloned before fitting (unless ``prefit``).
    alpha : float or None
        Pseudo-count added to every confusion-matrix cell; None means ``1/c``, Kuncheva's
        correction, which adds one pseudo-row per class.
    cv : int or list of (train_indices, test_indices)
        Number of stratified folds for the members' out-of-fold labels, or explicit splits
        with disjoint test sets (rows in no test set are left out of the combiner's fit).
    prefit : bool
        Use the members as already fitted; the combiner is fitted on the labels they give
        the rows passed to ``fit``.
    n_jobs : int or None
        Worker processes for the member fits (folds × members run as independent tasks).
    random_state : None, int or numpy Generator
        Shuffles the rows before they are dealt into folds.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    estimators_ : list of fitted members (refitted on all rows)
    confusion_matrices_ : ndarray of shape (n_members, n_classes, n_classes)
        Weighted out-of-fold confusion matrices ``cm[i, true class, assigned label]``.
    class_count_ : ndarray of shape (n_classes,), the weight N_k of each class
    class_prior_ : ndarray of shape (n_classes,), N_k / N
    log_likelihood_ : ndarray of shape (n_members, n_classes, n_classes)
        ``log P(s_i = s | ω_k)`` at ``[i, k, s]``, smoothed.

    Notes
    -----
    ``sample_weight`` weighs every row's contribution to the confusion matrices and class
    counts (an integer weight counts the row that many times), besides reaching the members.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **FUSION_CONSTRAINTS,
        "alpha": [Interval("real", 0.0, None), NoneValue()],
    }

    confusion_matrices_: NDArray[np.float64]
    class_count_: NDArray[np.float64]
    class_prior_: NDArray[np.float64]
    log_likelihood_: NDArray[np.float64]

    def __init__(
        self,
        estimators: Any,
        *,
        alpha: float | None = None,
        cv: Any = 5,
        prefit: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.alpha = alpha
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
        cm = confusion_matrices(labels, target, weights, n_classes)
        counts = weighted_counts(target, weights, n_classes)
        alpha = resolve_alpha(self.alpha, n_classes)
        self.confusion_matrices_ = cm
        self.class_count_ = counts
        self.class_prior_ = counts / counts.sum()
        self.log_likelihood_ = smoothed_log_ratio(cm, counts[None, :, None], alpha, n_classes)

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        members = np.arange(labels.shape[1])
        # log P(s_i | ω_k) for every row, member and class: shape (n, L, c).
        per_member = self.log_likelihood_[members[None, :], :, labels]
        with np.errstate(divide="ignore"):
            scores = np.log(self.class_prior_) + per_member.sum(axis=1)
        return normalise_log_scores(scores)
