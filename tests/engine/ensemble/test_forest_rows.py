"""A forest's trees grown from rows held elsewhere equal the local fit's.

The holders here are plain objects in this process (what a partition actor does for a forest,
:class:`engine.parallel._forest_rows.ForestHolder`), so the level protocol and the block-wise
bootstrap are checked on 1-3 holders without a cluster; the Dask tests
(tests/engine/parallel_dask/test_dask_forest.py) run the same on worker processes.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from engine import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.ensemble import _sampling
from engine.ensemble._forest_parts import grow_batch
from engine.ensemble._sampling import MemberSampling, block_totals, counts_in_range
from engine.parallel._forest_rows import ForestHolder
from engine.tree._classes import resolve_limits
from engine.tree._histograms import build_histograms
from engine.tree.grow.build import TreeSpec
from engine.tree.split.context import SplitContext
from engine.tree.split.random_vectorised import random_splits_in_histograms, random_splits_with


def _table(n: int = 900, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = 2 * np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1]))
    return X, y + 0.1 * rng.normal(size=n)


def _holders(model: Any, X: np.ndarray, y: np.ndarray, n_holders: int) -> list[ForestHolder]:
    mapper = model.bin_mapper_
    codes = mapper.transform(X)
    target = np.searchsorted(model.classes_, y) if hasattr(model, "classes_") else y
    holders = []
    bounds = np.linspace(0, y.size, n_holders + 1).astype(int)
    for low, high in itertools.pairwise(bounds):
        holder = ForestHolder()
        holder.codes = np.ascontiguousarray(codes[low:high].T)
        holder.y = target[low:high].astype(np.float64)
        holder.w = np.ones(high - low)
        holder.row_missing = (codes[low:high] == 255).any(axis=1)
        n_outputs = len(model.classes_) if hasattr(model, "classes_") else 1
        holder.start_forest(model._sampling, int(low), n_outputs, hasattr(model, "classes_"))
        holders.append(holder)
    return holders


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (RandomForestClassifier, {}),
        (RandomForestRegressor, {"max_features": 0.4}),
        (ExtraTreesClassifier, {"max_features": 2}),
        (ExtraTreesRegressor, {"bootstrap": True, "max_samples": 0.5}),
    ],
)
def test_trees_grown_from_held_rows_are_the_local_ones(
    cls: Any, params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sampling, "BOOTSTRAP_BLOCK_ROWS", 200)  # several blocks per holder
    X, y = _table()
    classification = cls in (RandomForestClassifier, ExtraTreesClassifier)
    if classification:
        y = np.digitize(y, np.quantile(y, [0.33, 0.66])).astype(np.float64)
    else:
        # Eighths: every sum of in-bag counts × targets is exact, in any order. With targets
        # of more bits a sum moves by ulps with the holders, and in a small node two
        # features that part its rows alike can then swap places (a tie broken by rounding).
        y = np.round(y * 8) / 8
    model = cls(n_estimators=6, max_depth=6, random_state=3, **params).fit(X, y)
    assert model._sampling.block_rows == 200
    spec = TreeSpec(
        criterion=model.criterion,
        random_splits=model._random_splits,
        limits=resolve_limits(model, y.size, float(y.size), X.shape[1]),
        n_classes=len(model.classes_) if classification else 0,
    )
    for n_holders in (1, 2, 3):
        holders = _holders(model, X, y, n_holders)
        trees, _ = grow_batch(
            model.bin_mapper_,
            spec,
            model._sampling,
            model.estimators_seeds_,
            lambda sent, holders=holders: [holder.forest_steps(sent) for holder in holders],
        )
        for local, remote in zip(model.members_, trees, strict=True):
            np.testing.assert_array_equal(local.nodes["feature"], remote.nodes["feature"])
            np.testing.assert_array_equal(local.nodes["threshold"], remote.nodes["threshold"])
            np.testing.assert_allclose(local.values, remote.values, rtol=0, atol=1e-12)


def test_block_counts_are_the_same_whoever_draws_them() -> None:
    sampling = MemberSampling(1000, 1000, True, 3, 3, False, block_rows=128)
    rng = np.random.default_rng(5)
    totals = block_totals(rng, sampling)
    assert totals.sum() == 1000 and totals.size == 8
    whole = counts_in_range(7, totals, sampling, 0, 1000)
    assert whole.sum() == 1000
    pieces = [
        counts_in_range(7, totals, sampling, a, b) for a, b in ((0, 100), (100, 555), (555, 1000))
    ]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    subsample = MemberSampling(1000, 300, False, 3, 3, False, block_rows=128)
    counts = counts_in_range(7, block_totals(rng, subsample), subsample, 0, 1000)
    assert counts.sum() == 300 and counts.max() == 1


def test_random_cuts_from_histograms_are_the_cuts_from_rows() -> None:
    rng = np.random.default_rng(2)
    n, n_features, n_slots = 400, 4, 3
    binned = rng.integers(0, 12, size=(n, n_features)).astype(np.uint8)
    binned[rng.random(binned.shape) < 0.1] = 255
    binned[:, 3] = np.where(np.arange(n) % 3 == 0, 255, 5)  # one all-missing node, constants
    slot_of_row = np.sort(rng.integers(0, n_slots, n))
    rows = np.arange(n, dtype=np.intp)
    channels = np.stack([np.ones(n), rng.normal(size=n)], axis=1)
    bin_values = np.tile(np.arange(255, dtype=np.float64), (n_features, 1))
    ctx = SplitContext(
        binned=binned,
        channels=channels,
        criterion="squared_error",
        is_categorical=np.zeros(n_features, dtype=bool),
        bin_values=bin_values,
        min_samples_leaf=1,
        min_weight_leaf=0.0,
        random_splits=True,
        n_bins=np.full(n_features, 12, dtype=np.int32),
        has_missing=True,
    )
    features = np.array([[0, 2, -1], [3, 1, 0], [2, 3, 1]])
    totals = np.stack([np.bincount(slot_of_row, channels[:, c]) for c in range(2)], axis=1)
    counts = np.bincount(slot_of_row)
    uniforms = rng.random(features.size)
    expected = random_splits_with(ctx, rows, slot_of_row, features, totals, counts, uniforms)
    full = build_histograms(
        np.ascontiguousarray(binned.T),
        rows,
        slot_of_row,
        n_slots,
        np.arange(n_features),
        channels,
        2,
    )
    histograms = full[np.arange(n_slots)[:, None], np.maximum(features, 0)]
    got = random_splits_in_histograms(ctx, histograms, features, totals, counts, uniforms)
    for name in ("found", "feature", "bin", "missing_left", "left_codes"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    np.testing.assert_allclose(got.gain, expected.gain, rtol=1e-12)


def test_a_batch_grows_its_trees_in_lockstep_one_exchange_a_step() -> None:
    """Six trees together take as many exchanges as the longest of them alone (each tree's
    steps ride in the same calls), and the same trees."""
    X, y = _table(seed=1)
    y = np.digitize(y, np.quantile(y, [0.5])).astype(np.float64)
    model = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y)
    spec = TreeSpec(
        criterion=model.criterion,
        random_splits=False,
        limits=resolve_limits(model, y.size, float(y.size), X.shape[1]),
        n_classes=2,
    )
    holders = _holders(model, X, y, 2)

    def grow(seeds: np.ndarray) -> tuple[list[Any], int]:
        calls: list[int] = []

        def send(sent: Any) -> list[Any]:
            calls.append(1)
            return [holder.forest_steps(sent) for holder in holders]

        trees, _ = grow_batch(model.bin_mapper_, spec, model._sampling, seeds, send)
        return trees, len(calls)

    together, n_together = grow(model.estimators_seeds_)
    alone = [grow(model.estimators_seeds_[k : k + 1]) for k in range(6)]
    assert n_together == max(n for _, n in alone) < sum(n for _, n in alone) / 3
    for tree, (single, _) in zip(together, alone, strict=True):
        np.testing.assert_array_equal(tree.nodes["feature"], single[0].nodes["feature"])


def test_fewer_trees_grow_together_where_the_workers_memory_is_tight() -> None:
    from engine.ensemble._forest_parts import TREES_PER_BATCH, batch_size

    assert batch_size(1_000_000, 24, 2, [None, 0]) == TREES_PER_BATCH
    assert batch_size(1_000_000, 24, 2, [8 << 30, 8 << 30]) == TREES_PER_BATCH
    # 60% of 1 GiB less 57 MB of rows leaves room for 4 trees of 48 MB at their measured peak
    # (2.5x: 120 MB each), the tightest worker deciding; of 300 MiB, 1 (at least one).
    assert batch_size(1_000_000, 24, 2, [1 << 30, 2 << 30]) == 4
    assert batch_size(1_000_000, 24, 2, [2 << 30]) == TREES_PER_BATCH
    assert batch_size(1_000_000, 24, 2, [300 << 20]) == 1
    assert batch_size(4_000_000, 24, 2, [300 << 20]) == 1
