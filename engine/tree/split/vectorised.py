"""Vectorised split search for a batch of nodes.

All nodes of one tree level are searched at once. For every (node, candidate feature) pair —
a *segment* — the rows' bins are aggregated into a *group table*: one entry per distinct bin
present in the segment, with its channel sums. Sorting the keys ``(segment, bin)`` yields the
table in O(rows × features) work however small the nodes are, which is what deep forest
trees need; a dense 256-bin histogram per node would cost more than the rows themselves.

On the group table every split candidate is a prefix of a segment's groups:

* numeric features: groups in bin order, split "bin ≤ b";
* categorical features: groups ordered by their target statistic (the proportion of the
  positive class, the class mean, or the mean target), which finds the best binary partition
  of the categories without enumerating the ``2^(k−1) − 1`` of them (Breiman et al., exact
  for two classes and for regression, a heuristic beyond);
* missing values (the last code: 255, or 65535 for exact binning's ``uint16`` codes) are
  tried on both sides and the better side is learned.

:func:`find_splits_naive` (in :mod:`engine.tree.split.naive`) is the plain-loop reference
the tests hold this module equal to; the candidates' gains are computed in
:mod:`engine.tree.split.gains`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import Newton, score
from engine.tree._monotone import bounded_weight, score_given_weight
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.gains import (
    _checked_gains,
    _mid_gap,
    _plain_gains,
    _segment_prefix,
    running_sums,
    weight_of,
)
from engine.tree.split.naive import find_splits_naive as find_splits_naive
from engine.tree.split.random_vectorised import find_random_splits

__all__ = ["SplitContext", "Splits", "find_splits", "find_splits_naive"]

# The dense path counts every (segment, bin) cell with ``bincount``; it wins while the cells
# are few compared with the rows, i.e. for the large nodes near the root.
DENSE_CELLS_PER_ROW = 16
# ... up to this many cells (memory: one float64 array of this size per channel).
DENSE_MAX_CELLS = 8_000_000


def _group_table(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Distinct (segment, bin) groups sorted by segment then bin, with counts and sums.

    Segments are numbered feature-major, ``segment = j · S + slot``, so keys arrive already
    grouped by segment and the sort only has to order bins within each segment.
    """
    n_slots, n_per_node = features.shape
    n_rows = rows.size
    row_features = np.maximum(features, 0)[slot_of_row]
    bins = ctx.binned[rows[:, None], row_features].T
    segment = np.arange(n_per_node)[:, None] * n_slots + slot_of_row[None, :]
    keys = ((segment << ctx.code_bits) | bins).ravel()
    row_channels = ctx.channels[rows]
    n_cells = n_slots * n_per_node * ctx.n_codes
    if n_cells <= min(DENSE_CELLS_PER_ROW * keys.size, DENSE_MAX_CELLS):
        cell_counts = np.bincount(keys, minlength=n_cells)
        group_keys = np.flatnonzero(cell_counts)
        counts = cell_counts[group_keys]
        sums = np.empty((group_keys.size, row_channels.shape[1]))
        for c in range(row_channels.shape[1]):
            weights = np.tile(row_channels[:, c], n_per_node)
            sums[:, c] = np.bincount(keys, weights=weights, minlength=n_cells)[group_keys]
    else:
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        is_start = np.empty(sorted_keys.size, dtype=bool)
        is_start[0] = True
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=is_start[1:])
        starts = np.flatnonzero(is_start)
        group_keys = sorted_keys[starts]
        counts = np.diff(np.append(starts, sorted_keys.size))
        # bincount adds each group's rows in input order (the sort is stable), exactly as
        # the dense path does, so both paths give bit-identical sums.
        group_of_element = np.cumsum(is_start) - 1
        element_channels = row_channels[order % n_rows]
        sums = np.empty((starts.size, row_channels.shape[1]))
        for c in range(row_channels.shape[1]):
            sums[:, c] = np.bincount(
                group_of_element, weights=element_channels[:, c], minlength=starts.size
            )
    return group_keys >> ctx.code_bits, group_keys & ctx.missing_code, counts, sums


def _categorical_order(
    ctx: SplitContext,
    segment: NDArray[np.int64],
    bins: NDArray[np.int64],
    sums: NDArray[np.float64],
    segment_feature: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
) -> NDArray[np.intp] | None:
    """Permutation putting each categorical segment's groups in target-statistic order."""
    if not ctx.is_categorical.any():
        return None
    group_feature = segment_feature[segment]
    is_categorical = ctx.is_categorical[np.maximum(group_feature, 0)] & (group_feature >= 0)
    if not is_categorical.any():
        return None
    n_slots = parent_channels.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        if isinstance(ctx.criterion, Newton):
            statistic = -sums[:, 0] / (sums[:, 1] + ctx.criterion.l2)  # the leaf weight
        elif ctx.criterion == "squared_error":
            statistic = sums[:, 1] / sums[:, 0]
        else:
            # Two classes: the positive-class share orders categories optimally. More
            # classes: order by the share of the node's majority class (a heuristic).
            target_class = (
                np.ones(n_slots, dtype=np.int64)
                if sums.shape[1] == 2
                else parent_channels.argmax(axis=1)
            )
            node = segment % n_slots
            statistic = sums[np.arange(sums.shape[0]), target_class[node]] / sums.sum(axis=1)
    sort_value = np.where(is_categorical, np.nan_to_num(statistic), bins.astype(np.float64))
    sort_value[bins == ctx.missing_code] = np.inf
    return np.lexsort((sort_value, segment))


