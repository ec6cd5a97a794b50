"""Second-order split search under monotone constraints, and on exact binning's ``uint16`` codes.

The vectorised search is held to the plain-loop reference (``find_splits_naive``) on random
batches of nodes with random ``(G, H)`` channels, random node bounds and random constraints.
Exact binning only widens the codes: the same binned data as ``uint16`` (missing at 65535)
must give the same splits and the same grown tree as ``uint8``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from engine.tree._binning import MISSING_BIN, BinMapper
from engine.tree._criteria import Newton
from engine.tree._monotone import MonotoneBounds, children_scores, score_given_weight
from engine.tree.grow.build import BinnedData, TreeSpec, build_newton_tree
from engine.tree.grow.limits import GrowthLimits
from engine.tree.split.compiled import compiled_find_splits
from engine.tree.split.vectorised import find_splits, find_splits_naive
from tests.engine.tree.test_splitter import Problem, make_problem

# Each search test runs on the NumPy search and on its compiled twin.
IMPLEMENTATIONS = pytest.mark.parametrize(
    "search", [find_splits, compiled_find_splits], ids=["numpy", "compiled"]
)


def newton_problem(seed: int, *, constrained: bool = True) -> tuple[Problem, np.ndarray]:
    """A random numeric batch with gradient/hessian channels, constraints and node bounds."""
    base = make_problem(seed, "squared_error", categorical=False)
    rng = np.random.default_rng(seed + 10_000)
    n_rows = base.ctx.binned.shape[0]
    weights = base.ctx.channels[:, 0]
    gradient = rng.normal(size=n_rows) + 0.5 * base.ctx.binned[:, 0] * rng.choice([-1, 1])
    hessian = rng.uniform(0.2, 2.0, n_rows)
    channels = np.column_stack([weights * gradient, weights * hessian])
    criterion = Newton(l2=float(rng.choice([0.0, 1.0, 3.0])), l1=float(rng.choice([0.0, 0.0, 0.5])))
    n_features = base.ctx.binned.shape[1]
    monotone = rng.integers(-1, 2, n_features).astype(np.int8) if constrained else None
    ctx = replace(
        base.ctx,
        channels=channels,
        criterion=criterion,
        min_weight_leaf=float(rng.choice([0.0, 0.3])),
        monotone=monotone,
    )
    parent = np.zeros((base.parent_channels.shape[0], 2))
    np.add.at(parent, base.slot_of_row, channels[base.rows])
    problem = Problem(
        ctx, base.rows, base.slot_of_row, base.features, parent, base.parent_counts, None
    )
    # Bounds: unbounded, one-sided or two-sided around the nodes' own weights.
    weight = criterion.leaf_weight(parent)
    spread = np.abs(rng.normal(size=(parent.shape[0], 2)))
    bounds = np.column_stack([weight - spread[:, 0], weight + spread[:, 1]])
    bounds[rng.random(parent.shape[0]) < 0.3, 0] = -np.inf
    bounds[rng.random(parent.shape[0]) < 0.3, 1] = np.inf
    return problem, bounds


@IMPLEMENTATIONS
@pytest.mark.parametrize("seed", range(80))
def test_constrained_search_equals_the_naive_reference(seed: int, search: Any) -> None:
    problem, bounds = newton_problem(seed)
    splits = search(
        problem.ctx,
        problem.rows,
        problem.slot_of_row,
        problem.features,
        problem.parent_channels,
        problem.parent_counts,
        bounds=bounds,
    )
    naive_gain, _ = find_splits_naive(
        problem.ctx, problem.rows, problem.slot_of_row, problem.features, bounds
    )
    np.testing.assert_array_equal(splits.found, np.isfinite(naive_gain))
    found = splits.found
    np.testing.assert_allclose(
        splits.gain[found], np.maximum(naive_gain[found], 0.0), rtol=1e-9, atol=1e-9
    )
    # The reported split respects its feature's constraint at the clipped weights.
    assert problem.ctx.monotone is not None
    for slot in np.flatnonzero(found):
        rows = problem.node_rows(slot)
        left = splits.left_codes[slot, problem.ctx.binned[rows, splits.feature[slot]]]
        sums = problem.ctx.channels[rows]
        _, respects = children_scores(
            problem.ctx.criterion,  # type: ignore[arg-type]
            sums[left].sum(axis=0),
            sums[~left].sum(axis=0),
            bounds[slot],
            problem.ctx.monotone[splits.feature[slot]],
        )
        assert respects


def test_unbounded_scores_are_the_plain_newton_scores() -> None:
    criterion = Newton(l2=1.5, l1=0.4)
    channels = np.random.default_rng(0).normal(size=(50, 2)) * [3.0, 1.0] + [0.0, 2.0]
    weight = criterion.leaf_weight(channels)
    expected = 0.5 * criterion.thresholded(channels[:, 0]) ** 2 / (channels[:, 1] + 1.5)
    np.testing.assert_allclose(score_given_weight(criterion, channels, weight), expected)


def test_children_bounds_cut_at_the_midpoint() -> None:
    keeper = MonotoneBounds(Newton(l2=0.0), np.array([1, -1, 0], dtype=np.int8))
    parents = np.array([[-np.inf, np.inf], [-1.0, 5.0], [0.0, 1.0]])
    # Children weights −G/H: (1, 3), (4, 2), (−2 → clipped 0, 0.5).
    totals = np.array([[-1, 1], [-3, 1], [-4, 1], [-2, 1], [2, 1], [-0.5, 1]], dtype=float)
    bounds = keeper.children(parents, np.array([0, 1, 2]), totals)
    expected = [[-np.inf, 2.0], [2.0, np.inf], [3.0, 5.0], [-1.0, 3.0], [0.0, 1.0], [0.0, 1.0]]
    np.testing.assert_array_equal(bounds, expected)


# --- exact binning's wide codes ------------------------------------------------------------


def widen(binned: np.ndarray) -> np.ndarray:
    wide = binned.astype(np.uint16)
    wide[binned == MISSING_BIN] = np.iinfo(np.uint16).max
    return wide


@IMPLEMENTATIONS
@pytest.mark.parametrize("seed", range(40))
def test_wide_codes_give_the_same_splits(seed: int, search: Any) -> None:
    problem, bounds = newton_problem(seed, constrained=seed % 2 == 0)
    wide = replace(problem.ctx, binned=widen(problem.ctx.binned))
    args = (problem.rows, problem.slot_of_row, problem.features)
    narrow_splits = search(
        problem.ctx, *args, problem.parent_channels, problem.parent_counts, bounds=bounds
    )
    wide_splits = search(wide, *args, problem.parent_channels, problem.parent_counts, bounds=bounds)
    for name in ("found", "gain", "feature", "missing_left"):
        np.testing.assert_array_equal(getattr(wide_splits, name), getattr(narrow_splits, name))
    found = narrow_splits.found
    np.testing.assert_array_equal(wide_splits.bin[found], narrow_splits.bin[found])
    np.testing.assert_array_equal(
        wide_splits.left_codes[:, :255], narrow_splits.left_codes[:, :255]
    )
    np.testing.assert_array_equal(wide_splits.left_codes[:, -1], narrow_splits.left_codes[:, 255])
    np.testing.assert_array_equal(
        find_splits_naive(wide, *args, bounds)[0], find_splits_naive(problem.ctx, *args, bounds)[0]
    )


def test_a_tree_grown_on_wide_codes_equals_the_narrow_one() -> None:
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(600, 4)), 1)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 3] = rng.integers(0, 6, 600)
    mapper = BinMapper().fit(X, np.array([False, False, False, True]))
    binned = mapper.transform(X)
    assert binned.dtype == np.uint8
    gradient = np.nan_to_num(X[:, 0]) - (X[:, 3] == 2) + rng.normal(scale=0.3, size=600)
    hessian = rng.uniform(0.5, 1.5, 600)
    spec = TreeSpec(
        criterion=Newton(l2=1.0),
        random_splits=False,
        limits=GrowthLimits(max_depth=5, min_weight_leaf=1.0),
        n_classes=0,
        monotone=np.array([1, 0, -1, 0], dtype=np.int8),
    )
    trees = []
    for codes in (binned, widen(binned)):
        data = BinnedData.from_mapper(codes, gradient, mapper)
        tree = build_newton_tree(
            data, gradient, hessian, np.ones(600), spec, np.random.default_rng(0)
        )
        trees.append(tree)
    narrow, wide = trees
    for name in ("left_child", "feature", "threshold", "missing_left", "n_samples"):
        np.testing.assert_array_equal(wide.nodes[name], narrow.nodes[name])
    np.testing.assert_array_equal(wide.category_bitsets, narrow.category_bitsets)
    # The narrow tree's histograms derive siblings by subtraction, the wide one sums rows.
    np.testing.assert_allclose(wide.values, narrow.values, rtol=1e-12, atol=1e-12)
