"""Growing a forest's trees level by level on rows the grower never holds.

The impurity-criterion twin of :mod:`engine.tree.grow.remote`: the rows (their codes,
targets, in-bag weights and node) stay with whoever holds them (partition actors on a Dask
cluster, :mod:`engine.parallel._dask_forest`), and a tree's growth is a generator that
yields what it asks of them and is sent their summed answers, so that many trees grow in
lockstep, one exchange per step for all of them (:func:`grow_forest_together`).

The tree is the one :func:`engine.tree.grow.grower.grow_tree` grows level by level on the
same rows with the same random stream: the same feature permutation, the same per-node
draws of ``max_features`` candidates (again from the rest while a node finds no valid
split, :meth:`engine.tree.grow.features.FeatureSampler.draw_rounds`, whose draws are
repeated here in the same order), the same random cuts (Geurts, Ernst and Wehenkel 2006:
one uniform per node and candidate), searched from the nodes' summed histograms (per bin:
row count, then channel sums) with the kernels the local grower uses. A level asks:

1. ``("level", node_ids, splits)``: record each row's node, move the rows by the splits and
   total the children (``splits`` None ends the tree);
2. ``("deviations", means)`` (regression only): ``Σ w (y − ȳ)²`` per node, two-pass as the
   local grower's exact variances are;
3. ``("histograms", slots, candidates)``: the histograms of the open nodes ``slots`` over the
   tree's candidate features, at most ``histogram_cells`` cells a request, so the grower
   holds a bounded share of a level whatever its depth (no sibling subtraction: nothing is
   kept from one level to the next).

Histograms summed over the holders add the same numbers in another order, so a gain moves
by a few ulps at most; with integer weights (unweighted classification: bootstrap counts)
every sum is exact and the trees are the local ones to the bit.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from engine.tree._common import HISTOGRAM_CODES
from engine.tree._criteria import CLASSIFICATION_CRITERIA
from engine.tree._tree import Tree
from engine.tree.grow.features import _merge
from engine.tree.grow.growth import Growth, split_maps
from engine.tree.grow.level_kernels import shuffle_rows
from engine.tree.grow.limits import GrowthLimits
from engine.tree.grow.node_keys import child_keys, key_uniforms, root_key
from engine.tree.split import best_splits_in_histograms
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.random_vectorised import random_splits_in_histograms

__all__ = ["ForestRows", "forest_tree_steps", "grow_forest_together"]

_NO_ROWS = np.zeros(0, dtype=np.intp)
_NO_KEYS = np.zeros(0, dtype=np.uint64)

# What a tree's steps ask of its rows (a tuple whose first item names the request) and what
# they are sent back: the rows' summed answer.
ForestSteps = Generator[tuple[Any, ...], Any, Tree]


class ForestRows(Protocol):
    """Several trees' rows held elsewhere: ``ask`` takes one ``(tree, request)`` per tree
    still growing and answers, per tree in that order, the request's summed answer."""

    def ask(self, requests: Sequence[tuple[int, tuple[Any, ...]]]) -> list[Any]: ...


def grow_forest_together(steps: Mapping[int, ForestSteps], rows: ForestRows) -> list[Tree]:
    """Grow several trees (``steps[k]``, each with its own random stream) in lockstep: every
    step of all the trees still growing is one exchange with the rows, whatever it asks.
    The trees come back in ``k`` order."""
    order = sorted(steps)
    requests: dict[int, tuple[Any, ...]] = {k: next(steps[k]) for k in order}
    trees: dict[int, Tree] = {}
    while requests:
        growing = sorted(requests)
        answers = rows.ask([(k, requests[k]) for k in growing])
        for k, answer in zip(growing, answers, strict=True):
            try:
                requests[k] = steps[k].send(answer)
            except StopIteration as done:
                trees[k] = done.value
                del requests[k]
    return [trees[k] for k in order]


