"""Engine trees in the layout of ``ai.onnx.ml`` ``TreeEnsemble`` (opset 5): the arrays only.

The engine keeps a tree as one node array (``NODE_DTYPE``: children, feature, threshold,
``missing_left``, ``category_split``) with leaves among the nodes; the operator keeps interior
nodes (``nodes_*``) and leaves (``leaf_*``) apart, each branch naming a node or a leaf. Several
trees are converted together (:class:`Batch`), which costs a few array operations for a whole
forest instead of per tree. The routing rules, and how category sets are rewritten, are in
``service.export.trees``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

BRANCH_LEQ = 0
BRANCH_MEMBER = 6

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# The engine's node fields read here (all of NODE_DTYPE's that prediction uses).
FIELDS = ("left_child", "right_child", "feature", "threshold", "missing_left", "category_split")


@dataclass
class Batch:
    """Several trees as one node array (children and category rows renumbered); each tree's
    nodes stay together and in order."""

    nodes: npt.NDArray[np.void]
    category_bitsets: npt.NDArray[np.uint8]
    starts: IntArray  # each tree's first node

    @classmethod
    def of(cls, trees: Sequence[Any]) -> Batch:
        sizes = np.array([tree.nodes.shape[0] for tree in trees], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        nodes = np.empty(int(sizes.sum()), dtype=[(f, SINGLE_LEAF.dtype[f]) for f in FIELDS])
        for name in FIELDS:  # a field at a time: one concatenation instead of one per tree
            nodes[name] = np.concatenate([tree.nodes[name] for tree in trees])
        bitsets = [np.asarray(tree.category_bitsets, np.uint8).reshape(-1, 32) for tree in trees]
        bitset_starts = np.concatenate(([0], np.cumsum([b.shape[0] for b in bitsets])[:-1]))
        shift = np.repeat(starts, sizes)
        for child in ("left_child", "right_child"):
            nodes[child] = np.where(nodes[child] >= 0, nodes[child] + shift, nodes[child])
        split = nodes["category_split"]
        nodes["category_split"] = np.where(
            split >= 0, split + np.repeat(bitset_starts, sizes), split
        )
        return cls(nodes, np.concatenate(bitsets), starts)


# A tree that is one leaf of value 0 (the filler of an ensemble that would be empty).
SINGLE_LEAF = np.array(
    [(-1, -1, 0, 0.0, 0, -1)],
    dtype=[
        ("left_child", "<i4"),
        ("right_child", "<i4"),
        ("feature", "<i4"),
        ("threshold", "<f8"),
        ("missing_left", "u1"),
        ("category_split", "<i4"),
    ],
)


@dataclass
class Structure:
    """Trees in the operator's layout: interior nodes and leaves each numbered from 0."""

    modes: npt.NDArray[np.uint8]
    features: IntArray
    splits: FloatArray
    true_ids: IntArray
    true_leaf: IntArray
    false_ids: IntArray
    false_leaf: IntArray
    tracks_true: IntArray
    sets: FloatArray  # the member sets, in node order, each ended by NaN
    leaves: IntArray  # the batch's node index of each leaf
    roots: IntArray  # each tree's root among the interior nodes

    @property
    def n_nodes(self) -> int:
        return int(self.modes.size)


