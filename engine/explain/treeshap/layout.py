"""A tree's root-to-leaf paths as flat arrays, for the TreeSHAP kernels (Numba, tree only).

:func:`leaf_paths` flattens every root-to-leaf path into CSR arrays: per leaf its splits, root
first, and its *slots* (the distinct features on the path, in order of first appearance from
the root, so every leaf below a node numbers the node's ancestors' features alike) with
their zero fractions ``z`` (Lundberg et al. 2020, Algorithm 2). :func:`feature_columns`
numbers the features the tree splits on, which :func:`kernels.add_tree_shap` keeps buffers
for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel

__all__ = ["feature_columns", "leaf_paths"]


@kernel
def leaf_paths(
    left_child: NDArray[np.integer[Any]],
    feature: NDArray[np.integer[Any]],
    cover: NDArray[np.float64],
) -> tuple[
    NDArray[np.intp],
    NDArray[np.intp],
    NDArray[np.intp],
    NDArray[np.uint8],
    NDArray[np.intp],
    NDArray[np.intp],
    NDArray[np.intp],
    NDArray[np.float64],
]:
    """Every root-to-leaf path, flattened (leaves in depth-first order, left first).

    Returns ``leaf_node``; the splits of leaf ``i`` at ``split_start[i]:split_start[i+1]``,
    root first, as ``split_node``, ``split_left`` (whether the path goes left there) and
    ``split_slot`` (the split's slot, numbered within the leaf); the slots of leaf ``i`` at
    ``slot_start[i]:slot_start[i+1]`` as ``slot_feature`` and ``slot_zero`` (``z``: the
    product of the slot's cover ratios, where a node without cover gives 0).
    """
    n_nodes = left_child.shape[0]
    parent = np.full(n_nodes, -1, np.intp)
    went_left = np.zeros(n_nodes, np.uint8)
    depth = np.zeros(n_nodes, np.intp)
    leaves = np.empty(n_nodes, np.intp)
    stack = np.empty(n_nodes + 1, np.intp)
    stack[0] = 0
    top, n_leaves, n_splits = 1, 0, 0
    while top > 0:
        top -= 1
        node = stack[top]
        left = np.intp(left_child[node])
        if left < 0:
            leaves[n_leaves] = node
            n_leaves += 1
            n_splits += depth[node]
            continue
        for child in (left + 1, left):  # the left child is popped first
            parent[child] = node
            went_left[child] = child == left
            depth[child] = depth[node] + 1
            stack[top] = child
            top += 1

    split_start = np.zeros(n_leaves + 1, np.intp)
    for i in range(n_leaves):
        split_start[i + 1] = split_start[i] + depth[leaves[i]]
    split_node = np.empty(n_splits, np.intp)
    split_left = np.empty(n_splits, np.uint8)
    split_slot = np.empty(n_splits, np.intp)
    slot_start = np.zeros(n_leaves + 1, np.intp)
    slot_feature = np.empty(n_splits, np.intp)
    slot_zero = np.empty(n_splits, np.float64)
    n_slots = 0
    for i in range(n_leaves):
        start = split_start[i]
        node = leaves[i]
        for k in range(depth[node] - 1, -1, -1):
            split_node[start + k] = parent[node]
            split_left[start + k] = went_left[node]
            node = parent[node]
        first = n_slots
        for k in range(start, split_start[i + 1]):
            node = split_node[k]
            child = left_child[node] + 1 - split_left[k]
            ratio = cover[child] / cover[node] if cover[node] > 0 else 0.0
            slot = first
            while slot < n_slots and slot_feature[slot] != feature[node]:
                slot += 1
            if slot == n_slots:
                slot_feature[slot] = feature[node]
                slot_zero[slot] = 1.0
                n_slots += 1
            slot_zero[slot] *= ratio
            split_slot[k] = slot - first
        slot_start[i + 1] = n_slots
    return (
        leaves[:n_leaves].copy(),
        split_start,
        split_node,
        split_left,
        split_slot,
        slot_start,
        slot_feature[:n_slots].copy(),
        slot_zero[:n_slots].copy(),
    )


@kernel
def feature_columns(
    left_child: NDArray[np.integer[Any]],
    feature: NDArray[np.integer[Any]],
    slot_feature: NDArray[np.intp],
    n_features: int,
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """The features the tree splits on, ascending, and each internal node's and each slot's
    index among them (leaves get 0): the kernels keep per-feature buffers for those only."""
    column_of = np.full(n_features, -1, np.intp)
    for node in range(left_child.shape[0]):
        if left_child[node] >= 0:
            column_of[feature[node]] = 0
    n_used = 0
    for f in range(n_features):
        if column_of[f] == 0:
            column_of[f] = n_used
            n_used += 1
    used_features = np.empty(n_used, np.intp)
    for f in range(n_features):
        if column_of[f] >= 0:
            used_features[column_of[f]] = f
    node_column = np.zeros(left_child.shape[0], np.intp)
    for node in range(left_child.shape[0]):
        if left_child[node] >= 0:
            node_column[node] = column_of[feature[node]]
    slot_column = np.empty(slot_feature.shape[0], np.intp)
    for slot in range(slot_feature.shape[0]):
        slot_column[slot] = column_of[slot_feature[slot]]
    return used_features, node_column, slot_column
