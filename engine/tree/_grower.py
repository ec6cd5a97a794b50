"""Growing one tree on binned data.

Without ``max_leaf_nodes`` the tree grows level by level: every open node of a depth is
searched in one vectorised batch (:func:`engine.tree._splitter.find_splits`), so the Python
overhead is per level, not per node. With ``max_leaf_nodes`` it grows best-first: the open
leaf whose split decreases impurity most is split next, until the leaf budget is spent.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import (
    CLASSIFICATION_CRITERIA,
    Newton,
    impurity,
    node_weight,
    score,
)
from engine.tree._monotone import UNBOUNDED, MonotoneBounds
from engine.tree._splitter import (
    SplitContext,
    Splits,
    find_splits,
    find_splits_in_histograms,
)
from engine.tree._tree import NODE_DTYPE, Tree

__all__ = ["GrowthLimits", "grow_tree"]

# Nodes whose impurity is below this are pure; splitting them only chases rounding noise.
IMPURITY_EPSILON = 1e-12
# Per-node histograms are kept while their cells number at most this many per row of the
# level (and at most the absolute cap, which bounds memory).
HISTOGRAM_CELLS_PER_ROW = 16
HISTOGRAM_MAX_CELLS = 8_000_000
# ... and while a level splits at most this many nodes: past it, deep trees' many small
# nodes are cheaper to search from their rows.
HISTOGRAM_MAX_SPLITS = 128
# Codes per feature in a dense histogram (8-bit binning), and bits of a category bitset.
HISTOGRAM_CODES = 256
BITSET_CODES = 256


@dataclass(frozen=True)
class GrowthLimits:
    """Stopping rules and feature sampling of one tree."""

    max_depth: int | None = None
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    min_weight_leaf: float = 0.0
    min_impurity_decrease: float = 0.0
    max_features: int | None = None  # candidate features drawn per split; None = all
    # Candidate features drawn once per depth level (XGBoost's colsample_bylevel), from which
    # each split then draws its max_features; None = all.
    level_features: int | None = None
    max_leaf_nodes: int | None = None
    min_split_gain: float = 0.0  # γ: a Newton split must gain more than this


@dataclass
class _NodeTable:
    """Nodes as they are created, flattened into a :class:`Tree` at the end."""

    columns: dict[str, list[NDArray[np.generic]]] = field(default_factory=dict)
    values: list[NDArray[np.float64]] = field(default_factory=list)
    bitsets: list[NDArray[np.uint8]] = field(default_factory=list)
    n_nodes: int = 0
    n_bitsets: int = 0

    def add(self, values: NDArray[np.float64], **columns: NDArray[np.generic]) -> NDArray[np.intp]:
        ids = np.arange(self.n_nodes, self.n_nodes + values.shape[0])
        self.n_nodes += values.shape[0]
        self.values.append(values)
        for name, column in columns.items():
            self.columns.setdefault(name, []).append(np.asarray(column))
        return ids

    def finish(self, n_features: int, split_columns: dict[str, NDArray[np.generic]]) -> Tree:
        nodes = np.zeros(self.n_nodes, dtype=NODE_DTYPE)
        for name, parts in self.columns.items():
            nodes[name] = np.concatenate(parts)
        for name, column in split_columns.items():
            nodes[name] = column
        bitsets = (
            np.concatenate(self.bitsets) if self.bitsets else np.zeros((0, 32), dtype=np.uint8)
        )
        return Tree(nodes, np.concatenate(self.values), bitsets, n_features)


class _Growth:
    """State of one tree being grown: rows, node statistics and split records."""

    def __init__(
        self,
        ctx: SplitContext,
        targets: NDArray[np.float64] | None,
        thresholds: NDArray[np.float64],
        limits: GrowthLimits,
        rng: np.random.Generator,
        feature_subset: NDArray[np.int64] | None,
    ) -> None:
        self.ctx = ctx
        self.targets = targets
        self.thresholds = thresholds
        self.limits = limits
        self.rng = rng
        n_features = ctx.binned.shape[1]
        candidates = np.arange(n_features) if feature_subset is None else np.asarray(feature_subset)
        self.level_size = min(limits.level_features or candidates.size, candidates.size)
        per_round = limits.max_features or candidates.size
        # When every node searches every feature, ties between features go to the first
        # one searched: a random order per tree keeps such ties from always favouring the
        # same feature (scikit-learn shuffles the features at every node for the same reason).
        self.candidates = (
            rng.permutation(candidates) if per_round >= self.level_size else candidates
        )
        self.level_pools: dict[int, NDArray[np.int64]] = {}
        self.table = _NodeTable()
        size = 64
        self.split_feature = np.full(size, -1, dtype=np.int64)
        self.split_left = np.full(size, -1, dtype=np.int64)
        self.split_threshold = np.zeros(size)
        self.split_missing_left = np.zeros(size, dtype=bool)
        self.split_category = np.full(size, -1, dtype=np.int64)
        self.root_weight = 0.0
        # Unweighted regression: the weight channel equals the row count, so histograms can
        # reuse the counts instead of summing the weights again.
        self.unit_weights = ctx.criterion == "squared_error" and bool(
            (ctx.channels[:, 0] == 1.0).all()
        )
        self.monotone = (
            MonotoneBounds(ctx.criterion, ctx.monotone)
            if ctx.monotone is not None and isinstance(ctx.criterion, Newton)
            else None
        )

    # -- node statistics --------------------------------------------------------------

    def summarise(
        self, rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], n_slots: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """Channel totals, row counts, values and impurities of a batch of nodes."""
        channels = self.ctx.channels[rows]
        totals = np.empty((n_slots, channels.shape[1]))
        for c in range(channels.shape[1]):
            totals[:, c] = np.bincount(slot_of_row, weights=channels[:, c], minlength=n_slots)
        counts = np.bincount(slot_of_row, minlength=n_slots).astype(np.int64)
        criterion = self.ctx.criterion
        if isinstance(criterion, Newton):
            # Cover H is the node weight; this impurity makes H·impurity = −score, so the
            # recorded impurity decrease of a split is exactly its Newton gain.
            cover = totals[:, 1]
            values = criterion.leaf_weight(totals)[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                impurities = np.where(cover > 0, -score(totals, criterion) / cover, 0.0)
        elif criterion in CLASSIFICATION_CRITERIA:
            weight = totals.sum(axis=1)
            values = totals / weight[:, None]
            impurities = impurity(totals, criterion)
        else:
            assert self.targets is not None
            weight = totals[:, 0]
            mean = totals[:, 1] / weight
            deviation = self.targets[rows] - mean[slot_of_row]
            squared = np.bincount(
                slot_of_row, weights=channels[:, 0] * deviation**2, minlength=n_slots
            )
            values = mean[:, None]
            impurities = squared / weight
        return totals, counts, values, impurities

    def bounded(
        self,
        totals: NDArray[np.float64],
        values: NDArray[np.float64],
        impurities: NDArray[np.float64],
        bounds: NDArray[np.float64] | None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Node values and impurities under monotone constraints' weight bounds."""
        if self.monotone is None or bounds is None:
            return values, impurities
        return self.monotone.node_statistics(totals, bounds)

    def child_bounds(
        self,
        parent_bounds: NDArray[np.float64] | None,
        parent_feature: NDArray[np.int64],
        child_totals: NDArray[np.float64],
    ) -> NDArray[np.float64] | None:
        """Bounds of the children (left, right per parent) of the nodes just split."""
        if self.monotone is None or parent_bounds is None:
            return None
        return self.monotone.children(parent_bounds, parent_feature, child_totals)

    def record(
        self,
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        values: NDArray[np.float64],
        impurities: NDArray[np.float64],
        depth: int | NDArray[np.int64],
    ) -> NDArray[np.intp]:
        weight = node_weight(totals, self.ctx.criterion)
        return self.table.add(
            values,
            impurity=impurities,
            n_samples=counts,
            weighted_n_samples=weight,
            depth=np.broadcast_to(depth, counts.shape),
        )

    def splittable(
        self,
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        impurities: NDArray[np.float64],
        depth: int,
    ) -> NDArray[np.bool_]:
        limits = self.limits
        weight = node_weight(totals, self.ctx.criterion)
        ok = (
            (counts >= limits.min_samples_split)
            & (counts >= 2 * limits.min_samples_leaf)
            & (weight >= 2 * limits.min_weight_leaf)
        )
        if not isinstance(self.ctx.criterion, Newton):
            ok &= impurities > IMPURITY_EPSILON
        if limits.max_depth is not None and depth >= limits.max_depth:
            ok[:] = False
        return ok

    # -- histograms (all candidate features, for subtraction) ----------------------------

    def level_pool(self, depth: int) -> NDArray[np.int64]:
        """The candidate features of a depth level, drawn once per level (in tree order)."""
        if self.level_size >= self.candidates.size:
            return self.candidates
        pool = self.level_pools.get(depth)
        if pool is None:
            drawn = self.rng.choice(self.candidates.size, self.level_size, replace=False)
            pool = self.level_pools[depth] = self.candidates[np.sort(drawn)]
        return pool

    def uses_histograms(self) -> bool:
        """Whether this tree can keep per-node histograms and derive siblings by subtraction.

        That needs every node of a level to search all the level's features (no per-split
        sampling) and the best-split search (random thresholds need no histogram). The
        histograms cover all the tree's features; a level searches the columns of its own.
        """
        per_round = self.limits.max_features or self.candidates.size
        # Exact binning's 65,536 codes per feature would make dense histograms huge.
        narrow = self.ctx.n_codes <= HISTOGRAM_CODES
        return narrow and per_round >= self.level_size and not self.ctx.random_splits

    def histograms(
        self, rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], n_slots: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Dense histograms of a batch: counts (S, F, 256) and channel sums (S, F, 256, C).

        One feature at a time over a contiguous copy of the batch's codes: small
        ``bincount`` calls beat one huge call whose keys and repeated weights would first
        have to be materialised. (Sharing the features out among threads was tried: boosting
        fits ran 1.02–1.04× the serial time, as NumPy's ``bincount`` keeps the GIL for part
        of each call; see docs/engine.md, "Parallelism".)
        """
        ctx = self.ctx
        n_features = self.candidates.size
        n_channels = ctx.channels.shape[1]
        if rows.size == ctx.binned.shape[0]:
            codes = ctx.binned.T[self.candidates]  # the root: every row, no gather needed
        else:
            codes = np.ascontiguousarray(ctx.binned[rows][:, self.candidates].T)
        base = slot_of_row * HISTOGRAM_CODES
        n_cells = n_slots * HISTOGRAM_CODES
        counts = np.empty((n_slots, n_features, HISTOGRAM_CODES), dtype=np.int64)
        sums = np.empty((n_slots, n_features, HISTOGRAM_CODES, n_channels))
        by_class = ctx.classes is not None and ctx.weights is not None
        if by_class:
            assert ctx.classes is not None and ctx.weights is not None
            class_offset = base * n_channels + ctx.classes[rows]
            row_weights = ctx.weights[rows]
        else:
            channels = ctx.channels[rows]
        for j in range(n_features):
            keys = base + codes[j]
            counts[:, j] = np.bincount(keys, minlength=n_cells).reshape(n_slots, HISTOGRAM_CODES)
            if by_class:
                class_keys = class_offset + codes[j].astype(np.intp) * n_channels
                sums[:, j] = np.bincount(
                    class_keys, weights=row_weights, minlength=n_cells * n_channels
                ).reshape(n_slots, HISTOGRAM_CODES, n_channels)
                continue
            for c in range(n_channels):
                if c == 0 and self.unit_weights:
                    sums[:, j, :, 0] = counts[:, j]
                    continue
                sums[:, j, :, c] = np.bincount(
                    keys, weights=channels[:, c], minlength=n_cells
                ).reshape(n_slots, HISTOGRAM_CODES)
        return counts, sums

    # -- split search -------------------------------------------------------------------

    def search(
        self,
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        depth: int,
        bounds: NDArray[np.float64] | None = None,
    ) -> Splits:
        """Best splits of a batch, drawing ``max_features`` candidates per node from the
        features of its depth level.

        As in scikit-learn, a node whose drawn features admit no valid split keeps drawing
        from its remaining features before it is declared a leaf.
        """
        n_slots = totals.shape[0]
        pool = self.level_pool(depth)
        n_candidates = pool.size
        per_round = self.limits.max_features or n_candidates
        if per_round >= n_candidates:
            features = np.broadcast_to(pool, (n_slots, n_candidates))
            return find_splits(
                self.ctx,
                rows,
                slot_of_row,
                np.ascontiguousarray(features),
                totals,
                counts,
                self.rng,
                bounds,
            )
        order = self.rng.random((n_slots, n_candidates)).argsort(axis=1)
        drawn = pool[order]
        result: Splits | None = None
        pending = np.arange(n_slots)
        for start in range(0, n_candidates, per_round):
            features = drawn[pending, start : start + per_round]
            if features.shape[1] < per_round:
                pad = np.full((pending.size, per_round - features.shape[1]), -1)
                features = np.concatenate([features, pad], axis=1)
            batch_rows, batch_slots = _select_slots(rows, slot_of_row, pending, n_slots)
            splits = find_splits(
                self.ctx,
                batch_rows,
                batch_slots,
                features,
                totals[pending],
                counts[pending],
                self.rng,
                None if bounds is None else bounds[pending],
            )
            result = splits if result is None else _merge(result, splits, pending)
            pending = pending[~splits.found]
            if pending.size == 0:
                break
        assert result is not None
        return result

    def accepted(self, splits: Splits) -> NDArray[np.bool_]:
        """Found splits that pass the gain threshold of the criterion.

        Impurity criteria use scikit-learn's ``min_impurity_decrease`` (a decrease relative
        to the root's weight); Newton splits must gain more than γ (``min_split_gain``).
        """
        if isinstance(self.ctx.criterion, Newton):
            return splits.found & (splits.gain > self.limits.min_split_gain + IMPURITY_EPSILON)
        return splits.found & (
            splits.gain / self.root_weight + IMPURITY_EPSILON >= self.limits.min_impurity_decrease
        )

    # -- split bookkeeping --------------------------------------------------------------

    def apply_splits(
        self, node_ids: NDArray[np.intp], splits: Splits, chosen: NDArray[np.bool_]
    ) -> NDArray[np.intp]:
        """Record the chosen splits; return the id of each new left child."""
        ids = node_ids[chosen]
        needed = int(ids.max()) + 1 if ids.size else 0
        if needed > self.split_feature.size:
            self._grow_split_arrays(needed)
        first_child = self.table.n_nodes
        left_ids = first_child + 2 * np.arange(ids.size)
        feature = splits.feature[chosen]
        split_bin = splits.bin[chosen]
        self.split_feature[ids] = feature
        self.split_left[ids] = left_ids
        self.split_missing_left[ids] = splits.missing_left[chosen]
        categorical = self.ctx.is_categorical[feature]
        last_bin = self.ctx.missing_code - 1
        self.split_threshold[ids] = np.where(
            categorical, np.nan, self.thresholds[feature, np.minimum(split_bin, last_bin)]
        )
        if categorical.any():
            # Categories have codes below 255 in either code width: 256 bits hold them all.
            codes = splits.left_codes[chosen][categorical][:, :BITSET_CODES]
            self.table.bitsets.append(np.packbits(codes, axis=1, bitorder="little"))
            start = self.table.n_bitsets
            self.table.n_bitsets += int(categorical.sum())
            self.split_category[ids[categorical]] = np.arange(start, self.table.n_bitsets)
        return left_ids

    def _grow_split_arrays(self, needed: int) -> None:
        size = max(needed, 2 * self.split_feature.size)
        for name, fill in (
            ("split_feature", -1),
            ("split_left", -1),
            ("split_threshold", 0.0),
            ("split_missing_left", False),
            ("split_category", -1),
        ):
            old = getattr(self, name)
            new = np.full(size, fill, dtype=old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def goes_right(
        self,
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        splits: Splits,
    ) -> NDArray[np.bool_]:
        codes = self.ctx.binned[rows, splits.feature[slot_of_row]]
        return ~splits.left_codes[slot_of_row, codes]

    def finish(self) -> Tree:
        n = self.table.n_nodes
        self._grow_split_arrays(n)
        left = self.split_left[:n]
        return self.table.finish(
            self.ctx.binned.shape[1],
            {
                "left_child": left,
                "right_child": np.where(left >= 0, left + 1, -1),
                "feature": self.split_feature[:n],
                "threshold": np.where(left >= 0, self.split_threshold[:n], 0.0),
                "missing_left": self.split_missing_left[:n],
                "category_split": self.split_category[:n],
            },
        )


def _select_slots(
    rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], slots: NDArray[np.intp], n_slots: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Rows of the given slots, renumbered ``0..len(slots)-1``."""
    if slots.size == n_slots:
        return rows, slot_of_row
    renumber = np.full(n_slots, -1, dtype=np.intp)
    renumber[slots] = np.arange(slots.size)
    new_slot = renumber[slot_of_row]
    keep = new_slot >= 0
    return rows[keep], new_slot[keep]


