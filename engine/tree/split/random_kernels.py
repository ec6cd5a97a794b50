"""Compiled split search for extremely randomised trees (numeric features).

Geurts, Ernst & Wehenkel (2006): every candidate feature of a node gets one threshold drawn
uniformly between the smallest and largest value present in the node, and the node keeps the
best of these random cuts. Per (node, feature) that takes two passes over the node's codes —
their range, then the channel sums left, right and missing of the drawn cut
(:mod:`engine.tree.split.random_cut_kernels`) — and no sorting. The uniform draws come from the
tree's generator in the caller, in the same order as the NumPy twin
(:func:`engine.tree.split.random_vectorised.find_random_splits`) draws them, so both grow the same
trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel, kernel
from engine.tree.split.random_cut_kernels import (
    _code_range,
    _cut_bin,
    _cut_gain,
    _side_sums,
    _two_channel_sums,
)
from engine.tree.split.scan_kernels import node_score

__all__ = ["best_random_cut", "gather_codes", "search_random_level", "search_random_rows"]

# A node whose rows span more than this many times its size among all rows is sparse: it
# reads its codes row by row (see search_random_level's ``binned``).
SPARSE_SPAN = 2
# Up to this many rows, a node's side sums compare each row's representative with the drawn
# threshold instead of its code with the cut bin, which only the winning candidate looks up.
SMALL_NODE = 128


@inline_kernel
def gather_codes(
    columns: NDArray[Any],
    binned: NDArray[Any],
    node_rows: NDArray[np.intp],
    features: NDArray[np.int64],
    code_buffer: NDArray[Any],
) -> None:
    """Each candidate ``features[j]``'s codes of a node's rows into ``code_buffer[j]``
    (−1 candidates skipped).

    A node whose rows span more than :data:`SPARSE_SPAN` times its size among all rows reads
    each row's candidates from its one record of ``binned`` (row-major; one cache miss a
    row, not one a candidate), as scikit-learn's splitter reads its row-major ``X`` (Louppe
    2014, §5.3); a dense node, or any node when ``binned`` is empty, reads each candidate's
    column of ``columns`` (feature-major), in order.
    """
    size = node_rows.size
    n_per_node = features.size
    sparse = size > 0 and node_rows[size - 1] - node_rows[0] >= SPARSE_SPAN * size
    if sparse and binned.shape[0] > 0:
        for i in range(size):
            record = binned[node_rows[i]]
            for j in range(n_per_node):
                if features[j] >= 0:
                    code_buffer[j, i] = record[features[j]]
    else:
        for j in range(n_per_node):
            if features[j] >= 0:
                codes = columns[features[j]]
                for i in range(size):
                    code_buffer[j, i] = codes[node_rows[i]]


@inline_kernel
def best_random_cut(
    code_buffer: NDArray[Any],
    size: int,
    features: NDArray[np.int64],
    uniforms: NDArray[np.float64],
    node_channels: NDArray[np.float64],
    node_classes: NDArray[np.int64],
    parent: NDArray[np.float64],
    parent_count: float,
    parent_score: float,
    settings: NDArray[np.float64],
    bin_values: NDArray[np.float64],
    n_bins: NDArray[np.int32],
    missing_code: int,
    sides: NDArray[np.float64],
    left: NDArray[np.float64],
    right: NDArray[np.float64],
) -> tuple[float, int, int, bool, int]:
    """The best random cut of one node's candidates ``features`` (−1 skipped), their codes
    gathered in ``code_buffer`` (:func:`gather_codes`), ``uniforms[j]`` placing candidate
    ``j``'s threshold: gain (−inf if none is valid), feature, cut bin, whether missing rows
    go left, and the winner's ``j``. ``sides``, ``left`` and ``right`` are scratch."""
    n_channels = parent.size
    criterion, l1, l2 = int(settings[0]), settings[1], settings[2]
    min_samples_leaf, min_weight_leaf = settings[4], settings[5]
    best_gain, best_feature, best_cut, best_missing_left = -np.inf, -1, 0, False
    best_j, best_threshold, best_known = 0, 0.0, True
    for j in range(features.size):
        feature = features[j]
        if feature < 0:
            continue
        node_codes = code_buffer[j, :size]
        low, high, n_missing = _code_range(node_codes, missing_code)
        if high < 0:
            continue  # every row missing: no present value to cut between
        low_value = bin_values[feature, min(low, missing_code - 1)]
        high_value = bin_values[feature, high]
        threshold = low_value + uniforms[j] * (high_value - low_value)
        if (
            size <= SMALL_NODE
            and n_channels == 2
            and n_missing == 0
            and high > low
            and threshold < high_value
        ):
            # A small node compares its rows' representatives with the threshold: the
            # same rows go left as with the cut bin (the last representative ≤
            # threshold lies in [low, high) here), and the cut's binary search, a
            # chain of dependent loads, is left to the winner.
            cut = -1
            _two_channel_sums(
                node_codes, 0, False, node_channels, sides[0], bin_values[feature], threshold
            )
            sides[2, 0] = 0.0
        else:
            # A cut at or past the largest present bin would leave no present value on
            # the right: that happens only when the node's values are all equal.
            cut = min(_cut_bin(bin_values[feature], n_bins[feature], threshold), high - 1)
            if cut < low:
                continue
            _side_sums(node_codes, cut, missing_code, n_missing, node_channels, node_classes, sides)
        cut_gain, left_weight, right_weight = _cut_gain(
            sides,
            False,
            parent,
            parent_count,
            parent_score,
            criterion,
            l1,
            l2,
            min_samples_leaf,
            min_weight_leaf,
            left,
            right,
        )
        has_missing = sides[2, 0] > 0
        goes_left = left_weight >= right_weight  # no missing rows: the heavier child
        if has_missing:
            goes_left = False
            with_missing, _, _ = _cut_gain(
                sides,
                True,
                parent,
                parent_count,
                parent_score,
                criterion,
                l1,
                l2,
                min_samples_leaf,
                min_weight_leaf,
                left,
                right,
            )
            if with_missing > cut_gain:
                cut_gain, goes_left = with_missing, True
        if cut_gain > best_gain:
            best_gain, best_feature, best_cut = cut_gain, feature, max(cut, 0)
            best_missing_left, best_j = goes_left, j
            best_threshold, best_known = threshold, cut >= 0
    if np.isfinite(best_gain) and not best_known:
        best_cut = _cut_bin(bin_values[best_feature], n_bins[best_feature], best_threshold)
    return best_gain, best_feature, best_cut, best_missing_left, best_j


