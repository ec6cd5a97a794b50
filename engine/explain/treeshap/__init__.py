"""Path-dependent TreeSHAP for one tree, twice: Numba kernels and their NumPy twins.

:mod:`engine.explain.treeshap.models` explains a model as a sum of trees (every family's
description registers in :mod:`engine.explain._tree_sums`; :mod:`engine.shap` keeps the public
names); the rest of this package explains a single tree. ``compiled`` wraps the kernels of ``kernels`` (a per-leaf Gauss–Legendre evaluation over
the flat node arrays); ``vectorised`` is the NumPy twin, which works on the padded leaf paths
of ``paths``. ``explain_tree`` is whichever of the two ``COPPICE_ENGINE_KERNELS`` selects.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from engine._kernels import select
from engine.explain.treeshap import compiled, vectorised
from engine.tree._tree import Tree

__all__ = ["expected_value", "explain_tree"]

ExplainTree = Callable[[Tree, NDArray[np.float64]], tuple[NDArray[np.float64], NDArray[np.float64]]]
ExpectedValue = Callable[[Tree], NDArray[np.float64]]

# SHAP values (n_samples, n_features, n_outputs) and expected value (n_outputs,) of one tree.
explain_tree: ExplainTree = select(compiled.explain_tree, vectorised.explain_tree)
# The tree's cover-weighted mean output, shape (n_outputs,).
expected_value: ExpectedValue = select(compiled.expected_value, vectorised.expected_value)
