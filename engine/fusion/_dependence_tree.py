"""First-order dependence tree (Kuncheva, *Combining Pattern Classifiers*, 2004, §4.6, after
Kang, Kim and Kim 1997; the tree is Chow and Liu's 1968).

Naive Bayes (§4.4) assumes the members' labels independent given the class. The dependence
tree keeps the strongest dependencies: it approximates

    P(s | ω_k) ≈ ∏ᵢ P(sᵢ | s_{parent(i)}, ω_k),

where the parents form a tree over the members (the root's factor is P(s_root | ω_k)). The tree
is Chow and Liu's: the maximum spanning tree of the mutual information between members'
labels, which makes the product the closest (in Kullback–Leibler divergence) tree-shaped
distribution to the empirical one. Then

    P(ω_k | s) ∝ P(ω_k) ∏ᵢ P(sᵢ | s_{parent(i)}, ω_k).

``structure="per_class"`` builds one tree per class from ``I(sᵢ; sⱼ | ω = ω_k)``, the mutual
information within the class's rows, as Kuncheva's class-conditional approximation does;
``"shared"`` builds one tree for all classes from the conditional mutual information
``I(sᵢ; sⱼ | ω) = Σ_k P(ω_k) I(sᵢ; sⱼ | ω = ω_k)``. Conditional probabilities are smoothed like
the naive Bayes combiner's: ``(n(a, b) + α) / (n(b) + c·α)`` with α = 1/c by default.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue, Options
from engine.fusion._base import FUSION_CONSTRAINTS, BaseLabelCombiner
from engine.fusion._tables import (
    normalise_log_scores,
    resolve_alpha,
    smoothed_log_ratio,
    weighted_counts,
)

__all__ = ["DependenceTreeCombiner", "chow_liu_tree", "pairwise_mutual_information"]


def pair_counts(
    labels: NDArray[np.int64],
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_classes: int,
    i: int,
    j: int,
) -> NDArray[np.float64]:
    """Weighted counts ``[k, a, b]`` of rows of class k where member i said a and j said b."""
    cell = (target * n_classes + labels[:, i]) * n_classes + labels[:, j]
    counts = weighted_counts(cell, weights, n_classes**3)
    return counts.reshape(n_classes, n_classes, n_classes)


def _mutual_information(joint: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mutual information (nats) of each (a, b) table along the last two axes of counts."""
    totals = joint.sum(axis=(-2, -1), keepdims=True)
    p = joint / np.where(totals > 0, totals, 1.0)
    outer = p.sum(axis=-1, keepdims=True) * p.sum(axis=-2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p / np.where(outer > 0, outer, 1.0)), 0.0)
    # Rounding can leave a tiny negative value for independent labels; MI is never negative.
    return np.maximum(terms.sum(axis=(-2, -1)), 0.0)


def pairwise_mutual_information(
    labels: NDArray[np.int64],
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_classes: int,
) -> NDArray[np.float64]:
    """``I(sᵢ; sⱼ | ω = ω_k)`` for every class and pair, shape (c, L, L), zero diagonal."""
    n_members = labels.shape[1]
    information = np.zeros((n_classes, n_members, n_members))
    for i in range(n_members):
        for j in range(i + 1, n_members):
            joint = pair_counts(labels, target, weights, n_classes, i, j)
            information[:, i, j] = information[:, j, i] = _mutual_information(joint)
    return information


def chow_liu_tree(weights: NDArray[np.float64]) -> NDArray[np.int64]:
    """Maximum spanning tree of a symmetric weight matrix (L, L), rooted at node 0.

    Prim's algorithm: grow the tree from node 0, each time adding the heaviest edge from the
    tree to a node outside it (ties: the lowest outside node, joined to the tree node that
    entered the tree first).

    Returns
    -------
    ndarray of shape (L,), int64
        The parent of every node; −1 for the root.
    """
    n_nodes = weights.shape[0]
    parents = np.full(n_nodes, -1, dtype=np.int64)
    in_tree = np.zeros(n_nodes, dtype=bool)
    in_tree[0] = True
    best = weights[0].astype(np.float64).copy()  # heaviest edge from the tree to each node
    best_from = np.zeros(n_nodes, dtype=np.int64)
    for _ in range(n_nodes - 1):
        candidates = np.where(in_tree, -np.inf, best)
        node = int(candidates.argmax())
        parents[node] = best_from[node]
        in_tree[node] = True
        heavier = weights[node] > best
        best_from[heavier] = node
        best[heavier] = weights[node][heavier]
    return parents


