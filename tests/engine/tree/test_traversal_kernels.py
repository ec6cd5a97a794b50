"""Tree traversal: compiled kernels, their NumPy twins and a plain Python descent agree exactly.

Random trees cover every way a row can leave a node (numeric split with ties at the threshold,
NaN at a numeric split in either direction, categorical split by bitset, missing or out-of-range
category code), next to leaf-only trees; batches cover zero rows, one row, rows that do not fill
a lockstep step and rows that span more than one kernel block. Traversal is exact, so leaves
are compared for equality and leaf-value sums bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from engine import RandomForestClassifier, XGBoostClassifier
from engine.tree._tree import NODE_DTYPE, Tree
from engine.tree.predict import leaf_sums as _leaf_sums
from engine.tree.predict import traversal as _traversal
from engine.tree.predict.node_arrays import NodeArrays, node_arrays
from engine.tree.predict.packing import PackedTrees

N_FEATURES = 5
CATEGORICAL = (3,)  # column 3 holds category codes
THRESHOLDS = np.array([-1.0, -0.25, 0.0, 0.5, 1.5])  # rows also take these values: ties


def _random_tree(
    rng: np.random.Generator, *, max_depth: int, n_outputs: int, leaf_only: bool = False
) -> Tree:
    """A valid tree with children in pairs, grown breadth first with random splits."""
    records: list[dict[str, float]] = [{"depth": 0}]
    bitsets: list[NDArray[np.uint8]] = []
    index = -1
    while index + 1 < len(records):
        index += 1
        node = records[index]
        depth = int(node["depth"])
        if leaf_only or depth == max_depth or (depth > 0 and rng.random() < 0.3):
            node.update(left_child=-1, right_child=-1, feature=-1, category_split=-1)
            node.update(threshold=-2.0)  # leaves' thresholds must never be read
            continue
        feature = int(rng.integers(N_FEATURES))
        node.update(left_child=len(records), right_child=len(records) + 1, feature=feature)
        node.update(missing_left=int(rng.integers(2)), category_split=-1)
        if feature in CATEGORICAL:
            node.update(category_split=len(bitsets), threshold=np.nan)
            bitsets.append(rng.integers(0, 256, size=32, dtype=np.uint8))
        else:
            node.update(threshold=float(rng.choice(THRESHOLDS)))
        records += [{"depth": depth + 1}, {"depth": depth + 1}]
    nodes = np.zeros(len(records), dtype=NODE_DTYPE)
    for index, record in enumerate(records):
        for field, value in record.items():
            nodes[index][field] = value
    values = rng.normal(size=(len(records), n_outputs))
    values[rng.random(values.shape) < 0.1] = -0.0  # sums must keep the sign rules too
    category_bitsets = np.array(bitsets, dtype=np.uint8).reshape(-1, 32)
    return Tree(nodes, values, category_bitsets, N_FEATURES)


def _random_trees(seed: int, n_trees: int, n_outputs: int = 2, max_depth: int = 8) -> list[Tree]:
    rng = np.random.default_rng(seed)
    trees = [
        _random_tree(rng, max_depth=int(rng.integers(1, max_depth + 1)), n_outputs=n_outputs)
        for _ in range(n_trees)
    ]
    # Leaf-only trees among the others (a forest member on pure data is one).
    trees[:: max(1, n_trees // 3)] = [
        _random_tree(rng, max_depth=0, n_outputs=n_outputs, leaf_only=True)
        for _ in trees[:: max(1, n_trees // 3)]
    ]
    return trees


def _random_rows(seed: int, n_rows: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_FEATURES))
    ties = rng.random(X.shape) < 0.2
    X[ties] = rng.choice(THRESHOLDS, size=int(ties.sum()))
    X[rng.random(X.shape) < 0.15] = np.nan
    for column in CATEGORICAL:
        codes = rng.integers(0, 20, size=n_rows).astype(np.float64)
        codes[rng.random(n_rows) < 0.15] = np.nan
        # Codes no bitset covers (encoding never makes them) must go the missing way.
        odd = rng.random(n_rows) < 0.05
        codes[odd] = rng.choice([-1.0, -0.5, 256.0, 1e9], size=int(odd.sum()))
        X[:, column] = codes
    return X


def _reference_leaf(tree: Tree, row: NDArray[np.float64], routes: set[str]) -> int:
    """Descend one tree one node at a time, reading its node records; note each route taken."""
    node = 0
    while tree.nodes[node]["left_child"] >= 0:
        record = tree.nodes[node]
        value = float(row[record["feature"]])
        if record["category_split"] >= 0:
            if not math.isnan(value) and 0 <= value < 256:
                code = int(value)
                bits = tree.category_bitsets[record["category_split"], code // 8]
                goes_left = bool((bits >> (code % 8)) & 1)
                routes.add(f"category {'left' if goes_left else 'right'}")
            else:
                goes_left = bool(record["missing_left"])
                routes.add(f"category missing {'left' if goes_left else 'right'}")
        elif math.isnan(value):
            goes_left = bool(record["missing_left"])
            routes.add(f"numeric missing {'left' if goes_left else 'right'}")
        else:
            goes_left = value <= record["threshold"]
            routes.add("numeric tie" if value == record["threshold"] else "numeric")
        node = int(record["left_child"] if goes_left else record["right_child"])
    return node


def _arguments(
    arrays: NodeArrays,
) -> tuple[
    NDArray[np.intp],
    NDArray[np.intp],
    NDArray[np.void],
    NDArray[np.bool_],
    NDArray[np.int32],
    NDArray[np.uint8],
]:
    """The node arrays as the kernels take them, after ``X``."""
    a = arrays
    return a.roots, a.depths, a.nodes, a.missing_left, a.category_split, a.category_bitsets


def _node_values(trees: list[Tree]) -> NDArray[np.float64]:
    return np.ascontiguousarray(np.concatenate([tree.values for tree in trees]))


def _assert_bits_equal(actual: NDArray[np.float64], expected: NDArray[np.float64]) -> None:
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual.view(np.uint64), expected.view(np.uint64))


# Trees at most 8 deep take the kernels' fixed passes, deeper ones their stop-at-the-leaf
# descent (``FIXED_PASS_MAX_DEPTH``); one row spreads a step over trees, many rows over rows.
@pytest.mark.parametrize("max_depth", [8, 20])
@pytest.mark.parametrize(
    ("seed", "n_trees", "n_rows"),
    [(0, 1, 0), (1, 1, 1), (2, 7, 1), (3, 7, 15), (4, 40, 17), (5, 3, 300)],
)
def test_kernel_twin_and_reference_reach_the_same_leaves(
    seed: int, n_trees: int, n_rows: int, max_depth: int
) -> None:
    trees = _random_trees(seed, n_trees, max_depth=max_depth)
    X = _random_rows(seed + 100, n_rows)
    arrays = node_arrays([tree.nodes for tree in trees], [tree.category_bitsets for tree in trees])
    compiled = _traversal._leaf_indices_kernel(X, *_arguments(arrays))
    twin = _traversal._leaf_indices_numpy(X, *_arguments(arrays))
    routes: set[str] = set()
    reference = np.array(
        [[_reference_leaf(tree, row, routes) for tree in trees] for row in X], dtype=np.intp
    ).reshape(n_rows, n_trees)
    expected = reference + arrays.roots[None, :]
    assert compiled.shape == twin.shape == (n_rows, n_trees)
    np.testing.assert_array_equal(compiled, expected)
    np.testing.assert_array_equal(twin, expected)


def test_random_inputs_take_every_route() -> None:
    """The trees and rows above do exercise each routing rule (else the tests prove little)."""
    assert max(tree.max_depth for tree in _random_trees(4, 40, max_depth=20)) > (
        _traversal.FIXED_PASS_MAX_DEPTH
    )
    trees = _random_trees(3, 40)
    routes: set[str] = set()
    for row in _random_rows(103, 200):
        for tree in trees:
            _reference_leaf(tree, row, routes)
    assert routes == {
        "numeric",
        "numeric tie",
        "numeric missing left",
        "numeric missing right",
        "category left",
        "category right",
        "category missing left",
        "category missing right",
    }


@pytest.mark.parametrize("max_depth", [8, 20])
@pytest.mark.parametrize("n_outputs", [1, 3])
# Fewer than MIN_ROWS_FOR_TREE_BY_TREE rows add the leaves the leaf-index walk found; more take
# the trees one by one, adding each leaf's values as a row reaches it.
@pytest.mark.parametrize("n_rows", [0, 1, 33, 300])
def test_kernel_and_twin_sums_are_bit_identical(
    n_outputs: int, n_rows: int, max_depth: int
) -> None:
    trees = _random_trees(7 + n_rows, 25, n_outputs, max_depth)
    X = _random_rows(8, n_rows)
    arrays = node_arrays([tree.nodes for tree in trees], [tree.category_bitsets for tree in trees])
    node_values = _node_values(trees)
    compiled = _leaf_sums._leaf_value_sums_kernel(X, *_arguments(arrays), node_values)
    twin = _leaf_sums._leaf_value_sums_numpy(X, *_arguments(arrays), node_values)
    # The sum as its definition: leaf values added tree by tree from 0.0.
    expected = np.zeros((n_rows, n_outputs))
    for i, row in enumerate(X):
        for tree in trees:
            expected[i] += tree.values[_reference_leaf(tree, row, set())]
    _assert_bits_equal(compiled, expected)
    _assert_bits_equal(twin, expected)


@pytest.mark.parametrize("n_rows", [1, 33, 300])
def test_finite_means_are_the_sums_divided_or_nothing_for_an_infinity(n_rows: int) -> None:
    trees = _random_trees(50 + n_rows, 25, 2, 20)
    X = _random_rows(51, n_rows)
    arrays = node_arrays([tree.nodes for tree in trees], [tree.category_bitsets for tree in trees])
    node_values = _node_values(trees)
    expected = _leaf_sums._leaf_value_sums_numpy(X, *_arguments(arrays), node_values) / len(trees)
    for means in (
        _leaf_sums._finite_leaf_value_means_kernel(X, *_arguments(arrays), node_values),
        _leaf_sums._finite_leaf_value_means_numpy(X, *_arguments(arrays), node_values),
    ):
        _assert_bits_equal(means, expected)
    for infinity in (np.inf, -np.inf):
        X_bad = X.copy()
        X_bad[n_rows - 1, 3] = infinity
        assert _leaf_sums.finite_leaf_value_means(X_bad, arrays, node_values) is None
        for means in (
            _leaf_sums._finite_leaf_value_means_kernel(X_bad, *_arguments(arrays), node_values),
            _leaf_sums._finite_leaf_value_means_numpy(X_bad, *_arguments(arrays), node_values),
        ):
            assert means.shape == (0, 2)


def test_batches_spanning_blocks_and_partial_steps_agree() -> None:
    """More rows than two kernel blocks, ending in a step the rows do not fill."""
    trees = _random_trees(11, 8, max_depth=20)
    arrays = node_arrays([tree.nodes for tree in trees], [tree.category_bitsets for tree in trees])
    block = max(
        _traversal._rows_per_block(arrays.nodes.size, len(trees)),
        _leaf_sums._rows_per_sum_block(arrays.nodes.size, len(trees)),
    )
    n_rows = 2 * block + _traversal.PAIRS_IN_STEP + 3
    X = _random_rows(12, n_rows)
    assert n_rows * len(trees) >= _traversal.COMPACT_MIN_PAIRS  # the twin compacts too
    np.testing.assert_array_equal(
        _traversal._leaf_indices_kernel(X, *_arguments(arrays)),
        _traversal._leaf_indices_numpy(X, *_arguments(arrays)),
    )
    node_values = _node_values(trees)
    _assert_bits_equal(
        _leaf_sums._leaf_value_sums_kernel(X, *_arguments(arrays), node_values),
        _leaf_sums._leaf_value_sums_numpy(X, *_arguments(arrays), node_values),
    )


def test_single_tree_apply_and_predict_follow_the_reference() -> None:
    X = _random_rows(21, 50)
    for tree in _random_trees(20, 6):
        expected = np.array([_reference_leaf(tree, row, set()) for row in X], dtype=np.intp)
        np.testing.assert_array_equal(tree.apply(X), expected)
        np.testing.assert_array_equal(tree.predict(X), tree.values[expected])


def test_a_matrix_narrower_than_the_trees_is_refused() -> None:
    trees = [tree for tree in _random_trees(30, 8) if tree.node_count > 1]
    needed = max(int(tree.nodes["feature"].max()) for tree in trees) + 1
    with pytest.raises(ValueError, match=f"at least {needed} columns"):
        PackedTrees(trees).apply(np.zeros((2, needed - 1)))


def _fitted_models() -> tuple[NDArray[np.float64], RandomForestClassifier, XGBoostClassifier]:
    rng = np.random.default_rng(40)
    X = rng.normal(size=(400, 4))
    X[:, 3] = rng.integers(0, 6, size=400)
    y = (X[:, 0] + np.isin(X[:, 3], [1, 4]) > 0.5).astype(int)
    X[rng.random(400) < 0.1, 0] = np.nan
    forest = RandomForestClassifier(n_estimators=8, categorical_features=[3], random_state=0)
    boosted = XGBoostClassifier(n_estimators=10, max_depth=3, categorical_features=[3])
    return X, forest.fit(X, y), boosted.fit(X, y)


def test_estimators_predict_the_same_on_kernels_and_twins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, forest, boosted = _fitted_models()
    compiled = (forest.predict_proba(X), forest.apply(X), boosted.predict_proba(X))
    monkeypatch.setattr(_traversal, "_leaf_indices", _traversal._leaf_indices_numpy)
    monkeypatch.setattr(_leaf_sums, "_leaf_value_sums", _leaf_sums._leaf_value_sums_numpy)
    twins = (forest.predict_proba(X), forest.apply(X), boosted.predict_proba(X))
    _assert_bits_equal(compiled[0], twins[0])
    np.testing.assert_array_equal(compiled[1], twins[1])
    _assert_bits_equal(compiled[2], twins[2])
