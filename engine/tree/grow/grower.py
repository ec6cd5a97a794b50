"""Growing one tree on binned data.

Without ``max_leaf_nodes`` the tree grows level by level: every open node of a depth is
searched in one vectorised batch (:func:`engine.tree.split.vectorised.find_splits`), so the Python
overhead is per level, not per node. With ``max_leaf_nodes`` it grows best-first: the open
leaf whose split decreases impurity most is split next, until the leaf budget is spent. The
tree's state and the work of each step live in :mod:`engine.tree.grow.growth`.

The second-order histogram trees of XGBoost-style boosting run the level loop in one compiled
call instead (:mod:`engine.tree.grow.whole_tree`); the loop here is that kernel's twin, which
grows the same tree to the last bit.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import HISTOGRAM_CODES
from engine.tree._histograms import sibling_histograms, smaller_children
from engine.tree._monotone import UNBOUNDED
from engine.tree._tree import Tree
from engine.tree.grow.growth import (
    HISTOGRAM_CELLS_PER_ROW,
    HISTOGRAM_MAX_CELLS,
    HISTOGRAM_MAX_SPLITS,
    Growth,
    GrowthLimits,
    select_slots,
    split_maps,
)
from engine.tree.grow.partition_kernels import partition_rows
from engine.tree.grow.random_levels import grow_random_level_wise, grows_random_levels
from engine.tree.grow.whole_tree import TreeWorkspace, grow_whole, grows_whole
from engine.tree.split.context import SplitContext, Splits

__all__ = ["grow", "grow_tree", "grows_in_one_call"]


def grow_tree(
    ctx: SplitContext,
    targets: NDArray[np.float64] | None,
    thresholds: NDArray[np.float64],
    limits: GrowthLimits,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None = None,
    leaves: NDArray[np.intp] | None = None,
    workspace: TreeWorkspace | None = None,
) -> Tree:
    """Grow one tree on all rows of ``ctx.binned`` (rows of zero weight must be dropped first).

    Parameters
    ----------
    ctx : SplitContext
        Binned rows and their channels.
    targets : ndarray of float64, shape (n_rows,), optional
        Regression targets (for exact node variances); None for classification.
    thresholds : ndarray of float64, shape (n_features, W), W ≥ MAX_BINS (255)
        Raw-value threshold of each bin boundary (``BinMapper.thresholds_``).
    limits : GrowthLimits
    rng : Generator
        The tree's own random stream (feature draws, random thresholds).
    feature_subset : ndarray of int64, optional
        Features the tree may split on (a random subspace); default all.
    leaves : ndarray of intp, shape (n_rows,), optional
        Filled with the leaf each row ends in, as the level-wise grower learns it for free
        (boosting then updates its training scores without descending the tree); best-first
        growth leaves it at −1.
    workspace : TreeWorkspace, optional
        Arrays a fit's trees reuse when they grow in one compiled call
        (:mod:`engine.tree.grow.whole_tree`); None allocates them for this tree.
    """
    return grow(Growth(ctx, targets, thresholds, limits, rng, feature_subset), leaves, workspace)


def grows_in_one_call(growth: Growth) -> bool:
    """Whether :func:`grow` grows this tree in one compiled call, drawing nothing more from its
    random stream while it grows."""
    return grows_whole(growth)


def grow(
    growth: Growth, leaves: NDArray[np.intp] | None = None, workspace: TreeWorkspace | None = None
) -> Tree:
    """Grow the tree ``growth`` holds (see :func:`grow_tree`): the tree's random draws made
    when ``growth`` was built are all it takes from its stream when it grows in one compiled
    call (:func:`~engine.tree.grow.whole_tree.grows_whole`), so such trees can grow side by
    side on threads."""
    if grows_in_one_call(growth):
        return grow_whole(growth, leaves, workspace)
    if leaves is not None:
        leaves[:] = -1
    max_leaf_nodes = growth.limits.max_leaf_nodes
    if max_leaf_nodes is None:
        _grow_level_wise(growth, leaves)
    else:
        _grow_best_first(growth, max_leaf_nodes)
    return growth.records.finish()


def _grow_level_wise(growth: Growth, leaves: NDArray[np.intp] | None = None) -> None:
    if grows_random_levels(growth):
        grow_random_level_wise(growth, leaves)
        return
    n_rows = growth.ctx.binned.shape[0]
    rows = np.arange(n_rows, dtype=np.intp)
    slot_of_row = np.zeros(n_rows, dtype=np.intp)
    n_slots, depth = 1, 0
    histograms = growth.histograms(rows, slot_of_row, 1) if growth.uses_histograms() else None
    bounds = UNBOUNDED[None, :] if growth.monotone is not None else None
    parent_feature = np.zeros(0, dtype=np.int64)
    known: tuple[NDArray[np.float64], NDArray[np.int64]] | None = None
    while n_slots:
        totals, counts, values, impurities = growth.summarise(rows, slot_of_row, n_slots, known)
        if depth > 0:
            bounds = growth.child_bounds(bounds, parent_feature, totals)
        values, impurities = growth.bounded(totals, values, impurities, bounds)
        node_ids, slots = growth.record_level(
            totals, counts, values, impurities, depth, rows, slot_of_row, leaves
        )
        if slots.size == 0:
            break
        slot_bounds = None if bounds is None else bounds[slots]
        if histograms is None:
            batch_rows, batch_slots = select_slots(rows, slot_of_row, slots, n_slots)
            splits = growth.search(
                batch_rows, batch_slots, totals[slots], counts[slots], depth, slot_bounds
            )
        else:
            splits = growth.search_histograms(
                histograms, slots, totals[slots], counts[slots], depth, slot_bounds
            )
        chosen = growth.accepted(splits)
        if not chosen.any():
            break
        growth.records.apply_splits(node_ids[slots], splits, chosen)
        if slot_bounds is not None:
            bounds, parent_feature = slot_bounds[chosen], splits.feature[chosen]
        # Rows of chosen nodes move to their children, grouped by child in parent order.
        split_of_slot, rank_of_slot, n_chosen = split_maps(n_slots, slots, chosen)
        rows, slot_of_row, child_totals, child_counts = partition_rows(
            growth.columns,
            rows,
            slot_of_row,
            split_of_slot,
            rank_of_slot,
            splits.feature,
            splits.left_codes,
            n_chosen,
            growth.ctx.channels,
        )
        known = (child_totals, child_counts)
        n_slots = 2 * n_chosen
        depth += 1
        if histograms is not None:
            max_depth = growth.limits.max_depth
            if max_depth is not None and depth >= max_depth:
                histograms = None  # the children are leaves: no split search would read them
            else:
                parents = slots[chosen]
                histograms = _child_histograms(growth, histograms, parents, rows, slot_of_row)


def _child_histograms(
    growth: Growth,
    histograms: NDArray[np.float64],
    parents: NDArray[np.intp],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
) -> NDArray[np.float64] | None:
    """Children's histograms: the smaller child's from its rows, its sibling by subtraction.

    Returns None (grow on from rows) once dense histograms would cost more than the rows:
    deep levels have many small nodes whose 256-bin histograms are mostly empty.
    """
    n_pairs = parents.size
    n_cells = 2 * n_pairs * growth.features.candidates.size * HISTOGRAM_CODES
    if (
        n_cells > HISTOGRAM_CELLS_PER_ROW * rows.size
        or n_cells > HISTOGRAM_MAX_CELLS
        or n_pairs > HISTOGRAM_MAX_SPLITS
    ):
        return None
    smaller_side, small_rows, small_pairs = smaller_children(rows, slot_of_row, n_pairs)
    small = growth.histograms(small_rows, small_pairs, n_pairs)
    return sibling_histograms(histograms, parents, small, smaller_side)


def _grow_best_first(growth: Growth, max_leaf_nodes: int) -> None:
    n_rows = growth.ctx.binned.shape[0]
    all_rows = np.arange(n_rows, dtype=np.intp)
    totals, counts, values, impurities = growth.summarise(
        all_rows, np.zeros(n_rows, dtype=np.intp), 1
    )
    root_bounds = UNBOUNDED[None, :] if growth.monotone is not None else None
    values, impurities = growth.bounded(totals, values, impurities, root_bounds)
    root = growth.record(totals, counts, values, impurities, 0)
    heap: list[tuple[float, int, int, NDArray[np.intp], Splits, int, Any]] = []
    tie = 0

    def consider(
        node_ids: NDArray[np.intp],
        row_sets: list[NDArray[np.intp]],
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        impurities: NDArray[np.float64],
        depth: int,
        bounds: NDArray[np.float64] | None,
    ) -> None:
        nonlocal tie
        open_nodes = growth.splittable(totals, counts, impurities, depth)
        slots = np.flatnonzero(open_nodes)
        if slots.size == 0:
            return
        batch_rows = np.concatenate([row_sets[s] for s in slots])
        batch_slots = np.repeat(np.arange(slots.size), [row_sets[s].size for s in slots])
        splits = growth.search(
            batch_rows,
            batch_slots,
            totals[slots],
            counts[slots],
            depth,
            None if bounds is None else bounds[slots],
        )
        accepted = growth.accepted(splits)
        for k, slot in enumerate(slots):
            gain = float(splits.gain[k])
            if not accepted[k]:
                continue
            single = _take(splits, k)
            node_bounds = None if bounds is None else bounds[slot : slot + 1]
            entry = (-gain, tie, int(node_ids[slot]), row_sets[slot], single, depth, node_bounds)
            heapq.heappush(heap, entry)
            tie += 1

    consider(root, [all_rows], totals, counts, impurities, 0, root_bounds)
    n_leaves = 1
    while heap and n_leaves < max_leaf_nodes:
        _, _, node_id, rows, split, depth, node_bounds = heapq.heappop(heap)
        growth.records.apply_splits(np.array([node_id]), split, np.array([True]))
        right = growth.records.goes_right(rows, np.zeros(rows.size, dtype=np.intp), split)
        children = [rows[~right], rows[right]]
        slot_of_row = right.astype(np.intp)
        ordered = np.concatenate(children)
        totals, counts, values, impurities = growth.summarise(
            ordered, np.sort(slot_of_row, kind="stable"), 2
        )
        bounds = growth.child_bounds(node_bounds, split.feature, totals)
        values, impurities = growth.bounded(totals, values, impurities, bounds)
        child_ids = growth.record(totals, counts, values, impurities, depth + 1)
        n_leaves += 1
        consider(child_ids, children, totals, counts, impurities, depth + 1, bounds)


def _take(splits: Splits, k: int) -> Splits:
    return Splits(
        found=splits.found[k : k + 1],
        gain=splits.gain[k : k + 1],
        feature=splits.feature[k : k + 1],
        bin=splits.bin[k : k + 1],
        missing_left=splits.missing_left[k : k + 1],
        left_codes=splits.left_codes[k : k + 1],
    )