def _merge(result: Splits, update: Splits, slots: NDArray[np.intp]) -> Splits:
    """Overwrite the entries of ``slots`` that ``update`` found splits for."""
    found = slots[update.found]
    for name in ("found", "gain", "feature", "bin", "missing_left", "left_codes"):
        getattr(result, name)[found] = getattr(update, name)[update.found]
    return result


def grow_tree(
    ctx: SplitContext,
    targets: NDArray[np.float64] | None,
    thresholds: NDArray[np.float64],
    limits: GrowthLimits,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None = None,
) -> Tree:
    """Grow one tree on all rows of ``ctx.binned`` (rows of zero weight must be dropped first).

    Parameters
    ----------
    ctx : SplitContext
        Binned rows and their channels.
    targets : ndarray of float64, shape (n_rows,), optional
        Regression targets (for exact node variances); None for classification.
    thresholds : ndarray of float64, shape (n_features, 255)
        Raw-value threshold of each bin boundary (``BinMapper.thresholds_``).
    limits : GrowthLimits
    rng : Generator
        The tree's own random stream (feature draws, random thresholds).
    feature_subset : ndarray of int64, optional
        Features the tree may split on (a random subspace); default all.
    """
    growth = _Growth(ctx, targets, thresholds, limits, rng, feature_subset)
    if limits.max_leaf_nodes is None:
        _grow_level_wise(growth)
    else:
        _grow_best_first(growth, limits.max_leaf_nodes)
    return growth.finish()


