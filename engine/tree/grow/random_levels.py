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

The random stream is drawn exactly as the general grower draws it (the candidates of
:meth:`Growth.draw_rounds`, then one uniform per node and candidate), so both grow the same
tree from the same seed, and so do the kernels and their NumPy twins.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine.tree.grow.growth import Growth, split_maps
from engine.tree.grow.level_kernels import node_totals
from engine.tree.grow.partition_kernels import partition_ranges
from engine.tree.split import random_level_splits
from engine.tree.split.context import Splits
from engine.tree.split.random_cut_kernels import ONE_HOT_CLASSES

__all__ = ["grow_random_level_wise", "grows_random_levels"]

_NO_CLASSES = np.zeros(0, dtype=np.int64)
_NO_SLOTS = np.zeros(0, dtype=np.intp)


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


def grow_random_level_wise(growth: Growth, leaves: NDArray[np.intp] | None = None) -> None:
    """Grow ``growth``'s tree level by level (see :func:`engine.tree.grow.grower.grow_tree`)."""
    ctx = growth.ctx
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
    # Each row's node is read only for regression's variances and for ``leaves``.
    needs_slots = leaves is not None or growth.targets is not None
    n_slots, depth = 1, 0
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
        row_right = np.empty(rows.size, dtype=np.bool_)
        splits = _search_level(
            growth,
            depth,
            rows,
            node_start,
            slots,
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
        n_slots = 2 * n_chosen
        depth += 1


def _search_level(
    growth: Growth,
    depth: int,
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    slots: NDArray[np.intp],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
    row_right: NDArray[np.bool_],
) -> Splits:
    """Best random cuts of the level's open ``slots`` (their ``totals`` and ``counts``),
    with the side each row of a found split goes to in ``row_right``."""

    def search_round(pending: NDArray[np.intp], features: NDArray[np.int64]) -> Splits:
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
            growth.rng,
            row_right,
        )

    return growth.features.draw_rounds(slots.size, depth, search_round)
