"""Weak learners of boosting: engine trees are grown on one binning of X per boosting fit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import engine  # noqa: F401  (registers the engine's member classes for persistence)
from engine.boosting import (
    AdaBoostClassifier,
    AdaBoostRegressor,
    ArcX4Classifier,
    RegionBoostClassifier,
)
from engine.boosting._adaboost import next_weights, normalise
from engine.boosting._weak import fit_weak_learner, share_bins, weighted_bootstrap_counts
from engine.persistence import load_model, model_manifest, save_model
from engine.tree import DecisionTreeClassifier, DecisionTreeRegressor
from engine.tree._binning import BinMapper


def data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 4] = rng.integers(0, 4, size=n)  # a categorical column for the models that ask
    X[rng.random(X.shape) < 0.03] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(np.int64)
    return X, y


@pytest.fixture
def binning_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every BinMapper.fit during the test."""
    calls: list[int] = []
    original = BinMapper.fit

    def counting_fit(self: BinMapper, X: np.ndarray, categorical: np.ndarray) -> BinMapper:
        calls.append(X.shape[0])
        return original(self, X, categorical)

    monkeypatch.setattr(BinMapper, "fit", counting_fit)
    return calls


TREE_BOOSTERS = [
    AdaBoostClassifier(n_estimators=12, random_state=0),
    AdaBoostClassifier(
        DecisionTreeClassifier(max_depth=2, categorical_features=[4]),
        n_estimators=8,
        boosting_mode="resample",
        random_state=0,
    ),
    ArcX4Classifier(DecisionTreeClassifier(max_depth=3), n_estimators=8, random_state=0),
    ArcX4Classifier(n_estimators=5, boosting_mode="reweight", random_state=0),
    RegionBoostClassifier(n_estimators=8, random_state=0),
    AdaBoostRegressor(n_estimators=8, random_state=0),
    AdaBoostRegressor(DecisionTreeRegressor(max_depth=2), boosting_mode="reweight", random_state=0),
]


@pytest.mark.parametrize("model", TREE_BOOSTERS, ids=lambda m: type(m).__name__)
def test_x_is_binned_once_per_fit_and_members_share_the_mapper(
    model: Any, binning_fits: list[int]
) -> None:
    X, y = data()
    target = np.nan_to_num(X[:, 0] + X[:, 2]) if "Regressor" in type(model).__name__ else y
    model.fit(X, target)
    assert binning_fits == [X.shape[0]]
    assert len(model.estimators_) > 1
    mapper = model.estimators_[0].bin_mapper_
    assert all(member.bin_mapper_ is mapper for member in model.estimators_)


def test_members_are_the_trees_a_hand_refit_grows() -> None:
    """Replaying AdaBoost's weights: each member is the tree ``_fit_binned`` grows on the
    shared bins with that round's weights, and — every weight being positive — the tree a
    plain ``fit`` grows too (its own binning then sees the same rows, hence the same edges)."""
    X, y = data(600, seed=3)
    X_new, _ = data(300, seed=4)
    model = AdaBoostClassifier(DecisionTreeClassifier(max_depth=2), n_estimators=10)
    model.set_params(random_state=7).fit(X, y)
    mapper = model.estimators_[0].bin_mapper_
    binned = mapper.transform(X)
    weights = np.full(X.shape[0], 1.0 / X.shape[0])
    for member, alpha_m, flipped in zip(
        model.estimators_, model.estimator_weights_, model.estimator_reversed_, strict=True
    ):
        on_shared = DecisionTreeClassifier(**member.get_params())
        on_shared._fit_binned(mapper, binned, y, sample_weight=weights)
        plain = DecisionTreeClassifier(**member.get_params()).fit(X, y, sample_weight=weights)
        for tree in (on_shared, plain):
            np.testing.assert_array_equal(tree.tree_.nodes, member.tree_.nodes)
            np.testing.assert_array_equal(tree.predict_proba(X_new), member.predict_proba(X_new))
        np.testing.assert_array_equal(plain.bin_mapper_.thresholds_, mapper.thresholds_)
        predicted = member.predict(X)
        incorrect = (1 - predicted if flipped else predicted) != y
        weights = next_weights(weights, incorrect, alpha_m, model.alpha)


def test_resampled_members_grow_on_their_rows_of_the_shared_bins() -> None:
    X, _ = data(500, seed=5)
    model = AdaBoostRegressor(DecisionTreeRegressor(max_depth=3), n_estimators=5)
    target = np.nan_to_num(X[:, 0] - X[:, 3])
    model.set_params(random_state=2).fit(X, target)
    member = model.estimators_[0]
    # Round 0 of "resample": the member's random_state, then the bootstrap, from one stream.
    rng = np.random.default_rng(np.random.SeedSequence(2).spawn(5)[0])
    assert member.random_state == int(rng.integers(2**31))
    counts = weighted_bootstrap_counts(rng, normalise(np.ones(X.shape[0])))
    rows = np.flatnonzero(counts)
    by_hand = DecisionTreeRegressor(**member.get_params())
    binned = member.bin_mapper_.transform(X)
    by_hand._fit_binned(member.bin_mapper_, binned[rows], target[rows], counts[rows] * 1.0)
    np.testing.assert_array_equal(by_hand.predict(X), member.predict(X))
    np.testing.assert_array_equal(by_hand.tree_.nodes, member.tree_.nodes)