class DependenceTreeCombiner(BaseLabelCombiner):
    """Bayes combiner with a first-order (Chow–Liu) dependence tree over the members' labels.

    Parameters
    ----------
    estimators : list of (str, classifier)
        The members, by distinct names; cloned before fitting (unless ``prefit``).
    structure : {"per_class", "shared"}
        One tree per class (from the mutual information within each class) or one tree for
        all (from the mutual information conditional on the class).
    alpha : float or None
        Pseudo-count of the conditional probability tables; None means ``1/c``.
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
    mutual_information_ : ndarray of shape (n_classes, n_members, n_members)
        ``I(s_i; s_j | ω = ω_k)`` in nats, from the out-of-fold labels.
    parents_ : ndarray of shape (n_classes, n_members), int64
        Each class's tree: the parent member of every member, −1 for the root (member 0).
    class_prior_ : ndarray of shape (n_classes,)
    log_cpt_ : ndarray of shape (n_classes, n_members, n_classes, n_classes)
        ``log P(s_i = a | s_parent(i) = b, ω_k)`` at ``[k, i, a, b]``; for the root,
        ``log P(s_root = a | ω_k)`` repeated over ``b``.

    Notes
    -----
    ``sample_weight`` weighs every row in the class priors, the mutual information and the
    conditional probability tables.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        **FUSION_CONSTRAINTS,
        "structure": [Options(("per_class", "shared"))],
        "alpha": [Interval("real", 0.0, None), NoneValue()],
    }

    mutual_information_: NDArray[np.float64]
    parents_: NDArray[np.int64]
    class_prior_: NDArray[np.float64]
    log_cpt_: NDArray[np.float64]

    def __init__(
        self,
        estimators: Any,
        *,
        structure: str = "per_class",
        alpha: float | None = None,
        cv: Any = 5,
        prefit: bool = False,
        n_jobs: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.estimators = estimators
        self.structure = structure
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
        n_members = labels.shape[1]
        counts = weighted_counts(target, weights, n_classes)
        prior = counts / counts.sum()
        information = pairwise_mutual_information(labels, target, weights, n_classes)
        if self.structure == "shared":
            shared = chow_liu_tree(np.tensordot(prior, information, axes=1))
            parents = np.tile(shared, (n_classes, 1))
        else:
            parents = np.stack([chow_liu_tree(information[k]) for k in range(n_classes)])
        alpha = resolve_alpha(self.alpha, n_classes)
        log_cpt = np.empty((n_classes, n_members, n_classes, n_classes))
        for k in range(n_classes):
            for i in range(n_members):
                parent = int(parents[k, i])
                if parent < 0:
                    node = weighted_counts(labels[target == k, i], weights[target == k], n_classes)
                    log_cpt[k, i] = smoothed_log_ratio(node, counts[k], alpha, n_classes)[:, None]
                else:
                    joint = pair_counts(labels, target, weights, n_classes, i, parent)[k]
                    given = joint.sum(axis=0, keepdims=True)
                    log_cpt[k, i] = smoothed_log_ratio(joint, given, alpha, n_classes)
        self.mutual_information_ = information
        self.parents_ = parents
        self.class_prior_ = prior
        self.log_cpt_ = log_cpt

    def _combine(self, labels: NDArray[np.int64]) -> NDArray[np.float64]:
        n_samples, n_members = labels.shape
        n_classes = self.class_prior_.size
        members = np.arange(n_members)
        with np.errstate(divide="ignore"):
            scores = np.tile(np.log(self.class_prior_), (n_samples, 1))
        for k in range(n_classes):
            # The root is its own parent here: its table repeats P(s_root | ω_k) over b.
            parents = np.where(self.parents_[k] < 0, members, self.parents_[k])
            factors = self.log_cpt_[k, members[None, :], labels, labels[:, parents]]
            scores[:, k] += factors.sum(axis=1)
        return normalise_log_scores(scores)
