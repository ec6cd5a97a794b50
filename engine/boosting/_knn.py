"""Exact k nearest neighbours in NumPy, in row chunks so memory stays bounded."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["nearest_neighbours"]

_CHUNK_BYTES = 32 * 2**20  # one chunk's distance block: at most 32 MiB of float64


def nearest_neighbours(
    queries: NDArray[np.float64], reference: NDArray[np.float64], k: int
) -> NDArray[np.intp]:
    """Indices of the ``k`` rows of ``reference`` nearest each query (Euclidean).

    Parameters
    ----------
    queries : ndarray of shape (n_queries, n_features), float64, no NaN
    reference : ndarray of shape (n_reference, n_features), float64, no NaN
    k : int
        1 ≤ k ≤ n_reference.

    Returns
    -------
    ndarray of shape (n_queries, k), intp
        Nearest first; equal distances among the k found are ordered by reference index
        (which of several rows tied at the k-th distance is kept is unspecified).
    """
    n_reference = reference.shape[0]
    reference_norms = np.einsum("ij,ij->i", reference, reference)
    chunk = max(1, _CHUNK_BYTES // (8 * max(n_reference, 1)))
    result = np.empty((queries.shape[0], k), dtype=np.intp)
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk]
        squared = (
            np.einsum("ij,ij->i", block, block)[:, None]
            + reference_norms[None, :]
            - 2.0 * (block @ reference.T)
        )
        np.maximum(squared, 0.0, out=squared)
        if k < n_reference:
            candidates = np.argpartition(squared, k - 1, axis=1)[:, :k]
        else:
            candidates = np.broadcast_to(np.arange(n_reference), (block.shape[0], n_reference))
        picked = np.take_along_axis(squared, candidates, axis=1)
        # Sort the k candidates by (distance, index) so ties resolve deterministically.
        order = np.lexsort((candidates, picked), axis=1)
        result[start : start + chunk] = np.take_along_axis(candidates, order, axis=1)
    return result
