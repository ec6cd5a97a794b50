"""Split search: the best split of each node of a batch, from its rows or its histograms.

The one door to the stage. Each entry point runs a compiled kernel or its NumPy twin, chosen
once by :func:`engine._kernels.select` (``COPPICE_ENGINE_KERNELS``); the tests hold each pair
equal to the bit, and both to the plain-loop reference :mod:`~engine.tree.split.naive`.

* best splits from rows: :mod:`~engine.tree.split.search_kernels` (touched-bin tables) beside
  the group-table twin :mod:`~engine.tree.split.vectorised`;
* best splits from dense per-node histograms: the same two modules;
* random cuts (extremely randomised trees, numeric features):
  :mod:`~engine.tree.split.random_kernels` beside :mod:`~engine.tree.split.random_vectorised`,
  for any batch of rows or for a level whose rows carry their channels;
* the scan of one (node, feature) histogram both kernels share:
  :mod:`~engine.tree.split.scan_kernels`; candidates' gains in the twin:
  :mod:`~engine.tree.split.gains`;
* what a search is given and returns: :mod:`~engine.tree.split.context`.

Random cuts of categorical features have no kernel: the group-table search draws them on
either choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import select
from engine.tree.split.compiled import (
    compiled_find_random_splits,
    compiled_find_splits,
    compiled_find_splits_in_histograms,
    compiled_random_level_splits,
)
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.random_vectorised import find_random_splits, random_level_splits_numpy
from engine.tree.split.vectorised import find_splits, find_splits_in_histograms

__all__ = [
    "SplitContext",
    "Splits",
    "best_splits",
    "best_splits_in_histograms",
    "random_level_splits",
]


def _rows_numpy(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    return find_splits(
        ctx, rows, slot_of_row, features, parent_channels, parent_counts, None, bounds
    )


def _histograms_numpy(
    ctx: SplitContext,
    histograms: NDArray[np.float64],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    bounds: NDArray[np.float64] | None = None,
    nodes: NDArray[np.intp] | None = None,
    columns: NDArray[np.intp] | None = None,
) -> Splits:
    if nodes is not None:
        histograms = histograms[nodes]
    if columns is not None:
        histograms = histograms[:, columns]
    return find_splits_in_histograms(
        ctx,
        histograms[..., 0].astype(np.int64),
        histograms[..., 1:],
        features,
        parent_channels,
        parent_counts,
        None,
        bounds,
    )


# One choice per entry point, made once at import. Tests swap these names to run one side.
rows_search = select(compiled_find_splits, _rows_numpy)
random_search = select(compiled_find_random_splits, find_random_splits)
histogram_search = select(compiled_find_splits_in_histograms, _histograms_numpy)
random_level_search = select(compiled_random_level_splits, random_level_splits_numpy)


def best_splits(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    parent_channels: NDArray[np.float64],
    parent_counts: NDArray[np.int64],
    rng: np.random.Generator | None = None,
    bounds: NDArray[np.float64] | None = None,
) -> Splits:
    """Best split of each node of a batch, from its rows.

    Contract of :func:`engine.tree.split.vectorised.find_splits`: ``rows`` grouped by their
    node's slot ``slot_of_row``, ``features`` (S, F) each node's candidates (−1 pads), the
    nodes' channel totals and row counts, ``rng`` for random cuts and ``bounds`` each node's
    leaf-weight bounds under monotone constraints.
    """
    if not ctx.random_splits:
        return rows_search(ctx, rows, slot_of_row, features, parent_channels, parent_counts, bounds)
    if rng is not None and not ctx.is_categorical.any():
        return random_search(ctx, rows, slot_of_row, features, parent_channels, parent_counts, rng)
    return find_splits(
        ctx, rows, slot_of_row, features, parent_channels, parent_counts, rng, bounds
    )


def best_splits_in_histograms(
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

    Each bin holds its row count, then its channel sums; node ``s`` reads
    ``histograms[nodes[s]]`` (default: the s-th) and the candidate columns ``columns``
    (default: the first ``features.shape[1]``).
    """
    return histogram_search(
        ctx, histograms, features, parent_channels, parent_counts, bounds, nodes, columns
    )


def random_level_splits(
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
    """Best random cut of a level's slots ``nodes`` (random cuts, numeric features).

    The level keeps ``rows`` grouped by slot (slot ``s`` at ``node_start[s]:node_start[s +
    1]``) with their channels beside them in ``level_channels`` (and classes in
    ``level_classes``; see :func:`engine.tree.split.random_kernels.search_random_level`).
    ``columns`` are ``ctx.binned`` feature-major. ``uniforms[j · K + k]`` places the
    threshold of node ``k``'s ``j``-th candidate (the order :func:`find_random_splits`
    draws them in). ``row_right`` (level-wide, optional) takes, for the rows of
    each node a split was found for, whether it sends them right.
    """
    return random_level_search(
        ctx,
        columns,
        rows,
        node_start,
        nodes,
        features,
        level_channels,
        level_classes,
        parent_channels,
        parent_counts,
        uniforms,
        row_right,
    )
