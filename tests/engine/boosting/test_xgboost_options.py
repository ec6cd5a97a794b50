"""XGBoost-style options: monotone constraints, per-level column sampling, exact split finding.

Monotonicity is checked where it matters, on predictions over a grid of one feature with the
others fixed, on data where the unconstrained model is not monotone. Column sampling is
checked by recording the candidate features every split search receives. Exact split finding
must grow the histogram method's trees when every value has its own bin anyway, and never
find a worse split at a node. Where the xgboost package is installed (the ``bench`` extra),
the exact method with and without constraints is compared with it prediction by prediction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import XGBoostClassifier, XGBoostRegressor, load_model, save_model
from engine.tree._binning import MAX_EXACT_BINS, BinMapper
from engine.tree.grow import growth as _growth
from engine.tree.grow.features import FeatureSampler

GRID = np.linspace(-2.0, 2.0, 61)


def wiggly_data(n: int = 1500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """y rises with x0 and falls with x2 on the whole, but not monotonically."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 4))
    y = X[:, 0] + 1.5 * np.sin(3 * X[:, 0]) - X[:, 2] + 0.8 * np.cos(4 * X[:, 2]) + X[:, 1] ** 2
    return X, y + 0.3 * rng.normal(size=n)


def steps_along(model: Any, X: np.ndarray, feature: int, rows: int = 25) -> np.ndarray:
    """Differences of the raw score along GRID in ``feature``, other features of real rows."""
    steps = []
    for row in X[:rows]:
        grid = np.tile(row, (GRID.size, 1))
        grid[:, feature] = GRID
        steps.append(np.diff(model.decision_function(grid)))
    return np.array(steps)


@pytest.mark.parametrize("grow_policy", ["depthwise", "lossguide"])
def test_monotone_constraints_make_predictions_monotone(grow_policy: str) -> None:
    X, y = wiggly_data()
    params = dict(
        n_estimators=30, max_depth=5, max_leaves=24, grow_policy=grow_policy, random_state=0
    )
    free = XGBoostRegressor(**params).fit(X, y)
    assert steps_along(free, X, 0).min() < -0.05 and steps_along(free, X, 2).max() > 0.05
    constrained = XGBoostRegressor(monotone_constraints=[1, 0, -1, 0], **params).fit(X, y)
    assert steps_along(constrained, X, 0).min() >= 0.0
    assert steps_along(constrained, X, 2).max() <= 0.0
    assert steps_along(constrained, X, 1).min() < 0 < steps_along(constrained, X, 1).max()
    # The constraint costs some fit, not all of it.
    mse = np.mean((constrained.predict(X) - y) ** 2)
    assert np.mean((free.predict(X) - y) ** 2) < mse < 0.5 * np.var(y)


def test_monotone_classifier_with_missing_values() -> None:
    X, y = wiggly_data(seed=1)
    X[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    labels = (y > np.median(y)).astype(int)
    model = XGBoostClassifier(
        n_estimators=20, max_depth=4, monotone_constraints=(1, 0, -1, 0), random_state=0
    ).fit(X, labels)
    assert steps_along(model, X, 0).min() >= 0.0 and steps_along(model, X, 2).max() <= 0.0
    assert model.score(X, labels) > 0.8


def test_zero_constraints_change_nothing() -> None:
    X, y = wiggly_data(n=600)
    params = dict(n_estimators=8, max_depth=4, colsample_bynode=0.7, random_state=3)
    plain = XGBoostRegressor(**params).fit(X, y)
    zeros = XGBoostRegressor(monotone_constraints=[0, 0, 0, 0], **params).fit(X, y)
    for a, b in zip(plain.estimators_, zeros.estimators_, strict=True):
        np.testing.assert_array_equal(a[0].nodes, b[0].nodes)
        np.testing.assert_array_equal(a[0].values, b[0].values)
    np.testing.assert_array_equal(plain.predict(X), zeros.predict(X))


def test_constrained_models_round_trip() -> None:
    X, y = wiggly_data(n=400)
    model = XGBoostRegressor(
        n_estimators=5, monotone_constraints=[1, 0, -1, 0], colsample_bylevel=0.5, random_state=0
    ).fit(X, y)
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"monotone_constraints": [1, 0]}, "one entry per feature"),
        ({"monotone_constraints": [2, 0, 0, 0]}, "-1, 0 or 1"),
        ({"monotone_constraints": [0, 0, 0, 1], "categorical_features": [3]}, "categorical"),
        (
            {"monotone_constraints": [1, 0, 0, 0], "objective": "reg:absoluteerror"},
            "absoluteerror",
        ),
    ],
)
def test_invalid_constraints_are_refused(params: dict[str, Any], message: str) -> None:
    X, y = wiggly_data(n=100)
    X[:, 3] = np.arange(100) % 3
    with pytest.raises(ValueError, match=message):
        XGBoostRegressor(n_estimators=2, **params).fit(X, y)


