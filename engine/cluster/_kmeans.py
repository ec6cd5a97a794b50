"""k-means: k-means++ seeding and Lloyd iterations, in NumPy.

Lloyd's algorithm alternates an assignment step (each row to its nearest centre) and an
update step (each centre to the weighted mean of its rows) until the assignment stops
changing or the centres move by less than a tolerance. The seeding is greedy k-means++
(Arthur and Vassilvitskii, 2007, with several candidates per centre): each new centre is
drawn with probability proportional to ``sample_weight · D(x)²``, D the distance to the
nearest centre chosen so far, and of ``2 + ⌊ln k⌋`` such draws the one that lowers the
weighted potential most is kept.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, Options, RandomStateValue
from engine._validation import (
    CompleteInputMixin,
    check_sample_weight,
    resolve_seed_sequence,
)
from engine.base import BaseEstimator
from engine.callbacks import INERTIA, Callback, ProgressEvent, notify

__all__ = ["ClusterMixin", "KMeans", "kmeans_plusplus", "lloyd", "squared_distances"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class CentresValue(Constraint):
    """Explicit initial centres: a 2-D array of finite numbers, one row per cluster."""

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str | bytes) or not hasattr(value, "__len__"):
            return False
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        return array.ndim == 2 and array.size > 0 and bool(np.isfinite(array).all())

    def describe(self) -> str:
        return "an array of initial centres of shape (n_clusters, n_features)"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}


class ClusterMixin:
    """What every clusterer shares: ``fit_predict`` and scikit-learn's clusterer tags."""

    _estimator_type = "clusterer"

    def fit_predict(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> IntArray:
        """Fit on ``X`` and return ``labels_``, shape (n_samples,), int64."""
        self.fit(X, y, sample_weight=sample_weight, callbacks=callbacks)  # type: ignore[attr-defined]
        return self.labels_  # type: ignore[attr-defined]

    def __sklearn_tags__(self) -> Any:
        # Only scikit-learn's own tooling calls this, so it may import scikit-learn.
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.estimator_type = "clusterer"
        tags.target_tags.required = False
        if hasattr(self, "transform"):
            tags.transformer_tags = TransformerTags()
        return tags


def squared_distances(
    X: FloatArray, centres: FloatArray, x_squared: FloatArray | None = None
) -> FloatArray:
    """Squared Euclidean distances, shape (n_samples, n_centres), never negative.

    Uses ``‖x‖² − 2 x·c + ‖c‖²`` (one matrix product); rounding can make that slightly
    negative for coincident points, hence the clip.
    """
    if x_squared is None:
        x_squared = np.einsum("ij,ij->i", X, X)
    c_squared = np.einsum("ij,ij->i", centres, centres)
    distances = x_squared[:, None] - 2.0 * (X @ centres.T) + c_squared[None, :]
    np.maximum(distances, 0.0, out=distances)
    return distances


def kmeans_plusplus(
    X: FloatArray, n_clusters: int, sample_weight: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Greedy k-means++ seeding; returns initial centres of shape (n_clusters, n_features).

    Rows of zero weight are never chosen (their D² mass is zero).
    """
    n_samples = X.shape[0]
    x_squared = np.einsum("ij,ij->i", X, X)
    n_trials = 2 + int(math.log(n_clusters))
    centres = np.empty((n_clusters, X.shape[1]))
    first = rng.choice(n_samples, p=sample_weight / sample_weight.sum())
    centres[0] = X[first]
    closest = squared_distances(X, centres[:1], x_squared)[:, 0]
    for c in range(1, n_clusters):
        mass = np.cumsum(sample_weight * closest)
        if mass[-1] <= 0.0:  # fewer distinct points than clusters: any row will do
            centres[c:] = X[rng.choice(n_samples, n_clusters - c)]
            break
        draws = rng.uniform(size=n_trials) * mass[-1]
        candidates = np.minimum(np.searchsorted(mass, draws), n_samples - 1)
        to_candidates = squared_distances(X, X[candidates], x_squared).T
        np.minimum(to_candidates, closest[None, :], out=to_candidates)
        best = int(np.argmin(to_candidates @ sample_weight))
        centres[c] = X[candidates[best]]
        closest = to_candidates[best]
    return centres


def _update_centres(
    X: FloatArray,
    sample_weight: FloatArray,
    labels: IntArray,
    distances: FloatArray,
    previous: FloatArray,
) -> FloatArray:
    """Weighted mean of each cluster's rows; an empty cluster takes the worst-fitted row."""
    n_clusters = previous.shape[0]
    weight = np.bincount(labels, weights=sample_weight, minlength=n_clusters)
    weighted = X * sample_weight[:, None]
    sums = np.column_stack(
        [np.bincount(labels, weights=column, minlength=n_clusters) for column in weighted.T]
    )
    centres = previous.copy()
    filled = weight > 0
    centres[filled] = sums[filled] / weight[filled, None]
    empty = np.flatnonzero(~filled)
    if empty.size:
        # As scikit-learn does: the rows farthest from their centre seed the empty clusters.
        own = distances[np.arange(labels.size), labels] * (sample_weight > 0)
        farthest = np.argsort(own, kind="stable")[::-1][: empty.size]
        centres[empty[: farthest.size]] = X[farthest]
    return centres


def lloyd(
    X: FloatArray,
    sample_weight: FloatArray,
    centres: FloatArray,
    max_iter: int,
    tol: float,
) -> tuple[FloatArray, IntArray, float, int]:
    """Lloyd iterations from ``centres``.

    Stops when the assignment no longer changes, or when the centres move by a total
    squared distance of at most ``tol`` (absolute), or after ``max_iter`` iterations.

    Returns
    -------
    centres : ndarray of shape (n_clusters, n_features)
    labels : ndarray of shape (n_samples,), int64, each row's nearest final centre
    inertia : float, Σ_i w_i ‖x_i − c_{label_i}‖²
    n_iter : int
    """
    x_squared = np.einsum("ij,ij->i", X, X)
    previous_labels = np.full(X.shape[0], -1, dtype=np.int64)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007  (n_iter is reported)
        distances = squared_distances(X, centres, x_squared)
        labels = distances.argmin(axis=1).astype(np.int64)
        updated = _update_centres(X, sample_weight, labels, distances, centres)
        shift = float(((updated - centres) ** 2).sum())
        centres = updated
        if np.array_equal(labels, previous_labels):
            converged = True
            break
        if shift <= tol:
            break
        previous_labels = labels
    if not converged:  # the centres moved after the last assignment: assign once more
        labels = squared_distances(X, centres, x_squared).argmin(axis=1).astype(np.int64)
    inertia = float(((X - centres[labels]) ** 2).sum(axis=1) @ sample_weight)
    return centres, labels, inertia, n_iter


class KMeans(ClusterMixin, CompleteInputMixin, BaseEstimator):
    """k-means clustering (Lloyd's algorithm, k-means++ seeding).

    Parameters
    ----------
    n_clusters : int
        Number of clusters k.
    init : {"k-means++", "random"} or array of shape (n_clusters, n_features)
        Seeding: greedy k-means++, k distinct rows drawn with probability proportional to
        their weight, or the given centres (then a single run, whatever ``n_init``).
    n_init : int
        Independent seeded runs; the one of lowest inertia is kept.
    max_iter : int
        Lloyd iterations per run.
    tol : float
        Convergence when the centres move by a total squared distance of at most
        ``tol × mean feature variance of X`` (scale-free, as in scikit-learn).
    random_state : None, int or Generator

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features), float64
    labels_ : ndarray of shape (n_samples,), int64
    inertia_ : float
        Weighted sum of squared distances of the rows to their centre.
    n_iter_ : int
        Iterations of the kept run.
    n_features_in_ : int
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_clusters": [Interval("int", 1, None)],
        "init": [Options(("k-means++", "random")), CentresValue()],
        "n_init": [Interval("int", 1, None)],
        "max_iter": [Interval("int", 1, None)],
        "tol": [Interval("real", 0.0, None)],
        "random_state": [RandomStateValue()],
    }

    cluster_centers_: FloatArray
    labels_: IntArray
    inertia_: float
    n_iter_: int
    n_features_in_: int

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Any = "k-means++",
        n_init: int = 10,
        max_iter: int = 300,
        tol: float = 1e-4,
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> KMeans:
        """Cluster ``X`` (n_samples, n_features); ``y`` is ignored.

        ``callbacks`` receive one event per run (``done`` of ``n_init``) with the best
        inertia so far.
        """
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        weights = check_sample_weight(sample_weight, X.shape[0])
        n_samples, n_features = X.shape
        if n_samples < self.n_clusters:
            raise ValueError(f"n_samples={n_samples} should be >= n_clusters={self.n_clusters}.")
        explicit = None if isinstance(self.init, str) else self._explicit_centres(n_features)
        n_runs = 1 if explicit is not None else self.n_init
        tol = self.tol * float(np.var(X, axis=0).mean())
        seeds = resolve_seed_sequence(self.random_state).spawn(n_runs)
        best: tuple[FloatArray, IntArray, float, int] | None = None
        for run, seed in enumerate(seeds, start=1):
            rng = np.random.default_rng(seed)
            start = explicit if explicit is not None else self._seed_centres(X, weights, rng)
            result = lloyd(X, weights, start, self.max_iter, tol)
            if best is None or result[2] < best[2]:
                best = result
            notify(callbacks, ProgressEvent(type(self).__name__, run, n_runs, {INERTIA: best[2]}))
        assert best is not None
        self.cluster_centers_, self.labels_, self.inertia_, self.n_iter_ = best
        self.n_features_in_ = n_features
        return self

    def _explicit_centres(self, n_features: int) -> FloatArray:
        centres = np.array(self.init, dtype=np.float64)
        if centres.shape != (self.n_clusters, n_features):
            raise ValueError(
                f"init has shape {centres.shape}; it should be (n_clusters, n_features) = "
                f"({self.n_clusters}, {n_features})."
            )
        return centres

    def _seed_centres(
        self, X: FloatArray, weights: FloatArray, rng: np.random.Generator
    ) -> FloatArray:
        if self.init == "k-means++":
            return kmeans_plusplus(X, self.n_clusters, weights, rng)
        positive = np.flatnonzero(weights > 0)
        if positive.size < self.n_clusters:
            raise ValueError(
                f"init='random' needs {self.n_clusters} rows of positive weight; "
                f"{positive.size} have one."
            )
        p = weights[positive] / weights[positive].sum()
        return X[rng.choice(positive, self.n_clusters, replace=False, p=p)].copy()

    def transform(self, X: Any) -> FloatArray:
        """Euclidean distance of every row to every centre, shape (n_samples, n_clusters)."""
        X = self._check_complete_X(X, fitted=True)
        return np.sqrt(squared_distances(X, self.cluster_centers_))

    def fit_transform(
        self,
        X: Any,
        y: Any = None,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> FloatArray:
        """Fit, then the distances of ``X`` to the centres, shape (n_samples, n_clusters)."""
        return self.fit(X, y, sample_weight=sample_weight, callbacks=callbacks).transform(X)

    def predict(self, X: Any) -> IntArray:
        """Index of the nearest centre, shape (n_samples,), int64."""
        X = self._check_complete_X(X, fitted=True)
        return squared_distances(X, self.cluster_centers_).argmin(axis=1).astype(np.int64)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Minus the inertia of ``X`` under the fitted centres (higher is better)."""
        X = self._check_complete_X(X, fitted=True)
        weights = check_sample_weight(sample_weight, X.shape[0])
        nearest = squared_distances(X, self.cluster_centers_).argmin(axis=1)
        return -float(((X - self.cluster_centers_[nearest]) ** 2).sum(axis=1) @ weights)
