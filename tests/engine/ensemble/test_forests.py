"""Forests, extra trees and bagging held to Breiman (1996, 2001): bootstrap samples, out-of-bag
estimates and curves, OOB early stopping, proximities, OOB permutation importance, random
subspaces, voting, determinism across ``n_jobs`` and the callback contract.

Fits with ``n_jobs=2`` start two worker processes (a few tenths of a second each), so those
tests use small data and few members.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.model_selection import train_test_split

from engine import (
    BaggingClassifier,
    BaggingRegressor,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    ProgressEvent,
    RandomForestClassifier,
    RandomForestRegressor,
    TrainingInterrupted,
)
from engine.base import NotFittedError
from engine.tree import Tree


def small_classification(
    n: int = 240, seed: int = 0, **kwargs: Any
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    params = {"n_features": 8, "n_informative": 4, "n_redundant": 0, "random_state": seed}
    X, y = make_classification(n, **{**params, **kwargs})
    return X, y


def member_outputs(model: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each member's output on X, shape (n_members, n_samples, n_outputs)."""
    return np.stack([tree.predict(X) for tree in model.trees_])


# --- determinism ------------------------------------------------------------------------------


ESTIMATORS: dict[str, Callable[[int, int], Any]] = {
    "random-forest": lambda n_jobs, seed: RandomForestClassifier(
        8, oob_score=True, n_jobs=n_jobs, random_state=seed
    ),
    "extra-trees": lambda n_jobs, seed: ExtraTreesClassifier(
        8, bootstrap=True, oob_score=True, n_jobs=n_jobs, random_state=seed
    ),
    "bagging": lambda n_jobs, seed: BaggingClassifier(
        n_estimators=8, max_features=0.5, oob_score=True, n_jobs=n_jobs, random_state=seed
    ),
    "forest-regressor": lambda n_jobs, seed: RandomForestRegressor(
        8, oob_score=True, n_jobs=n_jobs, random_state=seed
    ),
    # A member that is not a tree takes the generic bagging path (raw rows, own fit).
    "bagging-generic": lambda n_jobs, seed: BaggingRegressor(
        ExtraTreesRegressor(3, max_depth=4), n_estimators=6, n_jobs=n_jobs, random_state=seed
    ),
}


def output(model: Any, X: NDArray[np.float64]) -> NDArray[np.float64]:
    result: NDArray[np.float64] = (
        model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    )
    return result


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_same_random_state_gives_bit_identical_models_for_any_n_jobs(name: str) -> None:
    X, labels = small_classification(200)
    y: NDArray[Any] = labels
    X[::17, 2] = np.nan  # missing values travel to the workers too
    if "regressor" in name or "generic" in name:
        y = X[:, 0] * 2 + np.nan_to_num(X[:, 2]) + np.random.default_rng(0).normal(size=200)
    serial = ESTIMATORS[name](1, 3).fit(X, y)
    parallel = ESTIMATORS[name](2, 3).fit(X, y)
    np.testing.assert_array_equal(output(serial, X), output(parallel, X))
    np.testing.assert_array_equal(serial.estimators_seeds_, parallel.estimators_seeds_)
    if "generic" not in name:
        for a, b in zip(serial.trees_, parallel.trees_, strict=True):
            np.testing.assert_array_equal(a.nodes, b.nodes)
            np.testing.assert_array_equal(a.values, b.values)
    if hasattr(serial, "oob_score_"):
        assert serial.oob_score_ == parallel.oob_score_
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("name", ["random-forest", "extra-trees", "bagging", "forest-regressor"])
def test_different_random_states_give_different_models(name: str) -> None:
    X, labels = small_classification(200)
    y: NDArray[Any] = labels
    if "regressor" in name:
        y = X[:, 0] + np.random.default_rng(0).normal(size=200)
    a = ESTIMATORS[name](1, 1).fit(X, y)
    b = ESTIMATORS[name](1, 1).fit(X, y)
    c = ESTIMATORS[name](1, 2).fit(X, y)
    np.testing.assert_array_equal(output(a, X), output(b, X))
    assert not np.array_equal(output(a, X), output(c, X))
    assert not np.array_equal(a.estimators_seeds_, c.estimators_seeds_)


