"""The small nodes of an extremely randomised tree, each grown to its leaves in one compiled
call, depth first, as scikit-learn grows a whole tree.

scikit-learn's ``DepthFirstTreeBuilder`` (``sklearn/tree/_tree.pyx``) keeps a node's samples
as one range of an array it partitions in place, pops nodes from a stack and tests a node's
leaf rules before searching it, so it allocates nothing per node and spends no time between
levels (Louppe 2014, §5.3). The level loop of :mod:`engine.tree.grow.random_levels` pays a
round of Python per level for every level of a full-depth tree (statistics, records,
accepted splits, partitions), while its deep levels hold many nodes of a few rows each. So
once a node has at most :data:`~engine.tree.grow.random_levels.SUBTREE_ROWS` rows, its
whole subtree grows here: its rows,
channels and classes copied once into buffers of the call, each node searched on its own
range with the level search's own pieces
(:func:`~engine.tree.split.random_kernels.gather_codes`,
:func:`~engine.tree.split.random_kernels.best_random_cut`), and split by a stable partition
of that range, the children's totals summed in their rows' order.

Every number is the level loop's: a node's draws come from its key
(:mod:`engine.tree.grow.node_keys`), not from the order nodes are visited in; its rows keep
their order, so its sums add the same numbers in the same order; its leaf rules, variances,
accepted gains and children's keys are the level loop's expressions. The tree is therefore
the one the level loop grows alone, node for node (its nodes renumbered level by level at the
end): the level loop is this kernel's twin, which ``COPPICE_ENGINE_KERNELS=numpy`` runs and
the tests hold equal to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel
from engine.tree._criterion_kernels import GINI
from engine.tree.grow.node_keys import _child_key, _draw_key, _uniform
from engine.tree.split.random_kernels import best_random_cut, gather_codes
from engine.tree.split.scan_kernels import node_score

__all__ = ["grow_subtrees"]

# Nodes whose impurity is below this are pure (engine.tree.grow.growth.IMPURITY_EPSILON).
_EPSILON = 1e-12


@kernel
def grow_subtrees(
    columns: NDArray[Any],
    binned: NDArray[Any],
    rows: NDArray[np.intp],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    targets: NDArray[np.float64],
    starts: NDArray[np.intp],
    stops: NDArray[np.intp],
    keys: NDArray[np.uint64],
    depth: int,
    root_totals: NDArray[np.float64],
    pool: NDArray[np.int64],
    per_round: int,
    settings: NDArray[np.float64],
    limits: NDArray[np.float64],
    bin_values: NDArray[np.float64],
    n_bins: NDArray[np.int32],
    missing_code: int,
    node_totals: NDArray[np.float64],
    node_counts: NDArray[np.int64],
    node_depth: NDArray[np.int64],
    node_squared: NDArray[np.float64],
    node_feature: NDArray[np.int64],
    node_bin: NDArray[np.int64],
    node_missing_left: NDArray[np.bool_],
    node_left: NDArray[np.int64],
    leaf_rows: NDArray[np.intp],
    leaf_nodes: NDArray[np.int64],
) -> int:
    """Grow the subtrees of a level's small open nodes to their leaves; return their nodes'
    number.

    Parameters
    ----------
    columns, binned
        The tree's codes feature-major (F, n), and row-major (n, F) or (0, F).
    rows, level_channels, level_classes
        The level's rows with their channels (and classes, or empty), as the level search
        takes them; node ``s`` holds positions ``starts[s]:stops[s]``. Only read.
    targets : ndarray of float64, shape (n,) or (0,)
        Each row's target (regression, whose impurity is the two-pass variance), or empty
        (classification: gini or entropy from the class weights).
    keys : ndarray of uint64, shape (S,)
        The nodes' keys (:mod:`engine.tree.grow.node_keys`).
    depth : int
        The nodes' depth; they are open (their leaf rules passed).
    root_totals : ndarray of float64, shape (S, C)
    pool, per_round
        The candidate features and how many of them a node searches at a time.
    settings : ndarray of float64
        As the level search's (criterion, l1, l2, _, min_samples_leaf, min_weight_leaf).
    limits : ndarray of float64
        max_depth (−1: none), min_samples_split, min_samples_leaf, min_weight_leaf,
        min_impurity_decrease, the root's weight.

    Outputs (node ``s < S`` is the level's ``s``-th node; each split appends its two
    children, left then right): ``node_totals``, ``node_counts``, ``node_depth``,
    ``node_squared`` (regression's Σ w (y − ȳ)², nodes ≥ S), ``node_feature`` (−1: a
    leaf), ``node_bin``, ``node_missing_left``, ``node_left`` (−1: a leaf); and each row of
    the nodes with its leaf, ``leaf_rows[i]`` in ``leaf_nodes[i]``.
    """
    n_roots = starts.size
    n_channels = level_channels.shape[1]
    regression = targets.size > 0
    criterion, l1, l2 = int(settings[0]), settings[1], settings[2]
    max_depth = int(limits[0])
    min_samples_split, min_samples_leaf, min_weight_leaf = limits[1], limits[2], limits[3]
    min_decrease, root_weight = limits[4], limits[5]
    n_pool = pool.size
    width = min(per_round, n_pool)

    # The nodes' rows, channels and classes, copied once; each node is a range of them.
    n_work = 0
    largest = 0
    for s in range(n_roots):
        n_work += stops[s] - starts[s]
        largest = max(largest, stops[s] - starts[s])
    work_rows = np.empty(n_work, dtype=np.intp)
    work_channels = np.empty((n_work, n_channels))
    by_class = level_classes.size > 0
    work_classes = np.empty(n_work if by_class else 0, dtype=np.int64)
    spare_rows = np.empty(largest, dtype=np.intp)
    spare_channels = np.empty((largest, n_channels))
    spare_classes = np.empty(largest if by_class else 0, dtype=np.int64)
    code_buffer = np.empty((width, largest), dtype=columns.dtype)
    sides = np.zeros((3, 1 + n_channels))
    left = np.empty(n_channels)
    right = np.empty(n_channels)
    uniforms = np.empty(width)
    features = np.empty(width, dtype=np.int64)
    order = np.empty(n_pool, dtype=np.int64)
    stack_node = np.empty(largest + n_roots + 64, dtype=np.int64)
    stack_start = np.empty_like(stack_node)
    stack_key = np.empty(stack_node.size, dtype=np.uint64)

    n_nodes = n_roots
    n_stack = 0
    at = 0
    for s in range(n_roots):
        size = stops[s] - starts[s]
        work_rows[at : at + size] = rows[starts[s] : stops[s]]
        work_channels[at : at + size] = level_channels[starts[s] : stops[s]]
        if by_class:
            work_classes[at : at + size] = level_classes[starts[s] : stops[s]]
        node_totals[s] = root_totals[s]
        node_counts[s] = size
        node_depth[s] = depth
        node_squared[s] = 0.0
        stack_node[n_stack], stack_start[n_stack], stack_key[n_stack] = s, at, keys[s]
        n_stack += 1
        at += size
    # Roots pushed in order and popped last first: visit them first to last.
    stack_node[:n_stack] = stack_node[:n_stack][::-1].copy()
    stack_start[:n_stack] = stack_start[:n_stack][::-1].copy()
    stack_key[:n_stack] = stack_key[:n_stack][::-1].copy()

    while n_stack > 0:
        n_stack -= 1
        node, start, key = stack_node[n_stack], stack_start[n_stack], stack_key[n_stack]
        size = node_counts[node]
        stop = start + size
        totals = node_totals[node]
        node_feature[node], node_bin[node], node_left[node] = -1, 0, -1
        node_missing_left[node] = False
        if node >= n_roots:  # the level loop tested the roots' leaf rules already
            if regression:
                weight = totals[0]
                mean = totals[1] / weight
                squared = 0.0
                for i in range(start, stop):
                    deviation = targets[work_rows[i]] - mean
                    squared += work_channels[i, 0] * (deviation * deviation)
                node_squared[node] = squared
                impurity = squared / weight
            else:
                weight = totals[0]
                for c in range(1, n_channels):
                    weight += totals[c]
                impurity = _class_impurity(totals, criterion)
            if (
                size < min_samples_split
                or size < 2 * min_samples_leaf
                or weight < 2 * min_weight_leaf
                or not impurity > _EPSILON
                or (max_depth >= 0 and node_depth[node] >= max_depth)
            ):
                _mark_leaf(work_rows, start, stop, node, leaf_rows, leaf_nodes)
                continue
        parent_score = node_score(totals, criterion, l1, l2, 0.0, -np.inf, np.inf, False)
        node_rows = work_rows[start:stop]
        node_channels = work_channels[start:stop]
        node_classes = work_classes[start:stop] if by_class else work_classes
        draws = _draw_key(key)
        for p in range(n_pool):
            order[p] = p
        best_gain, best_feature, best_cut, best_missing_left, best_j = -np.inf, -1, 0, False, 0
        for first in range(0, n_pool, per_round):
            n_taken = min(per_round, n_pool - first)
            for step in range(n_taken):
                position = first + step
                if per_round < n_pool:  # Fisher–Yates step, as shuffle_rows takes it
                    u = _uniform(draws, 2 * position + 1)
                    pick = min(position + int(u * (n_pool - position)), n_pool - 1)
                    order[position], order[pick] = order[pick], order[position]
                features[step] = pool[order[position]]
                uniforms[step] = _uniform(draws, 2 * position)
            for step in range(n_taken, width):
                features[step] = -1
            gather_codes(columns, binned, node_rows, features, code_buffer)
            best_gain, best_feature, best_cut, best_missing_left, best_j = best_random_cut(
                code_buffer,
                size,
                features,
                uniforms,
                node_channels,
                node_classes,
                totals,
                np.float64(size),
                parent_score,
                settings,
                bin_values,
                n_bins,
                missing_code,
                sides,
                left,
                right,
            )
            if np.isfinite(best_gain):
                break
        if not np.isfinite(best_gain) or not (
            max(best_gain, 0.0) / root_weight + _EPSILON >= min_decrease
        ):
            _mark_leaf(work_rows, start, stop, node, leaf_rows, leaf_nodes)
            continue
        # Split: the rows of the left child first, then the right's, each in order.
        best_codes = code_buffer[best_j]
        n_left = 0
        n_right = 0
        for i in range(size):
            code = best_codes[i]
            goes_right = (not best_missing_left) if code == missing_code else code > best_cut
            if goes_right:
                spare_rows[n_right] = node_rows[i]
                for c in range(n_channels):
                    spare_channels[n_right, c] = node_channels[i, c]
                if by_class:
                    spare_classes[n_right] = node_classes[i]
                n_right += 1
            else:
                node_rows[n_left] = node_rows[i]
                for c in range(n_channels):
                    node_channels[n_left, c] = node_channels[i, c]
                if by_class:
                    node_classes[n_left] = node_classes[i]
                n_left += 1
        node_rows[n_left:] = spare_rows[:n_right]
        node_channels[n_left:] = spare_channels[:n_right]
        if by_class:
            node_classes[n_left:] = spare_classes[:n_right]
        child = n_nodes
        n_nodes += 2
        node_feature[node], node_bin[node] = best_feature, best_cut
        node_missing_left[node], node_left[node] = best_missing_left, child
        for side in range(2):
            begin = 0 if side == 0 else n_left
            end = n_left if side == 0 else size
            for c in range(n_channels):
                total = 0.0
                for i in range(begin, end):
                    total += node_channels[i, c]
                node_totals[child + side, c] = total
            node_counts[child + side] = end - begin
            node_depth[child + side] = node_depth[node] + 1
            node_squared[child + side] = 0.0
        # Right pushed first: the left child grows first.
        stack_node[n_stack], stack_start[n_stack] = child + 1, start + n_left
        stack_key[n_stack] = _child_key(key, True)
        stack_node[n_stack + 1], stack_start[n_stack + 1] = child, start
        stack_key[n_stack + 1] = _child_key(key, False)
        n_stack += 2
    return n_nodes


@inline_kernel
def _mark_leaf(
    work_rows: NDArray[np.intp],
    start: int,
    stop: int,
    node: int,
    leaf_rows: NDArray[np.intp],
    leaf_nodes: NDArray[np.int64],
) -> None:
    for i in range(start, stop):
        leaf_rows[i] = work_rows[i]
        leaf_nodes[i] = node


@inline_kernel
def _class_impurity(totals: NDArray[np.float64], criterion: int) -> float:
    """Gini or entropy (base 2) of class weights, as :func:`engine.tree._criteria.impurity`."""
    weight = 0.0
    for c in range(totals.size):
        weight += totals[c]
    if not weight > 0:
        return 0.0
    result = 0.0
    for c in range(totals.size):
        p = totals[c] / weight
        if criterion == GINI:
            result += p * p
        elif p > 0:
            result -= p * np.log2(p)
    return 1.0 - result if criterion == GINI else result
