"""AdaBoost's round kernels against their NumPy twins and against the formulas they fuse.

The kernels add one row after another, the twins and the formulas with NumPy's pairwise
summation, so sums agree to the bound on summing n non-negative terms in any order,
(n − 1)·2⁻⁵³ relative (Higham 2002, §4.2), not to the bit; masks agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.boosting import _adaboost_kernels as kernels
from engine.boosting._adaboost import next_weights, normalise, reweight

MISCLASSIFIED = {
    "compiled": kernels._misclassified_compiled,
    "numpy": kernels._misclassified_numpy,
}
REWEIGHTED = {"compiled": kernels._reweighted_compiled, "numpy": kernels._reweighted_numpy}


def round_inputs(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n).astype(np.int64)
    predicted = np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), y).astype(np.int64)
    weights = rng.random(n) ** 3  # spread over several binades, as late-round weights are
    return predicted, y, weights / weights.sum()


def summation_tolerance(n: int) -> float:
    return max(n - 1, 1) * 2.0**-53


@pytest.mark.parametrize("implementation", MISCLASSIFIED)
@pytest.mark.parametrize("n", [1, 7, 1_000, 50_000])
@pytest.mark.parametrize("seed", range(5))
def test_misclassified_rows_and_their_weight(implementation: str, n: int, seed: int) -> None:
    predicted, y, weights = round_inputs(seed, n)
    incorrect = np.ones(n, dtype=bool)  # every cell must be written, not left as it was
    error = MISCLASSIFIED[implementation](predicted, y, weights, incorrect)
    np.testing.assert_array_equal(incorrect, predicted != y)
    expected = math.fsum(weights[predicted != y])  # correctly rounded
    assert error == pytest.approx(expected, rel=summation_tolerance(n), abs=1e-300)


@pytest.mark.parametrize("implementation", REWEIGHTED)
@pytest.mark.parametrize("alpha", ["half", "full"])
@pytest.mark.parametrize("n", [1, 7, 1_000, 50_000])
@pytest.mark.parametrize("seed", range(5))
def test_reweighted_is_the_normalised_update(
    implementation: str, alpha: str, n: int, seed: int
) -> None:
    predicted, y, weights = round_inputs(seed, n)
    incorrect = predicted != y
    alpha_m = 0.2 + seed / 10
    correct_factor = math.exp(-alpha_m) if alpha == "half" else 1.0
    out = np.full(n, np.nan)
    REWEIGHTED[implementation](weights, incorrect, math.exp(alpha_m), correct_factor, out)
    expected = normalise(reweight(weights, incorrect, alpha_m, alpha))
    # Each weight is the same product divided by a total that differs by the summation
    # bound, plus the division's own rounding.
    np.testing.assert_allclose(out, expected, rtol=summation_tolerance(n) + 2.0**-52, atol=0)
    assert math.fsum(out) == pytest.approx(1.0, rel=summation_tolerance(n) + 2.0**-52)


def test_the_loop_update_moves_weight_to_the_misclassified_rows() -> None:
    """Freund and Schapire's update on seven rows, two misclassified, ε = 2/7: each half of
    the weight goes to each side, so the two wrong rows hold 1/4 each."""
    weights = np.full(7, 1 / 7)
    incorrect = np.array([0, 0, 0, 1, 1, 0, 0], dtype=bool)
    alpha_m = 0.5 * math.log((1 - 2 / 7) / (2 / 7))
    for alpha, a in (("half", alpha_m), ("full", 2 * alpha_m)):
        updated = next_weights(weights, incorrect, a, alpha)
        np.testing.assert_allclose(updated, [0.1, 0.1, 0.1, 0.25, 0.25, 0.1, 0.1], rtol=1e-15)