# --- out-of-bag estimates ----------------------------------------------------------------------


def test_oob_score_is_close_to_a_holdout_score() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.5, stratify=y, random_state=0
    )
    model = RandomForestClassifier(200, oob_score=True, random_state=0).fit(X_train, y_train)
    # Both are accuracy estimates of ~0.95 on ~285 rows each: binomial sd ≈
    # sqrt(0.95·0.05/285) ≈ 0.013 apiece, ≈ 0.018 for the difference; 0.03 (~1.7 sd) is the
    # bound the brief asks for and holds for this fixed split with room to spare (≈ 0.007).
    # A broken OOB (in-bag rows scored, or rows never out of bag counted) shows up as an
    # OOB accuracy of ~1.0, well past it.
    assert abs(model.oob_score_ - model.score(X_test, y_test)) < 0.03
    assert model.oob_score_ < 0.99


def oob_by_hand(model: Any, X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[Any]]:
    """OOB average and OOB count of every training row, from in_bag_counts and the trees."""
    outputs = member_outputs(model, model.bin_mapper_.encode_for_prediction(X))
    if getattr(model, "_hard_voting", False):
        outputs = np.eye(outputs.shape[-1])[outputs.argmax(axis=-1)]
    total = np.zeros(outputs.shape[1:])
    count = np.zeros(X.shape[0])
    for member in range(model.n_estimators_):
        oob = model.in_bag_counts(member) == 0
        total[oob] += outputs[member, oob]
        count[oob] += 1
    with np.errstate(invalid="ignore"):
        return total / count[:, None], count


@pytest.mark.parametrize("voting", ["soft", "hard"])
def test_oob_decision_function_is_the_average_over_out_of_bag_members(voting: str) -> None:
    X, y = small_classification(300, n_classes=3)
    # Shallow members: fully grown trees output one-hot leaves, where hard and soft agree.
    model = BaggingClassifier(
        DecisionTreeClassifier(max_depth=3),
        n_estimators=4,
        oob_score=True,
        voting=voting,
        random_state=0,
    )
    model.fit(X, y)
    expected, count = oob_by_hand(model, X)
    seen = count > 0
    # A row is in bag for all 4 members with probability ≈ (1 − e^{-1})^4 ≈ 0.16: such rows
    # have no OOB estimate and must be left out of the score, not counted as errors.
    assert 20 < (~seen).sum() < 80
    np.testing.assert_allclose(model.oob_decision_function_[seen], expected[seen], rtol=1e-12)
    assert np.isnan(model.oob_decision_function_[~seen]).all()
    accuracy = np.mean(expected[seen].argmax(axis=1) == y[seen])
    assert model.oob_score_ == pytest.approx(accuracy)


def test_oob_curve_has_one_entry_per_member_and_ends_at_the_oob_score() -> None:
    X, y = small_classification(300)
    model = RandomForestClassifier(25, oob_score=True, random_state=0).fit(X, y)
    assert model.oob_curve_.shape == (model.n_estimators_,) == (25,)
    assert model.oob_curve_[-1] == pytest.approx(1.0 - model.oob_score_, abs=1e-12)
    # Point b is the OOB error of the first b members: member seeds are a prefix-stable
    # stream, so a 12-member forest is the first 12 members of this one.
    half = RandomForestClassifier(12, oob_score=True, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.oob_curve_[:12], half.oob_curve_)
    assert half.oob_curve_[-1] == pytest.approx(1.0 - half.oob_score_, abs=1e-12)
    assert np.unique(model.oob_curve_).size > 5  # the curve moves: not a constant


