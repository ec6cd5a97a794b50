"""Decision trees held to the math: best stumps, perfect fits, weighted means, weights as
repetitions, growth limits, agreement with scikit-learn where binning is exact, missing values,
categorical partitions and random thresholds.

Data with at most 255 distinct values per feature is binned exactly (one bin per value,
thresholds at midpoints), so on such data a CART tree is fully determined by the math and
comparisons with brute force and with scikit-learn can be exact up to summation order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.tree import DecisionTreeClassifier as SklearnTreeClassifier
from sklearn.tree import DecisionTreeRegressor as SklearnTreeRegressor

from engine import DecisionTreeClassifier, DecisionTreeRegressor, ProgressEvent, TrainingInterrupted
from engine.base import NotFittedError
from engine.tree import Tree

# --- helpers ---------------------------------------------------------------------------------


def node_membership(tree: Tree, X: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Which rows reach which node, shape (n_nodes, n_rows), routed independently of
    ``Tree.apply``: ``x <= threshold`` goes left, NaN follows ``missing_left``, categorical
    codes follow the bitset (unknown codes: ``missing_left``)."""
    nodes = tree.nodes
    member = np.zeros((tree.node_count, X.shape[0]), dtype=bool)
    member[0] = True
    for node in range(tree.node_count):  # children always come after their parent
        left = int(nodes["left_child"][node])
        if left < 0:
            continue
        values = X[:, nodes["feature"][node]]
        missing = np.isnan(values)
        split = int(nodes["category_split"][node])
        if split >= 0:
            bits = np.unpackbits(tree.category_bitsets[split], bitorder="little").astype(bool)
            code = np.where(missing, 0, values).astype(np.int64)
            goes_left = bits[np.clip(code, 0, 255)]
        else:
            goes_left = values <= nodes["threshold"][node]
        goes_left = np.where(missing, bool(nodes["missing_left"][node]), goes_left)
        member[left] = member[node] & goes_left
        member[int(nodes["right_child"][node])] = member[node] & ~goes_left
    return member


def gini_mass(y: NDArray[np.int64], w: NDArray[np.float64]) -> float:
    """W · gini of a weighted set of labels."""
    if w.sum() == 0:
        return 0.0
    p = np.bincount(y, weights=w) / w.sum()
    return float(w.sum() * (1.0 - np.sum(p**2)))


def entropy_mass(y: NDArray[np.int64], w: NDArray[np.float64]) -> float:
    if w.sum() == 0:
        return 0.0
    p = np.bincount(y, weights=w) / w.sum()
    p = p[p > 0]
    return float(w.sum() * -np.sum(p * np.log2(p)))


def variance_mass(y: NDArray[np.float64], w: NDArray[np.float64]) -> float:
    if w.sum() == 0:
        return 0.0
    return float(np.sum(w * (y - np.average(y, weights=w)) ** 2))


MASS: dict[str, Callable[[Any, NDArray[np.float64]], float]] = {
    "gini": gini_mass,
    "entropy": entropy_mass,
    "squared_error": variance_mass,
}


def brute_force_stump(
    X: NDArray[np.float64], y: NDArray[Any], w: NDArray[np.float64], criterion: str
) -> list[tuple[float, int, float]]:
    """Every (decrease, feature, midpoint threshold) split, best first."""
    mass = MASS[criterion]
    parent = mass(y, w)
    results = []
    for feature in range(X.shape[1]):
        values = np.unique(X[:, feature])
        for threshold in (values[:-1] + values[1:]) / 2:
            left = X[:, feature] <= threshold
            decrease = parent - mass(y[left], w[left]) - mass(y[~left], w[~left])
            results.append((decrease, feature, float(threshold)))
    return sorted(results, reverse=True)


def internal(tree: Tree) -> NDArray[np.bool_]:
    return tree.nodes["left_child"] >= 0


def leaves(tree: Tree) -> NDArray[np.bool_]:
    return tree.nodes["left_child"] < 0


