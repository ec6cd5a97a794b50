"""ConsensusClustering: the co-association matrix, blob recovery, prediction and the contract."""

from __future__ import annotations

import numpy as np
import pytest

from engine import load_model, save_model
from engine._params import InvalidParameterError
from engine.callbacks import ProgressEvent
from engine.cluster import ConsensusClustering, adjusted_rand_score

CENTRES = ((0.0, 0.0), (8.0, 0.0), (0.0, 8.0))


def _blobs(seed: int = 0, n_per: int = 30) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(c, 1.0, (n_per, 2)) for c in CENTRES])
    return X, np.repeat(np.arange(3), n_per)


@pytest.mark.parametrize("k_range", [None, (3, 6)], ids=["fixed_k", "k_range"])
def test_recovers_three_separated_blobs_exactly(k_range: tuple[int, int] | None) -> None:
    X, truth = _blobs()
    model = ConsensusClustering(3, n_partitions=20, k_range=k_range, random_state=0).fit(X)
    assert adjusted_rand_score(truth, model.labels_) == 1.0
    # Labels are numbered by first row: the blobs come in order.
    np.testing.assert_array_equal(model.labels_, truth)
    M = model.consensus_matrix_
    same = truth[:, None] == truth[None, :]
    # With k >= 3, rows of different blobs (8σ apart) never share a k-means cluster.
    assert M[~same].max() == 0.0
    if k_range is None:
        assert M[same].min() == 1.0  # k = 3 on a subsample always finds the blobs
    else:
        assert 0.5 < M[same].mean() < 1.0  # finer partitions split blobs (here 0.75)


def test_coarse_partitions_merge_blobs_yet_the_consensus_separates_them() -> None:
    # k = 2 partitions must merge two blobs; which two varies, so across-blob consensus
    # stays low (here mean 0.08, at most 0.5) and the cut still finds the three blobs.
    X, truth = _blobs()
    model = ConsensusClustering(3, n_partitions=20, k_range=(2, 6), random_state=0).fit(X)
    same = truth[:, None] == truth[None, :]
    M = model.consensus_matrix_
    assert 0.0 < M[~same].mean() < 0.25 < M[same].mean()
    assert adjusted_rand_score(truth, model.labels_) == 1.0


def test_consensus_matrix_is_the_share_of_co_sampled_partitions() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))  # no structure: partitions disagree, M takes many values
    model = ConsensusClustering(2, n_partitions=12, subsample=0.6, random_state=0).fit(X)
    P = model.partitions_
    assert P.shape == (12, 40)
    assert ((P >= 0).sum(axis=1) == 24).all()  # floor(0.6 · 40) rows per partition
    expected = np.zeros((40, 40))
    for i in range(40):
        for j in range(40):
            both = (P[:, i] >= 0) & (P[:, j] >= 0)
            if both.any():
                expected[i, j] = np.mean(P[both, i] == P[both, j])
    np.testing.assert_allclose(model.consensus_matrix_, expected, atol=1e-15)
    assert len(np.unique(model.consensus_matrix_)) > 5


def test_final_partition_cuts_average_linkage_of_one_minus_consensus() -> None:
    hierarchy = pytest.importorskip("scipy.cluster.hierarchy")
    distance = pytest.importorskip("scipy.spatial.distance")
    X = np.random.default_rng(2).normal(size=(50, 2))
    model = ConsensusClustering(4, n_partitions=10, k_range=(3, 6), random_state=1).fit(X)
    D = 1.0 - model.consensus_matrix_
    np.fill_diagonal(D, 0.0)
    Z = hierarchy.linkage(distance.squareform(D, checks=False), method="average")
    np.testing.assert_allclose(model.linkage_matrix_[:, 2], Z[:, 2], atol=1e-12)


def test_predict_uses_the_centres_of_the_final_clusters() -> None:
    X, _ = _blobs(3)
    model = ConsensusClustering(3, n_partitions=10, random_state=0).fit(X)
    for c in range(3):
        np.testing.assert_allclose(model.cluster_centers_[c], X[model.labels_ == c].mean(axis=0))
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    new, new_truth = _blobs(4, n_per=10)
    assert adjusted_rand_score(new_truth, model.predict(new)) == 1.0
    np.testing.assert_array_equal(model.predict(np.array(CENTRES)), [0, 1, 2])


def test_sample_weight_moves_the_centres() -> None:
    X, _ = _blobs(5)
    weights = np.ones(X.shape[0])
    weights[0] = 50.0
    model = ConsensusClustering(3, n_partitions=5, random_state=0).fit(X, sample_weight=weights)
    cluster = model.labels_ == model.labels_[0]
    expected = np.average(X[cluster], axis=0, weights=weights[cluster])
    np.testing.assert_allclose(model.cluster_centers_[model.labels_[0]], expected)


def test_callbacks_round_trip_and_reproducibility() -> None:
    X, _ = _blobs(6)
    events: list[ProgressEvent] = []
    model = ConsensusClustering(3, n_partitions=4, k_range=[2, 4], random_state=3)
    model.fit(X, callbacks=[events.append])
    assert [(e.done, e.total) for e in events] == [(i, 4) for i in range(1, 5)]
    assert set(model.partition_n_clusters_) <= {2, 3, 4}
    again = ConsensusClustering(3, n_partitions=4, k_range=[2, 4], random_state=3).fit(X)
    np.testing.assert_array_equal(again.partitions_, model.partitions_)
    restored = load_model(save_model(model))
    assert type(restored) is ConsensusClustering
    np.testing.assert_array_equal(restored.consensus_matrix_, model.consensus_matrix_)
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert restored.get_params() == model.get_params()
    np.testing.assert_array_equal(model.fit_predict(X), model.labels_)


def test_size_limits_and_parameters() -> None:
    X, _ = _blobs()
    with pytest.raises(ValueError, match="max_n_samples=50"):
        ConsensusClustering(3, max_n_samples=50).fit(X)
    with pytest.raises(ValueError, match="needs at least"):
        ConsensusClustering(3, k_range=(2, 80), subsample=0.5).fit(X)
    with pytest.raises(InvalidParameterError) as info:
        ConsensusClustering(3, k_range=(4, 2)).fit(X)
    assert info.value.parameter == "k_range"
    with pytest.raises(InvalidParameterError):
        ConsensusClustering(3, subsample=0.0).fit(X)
    model = ConsensusClustering(3, max_n_samples=5000, n_partitions=2, random_state=0)
    assert model.set_params(n_partitions=3).n_partitions == 3