def test_regression_oob_curve_is_the_oob_mse() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X[:, 0] * 3 + X[:, 1] ** 2 + rng.normal(size=300)
    model = RandomForestRegressor(20, oob_score=True, random_state=0).fit(X, y)
    expected, count = oob_by_hand(model, X)
    seen = count > 0
    np.testing.assert_allclose(model.oob_prediction_[seen], expected[seen, 0], rtol=1e-12)
    mse = np.mean((expected[seen, 0] - y[seen]) ** 2)
    assert model.oob_curve_[-1] == pytest.approx(mse, rel=1e-12)
    r2 = 1 - np.sum((expected[seen, 0] - y[seen]) ** 2) / np.sum((y[seen] - y[seen].mean()) ** 2)
    assert model.oob_score_ == pytest.approx(r2, rel=1e-12)


def test_oob_early_stopping_stops_once_the_curve_flattens() -> None:
    X, y = small_classification(400, class_sep=3.0, seed=1)  # easy: OOB error settles fast
    patience, tol = 8, 1e-4
    model = RandomForestClassifier(
        120, early_stopping="oob", n_iter_no_change=patience, tol=tol, random_state=0
    ).fit(X, y)
    curve = model.oob_curve_
    assert model.n_estimators_ < 60
    assert len(model.trees_) == curve.size == model.n_estimators_
    # The rule (stop when the OOB error no longer decreases; Hastie et al. 2009, §15.3.1),
    # checked at every point:
    # it holds where fitting stopped and nowhere before.

    def stops(b: int) -> bool:
        earlier, recent = curve[: b - patience], curve[b - patience : b]
        return bool(b > patience and np.nanmin(recent) > np.nanmin(earlier) - tol)

    assert stops(curve.size)
    assert not any(stops(b) for b in range(1, curve.size))
    # Stopping only truncates: the members are those of the full forest, in order.
    full = RandomForestClassifier(120, oob_score=True, random_state=0).fit(X, y)
    for a, b in zip(model.trees_, full.trees_[: model.n_estimators_], strict=True):
        np.testing.assert_array_equal(a.nodes, b.nodes)
    # Without early stopping all members are grown, however flat the curve.
    assert full.n_estimators_ == 120 and full.oob_curve_.size == 120
    np.testing.assert_array_equal(full.oob_curve_[: curve.size], curve)


def test_oob_needs_rows_left_out() -> None:
    X, y = small_classification(100)
    with pytest.raises(ValueError, match=r"[Oo]ut-of-bag"):
        RandomForestClassifier(3, bootstrap=False, oob_score=True).fit(X, y)
    subsampled = RandomForestClassifier(
        5, bootstrap=False, max_samples=0.5, oob_score=True, random_state=0
    ).fit(X, y)
    assert 0.5 < subsampled.oob_score_ <= 1.0


# --- bootstrap samples ---------------------------------------------------------------------


def test_in_bag_counts_regenerate_the_bootstrap_each_tree_was_grown_on() -> None:
    rng = np.random.default_rng(0)
    n = 5000
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] > 0).astype(np.int64)
    model = RandomForestClassifier(10, max_depth=1, random_state=0).fit(X, y)
    zeros, ones = [], []
    for member, tree in enumerate(model.trees_):
        counts = model.in_bag_counts(member)
        assert counts.sum() == n
        # The root of the tree saw exactly these rows, with these multiplicities.
        assert tree.nodes["n_samples"][0] == np.count_nonzero(counts)
        assert tree.nodes["weighted_n_samples"][0] == counts.sum()
        zeros.append(np.mean(counts == 0))
        ones.append(np.mean(counts == 1))
    # Counts are Binomial(n, 1/n) ≈ Poisson(1): P(0) = P(1) = (1 − 1/n)^n ≈ e^{-1} ≈ 0.368.
    # The share of empty rows in one bootstrap has sd ≈ sqrt(e^{-1}(1 − 2e^{-1})/n) ≈ 0.0044;
    # averaged over 10 members ≈ 0.0014, so ±0.01 is 7 sd.
    assert np.mean(zeros) == pytest.approx(np.exp(-1), abs=0.01)
    assert np.mean(ones) == pytest.approx(np.exp(-1), abs=0.01)
    assert len({model.in_bag_counts(m).tobytes() for m in range(10)}) == 10