def total_decrease(tree: Tree) -> float:
    """Weighted impurity removed by the whole tree: root mass minus leaf masses."""
    nodes = tree.nodes
    mass = nodes["weighted_n_samples"] * nodes["impurity"]
    return float(mass[0] - mass[leaves(tree)].sum())


def noisy_classification(
    n: int, n_features: int, seed: int, n_classes: int = 2
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    score = X[:, 0] + 0.6 * X[:, 1] ** 2 - 0.5 * X[:, 2] + rng.normal(scale=0.7, size=n)
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, score).astype(np.int64)


# --- stumps and perfect fits -------------------------------------------------------------------


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_a_depth_one_tree_is_the_best_single_split(criterion: str) -> None:
    rng = np.random.default_rng(11)
    n = 40
    X = np.round(rng.normal(size=(n, 3)), 2)
    w = rng.uniform(0.2, 2.0, n)
    if criterion == "squared_error":
        y: NDArray[Any] = X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=n)
        model: Any = DecisionTreeRegressor(max_depth=1)
    else:
        y = ((X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=n)) > 0).astype(np.int64)
        model = DecisionTreeClassifier(criterion=criterion, max_depth=1)
    model.fit(X, y, sample_weight=w)
    candidates = brute_force_stump(X, y, w, criterion)
    (best, feature, threshold), (runner_up, *_) = candidates[0], candidates[1]
    assert best - runner_up > 1e-3 * best  # a unique best, so the comparison is meaningful
    nodes = model.tree_.nodes
    assert model.tree_.node_count == 3 and model.get_depth() == 1
    assert (nodes["feature"][0], nodes["threshold"][0]) == (feature, threshold)
    # The stored impurities reproduce the brute-force decrease (summation order only).
    assert model.tree_.impurity_decrease()[0] == pytest.approx(best, rel=1e-12)
    # Leaves predict the weighted class shares / weighted means of their sides.
    left = X[:, feature] <= threshold
    expected = model.tree_.values[np.where(left, 1, 2)]
    np.testing.assert_allclose(model.tree_.predict(X), expected, rtol=0, atol=0)
    if criterion == "squared_error":
        assert model.tree_.values[1, 0] == pytest.approx(np.average(y[left], weights=w[left]))


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize("n_classes", [2, 4])
def test_a_fully_grown_tree_fits_distinguishable_rows_perfectly(
    criterion: str, n_classes: int
) -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 4))  # ≤ 255 rows: every value its own bin
    y = rng.integers(0, n_classes, 200)  # pure noise: only memorising fits it
    model = DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), y)
    np.testing.assert_array_equal(model.predict_proba(X), np.eye(n_classes)[y])
    assert np.all(model.tree_.nodes["impurity"][leaves(model.tree_)] == 0)
    assert total_decrease(model.tree_) == pytest.approx(model.tree_.nodes["impurity"][0] * 200)


def test_log_loss_is_an_alias_of_entropy() -> None:
    X, y = noisy_classification(200, 4, seed=6, n_classes=3)
    # Seeded: ties between features are broken by a random feature order per tree.
    entropy = DecisionTreeClassifier(criterion="entropy", max_depth=5, random_state=0).fit(X, y)
    log_loss = DecisionTreeClassifier(criterion="log_loss", max_depth=5, random_state=0).fit(X, y)
    gini = DecisionTreeClassifier(criterion="gini", max_depth=5).fit(X, y)
    np.testing.assert_array_equal(entropy.tree_.nodes, log_loss.tree_.nodes)
    assert not np.array_equal(entropy.tree_.nodes["impurity"], gini.tree_.nodes["impurity"])


