"""Path-dependent TreeSHAP against brute-force Shapley values, and additivity on every model."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    BaggingClassifier,
    BaggingRegressor,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.explain.treeshap import compiled, vectorised
from engine.shap import (
    ExplainedTrees,
    explained_trees,
    tree_contributions,
    tree_expected_value,
    tree_shap,
)
from engine.tree._tree import NODE_DTYPE, Tree

# -- the reference: Shapley values of the cover-weighted conditional expectation --------


def goes_left(tree: Tree, node: int, x: np.ndarray) -> bool:
    """Where ``x`` goes at ``node``, written plainly from the node fields."""
    fields = tree.nodes[node]
    value = x[fields["feature"]]
    if np.isnan(value):
        return bool(fields["missing_left"])
    if fields["category_split"] >= 0:
        code = int(value)
        bitset = tree.category_bitsets[fields["category_split"]]
        return bool((bitset[code // 8] >> (code % 8)) & 1)
    return bool(value <= fields["threshold"])


def conditional_expectation(tree: Tree, x: np.ndarray, known: set[int]) -> np.ndarray:
    """E[f(x) | x_S]: known features follow x, the others split by training cover."""
    nodes = tree.nodes

    def walk(node: int) -> np.ndarray:
        left = int(nodes["left_child"][node])
        if left < 0:
            return tree.values[node]
        right = int(nodes["right_child"][node])
        if int(nodes["feature"][node]) in known:
            return walk(left if goes_left(tree, node, x) else right)
        cover = nodes["weighted_n_samples"]
        return (cover[left] * walk(left) + cover[right] * walk(right)) / cover[node]

    return walk(0)


def brute_force_shap(tree: Tree, x: np.ndarray) -> np.ndarray:
    """Shapley values by enumerating every coalition, shape (n_features, n_outputs)."""
    n = tree.n_features
    phi = np.zeros((n, tree.values.shape[1]))
    for i in range(n):
        others = [f for f in range(n) if f != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for coalition in itertools.combinations(others, size):
                with_i = conditional_expectation(tree, x, {*coalition, i})
                without_i = conditional_expectation(tree, x, set(coalition))
                phi[i] += weight * (with_i - without_i)
    return phi


# The NumPy twin forcing its pattern table on or off, with either of its kernels.
KERNELS = list(itertools.product((True, False), (True, False)))


def shap_with(tree: Tree, X: np.ndarray, *, use_table: bool, reference: bool) -> np.ndarray:
    """The NumPy twin's TreeSHAP forcing the pattern table on or off, with either kernel."""
    return vectorised.explain_tree(tree, X, use_table=use_table, reference=reference)[0]


def every_implementation(tree: Tree, X: np.ndarray) -> list[np.ndarray]:
    """SHAP values from each path of the twin and of the compiled kernels."""
    twin = [shap_with(tree, X, use_table=t, reference=r) for t, r in KERNELS]
    kernels = [compiled.explain_tree(tree, X, share_patterns=s)[0] for s in (True, False)]
    return twin + kernels


# -- data -------------------------------------------------------------------------------


def mixed_data(
    n_samples: int, n_features: int, seed: int, n_classes: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Numeric features with missing values, and a categorical column (last, codes 0–5)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, n_features))
    X[:, -1] = rng.integers(0, 6, size=n_samples)
    score = X[:, 0] + X[:, 1] * X[:, 2] + np.isin(X[:, -1], [1, 4]) - 0.5
    numeric = X[:, :-1]  # a view
    numeric[rng.random(numeric.shape) < 0.1] = np.nan
    X[rng.random(n_samples) < 0.3, 0] = np.nan
    if not n_classes:
        return X, score + 0.1 * rng.normal(size=n_samples)
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, score)


SMALL_TREES = [
    DecisionTreeRegressor(max_depth=4, categorical_features=[4], random_state=0),
    DecisionTreeClassifier(max_depth=4, categorical_features=[4], random_state=1),
    DecisionTreeRegressor(max_depth=4, splitter="random", random_state=2),
]


@pytest.mark.parametrize("model", SMALL_TREES, ids=["regressor", "multiclass", "random"])
def test_single_tree_matches_brute_force(model: Any) -> None:
    n_classes = 3 if isinstance(model, DecisionTreeClassifier) else 0
    X, y = mixed_data(300, 5, seed=3, n_classes=n_classes)
    model.fit(X, y)
    tree = model.tree_
    X_test = model._prepare(mixed_data(25, 5, seed=4)[0])
    assert tree.category_bitsets.shape[0] or not model.get_params()["categorical_features"]
    assert np.isnan(X_test).any()
    expected = np.stack([brute_force_shap(tree, x) for x in X_test])
    for phi in every_implementation(tree, X_test):
        np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(tree_shap(tree, X_test), expected, rtol=0, atol=1e-10)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_features=st.integers(4, 6),
    max_depth=st.integers(1, 4),
    n_samples=st.integers(20, 120),
)
def test_random_trees_match_brute_force(
    seed: int, n_features: int, max_depth: int, n_samples: int
) -> None:
    X, y = mixed_data(n_samples, n_features, seed=seed, n_classes=2)
    model = DecisionTreeClassifier(
        max_depth=max_depth, categorical_features=[n_features - 1], random_state=seed
    ).fit(X, y)
    X_test = model._prepare(mixed_data(8, n_features, seed=seed + 1)[0])
    expected = np.stack([brute_force_shap(model.tree_, x) for x in X_test])
    for phi in every_implementation(model.tree_, X_test):
        np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-10)


