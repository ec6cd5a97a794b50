"""Split search for extremely randomised trees on numeric features.

Each (node, candidate feature) segment gets one threshold drawn uniformly between the smallest
and the largest value present in the node (bin representatives, in value space), so there is
no need to order the rows: per segment we only need its min and max bin and, once the
threshold is drawn, the channel sums of the rows left of it, right of it and missing. All of
that is a few ``reduceat``/``bincount`` passes over the rows, which is why extra trees are
much cheaper to grow than best-split trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import score
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.gains import weight_of

__all__ = [
    "find_random_splits",
    "random_level_splits_numpy",
    "random_splits_in_histograms",
    "random_splits_with",
]


def find_random_splits(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator,
) -> Splits:
    """Best of the random cuts of each node's candidate features (numeric features only).

    Same contract as :func:`engine.tree.split.vectorised.find_splits`.
    """
    uniforms = rng.random(features.size)
    return random_splits_with(
        ctx, rows, slot_of_row, features, parent_channels, parent_counts, uniforms
    )


def random_level_splits_numpy(
    ctx: SplitContext,
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    nodes: NDArray[np.intp],
    features: NDArray[np.int64],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    row_right: NDArray[np.bool_] | None = None,
) -> Splits:
    """The twin of :func:`engine.tree.split.compiled.compiled_random_level_splits`: the level's
    rows of ``nodes`` searched as :func:`random_splits_with` searches any rows (their carried
    channels and the feature-major ``columns`` are the kernel's shortcuts, not needed here)."""
    sizes = node_start[nodes + 1] - node_start[nodes]
    positions = np.repeat(node_start[nodes] - np.cumsum(sizes) + sizes, sizes)
    positions += np.arange(positions.size)
    slot_of_row = np.repeat(np.arange(nodes.size), sizes)
    splits = random_splits_with(
        ctx, rows[positions], slot_of_row, features, parent_channels, parent_counts, uniforms
    )
    if row_right is not None:
        found = splits.found[slot_of_row]
        k, at = slot_of_row[found], positions[found]
        codes = ctx.binned[rows[at], splits.feature[k]]
        row_right[at] = ~splits.left_codes[k, codes]
    return splits


def random_splits_with(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    uniforms: NDArray[np.float64],
) -> Splits:
    """:func:`find_random_splits` with its uniforms drawn (one per segment)."""
    n_slots, n_per_node = features.shape
    n_segments = n_slots * n_per_node
    slot_starts = np.flatnonzero(np.diff(slot_of_row, prepend=-1) != 0)
    segment_feature = features.T.ravel()  # segment j·S + slot, as in the group table
    bins = ctx.binned[rows[:, None], np.maximum(features, 0)[slot_of_row]].T
    # The missing code follows the code width: 255, or 65535 for exact binning's wide codes,
    # where 255 is an ordinary bin.
    missing_code = ctx.missing_code
    missing = (bins == missing_code) if ctx.has_missing else None

    low = np.minimum.reduceat(bins, slot_starts, axis=1).ravel().astype(np.int64)
    present_bins = bins if missing is None else np.where(missing, 0, bins)
    high = np.maximum.reduceat(present_bins, slot_starts, axis=1).ravel().astype(np.int64)
    if missing is not None:
        # A segment whose rows are all missing has no present value to cut between.
        all_missing = np.minimum.reduceat(missing, slot_starts, axis=1).ravel()
        high[all_missing] = -1
    cut = _cuts(ctx, np.maximum(segment_feature, 0), low, high, uniforms)

    segment = np.arange(n_per_node)[:, None] * n_slots + slot_of_row[None, :]
    side = (bins > cut[segment]).view(np.int8)
    if missing is not None:
        side = np.where(missing, np.int8(2), side)
    keys = (segment * 3 + side).ravel()
    sums = _side_sums(ctx, rows, keys, n_segments * 3, n_per_node)
    counts = np.bincount(keys, minlength=n_segments * 3).reshape(n_segments, 3)
    sums = sums.reshape(n_segments, 3, -1)

    return _best_cuts(
        ctx, segment_feature, low, cut, sums, counts, parent_channels, parent_counts, n_slots
    )


def _cuts(
    ctx: SplitContext,
    feature: NDArray[np.int64],
    low: NDArray[np.int64],
    high: NDArray[np.int64],
    uniforms: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Each segment's cut bin (−1: none): its uniform placed between the values of its
    lowest and highest present bins (``high`` −1: none present)."""
    has_present = high >= 0
    n_segments = feature.size
    # A segment without present rows has low = the missing code, past the end of
    # ``bin_values`` for wide codes; its draw is made (the draws stay aligned with the
    # compiled twin's) but never used, so any bin stands in for its low value.
    low_value = ctx.bin_values[feature, np.where(has_present, low, 0)]
    high_value = ctx.bin_values[feature, np.maximum(high, 0)]
    threshold_value = low_value + uniforms * (high_value - low_value)
    n_bins = (
        ctx.n_bins
        if ctx.n_bins is not None
        else np.count_nonzero(~np.isnan(ctx.bin_values), axis=1)
    )
    cut = np.full(n_segments, -1, dtype=np.int64)
    drawn = np.flatnonzero(has_present)
    drawn = drawn[np.argsort(feature[drawn], kind="stable")]
    boundaries = np.flatnonzero(np.diff(feature[drawn], prepend=-1) != 0)
    for start, stop in zip(boundaries, [*boundaries[1:], drawn.size], strict=True):
        f = int(feature[drawn[start]])
        representatives = ctx.bin_values[f][: int(n_bins[f])]
        block = drawn[start:stop]
        cut[block] = np.searchsorted(representatives, threshold_value[block], side="right") - 1
    # A cut at or beyond the largest present bin would leave the right side without any
    # present value: that happens only when low == high (a constant feature in the node).
    return np.minimum(cut, high - 1)


def _best_cuts(
    ctx: SplitContext,
    segment_feature: NDArray[np.int64],
    low: NDArray[np.int64],
    cut: NDArray[np.int64],
    sums: NDArray[np.float64],
    counts: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    n_slots: int,
) -> Splits:
    """The best of each node's cuts, from each segment's channel ``sums`` (n_segments, 3, C)
    and row ``counts`` (n_segments, 3) left of its cut, right of it and missing."""
    n_segments = segment_feature.size
    n_per_node = n_segments // n_slots
    missing_code = ctx.missing_code
    node = np.arange(n_segments) % n_slots
    has_missing = counts[:, 2] > 0
    left = np.stack([sums[:, 0], sums[:, 0] + sums[:, 2]], axis=1)
    left_counts = np.stack([counts[:, 0], counts[:, 0] + counts[:, 2]], axis=1)
    parent = parent_channels[node][:, None, :]
    right = parent - left
    right_counts = parent_counts[node][:, None] - left_counts
    gain = (
        score(left, ctx.criterion)
        + score(right, ctx.criterion)
        - score(parent_channels, ctx.criterion)[node][:, None]
    )
    left_weight = weight_of(left, ctx.criterion)
    right_weight = weight_of(right, ctx.criterion)
    valid = (
        ((cut >= low) & (segment_feature >= 0))[:, None]
        & (left_counts >= ctx.min_samples_leaf)
        & (right_counts >= ctx.min_samples_leaf)
        & (left_weight > 0)
        & (right_weight > 0)
        & (left_weight >= ctx.min_weight_leaf)
        & (right_weight >= ctx.min_weight_leaf)
    )
    valid[:, 1] &= has_missing
    gain = np.where(valid, gain, -np.inf)
    option = gain.argmax(axis=1)
    segment_gain = gain[np.arange(n_segments), option]

    by_feature = segment_gain.reshape(n_per_node, n_slots)
    best_j = by_feature.argmax(axis=0)
    slots = np.arange(n_slots)
    node_best = by_feature[best_j, slots]
    best = best_j * n_slots + slots
    found = np.isfinite(node_best)
    split_bin = np.maximum(cut[best], 0)
    heavier_left = left_weight[best, 0] >= right_weight[best, 0]
    missing_left = np.where(has_missing[best], option[best] == 1, heavier_left)
    left_codes = np.arange(ctx.n_codes)[None, :] <= split_bin[:, None]
    left_codes[:, missing_code] = missing_left
    return Splits(
        found=found,
        gain=np.where(found, np.maximum(node_best, 0.0), 0.0),
        feature=np.where(found, segment_feature[best], -1),
        bin=split_bin,
        missing_left=missing_left,
        left_codes=left_codes,
    )


def random_splits_in_histograms(
    ctx: SplitContext,
    histograms: NDArray[np.float64],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    uniforms: NDArray[np.float64],
) -> Splits:
    """:func:`random_splits_with` from each node's histograms instead of its rows.

    ``histograms`` (S, J, 256, 1 + C) hold node ``s``'s bins of its candidate
    ``features[s, j]`` (each bin's row count, then its channel sums), as rows held elsewhere
    send them (:mod:`engine.tree.grow.remote_forest`); ``uniforms`` one per segment, in the
    feature-major order ``j·S + s``. A segment's lowest and highest present bins, and the
    sums left of its cut and missing, are read from its bins: the cuts are the rows' cuts,
    and the sums the same numbers added in another order.
    """
    n_slots, n_per_node = features.shape
    n_codes, missing_code = histograms.shape[2], ctx.missing_code
    segment_feature = features.T.ravel()
    cells = histograms.transpose(1, 0, 2, 3).reshape(n_slots * n_per_node, n_codes, -1)
    bin_counts = cells[:, :, 0]
    present = bin_counts[:, :missing_code] > 0
    any_present = present.any(axis=1)
    last = missing_code - 1 - present[:, ::-1].argmax(axis=1)
    high = np.where(any_present, last, -1).astype(np.int64)
    # The rows' lowest code, the missing one when no value is present.
    low = np.where(any_present, present.argmax(axis=1), missing_code).astype(np.int64)
    cut = _cuts(ctx, np.maximum(segment_feature, 0), low, high, uniforms)

    through = np.cumsum(cells[:, :missing_code], axis=1)
    at = np.arange(cut.size)
    below = np.where((cut >= 0)[:, None], through[at, np.maximum(cut, 0)], 0.0)
    missing = cells[:, missing_code]
    sums = np.zeros((cut.size, 3, cells.shape[2] - 1))
    sums[:, 0], sums[:, 2] = below[:, 1:], missing[:, 1:]
    counts = np.zeros((cut.size, 3), dtype=np.int64)
    counts[:, 0], counts[:, 2] = below[:, 0], missing[:, 0]
    return _best_cuts(
        ctx, segment_feature, low, cut, sums, counts, parent_channels, parent_counts, n_slots
    )


def _side_sums(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    keys: NDArray[np.int64],
    n_keys: int,
    n_per_node: int,
) -> NDArray[np.float64]:
    """Channel sums per key, shape (n_keys, n_channels).

    For classification the class joins the key, so one weighted ``bincount`` yields every
    class's sum at once instead of one pass per class.
    """
    if ctx.classes is not None and ctx.weights is not None:
        n_classes = ctx.channels.shape[1]
        class_keys = keys * n_classes + np.tile(ctx.classes[rows], n_per_node)
        weights = np.tile(ctx.weights[rows], n_per_node)
        flat = np.bincount(class_keys, weights=weights, minlength=n_keys * n_classes)
        return flat.reshape(n_keys, n_classes).astype(np.float64, copy=False)
    row_channels = ctx.channels[rows]
    sums = np.empty((n_keys, row_channels.shape[1]))
    for c in range(row_channels.shape[1]):
        weights = np.tile(row_channels[:, c], n_per_node)
        sums[:, c] = np.bincount(keys, weights=weights, minlength=n_keys)
    return sums
