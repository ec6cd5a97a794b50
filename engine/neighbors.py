"""k-nearest-neighbour classification and regression, brute force in NumPy.

Distances are Minkowski (``p``) and computed one block of query rows at a time, so memory
stays bounded (``_CHUNK_BYTES``) whatever the number of queries. ``sample_weight`` in ``fit``
weights each neighbour's vote (classifier) or its share of the average (regressor); rows of
zero weight are dropped, so a zero weight means the same as leaving the row out. scikit-learn's
kNN takes no sample weights, so parity with it holds for unit weights.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, Options
from engine._targets import encode_labels
from engine._validation import CompleteInputMixin, check_sample_weight, check_target
from engine.base import BaseEstimator, ClassifierMixin, RegressorMixin, check_is_fitted
from engine.callbacks import Callback, ProgressEvent, notify

__all__ = ["KNeighborsClassifier", "KNeighborsRegressor", "minkowski_neighbours"]

_CHUNK_BYTES = 16 * 2**20  # the largest temporary block of one chunk, in bytes


def minkowski_neighbours(
    queries: NDArray[np.float64], reference: NDArray[np.float64], k: int, p: float
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Distances and indices of the ``k`` rows of ``reference`` nearest each query.

    Parameters
    ----------
    queries : ndarray of shape (n_queries, n_features), float64, no NaN
    reference : ndarray of shape (n_reference, n_features), float64, no NaN
    k : int
        1 ≤ k ≤ n_reference.
    p : float
        Minkowski power, ≥ 1 (2 is Euclidean, 1 Manhattan, inf Chebyshev).

    Returns
    -------
    distances : ndarray of shape (n_queries, k), float64, ascending
    indices : ndarray of shape (n_queries, k), intp; ties ordered by reference index
    """
    n_reference, n_features = reference.shape
    euclidean = p == 2
    per_row = n_reference + k * n_features if euclidean else n_reference * n_features
    chunk = max(1, _CHUNK_BYTES // (8 * max(per_row, 1)))
    reference_norms = np.einsum("ij,ij->i", reference, reference)
    distances = np.empty((queries.shape[0], k))
    indices = np.empty((queries.shape[0], k), dtype=np.intp)
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk]
        if euclidean:
            # ‖a‖² + ‖b‖² − 2a·b only ranks; the kept neighbours' distances are recomputed
            # exactly below, so cancellation never reaches the weights.
            score = np.einsum("ij,ij->i", block, block)[:, None] + reference_norms[None, :]
            score -= 2.0 * (block @ reference.T)
        elif np.isinf(p):
            score = np.abs(block[:, None, :] - reference[None, :, :]).max(axis=2)
        else:
            score = (np.abs(block[:, None, :] - reference[None, :, :]) ** p).sum(axis=2)
        if k < n_reference:
            candidates = np.argpartition(score, k - 1, axis=1)[:, :k]
        else:
            candidates = np.broadcast_to(np.arange(n_reference), score.shape).copy()
        exact = _exact_distances(block, reference, candidates, p)
        order = np.lexsort((candidates, exact), axis=1)
        indices[start : start + chunk] = np.take_along_axis(candidates, order, axis=1)
        distances[start : start + chunk] = np.take_along_axis(exact, order, axis=1)
    return distances, indices


def _exact_distances(
    block: NDArray[np.float64],
    reference: NDArray[np.float64],
    candidates: NDArray[np.intp],
    p: float,
) -> NDArray[np.float64]:
    differences = np.abs(reference[candidates] - block[:, None, :])
    if p == 2:
        return np.sqrt((differences**2).sum(axis=2))
    if p == 1:
        return differences.sum(axis=2)
    if np.isinf(p):
        return differences.max(axis=2)
    return (differences**p).sum(axis=2) ** (1.0 / p)


def _neighbour_weights(distances: NDArray[np.float64], scheme: str) -> NDArray[np.float64]:
    """Vote weight of each neighbour: 1, or 1/d with exact matches taking the whole vote."""
    if scheme == "uniform":
        return np.ones_like(distances)
    with np.errstate(divide="ignore"):
        inverse = 1.0 / distances
    exact = np.isinf(inverse)
    matched = exact.any(axis=1)
    inverse[matched] = exact[matched].astype(np.float64)
    return inverse


