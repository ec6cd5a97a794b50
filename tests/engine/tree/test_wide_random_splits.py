"""Extremely randomised trees on exact binning's wide (``uint16``) codes.

Geurts, Ernst and Wehenkel (2006) draw each candidate's threshold uniformly between the
smallest and largest value present in the node. On a feature with more than 255 distinct
values exact binning gives ``uint16`` codes with missing values at 65535, and code 255 is an
ordinary bin. The NumPy random search once compared codes with 255 and wrote 256-wide
``left_codes``: on wide codes it took the rows of bin 255 for missing ones, the truly missing
rows for present ones, and disagreed with its compiled twin. These tests hold the twin and the
kernel equal on wide codes, with cuts above code 255, and hold the grown tree's routing of raw
values to the rows its growth sent each way.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pytest

from engine.tree import split as split_stage
from engine.tree._binning import BinMapper
from engine.tree._common import MISSING_BIN, WIDE_MISSING_BIN
from engine.tree._criteria import score
from engine.tree.grow.build import BinnedData, TreeSpec, build_tree
from engine.tree.grow.limits import GrowthLimits
from engine.tree.split.compiled import compiled_find_random_splits, compiled_random_level_splits
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.random_vectorised import find_random_splits, random_level_splits_numpy

N_ROWS = 1_500


def wide_data(seed: int) -> tuple[np.ndarray, np.ndarray, BinMapper]:
    """Raw X with two features of many distinct values (and missing ones), its target, and
    the exact binning that gives it wide codes."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.permutation(N_ROWS) * 0.01,  # 1,500 distinct values
            np.round(rng.normal(size=N_ROWS), 2),  # a few hundred
            rng.integers(0, 5, N_ROWS).astype(np.float64),  # five: codes 0..4 of a wide matrix
        ]
    )
    X[rng.random(X.shape) < 0.08] = np.nan
    # The signal sits at high values of feature 0, so good cuts fall past code 255.
    x0 = np.nan_to_num(X[:, 0], nan=3.0)
    y = np.where(x0 > 11.0, 4.0, 0.0) + np.sin(x0) + 0.3 * rng.normal(size=N_ROWS)
    mapper = BinMapper(exact=True).fit(X, np.zeros(X.shape[1], dtype=bool))
    return X, y, mapper


def regression_context(binned: np.ndarray, y: np.ndarray, mapper: BinMapper) -> SplitContext:
    weights = np.ones(binned.shape[0])
    return SplitContext(
        binned=binned,
        channels=np.column_stack([weights, weights * y]),
        criterion="squared_error",
        is_categorical=mapper.is_categorical_,
        bin_values=mapper.bin_values_,
        random_splits=True,
        n_bins=mapper.n_bins_,
        has_missing=bool((binned == WIDE_MISSING_BIN).any()),
    )


