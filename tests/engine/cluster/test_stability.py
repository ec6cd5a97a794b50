"""clustering_stability, Ben-Hur et al.'s (2002) model explorer: the true number of clusters is
the stablest."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cluster import adjusted_rand_score, clustering_stability


def _square_blobs(seed: int = 0) -> np.ndarray:
    # Four blobs on the corners of a square: 2 or 3 clusters must merge blobs, and which
    # blobs merge depends on the subsample, so only k = 4 is reproducible.
    rng = np.random.default_rng(seed)
    corners = [(0.0, 0.0), (6.0, 0.0), (0.0, 6.0), (6.0, 6.0)]
    return np.vstack([rng.normal(c, 0.7, (30, 2)) for c in corners])


def test_stability_peaks_at_the_true_number_of_clusters() -> None:
    X = _square_blobs()
    scores = clustering_stability(X, [2, 3, 4, 5, 6], n_pairs=10, random_state=0)
    assert list(scores) == [2, 3, 4, 5, 6]
    assert all(s.shape == (10,) for s in scores.values())
    means = {k: float(s.mean()) for k, s in scores.items()}
    assert max(means, key=means.__getitem__) == 4
    assert (scores[4] == 1.0).all()  # separated blobs: every pair of subsamples agrees
    assert max(v for k, v in means.items() if k != 4) < 0.95


def test_reproducible_and_custom_similarity() -> None:
    X = _square_blobs(1)
    first = clustering_stability(X, [3], n_pairs=4, random_state=5)
    again = clustering_stability(X, [3], n_pairs=4, random_state=5)
    np.testing.assert_array_equal(first[3], again[3])
    seen: list[int] = []

    def similarity(a: np.ndarray, b: np.ndarray) -> float:
        seen.append(a.size)
        return adjusted_rand_score(a, b)

    custom = clustering_stability(X, [3], n_pairs=4, random_state=5, similarity=similarity)
    np.testing.assert_array_equal(custom[3], first[3])
    # Two subsamples of 96 of 120 rows share at least 72 of them.
    assert len(seen) == 4 and min(seen) >= 72


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"candidate_k": [0]}, "integer >= 1"),
        ({"candidate_k": []}, "empty"),
        ({"candidate_k": [200]}, "cannot hold"),
        ({"candidate_k": [2], "fraction": 0.0}, "fraction"),
        ({"candidate_k": [2], "n_pairs": 0}, "n_pairs"),
        ({"candidate_k": [2], "similarity": "jaccard"}, "similarity"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clustering_stability(_square_blobs(), **kwargs)  # type: ignore[arg-type]
