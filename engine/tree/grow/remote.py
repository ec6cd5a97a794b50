"""Growing second-order trees level by level on rows the grower never holds.

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

A tree's growth is a generator (:func:`remote_tree_steps`) that yields what it asks of the
rows and is sent their answers, so :func:`grow_remote_together` can grow a multiclass round's K
trees in lockstep: one exchange per level for all of them (issue 27), the per-level latency
paid once instead of K times.

This is the H2O layout (``ScoreBuildHistogram2``: a node-id column beside the rows, one pass
per level) with XGBoost's histogram method (Chen & Guestrin 2016, §3.3).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from engine.tree._histograms import sibling_histograms
from engine.tree._monotone import UNBOUNDED
from engine.tree._tree import Tree
from engine.tree.grow.growth import Growth, split_maps
from engine.tree.grow.limits import GrowthLimits
from engine.tree.split.context import SplitContext

__all__ = [
    "LevelSplits",
    "RemoteRows",
    "RemoteTrees",
    "RoundPlan",
    "grow_remote_together",
    "grow_round",
    "remote_tree_steps",
]

# (split_of_slot, rank_of_slot, feature, left_codes, n_chosen): what the partition kernel
# takes about a level's splits (engine.tree.grow.partition_kernels.partition_rows).
LevelSplits = tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.int64], NDArray[np.bool_], int]

_NO_ROWS = np.zeros(0, dtype=np.intp)


class RemoteRows(Protocol):
    """One tree's rows, held elsewhere, grouped by the node slot of the current level."""

    def start(
        self, features: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], bool, NDArray[np.float64]]:
        """Start the tree: its rows' summed channel totals (1, C) and count (1,), whether
        any of them has a missing value, and the root's histograms (1, F, 256, 1 + C) over
        ``features`` (the tree's candidates, in the order every histogram keeps them)."""
        ...

    def level(
        self,
        node_ids: NDArray[np.intp],
        splits: LevelSplits | None,
        smaller_side: NDArray[np.intp] | None,
    ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64] | None] | None:
        """Record each row's node (``node_ids[slot]``); ``splits`` None ends the tree. Else
        move the rows of split slots to their children (rows of other slots leave) and return
        the children's summed totals and counts, and with ``smaller_side`` (per split, 0 left
        or 1 right) the summed histograms of each split's smaller child, one per split."""
        ...


class RemoteTrees(Protocol):
    """Several trees' rows held elsewhere, asked together: one exchange for all of them.

    ``start`` takes one ``(tree, features)`` per tree and ``level`` one ``(tree, node_ids,
    splits, smaller_side)`` per tree still growing; each answers, per tree in the order
    asked, what :class:`RemoteRows` answers for one."""

    def start(self, requests: Sequence[tuple[int, NDArray[np.int64]]]) -> list[Any]: ...

    def level(self, requests: Sequence[tuple[int, Any, Any, Any]]) -> list[Any]: ...


# What a tree's steps ask of its rows: ("start", features) or ("level", node_ids, splits,
# smaller_side); what they are sent back is the rows' answer.
TreeSteps = Generator[tuple[Any, ...], Any, Tree]


@dataclass
class RoundPlan:
    """What growing one boosting round's ``n_trees`` trees takes, wherever they grow (the fit
    process, or a worker holding rows itself): the trees' context, bin thresholds, limits,
    the fit's random stream (in its state at the round's first tree; left at the round's
    end), the round's feature subset, and whether the trees grow in lockstep (nothing but a
    tree's start draws from the stream) or one after the other (``colsample_bylevel``)."""

    ctx: SplitContext
    thresholds: NDArray[np.float64]
    limits: GrowthLimits
    rng: np.random.Generator
    feature_subset: NDArray[np.int64] | None
    n_trees: int
    lockstep: bool


def grow_round(plan: RoundPlan, rows: RemoteTrees) -> list[Tree]:
    """The round's trees (by output ``k``), grown on ``rows`` as :data:`RoundPlan` says."""

    def steps() -> TreeSteps:
        return remote_tree_steps(
            plan.ctx, plan.thresholds, plan.limits, plan.rng, plan.feature_subset
        )

    if not plan.lockstep:
        # Each level draws its features from the shared stream: the trees must grow one
        # after the other to draw as the local fit does (K round trips a level).
        return [grow_remote_together({k: steps()}, rows)[0] for k in range(plan.n_trees)]
    # Only a tree's start draws (its feature order), and the trees start in order: all K
    # trees of the round grow in lockstep, one round trip a level for all of them.
    return grow_remote_together({k: steps() for k in range(plan.n_trees)}, rows)


