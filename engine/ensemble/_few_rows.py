"""A tree ensemble's mean member output for a few plain rows, in one compiled call.

A server predicts a row or two at a time, and between its requests the processor's caches
have let NumPy and the forest go: each NumPy call ``predict`` makes then costs 10-50 µs
(checking the input, encoding categories, the division), more than descending 100 trees.
Rows that need nothing from those calls (a C-contiguous float64 matrix of the model's width,
fewer than one predict thread takes, no categorical column) skip them: the infinity check,
the walk and the mean are one kernel, with the same bits as the general path. Anything else,
an infinity included (refused there with its message), takes the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine.tree.predict.packing import MIN_ROWS_PER_THREAD

if TYPE_CHECKING:
    from engine.ensemble._tree_ensemble import BaseTreeEnsemble

__all__ = ["NUMERIC_ROWS_KEY", "few_rows_mean_output"]

# Where the ensemble keeps whether its rows need no encoding (no categorical column), set
# with the packed trees: reading the mapper's mask on every call is one more NumPy call.
NUMERIC_ROWS_KEY = "_numeric_rows"
_FLOAT64 = np.dtype(np.float64)


def few_rows_mean_output(ensemble: BaseTreeEnsemble, X: Any) -> NDArray[np.float64] | None:
    """``ensemble._mean_member_output(ensemble._prepare(X))`` to the bit when ``X`` is a few
    plain rows (see the module docstring); None when the general path must answer."""
    if not (
        type(X) is np.ndarray
        and X.ndim == 2
        and 0 < X.shape[0] < MIN_ROWS_PER_THREAD
        and X.dtype == _FLOAT64
        and X.flags.c_contiguous
    ):
        return None
    state = ensemble.__dict__
    if not state.get(NUMERIC_ROWS_KEY) or (ensemble._classification and ensemble._hard_voting):
        return None
    if X.shape[1] != state.get("n_features_in_") or "members_" not in state:
        return None
    packed = ensemble._packed()
    return None if packed is None else packed.finite_leaf_value_mean(X)
