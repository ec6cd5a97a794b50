"""WerneckeCombiner: dominance by confidence intervals and the least wrong member, by hand
(Kuncheva §4.5.2)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.fusion import WerneckeCombiner
from engine.fusion._wernecke import wilson_interval

Z95 = 1.959963984540054  # the 97.5 % normal quantile

# 10 × (0,0,0) of class 0; (1,1,0): 3 of class 1, 1 of class 0; (0,1,1): 2 of class 1. N = 16.
S = np.array([[0, 0, 0]] * 10 + [[1, 1, 0]] * 4 + [[0, 1, 1]] * 2)
Y = np.array([0] * 10 + [1, 1, 1, 0] + [1, 1])

# P(error and D_i = s) by hand, in sixteenths: member 0 says 0 wrongly on the two (0,1,1)
# rows and 1 wrongly on one (1,1,0) row; member 1 is never wrong saying 0, once saying 1;
# member 2 is wrong saying 0 on the three class-1 rows of (1,1,0), never saying 1.
ERRORS_16THS = [[2, 1], [0, 1], [3, 0]]


def hand_wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def test_wilson_interval_matches_the_textbook_values() -> None:
    """0 of 10 at 95 %: (0, 0.2775) (the value printed in tables of the Wilson interval);
    other counts against the closed form written out above."""
    lower, upper = wilson_interval(np.array([0.0, 3.0, 2.0]), np.array([10.0, 4.0, 2.0]), Z95)
    assert lower[0] == 0.0 and upper[0] == pytest.approx(0.2775, abs=5e-5)
    for i, (k, n) in enumerate([(0, 10), (3, 4), (2, 2)]):
        assert (lower[i], upper[i]) == pytest.approx(hand_wilson(k, n), abs=1e-14)


def fitted(echo_members: Callable[..., Any], **kwargs: Any) -> WerneckeCombiner:
    return WerneckeCombiner(echo_members(3, S, Y), prefit=True, **kwargs).fit(S, Y)


def test_error_rates_are_the_hand_counts(echo_members: Callable[..., Any]) -> None:
    model = fitted(echo_members)
    np.testing.assert_allclose(model.error_rates_, np.array(ERRORS_16THS) / 16, rtol=1e-15)
    assert model.z_ == pytest.approx(Z95, rel=1e-12)


def test_only_the_large_pure_cell_dominates(echo_members: Callable[..., Any]) -> None:
    """(0,0,0): 10/10 has lower bound 0.72 > 0.28, the other class's upper bound.
    (0,1,1): 2/2 only reaches down to 0.34 while 0/2 reaches up to 0.66; (1,1,0): 3/4 spans
    0.30–0.95 and 1/4 0.05–0.70. The intervals of the hand formula say the same."""
    assert hand_wilson(10, 10)[0] > hand_wilson(0, 10)[1]
    assert hand_wilson(2, 2)[0] < hand_wilson(0, 2)[1]
    assert hand_wilson(3, 4)[0] < hand_wilson(1, 4)[1]
    model = fitted(echo_members)
    np.testing.assert_array_equal(model.cells_, [[0, 0, 0], [0, 1, 1], [1, 1, 0]])
    np.testing.assert_array_equal(model.dominant_, [True, False, False])


def test_labels(echo_members: Callable[..., Any]) -> None:
    """(0,0,0) by its cell; elsewhere the member least often wrong saying what it says:
    (0,1,1): errors 2, 1, 0 sixteenths -> member 2 says 1. (1,1,0): 1, 1, 3 -> member 0
    (first of the tie) says 1. Unseen (0,1,0): 2, 1, 3 -> member 1 says 1, against the
    majority vote; unseen (1,0,0): 1, 0, 3 -> member 1 says 0."""
    model = fitted(echo_members)
    queries = np.array([[0, 0, 0], [0, 1, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(model.predict(queries), [0, 1, 1, 1, 0])
    proba = model.predict_proba(queries)
    np.testing.assert_array_equal(proba, [[1, 0], [0, 1], [0, 1], [0, 1], [1, 0]])


def test_a_lower_confidence_lets_smaller_cells_dominate(echo_members: Callable[..., Any]) -> None:
    """At 50 % (z = 0.674) the intervals of 2/2 and 0/2 no longer overlap (0.68 > 0.32), nor
    do those of 3/4 and 1/4 (0.58 > 0.42): every cell dominates, and (1,1,0) is labelled 1 by
    its cell, with its frequencies as probabilities."""
    z = 0.6744897501960817
    assert hand_wilson(2, 2, z)[0] > hand_wilson(0, 2, z)[1]
    assert hand_wilson(3, 4, z)[0] > hand_wilson(1, 4, z)[1]
    model = fitted(echo_members, confidence=0.5)
    np.testing.assert_array_equal(model.dominant_, [True, True, True])
    np.testing.assert_allclose(model.predict_proba([[1, 1, 0]]), [[0.25, 0.75]])