@kernel
def search_random_rows(
    columns: NDArray[Any],
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    features: NDArray[np.int64],
    channels: NDArray[np.float64],
    classes: NDArray[np.int64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    bin_values: NDArray[np.float64],
    n_bins: NDArray[np.int32],
    uniforms: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
) -> None:
    """Best random cut of each node's candidate features, channels read by row.

    ``uniforms[j · S + s]`` is the draw of node ``s``'s ``j``-th candidate (the twin's
    feature-major segment order); ``settings`` as for
    :func:`engine.tree.split.search_kernels.search_rows`. With ``classes`` non-empty, ``channels``
    is one column of row weights added to the row's class. The rows' channels are gathered
    into the order of ``rows`` once, then searched by :func:`search_random_level`.
    """
    n_channels = parents.shape[1]
    by_class = classes.size > 0
    level_channels = np.zeros((rows.size, n_channels))
    level_classes = np.empty(rows.size if by_class else 0, dtype=np.int64)
    for i in range(rows.size):
        row = rows[i]
        if by_class:
            level_classes[i] = classes[row]
            level_channels[i, classes[row]] = channels[row, 0]
        else:
            for c in range(n_channels):
                level_channels[i, c] = channels[row, c]
    search_random_level(
        columns,
        np.empty((0, columns.shape[0]), dtype=columns.dtype),
        rows,
        node_start,
        np.arange(features.shape[0]),
        features,
        level_channels,
        level_classes,
        parents,
        parent_counts,
        settings,
        bin_values,
        n_bins,
        uniforms,
        missing_code,
        found,
        gain,
        split_feature,
        split_bin,
        missing_left,
        left_codes,
        np.zeros(0, dtype=np.bool_),
    )


@kernel
def search_random_level(
    columns: NDArray[Any],
    binned: NDArray[Any],
    rows: NDArray[np.intp],
    node_start: NDArray[np.intp],
    nodes: NDArray[np.intp],
    features: NDArray[np.int64],
    level_channels: NDArray[np.float64],
    level_classes: NDArray[np.int64],
    parents: NDArray[np.float64],
    parent_counts: NDArray[np.float64],
    settings: NDArray[np.float64],
    bin_values: NDArray[np.float64],
    n_bins: NDArray[np.int32],
    uniforms: NDArray[np.float64],
    missing_code: int,
    found: NDArray[np.bool_],
    gain: NDArray[np.float64],
    split_feature: NDArray[np.int64],
    split_bin: NDArray[np.int64],
    missing_left: NDArray[np.bool_],
    left_codes: NDArray[np.bool_],
    row_right: NDArray[np.bool_],
) -> None:
    """Best random cut of the candidate features of some nodes of a level.

    Parameters
    ----------
    columns : ndarray of uint8 or uint16, shape (n_features, n_rows)
        Bin codes, feature-major.
    binned : ndarray of uint8 or uint16, shape (n_rows, n_features) or (0, n_features)
        The same codes row-major (or none): a node whose rows are sparse among all rows
        reads each row's candidates from its one record (one cache miss a row, not one a
        candidate), as scikit-learn's splitter reads its row-major ``X`` (Louppe 2014,
        §5.3); a dense node reads each candidate's column, in order.
    rows : ndarray of intp, shape (n,)
        The level's rows, grouped by node slot: slot ``s`` holds
        ``rows[node_start[s]:node_start[s + 1]]``.
    nodes : ndarray of intp, shape (K,)
        The slots searched; entry ``k`` of every output and of ``features``, ``parents`` and
        ``parent_counts`` belongs to slot ``nodes[k]``.
    level_channels : ndarray of float64, shape (n, C)
        The channels of ``rows[i]`` at position ``i`` (weighted one-hot classes, or
        ``(w, w·y)``): kept in the level's order as the rows move, so a node reads its
        channels front to back instead of gathering them from scattered rows.
    level_classes : ndarray of int64, shape (n,) or (0,)
        Class of ``rows[i]`` (classification), read when there are more than
        :data:`engine.tree.split.random_cut_kernels.ONE_HOT_CLASSES` classes.
    uniforms : ndarray of float64, shape (K · n_per_node,)
        ``uniforms[j · K + k]`` places the threshold of node ``k``'s ``j``-th candidate
        between the node's smallest and largest value (Geurts et al. 2006).
    row_right : ndarray of bool, shape (n,) or (0,)
        Set, for the rows of each node a split was found for, to whether the split sends
        the row right (``not left_codes[k, code]``): the search holds the winning feature's
        codes in order already, so the partition need not read them from scattered rows
        again. Left alone for other rows; not written when empty.
    """
    n_nodes, n_per_node = features.shape
    n_channels = parents.shape[1]
    criterion, l1, l2 = int(settings[0]), settings[1], settings[2]
    sides = np.zeros((3, 1 + n_channels))  # left, (unused), missing: count then channel sums
    left = np.empty(n_channels)
    right = np.empty(n_channels)
    node_uniforms = np.empty(n_per_node)
    # Each candidate's codes of a node, gathered into a contiguous buffer: the gather is the
    # one scattered read of a candidate, and the side sums then read the buffer in order, as
    # does the winner's row_right.
    largest = 0
    for k in range(n_nodes):
        largest = max(largest, node_start[nodes[k] + 1] - node_start[nodes[k]])
    code_buffer = np.empty((n_per_node, largest), dtype=columns.dtype)
    for k in range(n_nodes):
        slot = nodes[k]
        start, stop = node_start[slot], node_start[slot + 1]
        size = stop - start
        node_classes = level_classes[start:stop] if level_classes.size > 0 else level_classes
        parent = parents[k]
        parent_score = node_score(parent, criterion, l1, l2, 0.0, -np.inf, np.inf, False)
        gather_codes(columns, binned, rows[start:stop], features[k], code_buffer)
        for j in range(n_per_node):
            node_uniforms[j] = uniforms[j * n_nodes + k]
        best_gain, best_feature, best_cut, best_missing_left, best_j = best_random_cut(
            code_buffer,
            size,
            features[k],
            node_uniforms,
            level_channels[start:stop],
            node_classes,
            parent,
            parent_counts[k],
            parent_score,
            settings,
            bin_values,
            n_bins,
            missing_code,
            sides,
            left,
            right,
        )
        found[k] = np.isfinite(best_gain)
        if not found[k]:
            gain[k], split_feature[k], split_bin[k] = 0.0, -1, 0
            missing_left[k] = False
            left_codes[k, :] = False
            continue
        gain[k] = max(best_gain, 0.0)
        split_feature[k], split_bin[k] = best_feature, best_cut
        missing_left[k] = best_missing_left
        for bin_code in range(left_codes.shape[1]):
            left_codes[k, bin_code] = bin_code <= best_cut
        left_codes[k, missing_code] = best_missing_left
        if row_right.size > 0:
            best_codes = code_buffer[best_j, :size]
            for i in range(size):
                code = best_codes[i]
                row_right[start + i] = (
                    not best_missing_left if code == missing_code else code > best_cut
                )
