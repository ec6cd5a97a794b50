"""The split searches run by the compiled kernels: adapters from a :class:`SplitContext` to
the plain arrays the kernels take, and from the kernels' outputs to :class:`Splits`.

Same contracts as their NumPy twins (:mod:`engine.tree.split.vectorised`,
:mod:`engine.tree.split.random_vectorised`); :mod:`engine.tree.split` selects one of each pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._criterion_kernels import criterion_code
from engine.tree._memo import feature_major
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.random_kernels import search_random_level, search_random_rows
from engine.tree.split.search_kernels import search_histograms, search_rows

__all__ = [
    "compiled_find_random_splits",
    "compiled_find_splits",
    "compiled_find_splits_in_histograms",
    "compiled_random_level_splits",
]

_NO_CLASSES = np.zeros(0, dtype=np.int64)
_NO_WEIGHTS = np.zeros(0)
_NO_MONOTONE = np.zeros(0, dtype=np.int8)
_NO_SIDES = np.zeros(0, dtype=np.bool_)


def _settings(ctx: SplitContext) -> NDArray[np.float64]:
    code, l1, l2, max_delta_step = criterion_code(ctx.criterion)
    return np.array(
        [code, l1, l2, max_delta_step, ctx.min_samples_leaf, ctx.min_weight_leaf], dtype=np.float64
    )


def _monotone_args(
    ctx: SplitContext, bounds: NDArray[np.float64] | None, n_slots: int
) -> tuple[NDArray[np.int8], NDArray[np.float64]]:
    if ctx.monotone is None or bounds is None:
        return _NO_MONOTONE, np.zeros((n_slots, 2))
    return np.ascontiguousarray(ctx.monotone, dtype=np.int8), np.ascontiguousarray(bounds)


def _empty_splits(n_slots: int, n_codes: int) -> Splits:
    return Splits(
        found=np.zeros(n_slots, dtype=bool),
        gain=np.zeros(n_slots),
        feature=np.zeros(n_slots, dtype=np.int64),
        bin=np.zeros(n_slots, dtype=np.int64),
        missing_left=np.zeros(n_slots, dtype=bool),
        left_codes=np.zeros((n_slots, n_codes), dtype=bool),
    )


def _outputs(splits: Splits) -> tuple[NDArray[Any], ...]:
    """The arrays a search kernel writes each node's best split into, in its argument order."""
    return (
        splits.found,
        splits.gain,
        splits.feature,
        splits.bin,
        splits.missing_left,
        splits.left_codes,
    )


