"""Agreement between two partitions: the adjusted Rand index (Hubert and Arabie, 1985)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["adjusted_rand_score", "contingency_matrix"]


def contingency_matrix(labels_a: Any, labels_b: Any) -> NDArray[np.int64]:
    """Counts ``n_ij`` of rows in cluster i of ``labels_a`` and cluster j of ``labels_b``.

    Parameters
    ----------
    labels_a, labels_b : array-like of shape (n_samples,)
        Cluster labels of any sortable type; only equality between labels matters.

    Returns
    -------
    ndarray of shape (n_clusters_a, n_clusters_b), int64
    """
    a = np.asarray(labels_a)
    b = np.asarray(labels_b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"Labelings must be 1-D; got shapes {a.shape} and {b.shape}.")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"Labelings differ in length: {a.shape[0]} and {b.shape[0]}.")
    _, codes_a = np.unique(a, return_inverse=True)
    _, codes_b = np.unique(b, return_inverse=True)
    codes_a, codes_b = codes_a.ravel(), codes_b.ravel()
    n_b = int(codes_b.max()) + 1 if codes_b.size else 0
    n_a = int(codes_a.max()) + 1 if codes_a.size else 0
    flat = np.bincount(codes_a * n_b + codes_b, minlength=n_a * n_b)
    return flat.reshape(n_a, n_b).astype(np.int64)


def _pairs(counts: NDArray[np.int64]) -> int:
    """Σ C(n, 2) over ``counts``, in Python integers (no overflow however many rows)."""
    return sum(int(n) * (int(n) - 1) // 2 for n in counts.ravel() if n > 1)


def adjusted_rand_score(labels_true: Any, labels_pred: Any) -> float:
    """The Rand index of two partitions, corrected for chance.

    With ``n_ij`` the contingency counts, ``a_i``/``b_j`` their row/column sums, n rows and
    ``C(m) = m(m−1)/2``::

        index    = Σ_ij C(n_ij)
        expected = Σ_i C(a_i) · Σ_j C(b_j) / C(n)
        maximum  = (Σ_i C(a_i) + Σ_j C(b_j)) / 2
        ARI      = (index − expected) / (maximum − expected)

    1 for identical partitions (up to renaming), about 0 for independent ones, negative
    when they agree less than chance. When ``maximum == expected`` (both labelings put
    every row in one cluster, or every row in its own) the partitions are identical and
    the score is 1. Symmetric in its arguments.

    The counts are summed in Python integers and the score is formed by one division of
    two integers, so it is correctly rounded.

    Parameters
    ----------
    labels_true, labels_pred : array-like of shape (n_samples,)

    Returns
    -------
    float
    """
    table = contingency_matrix(labels_true, labels_pred)
    n = int(table.sum())
    index = _pairs(table)
    pairs_a = _pairs(table.sum(axis=1))
    pairs_b = _pairs(table.sum(axis=0))
    total = n * (n - 1) // 2
    # The formula above multiplied through by 2·C(n), so that every term is an integer.
    numerator = 2 * (total * index - pairs_a * pairs_b)
    denominator = total * (pairs_a + pairs_b) - 2 * pairs_a * pairs_b
    if denominator == 0:
        return 1.0
    return numerator / denominator
