"""Consensus clustering: a cluster ensemble combined through its co-association matrix.

A cluster ensemble (Strehl and Ghosh 2002) generates L partitions of the data, forms the
co-association matrix of each, ``m_ij = 1`` when rows i and j share a cluster, combines them
into one consensus matrix M and derives the final clustering from M. Here, as in Monti,
Tamayo, Mesirov and Golub's (2003) consensus clustering, each partition is k-means on a random
subsample (so the partitions differ), and ``M_ij`` is the fraction of the partitions that
sampled both rows in which the two share a cluster. The final partition is
average-linkage agglomerative clustering of the distances ``1 − M`` (Fred and Jain's 2005
"evidence accumulation"), cut at ``n_clusters``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue, RandomStateValue
from engine._validation import CompleteInputMixin, check_sample_weight, resolve_seed_sequence
from engine.base import BaseEstimator
from engine.callbacks import Callback, ProgressEvent, notify
from engine.cluster._kmeans import ClusterMixin, KMeans, squared_distances
from engine.cluster._linkage import average_linkage, cut_linkage
from engine.parallel import SharedData, make_executor

__all__ = ["ConsensusClustering"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class IntRange(Constraint):
    """An inclusive range of cluster counts ``(low, high)`` with ``1 <= low <= high``."""

    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or len(value) != 2:
            return False
        low, high = value
        integral = all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in (low, high)
        )
        return integral and 1 <= low <= high

    def describe(self) -> str:
        return "a pair (low, high) of integers with 1 <= low <= high"

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "minItems": 2,
            "maxItems": 2,
        }


class ConsensusClustering(ClusterMixin, CompleteInputMixin, BaseEstimator):
    """Cluster ensemble: k-means on subsamples, co-association matrix, average linkage.

    Parameters
    ----------
    n_clusters : int
        Clusters of the final partition.
    n_partitions : int
        L, the number of base partitions.
    subsample : float in (0, 1]
        Proportion of the rows each base partition clusters (drawn without replacement).
    k_range : (int, int) or None
        Each base partition draws its number of clusters uniformly from this inclusive
        range; None uses ``n_clusters`` for all. A range above ``n_clusters`` splits the
        data finely and lets the consensus find the larger structure.
    n_init, max_iter : int
        Passed to each base :class:`KMeans`.
    max_n_samples : int
        The fit holds a few (n, n) float64 matrices (8·n² bytes each); more rows than this
        are refused with an error rather than exhausting memory.
    random_state : None, int or Generator

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,), int64
        Final clusters, numbered in order of their first row.
    consensus_matrix_ : ndarray of shape (n_samples, n_samples), float64
        ``M_ij``: of the partitions that sampled both rows, the fraction putting them in
        one cluster (0 for a pair never sampled together; 1 on the diagonal of sampled
        rows).
    linkage_matrix_ : ndarray of shape (n_samples − 1, 4), float64
        The average-linkage hierarchy of ``1 − M`` in SciPy's layout.
    cluster_centers_ : ndarray of shape (n_clusters, n_features), float64
        Weighted mean of each final cluster's rows; :meth:`predict` assigns new rows to the
        nearest.
    partition_n_clusters_ : ndarray of shape (n_partitions,), int64
        The k of each base partition.
    partitions_ : ndarray of shape (n_partitions, n_samples), int64
        The base partitions: each row's cluster, −1 where the partition did not sample it.
    n_features_in_ : int
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_clusters": [Interval("int", 1, None)],
        "n_partitions": [Interval("int", 1, None)],
        "subsample": [Interval("real", 0.0, 1.0, closed="right")],
        "k_range": [IntRange(), NoneValue()],
        "n_init": [Interval("int", 1, None)],
        "max_iter": [Interval("int", 1, None)],
        "max_n_samples": [Interval("int", 2, None)],
        "random_state": [RandomStateValue()],
    }

    labels_: IntArray
    consensus_matrix_: FloatArray
    linkage_matrix_: FloatArray
    cluster_centers_: FloatArray
    partition_n_clusters_: IntArray
    partitions_: IntArray
    n_features_in_: int

    def __init__(
        self,
        n_clusters: int = 3,
        *,
        n_partitions: int = 50,
        subsample: float = 0.8,
        k_range: Any = None,
        n_init: int = 1,
        max_iter: int = 300,
        max_n_samples: int = 2000,
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_partitions = n_partitions
        self.subsample = subsample
        self.k_range = k_range
        self.n_init = n_init
        self.max_iter = max_iter
        self.max_n_samples = max_n_samples
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> ConsensusClustering:
        """Cluster ``X`` (n_samples, n_features); ``y`` is ignored.

        ``sample_weight`` weights the rows in the base k-means and in the final centres.
        ``callbacks`` receive one event per base partition.
        """
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        weights = check_sample_weight(sample_weight, X.shape[0])
        n_samples = X.shape[0]
        n_drawn = self._check_sizes(n_samples)
        together = np.zeros((n_samples, n_samples))
        sampled = np.zeros((n_samples, n_samples))
        ks = np.empty(self.n_partitions, dtype=np.int64)
        partitions = np.full((self.n_partitions, n_samples), -1, dtype=np.int64)
        seeds = resolve_seed_sequence(self.random_state).spawn(self.n_partitions)
        tasks = [
            _PartitionTask(seed, n_drawn, self.n_clusters, self.k_range, self.n_init, self.max_iter)
            for seed in seeds
        ]
        name = type(self).__name__
        # Serial here; inside engine.parallel_backend, each resample is a task on the cluster.
        shared = {"X": X, "sample_weight": weights}
        with make_executor(shared, None, len(tasks)) as executor:
            for done, result in enumerate(executor.map(_base_partition, tasks), start=1):
                self._add_partition(done, result, partitions, ks, together, sampled)
                notify(callbacks, ProgressEvent(name, done, self.n_partitions))
        consensus = np.divide(together, sampled, out=np.zeros_like(together), where=sampled > 0)
        del together, sampled
        linkage = average_linkage(1.0 - consensus)
        labels = cut_linkage(linkage, self.n_clusters)
        self.labels_ = labels
        self.consensus_matrix_ = consensus
        self.linkage_matrix_ = linkage
        self.cluster_centers_ = _centroids(X, weights, labels, self.n_clusters)
        self.partition_n_clusters_ = ks
        self.partitions_ = partitions
        self.n_features_in_ = X.shape[1]
        return self

    def _check_sizes(self, n_samples: int) -> int:
        """The rows each partition draws, after checking every size fits."""
        if n_samples > self.max_n_samples:
            gib = 8 * n_samples**2 / 2**30
            raise ValueError(
                f"ConsensusClustering holds (n_samples, n_samples) matrices; X has {n_samples} "
                f"rows, above max_n_samples={self.max_n_samples} ({gib:.2f} GiB per matrix). "
                "Raise max_n_samples if the memory is there, or cluster a sample of the rows."
            )
        if n_samples < self.n_clusters:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")
        n_drawn = max(1, math.floor(self.subsample * n_samples))
        largest_k = self.n_clusters if self.k_range is None else int(self.k_range[1])
        if largest_k > n_drawn:
            raise ValueError(
                f"A base partition of {largest_k} clusters needs at least {largest_k} rows; "
                f"subsample={self.subsample} draws {n_drawn}."
            )
        return n_drawn

    @staticmethod
    def _add_partition(
        done: int,
        result: tuple[IntArray, IntArray, int],
        partitions: IntArray,
        ks: IntArray,
        together: FloatArray,
        sampled: FloatArray,
    ) -> None:
        """Add the ``done``-th base partition to the co-clustering counts."""
        rows, labels, ks[done - 1] = result
        partitions[done - 1, rows] = labels
        membership = np.zeros((together.shape[0], int(ks[done - 1])))
        membership[rows, labels] = 1.0
        together += membership @ membership.T
        in_sample = np.zeros(together.shape[0])
        in_sample[rows] = 1.0
        sampled += np.outer(in_sample, in_sample)

    def predict(self, X: Any) -> IntArray:
        """The final cluster whose centre (in X space) is nearest, shape (n_samples,)."""
        X = self._check_complete_X(X, fitted=True)
        return squared_distances(X, self.cluster_centers_).argmin(axis=1).astype(np.int64)


def _centroids(X: FloatArray, weights: FloatArray, labels: IntArray, n_clusters: int) -> FloatArray:
    """Weighted mean of each cluster's rows (the plain mean where a cluster weighs nothing)."""
    centres = np.empty((n_clusters, X.shape[1]))
    for cluster in range(n_clusters):
        rows = labels == cluster
        w = weights[rows]
        centres[cluster] = np.average(X[rows], axis=0, weights=w if w.sum() > 0 else None)
    return centres


@dataclass(frozen=True)
class _PartitionTask:
    seed: np.random.SeedSequence
    n_drawn: int
    n_clusters: int
    k_range: Any
    n_init: int
    max_iter: int


def _base_partition(shared: SharedData, task: _PartitionTask) -> tuple[IntArray, IntArray, int]:
    """One k-means partition of a random subsample: (rows, their labels, k) (runs in a task)."""
    X, weights = shared["X"], shared["sample_weight"]
    rng = np.random.default_rng(task.seed)
    n_samples = X.shape[0]
    if task.n_drawn < n_samples:
        rows = np.sort(rng.choice(n_samples, task.n_drawn, replace=False))
    else:
        rows = np.arange(n_samples)
    if task.k_range is None:
        k = task.n_clusters
    else:
        k = int(rng.integers(int(task.k_range[0]), int(task.k_range[1]) + 1))
    kmeans = KMeans(
        k, n_init=task.n_init, max_iter=task.max_iter, random_state=int(rng.integers(2**32))
    )
    kmeans.fit(X[rows], sample_weight=weights[rows])
    return rows.astype(np.int64), kmeans.labels_, k