def test_forest_members_match_brute_force() -> None:
    X, y = mixed_data(200, 6, seed=5, n_classes=2)
    forest = ExtraTreesClassifier(
        n_estimators=3, max_depth=4, categorical_features=[5], bootstrap=True, random_state=0
    ).fit(X, y)
    X_test = forest._prepare(mixed_data(10, 6, seed=6)[0])
    for tree in forest.trees_:
        expected = np.stack([brute_force_shap(tree, x) for x in X_test])
        for phi in every_implementation(tree, X_test):
            np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-10)


def test_zero_cover_leaf_and_repeated_feature() -> None:
    # Root on x0 with an empty left leaf (z = 0); x0 is split on again deeper on the right.
    rows = [  # left, feature, threshold, missing_left, cover
        (1, 0, 0.0, 1, 10.0),
        (-1, -1, 0.0, 0, 0.0),
        (3, 1, 0.0, 0, 10.0),
        (5, 0, 1.0, 1, 6.0),
        (-1, -1, 0.0, 0, 4.0),
        (-1, -1, 0.0, 0, 2.0),
        (-1, -1, 0.0, 0, 4.0),
    ]
    nodes = np.zeros(len(rows), dtype=NODE_DTYPE)
    for i, (left, feature, threshold, missing_left, cover) in enumerate(rows):
        nodes[i] = (left, left + 1 if left >= 0 else -1, feature, threshold, missing_left, -1,
                    0.0, int(cover), cover, 0)  # fmt: skip
    nodes["depth"] = [0, 1, 1, 2, 2, 3, 3]  # Tree.apply's kernels descend at most max depth
    values = np.array([[3.0], [5.0], [3.0], [34 / 6], [-1.0], [3.0], [7.0]])
    tree = Tree(nodes, values, np.zeros((0, 32), dtype=np.uint8), n_features=3)
    X = np.random.default_rng(15).normal(size=(40, 3))
    X[::7, 0] = np.nan
    expected = np.stack([brute_force_shap(tree, x) for x in X])
    for phi in every_implementation(tree, X):
        np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tree_expected_value(tree), [3.0])
    np.testing.assert_allclose(tree_shap(tree, X).sum(axis=1) + 3.0, tree.predict(X), atol=1e-12)
    assert (tree_shap(tree, X)[:, 2] == 0).all()


def test_expected_value_is_the_root_value() -> None:
    X, y = mixed_data(400, 5, seed=7, n_classes=3)
    forest = RandomForestClassifier(n_estimators=5, categorical_features=[4], random_state=0)
    forest.fit(X, y, sample_weight=np.linspace(0.5, 2.0, 400))
    for tree in forest.trees_:
        nodes = tree.nodes
        internal = nodes["left_child"] >= 0
        cover = nodes["weighted_n_samples"]
        np.testing.assert_allclose(
            cover[nodes["left_child"][internal]] + cover[nodes["right_child"][internal]],
            cover[internal],
        )
        reference = conditional_expectation(tree, np.zeros(5), set())
        np.testing.assert_allclose(tree_expected_value(tree), reference, atol=1e-12)
        np.testing.assert_allclose(tree_expected_value(tree), tree.values[0], atol=1e-12)


def test_fast_kernels_equal_the_reference_kernel() -> None:
    X, y = mixed_data(2000, 8, seed=8)
    forest = RandomForestRegressor(
        n_estimators=4, max_depth=7, categorical_features=[7], random_state=0
    ).fit(X, y)
    X_test = forest._prepare(X[:700])
    for tree in forest.trees_:
        reference = shap_with(tree, X_test, use_table=False, reference=True)
        for use_table, polynomial in KERNELS:
            phi = shap_with(tree, X_test, use_table=use_table, reference=polynomial)
            np.testing.assert_allclose(phi, reference, rtol=0, atol=1e-12)


# -- models -----------------------------------------------------------------------------


def _models() -> list[tuple[str, Any, int]]:
    tree = {"categorical_features": [5], "random_state": 0}
    forest = {"n_estimators": 12, "max_depth": 6, **tree}
    bagging = {"n_estimators": 8, "random_state": 0}
    return [
        ("tree-regressor", DecisionTreeRegressor(max_depth=6, **tree), 0),
        ("tree-binary", DecisionTreeClassifier(**tree), 2),
        ("tree-multiclass", DecisionTreeClassifier(max_depth=5, **tree), 3),
        ("forest-regressor", RandomForestRegressor(**forest), 0),
        ("forest-binary", RandomForestClassifier(**forest), 2),
        ("forest-multiclass", RandomForestClassifier(**forest), 4),
        ("extra-regressor", ExtraTreesRegressor(**forest), 0),
        ("extra-binary", ExtraTreesClassifier(**forest), 2),
        ("extra-multiclass", ExtraTreesClassifier(**forest), 3),
        ("bagging-regressor", BaggingRegressor(max_features=0.6, **bagging), 0),
        ("bagging-binary", BaggingClassifier(**bagging), 2),
        ("bagging-multiclass", BaggingClassifier(max_samples=0.5, **bagging), 3),
    ]