def random_batch(
    ctx: SplitContext, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A few nodes of random rows (grouped by node), all features candidates of each."""
    rng = np.random.default_rng(seed)
    n_slots = int(rng.integers(1, 5))
    rows = rng.permutation(ctx.binned.shape[0])[: int(rng.integers(n_slots, 1_200))]
    slot_of_row = np.sort(rng.integers(0, n_slots, rows.size)).astype(np.intp)
    n_features = ctx.binned.shape[1]
    features = np.stack([rng.permutation(n_features) for _ in range(n_slots)]).astype(np.int64)
    parent = np.zeros((n_slots, ctx.channels.shape[1]))
    np.add.at(parent, slot_of_row, ctx.channels[rows])
    counts = np.bincount(slot_of_row, minlength=n_slots).astype(np.int64)
    return rows.astype(np.intp), slot_of_row, features, parent, counts


def assert_same_splits(actual: Splits, expected: Splits) -> None:
    for field in fields(Splits):
        np.testing.assert_array_equal(
            getattr(actual, field.name), getattr(expected, field.name), err_msg=field.name
        )


@pytest.mark.parametrize("seed", range(12))
def test_random_splits_on_wide_codes_equal_the_kernel(seed: int) -> None:
    X, y, mapper = wide_data(seed)
    binned = mapper.transform(X)
    assert binned.dtype == np.uint16 and (binned == WIDE_MISSING_BIN).any()
    ctx = regression_context(binned, y, mapper)
    batch = random_batch(ctx, seed)
    twin = find_random_splits(ctx, *batch, np.random.default_rng(seed))
    kernel = compiled_find_random_splits(ctx, *batch, np.random.default_rng(seed))
    assert twin.found.any()
    assert_same_splits(twin, kernel)
    # One left/right flag per code of the dtype, the missing code last.
    assert twin.left_codes.shape[1] == WIDE_MISSING_BIN + 1
    np.testing.assert_array_equal(twin.left_codes[:, WIDE_MISSING_BIN], twin.missing_left)
    # Each gain is the gain of the partition its left_codes make of the node's rows.
    rows, slot_of_row, _, parent, _ = batch
    for slot in np.flatnonzero(twin.found):
        node_rows = rows[slot_of_row == slot]
        goes_left = twin.left_codes[slot, binned[node_rows, twin.feature[slot]]]
        sides = [ctx.channels[node_rows[goes_left]], ctx.channels[node_rows[~goes_left]]]
        children = sum(score(side.sum(axis=0)[None, :], "squared_error")[0] for side in sides)
        gain = children - score(parent[slot][None, :], "squared_error")[0]
        np.testing.assert_allclose(twin.gain[slot], max(gain, 0.0), rtol=1e-9, atol=1e-9)


def test_random_cuts_reach_codes_past_255() -> None:
    X, y, mapper = wide_data(0)
    binned = mapper.transform(X)
    ctx = regression_context(binned, y, mapper)
    bins = []
    for seed in range(20):
        splits = find_random_splits(ctx, *random_batch(ctx, seed), np.random.default_rng(seed))
        bins.extend(splits.bin[splits.found].tolist())
    assert max(bins) > MISSING_BIN


def grow(binned: np.ndarray, y: np.ndarray, mapper: BinMapper, seed: int) -> Any:
    spec = TreeSpec(
        criterion="squared_error",
        random_splits=True,
        limits=GrowthLimits(max_depth=8, min_samples_leaf=3),
        n_classes=0,
    )
    data = BinnedData.from_mapper(binned, y, mapper)
    leaves = np.empty(binned.shape[0], dtype=np.intp)
    tree = build_tree(
        data, np.ones(binned.shape[0]), spec, np.random.default_rng(seed), None, None, leaves
    )
    return tree, leaves


@pytest.mark.parametrize("seed", range(4))
def test_extra_trees_on_wide_codes_grow_alike_and_route_raw_values_as_grown(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y, mapper = wide_data(seed)
    binned = mapper.transform(X)
    trees = []
    # The random searches' kernels, then their NumPy twins.
    for searches in (
        (compiled_find_random_splits, compiled_random_level_splits),
        (find_random_splits, random_level_splits_numpy),
    ):
        monkeypatch.setattr(split_stage, "random_search", searches[0])
        monkeypatch.setattr(split_stage, "random_level_search", searches[1])
        trees.append(grow(binned, y, mapper, seed))
    (kernel_tree, kernel_leaves), (twin_tree, twin_leaves) = trees
    for name in ("left_child", "feature", "threshold", "missing_left", "n_samples"):
        np.testing.assert_array_equal(twin_tree.nodes[name], kernel_tree.nodes[name])
    np.testing.assert_array_equal(twin_tree.values, kernel_tree.values)
    np.testing.assert_array_equal(twin_tree.predict(X), kernel_tree.predict(X))
    np.testing.assert_array_equal(twin_leaves, kernel_leaves)
    # Raw values descend the tree to the very leaf their codes reached while it grew: the
    # thresholds and the missing directions say what the wide codes did.
    np.testing.assert_array_equal(twin_tree.apply(X), twin_leaves)
    # And the tree uses cuts beyond code 255 of the wide feature.
    split = twin_tree.nodes["left_child"] >= 0
    feature0 = split & (twin_tree.nodes["feature"] == 0)
    assert (twin_tree.nodes["threshold"][feature0] > mapper.thresholds_[0, MISSING_BIN]).any()
