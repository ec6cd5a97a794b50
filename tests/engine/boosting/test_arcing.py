"""Arc-x4 (Breiman 1998) and RegionBoost (Maclin 1998): the formulas on hand examples, then
real fits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

import engine  # noqa: F401  (registers the engine's member classes for persistence)
from engine import BaggingClassifier
from engine.boosting import ArcX4Classifier, RegionBoostClassifier, _knn
from engine.boosting._arcing import arc_x4_probabilities, local_accuracy
from engine.boosting._knn import nearest_neighbours
from engine.callbacks import ProgressEvent
from engine.persistence import load_model, register_model_class, save_model
from engine.tree import DecisionTreeClassifier

RECORDED_WEIGHTS: list[np.ndarray] = []


class RecordingTree(DecisionTreeClassifier):
    """Remembers the sample weights of every fit (module level, so clone works)."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None, callbacks: Any = None) -> Any:
        RECORDED_WEIGHTS.append(np.array(sample_weight, dtype=float))
        return super().fit(X, y, sample_weight=sample_weight)


def _data(seed: int = 0, n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


# --- Arc-x4 ---------------------------------------------------------------------------------


def test_arc_x4_probabilities_by_hand() -> None:
    # m = (0, 1, 2, 0): 1 + m^4 = (1, 2, 17, 1), Z = 21.
    counts = np.array([0, 1, 2, 0])
    np.testing.assert_allclose(arc_x4_probabilities(counts), np.array([1, 2, 17, 1]) / 21)
    # Without the exponent (power=1), the plain count: (1, 2, 3, 1) / 7.
    np.testing.assert_allclose(arc_x4_probabilities(counts, power=1), np.array([1, 2, 3, 1]) / 7)
    # Row weights multiply: doubling row 0 gives (2, 2, 17, 1) / 22.
    weighted = arc_x4_probabilities(counts, sample_weight=[2, 1, 1, 1])
    np.testing.assert_allclose(weighted, np.array([2, 2, 17, 1]) / 22)


def test_arc_x4_reweights_by_misclassification_counts() -> None:
    """Round t + 1 sees p ∝ 1 + m(i)^4 with m counted over the first t members."""
    X, y = _data()
    RECORDED_WEIGHTS.clear()
    model = ArcX4Classifier(
        RecordingTree(max_depth=2), n_estimators=6, boosting_mode="reweight", random_state=0
    ).fit(X, y)
    counts = np.zeros(len(y), dtype=np.int64)
    for t, member in enumerate(model.estimators_):
        np.testing.assert_allclose(RECORDED_WEIGHTS[t], arc_x4_probabilities(counts))
        counts += member.predict(X) != y
    np.testing.assert_array_equal(model.misclassification_counts_, counts)
    assert counts.max() > 1  # hard rows were missed repeatedly, so the test is not vacuous


def test_arc_x4_votes_unweighted() -> None:
    X, y = _data()
    model = ArcX4Classifier(DecisionTreeClassifier(max_depth=2), n_estimators=7, random_state=0)
    model.fit(X, y)
    members = np.stack([m.predict(X) for m in model.estimators_], axis=1)
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], members.mean(axis=1))
    np.testing.assert_array_equal(model.predict(X), (members.mean(axis=1) > 0.5).astype(int))


def test_arc_x4_accuracy_is_comparable_to_bagging() -> None:
    """Breiman (1998) finds Arc-x4 at least as accurate as bagging; allow 3 points of noise."""
    X, y = load_breast_cancer(return_X_y=True)
    arc, bag = [], []
    for seed in range(2):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=seed, stratify=y)
        arc.append(
            ArcX4Classifier(n_estimators=25, random_state=seed).fit(X_tr, y_tr).score(X_te, y_te)
        )
        bagging = BaggingClassifier(n_estimators=25, random_state=seed).fit(X_tr, y_tr)
        bag.append(bagging.score(X_te, y_te))
    assert np.mean(arc) >= np.mean(bag) - 0.03
    assert np.mean(arc) > 0.9


# --- RegionBoost ----------------------------------------------------------------------------


