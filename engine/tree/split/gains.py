"""Gains of the split candidates on a group table (:func:`engine.tree.split.vectorised.splits_from_groups`).

Each candidate is a prefix of its segment's groups; these helpers score the prefixes against
their nodes, with missing values tried on both sides and the leaf limits and monotone
constraints enforced when they apply, and place numeric cuts midway across empty bins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import Criterion, Newton, node_weight, score
from engine.tree._monotone import children_scores

if TYPE_CHECKING:
    from engine.tree.split.context import SplitContext

__all__ = ["running_sums", "weight_of"]


def _mid_gap(
    split_bin: NDArray[np.int64],
    best: NDArray[np.int64],
    segment: NDArray[np.int64],
    bins: NDArray[np.int64],
    is_missing: NDArray[np.bool_],
) -> NDArray[np.int64]:
    """Put numeric cuts midway across the empty bins between two present ones.

    Every cut in the gap partitions the node's rows identically, so the gain is the same;
    the middle generalises best, as scikit-learn's midpoint thresholds do. Categorical
    groups are in statistic order, where a gap in codes means nothing: their codes go
    straight into the left-code table, so the adjusted bin is simply not used for them.
    """
    following = np.minimum(best + 1, bins.size - 1)
    has_next = (
        (best + 1 < bins.size) & (segment[following] == segment[best]) & ~is_missing[following]
    )
    middle = (split_bin + bins[following] - 1) // 2
    return np.where(has_next, np.maximum(middle, split_bin), split_bin)


def running_sums(
    values: NDArray[np.float64], segment: NDArray[np.int64], segment_first: NDArray[np.intp]
) -> NDArray[np.float64]:
    """Inclusive running sums of ``values`` (groups × channels) within each segment.

    Added one group at a time from the segment's first, the order in which the compiled scan
    (:mod:`engine.tree.split.scan_kernels`) accumulates its left-hand sums, so both see the same
    prefixes to the last bit. A global cumulative sum less each segment's offset is the same
    sum rounded differently: candidates of mathematically equal gain (common in multiclass
    boosting, whose gradients take few distinct values) then compared unequal by an ulp and
    the twin and the kernel chose different splits. One vectorised step per position within
    a segment: at most one per bin code.
    """
    position = np.arange(segment.size) - segment_first[segment]
    out = values.copy()
    by_position = np.argsort(position, kind="stable")
    ends = np.cumsum(np.bincount(position))
    for p in range(1, ends.size):
        groups = by_position[ends[p - 1] : ends[p]]
        out[groups] += out[groups - 1]
    return out


def _segment_prefix(
    values: NDArray[np.int64], segment: NDArray[np.int64], segment_first: NDArray[np.intp]
) -> NDArray[np.int64]:
    """Inclusive running sum of ``values`` within each segment."""
    cumulative = np.cumsum(values)
    return cumulative - (cumulative[segment_first] - values[segment_first])[segment]


def _plain_gains(
    ctx: SplitContext,
    left: NDArray[np.float64],
    parent_channels: NDArray[np.float64],
    parent_score: NDArray[np.float64],
    candidate_node: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Gains when no missing values are present and no leaf-size limit applies."""
    right = parent_channels[candidate_node] - left
    gain = score(left, ctx.criterion) + score(right, ctx.criterion) - parent_score[candidate_node]
    valid = (weight_of(left, ctx.criterion) > 0) & (weight_of(right, ctx.criterion) > 0)
    return np.where(valid, gain, -np.inf), np.zeros(gain.size, dtype=np.int64)


def _checked_gains(
    ctx: SplitContext,
    index: NDArray[np.intp],
    node: NDArray[np.int64],
    segment: NDArray[np.int64],
    prefix: NDArray[np.float64],
    prefix_counts: NDArray[np.int64],
    missing_sums: NDArray[np.float64],
    missing_counts: NDArray[np.int64],
    has_missing: NDArray[np.bool_],
    parent_channels: NDArray[np.float64],
    parent_score: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    monotone: tuple[NDArray[np.float64], NDArray[np.int8]] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Gains with missing values tried on both sides and leaf limits enforced.

    ``monotone`` holds the nodes' weight bounds (S, 2) and each candidate's constraint: the
    children are then scored at their clipped weights and must respect the constraint.
    Returns the better gain of each candidate and its option: 0 sends missing rows right,
    1 sends them left.
    """
    candidate_node = node[index]
    left = prefix[index][:, None, :]
    left_counts = prefix_counts[index][:, None]
    any_missing = bool(has_missing.any())
    if any_missing:
        left = np.concatenate([left, left + missing_sums[segment[index]][:, None, :]], axis=1)
        left_counts = np.concatenate(
            [left_counts, left_counts + missing_counts[segment[index]][:, None]], axis=1
        )
    right = parent_channels[candidate_node][:, None, :] - left
    right_counts = parent_counts[candidate_node][:, None] - left_counts
    respects: NDArray[np.bool_] | bool = True
    if monotone is None:
        gain = (
            score(left, ctx.criterion)
            + score(right, ctx.criterion)
            - parent_score[candidate_node][:, None]
        )
    else:
        assert isinstance(ctx.criterion, Newton)
        bounds, constraint = monotone
        children, respects = children_scores(
            ctx.criterion, left, right, bounds[candidate_node][:, None, :], constraint[:, None]
        )
        gain = children - parent_score[candidate_node][:, None]
    left_weight = weight_of(left, ctx.criterion)
    right_weight = weight_of(right, ctx.criterion)
    valid = (
        (left_counts >= ctx.min_samples_leaf)
        & (right_counts >= ctx.min_samples_leaf)
        & (left_weight > 0)
        & (right_weight > 0)
        & (left_weight >= ctx.min_weight_leaf)
        & (right_weight >= ctx.min_weight_leaf)
        & respects
    )
    if any_missing:
        valid[:, 1] &= has_missing[index]  # without missing rows both options coincide
    gain = np.where(valid, gain, -np.inf)
    option = gain.argmax(axis=1)
    return gain[np.arange(index.size), option], option


def weight_of(channels: NDArray[np.float64], criterion: Criterion) -> NDArray[np.float64]:
    return node_weight(channels, criterion)