def test_regression_leaves_hold_weighted_means_and_nodes_weighted_variances() -> None:
    rng = np.random.default_rng(2)
    n = 300
    X = rng.uniform(size=(n, 3))
    y = 3 * X[:, 0] + np.sin(6 * X[:, 1]) + rng.normal(scale=0.3, size=n)
    w = rng.uniform(0.1, 5.0, n)
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=7).fit(X, y, sample_weight=w)
    tree = model.tree_
    member = node_membership(tree, X)
    np.testing.assert_array_equal(
        np.flatnonzero(leaves(tree))[np.argmax(member[leaves(tree)], axis=0)], model.apply(X)
    )
    for node in range(tree.node_count):
        rows = member[node]
        assert tree.nodes["n_samples"][node] == rows.sum()
        assert tree.nodes["weighted_n_samples"][node] == pytest.approx(w[rows].sum(), rel=1e-12)
        assert tree.values[node, 0] == pytest.approx(
            np.average(y[rows], weights=w[rows]), rel=1e-12
        )
        expected_variance = variance_mass(y[rows], w[rows]) / w[rows].sum()
        assert tree.nodes["impurity"][node] == pytest.approx(expected_variance, rel=1e-9)
    np.testing.assert_array_equal(model.predict(X), tree.values[model.apply(X), 0])


@pytest.mark.parametrize("regression", [False, True])
def test_integer_sample_weight_equals_repeating_rows(regression: bool) -> None:
    rng = np.random.default_rng(8)
    n = 80
    X = rng.permutation(np.arange(n * 3, dtype=np.float64)).reshape(n, 3) / 7.0  # distinct
    k = rng.integers(1, 4, n)
    if regression:
        # Integer targets keep every weighted sum exact, whatever the summation order, so
        # the two fits see bit-identical statistics and must break ties identically.
        y: NDArray[Any] = rng.integers(-5, 6, n).astype(np.float64)
        make: Any = lambda: DecisionTreeRegressor(random_state=0)  # noqa: E731
    else:
        y = rng.integers(0, 3, n)
        make = lambda: DecisionTreeClassifier(random_state=0)  # noqa: E731
    weighted = make().fit(X, y, sample_weight=k.astype(np.float64))
    repeated = make().fit(np.repeat(X, k, axis=0), np.repeat(y, k))
    for column in ("left_child", "feature", "threshold", "missing_left", "weighted_n_samples"):
        np.testing.assert_array_equal(weighted.tree_.nodes[column], repeated.tree_.nodes[column])
    probe = rng.uniform(X.min(), X.max(), size=(500, 3))  # values between the training ones
    if regression:
        np.testing.assert_array_equal(weighted.predict(probe), repeated.predict(probe))
    else:
        np.testing.assert_array_equal(weighted.predict_proba(probe), repeated.predict_proba(probe))
    np.testing.assert_allclose(
        weighted.feature_importances_, repeated.feature_importances_, rtol=1e-12
    )


def test_balanced_class_weight_moves_the_boundary_towards_the_majority() -> None:
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(-1, 1, 450), rng.normal(1, 1, 50)]).reshape(-1, 1)
    y = np.repeat([0, 1], [450, 50])
    plain = DecisionTreeClassifier(max_depth=1).fit(X, y)
    balanced = DecisionTreeClassifier(max_depth=1, class_weight="balanced").fit(X, y)
    # Unweighted, the minority only wins where it dominates (far right); balanced, the
    # classes weigh the same and the cut moves left, into the majority's territory.
    assert balanced.tree_.nodes["threshold"][0] < plain.tree_.nodes["threshold"][0]
    assert (balanced.predict(X) == 1).sum() > (plain.predict(X) == 1).sum()
    recall = lambda m: (m.predict(X)[y == 1] == 1).mean()  # noqa: E731
    assert recall(balanced) > recall(plain)
    # "balanced" is exactly the weight n / (n_classes · n_k) on each row of class k.
    explicit = DecisionTreeClassifier(max_depth=3).fit(
        X, y, sample_weight=np.where(y == 1, 500 / (2 * 50), 500 / (2 * 450))
    )
    np.testing.assert_array_equal(
        DecisionTreeClassifier(max_depth=3, class_weight="balanced").fit(X, y).predict_proba(X),
        explicit.predict_proba(X),
    )


# --- growth limits ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_leaf_nodes", [2, 3, 5, 8, 13, 21])
def test_max_leaf_nodes_gives_exactly_that_many_leaves(max_leaf_nodes: int) -> None:
    X, y = noisy_classification(400, 4, seed=1)
    model = DecisionTreeClassifier(max_leaf_nodes=max_leaf_nodes, random_state=0).fit(X, y)
    assert model.get_n_leaves() == max_leaf_nodes
    assert model.tree_.node_count == 2 * max_leaf_nodes - 1


