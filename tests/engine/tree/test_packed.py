"""Packed joint traversal of many trees agrees with descending each tree on its own.

``Tree.apply`` lays out one tree; ``PackedTrees`` lays out many with their node and category
bitset offsets shifted, and every (row, tree) pair must reach the same leaf either way. The
routing itself is held to a plain Python descent in ``test_traversal_kernels.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import ExtraTreesRegressor, RandomForestClassifier, XGBoostClassifier
from engine.parallel import prediction_threads
from engine.tree.predict import leaf_sums as _leaf_sums
from engine.tree.predict import traversal as _traversal
from engine.tree.predict.packing import PackedTrees


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 5] = rng.integers(0, 8, size=n)  # categorical codes
    y = (X[:, 0] + np.isin(X[:, 5], [1, 2, 6]) - X[:, 2] ** 2 > 0).astype(int)
    X[rng.random(n) < 0.1, 1] = np.nan
    X[rng.random(n) < 0.05, 5] = np.nan
    return X, y


@pytest.mark.parametrize("n_rows", [1, 7, 3000])  # 3000 × 15 trees passes the compaction floor
def test_packed_leaves_match_per_tree_apply(n_rows: int) -> None:
    X, y = _data(600, 0)
    forest = RandomForestClassifier(n_estimators=15, categorical_features=[5], random_state=1)
    forest.fit(X, y)
    X_new, _ = _data(n_rows, 1)
    X_new[0, 5] = 99.0  # an unseen category follows the missing direction
    encoded = forest._prepare(X_new)
    expected = np.stack([tree.apply(encoded) for tree in forest.trees_], axis=1)
    assert (n_rows * 15 >= _traversal.COMPACT_MIN_PAIRS) == (n_rows == 3000)
    np.testing.assert_array_equal(PackedTrees(forest.trees_).local_leaves(encoded), expected)
    np.testing.assert_array_equal(forest.apply(X_new), expected)


def test_packed_prediction_is_the_mean_of_member_predictions() -> None:
    X, _ = _data(500, 2)
    target = X[:, 0] * 3.0 + np.nan_to_num(X[:, 1])
    model = ExtraTreesRegressor(n_estimators=9, random_state=0).fit(X, target)
    encoded = model._prepare(X)
    expected = np.mean([tree.predict(encoded)[:, 0] for tree in model.trees_], axis=0)
    np.testing.assert_allclose(model.predict(X), expected, rtol=0, atol=1e-12)


def test_threaded_chunks_give_the_same_predictions() -> None:
    X, y = _data(800, 3)
    serial = RandomForestClassifier(n_estimators=10, random_state=4).fit(X, y)
    threaded = RandomForestClassifier(n_estimators=10, random_state=4, n_jobs=2).fit(X, y)
    X_big = np.tile(X, (80, 1))  # 64k rows × 10 trees: several chunks on two threads
    np.testing.assert_array_equal(threaded.predict_proba(X_big), serial.predict_proba(X_big))


def test_prediction_threads_override_n_jobs_with_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server's ``prediction_threads`` shares a large batch among threads whatever the
    model's ``n_jobs`` (its fit's processes), for forests and XGBoost-style boosting alike,
    and the answer does not change by a bit."""
    X, y = _data(700, 7)
    X_big = np.tile(X, (8, 1))  # 5,600 rows: two threads' worth (MIN_ROWS_PER_THREAD)
    forest = RandomForestClassifier(n_estimators=6, random_state=2).fit(X, y)
    boosted = XGBoostClassifier(n_estimators=5, random_state=2).fit(X, y)
    shares: list[int] = []
    real = PackedTrees.leaf_value_sum

    def counting(self: PackedTrees, X: np.ndarray, n_threads: int = 1) -> np.ndarray:
        shares.append(n_threads)
        return real(self, X, n_threads)

    monkeypatch.setattr(PackedTrees, "leaf_value_sum", counting)
    for model in (forest, boosted):
        alone = model.predict_proba(X_big)
        with prediction_threads(2):
            shared = model.predict_proba(X_big)
        np.testing.assert_array_equal(shared.view(np.uint64), alone.view(np.uint64))
    assert shares == [1, 2, 1, 2]
    with pytest.raises(ValueError, match="at least 1"), prediction_threads(0):
        pass


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_forest_probabilities_are_the_tree_by_tree_sum_to_the_last_bit(n_jobs: int) -> None:
    """Every batch size, on one thread or two, gives each row the sum of its trees' leaf values
    added in tree order from 0.0, divided once: small batches (the leaf-index walk), large
    ones (tree by tree, leaves added as rows reach them) and batches split among threads."""
    X, y = _data(700, 5)
    forest = RandomForestClassifier(n_estimators=12, random_state=2, n_jobs=n_jobs).fit(X, y)
    X_big = np.tile(X, (8, 1))  # 5,600 rows: two threads' worth (MIN_ROWS_PER_THREAD)
    encoded = forest._prepare(X_big)
    expected = np.zeros((X_big.shape[0], 2))
    for tree in forest.trees_:
        expected += tree.predict(encoded)
    expected /= len(forest.trees_)
    for n_rows in (1, _leaf_sums.MIN_ROWS_FOR_TREE_BY_TREE - 1, 300, X_big.shape[0]):
        actual = forest.predict_proba(X_big[:n_rows])
        np.testing.assert_array_equal(actual.view(np.uint64), expected[:n_rows].view(np.uint64))


def test_the_twin_sums_a_batch_in_chunks_as_in_one(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _data(300, 6)
    forest = RandomForestClassifier(n_estimators=5, random_state=3).fit(X, y)
    packed, encoded = forest._packed(), forest._prepare(X)
    arguments = (packed._nodes.roots, packed._nodes.depths, packed._nodes.nodes)
    rest = (packed._nodes.missing_left, packed._nodes.category_split)
    whole = _leaf_sums._leaf_value_sums_numpy(
        encoded, *arguments, *rest, packed._nodes.category_bitsets, packed.values
    )
    monkeypatch.setattr(_leaf_sums, "TWIN_PAIRS_PER_CHUNK", 7 * 5)  # 7-row chunks
    chunked = _leaf_sums._leaf_value_sums_numpy(
        encoded, *arguments, *rest, packed._nodes.category_bitsets, packed.values
    )
    np.testing.assert_array_equal(chunked.view(np.uint64), whole.view(np.uint64))