@pytest.mark.parametrize(("bootstrap", "max_samples"), [(True, 0.3), (False, 0.3), (True, 77)])
def test_in_bag_counts_follow_max_samples(bootstrap: bool, max_samples: float) -> None:
    X, y = small_classification(200)
    model = RandomForestClassifier(
        4, bootstrap=bootstrap, max_samples=max_samples, random_state=0
    ).fit(X, y)
    n_draws = int(max_samples * 200) if isinstance(max_samples, float) else max_samples
    for member, tree in enumerate(model.trees_):
        counts = model.in_bag_counts(member)
        assert counts.sum() == n_draws
        if not bootstrap:
            assert set(np.unique(counts)) == {0, 1}
        assert tree.nodes["weighted_n_samples"][0] == n_draws


@pytest.mark.parametrize("class_weight", ["balanced_subsample", "balanced", None])
def test_balanced_subsample_equalises_the_classes_within_each_bootstrap(
    class_weight: str | None,
) -> None:
    X, y = small_classification(300, weights=[0.8, 0.2], n_classes=2)
    model = RandomForestClassifier(6, class_weight=class_weight, random_state=0).fit(X, y)
    for member, tree in enumerate(model.trees_):
        counts = model.in_bag_counts(member)
        in_bag = np.bincount(y, weights=counts, minlength=2)
        root_shares = tree.values[0]
        if class_weight == "balanced_subsample":
            # Weights n_bag / (k · n_bag,c) per drawn row: each class carries half the root.
            np.testing.assert_allclose(root_shares, [0.5, 0.5], rtol=1e-12)
        else:
            # Whole-set weights: the root's shares follow this bootstrap's class mix.
            per_class = 300 / (2 * np.bincount(y)) if class_weight else np.ones(2)
            expected = in_bag * per_class / np.sum(in_bag * per_class)
            np.testing.assert_allclose(root_shares, expected, rtol=1e-12)
            assert abs(root_shares[0] - 0.5) > 1e-3


# --- proximities ------------------------------------------------------------------------------


def test_proximity_is_a_similarity_matrix_that_groups_the_classes() -> None:
    X, y = small_classification(150, class_sep=2.0)
    model = RandomForestClassifier(30, random_state=0).fit(X, y)
    proximity = model.proximity(X)
    assert proximity.shape == (150, 150)
    np.testing.assert_array_equal(proximity, proximity.T)
    np.testing.assert_array_equal(np.diag(proximity), 1.0)
    assert proximity.min() >= 0 and proximity.max() <= 1
    # Shares of 30 members: multiples of 1/30.
    np.testing.assert_allclose(proximity * 30, np.round(proximity * 30), atol=1e-9)
    same = y[:, None] == y[None, :]
    off_diagonal = ~np.eye(150, dtype=bool)
    assert proximity[same & off_diagonal].mean() > 2 * proximity[~same].mean()
    # By definition: the share of members in which two rows share a leaf.
    leaves = model.apply(X)
    i, j = 3, 77
    assert proximity[i, j] == pytest.approx(np.mean(leaves[i] == leaves[j]))


def test_oob_proximity_counts_only_members_where_both_rows_are_out_of_bag() -> None:
    X, y = small_classification(120)
    model = RandomForestClassifier(25, random_state=0).fit(X, y)
    proximity = model.proximity(X, out_of_bag=True)
    leaves = model.apply(X)
    oob = np.stack([model.in_bag_counts(m) == 0 for m in range(25)], axis=1)  # (n, members)
    both = oob[:, None, :] & oob[None, :, :]
    same = (leaves[:, None, :] == leaves[None, :, :]) & both
    counted = both.sum(axis=2)
    expected = np.where(counted > 0, same.sum(axis=2) / np.maximum(counted, 1), 0.0)
    np.testing.assert_allclose(proximity, expected, rtol=1e-12)
    assert (counted == 0).any()  # some pairs are never out of bag together: proximity 0
    assert not np.allclose(proximity, model.proximity(X))
    np.testing.assert_array_equal(proximity, proximity.T)
    with pytest.raises(ValueError, match="training"):
        model.proximity(X[:50], out_of_bag=True)