@pytest.mark.parametrize(
    ("model", "n_classes"), [m[1:] for m in _models()], ids=[m[0] for m in _models()]
)
def test_contributions_add_up_to_the_model_output(model: Any, n_classes: int) -> None:
    X, y = mixed_data(400, 6, seed=9, n_classes=n_classes)
    model.fit(X, y)
    X_test = mixed_data(150, 6, seed=10)[0]
    X_test[0, 5] = 17  # a category never seen in training
    contributions, bias = tree_contributions(model, X_test)
    if n_classes == 0:
        output = model.predict(X_test)
    elif n_classes == 2:
        output = model.predict_proba(X_test)[:, 1]
    else:
        output = model.predict_proba(X_test)
    assert contributions.shape == (150, 6, *output.shape[1:])
    assert np.shape(bias) == output.shape[1:]
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, output, rtol=0, atol=1e-6)


def test_unused_feature_gets_exactly_zero() -> None:
    X, y = mixed_data(300, 6, seed=11)
    X[:, 3] = 1.5  # constant: never split on
    forest = RandomForestRegressor(n_estimators=10, max_features=None, random_state=0)
    forest.fit(X, y)
    contributions, _ = tree_contributions(forest, X[:50])
    used = {int(f) for tree in forest.trees_ for f in tree.nodes["feature"] if f >= 0}
    assert 3 not in used
    unused = [f for f in range(6) if f not in used]
    assert (contributions[:, unused] == 0.0).all()


def test_symmetric_features_share_equally() -> None:
    # y = x0 AND x1 on a balanced grid: the game is symmetric in x0 and x1, whatever
    # feature the tree splits on first.
    X = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)] * 25, dtype=float)
    y = X[:, 0] * X[:, 1]
    tree = DecisionTreeRegressor(random_state=0).fit(X, y)
    rows = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    contributions, bias = tree_contributions(tree, rows)
    assert bias == pytest.approx(0.25)
    # By hand: v(∅) = 1/4, v({0}) = x0/2, v({1}) = x1/2, v({0, 1}) = x0·x1.
    np.testing.assert_allclose(contributions[0], [0.375, 0.375, 0.0], atol=1e-12)
    np.testing.assert_allclose(contributions[1], [-0.375, 0.125, 0.0], atol=1e-12)
    np.testing.assert_allclose(contributions[2], [0.125, -0.375, 0.0], atol=1e-12)


def test_constant_target_and_single_rows() -> None:
    X, _ = mixed_data(50, 4, seed=12)
    stump = DecisionTreeRegressor().fit(X, np.full(50, 2.5))
    contributions, bias = tree_contributions(stump, X[:3])
    assert bias == 2.5 and (contributions == 0).all()
    forest = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, X[:, -1])
    single, bias = tree_contributions(forest, X[7:8])
    np.testing.assert_allclose(single.sum() + bias, forest.predict(X[7:8]), atol=1e-9)


def test_unsupported_models_are_refused() -> None:
    X, y = mixed_data(100, 4, seed=13, n_classes=2)
    hard = BaggingClassifier(n_estimators=3, voting="hard", random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="hard voting"):
        tree_contributions(hard, X)
    with pytest.raises(TypeError, match="object"):
        tree_contributions(object(), X)


# -- the extension point: a boosting-like model -----------------------------------------


@dataclass
class _ToyBoosting:
    """``init_ + learning_rate · Σ tree values``, one single-output tree per class."""

    init_: np.ndarray
    learning_rate: float
    trees: list[DecisionTreeRegressor]
    classes: list[int]

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        score = np.tile(self.init_, (X.shape[0], 1))
        for tree, k in zip(self.trees, self.classes, strict=True):
            score[:, k] += self.learning_rate * tree.predict(X)
        return score


@explained_trees.register
def _explain_toy_boosting(model: _ToyBoosting) -> ExplainedTrees:
    return ExplainedTrees(
        trees=[tree.tree_ for tree in model.trees],
        weights=np.full(len(model.trees), model.learning_rate),
        base=model.init_,
        prepare=model.trees[0]._prepare,
        output=None,
        tree_outputs=model.classes,
    )


def test_boosting_models_plug_in() -> None:
    X, y = mixed_data(200, 5, seed=14)
    trees = [DecisionTreeRegressor(max_depth=3 + k % 2).fit(X, y * (k + 1)) for k in range(6)]
    model = _ToyBoosting(np.array([0.5, -1.0, 2.0]), 0.1, trees, [0, 1, 2, 0, 1, 2])
    contributions, bias = tree_contributions(model, X[:40])
    assert contributions.shape == (40, 5, 3)
    np.testing.assert_allclose(
        contributions.sum(axis=1) + bias, model.decision_function(X[:40]), atol=1e-9
    )
