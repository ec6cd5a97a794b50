"""What a split search is given and what it returns, shared by every splitter.

:class:`SplitContext` holds what stays fixed while one tree grows (its rows' bins and
channels, the criterion, the leaf limits); :class:`Splits` is the best split of each node of
a batch, in one form for the vectorised, naive, compiled and random searches alike.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import code_bits, missing_code, n_codes
from engine.tree._criteria import Criterion

__all__ = ["SplitContext", "Splits"]


@dataclass(frozen=True)
class SplitContext:
    """What stays fixed while one tree grows.

    Attributes
    ----------
    binned : ndarray of uint8 or uint16, shape (n_rows, n_features)
        Bin codes of the tree's rows; the largest code of the dtype marks missing values.
        ``uint16`` codes come from exact binning (one bin per distinct value).
    channels : ndarray of float64, shape (n_rows, n_channels)
        Per-row statistics: weighted one-hot classes, or ``(w, w·y)`` for regression.
    is_categorical : ndarray of bool, shape (n_features,)
    bin_values : ndarray of float64, shape (n_features, n_bins_max + 1)
        Representative raw value per bin (for random thresholds).
    """

    binned: NDArray[np.unsignedinteger[Any]]
    channels: NDArray[np.float64]
    criterion: Criterion
    is_categorical: NDArray[np.bool_]
    bin_values: NDArray[np.float64]
    min_samples_leaf: int = 1
    min_weight_leaf: float = 0.0
    random_splits: bool = False
    n_bins: NDArray[np.int32] | None = None  # non-missing bins per feature
    classes: NDArray[np.int64] | None = None  # class index per row (classification)
    weights: NDArray[np.float64] | None = None  # weight per row (classification)
    has_missing: bool = True  # False lets kernels skip missing-value bookkeeping
    # Monotone constraint per feature (−1, 0, +1; Newton criterion only), None when all are 0.
    # Searches then also take each node's [lower, upper] weight bounds (engine.tree._monotone).
    monotone: NDArray[np.int8] | None = None
    # Threads the kernels may share a tree's work among (boosting's n_jobs); None = serial.
    threads: Executor | None = None
    # Builds the tree's histograms elsewhere, e.g. on a Dask cluster's row partitions
    # (engine.parallel's HistogramSource.tree); None = here, from ``binned``.
    remote_histograms: Any = None

    @property
    def code_bits(self) -> int:
        """Bits of a bin code: 8 for histogram binning, 16 for exact binning."""
        return code_bits(self.binned.dtype)

    @property
    def n_codes(self) -> int:
        """Codes of the tree's dtype, missing included: the width of ``Splits.left_codes``."""
        return n_codes(self.binned.dtype)

    @property
    def missing_code(self) -> int:
        """The missing-value code of the tree's codes (255, or 65535 for wide codes)."""
        return missing_code(self.binned.dtype)


@dataclass
class Splits:
    """The best split of each node in a batch of ``S`` nodes.

    ``left_codes[s, c]`` tells whether bin code ``c`` (the last = missing) goes left; it encodes
    numeric thresholds, categorical partitions and the missing direction in one table.
    """

    found: NDArray[np.bool_]
    gain: NDArray[np.float64]
    feature: NDArray[np.int64]
    bin: NDArray[np.int64]
    missing_left: NDArray[np.bool_]
    left_codes: NDArray[np.bool_]