# --- OOB permutation importance -----------------------------------------------------------------


def test_oob_permutation_importance_ranks_informative_features_above_noise() -> None:
    # shuffle=False puts the 3 informative features first; 4..8 are pure noise, 9 constant.
    X, y = make_classification(
        400, 9, n_informative=3, n_redundant=0, shuffle=False, random_state=0
    )
    X = np.column_stack([X, np.ones(400)])
    model = RandomForestClassifier(40, random_state=0).fit(X, y)
    mean, std = model.oob_permutation_importance(X, y, random_state=0)
    assert mean.shape == std.shape == (10,)
    assert mean[:3].min() > mean[3:].max()
    # Noise features only lose what chance costs: their mean drop is near zero. Per member
    # the drop (accuracy change on ~147 OOB rows) has sd ≈ 0.02, so the mean over 40
    # members has sd ≈ 0.0035 and 0.02 is ~6 sd; informative features drop by ~0.1.
    assert np.abs(mean[3:9]).max() < 0.02
    # A feature no tree splits on cannot change any prediction.
    assert mean[9] == 0.0 and std[9] == 0.0
    again = model.oob_permutation_importance(X, y, random_state=0)
    np.testing.assert_array_equal(again[0], mean)


# --- bagging subspaces and voting ----------------------------------------------------------


@pytest.mark.parametrize("bootstrap_features", [False, True])
def test_bagging_members_only_split_on_their_feature_subspace(bootstrap_features: bool) -> None:
    X, y = small_classification(200, n_features=10, n_informative=6)
    model = BaggingClassifier(
        n_estimators=12, max_features=0.5, bootstrap_features=bootstrap_features, random_state=0
    ).fit(X, y)
    subsets = [tuple(np.asarray(features)) for features in model.estimators_features_]
    for features, tree in zip(model.estimators_features_, model.trees_, strict=True):
        assert features is not None
        assert np.all(np.diff(features) > 0)  # sorted and distinct
        if bootstrap_features:
            assert 1 <= features.size <= 5
        else:
            assert features.size == 5
        used = tree.nodes["feature"][tree.nodes["left_child"] >= 0]
        assert used.size > 0 and set(used.tolist()) <= set(features.tolist())
    assert len(set(subsets)) > 6


def test_hard_voting_probabilities_are_vote_shares() -> None:
    X, y = small_classification(200, n_classes=3, n_informative=5)
    B = 9
    hard = BaggingClassifier(
        DecisionTreeClassifier(max_depth=3), n_estimators=B, voting="hard", random_state=0
    ).fit(X, y)
    proba = hard.predict_proba(X)
    np.testing.assert_allclose(proba * B, np.round(proba * B), atol=1e-9)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    votes = member_outputs(hard, X).argmax(axis=2)  # (B, n)
    expected = np.stack([(votes == k).mean(axis=0) for k in range(3)], axis=1)
    np.testing.assert_allclose(proba, expected, atol=1e-12)
    soft = BaggingClassifier(
        DecisionTreeClassifier(max_depth=3), n_estimators=B, voting="soft", random_state=0
    ).fit(X, y)
    assert not np.allclose(soft.predict_proba(X) * B, np.round(soft.predict_proba(X) * B))
    # Members that are not trees vote through their own predict_proba.
    generic = BaggingClassifier(
        RandomForestClassifier(3, max_depth=2), n_estimators=B, voting="hard", random_state=0
    ).fit(X, y)
    proba = generic.predict_proba(X)
    np.testing.assert_allclose(proba * B, np.round(proba * B), atol=1e-9)
    member_votes = np.stack([m.predict(X) for m in generic.estimators_])
    np.testing.assert_allclose(proba[:, 1], (member_votes == 1).mean(axis=0), atol=1e-12)