def test_best_first_growth_adds_one_greedy_split_at_a_time() -> None:
    X, y = noisy_classification(400, 4, seed=1)

    def split_set(tree: Tree) -> set[tuple[int, float, int]]:
        nodes = tree.nodes[internal(tree)]
        return set(zip(nodes["feature"], nodes["threshold"], nodes["n_samples"], strict=True))

    previous: set[tuple[int, float, int]] = set()
    previous_decrease = 0.0
    for k in range(2, 16):
        tree = DecisionTreeClassifier(max_leaf_nodes=k, random_state=0).fit(X, y).tree_
        splits = split_set(tree)
        # The k-leaf tree is the (k−1)-leaf tree plus one split: nested, never re-chosen.
        assert previous < splits and len(splits - previous) == 1
        assert total_decrease(tree) >= previous_decrease
        previous, previous_decrease = splits, total_decrease(tree)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_best_first_removes_at_least_the_impurity_of_a_level_wise_tree(depth: int) -> None:
    # Both trees choose the same split at any node they share; best-first spends its leaf
    # budget on the largest available decreases. That is not a theorem (a weak split can
    # unlock strong ones deeper down, as in XOR), but on this smooth signal greedy growth
    # must not lose to the balanced tree; a wrong priority order would.
    X, y = noisy_classification(600, 5, seed=3, n_classes=3)
    level = DecisionTreeClassifier(max_depth=depth, random_state=0).fit(X, y)
    n_leaves = level.get_n_leaves()
    assert n_leaves >= 2 ** (depth - 1) + 2  # nearly full, so the budgets are comparable
    best = DecisionTreeClassifier(max_leaf_nodes=n_leaves, random_state=0).fit(X, y)
    assert best.get_n_leaves() == n_leaves
    assert total_decrease(best.tree_) >= total_decrease(level.tree_) - 1e-9
    if depth >= 3:
        assert best.get_depth() > depth  # it did grow differently, so the check had teeth


def test_max_depth_min_samples_leaf_and_min_impurity_decrease_are_respected() -> None:
    X, y = noisy_classification(500, 4, seed=2)
    free = DecisionTreeClassifier(random_state=0).fit(X, y).tree_
    # Each limit must bind on this data, or checking it would prove nothing.
    assert free.max_depth > 5
    assert free.nodes["n_samples"][leaves(free)].min() < 10
    root_weight = free.nodes["weighted_n_samples"][0]
    assert (free.impurity_decrease()[internal(free)] / root_weight).min() < 0.01

    deep = DecisionTreeClassifier(max_depth=5, random_state=0).fit(X, y).tree_
    assert deep.max_depth == 5
    assert np.all(deep.nodes["depth"] <= 5)

    wide = DecisionTreeClassifier(min_samples_leaf=10, random_state=0).fit(X, y).tree_
    assert wide.nodes["n_samples"][leaves(wide)].min() >= 10

    pruned = DecisionTreeClassifier(min_impurity_decrease=0.01, random_state=0).fit(X, y).tree_
    decrease = pruned.impurity_decrease()[internal(pruned)] / root_weight
    assert decrease.min() >= 0.01 - 1e-12  # scikit-learn's units: weighted decrease / N
    assert pruned.node_count < free.node_count

    fraction = DecisionTreeClassifier(min_samples_leaf=0.05, random_state=0).fit(X, y).tree_
    assert fraction.nodes["n_samples"][leaves(fraction)].min() >= 25  # ceil(0.05 · 500)

    split = DecisionTreeClassifier(min_samples_split=40, random_state=0).fit(X, y).tree_
    assert split.nodes["n_samples"][internal(split)].min() >= 40


# --- agreement with scikit-learn on exactly binned data --------------------------------------