class _BaseNeighbors(CompleteInputMixin, BaseEstimator):
    n_neighbors: int
    weights: str
    p: float
    _fit_X: NDArray[np.float64]
    _fit_weight: NDArray[np.float64]
    n_features_in_: int
    n_samples_fit_: int

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "n_neighbors": [Interval("int", 1, None)],
        "weights": [Options(("uniform", "distance"))],
        "p": [Interval("real", 1.0, None)],
    }

    def _store(self, X: Any, y: Any, sample_weight: Any, *, classification: bool) -> NDArray[Any]:
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        target = check_target(y, X.shape[0], numeric=not classification)
        weights = check_sample_weight(sample_weight, X.shape[0])
        kept = weights > 0
        self._fit_X = np.ascontiguousarray(X[kept])
        self._fit_weight = weights[kept]
        self.n_features_in_ = X.shape[1]
        self.n_samples_fit_ = int(kept.sum())
        return target[kept]

    def kneighbors(self, X: Any) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
        """Distances and indices (into the rows of positive weight) of the ``n_neighbors``
        nearest training rows, each of shape (n_queries, n_neighbors)."""
        check_is_fitted(self, "_fit_X")
        X = self._check_complete_X(X, fitted=True)
        if self.n_neighbors > self.n_samples_fit_:
            raise ValueError(
                f"Expected n_neighbors <= n_samples_fit, but n_neighbors = {self.n_neighbors}, "
                f"n_samples_fit = {self.n_samples_fit_}, n_samples = {X.shape[0]}."
            )
        return minkowski_neighbours(X, self._fit_X, self.n_neighbors, float(self.p))

    def _vote_weights(self, X: Any) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
        distances, indices = self.kneighbors(X)
        return _neighbour_weights(distances, self.weights) * self._fit_weight[indices], indices


class KNeighborsClassifier(ClassifierMixin, _BaseNeighbors):
    """Classify by a (weighted) vote of the ``n_neighbors`` nearest training rows.

    Parameters
    ----------
    n_neighbors : int
    weights : {"uniform", "distance"}
        "distance" weights each vote by 1/distance (training rows at distance 0 take the
        whole vote).
    p : float
        Minkowski power, ≥ 1 (``float("inf")``: Chebyshev).

    Notes
    -----
    ``sample_weight`` multiplies each training row's vote. NaN inputs are refused.
    """

    classes_: NDArray[Any]
    _fit_y: NDArray[np.int64]

    def __init__(self, n_neighbors: int = 5, *, weights: str = "uniform", p: float = 2) -> None:
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.p = p

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> KNeighborsClassifier:
        labels = self._store(X, y, sample_weight, classification=True)
        classes, encoded = encode_labels(labels)
        notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
        self.classes_ = classes
        self._fit_y = encoded
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Vote shares, shape (n_samples, n_classes), rows summing to one."""
        votes, indices = self._vote_weights(X)
        n_queries, n_classes = indices.shape[0], self.classes_.size
        flat = (np.arange(n_queries)[:, None] * n_classes + self._fit_y[indices]).ravel()
        totals = np.bincount(flat, weights=votes.ravel(), minlength=n_queries * n_classes)
        totals = totals.reshape(n_queries, n_classes)
        return totals / totals.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> NDArray[Any]:
        winners = self.predict_proba(X).argmax(axis=1)
        return self.classes_[winners]


class KNeighborsRegressor(RegressorMixin, _BaseNeighbors):
    """Predict the (weighted) mean target of the ``n_neighbors`` nearest training rows.

    Parameters are those of :class:`KNeighborsClassifier`; ``sample_weight`` multiplies
    each training row's share of the average.
    """

    _fit_y: NDArray[np.float64]

    def __init__(self, n_neighbors: int = 5, *, weights: str = "uniform", p: float = 2) -> None:
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.p = p

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> KNeighborsRegressor:
        target = self._store(X, y, sample_weight, classification=False)
        notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
        self._fit_y = target.astype(np.float64)
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Weighted mean of the neighbours' targets, shape (n_samples,)."""
        votes, indices = self._vote_weights(X)
        return (votes * self._fit_y[indices]).sum(axis=1) / votes.sum(axis=1)
