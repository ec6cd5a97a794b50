"""Growing one second-order tree level by level on rows the grower never holds.

The rows (their codes, channels and node) stay with whoever holds them — partition actors on a
Dask cluster (:mod:`engine.parallel._dask_parts`) — and :class:`RemoteRows` is all the grower
asks of them: a level's histograms, and to move their rows by the level's splits and total the
children. Everything else is :func:`engine.tree.grow.grower.grow_tree`'s level-wise loop with
the same :class:`~engine.tree.grow.growth.Growth`: the same random stream, the same feature
pools, the same split search over the same dense histograms, the smaller child built and its
sibling subtracted (LightGBM's histogram subtraction, Ke et al. 2017), node records in the same
order. The one difference is that the local loop searches deep levels from rows once dense
histograms would cost more than the rows (``_child_histograms``); rows held elsewhere can only
be searched through histograms, which find the same splits from the same bin sums.

This is the H2O layout (``ScoreBuildHistogram2``: a node-id column beside the rows, one pass
per level) with XGBoost's histogram method (Chen & Guestrin 2016, §3.3).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from engine.tree._histograms import sibling_histograms
from engine.tree._monotone import UNBOUNDED
from engine.tree._tree import Tree
from engine.tree.grow.growth import Growth, split_maps
from engine.tree.grow.limits import GrowthLimits
from engine.tree.split.context import SplitContext

__all__ = ["LevelSplits", "RemoteRows", "grow_remote_level_wise"]

# (split_of_slot, rank_of_slot, feature, left_codes, n_chosen): what the partition kernel
# takes about a level's splits (engine.tree.grow.partition_kernels.partition_rows).
LevelSplits = tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.int64], NDArray[np.bool_], int]

_NO_ROWS = np.zeros(0, dtype=np.intp)


class RemoteRows(Protocol):
    """One tree's rows, held elsewhere, grouped by the node slot of the current level."""

    def histograms(
        self, features: NDArray[np.int64], smaller_side: NDArray[np.intp] | None
    ) -> NDArray[np.float64]:
        """Summed histograms (S, F, 256, 1 + C) over ``features``: of the level's one slot
        (``smaller_side`` None, the root), or of each pair's smaller child (0 left, 1 right),
        one histogram per pair."""
        ...

    def level(
        self, node_ids: NDArray[np.intp], splits: LevelSplits | None
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]] | None:
        """Record each row's node (``node_ids[slot]``), then move the rows of split slots to
        their children (rows of the other slots leave) and return the children's summed
        channel totals and row counts; ``splits`` None ends the tree."""
        ...


def grow_remote_level_wise(
    ctx: SplitContext,
    thresholds: NDArray[np.float64],
    limits: GrowthLimits,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None,
    root: tuple[NDArray[np.float64], NDArray[np.int64]],
    rows: RemoteRows,
) -> Tree:
    """Grow one tree; ``ctx`` holds no rows (``binned`` of shape (0, F) gives the features
    and code width), ``root`` the summed totals and count of the tree's rows."""
    growth = Growth(ctx, None, thresholds, limits, rng, feature_subset)
    if not growth.uses_histograms() or limits.max_leaf_nodes is not None:
        raise ValueError(
            "Rows held on workers grow level-wise trees searched from histograms only "
            "(no best-first growth, per-split column sampling, random cuts or exact bins)."
        )
    candidates = growth.features.candidates
    histograms: NDArray[np.float64] | None = rows.histograms(candidates, None)
    known = root
    n_slots, depth = 1, 0
    bounds = UNBOUNDED[None, :] if growth.monotone is not None else None
    parent_feature = np.zeros(0, dtype=np.int64)
    while True:
        totals, counts, values, impurities = growth.summarise(_NO_ROWS, _NO_ROWS, n_slots, known)
        if depth > 0:
            bounds = growth.child_bounds(bounds, parent_feature, totals)
        values, impurities = growth.bounded(totals, values, impurities, bounds)
        node_ids, slots = growth.record_level(
            totals, counts, values, impurities, depth, _NO_ROWS, _NO_ROWS, None
        )
        if slots.size == 0:
            rows.level(node_ids, None)
            break
        assert histograms is not None  # only the last depth drops them, and it splits nothing
        slot_bounds = None if bounds is None else bounds[slots]
        splits = growth.search_histograms(
            histograms, slots, totals[slots], counts[slots], depth, slot_bounds
        )
        chosen = growth.accepted(splits)
        if not chosen.any():
            rows.level(node_ids, None)
            break
        growth.records.apply_splits(node_ids[slots], splits, chosen)
        if slot_bounds is not None:
            bounds, parent_feature = slot_bounds[chosen], splits.feature[chosen]
        split_of_slot, rank_of_slot, n_chosen = split_maps(n_slots, slots, chosen)
        children = rows.level(
            node_ids, (split_of_slot, rank_of_slot, splits.feature, splits.left_codes, n_chosen)
        )
        assert children is not None
        known = children
        n_slots = 2 * n_chosen
        depth += 1
        if limits.max_depth is not None and depth >= limits.max_depth:
            histograms = None  # the children are leaves: no split search reads them
        else:
            child_counts = known[1]
            # The smaller child by rows, the left on a tie, as smaller_children chooses.
            smaller_side = (child_counts[1::2] < child_counts[0::2]).astype(np.intp)
            small = rows.histograms(candidates, smaller_side)
            histograms = sibling_histograms(histograms, slots[chosen], small, smaller_side)
    return growth.records.finish()