def integer_data(seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    n = 400
    X = rng.integers(0, 60, size=(n, 5)).astype(np.float64)  # 60 values per feature
    logit = X[:, 0] / 20 - X[:, 1] / 30 + (X[:, 2] > 30) - 1.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64) + (X[:, 3] > 40)
    return X, y, rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
@pytest.mark.parametrize(
    ("max_depth", "weighted"),
    [(4, False), (4, True), (6, True)],
)
def test_classification_tree_equals_sklearn_on_integer_features(
    criterion: str, max_depth: int, weighted: bool
) -> None:
    # Unweighted deep nodes hold few rows and often tie exactly between features (both
    # libraries then pick arbitrarily), so deeper comparisons use random weights, which
    # make exact ties between different partitions vanishingly unlikely.
    X, y, w = integer_data(0)
    weights = w if weighted else None
    params: dict[str, Any] = {"criterion": criterion, "max_depth": max_depth, "min_samples_leaf": 5}
    ours = DecisionTreeClassifier(**params, random_state=0).fit(X, y, sample_weight=weights)
    theirs = SklearnTreeClassifier(**params, random_state=0).fit(X, y, sample_weight=weights)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    # Same leaves, same class shares: only the summation order differs (≤ a few ulps).
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        ours.feature_importances_, theirs.feature_importances_, rtol=0, atol=1e-12
    )
    assert ours.get_depth() == theirs.get_depth()


@pytest.mark.parametrize("max_depth", [4, 7])
def test_regression_tree_equals_sklearn_on_integer_features(max_depth: int) -> None:
    X, _, w = integer_data(1)
    rng = np.random.default_rng(1)
    y = X[:, 0] / 10 + np.sin(X[:, 1] / 5) + rng.normal(size=X.shape[0])
    params: dict[str, Any] = {"max_depth": max_depth, "min_samples_leaf": 5}
    ours = DecisionTreeRegressor(**params, random_state=0).fit(X, y, sample_weight=w)
    theirs = SklearnTreeRegressor(**params, random_state=0).fit(X, y, sample_weight=w)
    assert ours.tree_.node_count == theirs.tree_.node_count
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        ours.feature_importances_, theirs.feature_importances_, rtol=0, atol=1e-12
    )


# --- missing values ------------------------------------------------------------------------


@pytest.mark.parametrize("missing_side", ["with-low", "with-high"])
def test_missingness_that_predicts_the_class_is_learned(missing_side: str) -> None:
    rng = np.random.default_rng(6)
    n = 300
    x = rng.uniform(0, 10, n)
    noise = rng.normal(size=n)
    # Class 1: x > 5 or missing ("with-high"), or x <= 5 or missing ("with-low").
    y = (x > 5).astype(np.int64) if missing_side == "with-high" else (x <= 5).astype(np.int64)
    missing = rng.random(n) < 0.3
    y[missing] = 1
    X = np.column_stack([np.where(missing, np.nan, x), noise])
    model = DecisionTreeClassifier(max_depth=1).fit(X, y)
    root = model.tree_.nodes[0]
    assert root["feature"] == 0 and 4.5 < root["threshold"] < 5.5
    assert bool(root["missing_left"]) == (missing_side == "with-low")
    np.testing.assert_array_equal(model.predict(X), y)
    probe = np.array([[np.nan, 0.0], [np.nan, 5.0], [np.nan, np.nan]])
    np.testing.assert_array_equal(model.predict(probe), [1, 1, 1])


def test_missingness_alone_is_a_split() -> None:
    rng = np.random.default_rng(7)
    n = 200
    y = rng.integers(0, 2, n)
    x = np.where(y == 1, np.nan, 3.0)  # one present value: only missingness can split
    model = DecisionTreeClassifier(max_depth=1).fit(np.column_stack([x, rng.normal(size=n)]), y)
    assert model.tree_.nodes["feature"][0] == 0
    np.testing.assert_array_equal(model.predict(np.array([[np.nan, 0.0], [3.0, 0.0]])), [1, 0])


