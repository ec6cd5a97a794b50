"""Extra trees' level-wise grower, whose rows carry their channels: kernels against twins.

:mod:`engine.tree.grow.random_levels` keeps a level's channels in the order of its rows and moves
them with the rows (:func:`engine.tree.grow.partition_kernels.partition_ranges`), and searches the
random cuts of Geurts et al. (2006) on the slots still open
(:func:`engine.tree.split.random_level_splits`). Each is held bit for bit to its NumPy
twin, to the kernels it stands in for (:func:`partition_rows` and :func:`node_totals`;
:func:`find_random_splits` on the same rows and draws), and the trees it grows with its small
nodes finished depth first (:mod:`engine.tree.grow.subtree_kernels`) to those it grows alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import engine
from engine.tree import split
from engine.tree.grow import level_kernels as level
from engine.tree.grow import partition_kernels as _partition_kernels
from engine.tree.grow import random_levels
from engine.tree.grow.build import BinnedData, TreeSpec, build_tree
from engine.tree.grow.limits import GrowthLimits
from engine.tree.split.compiled import compiled_random_level_splits
from engine.tree.split.context import Splits
from engine.tree.split.random_cut_kernels import ONE_HOT_CLASSES
from engine.tree.split.random_vectorised import find_random_splits, random_level_splits_numpy
from tests.engine.tree.test_grow_kernels import (
    assert_bits_equal,
    assert_same_splits,
    random_batch,
)
from tests.engine.tree.test_splitter import make_problem


def level_arrays(
    channels: np.ndarray, classes: np.ndarray | None, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    level_classes = np.zeros(0, dtype=np.int64) if classes is None else classes[rows]
    return np.ascontiguousarray(channels[rows]), level_classes


@pytest.mark.parametrize("seed", range(30))
def test_partition_ranges_equals_its_twin_partition_rows_and_node_totals(seed: int) -> None:
    n_channels = [1, 2, 3, 12][seed % 4]
    batch = random_batch(seed, n_channels)
    rng = np.random.default_rng(seed + 1)
    n_slots = int(batch["n_slots"])
    split = rng.random(n_slots) < 0.7
    n_splits = int(split.sum())
    rank_of_slot = np.where(split, np.cumsum(split) - 1, -1).astype(np.intp)
    split_of_slot = rng.permutation(n_slots).astype(np.intp)
    split_feature = rng.integers(0, batch["columns"].shape[0], n_slots)
    left_codes = rng.random((n_slots, 256)) < 0.5
    rows, slot_of_row = batch["rows"], batch["slot_of_row"]
    node_start = np.zeros(n_slots + 1, dtype=np.intp)
    np.cumsum(np.bincount(slot_of_row, minlength=n_slots), out=node_start[1:])
    # Each row's side as the random-cut search marks it (rows of slots not split: anything).
    split_of_row = split_of_slot[slot_of_row]
    codes = batch["binned"][rows, split_feature[split_of_row]]
    row_right = ~left_codes[split_of_row, codes] | (rank_of_slot[slot_of_row] < 0)
    with_classes = seed % 2 == 0
    level_channels, level_classes = level_arrays(
        batch["channels"], batch["classes"] if with_classes else None, rows
    )
    results: list[tuple[Any, ...]] = []
    for partition in (_partition_kernels._ranges_compiled, _partition_kernels._ranges_numpy):
        n = rows.size
        outputs: tuple[Any, ...] = (
            np.full(n, -1, dtype=np.intp),
            np.full((n, n_channels), np.nan),
            np.full(n if with_classes else 0, -1, dtype=np.int64),
            np.full((2 * n_splits, n_channels), np.nan),
            np.full(2 * n_splits, -1, dtype=np.int64),
        )
        moved = partition(
            rows, node_start, rank_of_slot, row_right, level_channels, level_classes, *outputs
        )
        results.append((int(moved), *(out[:moved] for out in outputs[:3]), *outputs[3:]))
    for actual, expected in zip(results[0], results[1], strict=True):
        if isinstance(actual, int):
            assert actual == expected
        else:
            assert_bits_equal(actual, expected)
    _, new_rows, new_channels, new_classes, totals, counts = results[0]
    # The rows go where partition_rows sends them by their codes (held from first
    # principles in test_grow_kernels.py).
    plain_rows, plain_slot, *_ = _partition_kernels.partition_rows(
        batch["columns"],
        rows,
        slot_of_row,
        split_of_slot,
        rank_of_slot,
        split_feature,
        left_codes,
        n_splits,
    )
    assert_bits_equal(new_rows, plain_rows)
    # The channels and classes moved with their rows, and the totals are node_totals'.
    assert_bits_equal(new_channels, batch["channels"][new_rows])
    if with_classes:
        assert_bits_equal(new_classes, batch["classes"][new_rows])
    expected_totals, expected_counts = level.node_totals(
        new_rows, plain_slot, 2 * n_splits, batch["channels"]
    )
    assert_bits_equal(totals, expected_totals)
    assert_bits_equal(counts, expected_counts)


def level_problem(seed: int) -> dict[str, Any]:
    """A level: rows grouped by slot, their channels beside them, some slots searched."""
    criterion, n_classes = [
        ("gini", 2),
        ("entropy", 3),
        ("squared_error", 0),
        ("gini", ONE_HOT_CLASSES + 4),
    ][seed % 4]
    problem = make_problem(seed, criterion, n_classes, categorical=False)
    ctx = replace(problem.ctx, random_splits=True)
    rng = np.random.default_rng(seed + 7)
    n_slots = problem.features.shape[0]
    node_start = np.zeros(n_slots + 1, dtype=np.intp)
    np.cumsum(np.bincount(problem.slot_of_row, minlength=n_slots), out=node_start[1:])
    nodes = np.sort(rng.choice(n_slots, int(rng.integers(1, n_slots + 1)), replace=False))
    level_channels, level_classes = level_arrays(ctx.channels, ctx.classes, problem.rows)
    return {
        "ctx": ctx,
        "problem": problem,
        "node_start": node_start,
        "nodes": nodes.astype(np.intp),
        "level_channels": level_channels,
        "level_classes": level_classes,
    }


def search(level_problem: dict[str, Any], seed: int) -> tuple[Splits, np.ndarray]:
    problem, nodes = level_problem["problem"], level_problem["nodes"]
    ctx = level_problem["ctx"]
    row_right = np.full(problem.rows.size, 2, dtype=np.uint8).view(np.bool_)  # neither side
    splits = split.random_level_splits(
        ctx,
        np.ascontiguousarray(ctx.binned.T),
        problem.rows,
        level_problem["node_start"],
        nodes,
        problem.features[nodes],
        level_problem["level_channels"],
        level_problem["level_classes"],
        problem.parent_channels[nodes],
        problem.parent_counts[nodes],
        np.random.default_rng(seed).random(problem.features[nodes].size),
        row_right,
    )
    return splits, row_right.view(np.uint8)


@pytest.mark.parametrize("seed", range(60))
def test_random_level_splits_equal_the_twin_and_find_random_splits(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = level_problem(seed)
    monkeypatch.setattr(split, "random_level_search", compiled_random_level_splits)
    compiled, compiled_right = search(batch, seed)
    monkeypatch.setattr(split, "random_level_search", random_level_splits_numpy)
    twin, twin_right = search(batch, seed)
    assert_same_splits(compiled, twin, f"{seed=}")
    # The same as searching the selected slots' rows on their own.
    problem, nodes = batch["problem"], batch["nodes"]
    keep = np.isin(problem.slot_of_row, nodes)
    renumber = np.full(problem.features.shape[0], -1)
    renumber[nodes] = np.arange(nodes.size)
    alone = find_random_splits(
        batch["ctx"],
        problem.rows[keep],
        renumber[problem.slot_of_row[keep]].astype(np.intp),
        problem.features[nodes],
        problem.parent_channels[nodes],
        problem.parent_counts[nodes],
        np.random.default_rng(seed),
    )
    assert_same_splits(compiled, alone, f"{seed=}, alone")
    # Each row of a found split is marked with the side its code goes to; others untouched.
    k = renumber[problem.slot_of_row]
    split_rows = (k >= 0) & compiled.found[np.maximum(k, 0)]
    codes = problem.ctx.binned[problem.rows, compiled.feature[np.maximum(k, 0)]]
    expected = np.where(split_rows, ~compiled.left_codes[np.maximum(k, 0), codes], 2)
    np.testing.assert_array_equal(compiled_right, expected.astype(np.uint8))
    np.testing.assert_array_equal(twin_right, compiled_right)


def fitted_trees(model: Any, X: np.ndarray, y: np.ndarray, **fit: Any) -> list[np.ndarray]:
    model.fit(X, y, **fit)
    return [member.nodes for member in model.members_]


MODELS = [
    ("binary", lambda: engine.ExtraTreesClassifier(4, max_features="sqrt", random_state=0)),
    (
        "three classes, leaves of 3",
        lambda: engine.ExtraTreesClassifier(3, min_samples_leaf=3, random_state=1),
    ),
    ("fourteen classes", lambda: engine.ExtraTreesClassifier(3, random_state=2)),
    (
        "regression, a third of the features",
        lambda: engine.ExtraTreesRegressor(3, max_features=0.3, random_state=3),
    ),
    (
        "binary, no missing values",
        lambda: engine.ExtraTreesClassifier(4, max_features="sqrt", random_state=6),
    ),
    (
        "regression, no missing values",
        lambda: engine.ExtraTreesRegressor(3, max_features=0.5, random_state=7),
    ),
    (
        "bootstrap, depth 6",
        lambda: engine.ExtraTreesClassifier(3, bootstrap=True, max_depth=6, random_state=4),
    ),
]


@pytest.mark.parametrize(("label", "make"), MODELS, ids=[label for label, _ in MODELS])
def test_the_depth_first_finish_grows_the_level_loops_trees(
    label: str, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small nodes grown depth first in one compiled call (the whole tree here, some of it,
    none) give the level loop's trees, node for node: each node draws from its own key."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 9))
    X[:, 4] = np.round(X[:, 4])  # few distinct values: constant in many nodes
    if "no missing" not in label:  # without missing values, small nodes compare values
        X[rng.random(X.shape) < 0.08] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    if "regression" in label:
        y: np.ndarray = signal + 0.3 * rng.normal(size=600)
    else:
        n_classes = 14 if "fourteen" in label else 3 if "three" in label else 2
        y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_classes + 1)[1:-1]))
    weights = rng.uniform(0.2, 2.0, 600)
    grown = {}
    for subtree_rows in (4096, 40, 0):
        monkeypatch.setattr(random_levels, "SUBTREE_ROWS", subtree_rows)
        grown[subtree_rows] = fitted_trees(make(), X, y, sample_weight=weights)
    level_loop = grown.pop(0)
    for subtree_rows, trees in grown.items():
        assert len(trees) == len(level_loop)
        for mine, theirs in zip(trees, level_loop, strict=True):
            assert theirs.dtype.names is not None
            for name in theirs.dtype.names:
                np.testing.assert_array_equal(
                    mine[name], theirs[name], err_msg=f"{label}, {subtree_rows=}: {name}"
                )


def test_the_depth_first_finish_tells_each_row_its_leaf(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(900, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) > 0).astype(np.int64)
    mapper = engine.ExtraTreesClassifier(1, random_state=0).fit(X, y).bin_mapper_
    data = BinnedData.from_mapper(mapper.transform(X), y, mapper)
    spec = TreeSpec("gini", True, GrowthLimits(max_features=3), n_classes=2)
    weights = np.random.default_rng(2).integers(0, 3, X.shape[0]).astype(np.float64)
    leaves = {}
    for subtree_rows in (0, 30, 4096):
        monkeypatch.setattr(random_levels, "SUBTREE_ROWS", subtree_rows)
        leaves[subtree_rows] = np.empty(X.shape[0], dtype=np.intp)
        tree = build_tree(
            data, weights, spec, np.random.default_rng(1), leaves=leaves[subtree_rows]
        )
        grown = leaves[subtree_rows][weights > 0]
        assert (tree.nodes["left_child"][grown] < 0).all()
        assert tree.node_count > 50
    np.testing.assert_array_equal(leaves[30], leaves[0])
    np.testing.assert_array_equal(leaves[4096], leaves[0])


@pytest.mark.parametrize("seed", range(20))
def test_shuffle_rows_equals_its_twin_and_continues_one_draw(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 30)), int(rng.integers(1, 45))
    per_round = int(rng.integers(1, m + 1))
    orders = [np.tile(np.arange(m, dtype=np.intp), (n, 1)) for _ in range(2)]
    pending = np.arange(n, dtype=np.intp)
    for start in range(0, m, per_round):
        uniforms = rng.random((pending.size, min(per_round, m - start)))
        if seed % 4 == 0:
            uniforms[:, 0] = np.nextafter(1.0, 0.0)  # the largest draw picks the last entry
        level._shuffle_compiled(orders[0], pending, uniforms, start)
        level._shuffle_numpy(orders[1], pending, uniforms, start)
        assert_bits_equal(orders[0], orders[1])
        pending = np.sort(
            rng.choice(pending, int(rng.integers(0, pending.size + 1)), replace=False)
        )
    # Every row is still a permutation of the features.
    np.testing.assert_array_equal(np.sort(orders[0], axis=1), np.tile(np.arange(m), (n, 1)))


def test_shuffle_rows_draws_every_feature_alike() -> None:
    """Each feature comes first, and each pair comes first and second, as often as any other
    (Fisher–Yates draws a uniform permutation), within five standard errors."""
    n, m = 60_000, 5
    rng = np.random.default_rng(0)
    order = np.tile(np.arange(m, dtype=np.intp), (n, 1))
    level.shuffle_rows(order, np.arange(n), rng.random((n, 2)), 0)
    first = np.bincount(order[:, 0], minlength=m) / n
    assert np.all(np.abs(first - 1 / m) < 5 * np.sqrt((1 / m) * (1 - 1 / m) / n))
    pairs = np.bincount(order[:, 0] * m + order[:, 1], minlength=m * m).reshape(m, m) / n
    expected = 1 / (m * (m - 1))
    off_diagonal = ~np.eye(m, dtype=bool)
    assert np.all(np.diag(pairs) == 0)
    assert np.all(np.abs(pairs[off_diagonal] - expected) < 5 * np.sqrt(expected / n))
