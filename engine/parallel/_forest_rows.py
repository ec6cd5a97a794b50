"""A forest's rows where they are held: each tree's in-bag weights, node and leaf per row.

:class:`ForestHolder` is what a partition actor (:class:`engine.parallel._dask_parts.
PartsActor`) does for a forest grown out of core: it holds one range of the table's rows
(their bin codes feature-major, targets and weights) and, for
each tree growing, the tree's in-bag weights, drawn here from the tree's seed and the
blocks' totals the driver drew (:func:`engine.ensemble._sampling.counts_in_range`: the same
counts whichever holder draws them), the rows' channels, the node slot of each row in the
tree and of each row outside it (out of bag, or of weight 0: they follow the splits too, so
each row's leaf is known when the tree ends), and answers the requests of
:mod:`engine.tree.grow.remote_forest`. When a batch of trees ends the holder adds each
tree's leaf values to its rows' forest sums, once per batch (:meth:`end_forest_batch` is
idempotent by batch), which a caller reads as the rows' scores (``raw``: the forest's mean
output).

:class:`ForestBatch` is the driver's side: it sends every growing tree's request to every
holder in one call and sums the answers in holder order.

Nothing here imports Dask: the holders can be plain objects in this process (the tests grow
trees on several of them and compare with the local fit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.ensemble._sampling import MemberSampling, counts_in_range
from engine.tree._binning import BinMapper
from engine.tree._histograms import build_histograms
from engine.tree._tree import Tree
from engine.tree.grow.level_kernels import node_totals, squared_deviations
from engine.tree.grow.partition_kernels import partition_rows

__all__ = ["ForestBatch", "ForestHolder", "TreeDraw", "move_tree_rows"]

# (seed, blocks' totals): what a holder needs to draw a tree's in-bag counts of its rows.
TreeDraw = tuple[int, NDArray[np.int64]]


class ForestHolder:
    """Forest state on rows held here; the holder sets ``codes`` (F, n) feature-major,
    ``y`` (class indices as floats, or targets), ``w`` and ``row_missing`` (n,) first (``w``
    None when every weight is 0 or 1, and then ``learns`` the rows of weight 1)."""

    codes: NDArray[Any]
    y: NDArray[np.float64]
    w: NDArray[np.float64] | None
    learns: NDArray[np.bool_]
    row_missing: NDArray[np.bool_]

    def start_forest(
        self, sampling: MemberSampling, first_row: int, n_outputs: int, classification: bool
    ) -> None:
        """Hold a forest's state. The trees draw from the rows of positive weight alone (as
        a local fit on those rows; rows of weight 0, a validation split riding along, take
        no part): this holder's are the ``first_row``-th of them and on, in order."""
        self.sampling, self.first_row = sampling, first_row
        if self.w is not None:
            self.learns = self.w > 0
        # Their count, not their indices (8 bytes a row for the whole fit): a tree's counts
        # go to them through the mask, in the same ascending order.
        self.n_positive = int(np.count_nonzero(self.learns))
        self.classification, self.n_outputs = classification, n_outputs
        self.classes_of_rows = self.y.astype(np.int64) if classification else None
        self.raw = np.zeros((self.y.size, n_outputs))  # the forest's sums, then its mean
        self.forest_batch, self.n_trees = -1, 0
        self.forest_trees: dict[int, _ForestTree] = {}
        self.pending_leaves: dict[int, NDArray[np.int32]] = {}

    def forest_steps(self, requests: list[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        """Each request of a growing tree (see :mod:`engine.tree.grow.remote_forest`; a
        start carries the tree's :data:`TreeDraw`), answered in order."""
        answers: list[Any] = []
        for k, request in requests:
            kind = request[0]
            if kind == "start":  # a batch grown again after a loss starts its trees afresh
                self.pending_leaves.pop(k, None)
                tree = self.forest_trees[k] = _ForestTree(self, *request[1])
                answers.append(tree.start(self))
            elif kind == "deviations":
                answers.append(self.forest_trees[k].deviations(self, request[1]))
            elif kind == "histograms":
                answers.append(self.forest_trees[k].histograms(self, *request[1:]))
            else:
                answers.append(self.forest_trees[k].level(self, *request[1:]))
                if request[2] is None:  # ended: its rows' leaves wait for the batch's end
                    self.pending_leaves[k] = self.forest_trees.pop(k).leaf
        return answers

    def end_forest_batch(
        self,
        batch: int,
        values: list[NDArray[np.float64]],
        ended: list[tuple[int, tuple[Any, ...]]],
    ) -> None:
        """Record the trees ``ended`` (their last level, deferred to here), then add each
        tree's leaf values to the rows' sums, once per batch (a repeated call, after another
        holder was lost, changes nothing)."""
        if batch > self.forest_batch:
            if ended:
                self.forest_steps(ended)
            assert sorted(self.pending_leaves) == list(range(len(values)))
            for k, tree_values in enumerate(values):
                self.raw += tree_values[self.pending_leaves[k]]
            self.forest_batch, self.n_trees = batch, self.n_trees + len(values)
        self.forest_trees, self.pending_leaves = {}, {}

    def mean_forest(self) -> None:
        """The rows' sums become the forest's mean output (scores a caller reads)."""
        self.raw /= max(self.n_trees, 1)

    def _piece_values(self) -> Iterator[NDArray[np.float64]]:
        """The rows' feature values, piece by piece in order (read again by the holder)."""
        raise NotImplementedError

    def replay_forest(self, mapper: BinMapper, trees: list[Tree], batch: int) -> None:
        """The rows' sums of ``trees``' outputs (the batches up to ``batch``), as the lost
        holder had them, from the rows' values read again: a tree routes a value as training
        routed its code (a split "bin ≤ b" is stored as ``x <= edge_b``)."""
        self.raw = np.zeros_like(self.raw)
        start = 0
        for X in self._piece_values():
            encoded = mapper.encode_for_prediction(X)
            for tree in trees:
                self.raw[start : start + X.shape[0]] += tree.predict(encoded)
            start += X.shape[0]
            del X, encoded  # before the next piece is read
        self.forest_batch, self.n_trees = batch, len(trees)
        self.forest_trees, self.pending_leaves = {}, {}


class _ForestTree:
    """One growing tree's state on a holder's rows (see the module docstring)."""

    def __init__(self, holder: ForestHolder, seed: int, totals: NDArray[np.int64]) -> None:
        n = holder.y.size
        first = holder.first_row
        # As the local fit forms them: sample weight × in-bag count (a count alone where
        # every weight is 1: rows that do not learn have none).
        self.weights = np.zeros(n)
        self.weights[holder.learns] = counts_in_range(
            seed, totals, holder.sampling, first, first + holder.n_positive
        )
        if holder.w is not None:
            self.weights *= holder.w
        in_tree = self.weights > 0
        rows = np.flatnonzero(in_tree)
        if holder.classes_of_rows is not None:
            self.channels = np.zeros((n, holder.n_outputs))
            self.channels[rows, holder.classes_of_rows[rows]] = self.weights[rows]
        else:
            self.channels = np.zeros((n, 2))
            self.channels[rows, 0] = self.weights[rows]
            self.channels[rows, 1] = self.weights[rows] * holder.y[rows]
        self.rows, self.slots = rows, np.zeros(rows.size, dtype=np.intp)
        self.out_rows = np.flatnonzero(~in_tree)
        self.out_slots = np.zeros(self.out_rows.size, dtype=np.intp)
        self.leaf = np.zeros(n, dtype=np.int32)  # node numbers (< 2^31): four bytes a row
        self.n_slots = 1

    def start(self, holder: ForestHolder) -> tuple[NDArray[np.float64], NDArray[np.int64], bool]:
        totals, counts = node_totals(self.rows, self.slots, 1, self.channels)
        return totals, counts, bool(holder.row_missing[self.rows].any())

    def deviations(self, holder: ForestHolder, means: NDArray[np.float64]) -> NDArray[np.float64]:
        return squared_deviations(self.rows, self.slots, holder.y, self.channels[:, 0], means)

    def histograms(
        self, holder: ForestHolder, slots: NDArray[np.intp], candidates: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        """The histograms of the level's ``slots`` over ``candidates`` (S, F, 256, 1 + C)."""
        renumber = np.full(self.n_slots, -1, dtype=np.intp)
        renumber[slots] = np.arange(slots.size)
        new_slot = renumber[self.slots]
        asked = new_slot >= 0
        rows, slot_of_row = self.rows[asked], new_slot[asked]
        n_channels = self.channels.shape[1]
        if holder.classes_of_rows is not None:  # a row adds its weight to its class's channel
            return build_histograms(
                holder.codes,
                rows,
                slot_of_row,
                slots.size,
                candidates,
                self.weights.reshape(-1, 1),
                n_channels,
                classes=holder.classes_of_rows,
            )
        return build_histograms(
            holder.codes, rows, slot_of_row, slots.size, candidates, self.channels, n_channels
        )

    def level(
        self, holder: ForestHolder, node_ids: NDArray[np.intp], splits: Any
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]] | None:
        """Record the level's nodes; move the rows by its splits; the children's totals."""
        self.leaf[self.rows] = node_ids[self.slots]
        self.leaf[self.out_rows] = node_ids[self.out_slots]
        if splits is None:
            return None
        totals, counts = move_tree_rows(holder.codes, self, splits)
        self.n_slots = 2 * splits[4]
        return totals, counts


def move_tree_rows(
    codes: NDArray[Any], tree: Any, splits: Any
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Move a growing tree's rows (``tree.rows``/``slots``, with ``channels``) and the rows
    outside it (``out_rows``/``out_slots``, which follow its splits so that each row's leaf
    is known) by a level's ``splits``; the children's totals and row counts."""
    split_of_slot, rank_of_slot, feature, left_codes, n_chosen = splits
    tree.rows, tree.slots, totals, counts = partition_rows(
        codes,
        tree.rows,
        tree.slots,
        split_of_slot,
        rank_of_slot,
        feature,
        left_codes,
        n_chosen,
        tree.channels,
    )
    tree.out_rows, tree.out_slots, _, _ = partition_rows(
        codes,
        tree.out_rows,
        tree.out_slots,
        split_of_slot,
        rank_of_slot,
        feature,
        left_codes,
        n_chosen,
    )
    return totals, counts


class ForestBatch:
    """A batch of trees' rows across the holders (:class:`engine.tree.grow.remote_forest.
    ForestRows`): ``send(requests)`` gives every holder's answers, in holder order, which
    are summed in that order. ``draws[k]``: tree ``k``'s :data:`TreeDraw`, sent with its
    start. A step in which every tree ends is kept for the batch's end (``ended``)."""

    def __init__(
        self, send: Callable[[list[tuple[int, tuple[Any, ...]]]], list[list[Any]]], draws: Any
    ) -> None:
        self.send = send
        self.draws = draws
        self.ended: list[tuple[int, tuple[Any, ...]]] = []

    def ask(self, requests: Sequence[tuple[int, tuple[Any, ...]]]) -> list[Any]:
        if all(r[0] == "level" and r[2] is None for _, r in requests):
            self.ended.extend(requests)
            return [None] * len(requests)
        sent = [
            (k, ("start", self.draws[k]) if request[0] == "start" else request)
            for k, request in requests
        ]
        per_holder = self.send(sent)
        return [
            _summed(request[0], answers)
            for (_, request), answers in zip(requests, zip(*per_holder, strict=True), strict=True)
        ]


def _summed(kind: str, answers: Sequence[Any]) -> Any:
    """One request's answers from every holder, added in holder order."""
    first = answers[0]
    if first is None:  # a tree's last level: nothing to add
        return None
    if kind == "start":
        totals, counts, has_missing = first
        for part_totals, part_counts, part_missing in answers[1:]:
            totals, counts = totals + part_totals, counts + part_counts
            has_missing = has_missing or part_missing
        return totals, counts, has_missing
    if kind == "level":
        totals, counts = first
        for part_totals, part_counts in answers[1:]:
            totals, counts = totals + part_totals, counts + part_counts
        return totals, counts
    total = first.copy()
    for part in answers[1:]:
        total += part
    return total