def _grow_level_wise(growth: _Growth) -> None:
    n_rows = growth.ctx.binned.shape[0]
    rows = np.arange(n_rows, dtype=np.intp)
    slot_of_row = np.zeros(n_rows, dtype=np.intp)
    n_slots, depth = 1, 0
    histograms = growth.histograms(rows, slot_of_row, 1) if growth.uses_histograms() else None
    bounds = UNBOUNDED[None, :] if growth.monotone is not None else None
    parent_feature = np.zeros(0, dtype=np.int64)
    while n_slots:
        totals, counts, values, impurities = growth.summarise(rows, slot_of_row, n_slots)
        if depth > 0:
            bounds = growth.child_bounds(bounds, parent_feature, totals)
        values, impurities = growth.bounded(totals, values, impurities, bounds)
        node_ids = growth.record(totals, counts, values, impurities, depth)
        if depth == 0:
            growth.root_weight = float(growth.table.columns["weighted_n_samples"][0][0])
        open_nodes = growth.splittable(totals, counts, impurities, depth)
        if not open_nodes.any():
            break
        slots = np.flatnonzero(open_nodes)
        batch_rows, batch_slots = _select_slots(rows, slot_of_row, slots, n_slots)
        slot_bounds = None if bounds is None else bounds[slots]
        if histograms is None:
            splits = growth.search(
                batch_rows, batch_slots, totals[slots], counts[slots], depth, slot_bounds
            )
        else:
            pool = growth.level_pool(depth)
            columns = (
                slice(None)
                if pool.size == growth.candidates.size
                else np.flatnonzero(np.isin(growth.candidates, pool))
            )
            features = np.broadcast_to(growth.candidates[columns], (slots.size, pool.size))
            splits = find_splits_in_histograms(
                growth.ctx,
                histograms[0][slots][:, columns],
                histograms[1][slots][:, columns],
                np.ascontiguousarray(features),
                totals[slots],
                counts[slots],
                growth.rng,
                slot_bounds,
            )
        chosen = growth.accepted(splits)
        if not chosen.any():
            break
        growth.apply_splits(node_ids[slots], splits, chosen)
        if slot_bounds is not None:
            bounds, parent_feature = slot_bounds[chosen], splits.feature[chosen]
        # Rows of chosen nodes move to their children; child slots keep parent order so
        # the rows stay grouped by slot, which keeps the next level's key sort cheap.
        keep_slot = np.full(slots.size, -1, dtype=np.intp)
        keep_slot[chosen] = np.arange(int(chosen.sum()))
        batch_rank = keep_slot[batch_slots]
        moving = batch_rank >= 0
        rows, batch_slots, batch_rank = batch_rows[moving], batch_slots[moving], batch_rank[moving]
        right = growth.goes_right(rows, batch_slots, splits)
        slot_of_row = 2 * batch_rank + right
        order = np.argsort(slot_of_row, kind="stable")
        rows, slot_of_row = rows[order], slot_of_row[order]
        n_slots = 2 * int(chosen.sum())
        depth += 1
        if histograms is not None:
            max_depth = growth.limits.max_depth
            if max_depth is not None and depth >= max_depth:
                histograms = None  # the children are leaves: no split search would read them
            else:
                parents = slots[chosen]
                histograms = _child_histograms(growth, histograms, parents, rows, slot_of_row)


