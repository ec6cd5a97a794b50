"""Quantile binning of features into ``uint8`` codes.

Trees are grown on binned features: each numeric feature is cut into at most ``max_bins``
(≤ 255) intervals at quantiles of its values, each categorical feature maps its categories to
codes ``0..k-1``, and :data:`MISSING_BIN` (255) holds missing values. Split search then works
on small integers, and a split "bin ≤ b" is stored as the real threshold ``edges[b]`` so that
prediction reads raw values and never needs the binner again (categorical features excepted).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MISSING_BIN", "BinMapper"]

MISSING_BIN = 255
MAX_BINS = 255


class BinMapper:
    """Learns bin edges per feature and maps raw values to bin codes.

    Parameters
    ----------
    max_bins : int
        Number of bins for non-missing values, at most 255.
    subsample : int
        Quantiles are computed on at most this many rows (drawn with ``seed``).
    seed : int
        Seed for the subsample; binning happens once in the parent process.

    Attributes
    ----------
    is_categorical_ : ndarray of bool, shape (n_features,)
    n_bins_ : ndarray of int32, shape (n_features,)
        Non-missing bins used by each feature.
    thresholds_ : ndarray of float64, shape (n_features, 255)
        ``thresholds_[f, b]`` is the largest raw value in bins ``0..b`` of a numeric feature
        (the split "bin ≤ b" is ``x <= thresholds_[f, b]``); ``inf`` past the last edge.
    bin_values_ : ndarray of float64, shape (n_features, 256)
        A representative raw value per bin, in increasing order (used to draw random
        thresholds uniformly in value space for extremely randomised trees).
    categories_ : ndarray of float64, shape (n_features, 255)
        Known category values of categorical features, sorted, NaN-padded.
    """

    def __init__(self, max_bins: int = MAX_BINS, subsample: int = 200_000, seed: int = 0) -> None:
        if not 2 <= max_bins <= MAX_BINS:
            raise ValueError(f"max_bins must be in [2, {MAX_BINS}]; got {max_bins}.")
        self.max_bins = max_bins
        self.subsample = subsample
        self.seed = seed

    def fit(self, X: NDArray[np.float64], categorical: NDArray[np.bool_]) -> BinMapper:
        n_samples, n_features = X.shape
        if n_samples > self.subsample:
            rng = np.random.default_rng(self.seed)
            X = X[np.sort(rng.choice(n_samples, self.subsample, replace=False))]
        self.is_categorical_ = np.asarray(categorical, dtype=bool).copy()
        self.n_bins_ = np.zeros(n_features, dtype=np.int32)
        self.thresholds_ = np.full((n_features, MAX_BINS), np.inf)
        self.bin_values_ = np.full((n_features, MAX_BINS + 1), np.nan)
        self.categories_ = np.full((n_features, MAX_BINS), np.nan)
        for f in range(n_features):
            column = X[:, f]
            values = column[~np.isnan(column)]
            if self.is_categorical_[f]:
                self._fit_categorical(f, values)
            else:
                self._fit_numeric(f, values)
        return self

    def _fit_numeric(self, f: int, values: NDArray[np.float64]) -> None:
        distinct = np.unique(values)
        if distinct.size == 0:
            self.n_bins_[f] = 1
            self.bin_values_[f, 0] = 0.0
            return
        if distinct.size <= self.max_bins:
            low, high = distinct[:-1], distinct[1:]
            edges = (low + high) / 2.0
            # Rounding can push the midpoint of two adjacent floats onto the upper one,
            # which would bin that value low; the lower value is then the exact edge.
            edges = np.where(edges >= high, low, edges)
            representatives = distinct
        else:
            percentiles = np.linspace(0, 100, self.max_bins + 1)[1:-1]
            edges = np.unique(np.percentile(values, percentiles, method="midpoint"))
            edges = edges[edges < distinct[-1]]
            bounds = np.concatenate(([distinct[0]], edges, [distinct[-1]]))
            representatives = (bounds[:-1] + bounds[1:]) / 2.0
        n_edges = edges.size
        self.n_bins_[f] = n_edges + 1
        self.thresholds_[f, :n_edges] = edges
        self.bin_values_[f, : n_edges + 1] = representatives

    def _fit_categorical(self, f: int, values: NDArray[np.float64]) -> None:
        if values.size and ((values < 0).any() or (values != np.floor(values)).any()):
            raise ValueError(
                f"Categorical feature {f} must hold non-negative integer codes; "
                "encode categories as 0, 1, 2, … before fitting."
            )
        categories = np.unique(values)
        if categories.size > self.max_bins:
            raise ValueError(
                f"Categorical feature {f} has {categories.size} categories; at most "
                f"{self.max_bins} are supported."
            )
        k = max(categories.size, 1)
        self.n_bins_[f] = k
        self.categories_[f, : categories.size] = categories
        self.bin_values_[f, :k] = np.arange(k, dtype=np.float64)

    def transform(self, X: NDArray[np.float64]) -> NDArray[np.uint8]:
        """Bin codes, shape (n_samples, n_features), C-ordered ``uint8``."""
        binned = np.empty(X.shape, dtype=np.uint8)
        for f in range(X.shape[1]):
            column = X[:, f]
            if self.is_categorical_[f]:
                codes = self.encode_categories(f, column)
                binned[:, f] = np.where(np.isnan(codes), MISSING_BIN, codes).astype(np.uint8)
            else:
                n_edges = int(self.n_bins_[f]) - 1
                codes_int = np.searchsorted(self.thresholds_[f, :n_edges], column, side="left")
                codes_int[np.isnan(column)] = MISSING_BIN
                binned[:, f] = codes_int
        return binned

    def encode_categories(self, f: int, column: NDArray[np.float64]) -> NDArray[np.float64]:
        """Category codes of one categorical column as floats; NaN for missing or unseen."""
        known = self.categories_[f, : int(self.n_bins_[f])]
        known = known[~np.isnan(known)]
        if known.size == 0:
            return np.full(column.shape, np.nan)
        index = np.clip(np.searchsorted(known, column), 0, known.size - 1)
        seen = known[index] == column
        return np.where(seen, index.astype(np.float64), np.nan)

    def encode_for_prediction(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``X`` with categorical columns replaced by their codes (unseen → missing)."""
        if not self.is_categorical_.any():
            return X
        encoded = X.copy()
        for f in np.flatnonzero(self.is_categorical_):
            encoded[:, f] = self.encode_categories(int(f), X[:, f])
        return encoded


def categorical_mask(categorical_features: Any, n_features: int) -> NDArray[np.bool_]:
    """Normalise ``categorical_features`` (None, indices or boolean mask) to a mask."""
    mask = np.zeros(n_features, dtype=bool)
    if categorical_features is None:
        return mask
    values = np.asarray(categorical_features)
    if values.size == 0:
        return mask
    if values.dtype == bool:
        if values.shape != (n_features,):
            raise ValueError(
                f"categorical_features as a mask must have {n_features} entries; "
                f"got {values.shape[0]}."
            )
        return values.copy()
    indices = values.astype(np.int64)
    if (indices < 0).any() or (indices >= n_features).any():
        raise ValueError(
            f"categorical_features holds indices outside [0, {n_features - 1}]: "
            f"{sorted(set(indices[(indices < 0) | (indices >= n_features)].tolist()))}."
        )
    mask[indices] = True
    return mask