# --- callbacks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("oob", [False, True])
def test_one_progress_event_per_member(oob: bool) -> None:
    X, y = small_classification(150)
    events: list[ProgressEvent] = []
    model = RandomForestClassifier(7, oob_score=oob, random_state=0)
    model.fit(X, y, callbacks=[events.append])
    assert [e.done for e in events] == list(range(1, 8))
    assert {e.total for e in events} == {7}
    assert {e.estimator for e in events} == {"RandomForestClassifier"}
    if oob:
        errors = [e.metrics["oob_error"] for e in events]
        np.testing.assert_array_equal(errors, model.oob_curve_)
    else:
        assert all("oob_error" not in e.metrics for e in events)


@pytest.mark.parametrize("n_jobs", [1, 2])
@pytest.mark.parametrize("make", [RandomForestClassifier, ExtraTreesClassifier])
def test_training_interrupted_stops_fit_and_leaves_the_model_unfitted(
    n_jobs: int, make: Any
) -> None:
    X, y = small_classification(150)
    seen: list[int] = []

    def cancel_at_three(event: ProgressEvent) -> None:
        seen.append(event.done)
        if event.done == 3:
            raise TrainingInterrupted("cancelled")

    model = make(20, n_jobs=n_jobs, random_state=0)
    with pytest.raises(TrainingInterrupted, match="cancelled"):
        model.fit(X, y, callbacks=[cancel_at_three])
    assert seen == [1, 2, 3]
    assert multiprocessing.active_children() == []
    with pytest.raises(NotFittedError):
        model.predict(X)
    # The estimator is reusable: fitting again without the callback works.
    assert model.fit(X, y).n_estimators_ == 20


def test_an_interrupted_refit_leaves_the_model_unfitted_too() -> None:
    X, y = small_classification(150)
    model = RandomForestClassifier(5, random_state=0).fit(X, y)

    def cancel(event: ProgressEvent) -> None:
        raise TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        model.fit(X[:, :4], y, callbacks=[cancel])
    with pytest.raises(NotFittedError):
        model.predict(X[:, :4])


def test_interrupting_a_bagging_of_generic_members_in_workers() -> None:
    X, _ = small_classification(150)
    y = X[:, 0] + X[:, 1]

    def cancel_at_two(event: ProgressEvent) -> None:
        if event.done == 2:
            raise TrainingInterrupted

    model = BaggingRegressor(ExtraTreesRegressor(2), n_estimators=10, n_jobs=2, random_state=0)
    with pytest.raises(TrainingInterrupted):
        model.fit(X, y, callbacks=[cancel_at_two])
    assert multiprocessing.active_children() == []
    with pytest.raises(NotFittedError):
        model.predict(X)


# --- the committee's error (Bishop 2006, §14.2) ----------------------------------------------


def test_members_are_independent_given_the_data() -> None:
    """The committee's error is E_av/B when member errors are uncorrelated (Bishop 2006, eq.
    14.14). Given
    the training set, bootstrap members are i.i.d., so the spread of the bagged prediction
    over groups of B members must be the members' spread divided by B (ρ = 0)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + rng.normal(scale=0.5, size=200)
    groups, B = 30, 6
    model = BaggingRegressor(
        DecisionTreeRegressor(max_depth=6), n_estimators=groups * B, random_state=0
    ).fit(X, y)
    probe = rng.uniform(-2, 2, size=(40, 2))
    outputs = member_outputs(model, probe)[:, :, 0]  # (members, probes)
    member_variance = outputs.var(axis=0, ddof=1)
    bagged_variance = outputs.reshape(groups, B, -1).mean(axis=1).var(axis=0, ddof=1)
    ratio = np.mean(bagged_variance / member_variance)
    # Each per-probe ratio has the sampling noise of a variance estimate from 30 groups
    # (relative sd ≈ sqrt(2/29) ≈ 0.26); averaged over 40 correlated probes (take ~10
    # effective) ≈ 0.08, i.e. ≈ 0.014 around 1/B ≈ 0.167. ±0.06 is a 4-sd band around the
    # ρ = 0 prediction, while perfectly correlated members (a seed reused) give a ratio of 1
    # and ρ = 0.5 gives ≈ 0.58.
    assert ratio == pytest.approx(1 / B, abs=0.06)
    assert isinstance(model.trees_[0], Tree)
