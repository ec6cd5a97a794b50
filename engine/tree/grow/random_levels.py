"""Growing an extremely randomised tree level by level, each node's rows kept with their
channels.

Geurts, Ernst and Wehenkel (2006) cut each candidate feature of a node at one uniform
threshold, so a split needs no histogram, only each candidate's range in the node and the
channel sums left of the cut. scikit-learn's splitter (Louppe 2014, §5.3) keeps a node's
samples contiguous and partitions them in place; here a level's rows stay grouped by node
(as in :mod:`engine.tree.grow.grower`) and carry their channels along when they move
(:func:`engine.tree.grow.partition_kernels.partition_ranges`), so that:

* a node's channels are read front to back by the search, not gathered from scattered rows
  (the one scattered read left is each candidate's codes);
* the children's totals are summed while the rows move, instead of in a pass of their own.

A node's draws (its candidates' order and thresholds) come from its own key
(:mod:`engine.tree.grow.node_keys`), not from the tree's stream in the order nodes are
searched, so the nodes of at most
:data:`SUBTREE_ROWS` rows can grow their subtrees depth
first in one compiled call each level (:mod:`engine.tree.grow.subtree_kernels`) and the tree
is the one this loop grows alone, which is the kernel's twin. (Trees that the general grower
grows — categorical features, monotone bounds, ``max_leaf_nodes`` — draw from the tree's
stream as before.)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import compiled_kernels
from engine.tree.grow.growth import Growth, split_maps
from engine.tree.grow.level_kernels import node_totals
from engine.tree.grow.node_keys import child_keys, root_key
from engine.tree.grow.partition_kernels import partition_ranges
from engine.tree.grow.subtree_kernels import grow_subtrees
from engine.tree.split import random_level_splits
from engine.tree.split.compiled import _n_bins, _settings
from engine.tree.split.context import Splits
from engine.tree.split.random_cut_kernels import ONE_HOT_CLASSES

__all__ = ["grow_random_level_wise", "grows_random_levels"]

_NO_CLASSES = np.zeros(0, dtype=np.int64)
_NO_SLOTS = np.zeros(0, dtype=np.intp)
_NO_TARGETS = np.zeros(0)

# An open node of at most this many rows grows its subtree depth first in one compiled call
# (engine.tree.grow.subtree_kernels). Binary 80k x 40 and friedman1 80k x 20, 20 trees, one
# thread, CPU time: 0 (the level loop alone) 3.7 / 6.9 s, 512 rows 2.8 / 5.1 s, 4,096 rows
# 2.2 / 4.6 s, 32,768 rows 1.8 / 4.4 s, the whole tree 1.8 / 4.5 s (load 8-9).
SUBTREE_ROWS = 32_768


def grows_random_levels(growth: Growth) -> bool:
    """Whether :func:`grow_random_level_wise` grows this tree: random cuts on numeric
    features, without monotone bounds or histograms built elsewhere."""
    ctx = growth.ctx
    return (
        ctx.random_splits
        and not bool(ctx.is_categorical.any())
        and growth.monotone is None
        and ctx.remote_histograms is None
    )


def grow_random_level_wise(
    growth: Growth,
    leaves: NDArray[np.intp] | None = None,
    subtree_rows: int | None = None,
) -> None:
    """Grow ``growth``'s tree level by level (see :func:`engine.tree.grow.grower.grow_tree`),
    each open node of at most ``subtree_rows`` rows (default :data:`SUBTREE_ROWS` with the
    compiled kernels, 0 with their twins) grown to its leaves in one compiled call instead
    (:mod:`engine.tree.grow.subtree_kernels`): the same tree either way."""
    ctx = growth.ctx
    if subtree_rows is None:
        subtree_rows = SUBTREE_ROWS if compiled_kernels() else 0
    if growth.features.level_size < growth.features.candidates.size:
        subtree_rows = 0  # each depth's pool is drawn from the tree's stream as it is reached
    n_rows = ctx.binned.shape[0]
    rows = np.arange(n_rows, dtype=np.intp)
    level_channels = np.ascontiguousarray(ctx.channels, dtype=np.float64)
    # Up to ONE_HOT_CLASSES classes the search sums the one-hot channels and never reads
    # a row's class, so the classes need not move with the rows.
    by_class = ctx.classes is not None and ctx.weights is not None
    level_classes = (
        np.ascontiguousarray(ctx.classes, dtype=np.int64)
        if by_class and ctx.classes is not None and ctx.channels.shape[1] > ONE_HOT_CLASSES
        else _NO_CLASSES
    )
    totals, counts = node_totals(rows, np.zeros(n_rows, dtype=np.intp), 1, ctx.channels)
    keys = np.array([root_key(growth.rng)], dtype=np.uint64)
    # Each row's node is read only for regression's variances and for ``leaves``.
    needs_slots = leaves is not None or growth.targets is not None
    n_slots, depth = 1, 0
    finished = False
    while n_slots:
        slot_of_row = np.repeat(np.arange(n_slots), counts) if needs_slots else _NO_SLOTS
        values, impurities = growth.statistics(totals, rows, slot_of_row)
        node_ids, slots = growth.record_level(
            totals, counts, values, impurities, depth, rows, slot_of_row, leaves
        )
        if slots.size == 0:
            break
        node_start = np.zeros(n_slots + 1, dtype=np.intp)
        np.cumsum(counts, out=node_start[1:])
        small = counts[slots] <= subtree_rows
        if small.any():
            _finish_subtrees(
                growth,
                slots[small],
                node_ids,
                depth,
                rows,
                node_start,
                level_channels,
                level_classes,
                keys,
                totals,
                leaves,
            )
            finished = True
            slots = slots[~small]
            if slots.size == 0:
                break
        row_right = np.empty(rows.size, dtype=np.bool_)
        splits = _search_level(
            growth,
            depth,
            rows,
            node_start,
            slots,
            keys[slots],
            level_channels,
            level_classes,
            totals[slots],
            counts[slots],
            row_right,
        )
        chosen = growth.accepted(splits)
        if not chosen.any():
            break
        growth.records.apply_splits(node_ids[slots], splits, chosen)
        # Rows of chosen nodes move to their children, grouped by child in parent order.
        _, rank_of_slot, n_chosen = split_maps(n_slots, slots, chosen)
        rows, level_channels, level_classes, totals, counts = partition_ranges(
            rows, node_start, rank_of_slot, row_right, level_channels, level_classes, n_chosen
        )
        keys = child_keys(keys[slots[chosen]])
        n_slots = 2 * n_chosen
        depth += 1
    if finished:
        new_of_old = growth.records.level_order()
        if leaves is not None:
            leaves[:] = new_of_old[leaves]


def _finish_subtrees(
    growth: Growth,
    small: NDArray[np.intp],
    node_ids: NDArray[np.intp],
    depth: int,
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    keys: NDArray[np.uint64],
    totals: NDArray[np.float64],
    leaves: NDArray[np.intp] | None,
) -> None:
    """Grow the subtrees of a level's open ``small`` slots in one compiled call and record
    their nodes and splits (and each of their rows' leaf in ``leaves``)."""
    ctx, limits = growth.ctx, growth.limits
    starts, stops = node_start[small], node_start[small + 1]
    n_work = int((stops - starts).sum())
    capacity = 2 * n_work
    n_channels = level_channels.shape[1]
    node_totals = np.empty((capacity, n_channels))
    node_counts = np.empty(capacity, dtype=np.int64)
    node_depth = np.empty(capacity, dtype=np.int64)
    node_squared = np.empty(capacity)
    node_feature = np.empty(capacity, dtype=np.int64)
    node_bin = np.empty(capacity, dtype=np.int64)
    node_missing_left = np.empty(capacity, dtype=np.bool_)
    node_left = np.empty(capacity, dtype=np.int64)
    leaf_rows = np.empty(n_work, dtype=np.intp)
    leaf_nodes = np.empty(n_work, dtype=np.int64)
    pool = growth.features.level_pool(depth)
    settings = _settings(ctx)
    n_nodes = grow_subtrees(
        growth.columns,
        np.ascontiguousarray(ctx.binned),
        rows,
        level_channels,
        level_classes,
        _NO_TARGETS if growth.targets is None else growth.targets,
        starts,
        stops,
        keys[small],
        depth,
        np.ascontiguousarray(totals[small]),
        np.ascontiguousarray(pool, dtype=np.int64),
        limits.max_features or pool.size,
        settings,
        np.array(
            [
                -1 if limits.max_depth is None else limits.max_depth,
                limits.min_samples_split,
                limits.min_samples_leaf,
                limits.min_weight_leaf,
                limits.min_impurity_decrease,
                growth.records.root_weight,
            ],
            dtype=np.float64,
        ),
        ctx.bin_values,
        _n_bins(ctx).astype(np.int32, copy=False),
        ctx.missing_code,
        node_totals,
        node_counts,
        node_depth,
        node_squared,
        node_feature,
        node_bin,
        node_missing_left,
        node_left,
        leaf_rows,
        leaf_nodes,
    )
    n_roots = small.size
    new = slice(n_roots, n_nodes)
    ids = np.empty(n_nodes, dtype=np.intp)
    ids[:n_roots] = node_ids[small]
    if n_nodes > n_roots:
        new_totals = node_totals[new]
        squared = node_squared[new] if growth.targets is not None else None
        values, impurities = growth.statistics(new_totals, _NO_SLOTS, _NO_SLOTS, squared)
        ids[new] = growth.record(new_totals, node_counts[new], values, impurities, node_depth[new])
        split = np.flatnonzero(node_left[:n_nodes] >= 0)
        growth.records.set_numeric_splits(
            ids[split],
            node_feature[split],
            node_bin[split],
            node_missing_left[split],
            ids[node_left[split]],
        )
    if leaves is not None:
        leaves[leaf_rows] = ids[leaf_nodes]


def _search_level(
    growth: Growth,
    depth: int,
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    slots: NDArray[np.intp],
    keys: NDArray[np.uint64],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
    row_right: NDArray[np.bool_],
) -> Splits:
    """Best random cuts of the level's open ``slots`` (their keys, ``totals`` and
    ``counts``), with the side each row of a found split goes to in ``row_right``."""

    def search_round(
        pending: NDArray[np.intp], features: NDArray[np.int64], uniforms: NDArray[np.float64]
    ) -> Splits:
        return random_level_splits(
            growth.ctx,
            growth.columns,
            rows,
            node_start,
            slots[pending],
            features,
            level_channels,
            level_classes,
            totals[pending],
            counts[pending],
            uniforms,
            row_right,
        )

    return growth.features.draw_keyed_rounds(keys, depth, search_round)
