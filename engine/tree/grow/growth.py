"""The state of one tree while it grows: its rows, node statistics, histograms and splits.

:class:`Growth` does the work of a step — summarise a batch of nodes, search their splits
(from rows, or from dense per-node histograms), record nodes and apply splits — and
:mod:`engine.tree.grow.grower` decides the order of the steps (level by level, or best-first).
It is composed of two parts with modules of their own: the candidate features each node
searches (:class:`~engine.tree.grow.features.FeatureSampler`) and the records of its nodes and
splits, flattened into a :class:`Tree` at the end
(:class:`~engine.tree.grow.records.NodeRecorder`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import HISTOGRAM_CODES
from engine.tree._criteria import (
    CLASSIFICATION_CRITERIA,
    Newton,
    impurity,
    node_weight,
    score,
)
from engine.tree._histograms import build_histograms
from engine.tree._memo import feature_major
from engine.tree._monotone import MonotoneBounds
from engine.tree.grow.features import FeatureSampler
from engine.tree.grow.level_kernels import node_totals, squared_deviations
from engine.tree.grow.limits import GrowthLimits
from engine.tree.grow.records import NodeRecorder
from engine.tree.split import best_splits, best_splits_in_histograms
from engine.tree.split.context import SplitContext, Splits

__all__ = ["Growth", "select_slots", "split_maps"]

# Nodes whose impurity is below this are pure; splitting them only chases rounding noise.
IMPURITY_EPSILON = 1e-12
# Per-node histograms are kept while their cells number at most this many per row of the
# level (and at most the absolute cap, which bounds memory).
HISTOGRAM_CELLS_PER_ROW = 16
HISTOGRAM_MAX_CELLS = 8_000_000
# ... and while a level splits at most this many nodes: past it, deep trees' many small
# nodes are cheaper to search from their rows.
HISTOGRAM_MAX_SPLITS = 128


class Growth:
    """State of one tree being grown: rows, node statistics, feature draws and records."""

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
        self.limits = limits
        self.rng = rng
        self.features = FeatureSampler(
            limits, rng, feature_subset, ctx.binned.shape[1], ctx.random_splits
        )
        self.records = NodeRecorder(ctx, thresholds)
        self.monotone = (
            MonotoneBounds(ctx.criterion, ctx.monotone)
            if ctx.monotone is not None and isinstance(ctx.criterion, Newton)
            else None
        )

    # -- node statistics --------------------------------------------------------------

    def summarise(
        self,
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        n_slots: int,
        known: tuple[NDArray[np.float64], NDArray[np.int64]] | None = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """Channel totals, row counts, values and impurities of a batch of nodes; ``known``
        totals and counts (summed by the partition that made the nodes) are not summed
        again."""
        if known is None:
            totals, counts = node_totals(rows, slot_of_row, n_slots, self.ctx.channels)
        else:
            totals, counts = known
        values, impurities = self.statistics(totals, rows, slot_of_row)
        return totals, counts, values, impurities

    def statistics(
        self,
        totals: NDArray[np.float64],
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        squared: NDArray[np.float64] | None = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Values and impurities of a batch of nodes from their channel totals (regression
        reads the rows again for exact variances, unless their ``squared`` deviations are
        given)."""
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
            if squared is None:
                squared = squared_deviations(
                    rows, slot_of_row, self.targets, self.ctx.channels[:, 0], mean
                )
            values = mean[:, None]
            impurities = squared / weight
        return values, impurities

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
        return self.records.add(
            values,
            impurity=impurities,
            n_samples=counts,
            weighted_n_samples=weight,
            depth=np.broadcast_to(depth, counts.shape),
        )

    def record_level(
        self,
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        values: NDArray[np.float64],
        impurities: NDArray[np.float64],
        depth: int,
        rows: NDArray[np.intp],
        slot_of_row: NDArray[np.intp],
        leaves: NDArray[np.intp] | None,
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """Record a level's nodes; return their ids and the slots still open to splitting.

        ``leaves`` (when given) takes each row's node: the deepest node a row reaches is its
        leaf.
        """
        node_ids = self.record(totals, counts, values, impurities, depth)
        if leaves is not None:
            leaves[rows] = node_ids[slot_of_row]
        return node_ids, np.flatnonzero(self.splittable(totals, counts, impurities, depth))

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

    def uses_histograms(self) -> bool:
        """Whether this tree can keep per-node histograms and derive siblings by subtraction.

        That needs every node of a level to search all the level's features (no per-split
        sampling) and the best-split search (random thresholds need no histogram). The
        histograms cover all the tree's features; a level searches the columns of its own.
        """
        # Exact binning's 65,536 codes per feature would make dense histograms huge.
        narrow = self.ctx.n_codes <= HISTOGRAM_CODES
        return narrow and self.features.searches_every_feature() and not self.ctx.random_splits

    @cached_property
    def columns(self) -> NDArray[np.unsignedinteger[Any]]:
        """The tree's bin codes feature-major, as the compiled kernels read them."""
        return feature_major(self.ctx.binned)

    def histograms(
        self, rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], n_slots: int
    ) -> NDArray[np.float64]:
        """Dense histograms of a batch, (S, F, 256, 1 + C): each bin's row count, then its
        channel sums."""
        ctx = self.ctx
        if ctx.remote_histograms is not None:
            return ctx.remote_histograms(rows, slot_of_row, n_slots, self.features.candidates)
        if ctx.classes is not None and ctx.weights is not None:
            return build_histograms(
                self.columns,
                rows,
                slot_of_row,
                n_slots,
                self.features.candidates,
                ctx.weights.reshape(-1, 1),
                ctx.channels.shape[1],
                classes=ctx.classes,
                threads=ctx.threads,
            )
        return build_histograms(
            self.columns,
            rows,
            slot_of_row,
            n_slots,
            self.features.candidates,
            ctx.channels,
            ctx.channels.shape[1],
            threads=ctx.threads,
        )

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
        features of its depth level (:meth:`FeatureSampler.draw_rounds`)."""
        n_slots = totals.shape[0]

        def search_round(pending: NDArray[np.intp], features: NDArray[np.int64]) -> Splits:
            if pending.size == n_slots:
                batch_rows, batch_slots = rows, slot_of_row
            else:
                batch_rows, batch_slots = select_slots(rows, slot_of_row, pending, n_slots)
            return best_splits(
                self.ctx,
                batch_rows,
                batch_slots,
                features,
                totals[pending],
                counts[pending],
                self.rng,
                None if bounds is None else bounds[pending],
            )

        return self.features.draw_rounds(n_slots, depth, search_round)

    def search_histograms(
        self,
        histograms: NDArray[np.float64],
        slots: NDArray[np.intp],
        totals: NDArray[np.float64],
        counts: NDArray[np.int64],
        depth: int,
        bounds: NDArray[np.float64] | None = None,
    ) -> Splits:
        """Best splits of a level's ``slots`` from their dense histograms (one per slot of
        the level, over all candidate features), each on the features of its depth level."""
        candidates = self.features.candidates
        pool = self.features.level_pool(depth)
        columns = (
            np.arange(pool.size)
            if pool.size == candidates.size
            else np.flatnonzero(np.isin(candidates, pool))
        )
        features = np.broadcast_to(candidates[columns], (slots.size, pool.size))
        return best_splits_in_histograms(
            self.ctx,
            histograms,
            np.ascontiguousarray(features),
            totals,
            counts,
            bounds,
            nodes=slots,
            columns=columns,
        )

    def accepted(self, splits: Splits) -> NDArray[np.bool_]:
        """Found splits that pass the gain threshold of the criterion.

        Impurity criteria use scikit-learn's ``min_impurity_decrease`` (a decrease relative
        to the root's weight); Newton splits must gain more than γ (``min_split_gain``).
        """
        if isinstance(self.ctx.criterion, Newton):
            return splits.found & (splits.gain > self.limits.min_split_gain + IMPURITY_EPSILON)
        return splits.found & (
            splits.gain / self.records.root_weight + IMPURITY_EPSILON
            >= self.limits.min_impurity_decrease
        )


def split_maps(
    n_slots: int, slots: NDArray[np.intp], chosen: NDArray[np.bool_]
) -> tuple[NDArray[np.intp], NDArray[np.intp], int]:
    """What the partition kernels take about a level's splits: for each slot, the row of the
    searched ``slots``' splits holding its split, its rank among the ``chosen`` ones (−1:
    not split, its rows leave the level), and how many were chosen."""
    n_chosen = int(chosen.sum())
    split_of_slot = np.zeros(n_slots, dtype=np.intp)
    split_of_slot[slots] = np.arange(slots.size)
    rank_of_slot = np.full(n_slots, -1, dtype=np.intp)
    rank_of_slot[slots[chosen]] = np.arange(n_chosen)
    return split_of_slot, rank_of_slot, n_chosen


def select_slots(
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