def find_splits(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator | None = None,
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    """Best split of each node of a batch.

    Parameters
    ----------
    rows : ndarray of intp, shape (R,)
        Rows of all nodes in the batch, grouped by node (sorted by ``slot_of_row``).
    slot_of_row : ndarray of intp, shape (R,)
        Node slot ``0..S-1`` of each row.
    features : ndarray of int64, shape (S, F)
        Candidate features per node; ``-1`` pads nodes with fewer candidates.
    parent_channels : ndarray of float64, shape (S, n_channels)
        Channel totals of each node (all its rows, missing included).
    parent_counts : ndarray of int64, shape (S,)
        Row counts of each node.
    rng : Generator, optional
        Needed for random thresholds (``ctx.random_splits``).
    bounds : ndarray of float64, shape (S, 2), optional
        Each node's ``[lower, upper]`` leaf-weight bounds; used when ``ctx.monotone`` is set.
    """
    if ctx.random_splits and rng is not None and not ctx.is_categorical.any():
        return find_random_splits(
            ctx, rows, slot_of_row, features, parent_channels, parent_counts, rng
        )
    groups = _group_table(ctx, rows, slot_of_row, features)
    return splits_from_groups(ctx, *groups, features, parent_channels, parent_counts, rng, bounds)


def find_splits_in_histograms(
    ctx: SplitContext,
    histogram_counts: NDArray[np.int64],
    histogram_sums: NDArray[np.float64],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator | None = None,
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    """Best split of each node from dense per-node histograms instead of rows.

    Parameters
    ----------
    histogram_counts : ndarray of int64, shape (S, F, 256)
        Rows per (node, candidate feature, bin).
    histogram_sums : ndarray of float64, shape (S, F, 256, n_channels)
        Channel sums per (node, candidate feature, bin).
    """
    # Feature-major segments (j·S + slot), as the group table orders them.
    cell_counts = histogram_counts.transpose(1, 0, 2).reshape(-1)
    group_keys = np.flatnonzero(cell_counts)
    n_channels = histogram_sums.shape[-1]
    sums = histogram_sums.transpose(1, 0, 2, 3).reshape(-1, n_channels)[group_keys]
    return splits_from_groups(
        ctx,
        group_keys >> ctx.code_bits,
        group_keys & ctx.missing_code,
        cell_counts[group_keys],
        sums,
        features,
        parent_channels,
        parent_counts,
        rng,
        bounds,
    )


def splits_from_groups(
    ctx: SplitContext,
    segment: NDArray[np.int64],
    bins: NDArray[np.int64],
    counts: NDArray[np.int64],
    sums: NDArray[np.float64],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator | None = None,
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    """Best split of each node from its group table (see :func:`find_splits`)."""
    n_slots, n_per_node = features.shape
    segment_feature = features.T.ravel()  # feature of segment j·S + slot
    permutation = _categorical_order(ctx, segment, bins, sums, segment_feature, parent_channels)
    if permutation is not None:
        segment, bins, counts, sums = (
            segment[permutation],
            bins[permutation],
            counts[permutation],
            sums[permutation],
        )
    n_groups = segment.size
    n_segments = n_slots * n_per_node
    node = segment % n_slots
    is_missing = bins == ctx.missing_code
    any_missing = bool(is_missing.any())

    # Every node has at least one row, so every segment owns at least one group.
    segment_first = np.flatnonzero(np.diff(segment, prepend=-1) != 0)
    missing_sums = np.zeros((n_segments, sums.shape[1]))
    missing_counts = np.zeros(n_segments, dtype=np.int64)
    if any_missing:
        missing_sums[segment[is_missing]] = sums[is_missing]
        missing_counts[segment[is_missing]] = counts[is_missing]

    prefix = running_sums(sums, segment, segment_first)

    next_segment = np.append(segment[1:], -1)
    next_missing = np.append(is_missing[1:], False)
    is_last_present = ~is_missing & ((next_segment != segment) | next_missing)
    has_missing = missing_counts[segment] > 0
    candidate = ~is_missing & (~is_last_present | has_missing)
    candidate &= segment_feature[segment] >= 0
    if ctx.random_splits:
        candidate &= _random_threshold_mask(
            ctx, segment, bins, is_missing, segment_feature, segment_first, rng
        )

    index = np.flatnonzero(candidate)
    monotone = None
    if ctx.monotone is not None and bounds is not None:
        assert isinstance(ctx.criterion, Newton)
        parent_score = score_given_weight(
            ctx.criterion, parent_channels, bounded_weight(ctx.criterion, parent_channels, bounds)
        )
        monotone = (bounds, ctx.monotone[segment_feature[segment[index]]])
    else:
        parent_score = score(parent_channels, ctx.criterion)
    if (
        monotone is None
        and not any_missing
        and ctx.min_samples_leaf <= 1
        and ctx.min_weight_leaf <= 0
    ):
        # Every candidate leaves rows on both sides, so only the weights need checking.
        gain, option = _plain_gains(ctx, prefix[index], parent_channels, parent_score, node[index])
    else:
        gain, option = _checked_gains(
            ctx,
            index,
            node,
            segment,
            prefix,
            _segment_prefix(counts, segment, segment_first),
            missing_sums,
            missing_counts,
            has_missing,
            parent_channels,
            parent_score,
            parent_counts,
            monotone,
        )
    group_gain = np.full(n_groups, -np.inf)
    group_gain[index] = gain
    group_option = np.zeros(n_groups, dtype=np.int64)
    group_option[index] = option

    # Best group per segment, then best segment (candidate feature) per node.
    segment_best = np.maximum.reduceat(group_gain, segment_first)
    is_best = (group_gain == segment_best[segment]) & np.isfinite(group_gain)
    segment_best_group = np.minimum.reduceat(
        np.where(is_best, np.arange(n_groups), n_groups - 1), segment_first
    )
    by_feature = segment_best.reshape(n_per_node, n_slots)
    best_j = by_feature.argmax(axis=0)
    slots = np.arange(n_slots)
    node_best = by_feature[best_j, slots]
    best = segment_best_group.reshape(n_per_node, n_slots)[best_j, slots]
    found = np.isfinite(node_best)

    best_segment = best_j * n_slots + slots
    feature = segment_feature[best_segment]
    split_bin = bins[best]
    if not ctx.random_splits:
        split_bin = _mid_gap(split_bin, best, segment, bins, is_missing)
    missing_left = group_option[best] == 1
    # No missing rows seen here: at predict time they follow the heavier child.
    left_weight_best = weight_of(prefix[best], ctx.criterion)
    heavier_left = left_weight_best >= weight_of(parent_channels, ctx.criterion) - left_weight_best
    missing_left = np.where(has_missing[best], missing_left, heavier_left)

    left_codes = np.arange(ctx.n_codes)[None, :] <= split_bin[:, None]
    categorical = ctx.is_categorical[np.maximum(feature, 0)] & found
    if categorical.any():
        left_codes[categorical] = missing_left[categorical, None]
        in_best_segment = (segment == best_segment[node]) & categorical[node] & ~is_missing
        goes_left = np.arange(n_groups) <= best[node]
        left_codes[node[in_best_segment], bins[in_best_segment]] = goes_left[in_best_segment]
    left_codes[:, ctx.missing_code] = missing_left

    return Splits(
        found=found,
        gain=np.where(found, np.maximum(node_best, 0.0), 0.0),
        feature=np.where(found, feature, -1),
        bin=split_bin,
        missing_left=missing_left,
        left_codes=left_codes,
    )


def _random_threshold_mask(
    ctx: SplitContext,
    segment: NDArray[np.int64],
    bins: NDArray[np.int64],
    is_missing: NDArray[np.bool_],
    segment_feature: NDArray[np.int64],
    segment_first: NDArray[np.intp],
    rng: np.random.Generator | None,
) -> NDArray[np.bool_]:
    """Keep one candidate per segment: the cut at a threshold drawn uniformly at random.

    Numeric features draw the threshold uniformly between the smallest and largest value
    present in the node (bin representatives, in value space), as extremely randomised
    trees prescribe; categorical features draw a uniform cut of their ordered categories.
    """
    if rng is None:
        raise ValueError("random splits need a random generator")
    feature = np.maximum(segment_feature[segment], 0)
    position = np.arange(segment.size) - segment_first[segment]
    value = np.where(
        ctx.is_categorical[feature], position.astype(np.float64), ctx.bin_values[feature, bins]
    )
    value[is_missing] = np.inf
    n_segments = segment_feature.size
    low = np.full(n_segments, np.inf)
    high = np.full(n_segments, -np.inf)
    present = ~is_missing
    np.minimum.at(low, segment[present], value[present])
    np.maximum.at(high, segment[present], value[present])
    span = np.where(high > low, high - low, 0.0)
    threshold = low + rng.random(n_segments) * span
    next_value = np.append(value[1:], np.inf)
    next_value[np.append(segment[1:] != segment[:-1], True)] = np.inf
    return (value <= threshold[segment]) & (next_value > threshold[segment])
