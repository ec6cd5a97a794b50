"""Compiled best-split search for a batch of nodes, from their rows or from histograms.

:func:`search_rows` builds each (node, candidate feature) histogram from the node's rows into
one reusable table, scans it (:mod:`engine.tree.split.scan_kernels`) and clears only the bins it
touched, so a node of ten rows costs ten rows, not 256 bins: deep forest trees are mostly
such nodes. :func:`search_histograms` scans dense per-node histograms that the grower keeps for
sibling subtraction. Both write the best split of every node into preallocated arrays; the
NumPy twins are :func:`engine.tree.split.vectorised.find_splits` and
:func:`engine.tree.split.vectorised.find_splits_in_histograms`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel
from engine.tree._criterion_kernels import NEWTON
from engine.tree.split.scan_kernels import (
    categorical_order,
    channels_weight,
    node_score,
    present_bins,
    scan_newton_dense,
    scan_scratch,
    scan_segment,
    write_split,
)

__all__ = ["search_histograms", "search_rows"]


# Inlined into the searches: called once per (node, candidate feature), as a real call with
# its eighteen arguments it was three quarters of a deep regression forest's split search
# (1.6 -> 0.4 s for three trees on friedman1).
@inline_kernel
def _search_node(
    node: int,
    cells: NDArray[np.float64],
    n_present: int,
    order: NDArray[np.int64],
    j: int,
    feature: int,
    parent: NDArray[np.float64],
    parent_count: int,
    parent_score: float,
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    monotone: NDArray[np.int8],
    bounds: NDArray[np.float64],
    missing_code: int,
    statistic: NDArray[np.float64],
    scratch: NDArray[np.float64],
    best: NDArray[np.float64],
    best_order: NDArray[np.int64],
) -> None:
    """Scan one segment of ``node`` and keep it in ``best`` if it beats the node's best so far.

    ``best`` holds (gain, j, position, option, left weight, n_present, has missing rows);
    ``best_order`` the winning segment's bins in split order.
    """
    criterion = int(settings[0])
    l1, l2, max_delta_step = settings[1], settings[2], settings[3]
    categorical = is_categorical[feature]
    if categorical:
        categorical_order(order, n_present, cells, parent, criterion, l2, statistic)
    constrained = monotone.size > 0
    constraint = int(monotone[feature]) if constrained else 0
    lower = bounds[node, 0] if constrained else -np.inf
    upper = bounds[node, 1] if constrained else np.inf
    gain, position, option, left_weight = scan_segment(
        order,
        n_present,
        cells,
        missing_code,
        parent,
        parent_count,
        parent_score,
        criterion,
        l1,
        l2,
        max_delta_step,
        int(settings[4]),
        settings[5],
        constraint,
        lower,
        upper,
        constrained,
        scratch,
    )
    has_missing = cells[missing_code, 0] > 0
    _keep_best(
        gain, j, position, option, left_weight, n_present, has_missing, order, best, best_order
    )


@inline_kernel
def _keep_best(
    gain: float,
    j: int,
    position: int,
    option: int,
    left_weight: float,
    n_present: int,
    has_missing: bool,
    order: NDArray[np.int64],
    best: NDArray[np.float64],
    best_order: NDArray[np.int64],
) -> None:
    """Keep a segment's best cut in ``best`` (see :func:`_search_node`) if it beats the
    node's best so far, its bins in split order in ``best_order``."""
    if gain > best[0]:
        best[0], best[1], best[2], best[3], best[4] = gain, j, position, option, left_weight
        best[5] = n_present
        best[6] = 1.0 if has_missing else 0.0
        best_order[:n_present] = order[:n_present]


