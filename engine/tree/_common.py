"""What every stage of the tree code agrees on: bin-code widths, the missing-value code, bin
limits and the dtypes passed between binning, histograms, split search, partition and traversal.

scikit-learn's histogram gradient boosting keeps the same facts in one place
(``sklearn/ensemble/_hist_gradient_boosting/common.pyx``) so that no stage hard-codes them; a
stage that wrote ``255`` where it meant "the missing code" would silently misread the 16-bit
codes of exact binning. Here:

* Histogram binning (``max_bins`` ≤ :data:`MAX_BINS`) gives *narrow* codes, ``uint8``, with
  the last code :data:`MISSING_BIN` (255) for missing values, as LightGBM (Ke et al. 2017)
  and XGBoost's ``hist`` method (Chen and Guestrin 2016, §3.3) bin features.
* Exact binning (one bin per distinct value, XGBoost's exact greedy algorithm, Chen and
  Guestrin 2016, §3.1) gives *wide* codes, ``uint16``, when a feature has more than
  :data:`MAX_BINS` distinct values; missing values then take :data:`WIDE_MISSING_BIN`.

Code that receives codes reads the width from their dtype (:func:`missing_code`,
:func:`n_codes`) rather than assuming either.

Compiled kernels read some of these constants as globals, which Numba freezes into their
machine code; the kernel cache is keyed on the kernel modules and the engine modules they
import (:func:`engine._kernels.kernel_source_files`), this one among them, so a change here
recompiles the kernels that use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "BITSET_BYTES",
    "BITSET_DTYPE",
    "HISTOGRAM_CODES",
    "HISTOGRAM_DTYPE",
    "MAX_BINS",
    "MAX_EXACT_BINS",
    "MISSING_BIN",
    "NARROW_CODE_DTYPE",
    "N_CATEGORY_CODES",
    "WIDE_CODE_DTYPE",
    "WIDE_MISSING_BIN",
    "X_DTYPE",
    "code_bits",
    "code_dtype",
    "missing_code",
    "n_codes",
]

# -- bin codes ----------------------------------------------------------------------------

NARROW_CODE_DTYPE = np.dtype(np.uint8)
WIDE_CODE_DTYPE = np.dtype(np.uint16)
# The missing-value code of each width: the largest code its dtype holds.
MISSING_BIN = int(np.iinfo(NARROW_CODE_DTYPE).max)  # 255
WIDE_MISSING_BIN = int(np.iinfo(WIDE_CODE_DTYPE).max)  # 65535
# Bins for present values that narrow codes hold beside the missing code (codes 0..254); also
# the most categories a categorical feature may have, in either width.
MAX_BINS = MISSING_BIN
# Distinct values per feature that wide codes hold beside the missing code (exact binning).
MAX_EXACT_BINS = WIDE_MISSING_BIN


def code_dtype(n_bins: int) -> np.dtype[Any]:
    """The narrowest code dtype for features of at most ``n_bins`` present bins each."""
    return NARROW_CODE_DTYPE if n_bins <= MAX_BINS else WIDE_CODE_DTYPE


def code_bits(dtype: np.dtype[Any]) -> int:
    """Bits of a bin code: 8 for histogram binning, 16 for exact binning's wide codes."""
    return 8 * int(np.dtype(dtype).itemsize)


def n_codes(dtype: np.dtype[Any]) -> int:
    """How many codes the dtype holds, the missing code included (256 or 65,536)."""
    return 1 << code_bits(dtype)


def missing_code(dtype: np.dtype[Any]) -> int:
    """The missing-value code of codes of this dtype: the last one (255 or 65535)."""
    return n_codes(dtype) - 1


# -- histograms and categorical splits ----------------------------------------------------

# Cells per feature of a dense node histogram: one per narrow code, the missing code last.
# Dense histograms are kept for narrow codes only; 65,536 cells per feature would cost more
# than the rows they summarise.
HISTOGRAM_CODES = n_codes(NARROW_CODE_DTYPE)
# A cell holds the bin's row count, then its channel sums; float64 counts are exact up to 2⁵³.
HISTOGRAM_DTYPE = np.dtype(np.float64)
# A categorical split's bitset has a bit per narrow code: categories take codes below
# MAX_BINS in either width, so 256 bits hold every category.
N_CATEGORY_CODES = n_codes(NARROW_CODE_DTYPE)
BITSET_DTYPE = np.dtype(np.uint8)
BITSET_BYTES = N_CATEGORY_CODES // 8

# -- raw values -----------------------------------------------------------------------------

# Raw feature values, bin edges (thresholds) and bin representatives.
X_DTYPE = np.dtype(np.float64)