def _child_histograms(
    growth: _Growth,
    histograms: tuple[NDArray[np.int64], NDArray[np.float64]],
    parents: NDArray[np.intp],
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
) -> tuple[NDArray[np.int64], NDArray[np.float64]] | None:
    """Children's histograms: the smaller child's from its rows, its sibling by subtraction.

    Returns None (grow on from rows) once dense histograms would cost more than the rows:
    deep levels have many small nodes whose 256-bin histograms are mostly empty.
    """
    n_pairs = parents.size
    n_cells = 2 * n_pairs * growth.candidates.size * HISTOGRAM_CODES
    if (
        n_cells > HISTOGRAM_CELLS_PER_ROW * rows.size
        or n_cells > HISTOGRAM_MAX_CELLS
        or n_pairs > HISTOGRAM_MAX_SPLITS
    ):
        return None
    child_counts = np.bincount(slot_of_row, minlength=2 * n_pairs).reshape(n_pairs, 2)
    smaller_side = (child_counts[:, 1] < child_counts[:, 0]).astype(np.intp)
    is_smaller = (slot_of_row % 2) == smaller_side[slot_of_row // 2]
    small_counts, small_sums = growth.histograms(
        rows[is_smaller], slot_of_row[is_smaller] // 2, n_pairs
    )
    parent_counts, parent_sums = histograms[0][parents], histograms[1][parents]
    counts = np.empty((n_pairs, 2, *small_counts.shape[1:]), dtype=np.int64)
    sums = np.empty((n_pairs, 2, *small_sums.shape[1:]))
    pairs = np.arange(n_pairs)
    counts[pairs, smaller_side] = small_counts
    counts[pairs, 1 - smaller_side] = parent_counts - small_counts
    sums[pairs, smaller_side] = small_sums
    sums[pairs, 1 - smaller_side] = parent_sums - small_sums
    return counts.reshape(2 * n_pairs, *small_counts.shape[1:]), sums.reshape(
        2 * n_pairs, *small_sums.shape[1:]
    )


def _grow_best_first(growth: _Growth, max_leaf_nodes: int) -> None:
    n_rows = growth.ctx.binned.shape[0]
    all_rows = np.arange(n_rows, dtype=np.intp)
    totals, counts, values, impurities = growth.summarise(
        all_rows, np.zeros(n_rows, dtype=np.intp), 1
    )
    root_bounds = UNBOUNDED[None, :] if growth.monotone is not None else None
    values, impurities = growth.bounded(totals, values, impurities, root_bounds)
    root = growth.record(totals, counts, values, impurities, 0)
    growth.root_weight = float(growth.table.columns["weighted_n_samples"][0][0])
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
        growth.apply_splits(np.array([node_id]), split, np.array([True]))
        right = growth.goes_right(rows, np.zeros(rows.size, dtype=np.intp), split)
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
