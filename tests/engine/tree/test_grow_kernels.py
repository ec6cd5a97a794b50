"""The tree-growing kernels against their NumPy twins, and the engine-wide switch between them.

The level kernels (node totals, squared deviations, row partitioning) add each node's rows in
the twins' ``bincount`` order, so the two must agree to the last bit, fractional weights
included (histograms, with their naive reference, are in ``test_histograms.py``). The
random-split search draws its uniforms exactly as its twin does and sums each side in row
order: bit-identical too. The best-split searches are held to the
naive reference in ``test_splitter.py`` on both implementations; here the histogram search
is compared with its twin directly, and ``test_twins_grow_alike.py`` holds whole models grown on
either side equal.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import fields, replace

import numpy as np
import pytest

from engine.tree._binning import MISSING_BIN
from engine.tree._histograms import _smaller_children_compiled
from engine.tree.grow import level_kernels as level
from engine.tree.grow import partition_kernels as _partition_kernels
from engine.tree.grow.thread_kernels import partition_threads
from engine.tree.grow.whole_tree import _smaller_runs
from engine.tree.split.compiled import (
    compiled_find_random_splits,
    compiled_find_splits_in_histograms,
)
from engine.tree.split.context import Splits
from engine.tree.split.random_vectorised import find_random_splits
from engine.tree.split.vectorised import find_splits_in_histograms
from tests.engine.tree.test_splitter import Problem, make_problem


def random_batch(seed: int, n_channels: int = 2) -> dict[str, np.ndarray]:
    """Rows of a few nodes (grouped by node, some rows in no node), codes and channels."""
    rng = np.random.default_rng(seed)
    n_rows, n_features = int(rng.integers(1, 400)), int(rng.integers(1, 7))
    binned = rng.integers(0, 256, (n_rows, n_features)).astype(np.uint8)
    binned[rng.random(binned.shape) < 0.1] = MISSING_BIN
    n_slots = int(rng.integers(1, 6))
    taken = np.sort(rng.choice(n_rows, int(rng.integers(1, n_rows + 1)), replace=False))
    rows = rng.permutation(taken).astype(np.intp)
    slot_of_row = np.sort(rng.integers(0, n_slots, rows.size)).astype(np.intp)
    return {
        "binned": binned,
        "columns": np.ascontiguousarray(binned.T),
        "rows": rows,
        "slot_of_row": slot_of_row,
        "n_slots": np.array(n_slots),
        "channels": rng.normal(size=(n_rows, n_channels)) * rng.uniform(0.1, 3.0, n_rows)[:, None],
        "classes": rng.integers(0, n_channels, n_rows),
        "weights": rng.uniform(0.05, 3.0, n_rows),
    }


def assert_bits_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(actual, expected)
    assert actual.dtype == expected.dtype


@pytest.mark.parametrize("seed", range(30))
def test_node_totals_and_deviations_equal_the_twin_bit_for_bit(seed: int) -> None:
    batch = random_batch(seed, 3)
    n_slots = int(batch["n_slots"])
    args = (batch["rows"], batch["slot_of_row"], batch["channels"])
    totals = [np.empty((n_slots, 3)) for _ in range(2)]
    counts = [np.empty(n_slots, dtype=np.int64) for _ in range(2)]
    level._totals_compiled(*args, totals[0], counts[0])
    level._totals_numpy(*args, totals[1], counts[1])
    assert_bits_equal(totals[0], totals[1])
    assert_bits_equal(counts[0], counts[1])
    mean = totals[0][:, 0] / np.maximum(counts[0], 1)
    squared = [np.empty(n_slots) for _ in range(2)]
    targets, weights = batch["channels"][:, 1], batch["weights"]
    level._deviations_compiled(
        batch["rows"], batch["slot_of_row"], targets, weights, mean, squared[0]
    )
    level._deviations_numpy(batch["rows"], batch["slot_of_row"], targets, weights, mean, squared[1])
    assert_bits_equal(squared[0], squared[1])


@pytest.mark.parametrize("seed", range(30))
def test_partition_equals_the_twin_and_keeps_row_order(seed: int) -> None:
    batch = random_batch(seed)
    rng = np.random.default_rng(seed + 1)
    n_slots = int(batch["n_slots"])
    split = rng.random(n_slots) < 0.7
    rank_of_slot = np.where(split, np.cumsum(split) - 1, -1).astype(np.intp)
    split_of_slot = rng.permutation(n_slots).astype(np.intp)
    split_feature = rng.integers(0, batch["columns"].shape[0], n_slots)
    left_codes = rng.random((n_slots, 256)) < 0.5
    n_splits = int(split.sum())
    channels = batch["channels"]
    results = []
    # The kernel, its twin, and the kernel's steps shared among threads (any count).
    partitions = [_partition_kernels._partition_compiled, _partition_kernels._partition_numpy]
    for partition in partitions:
        new_rows = np.full(batch["rows"].size, -1, dtype=np.intp)
        new_slot = np.full(batch["rows"].size, -1, dtype=np.intp)
        totals = np.full((2 * n_splits, channels.shape[1]), np.nan)
        counts = np.full(2 * n_splits, -1, dtype=np.int64)
        moved = partition(
            batch["columns"],
            batch["rows"],
            batch["slot_of_row"],
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            2 * n_splits,
            channels,
            new_rows,
            new_slot,
            totals,
            counts,
        )
        results.append((int(moved), new_rows[:moved], new_slot[:moved], totals, counts))
    for other in results[1:]:
        assert results[0][0] == other[0]
        for kernel_part, other_part in zip(results[0][1:], other[1:], strict=True):
            assert_bits_equal(kernel_part, other_part)
    # The whole-tree kernel's partition of rows held as runs per slot: the same to the bit.
    new_rows = np.full(batch["rows"].size, -1, dtype=np.intp)
    new_slot = np.full(batch["rows"].size, -1, dtype=np.intp)
    totals = np.full((2 * n_splits, channels.shape[1]), np.nan)
    counts = np.full(2 * n_splits, -1, dtype=np.int64)
    # And its nodes shared among threads in blocks (any count; called from Python the blocks
    # run in turn, each on its own slots and scratch).
    node_start = np.zeros(n_slots + 1, dtype=np.intp)
    node_start[1:] = np.cumsum(np.bincount(batch["slot_of_row"], minlength=n_slots))
    runs_kernels = [_partition_kernels.partition_runs]
    runs_kernels += [functools.partial(partition_threads, n) for n in (1, 2, 3, 5)]
    for partition_runs in runs_kernels:
        new_rows = np.full(batch["rows"].size, -1, dtype=np.intp)
        new_slot = np.full(batch["rows"].size, -1, dtype=np.intp)
        totals = np.full((2 * n_splits, channels.shape[1]), np.nan)
        counts = np.full(2 * n_splits, -1, dtype=np.int64)
        moved = partition_runs(
            batch["columns"],
            batch["rows"],
            node_start,
            split_of_slot,
            rank_of_slot,
            split_feature,
            left_codes,
            channels,
            new_rows,
            new_slot,
            totals,
            counts,
            np.full(batch["rows"].size, -1, dtype=np.intp),
        )
        runs = (int(moved), new_rows[:moved], new_slot[:moved], totals, counts)
        assert runs[0] == results[0][0]
        for kernel_part, runs_part in zip(results[0][1:], runs[1:], strict=True):
            assert_bits_equal(runs_part, kernel_part)
    # The children's totals are node_totals' of the moved rows, to the last bit: the grower
    # takes them instead of summing the rows again.
    expected = level.node_totals(results[0][1], results[0][2], 2 * n_splits, channels)
    assert_bits_equal(results[0][3], expected[0])
    assert_bits_equal(results[0][4], expected[1])
    # From first principles: each moved row sits in the child its code sends it to.
    moved_rows, child = results[0][1], results[0][2]
    slot_of = dict(zip(batch["rows"].tolist(), batch["slot_of_row"].tolist(), strict=True))
    for row, c in zip(moved_rows.tolist(), child.tolist(), strict=True):
        slot = slot_of[row]
        s = split_of_slot[slot]
        goes_right = not left_codes[s, batch["binned"][row, split_feature[s]]]
        assert c == 2 * rank_of_slot[slot] + goes_right
    assert np.all(np.diff(child) >= 0)


def assert_same_splits(actual: Splits, expected: Splits, label: str) -> None:
    for field in fields(Splits):
        np.testing.assert_array_equal(
            getattr(actual, field.name)[expected.found],
            getattr(expected, field.name)[expected.found],
            err_msg=f"{label}: {field.name}",
        )
    np.testing.assert_array_equal(actual.found, expected.found, err_msg=label)


@pytest.mark.parametrize("seed", range(60))
def test_random_splits_equal_the_twin_bit_for_bit(seed: int) -> None:
    criterion, n_classes = [("gini", 2), ("entropy", 3), ("squared_error", 0)][seed % 3]
    problem = make_problem(seed, criterion, n_classes, categorical=False)
    ctx = replace(problem.ctx, random_splits=True)
    args = (problem.rows, problem.slot_of_row, problem.features)
    twin = find_random_splits(
        ctx, *args, problem.parent_channels, problem.parent_counts, np.random.default_rng(seed)
    )
    compiled = compiled_find_random_splits(
        ctx, *args, problem.parent_channels, problem.parent_counts, np.random.default_rng(seed)
    )
    assert_same_splits(compiled, twin, f"{seed=}")


def histograms_of(problem: Problem) -> np.ndarray:
    ctx = problem.ctx
    n_slots = problem.features.shape[0]
    out = np.zeros((n_slots, problem.features.shape[1], 256, 1 + ctx.channels.shape[1]))
    for slot in range(n_slots):
        rows = problem.node_rows(slot)
        for j, feature in enumerate(problem.features[slot]):
            # A padding candidate (−1) still sees the node's rows, as in the twin's group table.
            codes = ctx.binned[rows, max(feature, 0)]
            np.add.at(out[slot, j, :, 0], codes, 1.0)
            for c in range(ctx.channels.shape[1]):
                np.add.at(out[slot, j, :, 1 + c], codes, ctx.channels[rows, c])
    return out


@pytest.mark.parametrize("seed", range(60))
def test_histogram_search_equals_the_twin(seed: int) -> None:
    criterion, n_classes = [("gini", 2), ("entropy", 4), ("squared_error", 0)][seed % 3]
    # Fractional weights make every sum inexact: the twin's running sums add each segment's
    # bins from its first, as the kernel's scan does, so gains and ties agree to the bit.
    problem = make_problem(seed, criterion, n_classes, weight_kind="floats")
    histograms = histograms_of(problem)
    twin = find_splits_in_histograms(
        problem.ctx,
        histograms[..., 0].astype(np.int64),
        histograms[..., 1:],
        problem.features,
        problem.parent_channels,
        problem.parent_counts,
    )
    compiled = compiled_find_splits_in_histograms(
        problem.ctx, histograms, problem.features, problem.parent_channels, problem.parent_counts
    )
    assert_same_splits(compiled, twin, f"{seed=}")


# -- the engine-wide switch --------------------------------------------------------------------


def run_engine(kernels: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COPPICE_ENGINE_KERNELS": kernels}
    return subprocess.run(
        [sys.executable, "-c", "import engine"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_an_unknown_kernel_choice_is_refused_by_name() -> None:
    result = run_engine("cuda")
    assert result.returncode != 0
    assert "COPPICE_ENGINE_KERNELS='cuda'" in result.stderr


@pytest.mark.parametrize("seed", range(10))
def test_the_smaller_childrens_runs_are_the_smaller_childrens_rows(seed: int) -> None:
    """The whole-tree kernel copies each pair's smaller child's rows run by run; the level
    loop's kernel picks them row by row: the same rows, pairs and sides (ties go left)."""
    rng = np.random.default_rng(seed)
    n_pairs = int(rng.integers(1, 9))
    counts = rng.integers(0, 40, 2 * n_pairs)
    counts[: 2 * (seed % 3)] = 7  # some ties
    rows = rng.permutation(int(counts.sum()) + 5).astype(np.intp)[: counts.sum()]
    slots = np.repeat(np.arange(2 * n_pairs), counts).astype(np.intp)
    results = []
    for smaller in ("runs", "rows"):
        side = np.full(n_pairs, -1, dtype=np.intp)
        small_rows = np.full(rows.size, -1, dtype=np.intp)
        small_pairs = np.full(rows.size, -1, dtype=np.intp)
        if smaller == "runs":
            n = _smaller_runs(rows, counts.astype(np.int64), side, small_rows, small_pairs)
        else:
            n = _smaller_children_compiled(rows, slots, n_pairs, side, small_rows, small_pairs)
        results.append((n, side, small_rows[:n], small_pairs[:n]))
    assert results[0][0] == results[1][0]
    for runs_part, rows_part in zip(results[0][1:], results[1][1:], strict=True):
        np.testing.assert_array_equal(runs_part, rows_part)