def forest_tree_steps(
    ctx: SplitContext,
    thresholds: NDArray[np.float64],
    limits: GrowthLimits,
    rng: np.random.Generator,
    histogram_cells: int,
) -> ForestSteps:
    """Grow one forest tree, asking its rows through ``yield`` (see the module docstring);
    ``ctx`` holds no rows (``binned`` of shape (0, F) gives the features and code width,
    ``channels`` of shape (0, C) the channels; ``has_missing`` is taken from the rows)."""
    growth = Growth(ctx, None, thresholds, limits, rng, None)
    if limits.max_leaf_nodes is not None or ctx.n_codes > HISTOGRAM_CODES:
        raise ValueError(
            "Rows held on workers grow level-wise trees on histogram bins (no max_leaf_nodes)."
        )
    if ctx.random_splits and bool(ctx.is_categorical.any()):
        raise ValueError("Rows held on workers take random cuts of numeric features only.")
    regression = ctx.criterion not in CLASSIFICATION_CRITERIA
    candidates = growth.features.candidates
    # Random cuts draw from each node's key, as the local grower does.
    keys = np.array([root_key(rng)], dtype=np.uint64) if ctx.random_splits else _NO_KEYS
    totals, counts, has_missing = yield ("start",)
    growth.ctx = replace(growth.ctx, has_missing=has_missing)
    n_slots, depth = 1, 0
    while True:
        values, impurities = yield from _statistics(growth, totals, regression)
        node_ids, slots = growth.record_level(
            totals, counts, values, impurities, depth, _NO_ROWS, _NO_ROWS, None
        )
        if slots.size == 0:
            yield ("level", node_ids, None)
            break
        splits = yield from _search(
            growth,
            depth,
            slots,
            keys[slots] if keys.size else keys,
            totals[slots],
            counts[slots],
            candidates,
            histogram_cells,
        )
        chosen = growth.accepted(splits)
        if not chosen.any():
            yield ("level", node_ids, None)
            break
        growth.records.apply_splits(node_ids[slots], splits, chosen)
        split_of_slot, rank_of_slot, n_chosen = split_maps(n_slots, slots, chosen)
        splits_sent = (split_of_slot, rank_of_slot, splits.feature, splits.left_codes, n_chosen)
        totals, counts = yield ("level", node_ids, splits_sent)
        if keys.size:
            keys = child_keys(keys[slots[chosen]])
        n_slots = 2 * n_chosen
        depth += 1
    return growth.records.finish()