# --- colsample_bylevel ---------------------------------------------------------------------


def record_candidates(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Record (tree, depth, tree features, level pool, per-node candidates) of every search."""
    calls: list[tuple[Any, ...]] = []
    original_pool = FeatureSampler.level_pool
    current: dict[str, Any] = {}

    def level_pool(self: Any, depth: int) -> np.ndarray:
        pool = original_pool(self, depth)
        current.update(sampler=self, depth=depth, pool=pool)
        return pool

    def recorder(module: Any, name: str, position: int) -> Any:
        original = getattr(module, name)

        def record(ctx: Any, *args: Any, **keywords: Any) -> Any:
            features = args[position]  # after the rows (two arrays) or the histograms (one)
            sampler = current["sampler"]
            calls.append(
                (
                    sampler,
                    current["depth"],
                    frozenset(sampler.candidates.tolist()),
                    frozenset(current["pool"].tolist()),
                    features.copy(),
                )
            )
            return original(ctx, *args, **keywords)

        return record

    monkeypatch.setattr(FeatureSampler, "level_pool", level_pool)
    # Both searches, from rows and from histograms, are run by the tree's state.
    for module, name, position in (
        (_growth, "best_splits", 2),
        (_growth, "best_splits_in_histograms", 1),
    ):
        monkeypatch.setattr(module, name, recorder(module, name, position))
    return calls


@pytest.mark.parametrize(
    ("bytree", "bylevel", "bynode", "expected"),
    [
        (0.5, 0.5, 0.6, (10, 5, 3)),  # nested: round(0.6 · round(0.5 · round(0.5 · 20)))
        (1.0, 0.25, 1.0, (20, 5, 5)),  # per-level pools searched whole (histogram path)
        (0.8, 1.0, 0.5, (16, 16, 8)),
    ],
)
def test_column_samples_nest_tree_level_node(
    monkeypatch: pytest.MonkeyPatch,
    bytree: float,
    bylevel: float,
    bynode: float,
    expected: tuple[int, int, int],
) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 20))
    y = X @ rng.normal(size=20) + rng.normal(size=400)
    calls = record_candidates(monkeypatch)
    XGBoostRegressor(
        n_estimators=3,
        max_depth=3,
        colsample_bytree=bytree,
        colsample_bylevel=bylevel,
        colsample_bynode=bynode,
        random_state=0,
    ).fit(X, y)
    n_tree, n_level, n_node = expected
    seen: set[tuple[int, int]] = set()
    pools: dict[int, set[frozenset[int]]] = {}
    for growth, depth, tree, pool, features in calls:
        assert len(tree) == n_tree and len(pool) == n_level and pool <= tree
        pools.setdefault(id(growth), set()).add(pool)
        counts = [len(set(row[row >= 0].tolist()) & pool) for row in features]
        assert all(
            count == int((row >= 0).sum()) for count, row in zip(counts, features, strict=True)
        )
        if (id(growth), depth) not in seen:  # a level's first draw: n_node for every node
            seen.add((id(growth), depth))
            assert set(counts) == {n_node}
        else:  # nodes without a split draw again from the rest of their level's pool
            assert max(counts) <= n_node
    assert {depth for _, depth in seen} == {0, 1, 2}
    assert len(pools) == 3  # one per tree
    if n_level < n_tree:  # the levels of a tree draw their own pools
        assert all(len(tree_pools) > 1 for tree_pools in pools.values())


def test_full_level_sampling_changes_nothing() -> None:
    X, y = wiggly_data(n=500)
    a = XGBoostRegressor(n_estimators=5, colsample_bynode=0.5, random_state=1).fit(X, y)
    b = XGBoostRegressor(
        n_estimators=5, colsample_bynode=0.5, colsample_bylevel=1.0, random_state=1
    ).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


# --- tree_method="exact" -------------------------------------------------------------------


@pytest.mark.parametrize("grow_policy", ["depthwise", "lossguide"])
def test_exact_equals_hist_when_every_value_has_its_own_bin(grow_policy: str) -> None:
    rng = np.random.default_rng(2)
    X = np.round(rng.normal(size=(800, 5)), 1)  # ≤ 255 distinct values per feature
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + rng.normal(size=800) > 0).astype(int)
    params = dict(n_estimators=10, max_depth=4, max_leaves=12, grow_policy=grow_policy)
    hist = XGBoostClassifier(tree_method="hist", random_state=0, **params).fit(X, y)
    exact = XGBoostClassifier(tree_method="exact", random_state=0, **params).fit(X, y)
    for a, b in zip(hist.estimators_, exact.estimators_, strict=True):
        np.testing.assert_array_equal(a[0].nodes, b[0].nodes)
        np.testing.assert_array_equal(a[0].values, b[0].values)


def continuous_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(1200, 3))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=1200)


@pytest.mark.parametrize("seed", range(4))
def test_exact_never_finds_a_worse_split_than_hist(seed: int) -> None:
    """Every hist threshold partitions the rows as some exact threshold does, so at a node
    exact's best gain is at least hist's: a stump's training loss is never higher, and the
    first tree's root gain never lower. (Over many rounds greedy boosting promises nothing of
    the kind: better early splits need not lead to a lower final training loss.)"""
    X, y = continuous_data(seed)
    for max_bins in (255, 16):
        stump = dict(n_estimators=1, max_depth=1, learning_rate=1.0, max_bins=max_bins)
        hist = XGBoostRegressor(tree_method="hist", **stump).fit(X, y)
        exact = XGBoostRegressor(tree_method="exact", **stump).fit(X, y)
        assert np.mean((exact.predict(X) - y) ** 2) <= np.mean((hist.predict(X) - y) ** 2)
        deep = dict(n_estimators=1, max_depth=4, max_bins=max_bins)
        root_gain = [
            XGBoostRegressor(tree_method=method, **deep)
            .fit(X, y)
            .estimators_[0][0]
            .impurity_decrease()[0]
            for method in ("hist", "exact")
        ]
        assert root_gain[1] >= root_gain[0] - 1e-9
    assert (
        XGBoostRegressor(tree_method="exact", max_depth=1, n_estimators=1).fit(X, y).bin_mapper_
    ).n_bins_.min() == 1200


def test_exact_thresholds_are_midpoints_of_training_values() -> None:
    X, y = continuous_data(0)
    model = XGBoostRegressor(tree_method="exact", n_estimators=3, max_depth=3).fit(X, y)
    for stage in model.estimators_:
        nodes = stage[0].nodes
        for feature, threshold in zip(
            nodes["feature"][nodes["left_child"] >= 0],
            nodes["threshold"][nodes["left_child"] >= 0],
            strict=True,
        ):
            values = np.unique(X[:, feature])
            above = int(np.searchsorted(values, threshold))
            assert threshold == (values[above - 1] + values[above]) / 2


def test_exact_with_categories_and_missing_values_round_trips() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(700, 3))
    X[:, 2] = rng.integers(0, 5, 700)
    X[rng.random(700) < 0.1, 0] = np.nan
    y = np.nan_to_num(X[:, 0], nan=2.0) + (X[:, 2] == 3) + 0.1 * rng.normal(size=700)
    model = XGBoostRegressor(
        tree_method="exact", n_estimators=10, categorical_features=[2], random_state=0
    ).fit(X, y)
    assert model.bin_mapper_.transform(X).dtype == np.uint16
    assert np.mean((model.predict(X) - y) ** 2) < 0.1 * np.var(y)
    np.testing.assert_array_equal(load_model(save_model(model)).predict(X), model.predict(X))


def test_exact_refuses_more_distinct_values_than_codes() -> None:
    column = np.arange(MAX_EXACT_BINS + 1, dtype=np.float64)[:, None]
    with pytest.raises(ValueError, match="tree_method='hist'"):
        BinMapper(exact=True).fit(column, np.array([False]))


@pytest.mark.parametrize("constraints", [None, (1, 0, -1, 0)])
def test_exact_matches_xgboost(constraints: Any) -> None:
    import xgboost  # a dev dependency (xgboost-cpu): imported here, not by every test

    X, y = wiggly_data(n=400, seed=5)
    params: dict[str, Any] = dict(n_estimators=15, max_depth=4, learning_rate=0.3, reg_lambda=1.0)
    if constraints is not None:
        params["monotone_constraints"] = constraints
    theirs = xgboost.XGBRegressor(
        tree_method="exact", base_score=float(y.mean()), n_jobs=1, **params
    ).fit(X, y)
    ours = XGBoostRegressor(tree_method="exact", **params).fit(X, y)
    # XGBoost sums in float32: agreement to its precision, not ours.
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), atol=2e-5)
    labels = (y > np.median(y)).astype(int)
    theirs_c = xgboost.XGBClassifier(tree_method="exact", base_score=0.5, n_jobs=1, **params)
    ours_c = XGBoostClassifier(tree_method="exact", base_score=0.0, **params)
    np.testing.assert_allclose(
        ours_c.fit(X, labels).predict_proba(X),
        theirs_c.fit(X, labels).predict_proba(X),
        atol=2e-5,
    )
