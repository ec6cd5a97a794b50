"""Average-linkage (UPGMA) agglomerative clustering of a full distance matrix, in NumPy.

The merges are found by the nearest-neighbour chain algorithm (Murtagh, 1983), exact for
average linkage because it is reducible: merging a reciprocal nearest-neighbour pair never
brings the merged cluster nearer to a third cluster than either part was. The chain follows
nearest neighbours until two clusters are each other's nearest, merges them, and updates the
distances by Lance–Williams, ``d(a∪b, k) = (|a| d(a, k) + |b| d(b, k)) / (|a| + |b|)``.
Each step touches one row, so the whole run is O(n²) time and memory. The merges come out
of order; sorted by height and renumbered they form a linkage matrix in SciPy's layout.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["average_linkage", "cut_linkage"]

FloatArray = NDArray[np.float64]


def average_linkage(distances: FloatArray) -> FloatArray:
    """Average-linkage hierarchy of ``n`` items from their pairwise distances.

    Parameters
    ----------
    distances : ndarray of shape (n, n), float64
        Symmetric, finite, non-negative; the diagonal is ignored. Not modified.

    Returns
    -------
    ndarray of shape (n − 1, 4), float64
        Row i merges clusters ``Z[i, 0]`` and ``Z[i, 1]`` (items are 0..n−1, the cluster
        formed at row i is n + i; the smaller id first) at height ``Z[i, 2]``, into a
        cluster of ``Z[i, 3]`` items. Heights are non-decreasing — SciPy's layout, as
        ``scipy.cluster.hierarchy.linkage(method="average")`` returns.
    """
    D = np.array(distances, dtype=np.float64)
    n = D.shape[0]
    if D.ndim != 2 or D.shape[1] != n:
        raise ValueError(f"distances must be a square matrix; got shape {D.shape}.")
    if not np.isfinite(D).all():
        raise ValueError("distances must be finite.")
    merges = _nearest_neighbour_chain(D)
    return _relabel(merges, n)


def _nearest_neighbour_chain(D: FloatArray) -> list[tuple[int, int, float]]:
    """Merges as (slot, slot, height) in the order found; D is overwritten.

    A merged cluster lives on in the slot of one of its parts, so every slot is an item of
    the cluster it holds: :func:`_relabel` can find the clusters again from the items.
    """
    n = D.shape[0]
    np.fill_diagonal(D, np.inf)
    size = np.ones(n)
    active = np.ones(n, dtype=bool)
    merges: list[tuple[int, int, float]] = []
    chain: list[int] = []
    for _ in range(n - 1):
        if not chain:
            chain.append(int(np.flatnonzero(active)[0]))
        while True:
            a = chain[-1]
            b = int(np.argmin(D[a]))
            # On ties keep the chain's previous cluster: otherwise the chain could cycle.
            if len(chain) > 1 and D[a, chain[-2]] <= D[a, b]:
                b = chain[-2]
            if len(chain) > 1 and b == chain[-2]:
                break
            chain.append(b)
        chain.pop()
        chain.pop()
        height = float(D[a, b])
        keep, drop = max(a, b), min(a, b)
        merges.append((drop, keep, height))
        combined = (size[a] * D[a] + size[b] * D[b]) / (size[a] + size[b])
        combined[~active] = np.inf
        D[keep, :] = combined
        D[:, keep] = combined
        D[keep, keep] = np.inf
        D[drop, :] = np.inf
        D[:, drop] = np.inf
        size[keep] += size[drop]
        active[drop] = False
    return merges


def _relabel(merges: list[tuple[int, int, float]], n: int) -> FloatArray:
    """Sort merges by height (stably) and name clusters as SciPy does, by union-find."""
    Z = np.zeros((max(n - 1, 0), 4))
    if not merges:
        return Z
    heights = np.array([m[2] for m in merges])
    parent = np.arange(2 * n - 1)
    cluster_of = np.arange(n)  # the current cluster id of the set each root item leads
    size = np.ones(2 * n - 1)

    def root(item: int) -> int:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = int(parent[item])
        return item

    for row, index in enumerate(np.argsort(heights, kind="stable")):
        x, y, height = merges[index]
        root_x, root_y = root(x), root(y)
        id_x, id_y = int(cluster_of[root_x]), int(cluster_of[root_y])
        new = n + row
        size[new] = size[id_x] + size[id_y]
        Z[row] = (min(id_x, id_y), max(id_x, id_y), height, size[new])
        parent[root_x] = root_y
        cluster_of[root_y] = new
    return Z


def cut_linkage(Z: FloatArray, n_clusters: int) -> NDArray[np.int64]:
    """Flat labels from the first ``n − n_clusters`` merges of a linkage matrix.

    Returns
    -------
    ndarray of shape (n,), int64
        Labels 0..n_clusters−1, numbered in order of each cluster's first item.
    """
    n = Z.shape[0] + 1
    if not 1 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be in [1, {n}]; got {n_clusters}.")
    parent = np.arange(2 * n - 1)
    for row in range(n - n_clusters):
        left, right = int(Z[row, 0]), int(Z[row, 1])
        parent[left] = parent[right] = n + row
    # Follow each item up to the last cluster formed before the cut; ids only grow upward.
    top = np.arange(n)
    while True:
        lifted = parent[top]
        if np.array_equal(lifted, top):
            break
        top = lifted
    _, first, inverse = np.unique(top, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # rank of each cluster by its first item
    return order[inverse.ravel()].astype(np.int64)