def _statistics(
    growth: Growth, totals: NDArray[np.float64], regression: bool
) -> Generator[tuple[Any, ...], Any, tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """The nodes' values and impurities, as :meth:`Growth.statistics` forms them; a
    regression's squared deviations are asked of the rows."""
    if not regression:
        return growth.statistics(totals, _NO_ROWS, _NO_ROWS)
    weight = totals[:, 0]
    mean = totals[:, 1] / weight
    squared = yield ("deviations", mean)
    return mean[:, None], squared / weight


def _search(
    growth: Growth,
    depth: int,
    slots: NDArray[np.intp],
    keys: NDArray[np.uint64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
    candidates: NDArray[np.int64],
    histogram_cells: int,
) -> Generator[tuple[Any, ...], Any, Splits]:
    """:meth:`FeatureSampler.draw_rounds` (random cuts: :meth:`~FeatureSampler.
    draw_keyed_rounds`, from the nodes' ``keys``) with each round searched from histograms
    the rows send: the same draws, in the same order."""
    sampler, rng = growth.features, growth.rng
    pool = sampler.level_pool(depth)
    n_candidates, n_slots = pool.size, slots.size
    per_round = sampler.limits.max_features or n_candidates
    column_of = np.zeros(growth.ctx.binned.shape[1], dtype=np.intp)
    column_of[candidates] = np.arange(candidates.size)

    def search_round(
        pending: NDArray[np.intp], features: NDArray[np.int64], first: int = 0
    ) -> Generator[tuple[Any, ...], Any, Splits]:
        # Random cuts: the thresholds' uniforms of the round's candidates, from the keys.
        uniforms = (
            key_uniforms(keys[pending], 2 * (first + np.arange(features.shape[1]))).T.ravel()
            if growth.ctx.random_splits
            else None
        )
        cell_size = candidates.size * HISTOGRAM_CODES * (1 + growth.ctx.channels.shape[1])
        chunk = max(1, histogram_cells // cell_size)
        found: list[Splits] = []
        for start in range(0, pending.size, chunk):
            part = slice(start, start + chunk)
            histograms = yield ("histograms", slots[pending[part]], candidates)
            found.append(
                _search_histograms(
                    growth,
                    histograms,
                    features[part],
                    totals[pending[part]],
                    counts[pending[part]],
                    column_of,
                    None if uniforms is None else _segment_uniforms(uniforms, features, part),
                )
            )
        return _concatenate(found)

    if per_round >= n_candidates:
        features = np.ascontiguousarray(np.broadcast_to(pool, (n_slots, n_candidates)))
        return (yield from search_round(np.arange(n_slots), features))
    if sampler.random_cuts:
        order = np.tile(np.arange(n_candidates, dtype=np.intp), (n_slots, 1))
    else:
        order = rng.random((n_slots, n_candidates)).argsort(axis=1)
    result: Splits | None = None
    pending = np.arange(n_slots)
    for start in range(0, n_candidates, per_round):
        if sampler.random_cuts:
            width = min(per_round, n_candidates - start)
            steps = key_uniforms(keys[pending], 2 * (start + np.arange(width)) + 1)
            shuffle_rows(order, pending, steps, start)
        features = pool[order[pending, start : start + per_round]]
        if features.shape[1] < per_round:
            pad = np.full((pending.size, per_round - features.shape[1]), -1)
            features = np.concatenate([features, pad], axis=1)
        splits = yield from search_round(pending, features, start)
        result = splits if result is None else _merge(result, splits, pending)
        pending = pending[~splits.found]
        if pending.size == 0:
            break
    assert result is not None
    return result


def _segment_uniforms(
    uniforms: NDArray[np.float64], features: NDArray[np.int64], part: slice
) -> NDArray[np.float64]:
    """The uniforms of the nodes ``part`` of a round, in the feature-major segment order
    (``j·S + s``) a search of those nodes alone reads: one per (node, candidate)."""
    n_slots, n_per_node = features.shape
    return uniforms.reshape(n_per_node, n_slots)[:, part].ravel()


def _search_histograms(
    growth: Growth,
    histograms: NDArray[np.float64],
    features: NDArray[np.int64],
    totals: NDArray[np.float64],
    counts: NDArray[np.int64],
    column_of: NDArray[np.intp],
    uniforms: NDArray[np.float64] | None,
) -> Splits:
    """Best splits (or random cuts) of nodes from their histograms over the tree's
    candidates (S, F, 256, 1 + C), each node on its own ``features`` (−1 pads)."""
    every = features.shape[1] == histograms.shape[1] and bool(
        np.all(column_of[features] == np.arange(features.shape[1]))
    )
    if not every:  # each node's own columns, in its candidates' order
        nodes = np.arange(features.shape[0])[:, None]
        histograms = histograms[nodes, column_of[np.maximum(features, 0)]]
    if uniforms is not None:
        return random_splits_in_histograms(
            growth.ctx, histograms, features, totals, counts, uniforms
        )
    return best_splits_in_histograms(growth.ctx, histograms, features, totals, counts)


def _concatenate(found: list[Splits]) -> Splits:
    if len(found) == 1:
        return found[0]
    names = ("found", "gain", "feature", "bin", "missing_left", "left_codes")
    return Splits(**{name: np.concatenate([getattr(s, name) for s in found]) for name in names})