def test_knn_matches_brute_force_in_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    reference, queries = rng.normal(size=(50, 3)), rng.normal(size=(23, 3))
    monkeypatch.setattr(_knn, "_CHUNK_BYTES", 8 * 50 * 4)  # four queries per chunk
    found = nearest_neighbours(queries, reference, 4)
    distances = ((queries[:, None, :] - reference[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(found, np.argsort(distances, axis=1, kind="stable")[:, :4])
    assert nearest_neighbours(queries, reference, 50).shape == (23, 50)


def test_region_weights_by_hand() -> None:
    """RegionBoost: a member's weight at x is its accuracy on x's K nearest rows.

    Training rows at 0, 1, 2, 10, 11, 12 on a line; member A is right on rows 0–2 only,
    member B on rows 2–5. With K = 3 the query 0.4 has neighbours {0, 1, 2}: A weighs 3/3,
    B 1/3. The query 10.6 has {10, 11, 12}: A 0, B 1. At 5.8 the neighbours are 2, 10 and
    1 (distances 3.8, 4.2, 4.8): A 2/3, B 2/3.
    """
    correct = np.array([[1, 0], [1, 0], [1, 1], [0, 1], [0, 1], [0, 1]], dtype=bool)
    train = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0]])
    queries = np.array([[0.4], [10.6], [5.8]])
    neighbours = nearest_neighbours(queries, train, 3)
    assert [sorted(row) for row in neighbours.tolist()] == [[0, 1, 2], [3, 4, 5], [1, 2, 3]]
    np.testing.assert_allclose(
        local_accuracy(correct, neighbours), [[1, 1 / 3], [0, 1], [2 / 3, 2 / 3]]
    )


def test_region_boost_votes_with_local_accuracy() -> None:
    """A fitted model's vote equals eq. 11 computed by brute force."""
    X, y = _data(n=120)
    model = RegionBoostClassifier(n_estimators=8, n_neighbors=7, random_state=0).fit(X, y)
    queries = _data(seed=5, n=30)[0]
    members = np.stack([m.predict(X) for m in model.estimators_], axis=1)
    members = np.where(model.estimator_reversed_, 1 - members, members)
    np.testing.assert_array_equal(model.correct_, members == y[:, None])
    distances = ((queries[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    near = np.argsort(distances, axis=1)[:, :7]
    weights = model.correct_[near].mean(axis=1)  # (30, T)
    np.testing.assert_allclose(model.member_weights(queries), weights)
    at_query = np.stack([m.predict(queries) for m in model.estimators_], axis=1)
    at_query = np.where(model.estimator_reversed_, 1 - at_query, at_query)
    votes = np.stack([(weights * (at_query == k)).sum(axis=1) for k in (0, 1)], axis=1)
    votes /= len(model.estimators_)
    shares = votes / votes.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(queries), shares)
    np.testing.assert_allclose(model.decision_function(queries), shares[:, 1] - shares[:, 0])
    np.testing.assert_array_equal(model.predict(queries), votes.argmax(axis=1))
    np.testing.assert_allclose(model.predict_proba(queries).sum(axis=1), 1.0)


def test_region_boost_learns_and_reports_progress() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0, stratify=y)
    events: list[ProgressEvent] = []
    model = RegionBoostClassifier(n_estimators=20, random_state=0)
    model.fit(X_tr, y_tr, callbacks=[events.append])
    assert model.score(X_te, y_te) > 0.9
    assert len(events) == len(model.estimators_)
    assert events[-1].metrics["train_error"] < events[0].metrics["train_error"] + 1e-12
    assert model.feature_importances_.sum() == pytest.approx(1.0)


def test_region_boost_tolerates_missing_values() -> None:
    X, y = _data()
    X[::7, 1] = np.nan
    model = RegionBoostClassifier(n_estimators=5, random_state=0).fit(X, y)
    assert np.isfinite(model.predict_proba(X)).all()


# --- persistence ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        ArcX4Classifier(n_estimators=5, random_state=0),
        RegionBoostClassifier(n_estimators=5, random_state=0),
    ],
    ids=repr,
)
def test_round_trip_predicts_identically(model: Any) -> None:
    for cls in (ArcX4Classifier, RegionBoostClassifier):
        register_model_class(cls)  # idempotent
    X, y = _data()
    model.fit(X, y)
    restored = load_model(save_model(model))
    assert type(restored) is type(model)
    np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