@kernel
def _finish_node(
    node: int,
    features: NDArray[np.int64],
    parent: NDArray[np.float64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    missing_code: int,
    best: NDArray[np.float64],
    best_order: NDArray[np.int64],
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """Write the node's best split (or "not found") into the output arrays."""
    if not np.isfinite(best[0]):
        found[node], gain[node], split_feature[node], split_bin[node] = False, 0.0, -1, 0
        missing_left[node] = False
        left_codes[node, :] = False
        return
    feature = features[node, int(best[1])]
    if best[6] > 0:
        goes_left = best[3] == 1
    else:
        # No missing rows seen here: at predict time they follow the heavier child.
        goes_left = best[4] >= channels_weight(parent, int(settings[0])) - best[4]
    found[node], gain[node], split_feature[node] = True, max(best[0], 0.0), feature
    missing_left[node] = goes_left
    split_bin[node] = write_split(
        best_order,
        int(best[5]),
        int(best[2]),
        is_categorical[feature],
        goes_left,
        missing_code,
        left_codes[node],
    )


@kernel
def search_rows(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    class_weights: NDArray[np.float64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    monotone: NDArray[np.int8],
    bounds: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """Best split of each node from its rows ``rows[node_start[s]:node_start[s + 1]]``.

    ``columns`` are the bin codes feature-major (``binned.T``): a node's rows are ascending,
    so reading one feature of them walks one column forwards.

    ``settings`` = (criterion code, l1, l2, max_delta_step, min_samples_leaf,
    min_weight_leaf). With ``classes`` non-empty, a row adds its ``class_weights`` entry to
    its class's channel instead of reading its channel vector (one add instead of one per
    class). ``monotone`` is empty when no feature is constrained.
    """
    n_codes = missing_code + 1
    n_slots, n_per_node = features.shape
    n_channels = channels.shape[1]
    by_class = classes.size > 0
    cells = np.zeros((n_codes, 1 + n_channels))  # row count, then channel sums, per bin
    touched = np.empty(n_codes, dtype=np.int64)
    order = np.empty(n_codes, dtype=np.int64)
    best_order = np.empty(n_codes, dtype=np.int64)
    statistic = np.empty(n_codes)
    scratch = scan_scratch(n_codes, n_channels)
    best = np.empty(7)
    constrained = monotone.size > 0
    criterion, l1, l2, max_delta_step = int(settings[0]), settings[1], settings[2], settings[3]
    # A node's channels, gathered once and read by every candidate feature in order (LightGBM's
    # "ordered gradients"): the rows are scattered over the channel array by then.
    largest = 0
    for node in range(n_slots):
        largest = max(largest, node_start[node + 1] - node_start[node])
    node_channels = np.empty((largest, n_channels))
    node_classes = np.empty(largest if by_class else 0, dtype=np.int64)
    for node in range(n_slots):
        parent = parents[node]
        lower = bounds[node, 0] if constrained else -np.inf
        upper = bounds[node, 1] if constrained else np.inf
        parent_score = node_score(
            parent, criterion, l1, l2, max_delta_step, lower, upper, constrained
        )
        best[0] = -np.inf
        start, stop = node_start[node], node_start[node + 1]
        for i in range(stop - start):
            row = rows[start + i]
            if by_class:
                node_classes[i] = classes[row]
                node_channels[i, 0] = class_weights[row]
            else:
                for c in range(n_channels):
                    node_channels[i, c] = channels[row, c]
        for j in range(n_per_node):
            feature = features[node, j]
            if feature < 0:
                continue
            codes = columns[feature]
            n_touched = 0
            for i in range(stop - start):
                code = codes[rows[start + i]]
                if cells[code, 0] == 0:
                    touched[n_touched] = code
                    n_touched += 1
                cells[code, 0] += 1.0
                if by_class:
                    cells[code, 1 + node_classes[i]] += node_channels[i, 0]
                else:
                    for c in range(n_channels):
                        cells[code, 1 + c] += node_channels[i, c]
            if 8 * n_touched >= n_codes:
                n_present = present_bins(cells, missing_code, order)
            else:
                # Insertion sort of the few touched bins, in place: np.sort allocated an
                # array per (node, feature), most of a small node's cost.
                n_present = 0
                for t in range(n_touched):
                    code = touched[t]
                    if code == missing_code:
                        continue
                    k = n_present
                    while k > 0 and order[k - 1] > code:
                        order[k] = order[k - 1]
                        k -= 1
                    order[k] = code
                    n_present += 1
            _search_node(
                node,
                cells,
                n_present,
                order,
                j,
                feature,
                parent,
                parent_counts[node],
                parent_score,
                settings,
                is_categorical,
                monotone,
                bounds,
                missing_code,
                statistic,
                scratch,
                best,
                best_order,
            )
            for i in range(n_touched):
                code = touched[i]
                for c in range(1 + n_channels):
                    cells[code, c] = 0.0
        _finish_node(
            node,
            features,
            parent,
            settings,
            is_categorical,
            missing_code,
            best,
            best_order,
            found,
            gain,
            split_feature,
            split_bin,
            missing_left,
            left_codes,
        )


@kernel
def search_histograms(
    histograms: NDArray[np.float64],
    histogram_of_node: NDArray[np.intp],
    histogram_column: NDArray[np.intp],
    features: NDArray[np.int64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    is_categorical: NDArray[np.bool_],
    monotone: NDArray[np.int8],
    bounds: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """Best split of each node from dense histograms (H, F', codes, 1 + C): per bin the row
    count, then the channel sums (see :func:`engine.tree._histograms.build_histograms`).

    Node ``s`` reads histogram ``histogram_of_node[s]``, its ``j``-th candidate column
    ``histogram_column[j]``: the grower's histograms of a whole level are searched in place,
    without copying out the open nodes' rows or the level's features.
    """
    n_slots, n_per_node = features.shape
    n_codes = histograms.shape[2]
    n_channels = histograms.shape[3] - 1
    order = np.empty(n_codes, dtype=np.int64)
    best_order = np.empty(n_codes, dtype=np.int64)
    statistic = np.empty(n_codes)
    scratch = scan_scratch(n_codes, n_channels)
    best = np.empty(7)
    constrained = monotone.size > 0
    criterion, l1, l2, max_delta_step = int(settings[0]), settings[1], settings[2], settings[3]
    # XGBoost's common case (scan_kernels._scan_newton) on a numeric feature without missing
    # rows: its present bins found in the scan's own pass (scan_newton_dense).
    newton = criterion == NEWTON and not constrained and l1 <= 0 and n_channels == 2
    min_samples_leaf, min_weight_leaf = int(settings[4]), settings[5]
    for node in range(n_slots):
        parent = parents[node]
        lower = bounds[node, 0] if constrained else -np.inf
        upper = bounds[node, 1] if constrained else np.inf
        parent_score = node_score(
            parent, criterion, l1, l2, max_delta_step, lower, upper, constrained
        )
        best[0] = -np.inf
        for j in range(n_per_node):
            feature = features[node, j]
            if feature < 0:
                continue
            cells = histograms[histogram_of_node[node], histogram_column[j]]
            if newton and not is_categorical[feature] and cells[missing_code, 0] == 0:
                n_present, gain_j, position, left_weight = scan_newton_dense(
                    cells,
                    missing_code,
                    order,
                    parent[0],
                    parent[1],
                    parent_counts[node],
                    parent_score,
                    l2,
                    min_samples_leaf,
                    min_weight_leaf,
                    scratch,
                )
                _keep_best(
                    gain_j, j, position, 0, left_weight, n_present, False, order, best, best_order
                )
                continue
            n_present = present_bins(cells, missing_code, order)
            _search_node(
                node,
                cells,
                n_present,
                order,
                j,
                feature,
                parent,
                parent_counts[node],
                parent_score,
                settings,
                is_categorical,
                monotone,
                bounds,
                missing_code,
                statistic,
                scratch,
                best,
                best_order,
            )
        _finish_node(
            node,
            features,
            parent,
            settings,
            is_categorical,
            missing_code,
            best,
            best_order,
            found,
            gain,
            split_feature,
            split_bin,
            missing_left,
            left_codes,
        )