def test_unseen_missing_values_follow_the_heavier_child() -> None:
    rng = np.random.default_rng(9)
    x = rng.uniform(0, 10, 400)
    y = (x > 7).astype(np.int64)  # the left child (x <= 7) holds ~70% of the rows
    model = DecisionTreeClassifier(max_depth=1).fit(x.reshape(-1, 1), y)
    assert model.tree_.nodes["missing_left"][0]
    assert model.predict(np.array([[np.nan]]))[0] == 0
    flipped = DecisionTreeClassifier(max_depth=1).fit(-x.reshape(-1, 1), y)  # now right
    assert not flipped.tree_.nodes["missing_left"][0]
    assert flipped.predict(np.array([[np.nan]]))[0] == 0


# --- categorical features ------------------------------------------------------------------


def categorical_data(seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    n = 400
    category = rng.integers(0, 8, n).astype(np.float64)
    X = np.column_stack([rng.normal(size=n), category])
    y = np.isin(category, [0, 3, 5]).astype(np.int64)
    return X, y


def left_categories(tree: Tree, node: int = 0) -> set[int]:
    bits = np.unpackbits(
        tree.category_bitsets[tree.nodes["category_split"][node]], bitorder="little"
    )
    return set(np.flatnonzero(bits[:255]).tolist())


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_a_non_contiguous_category_set_is_split_off_in_one_split(criterion: str) -> None:
    X, y = categorical_data(0)
    model = DecisionTreeClassifier(criterion=criterion, max_depth=1, categorical_features=[1]).fit(
        X, y
    )
    tree = model.tree_
    assert tree.nodes["feature"][0] == 1 and tree.nodes["category_split"][0] >= 0
    assert left_categories(tree) & set(range(8)) in ({0, 3, 5}, {1, 2, 4, 6, 7})
    np.testing.assert_array_equal(model.predict(X), y)
    assert tree.impurity_decrease()[0] == pytest.approx(
        tree.nodes["weighted_n_samples"][0] * tree.nodes["impurity"][0]
    )
    # Read as numbers, the codes need several splits to do the same.
    numeric = DecisionTreeClassifier(criterion=criterion, max_depth=1).fit(X, y)
    assert (numeric.predict(X) != y).any()


def test_unseen_categories_follow_the_missing_direction() -> None:
    X, y = categorical_data(1)
    # No missing values in training: unknown codes go to the heavier child, the five
    # categories outside {0, 3, 5} (class 0).
    model = DecisionTreeClassifier(max_depth=1, categorical_features=[1]).fit(X, y)
    unseen = np.array([[0.0, 8.0], [0.0, -1.0], [0.0, 2.5], [0.0, np.nan], [0.0, 1e6]])
    np.testing.assert_array_equal(model.predict(unseen), [0, 0, 0, 0, 0])
    # Missing values seen with class 1 teach the opposite direction; unseen codes follow it.
    X_missing = np.vstack([X, np.tile([[0.0, np.nan]], (60, 1))])
    y_missing = np.append(y, np.ones(60, dtype=np.int64))
    model = DecisionTreeClassifier(max_depth=1, categorical_features=[1]).fit(X_missing, y_missing)
    np.testing.assert_array_equal(model.predict(X_missing), y_missing)
    np.testing.assert_array_equal(model.predict(unseen), [1, 1, 1, 1, 1])
    np.testing.assert_array_equal(model.predict(np.array([[0.0, 3.0], [0.0, 4.0]])), [1, 0])


def test_regression_on_categories_groups_them_by_mean() -> None:
    rng = np.random.default_rng(3)
    category = rng.integers(0, 6, 300).astype(np.float64)
    means = np.array([4.0, -2.0, 4.0, 0.0, -2.0, 4.0])
    y = means[category.astype(np.int64)] + rng.normal(scale=0.1, size=300)
    model = DecisionTreeRegressor(max_depth=1, categorical_features=[0]).fit(
        category.reshape(-1, 1), y
    )
    assert left_categories(model.tree_) & set(range(6)) in ({0, 2, 5}, {1, 3, 4})


# --- random thresholds ---------------------------------------------------------------------


@pytest.mark.parametrize("with_categorical", [False, True])
def test_random_splitter_thresholds_lie_inside_each_node_range(with_categorical: bool) -> None:
    X, y = noisy_classification(300, 4, seed=4)
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    categorical = None
    if with_categorical:
        X[:, 3] = np.random.default_rng(1).integers(0, 5, X.shape[0])
        categorical = [3]
    model = DecisionTreeClassifier(
        splitter="random", categorical_features=categorical, random_state=0
    ).fit(X, y)
    tree = model.tree_
    member = node_membership(tree, model.bin_mapper_.encode_for_prediction(X))
    n_inside = 0
    for node in np.flatnonzero(internal(tree)):
        feature = tree.nodes["feature"][node]
        column = X[member[node], feature]
        values = column[~np.isnan(column)]
        left, right = tree.nodes["left_child"][node], tree.nodes["right_child"][node]
        assert member[left].any() and member[right].any()
        if tree.nodes["category_split"][node] >= 0:
            continue
        threshold = tree.nodes["threshold"][node]
        if values.min() <= threshold < values.max():
            n_inside += 1
        else:
            # Present values all on one side: only a present-vs-missing split may do that,
            # with the missing rows sent the other way.
            assert threshold >= values.max() and np.isnan(column).any()
            assert not tree.nodes["missing_left"][node]
    assert n_inside > 10
    np.testing.assert_array_equal(model.predict(X), y)  # grown fully, it still memorises


def test_random_thresholds_are_uniform_in_value_space() -> None:
    # One skewed feature: uniform thresholds in value space average near the middle of the
    # range (0.5); a threshold uniform over ranks, or the best cut, would sit near the
    # median of u³ (0.125).
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(size=200) ** 3)
    x = (x - x.min()) / (x.max() - x.min())
    y = rng.integers(0, 2, 200)
    thresholds = [
        DecisionTreeClassifier(splitter="random", max_depth=1, random_state=seed)
        .fit(x.reshape(-1, 1), y)
        .tree_.nodes["threshold"][0]
        for seed in range(300)
    ]
    # Mean of 300 uniform draws on [0, 1]: sd 0.289/√300 ≈ 0.017; 0.07 is over 4 sd and
    # also absorbs snapping to the bin edges (midpoints between sorted values).
    assert abs(np.mean(thresholds) - 0.5) < 0.07
    assert len(set(thresholds)) > 100


