"""Quantile binning of features into ``uint8`` codes.

Trees are grown on binned features: each numeric feature is cut into at most ``max_bins``
(≤ :data:`MAX_BINS`, 255) intervals at quantiles of its values, each categorical feature
maps its categories to codes ``0..k-1``, and :data:`MISSING_BIN` (255) holds missing values.
Split search then works on small integers, and a split "bin ≤ b" is stored as the real
threshold ``edges[b]`` so that prediction reads raw values and never needs the binner again
(categorical features excepted).

*Exact* binning (``exact=True``, XGBoost's ``tree_method="exact"``) gives every distinct value
of a numeric feature its own bin, with edges at the midpoints between consecutive values, so
that "bin ≤ b" enumerates exactly the thresholds of exact greedy split finding. When a feature
has more than 255 distinct values the codes are ``uint16`` and missing values take the code
65535; the split search reads the code width from the dtype. The widths, the missing codes and
the limits live in :mod:`engine.tree._common`.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._binning_kernels import bin_codes, present_values
from engine.tree._common import (
    MAX_BINS,
    MAX_EXACT_BINS,
    MISSING_BIN,
    X_DTYPE,
    code_dtype,
    missing_code,
)
from engine.tree._memo import LastMatrixMemo

# The limits are the common module's; estimators and tests read them from here too.
__all__ = ["MAX_BINS", "MAX_EXACT_BINS", "MISSING_BIN", "BinMapper", "has_missing_codes"]
# fit gathers the present values of this many entries of X at a time (32 MiB): one pass over
# the rows for a block of features, without holding a second copy of a wide X.
PRESENT_BLOCK_VALUES = 1 << 22


class BinMapper:
    """Learns bin edges per feature and maps raw values to bin codes.

    Parameters
    ----------
    max_bins : int
        Number of bins for non-missing values, at most ``MAX_BINS`` (255).
    subsample : int
        Quantiles are computed on at most this many rows (drawn with ``seed``).
    seed : int
        Seed for the subsample; binning happens once in the parent process.
    exact : bool
        One bin per distinct value of each numeric feature (at most ``MAX_EXACT_BINS``), from
        all rows; ``max_bins`` and ``subsample`` are then not used.

    Attributes
    ----------
    is_categorical_ : ndarray of bool, shape (n_features,)
    n_bins_ : ndarray of int32, shape (n_features,)
        Non-missing bins used by each feature.
    thresholds_ : ndarray of float64, shape (n_features, W) with W = max(255, bins − 1)
        ``thresholds_[f, b]`` is the largest raw value in bins ``0..b`` of a numeric feature
        (the split "bin ≤ b" is ``x <= thresholds_[f, b]``); ``inf`` past the last edge.
    bin_values_ : ndarray of float64, shape (n_features, W + 1)
        A representative raw value per bin, in increasing order (used to draw random
        thresholds uniformly in value space for extremely randomised trees).
    categories_ : ndarray of float64, shape (n_features, 255)
        Known category values of categorical features, sorted, NaN-padded.
    """

    exact: bool = False  # models saved before exact binning existed load with this default

    def __init__(
        self,
        max_bins: int = MAX_BINS,
        subsample: int = 200_000,
        seed: int = 0,
        exact: bool = False,
    ) -> None:
        if not 2 <= max_bins <= MAX_BINS:
            raise ValueError(f"max_bins must be in [2, {MAX_BINS}]; got {max_bins}.")
        self.max_bins = max_bins
        self.subsample = subsample
        self.seed = seed
        self.exact = exact

    def subsamples(self, n_rows: int) -> bool:
        """Whether :meth:`fit` on ``n_rows`` rows reads only a drawn subsample of them."""
        return n_rows > self.subsample and not self.exact

    def sample_rows(self, n_rows: int) -> NDArray[np.intp]:
        """The sorted indices of the rows :meth:`fit` reads from ``n_rows`` rows.

        All rows (``arange(n_rows)``) unless :meth:`subsamples`; otherwise the same seeded
        draw ``fit`` makes. A caller that holds its rows elsewhere (Parquet parts, Dask
        partitions) fetches these rows only, in this order, and passes them to
        :meth:`fit_sample`: the edges are then those of ``fit`` on the whole matrix, bit for
        bit, and the full float matrix never has to exist in one place.
        """
        if not self.subsamples(n_rows):
            return np.arange(n_rows, dtype=np.intp)
        rng = np.random.default_rng(self.seed)
        return np.sort(rng.choice(n_rows, self.subsample, replace=False)).astype(
            np.intp, copy=False
        )

    def fit_sample(
        self, X_sample: NDArray[np.float64], categorical: NDArray[np.bool_]
    ) -> BinMapper:
        """Fit from the rows :meth:`sample_rows` named, gathered in its order.

        ``X_sample`` must be exactly ``X[self.sample_rows(n_rows)]`` of the full matrix; the
        mapper is then the one ``fit(X)`` learns.
        """
        return self._fit_rows(X_sample, categorical)

    def fit(
        self,
        X: NDArray[np.float64],
        categorical: NDArray[np.bool_],
        threads: Executor | None = None,
    ) -> BinMapper:
        """Learn each feature's bins from ``X``; ``threads`` (optional) sort the features'
        values side by side (NumPy's sort releases the GIL), the same bins for any number."""
        if self.subsamples(X.shape[0]):
            X = X[self.sample_rows(X.shape[0])]
        return self._fit_rows(X, categorical, threads)

    def _fit_rows(
        self,
        X: NDArray[np.float64],
        categorical: NDArray[np.bool_],
        threads: Executor | None = None,
    ) -> BinMapper:
        n_features = X.shape[1]
        self.is_categorical_ = np.asarray(categorical, dtype=bool).copy()
        self.n_bins_ = np.zeros(n_features, dtype=np.int32)
        self.categories_ = np.full((n_features, MAX_BINS), np.nan)
        edges: list[NDArray[np.float64]] = []
        representatives: list[NDArray[np.float64]] = []
        X = np.asarray(X, dtype=X_DTYPE)
        block = max(1, PRESENT_BLOCK_VALUES // max(X.shape[0], 1))
        for first in range(0, n_features, block):
            last = min(first + block, n_features)
            # The block's values, gathered in one pass over X; then one sort per feature,
            # which is most of binning (LightGBM bins its features on OpenMP threads too).
            present, counts = present_values(X, first, last)
            args = [(f, present[f - first, : counts[f - first]]) for f in range(first, last)]
            if threads is None or len(args) < 2:
                found_all = [self._fit_feature(f, values) for f, values in args]
            else:
                found_all = list(threads.map(lambda arg: self._fit_feature(*arg), args))
            for f, found in zip(range(first, last), found_all, strict=True):
                edges.append(found[0])
                representatives.append(found[1])
                self.n_bins_[f] = found[1].size
        width = max([MAX_BINS, *(e.size for e in edges)])
        self.thresholds_ = np.full((n_features, width), np.inf)
        self.bin_values_ = np.full((n_features, width + 1), np.nan)
        for f in range(n_features):
            self.thresholds_[f, : edges[f].size] = edges[f]
            self.bin_values_[f, : representatives[f].size] = representatives[f]
        return self

    def _fit_feature(
        self, f: int, values: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if self.is_categorical_[f]:
            return self._fit_categorical(f, values)
        return self._fit_numeric(f, values)

    def _fit_numeric(
        self, f: int, values: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Bin edges and one representative value per bin of a numeric feature."""
        if values.size == 0:
            return np.zeros(0), np.zeros(1)
        # One sort gives the distinct values (as np.unique finds them) and the quantiles.
        ordered = np.sort(values)
        distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
        if self.exact and distinct.size > MAX_EXACT_BINS:
            raise ValueError(
                f"Feature {f} has {distinct.size} distinct values; exact binning holds at most "
                f"{MAX_EXACT_BINS}. Use histogram binning (tree_method='hist') for data this "
                "large."
            )
        if self.exact or distinct.size <= self.max_bins:
            low, high = distinct[:-1], distinct[1:]
            edges = (low + high) / 2.0
            # Rounding can push the midpoint of two adjacent floats onto the upper one,
            # which would bin that value low; the lower value is then the exact edge.
            edges = np.where(edges >= high, low, edges)
            representatives = distinct
        else:
            quantiles = np.linspace(0, 100, self.max_bins + 1)[1:-1] / 100
            edges = np.unique(midpoint_quantiles(ordered, quantiles))
            edges = edges[edges < distinct[-1]]
            bounds = np.concatenate(([distinct[0]], edges, [distinct[-1]]))
            representatives = (bounds[:-1] + bounds[1:]) / 2.0
        return edges, representatives

    def _fit_categorical(
        self, f: int, values: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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
        self.categories_[f, : categories.size] = categories
        return np.zeros(0), np.arange(k, dtype=np.float64)

    def transform(
        self, X: NDArray[np.float64], columns: slice | None = None
    ) -> NDArray[np.unsignedinteger[Any]]:
        """Bin codes, shape (n_samples, n_features), C-ordered: ``uint8`` with missing values
        at 255, or ``uint16`` with missing at 65535 when exact binning needs more bins.

        ``columns``: ``X`` holds only these of the features (their codes are those of the
        whole matrix, column for column: each feature is binned on its own). A reader of a
        table's parts bins a few columns at a time so, never a row group's every float.
        """
        dtype = code_dtype(int(self.n_bins_.max(initial=1)))
        binned = np.empty(X.shape, dtype=dtype)
        at = slice(None) if columns is None else columns
        n_bins = self.n_bins_[at].astype(np.intp)
        categorical = self.is_categorical_[at]
        categories = self.categories_[at]
        known = ~np.isnan(categories) & (np.arange(MAX_BINS) < n_bins[:, None])
        bin_codes(
            np.ascontiguousarray(X, dtype=X_DTYPE),
            self.thresholds_[at],
            np.where(categorical, 0, n_bins - 1),
            categories,
            np.where(categorical, known.sum(axis=1), 0),
            categorical,
            missing_code(dtype),
            binned,
        )
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


def midpoint_quantiles(
    ordered: NDArray[np.float64], quantiles: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``np.percentile(values, 100 * quantiles, method="midpoint")`` from the sorted values.

    The same bits as NumPy (its index and interpolation arithmetic, step for step), from the
    one sort that also gives the distinct values: ``np.percentile`` partitions a fresh copy
    around all 254 ranks, five times the cost of that sort.
    """
    n = ordered.size
    position = (n - 1) * quantiles
    virtual = 0.5 * (np.floor(position) + np.ceil(position))
    at_end = virtual >= n - 1
    below = np.where(at_end, n - 1, np.floor(virtual)).astype(np.intp)
    above = np.where(at_end, n - 1, below + 1)
    gamma = np.where(virtual % 1 == 0, 0.0, 0.5)
    low, high = ordered[below], ordered[above]
    step = high - low
    return np.where(gamma >= 0.5, high - step * (1 - gamma), low + step * gamma)


def _has_missing_codes(binned: NDArray[np.unsignedinteger[Any]]) -> bool:
    # A block at a time: the comparison's mask of the whole matrix (a byte a cell, 32 MiB of
    # 1.6 M x 20 codes) was the largest transient of a boosting fit's first tree.
    code = missing_code(binned.dtype)
    cells = binned.ravel(order="K")  # a view of a C- or Fortran-ordered matrix
    return any(
        bool((cells[start : start + _SCAN_CELLS] == code).any())
        for start in range(0, cells.size, _SCAN_CELLS)
    )


_SCAN_CELLS = 1 << 20


# Whether any code is the missing-value code of its dtype (255 or 65535). Asked once a tree;
# boosting rounds ask it of the same matrix, a pass over all of it each time.
has_missing_codes: LastMatrixMemo[bool] = LastMatrixMemo(_has_missing_codes)


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