def test_rows_of_zero_sample_weight_place_no_bin_edges() -> None:
    X, y = data(300, seed=6)
    X[:10, 0] = 1e6  # outliers that would move the top edges of feature 0
    weights = np.ones(X.shape[0])
    weights[:10] = 0.0
    model = AdaBoostClassifier(n_estimators=5, random_state=0).fit(X, y, sample_weight=weights)
    without = AdaBoostClassifier(n_estimators=5, random_state=0).fit(X[10:], y[10:])
    np.testing.assert_array_equal(
        model.estimators_[0].bin_mapper_.thresholds_, without.estimators_[0].bin_mapper_.thresholds_
    )
    np.testing.assert_array_equal(model.predict(X), without.predict(X))
    # The weights sum in another order with the zero rows in: α agrees to rounding.
    np.testing.assert_allclose(model.decision_function(X), without.decision_function(X))


class OwnBinningTree(DecisionTreeClassifier):
    """A tree subclass: it may fit differently, so boosting leaves its fit alone."""


def test_other_weak_learners_bin_their_own_rows(binning_fits: list[int]) -> None:
    X, y = data()
    model = AdaBoostClassifier(OwnBinningTree(max_depth=1), n_estimators=4, random_state=0)
    model.fit(X, y)
    assert len(binning_fits) == len(model.estimators_)


def test_a_tree_refuses_bins_made_with_other_settings() -> None:
    X, y = data()
    mapper = BinMapper(max_bins=32).fit(X, np.zeros(X.shape[1], dtype=bool))
    binned = mapper.transform(X)
    with pytest.raises(ValueError, match="other max_bins or categorical_features"):
        DecisionTreeClassifier()._fit_binned(mapper, binned, y)
    with pytest.raises(ValueError, match="other max_bins or categorical_features"):
        DecisionTreeClassifier(max_bins=32, categorical_features=[4])._fit_binned(mapper, binned, y)
    tree = DecisionTreeClassifier(max_bins=32)
    tree._fit_binned(mapper, binned, y)
    assert tree.bin_mapper_ is mapper and tree.n_features_in_ == X.shape[1]


def test_a_saved_model_stores_the_shared_mapper_once() -> None:
    X, y = data(400)
    few = AdaBoostClassifier(n_estimators=2, random_state=0).fit(X, y)
    many = AdaBoostClassifier(n_estimators=20, random_state=0).fit(X, y)
    assert len(many.estimators_) == 20
    mapper = many.estimators_[0].bin_mapper_
    mapper_nbytes = mapper.thresholds_.nbytes + mapper.bin_values_.nbytes
    few_bytes, many_bytes = save_model(few), save_model(many)
    extra = len(many_bytes) - len(few_bytes)
    assert extra < 18 * mapper_nbytes / 4  # one mapper per member would add 18 mappers
    assert (
        model_manifest(many_bytes)["array_nbytes"] - model_manifest(few_bytes)["array_nbytes"]
        < mapper_nbytes
    )
    loaded = load_model(many_bytes)
    thresholds = loaded.estimators_[0].bin_mapper_.thresholds_
    assert all(m.bin_mapper_.thresholds_ is thresholds for m in loaded.estimators_)
    np.testing.assert_array_equal(loaded.decision_function(X), many.decision_function(X))


@pytest.mark.parametrize(
    "prototype",
    [
        DecisionTreeClassifier(max_depth=1),
        DecisionTreeClassifier(max_depth=4, categorical_features=[4]),
        DecisionTreeRegressor(max_depth=3),
    ],
    ids=["stump", "categorical_tree", "regression_tree"],
)
def test_training_predictions_read_off_the_leaves_equal_predict(prototype: Any) -> None:
    # A round's predictions on the training rows come from the leaves its growth assigned;
    # they must be what the member predicts on the raw rows (NaNs and categories included).
    X, y = data(600, seed=3)
    target = y if isinstance(prototype, DecisionTreeClassifier) else np.nan_to_num(X[:, 0]) + y
    root = np.random.SeedSequence(7)
    shared = share_bins(prototype, X, np.ones(X.shape[0]), root)
    assert shared is not None
    weights = normalise(np.random.default_rng(1).random(X.shape[0]) + 0.1)
    learner = fit_weak_learner(prototype, X, target, weights, root, "reweight", shared)
    np.testing.assert_array_equal(learner.predicted, learner.estimator.predict(X))
