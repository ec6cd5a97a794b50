"""Average linkage: a hand-worked hierarchy, SciPy parity (when installed) and flat cuts."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cluster import adjusted_rand_score, average_linkage, cut_linkage


def _distances(X: np.ndarray) -> np.ndarray:
    return np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1))


def test_hierarchy_by_hand() -> None:
    # Points 0, 1, 5, 11 on a line. Merge {0, 1} at 1; then {5} with {0, 1} at the average
    # (5 + 4) / 2 = 4.5, against 6 to point 11; last {0, 1, 5} with {11} at (11 + 10 + 6) / 3.
    X = np.array([[0.0], [1.0], [5.0], [11.0]])
    Z = average_linkage(_distances(X))
    expected = [[0, 1, 1.0, 2], [2, 4, 4.5, 3], [3, 5, 9.0, 4]]
    np.testing.assert_allclose(Z, expected)
    np.testing.assert_array_equal(cut_linkage(Z, 2), [0, 0, 0, 1])
    np.testing.assert_array_equal(cut_linkage(Z, 3), [0, 0, 1, 2])
    np.testing.assert_array_equal(cut_linkage(Z, 4), [0, 1, 2, 3])
    np.testing.assert_array_equal(cut_linkage(Z, 1), [0, 0, 0, 0])


@pytest.mark.parametrize("n", [2, 7, 60, 250])
def test_matches_scipy_average_linkage(n: int) -> None:
    hierarchy = pytest.importorskip("scipy.cluster.hierarchy")
    distance = pytest.importorskip("scipy.spatial.distance")
    X = np.random.default_rng(n).normal(size=(n, 3))
    condensed = distance.pdist(X)
    theirs = hierarchy.linkage(condensed, method="average")
    ours = average_linkage(distance.squareform(condensed))
    # The same Lance–Williams updates in the same order; only the rounding of the weighted
    # averages could differ, at ~1e-16 of distances of order 1.
    np.testing.assert_allclose(ours[:, 2], theirs[:, 2], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(ours[:, [0, 1, 3]], theirs[:, [0, 1, 3]])
    for k in (2, min(5, n)):
        flat = hierarchy.fcluster(theirs, k, criterion="maxclust")
        assert adjusted_rand_score(cut_linkage(ours, k), flat) == 1.0


def test_input_is_checked_and_not_modified() -> None:
    D = _distances(np.arange(4.0)[:, None])
    original = D.copy()
    average_linkage(D)
    np.testing.assert_array_equal(D, original)
    with pytest.raises(ValueError, match="square"):
        average_linkage(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        average_linkage(np.full((3, 3), np.inf))
    with pytest.raises(ValueError, match="n_clusters"):
        cut_linkage(average_linkage(D), 5)
