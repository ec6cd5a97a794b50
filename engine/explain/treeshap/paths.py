"""Root-to-leaf paths of a tree, padded into arrays, and rows routed along them (NumPy).

The layout of the vectorised twin (:mod:`engine.explain.treeshap.vectorised`): a tree's leaves in groups
of similar path length, each group's paths padded to common lengths, and per row the one
fractions ``o`` of every (leaf, slot) — whether the row follows every split of the path on that
slot's feature (Lundberg et al. 2020, Algorithm 2's ``o``; ``z``, the zero fraction, is the
product of the cover ratios of those splits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engine.tree._tree import Tree

__all__ = ["SLOT_GROUP", "LeafPaths", "leaf_groups", "route_rows", "row_codes", "row_ones"]

# Leaves are processed in groups whose numbers of distinct path features differ by less
# than this (see :func:`leaf_groups`).
SLOT_GROUP = 4


@dataclass(frozen=True)
class LeafPaths:
    """Root-to-leaf paths of a group of leaves, padded to common lengths (tree only).

    ``n_splits`` is the longest path and ``n_slots`` the most distinct features on one.
    Padding splits point at an extra slot ``n_slots`` that is dropped; padding slots have
    ``z = 1``, ``o = 0`` and no weight, so they change nothing.
    """

    values: NDArray[np.float64]  # (n_leaves, n_outputs)
    split_node: NDArray[np.intp]  # (n_leaves, n_splits) ancestors, root first
    split_left: NDArray[np.bool_]  # (n_leaves, n_splits) whether the path goes left there
    split_slot: NDArray[np.intp]  # (n_leaves, n_splits)
    slot_used: NDArray[np.bool_]  # (n_leaves, n_slots)
    slot_zero: NDArray[np.float64]  # (n_leaves, n_slots) zero fractions z
    # Flattened (leaf, slot) entries in use, sorted by feature, and where each feature starts.
    scatter_order: NDArray[np.intp]
    scatter_starts: NDArray[np.intp]
    scatter_features: NDArray[np.intp]

    @property
    def n_slots(self) -> int:
        return int(self.slot_zero.shape[1])

    @property
    def n_leaves(self) -> int:
        return int(self.slot_zero.shape[0])

    def expected_value(self) -> NDArray[np.float64]:
        """Cover-weighted sum of the group's leaf values, shape (n_outputs,)."""
        return np.prod(self.slot_zero, axis=1) @ self.values


def _root_to_leaf_paths(tree: Tree) -> tuple[list[int], list[list[tuple[int, bool]]]]:
    """Every leaf with the ``(node, goes_left)`` splits on its path, in depth-first order."""
    left = tree.nodes["left_child"]
    leaves: list[int] = []
    paths: list[list[tuple[int, bool]]] = []
    stack: list[tuple[int, list[tuple[int, bool]]]] = [(0, [])]
    while stack:
        node, path = stack.pop()
        if left[node] < 0:
            leaves.append(node)
            paths.append(path)
            continue
        stack.append((int(left[node]) + 1, [*path, (node, False)]))
        stack.append((int(left[node]), [*path, (node, True)]))
    return leaves, paths


