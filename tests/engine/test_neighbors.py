"""k-nearest neighbours: parity with scikit-learn (unit weights), weighted votes, contract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes, load_iris, load_wine
from sklearn.neighbors import KNeighborsClassifier as SkKNeighborsClassifier
from sklearn.neighbors import KNeighborsRegressor as SkKNeighborsRegressor

import engine.neighbors
from engine import load_model, save_model
from engine.base import NotFittedError
from engine.neighbors import KNeighborsClassifier, KNeighborsRegressor, minkowski_neighbours
from engine.persistence import register_model_class

# Until engine/_model_classes.py lists these (registering is idempotent).
register_model_class(KNeighborsClassifier)
register_model_class(KNeighborsRegressor)


def split(loader: object) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X, y = loader(return_X_y=True)  # type: ignore[operator]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    order = np.random.default_rng(0).permutation(y.size)
    train, test = order[: y.size * 2 // 3], order[y.size * 2 // 3 :]
    return X[train], y[train], X[test], y[test]


@pytest.mark.parametrize("loader", [load_iris, load_wine])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_classifier_matches_scikit_learn(loader: object, weights: str, p: int) -> None:
    X, y, X_test, _ = split(loader)
    ours = KNeighborsClassifier(7, weights=weights, p=p).fit(X, y)
    theirs = SkKNeighborsClassifier(7, weights=weights, p=p, algorithm="brute").fit(X, y)
    np.testing.assert_array_equal(ours.predict(X_test), theirs.predict(X_test))
    np.testing.assert_allclose(ours.predict_proba(X_test), theirs.predict_proba(X_test), atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("p", [1, 2])
def test_regressor_matches_scikit_learn(weights: str, p: int) -> None:
    X, y, X_test, _ = split(load_diabetes)
    ours = KNeighborsRegressor(5, weights=weights, p=p).fit(X, y)
    theirs = SkKNeighborsRegressor(5, weights=weights, p=p, algorithm="brute").fit(X, y)
    np.testing.assert_allclose(ours.predict(X_test), theirs.predict(X_test), rtol=1e-12)
    distances, indices = ours.kneighbors(X_test)
    their_distances, their_indices = theirs.kneighbors(X_test)
    np.testing.assert_array_equal(indices, their_indices)
    np.testing.assert_allclose(distances, their_distances, rtol=1e-9)


def test_chebyshev_distance_matches_scikit_learn() -> None:
    # Continuous data: with a max over features, discrete columns would tie distances.
    rng = np.random.default_rng(4)
    X, y, X_test = rng.normal(size=(150, 4)), rng.normal(size=150), rng.normal(size=(60, 4))
    ours = KNeighborsRegressor(4, weights="distance", p=float("inf")).fit(X, y)
    theirs = SkKNeighborsRegressor(4, weights="distance", p=float("inf"), algorithm="brute")
    theirs.fit(X, y)
    np.testing.assert_allclose(ours.predict(X_test), theirs.predict(X_test), rtol=1e-12)


def test_chunked_search_equals_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    reference, queries = rng.normal(size=(200, 5)), rng.normal(size=(97, 5))
    for p in (1.0, 2.0, 1.5, np.inf):
        whole = minkowski_neighbours(queries, reference, 6, p)
        monkeypatch.setattr(engine.neighbors, "_CHUNK_BYTES", 8 * 200 * 5 * 3)
        chunked = minkowski_neighbours(queries, reference, 6, p)
        monkeypatch.undo()
        np.testing.assert_array_equal(chunked[1], whole[1])
        np.testing.assert_array_equal(chunked[0], whole[0])


def test_integer_weights_equal_repeated_rows_for_the_vote() -> None:
    # k = 1 keeps the neighbour sets equal (a repeated row would take several of k slots).
    X, y, X_test, _ = split(load_wine)
    counts = np.random.default_rng(3).integers(1, 4, size=y.size)
    weighted = KNeighborsClassifier(1).fit(X, y, sample_weight=counts)
    repeated = KNeighborsClassifier(1).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_array_equal(weighted.predict(X_test), repeated.predict(X_test))


def test_weights_scale_votes_and_zero_weight_rows_are_dropped() -> None:
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    y = np.array([0, 1, 1, 0])
    model = KNeighborsClassifier(3).fit(X, y, sample_weight=[5.0, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(model.predict_proba([[1.0]]), [[5 / 7, 2 / 7]])
    assert model.n_samples_fit_ == 3
    regressor = KNeighborsRegressor(2).fit(X[:2], [0.0, 3.0], sample_weight=[2.0, 1.0])
    np.testing.assert_allclose(regressor.predict([[0.5]]), [1.0])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_probabilities_sum_to_one_and_row_order_does_not_matter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(50, 3)), rng.integers(0, 3, size=50)
    queries = rng.normal(size=(20, 3))
    model = KNeighborsClassifier(4, weights="distance").fit(X, y)
    probabilities = model.predict_proba(queries)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    order = rng.permutation(50)
    shuffled = KNeighborsClassifier(4, weights="distance").fit(X[order], y[order])
    np.testing.assert_allclose(shuffled.predict_proba(queries), probabilities, atol=1e-12)


def test_contract_errors_and_persistence() -> None:
    X, y, X_test, _ = split(load_iris)
    with pytest.raises(NotFittedError):
        KNeighborsClassifier().predict(X_test)
    with pytest.raises(ValueError, match="n_neighbors <= n_samples_fit"):
        KNeighborsClassifier(500).fit(X, y).predict(X_test)
    broken = X.copy()
    broken[1, 1] = np.nan
    with pytest.raises(ValueError, match="KNeighborsClassifier does not accept missing values"):
        KNeighborsClassifier().fit(broken, y)
    with pytest.raises(ValueError, match="'weights' parameter"):
        KNeighborsClassifier(weights="gaussian").fit(X, y)
    model = KNeighborsClassifier(3, weights="distance").fit(X, y)
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict_proba(X_test), model.predict_proba(X_test))
