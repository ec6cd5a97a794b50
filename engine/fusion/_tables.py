"""Counting helpers of the label-fusion combiners: confusion matrices, votes, cells, smoothing.

Labels are always encoded: an (n_samples, L) int64 matrix of indices into the combiner's
``classes_``, one column per member.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "confusion_matrices",
    "encode_member_labels",
    "match_rows",
    "normalise_log_scores",
    "resolve_alpha",
    "smoothed_log_ratio",
    "vote_shares",
    "weighted_counts",
]


def weighted_counts(
    index: NDArray[np.int64], weights: NDArray[np.float64], size: int
) -> NDArray[np.float64]:
    """``np.bincount`` with weights, typed as the float array it returns."""
    return np.asarray(np.bincount(index, weights=weights, minlength=size), dtype=np.float64)


def encode_member_labels(predicted: Any, classes: NDArray[Any], member: str) -> NDArray[np.int64]:
    """A member's predicted labels as indices into ``classes``, shape (n_samples,), int64."""
    predicted = np.asarray(predicted).reshape(-1)
    index = np.clip(np.searchsorted(classes, predicted), 0, classes.size - 1)
    if not np.array_equal(classes[index], predicted):
        raise ValueError(
            f"Member {member!r} predicts labels that are not classes of the combiner's "
            f"training data {classes.tolist()!r}."
        )
    return index.astype(np.int64)


def confusion_matrices(
    labels: NDArray[np.int64],
    target: NDArray[np.int64],
    weights: NDArray[np.float64],
    n_classes: int,
) -> NDArray[np.float64]:
    """Weighted confusion matrix of every member, shape (L, c, c).

    ``cm[i, k, s]`` is the weight of the rows of true class ``k`` that member ``i`` labelled
    ``s`` (Kuncheva's ``cm^i_{k,s}``: rows are true classes, columns assigned labels).
    """
    n_members = labels.shape[1]
    cell = (np.arange(n_members)[None, :] * n_classes + target[:, None]) * n_classes + labels
    counts = weighted_counts(
        cell.ravel(), np.repeat(weights, n_members), n_members * n_classes * n_classes
    )
    return counts.reshape(n_members, n_classes, n_classes)


def vote_shares(labels: NDArray[np.int64], n_classes: int) -> NDArray[np.float64]:
    """The share of members voting for each class, shape (n_samples, c)."""
    n_samples, n_members = labels.shape
    votes = np.zeros((n_samples, n_classes))
    np.add.at(votes, (np.repeat(np.arange(n_samples), n_members), labels.ravel()), 1.0)
    return votes / n_members


def match_rows(table: NDArray[np.int64], queries: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each row of ``queries``, the index of the equal row of ``table``, or −1."""
    if table.shape[0] == 0:
        return np.full(queries.shape[0], -1, dtype=np.int64)
    both = np.vstack([table, queries])
    _, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    lookup = np.full(int(inverse.max()) + 1, -1, dtype=np.int64)
    lookup[inverse[: table.shape[0]]] = np.arange(table.shape[0])
    return lookup[inverse[table.shape[0] :]]


def normalise_log_scores(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rows of log-scores as probabilities (a stable softmax).

    A row whose scores are all −inf (every class ruled out, possible without smoothing)
    becomes uniform over the classes: the combiner has no evidence left either way.
    """
    top = scores.max(axis=1, keepdims=True)
    dead = ~np.isfinite(top[:, 0])
    top[dead] = 0.0
    exp = np.exp(scores - top)
    exp[dead] = 1.0
    return exp / exp.sum(axis=1, keepdims=True)


def resolve_alpha(alpha: float | None, n_classes: int) -> float:
    """Kuncheva's pseudo-count ``1/c`` per cell when ``alpha`` is None."""
    return 1.0 / n_classes if alpha is None else float(alpha)


def smoothed_log_ratio(
    counts: NDArray[np.float64], totals: NDArray[np.float64], alpha: float, n_values: int
) -> NDArray[np.float64]:
    """``log((counts + α) / (totals + n_values·α))``; uniform where nothing was counted."""
    numerator = counts + alpha
    denominator = np.broadcast_to(totals + n_values * alpha, counts.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(denominator > 0, numerator / denominator, 1.0 / n_values)
        return np.log(ratio)