def test_random_splitter_depends_on_random_state_only() -> None:
    X, y = noisy_classification(200, 4, seed=5)
    a = DecisionTreeClassifier(splitter="random", random_state=1).fit(X, y)
    b = DecisionTreeClassifier(splitter="random", random_state=1).fit(X, y)
    c = DecisionTreeClassifier(splitter="random", random_state=2).fit(X, y)
    np.testing.assert_array_equal(a.tree_.nodes, b.tree_.nodes)
    assert a.tree_.nodes.shape != c.tree_.nodes.shape or not np.array_equal(
        a.tree_.nodes["threshold"], c.tree_.nodes["threshold"]
    )


def test_unfitted_tree_refuses_to_predict() -> None:
    with pytest.raises(NotFittedError):
        DecisionTreeClassifier().predict(np.zeros((1, 2)))


# --- callbacks -------------------------------------------------------------------------------


def test_a_tree_reports_one_progress_event() -> None:
    X, y = noisy_classification(100, 3, seed=0)
    events: list[ProgressEvent] = []
    DecisionTreeRegressor().fit(X, y.astype(np.float64), callbacks=[events.append])
    assert [(e.estimator, e.done, e.total) for e in events] == [("DecisionTreeRegressor", 1, 1)]


def test_an_interrupted_tree_is_left_unfitted() -> None:
    X, y = noisy_classification(100, 3, seed=0)

    def cancel(event: ProgressEvent) -> None:
        raise TrainingInterrupted

    model = DecisionTreeClassifier()
    with pytest.raises(TrainingInterrupted):
        model.fit(X, y, callbacks=[cancel])
    with pytest.raises(NotFittedError):
        model.predict(X)