def _grouped_rows(
    rows: NDArray[np.intp], slot_of_row: NDArray[np.intp], n_slots: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The rows grouped by node (as the grower keeps them), and where each node's start."""
    if slot_of_row.size > 1 and bool((slot_of_row[1:] < slot_of_row[:-1]).any()):
        order = np.argsort(slot_of_row, kind="stable")
        rows, slot_of_row = rows[order], slot_of_row[order]
    node_start = np.zeros(n_slots + 1, dtype=np.intp)
    np.cumsum(np.bincount(slot_of_row, minlength=n_slots), out=node_start[1:])
    return rows.astype(np.intp, copy=False), node_start


def compiled_find_splits(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    """Best split of each node of a batch, from its rows (best-split search only)."""
    n_slots = features.shape[0]
    rows, node_start = _grouped_rows(rows, slot_of_row, n_slots)
    by_class = ctx.classes is not None and ctx.weights is not None
    monotone, node_bounds = _monotone_args(ctx, bounds, n_slots)
    splits = _empty_splits(n_slots, ctx.n_codes)
    search_rows(
        # Feature-major: reading row-major, several features a row from one cache line,
        # measured no faster for forests and 30% slower for extra trees.
        feature_major(ctx.binned),
        rows,
        node_start,
        np.ascontiguousarray(features, dtype=np.int64),
        ctx.channels,
        ctx.classes if by_class else _NO_CLASSES,  # type: ignore[arg-type]
        ctx.weights if by_class else _NO_WEIGHTS,  # type: ignore[arg-type]
        np.ascontiguousarray(parent_channels, dtype=np.float64),
        parent_counts.astype(np.float64),
        _settings(ctx),
        ctx.is_categorical,
        monotone,
        node_bounds,
        ctx.missing_code,
        *_outputs(splits),
    )
    return splits


def compiled_find_random_splits(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator,
) -> Splits:
    """Best random cut of each node (extremely randomised trees, numeric features).

    Draws one uniform per (node, candidate) from ``rng`` exactly as the NumPy twin does.
    """
    n_slots, n_per_node = features.shape
    rows, node_start = _grouped_rows(rows, slot_of_row, n_slots)
    uniforms = rng.random(n_slots * n_per_node)
    by_class = ctx.classes is not None and ctx.weights is not None
    n_bins = _n_bins(ctx)
    splits = _empty_splits(n_slots, ctx.n_codes)
    search_random_rows(
        # Feature-major: reading row-major, several features a row from one cache line,
        # measured no faster for forests and 30% slower for extra trees.
        feature_major(ctx.binned),
        rows,
        node_start,
        np.ascontiguousarray(features, dtype=np.int64),
        ctx.weights.reshape(-1, 1) if by_class else ctx.channels,  # type: ignore[union-attr]
        ctx.classes if by_class else _NO_CLASSES,  # type: ignore[arg-type]
        np.ascontiguousarray(parent_channels, dtype=np.float64),
        parent_counts.astype(np.float64),
        _settings(ctx),
        ctx.bin_values,
        n_bins.astype(np.int32, copy=False),
        uniforms,
        ctx.missing_code,
        *_outputs(splits),
    )
    return splits


def compiled_find_splits_in_histograms(
    ctx: SplitContext,
    histograms: NDArray[np.float64],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    bounds: NDArray[np.float64] | None = None,
    nodes: NDArray[np.intp] | None = None,
    columns: NDArray[np.intp] | None = None,
) -> Splits:
    """Best split of each node from dense per-node histograms (H, F', 256, 1 + C).

    Node ``s`` reads ``histograms[nodes[s]]`` (default: the s-th), its candidates the
    histogram columns ``columns`` (default: the first ``features.shape[1]``).
    """
    n_slots, n_per_node = features.shape
    monotone, node_bounds = _monotone_args(ctx, bounds, n_slots)
    splits = _empty_splits(n_slots, ctx.n_codes)
    search_histograms(
        np.ascontiguousarray(histograms, dtype=np.float64),
        np.arange(n_slots) if nodes is None else nodes.astype(np.intp, copy=False),
        np.arange(n_per_node) if columns is None else columns.astype(np.intp, copy=False),
        np.ascontiguousarray(features, dtype=np.int64),
        np.ascontiguousarray(parent_channels, dtype=np.float64),
        parent_counts.astype(np.float64),
        _settings(ctx),
        ctx.is_categorical,
        monotone,
        node_bounds,
        ctx.missing_code,
        *_outputs(splits),
    )
    return splits


def compiled_random_level_splits(
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
    """Best random cut of a level's slots ``nodes``, their rows carried with their channels
    (see :func:`engine.tree.split.random_level_splits`)."""
    splits = _empty_splits(nodes.size, ctx.n_codes)
    outputs: list[NDArray[Any]] = [*_outputs(splits), _NO_SIDES if row_right is None else row_right]
    search_random_level(
        columns,
        np.ascontiguousarray(ctx.binned),
        rows,
        node_start,
        nodes.astype(np.intp, copy=False),
        np.ascontiguousarray(features, dtype=np.int64),
        level_channels,
        level_classes,
        np.ascontiguousarray(parent_channels, dtype=np.float64),
        parent_counts.astype(np.float64),
        _settings(ctx),
        ctx.bin_values,
        _n_bins(ctx).astype(np.int32, copy=False),
        uniforms,
        ctx.missing_code,
        *outputs,
    )
    return splits


def _n_bins(ctx: SplitContext) -> NDArray[np.int32]:
    """Non-missing bins per feature (counted from the bin values when not given)."""
    if ctx.n_bins is not None:
        return ctx.n_bins
    return np.count_nonzero(~np.isnan(ctx.bin_values), axis=1).astype(np.int32)
