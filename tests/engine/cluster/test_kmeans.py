"""KMeans: parity with scikit-learn from the same centres, weights, seeding and the contract."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans as SkKMeans

from engine import load_model, save_model
from engine._params import InvalidParameterError
from engine.base import NotFittedError, clone
from engine.callbacks import ProgressEvent
from engine.cluster import KMeans, adjusted_rand_score


def _blobs(
    seed: int = 0, n_per: int = 40, centres: tuple[tuple[float, float], ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = centres or ((0.0, 0.0), (6.0, 0.0), (0.0, 6.0))
    X = np.vstack([rng.normal(c, 1.0, (n_per, 2)) for c in centres])
    return X, np.repeat(np.arange(len(centres)), n_per)


def _overlapping(seed: int) -> np.ndarray:
    # Overlapping clusters in 3-D, so that Lloyd needs several iterations.
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(c, 1.5, (50, 3)) for c in rng.normal(0, 2.0, (4, 3))])


@pytest.mark.parametrize("seed", range(4))
def test_lloyd_matches_scikit_learn_from_the_same_centres(seed: int) -> None:
    X = _overlapping(seed)
    rng = np.random.default_rng(100 + seed)
    k = 3 + seed % 3
    init = X[rng.choice(X.shape[0], k, replace=False)]
    # tol=0: both iterate until the assignment stops changing, the same fixed point.
    ours = KMeans(k, init=init, tol=0.0).fit(X)
    theirs = SkKMeans(k, init=init, n_init=1, tol=0.0, algorithm="lloyd").fit(X)
    # The same arithmetic up to the order of summation: agreement to ~1e-12 relative.
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-9)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, atol=1e-9)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    assert ours.n_iter_ == theirs.n_iter_ and ours.n_iter_ > 1


def test_weighted_lloyd_matches_scikit_learn() -> None:
    X = _overlapping(7)
    weights = np.random.default_rng(1).uniform(0.1, 3.0, X.shape[0])
    init = X[:4]
    ours = KMeans(4, init=init, tol=0.0).fit(X, sample_weight=weights)
    theirs = SkKMeans(4, init=init, n_init=1, tol=0.0).fit(X, sample_weight=weights)
    assert ours.inertia_ == pytest.approx(theirs.inertia_, rel=1e-9)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, atol=1e-9)


def test_integer_weights_are_repeated_rows() -> None:
    X = _overlapping(3)
    counts = np.random.default_rng(2).integers(1, 4, X.shape[0])
    init = X[[0, 60, 120]]
    weighted = KMeans(3, init=init, tol=0.0).fit(X, sample_weight=counts)
    repeated = KMeans(3, init=init, tol=0.0).fit(np.repeat(X, counts, axis=0))
    np.testing.assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, atol=1e-10)
    assert weighted.inertia_ == pytest.approx(repeated.inertia_, rel=1e-10)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_recovers_well_separated_blobs(init: str) -> None:
    X, truth = _blobs()
    model = KMeans(3, init=init, n_init=5, random_state=0).fit(X)
    assert adjusted_rand_score(truth, model.labels_) == 1.0
    best = SkKMeans(3, n_init=10, random_state=0).fit(X)
    # Both find the global optimum of these separated blobs.
    assert model.inertia_ == pytest.approx(best.inertia_, rel=1e-9)


def test_prediction_transform_and_score_agree_with_the_fit() -> None:
    X, _ = _blobs(1)
    model = KMeans(3, random_state=0).fit(X)
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    distances = model.transform(X)
    assert distances.shape == (X.shape[0], 3)
    np.testing.assert_array_equal(distances.argmin(axis=1), model.labels_)
    assert model.score(X) == pytest.approx(-model.inertia_, rel=1e-12)
    assert (distances.min(axis=1) ** 2).sum() == pytest.approx(model.inertia_, rel=1e-12)
    np.testing.assert_array_equal(KMeans(3, random_state=0).fit_predict(X), model.labels_)
    np.testing.assert_allclose(KMeans(3, random_state=0).fit_transform(X), distances)


def test_seeding_is_reproducible_and_n_init_keeps_the_best() -> None:
    X = _overlapping(5)
    first = KMeans(5, n_init=1, random_state=3).fit(X)
    again = KMeans(5, n_init=1, random_state=3).fit(X)
    np.testing.assert_array_equal(first.cluster_centers_, again.cluster_centers_)
    events: list[ProgressEvent] = []
    model = KMeans(5, n_init=6, init="random", random_state=0).fit(X, callbacks=[events.append])
    best = [e.metrics["inertia"] for e in events]
    assert [e.done for e in events] == list(range(1, 7))
    assert best == sorted(best, reverse=True)  # the best so far never worsens
    assert model.inertia_ == best[-1]


def test_an_empty_cluster_is_reseeded() -> None:
    X, _ = _blobs(2)
    # The third centre is far from every row: it gets no rows in the first assignment.
    init = np.array([[0.0, 0.0], [6.0, 0.0], [100.0, 100.0]])
    model = KMeans(3, init=init).fit(X)
    assert np.isfinite(model.cluster_centers_).all()
    assert np.bincount(model.labels_, minlength=3).min() > 0


def test_round_trip_and_parameters() -> None:
    X, _ = _blobs(3)
    model = KMeans(3, n_init=2, random_state=0).fit(X)
    restored = load_model(save_model(model))
    assert type(restored) is KMeans
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    np.testing.assert_array_equal(restored.cluster_centers_, model.cluster_centers_)
    assert restored.inertia_ == model.inertia_
    assert restored.get_params() == model.get_params()
    explicit = KMeans(2, init=np.array([[0.0, 0.0], [1.0, 1.0]])).fit(X)
    np.testing.assert_array_equal(load_model(save_model(explicit)).init, explicit.init)
    copy = clone(model).set_params(n_clusters=4)
    assert copy.n_clusters == 4 and not hasattr(copy, "labels_")


def test_invalid_input_is_refused() -> None:
    X, _ = _blobs()
    with pytest.raises(InvalidParameterError) as info:
        KMeans(0).fit(X)
    assert info.value.parameter == "n_clusters"
    with pytest.raises(InvalidParameterError):
        KMeans(3, init="forgy").fit(X)
    with pytest.raises(ValueError, match="init has shape"):
        KMeans(3, init=np.zeros((2, 2))).fit(X)
    with pytest.raises(ValueError, match="n_clusters"):
        KMeans(5).fit(X[:4])
    with pytest.raises(ValueError, match="missing values"):
        KMeans(2).fit(np.array([[0.0, np.nan], [1.0, 1.0], [2.0, 2.0]]))
    with pytest.raises(NotFittedError):
        KMeans(2).predict(X)
    with pytest.raises(ValueError, match="features"):
        KMeans(2, random_state=0).fit(X).predict(np.zeros((2, 3)))