def structure(batch: Batch, codes: dict[int, FloatArray]) -> Structure:
    """The batch in the operator's layout; ``codes`` gives, per categorical feature, the
    engine's code of each model code (NaN for a category the binner never saw).

    A tree that is one leaf gets an interior node of its own whose branches both reach that
    leaf, as the operator's schema says to write one."""
    nodes = batch.nodes
    left = nodes["left_child"].astype(np.int64)
    internal = left >= 0
    leaves = np.flatnonzero(~internal)
    interior = internal.copy()
    interior[batch.starts] = True  # a root that is a leaf gets an interior node too
    entries = np.flatnonzero(interior)  # in node order
    dummy = ~internal[entries]
    node_position = np.zeros(left.size, dtype=np.int64)
    node_position[entries] = np.arange(entries.size)
    leaf_position = np.zeros(left.size, dtype=np.int64)
    leaf_position[leaves] = np.arange(leaves.size)
    true_child = np.where(dummy, entries, left[entries])
    false_child = np.where(dummy, entries, nodes["right_child"][entries].astype(np.int64))
    true_leaf = dummy | ~internal[true_child]
    false_leaf = dummy | ~internal[false_child]
    features = np.where(dummy, 0, nodes["feature"][entries]).astype(np.int64)
    splits = np.where(dummy, 0.0, nodes["threshold"][entries]).astype(np.float64)
    tracks = np.where(dummy, 0, nodes["missing_left"][entries]).astype(np.int64)
    modes = np.full(entries.size, BRANCH_LEQ, dtype=np.uint8)
    sets = np.zeros(0)
    if codes:
        sets = _category_splits(batch, entries, ~dummy, features, splits, modes, codes)
    return Structure(
        modes=modes,
        features=features,
        splits=splits,
        true_ids=np.where(true_leaf, leaf_position[true_child], node_position[true_child]),
        true_leaf=true_leaf.astype(np.int64),
        false_ids=np.where(false_leaf, leaf_position[false_child], node_position[false_child]),
        false_leaf=false_leaf.astype(np.int64),
        tracks_true=tracks,
        sets=sets,
        leaves=leaves.astype(np.int64),
        roots=node_position[batch.starts],
    )


def _category_splits(
    batch: Batch,
    entries: IntArray,
    real: npt.NDArray[np.bool_],
    features: IntArray,
    splits: FloatArray,
    modes: npt.NDArray[np.uint8],
    codes: dict[int, FloatArray],
) -> FloatArray:
    """Rewrite the splits on categorical features (in place) as sets of model codes; returns
    the member sets, in node order, each ended by NaN (the operator's ``membership_values``).

    All splits at once: a table of every categorical feature's engine codes (NaN-padded to the
    widest), a row per split, and each split's bitset looked up at those codes."""
    categorical = np.array(sorted(codes), dtype=np.int64)
    on_categories = np.flatnonzero(real & np.isin(features, categorical))
    if on_categories.size == 0:
        return np.zeros(0)
    n_codes_of = np.array([codes[int(f)].size for f in categorical])
    width = int(n_codes_of.max())
    table = np.full((categorical.size, width), np.nan)
    for row, f in enumerate(categorical):
        table[row, : n_codes_of[row]] = codes[int(f)]
    which = np.searchsorted(categorical, features[on_categories])
    engine = table[which]  # (splits, width): the engine's code of each model code
    n_codes = n_codes_of[which]
    valid = np.arange(width)[None, :] < n_codes[:, None]
    records = batch.nodes[entries[on_categories]]
    missing_left = records["missing_left"].astype(bool)[:, None]
    seen = ~np.isnan(engine)
    code = np.where(seen, engine, 0).astype(np.int64)
    rows = records["category_split"].astype(np.int64)
    by_set = rows >= 0
    left = np.zeros(engine.shape, dtype=bool)
    if by_set.any():
        bits = np.unpackbits(batch.category_bitsets[rows[by_set]], axis=1, bitorder="little")
        inside = code[by_set] < bits.shape[1]
        at = np.minimum(code[by_set], bits.shape[1] - 1)
        looked_up = np.take_along_axis(bits, at, axis=1).astype(bool)
        left[by_set] = np.where(inside, looked_up, missing_left[by_set])
    if not by_set.all():  # a numeric threshold on the engine's codes
        left[~by_set] = engine[~by_set] <= records["threshold"][~by_set][:, None]
    left = np.where(seen, left, missing_left) & valid
    count = left.sum(axis=1)
    none, every = count == 0, count == n_codes
    splits[on_categories[none]] = -np.inf
    splits[on_categories[every]] = np.inf
    member = ~(none | every)
    n_member = int(member.sum())
    if n_member == 0:
        return np.zeros(0)
    modes[on_categories[member]] = BRANCH_MEMBER
    splits[on_categories[member]] = np.nan
    # Each member split's codes then a NaN, row by row: the sets in node order.
    values = np.concatenate(
        [
            np.broadcast_to(np.arange(width, dtype=np.float64), (n_member, width)),
            np.full((n_member, 1), np.nan),
        ],
        axis=1,
    )
    keep = np.concatenate([left[member], np.ones((n_member, 1), dtype=bool)], axis=1)
    sets: FloatArray = values[keep]
    return sets
