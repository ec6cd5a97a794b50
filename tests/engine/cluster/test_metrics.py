"""adjusted_rand_score: parity with scikit-learn, invariances and edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score as sk_adjusted_rand_score

from engine.cluster import adjusted_rand_score, contingency_matrix


@pytest.mark.parametrize("seed", range(8))
def test_matches_scikit_learn_on_random_labelings(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    a = rng.integers(0, int(rng.integers(1, 12)), n)
    b = rng.integers(0, int(rng.integers(1, 12)), n)
    # Near-agreeing labelings too, where the score is far from 0.
    c = np.where(rng.random(n) < 0.2, rng.integers(0, 5, n), a)
    for left, right in ((a, b), (a, c), (c, a)):
        # Both compute the same ratio; ours is one correctly rounded integer division, so
        # the two differ by rounding alone (a few ulps at most).
        assert adjusted_rand_score(left, right) == pytest.approx(
            sk_adjusted_rand_score(left, right), abs=1e-12
        )


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0, 0, 0, 0], [0, 0, 0, 0]),  # one cluster each: identical
        ([0, 1, 2, 3], [0, 1, 2, 3]),  # all singletons
        ([0, 0, 0, 0], [0, 1, 2, 3]),  # one cluster against singletons: 0
        ([0, 0, 1, 1], [1, 1, 0, 0]),  # renamed: 1
        ([0, 0, 1, 1], [0, 1, 0, 1]),  # crossed: below chance
        ([5], [7]),
        (["x", "y", "y", "z"], ["a", "a", "b", "b"]),
    ],
)
def test_edge_cases_match_scikit_learn(a: list[object], b: list[object]) -> None:
    assert adjusted_rand_score(a, b) == pytest.approx(sk_adjusted_rand_score(a, b), abs=1e-12)


def test_known_values_and_invariances() -> None:
    assert adjusted_rand_score([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    assert adjusted_rand_score([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, 100), rng.integers(0, 3, 100)
    renamed = np.array(["p", "q", "r", "s"])[a]
    assert adjusted_rand_score(a, b) == adjusted_rand_score(b, a)
    assert adjusted_rand_score(renamed, b) == adjusted_rand_score(a, b)


def test_contingency_matrix_and_errors() -> None:
    table = contingency_matrix([0, 0, 1, 2], ["a", "b", "b", "b"])
    np.testing.assert_array_equal(table, [[1, 1], [0, 1], [0, 1]])
    with pytest.raises(ValueError, match="length"):
        adjusted_rand_score([0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="1-D"):
        adjusted_rand_score([[0, 1]], [[0, 1]])