def grow_remote_together(steps: Mapping[int, TreeSteps], rows: RemoteTrees) -> list[Tree]:
    """Grow several trees (by output ``k``: ``steps[k]``) level by level in lockstep: each
    level of all the trees still growing is one exchange with the rows (a multiclass round's
    K trees: one round trip per level instead of K). ``steps`` are :func:`remote_tree_steps`
    not yet started; they are started in ``k`` order, which is when each draws from its
    random stream (its feature order), so trees sharing one stream draw as they would one
    after the other, provided their later levels draw nothing (no ``colsample_bylevel``: the
    caller grows those one at a time). The trees come back in ``k`` order."""
    order = sorted(steps)
    requests: dict[int, tuple[Any, ...]] = {k: next(steps[k]) for k in order}
    trees: dict[int, Tree] = {}
    while requests:
        growing = sorted(requests)
        if requests[growing[0]][0] == "start":
            answers = rows.start([(k, requests[k][1]) for k in growing])
        else:
            answers = rows.level([(k, *requests[k][1:]) for k in growing])
        for k, answer in zip(growing, answers, strict=True):
            try:
                requests[k] = steps[k].send(answer)
            except StopIteration as done:
                trees[k] = done.value
                del requests[k]
    return [trees[k] for k in order]


def remote_tree_steps(
    ctx: SplitContext,
    thresholds: NDArray[np.float64],
    limits: GrowthLimits,
    rng: np.random.Generator,
    feature_subset: NDArray[np.int64] | None,
) -> TreeSteps:
    """Grow one tree, asking its rows through ``yield`` (:data:`TreeSteps`); ``ctx`` holds
    no rows (``binned`` of shape (0, F) gives the features and code width; ``has_missing``
    is taken from the rows).

    One exchange per level: the smaller child of each split is known before the rows move,
    from the parent's histogram (its bins' row counts on the split's left codes; counts are
    exact in float64), so the rows move and the smaller children's histograms are built in
    the same call.
    """
    growth = Growth(ctx, None, thresholds, limits, rng, feature_subset)
    if not growth.uses_histograms() or limits.max_leaf_nodes is not None:
        raise ValueError(
            "Rows held on workers grow level-wise trees searched from histograms only "
            "(no best-first growth, per-split column sampling, random cuts or exact bins)."
        )
    candidates = growth.features.candidates
    column_of = np.empty(ctx.binned.shape[1], dtype=np.intp)
    column_of[candidates] = np.arange(candidates.size)
    root_totals, root_counts, has_missing, root_histograms = yield ("start", candidates)
    growth.ctx = replace(growth.ctx, has_missing=has_missing)
    histograms: NDArray[np.float64] | None = root_histograms
    known = (root_totals, root_counts)
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
            yield ("level", node_ids, None, None)
            break
        assert histograms is not None  # only the last depth drops them, and it splits nothing
        slot_bounds = None if bounds is None else bounds[slots]
        splits = growth.search_histograms(
            histograms, slots, totals[slots], counts[slots], depth, slot_bounds
        )
        chosen = growth.accepted(splits)
        if not chosen.any():
            yield ("level", node_ids, None, None)
            break
        growth.records.apply_splits(node_ids[slots], splits, chosen)
        if slot_bounds is not None:
            bounds, parent_feature = slot_bounds[chosen], splits.feature[chosen]
        split_of_slot, rank_of_slot, n_chosen = split_maps(n_slots, slots, chosen)
        parents = slots[chosen]
        depth += 1
        leaves_next = limits.max_depth is not None and depth >= limits.max_depth
        left_counts = np.einsum(
            "pc,pc->p",
            histograms[parents, column_of[splits.feature[chosen]], :, 0],
            splits.left_codes[chosen].astype(np.float64),
        )
        # The smaller child by rows, the left on a tie, as smaller_children chooses.
        smaller_side = (counts[parents] - left_counts < left_counts).astype(np.intp)
        answer = yield (
            "level",
            node_ids,
            (split_of_slot, rank_of_slot, splits.feature, splits.left_codes, n_chosen),
            None if leaves_next else smaller_side,
        )
        assert answer is not None
        child_totals, child_counts, small = answer
        if not np.array_equal(child_counts[0::2], left_counts):
            raise RuntimeError("The rows' children disagree with their parents' histograms.")
        known = (child_totals, child_counts)
        n_slots = 2 * n_chosen
        # At the last depth the children are leaves: no split search reads their histograms.
        histograms = (
            None if small is None else sibling_histograms(histograms, parents, small, smaller_side)
        )
    return growth.records.finish()