def leaf_groups(tree: Tree) -> list[LeafPaths]:
    """The tree's leaves in groups of similar path length (``SLOT_GROUP`` slots wide).

    Padding every path to the longest one would cost up to ``(max_slots / slots)²`` times
    the work on the short paths of deep trees; a handful of groups bounds that waste.
    """
    feature = tree.nodes["feature"]
    leaves, paths = _root_to_leaf_paths(tree)
    slot_lists = [list(dict.fromkeys(int(feature[node]) for node, _ in path)) for path in paths]
    groups: dict[int, list[int]] = {}
    for leaf, slots in enumerate(slot_lists):
        groups.setdefault((len(slots) - 1) // SLOT_GROUP, []).append(leaf)
    return [
        _leaf_paths(
            tree,
            [leaves[i] for i in members],
            [paths[i] for i in members],
            [slot_lists[i] for i in members],
        )
        for _, members in sorted(groups.items())
    ]


def _leaf_paths(
    tree: Tree,
    leaves: list[int],
    paths: list[list[tuple[int, bool]]],
    slot_lists: list[list[int]],
) -> LeafPaths:
    """Pad the given leaves' paths into arrays and fold cover ratios into zero fractions."""
    nodes = tree.nodes
    cover = nodes["weighted_n_samples"].astype(np.float64)
    children = nodes["left_child"].astype(np.intp)
    feature = nodes["feature"].astype(np.intp)
    n_leaves, n_splits = len(leaves), max(len(path) for path in paths)
    split_node = np.zeros((n_leaves, n_splits), dtype=np.intp)
    split_left = np.zeros((n_leaves, n_splits), dtype=bool)
    for leaf, path in enumerate(paths):
        for k, (node, goes_left) in enumerate(path):
            split_node[leaf, k] = node
            split_left[leaf, k] = goes_left
    n_slots = max(len(slots) for slots in slot_lists)
    is_split = np.arange(n_splits)[None, :] < np.array([len(p) for p in paths])[:, None]
    child = children[split_node] + ~split_left
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = cover[child] / cover[split_node]
    split_ratio = np.where(is_split, np.nan_to_num(ratio, nan=0.0, posinf=0.0), 1.0)

    slot_feature = np.zeros((n_leaves, n_slots), dtype=np.intp)
    slot_used = np.zeros((n_leaves, n_slots), dtype=bool)
    split_slot = np.full((n_leaves, n_splits), n_slots, dtype=np.intp)
    for leaf, slots in enumerate(slot_lists):
        slot_feature[leaf, : len(slots)] = slots
        slot_used[leaf, : len(slots)] = True
        position = {f: i for i, f in enumerate(slots)}
        split_slot[leaf, : len(paths[leaf])] = [position[int(feature[n])] for n, _ in paths[leaf]]
    slot_zero = np.ones((n_leaves, n_slots + 1))
    np.multiply.at(slot_zero, (np.arange(n_leaves)[:, None], split_slot), split_ratio)
    slot_zero = slot_zero[:, :n_slots]

    used = np.flatnonzero(slot_used.ravel())
    order = used[np.argsort(slot_feature.ravel()[used], kind="stable")]
    features = slot_feature.ravel()[order]
    starts = np.flatnonzero(np.r_[True, features[1:] != features[:-1]])
    return LeafPaths(
        values=tree.values[np.asarray(leaves, dtype=np.intp)].astype(np.float64),
        split_node=split_node,
        split_left=split_left,
        split_slot=split_slot,
        slot_used=slot_used,
        slot_zero=slot_zero,
        scatter_order=order,
        scatter_starts=starts,
        scatter_features=features[starts],
    )


def route_rows(tree: Tree, X: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Whether each row goes left at each node, shape (n_nodes, n_samples).

    Mirrors :meth:`Tree.apply` (threshold, missing values, category bitsets) for every
    internal node at once; the rows of leaves are meaningless.
    """
    nodes = tree.nodes
    feature = np.maximum(nodes["feature"], 0).astype(np.intp)
    values = X[:, feature].T
    goes_left = values <= nodes["threshold"][:, None]
    missing = np.isnan(values)
    if missing.any():
        missing_left = np.broadcast_to(nodes["missing_left"].astype(bool)[:, None], values.shape)
        goes_left[missing] = missing_left[missing]
    split = nodes["category_split"]
    for node in np.flatnonzero((split >= 0) & (nodes["left_child"] >= 0)):
        codes = values[node]
        known = ~np.isnan(codes)
        code = np.where(known, codes, 0).astype(np.intp)
        bits = tree.category_bitsets[split[node], code >> 3]
        in_left = ((bits >> (code & 7)) & 1).astype(bool)
        goes_left[node] = np.where(known, in_left, bool(nodes["missing_left"][node]))
    return goes_left


def _follows(paths: LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Whether each row takes the path's direction at each split, (n_leaves, n_splits, n)."""
    return goes_left[paths.split_node] == paths.split_left[:, :, None]


def row_ones(paths: LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """One fractions ``o`` per (leaf, slot, row): the row follows every split of the slot."""
    follows = _follows(paths, goes_left)
    one = np.ones((paths.n_leaves, paths.n_slots + 1, goes_left.shape[1]), dtype=bool)
    leaf = np.arange(paths.n_leaves)
    for k in range(paths.split_node.shape[1]):
        one[leaf, paths.split_slot[:, k]] &= follows[:, k]
    return one[:, : paths.n_slots] & paths.slot_used[:, :, None]


def row_codes(paths: LeafPaths, goes_left: NDArray[np.bool_]) -> NDArray[np.int64]:
    """The one fractions of each (leaf, row) as a bit pattern (bit s: slot s), (n_leaves, n)."""
    follows = _follows(paths, goes_left)
    missed = np.zeros((paths.n_leaves, goes_left.shape[1]), dtype=np.int64)
    for k in range(paths.split_node.shape[1]):
        missed |= (~follows[:, k]).astype(np.int64) << paths.split_slot[:, k, None]
    bit = np.int64(1) << np.arange(paths.n_slots, dtype=np.int64)
    in_use = (paths.slot_used * bit).sum(axis=1)
    return in_use[:, None] & ~missed
