"""Dense node histograms and sibling subtraction: kernel, NumPy twin and naive reference.

The naive reference is a loop over the rows that adds each one to its bin, in the order the
rows are given; the kernel and its twin add each cell's rows in that same order, so all three
agree to the last bit, with fractional channels too (no tolerance is needed, and none is
given). Subtraction is one float operation per cell in each.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from engine._kernels import compiled_kernels
from engine.tree import _histograms as histograms
from engine.tree._common import HISTOGRAM_CODES
from engine.tree.grow.thread_kernels import histograms_threads
from tests.engine.tree.test_grow_kernels import assert_bits_equal, random_batch

IMPLEMENTATIONS = {
    "compiled": histograms._histograms_compiled,
    "numpy": histograms._histograms_numpy,
}


def batch_inputs(
    seed: int, n_channels: int, by_class: bool
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray | None, np.ndarray]:
    batch = random_batch(seed, n_channels)
    features = np.random.default_rng(seed).permutation(batch["columns"].shape[0])
    if by_class:
        return batch, batch["weights"].reshape(-1, 1), batch["classes"], features.astype(np.int64)
    return batch, batch["channels"], None, features.astype(np.int64)


def naive_of(
    batch: dict[str, np.ndarray],
    channels: np.ndarray,
    classes: np.ndarray | None,
    features: np.ndarray,
    n_channels: int,
) -> np.ndarray:
    return histograms.naive_histograms(
        batch["columns"],
        batch["rows"],
        batch["slot_of_row"],
        int(batch["n_slots"]),
        features,
        channels,
        n_channels,
        classes,
    )


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("by_class", [False, True], ids=["channels", "classes"])
@pytest.mark.parametrize("n_channels", [1, 2, 3])
@pytest.mark.parametrize("seed", range(20))
def test_histograms_equal_the_naive_reference_bit_for_bit(
    seed: int, n_channels: int, by_class: bool, implementation: str
) -> None:
    batch, channels, classes, features = batch_inputs(seed, n_channels, by_class)
    n_slots = int(batch["n_slots"])
    out = np.full((n_slots, features.size, HISTOGRAM_CODES, 1 + n_channels), np.nan)
    IMPLEMENTATIONS[implementation](
        batch["columns"],
        batch["rows"],
        batch["slot_of_row"],
        features,
        channels,
        histograms._NO_CLASSES if classes is None else classes,
        out,
        0,
        features.size,
    )
    expected = naive_of(batch, channels, classes, features, n_channels)
    assert_bits_equal(out, expected)
    # Counts add up to the rows of each node, so the test is not comparing zeros.
    per_slot = np.bincount(batch["slot_of_row"], minlength=n_slots)
    np.testing.assert_array_equal(expected[:, 0, :, 0].sum(axis=1), per_slot)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("by_class", [False, True], ids=["channels", "classes"])
@pytest.mark.parametrize("order", ["in-order", "one-repeated"])
@pytest.mark.parametrize("seed", range(5))
def test_a_root_of_every_row_equals_the_naive_reference(
    seed: int, order: str, by_class: bool, implementation: str
) -> None:
    """Every row of the matrix in one node, as at a tree's root: the kernel then reads codes
    by position instead of through ``rows``. As many rows as the matrix but one repeated (as a
    bootstrap draws them) must take the indirect path: by position, the repeated row would
    count once and the missing one too."""
    batch, channels, classes, features = batch_inputs(seed, 2, by_class)
    n_rows = batch["columns"].shape[1]
    rows = np.arange(n_rows, dtype=np.intp)
    if order == "one-repeated":
        rows[n_rows - 2] = 3
    slot_of_row = np.zeros(n_rows, dtype=np.intp)
    out = np.full((1, features.size, HISTOGRAM_CODES, 3), np.nan)
    IMPLEMENTATIONS[implementation](
        batch["columns"],
        rows,
        slot_of_row,
        features,
        channels,
        histograms._NO_CLASSES if classes is None else classes,
        out,
        0,
        features.size,
    )
    expected = histograms.naive_histograms(
        batch["columns"], rows, slot_of_row, 1, features, channels, 2, classes
    )
    assert_bits_equal(out, expected)
    np.testing.assert_array_equal(expected[0, :, :, 0].sum(axis=1), n_rows)


@pytest.mark.parametrize("seed", range(10))
def test_build_histograms_equals_the_naive_reference_on_shuffled_rows_and_threads(
    seed: int,
) -> None:
    """The engine's entry point (the kernel or the twin, whichever is selected): rows in
    any slot order, and the features shared among threads, change nothing."""
    batch = random_batch(seed, 2)
    rng = np.random.default_rng(seed)
    # A large batch, so that the threads take part; its rows not grouped by node.
    n_rows = batch["binned"].shape[0]
    rows = rng.integers(0, n_rows, 3_000).astype(np.intp)
    slot_of_row = rng.integers(0, 4, rows.size).astype(np.intp)
    features = rng.permutation(batch["columns"].shape[0]).astype(np.int64)
    args = (batch["columns"], rows, slot_of_row, 4, features, batch["channels"], 2)
    expected = histograms.naive_histograms(*args)
    assert_bits_equal(histograms.build_histograms(*args), expected)
    with ThreadPoolExecutor(2) as threads:
        assert_bits_equal(histograms.build_histograms(*args, threads=threads), expected)
    if not compiled_kernels():
        return
    # The whole-tree kernel's plan: the features in blocks on Numba's threads, any count.
    order = np.argsort(slot_of_row, kind="stable")
    for n_parts in (1, 2, 3, 7):
        out = np.full((4, features.size, 256, 3), np.nan)
        histograms_threads(
            n_parts,
            batch["columns"],
            rows[order],
            slot_of_row[order],
            features,
            batch["channels"],
            np.zeros(0, dtype=np.int64),
            out,
        )
        assert_bits_equal(out, expected)


def test_wide_codes_are_refused() -> None:
    columns = np.full((1, 3), 300, dtype=np.uint16)
    with pytest.raises(ValueError, match="uint8 codes"):
        histograms.build_histograms(
            columns,
            np.arange(3),
            np.zeros(3, dtype=np.intp),
            1,
            np.zeros(1, np.int64),
            np.ones((3, 2)),
            2,
        )


@pytest.mark.parametrize("implementation", ["compiled", "numpy", "selected"])
@pytest.mark.parametrize("seed", range(10))
def test_sibling_subtraction_equals_the_naive_reference_bit_for_bit(
    seed: int, implementation: str
) -> None:
    rng = np.random.default_rng(seed)
    n_parents, n_pairs = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    shape = (int(rng.integers(1, 4)), HISTOGRAM_CODES, int(rng.integers(2, 5)))
    parent_histograms = rng.normal(size=(n_parents, *shape))
    parents = rng.choice(n_parents, n_pairs).astype(np.intp)
    smaller = rng.normal(size=(n_pairs, *shape))
    side = rng.integers(0, 2, n_pairs).astype(np.intp)
    if implementation == "selected":
        children = histograms.sibling_histograms(parent_histograms, parents, smaller, side)
    else:
        children = np.full((2 * n_pairs, *shape), np.nan)
        siblings = {
            "compiled": histograms._siblings_compiled,
            "numpy": histograms._siblings_numpy,
        }[implementation]
        siblings(parent_histograms, parents, smaller, side, children)
    expected = histograms.naive_sibling_histograms(parent_histograms, parents, smaller, side)
    assert_bits_equal(children, expected)
    pair = 0
    np.testing.assert_array_equal(expected[2 * pair + side[pair]], smaller[pair])
    np.testing.assert_array_equal(
        expected[2 * pair + 1 - side[pair]], parent_histograms[parents[pair]] - smaller[pair]
    )


SMALLER_CHILDREN = {
    "compiled": histograms._smaller_children_compiled,
    "numpy": histograms._smaller_children_numpy,
}


@pytest.mark.parametrize("implementation", SMALLER_CHILDREN)
@pytest.mark.parametrize("seed", range(20))
def test_smaller_children_are_each_pairs_child_with_fewer_rows(
    seed: int, implementation: str
) -> None:
    """Per pair, the side with fewer rows (the left on a tie, an empty child included), and
    that child's rows in their order in ``rows``: held to a loop over the pairs."""
    rng = np.random.default_rng(seed)
    n_pairs = int(rng.integers(1, 9))
    sizes = rng.integers(0, 40, 2 * n_pairs)
    if seed % 3 == 0:
        sizes[1] = sizes[0]  # a tie
    slot_of_row = np.repeat(np.arange(2 * n_pairs), sizes).astype(np.intp)
    rows = rng.permutation(slot_of_row.size).astype(np.intp)
    smaller_side = np.full(n_pairs, -1, dtype=np.intp)
    small_rows = np.full(rows.size, -1, dtype=np.intp)
    small_pairs = np.full(rows.size, -1, dtype=np.intp)
    n_small = SMALLER_CHILDREN[implementation](
        rows, slot_of_row, n_pairs, smaller_side, small_rows, small_pairs
    )
    expected_sides = [int(sizes[2 * p + 1] < sizes[2 * p]) for p in range(n_pairs)]
    assert smaller_side.tolist() == expected_sides
    expected = [
        (int(row), int(slot) // 2)
        for row, slot in zip(rows, slot_of_row, strict=True)
        if slot % 2 == expected_sides[slot // 2]
    ]
    assert n_small == len(expected)
    found = zip(small_rows[:n_small].tolist(), small_pairs[:n_small].tolist(), strict=True)
    assert list(found) == expected
    assert n_small == sum(min(sizes[2 * p], sizes[2 * p + 1]) for p in range(n_pairs))
