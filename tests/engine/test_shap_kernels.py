"""TreeSHAP's Numba kernels against their NumPy twin, on random trees and awkward inputs.

Tolerance: both compute the same exact Shapley values, but in different orders — the twin
sums the leaves of a group at once through exp/log, the kernels leaf by leaf through direct
products — so they differ by rounding only: about (leaves + slots) · 2⁻⁵² relative to the
largest leaf value (every leaf term is at most |v|, since |o − z| ≤ 1 and the integral of a
product of numbers in [0, 1] is at most 1). ``rtol=1e-9`` with ``atol=1e-12 · max|v|`` leaves
three orders of magnitude of headroom over what is measured (~4e-15 relative) while staying
far below any real error (a wrong weight or pattern moves values by ~1e-3 · |v| or more).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from engine import RandomForestClassifier, RandomForestRegressor
from engine._kernels import KERNELS_ENV, compiled_kernels
from engine.explain.treeshap import compiled, explain_tree, kernels, vectorised
from engine.tree._tree import NODE_DTYPE, Tree


def random_tree(
    rng: np.random.Generator,
    n_leaves: int,
    n_features: int,
    n_outputs: int = 1,
    categorical: tuple[int, ...] = (),
    chain: bool = False,
) -> Tree:
    """A random tree over the flat node layout, children in pairs.

    Leaves get random integer covers, zero included (internal covers are the sums), so
    some splits have ``z = 0``; features repeat along paths. ``chain`` always splits the
    newest leaf, giving one path as deep as the tree has splits.
    """
    left = [-1]
    for _ in range(n_leaves - 1):
        leaves = [i for i, child in enumerate(left) if child < 0]
        node = leaves[-1] if chain else int(rng.choice(leaves))
        left[node] = len(left)
        left += [-1, -1]
    n_nodes = len(left)
    nodes = np.zeros(n_nodes, dtype=NODE_DTYPE)
    nodes["left_child"] = left
    internal = nodes["left_child"] >= 0
    nodes["right_child"] = np.where(internal, nodes["left_child"] + 1, -1)
    feature = rng.integers(0, n_features, n_nodes)
    nodes["feature"] = np.where(internal, feature, -1)
    nodes["threshold"] = rng.normal(size=n_nodes)
    nodes["missing_left"] = rng.integers(0, 2, n_nodes)
    nodes["category_split"] = -1
    split_rows = np.flatnonzero(internal & np.isin(feature, categorical))
    nodes["category_split"][split_rows] = np.arange(split_rows.size)
    bitsets = rng.integers(0, 256, (split_rows.size, 32)).astype(np.uint8)
    cover = np.where(internal, 0.0, rng.integers(0, 4, n_nodes).astype(float))
    for node in np.flatnonzero(internal)[::-1]:  # children come after their parent
        cover[node] = cover[left[node]] + cover[left[node] + 1]
    nodes["weighted_n_samples"] = cover
    nodes["n_samples"] = cover.astype(np.int64)
    for node in np.flatnonzero(internal):  # Tree.apply's kernels descend at most max depth
        nodes["depth"][[left[node], left[node] + 1]] = nodes["depth"][node] + 1
    values = rng.normal(size=(n_nodes, n_outputs))
    return Tree(nodes, values, bitsets, n_features)


def random_rows(
    rng: np.random.Generator, n_rows: int, n_features: int, categorical: tuple[int, ...] = ()
) -> np.ndarray:
    """Normal values with 15% NaN; categorical columns hold codes 0–11 (and NaN)."""
    X = rng.normal(size=(n_rows, n_features))
    for f in categorical:
        X[:, f] = rng.integers(0, 12, n_rows)
    X[rng.random(X.shape) < 0.15] = np.nan
    return X


def assert_kernels_match_twin(tree: Tree, X: np.ndarray) -> None:
    """Both kernel paths equal the twin, and each satisfies local accuracy."""
    twin, twin_expected = vectorised.explain_tree(tree, X)
    scale = max(1.0, float(np.abs(tree.values).max()))
    predicted = tree.predict(X) if X.shape[0] else np.zeros((0, tree.values.shape[1]))
    for share_patterns in (True, False):
        phi, expected = compiled.explain_tree(tree, X, share_patterns=share_patterns)
        assert phi.shape == twin.shape
        np.testing.assert_allclose(phi, twin, rtol=1e-9, atol=1e-12 * scale)
        np.testing.assert_allclose(expected, twin_expected, rtol=1e-12, atol=1e-12 * scale)
        np.testing.assert_allclose(
            phi.sum(axis=1) + expected, predicted, rtol=1e-9, atol=1e-10 * scale
        )
    np.testing.assert_allclose(twin.sum(axis=1) + twin_expected, predicted, atol=1e-10 * scale)


@pytest.mark.parametrize("seed", range(8))
def test_random_trees_with_missing_values_and_categories(seed: int) -> None:
    rng = np.random.default_rng(seed)
    categorical = (0, 3)
    n_outputs = 1 + seed % 3
    tree = random_tree(rng, int(rng.integers(2, 60)), 6, n_outputs, categorical)
    assert tree.category_bitsets.shape[0] > 0
    # Enough rows for patterns to repeat (shared evaluation) and a chunk boundary.
    X = random_rows(rng, 300 + 97 * seed, 6, categorical)
    assert_kernels_match_twin(tree, X)


@pytest.mark.parametrize("n_leaves", [30, 45])
def test_deep_paths_beyond_the_shared_patterns(n_leaves: int) -> None:
    # One path of 29 or 44 splits over 40 features: the deepest leaves have more slots than
    # SHARED_MAX_SLOTS (the per-row path) and need Gauss–Legendre rules of 9+ nodes.
    rng = np.random.default_rng(n_leaves)
    tree = random_tree(rng, n_leaves, 40, chain=True)
    paths = compiled._LeafPaths.of(tree)
    assert np.diff(paths.slot_start).max() > kernels.SHARED_MAX_SLOTS
    assert_kernels_match_twin(tree, random_rows(rng, 50, 40))


def test_grown_forests_in_every_output_layout() -> None:
    rng = np.random.default_rng(11)
    X = random_rows(rng, 600, 5, categorical=(4,))
    y = np.nan_to_num(X[:, 0]) + (X[:, 4] > 5)
    regressor = RandomForestRegressor(
        n_estimators=2, max_depth=8, categorical_features=[4], random_state=0
    ).fit(X, y)
    classifier = RandomForestClassifier(
        n_estimators=2, max_depth=8, categorical_features=[4], random_state=0
    ).fit(X, np.digitize(y, [0.0, 1.0]))
    for forest in (regressor, classifier):
        X_test = forest._prepare(random_rows(rng, 2500, 5, categorical=(4,)))
        for tree in forest.trees_:
            assert_kernels_match_twin(tree, X_test)


def test_single_leaf_one_row_and_no_rows() -> None:
    rng = np.random.default_rng(5)
    stump = random_tree(rng, 1, 3, n_outputs=2)
    phi, expected = compiled.explain_tree(stump, random_rows(rng, 4, 3))
    assert phi.shape == (4, 3, 2) and (phi == 0).all()
    np.testing.assert_array_equal(expected, stump.values[0])
    tree = random_tree(rng, 12, 3, categorical=(1,))
    assert_kernels_match_twin(tree, random_rows(rng, 1, 3, categorical=(1,)))
    assert_kernels_match_twin(tree, np.zeros((0, 3)))


def test_a_rows_values_do_not_depend_on_the_other_rows() -> None:
    # Alone, a row is its leaves' only pattern (evaluated pattern by pattern); among 800
    # rows its patterns are shared and evaluated across patterns. Same arithmetic, same bits.
    rng = np.random.default_rng(12)
    tree = random_tree(rng, 40, 5, n_outputs=2, categorical=(2,))
    X = random_rows(rng, 800, 5, categorical=(2,))
    batch = compiled.explain_tree(tree, X)[0]
    for r in (0, 1, 399, 799):
        np.testing.assert_array_equal(compiled.explain_tree(tree, X[r : r + 1])[0][0], batch[r])
    for r in (5, 6):
        alone = compiled.explain_tree(tree, X[r : r + 1], share_patterns=False)[0][0]
        np.testing.assert_array_equal(alone, batch[r])


def test_expected_value_is_the_cover_weighted_leaf_mean() -> None:
    rng = np.random.default_rng(6)
    tree = random_tree(rng, 30, 4, n_outputs=2)
    nodes = tree.nodes
    leaves = nodes["left_child"] < 0
    cover = nodes["weighted_n_samples"]
    expected = cover[leaves] @ tree.values[leaves] / cover[0]
    np.testing.assert_allclose(compiled.expected_value(tree), expected, rtol=1e-12)
    np.testing.assert_allclose(vectorised.expected_value(tree), expected, rtol=1e-12)


def test_category_codes_outside_the_bitsets_go_the_missing_way() -> None:
    rng = np.random.default_rng(7)
    tree = random_tree(rng, 16, 2, categorical=(0, 1))
    X = np.array([[300.0, 2.0], [-3.0, 1e30], [np.inf, -np.inf]])
    as_missing = np.where(np.isin(X, [300.0, -3.0, 1e30, np.inf, -np.inf]), np.nan, X)
    np.testing.assert_array_equal(
        compiled.explain_tree(tree, X)[0], compiled.explain_tree(tree, as_missing)[0]
    )


def test_the_environment_selects_the_implementation() -> None:
    chosen = compiled if compiled_kernels() else vectorised
    assert explain_tree is chosen.explain_tree
    # ``from``: ``engine.explain`` as an attribute of ``engine`` is the explain() function.
    code = "from engine.explain import treeshap as s; print(s.explain_tree.__module__)"
    for choice, module in (
        ("numpy", "engine.explain.treeshap.vectorised"),
        ("numba", "engine.explain.treeshap.compiled"),
    ):
        env = {**os.environ, KERNELS_ENV: choice}
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == module
