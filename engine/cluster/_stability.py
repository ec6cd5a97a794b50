"""Clustering stability by paired subsamples: the "model explorer" of Ben-Hur, Elisseeff and
Guyon (2002).

For a candidate number of clusters c: draw two subsamples S₁ and S₂ of a proportion f of
the rows (without replacement), cluster each into c clusters, restrict both partitions to
the rows they share, S₁₂ = S₁ ∩ S₂, and record the similarity S(A(S₁₂), B(S₁₂)) of the two
restricted partitions; repeat L times. A number of clusters that matches real structure is
found again whatever the subsample, so its similarities crowd near 1; a wrong one splits or
merges clusters differently from subsample to subsample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_X, resolve_seed_sequence
from engine.cluster._kmeans import KMeans
from engine.cluster._metrics import adjusted_rand_score

__all__ = ["clustering_stability"]

Similarity = Callable[[NDArray[np.int64], NDArray[np.int64]], float]

SIMILARITIES: dict[str, Similarity] = {"adjusted_rand": adjusted_rand_score}


def clustering_stability(
    X: Any,
    candidate_k: Iterable[int],
    *,
    n_pairs: int = 20,
    fraction: float = 0.8,
    similarity: str | Similarity = "adjusted_rand",
    n_init: int = 1,
    random_state: Any = None,
) -> dict[int, NDArray[np.float64]]:
    """The distribution of partition similarities over subsample pairs, per candidate k.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete data (no NaN).
    candidate_k : iterable of int
        The numbers of clusters c to explore (each at least 1).
    n_pairs : int
        L, the pairs of subsamples per candidate.
    fraction : float in (0, 1]
        f, the proportion of rows in each subsample. Two independent subsamples share
        about f²·n rows; f = 0.8 keeps about 64 %.
    similarity : "adjusted_rand" or callable
        S(A, B) of two label arrays over the same rows; higher means more alike.
    n_init : int
        k-means runs per clustering (the best kept).
    random_state : None, int or Generator

    Returns
    -------
    dict of int to ndarray of shape (n_pairs,), float64
        The L similarities of each candidate, in the order the candidates were given.
        Their mean (or median) is the usual summary: the most stable k scores highest.
    """
    X = check_X(X, estimator="clustering_stability")
    if np.isnan(X).any():
        raise ValueError("clustering_stability does not accept missing values (NaN).")
    candidates = [_check_k(k) for k in candidate_k]
    if not candidates:
        raise ValueError("candidate_k is empty; give at least one number of clusters.")
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ValueError(f"n_pairs must be a positive integer; got {n_pairs!r}.")
    if isinstance(fraction, bool) or not 0.0 < float(fraction) <= 1.0:
        raise ValueError(f"fraction must be in (0, 1]; got {fraction!r}.")
    score = _similarity(similarity)
    n_samples = X.shape[0]
    n_drawn = max(1, math.floor(fraction * n_samples))
    too_many = [k for k in candidates if k > n_drawn]
    if too_many:
        raise ValueError(
            f"A subsample of {n_drawn} rows (fraction={fraction}) cannot hold {max(too_many)} "
            "clusters."
        )
    root = resolve_seed_sequence(random_state)
    result: dict[int, NDArray[np.float64]] = {}
    for k, k_seed in zip(candidates, root.spawn(len(candidates)), strict=True):
        scores = np.empty(n_pairs)
        for pair, seed in enumerate(k_seed.spawn(n_pairs)):
            rng = np.random.default_rng(seed)
            first = np.sort(rng.choice(n_samples, n_drawn, replace=False))
            second = np.sort(rng.choice(n_samples, n_drawn, replace=False))
            shared = np.intersect1d(first, second, assume_unique=True)
            labels_first = _cluster(X[first], k, n_init, rng)
            labels_second = _cluster(X[second], k, n_init, rng)
            # Both row lists are sorted, so searchsorted finds each shared row's position.
            scores[pair] = score(
                labels_first[np.searchsorted(first, shared)],
                labels_second[np.searchsorted(second, shared)],
            )
        result[k] = scores
    return result


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"Every candidate number of clusters must be an integer >= 1; got {k!r}.")
    return int(k)


def _similarity(similarity: str | Similarity) -> Similarity:
    if callable(similarity):
        return similarity
    if similarity not in SIMILARITIES:
        raise ValueError(
            f"similarity must be one of {sorted(SIMILARITIES)} or a callable; got {similarity!r}."
        )
    return SIMILARITIES[similarity]


def _cluster(X: NDArray[np.float64], k: int, n_init: int, rng: np.random.Generator) -> Any:
    model = KMeans(k, n_init=n_init, random_state=int(rng.integers(2**32)))
    return model.fit(X).labels_
