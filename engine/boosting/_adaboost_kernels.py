"""One AdaBoost round's bookkeeping over the rows: the weighted error and the new weights.

After its weak learner is fitted, a round of discrete AdaBoost (Freund and Schapire 1997;
SAMME, Zhu et al. 2009) passes over every training row twice: once to find the rows the
learner misclassifies and their total weight ε, once to multiply each weight by e^{α} or by
the correct rows' factor and renormalise. As NumPy expressions those were six passes and
three temporaries of the row count, a tenth of a 200-stump fit on 80,000 rows; compiled,
they are the two passes.

Each kernel has its NumPy twin (``COPPICE_ENGINE_KERNELS=numpy``). The twins sum with
NumPy's pairwise summation and the kernels one row after another, so sums, and the weights
divided by them, agree to rounding (the tests allow (n − 1)·2⁻⁵³ relative, the bound on
sequential summation of non-negative terms) rather than to the bit.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel, select

__all__ = ["misclassified", "reweighted"]


@kernel
def _misclassified_compiled(
    predicted: NDArray[np.int64],
    y: NDArray[np.int64],
    weights: NDArray[np.float64],
    incorrect: NDArray[np.bool_],
) -> float:
    error = 0.0
    for i in range(y.size):
        wrong = predicted[i] != y[i]
        incorrect[i] = wrong
        if wrong:
            error += weights[i]
    return error


def _misclassified_numpy(
    predicted: NDArray[np.int64],
    y: NDArray[np.int64],
    weights: NDArray[np.float64],
    incorrect: NDArray[np.bool_],
) -> float:
    np.not_equal(predicted, y, out=incorrect)
    return float(weights[incorrect].sum())


_misclassified = select(_misclassified_compiled, _misclassified_numpy)


def misclassified(
    predicted: NDArray[np.int64], y: NDArray[np.int64], weights: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], float]:
    """The rows where ``predicted`` differs from ``y``, and their total weight ε."""
    incorrect = np.empty(y.size, dtype=np.bool_)
    error = _misclassified(predicted, y, weights, incorrect)
    return incorrect, float(error)


@kernel
def _reweighted_compiled(
    weights: NDArray[np.float64],
    incorrect: NDArray[np.bool_],
    incorrect_factor: float,
    correct_factor: float,
    out: NDArray[np.float64],
) -> None:
    total = 0.0
    for i in range(weights.size):
        value = weights[i] * (incorrect_factor if incorrect[i] else correct_factor)
        out[i] = value
        total += value
    for i in range(weights.size):
        out[i] /= total


def _reweighted_numpy(
    weights: NDArray[np.float64],
    incorrect: NDArray[np.bool_],
    incorrect_factor: float,
    correct_factor: float,
    out: NDArray[np.float64],
) -> None:
    np.multiply(weights, np.where(incorrect, incorrect_factor, correct_factor), out=out)
    out /= out.sum()


_reweighted = select(_reweighted_compiled, _reweighted_numpy)


def reweighted(
    weights: NDArray[np.float64],
    incorrect: NDArray[np.bool_],
    incorrect_factor: float,
    correct_factor: float,
) -> NDArray[np.float64]:
    """New weights, normalised to sum to one: each row's weight times ``incorrect_factor``
    where it is misclassified, ``correct_factor`` elsewhere."""
    out = np.empty_like(weights)
    _reweighted(weights, incorrect, float(incorrect_factor), float(correct_factor), out)
    return out
