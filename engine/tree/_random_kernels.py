"""Compiled split search for extremely randomised trees (numeric features).

Geurts, Ernst & Wehenkel (2006): every candidate feature of a node gets one threshold drawn
uniformly between the smallest and largest value present in the node, and the node keeps the
best of these random cuts. Per (node, feature) that takes two passes over the node's codes —
their range, then the channel sums left, right and missing of the drawn cut — and no sorting.
The uniform draws come from the tree's generator in the caller, in the same order as the
NumPy twin (:func:`engine.tree._random_splitter.find_random_splits`) draws them, so both grow
the same trees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import kernel
from engine.tree._criterion_kernels import class_score, class_weight, pair_score, pair_weight
from engine.tree._scan_kernels import node_score

__all__ = ["search_random_rows"]


@kernel
def _cut_gain(
    sides: NDArray[np.float64],
    with_missing: bool,
    parent: NDArray[np.float64],
    parent_count: float,
    parent_score: float,
    criterion: int,
    l1: float,
    l2: float,
    min_samples_leaf: float,
    min_weight_leaf: float,
    left: NDArray[np.float64],
    right: NDArray[np.float64],
) -> tuple[float, float, float]:
    """Gain of a cut (missing rows right, or left) and the left and right weights."""
    n_channels = parent.size
    left_count = sides[0, 0] + sides[2, 0] if with_missing else sides[0, 0]
    for c in range(n_channels):
        left[c] = sides[0, 1 + c] + sides[2, 1 + c] if with_missing else sides[0, 1 + c]
        right[c] = parent[c] - left[c]
    if n_channels == 2:
        left_weight = pair_weight(left[0], left[1], criterion)
        right_weight = pair_weight(right[0], right[1], criterion)
    else:
        left_weight, right_weight = class_weight(left), class_weight(right)
    right_count = parent_count - left_count
    if (
        left_count < min_samples_leaf
        or right_count < min_samples_leaf
        or not (left_weight > 0 and right_weight > 0)
        or left_weight < min_weight_leaf
        or right_weight < min_weight_leaf
    ):
        return -np.inf, left_weight, right_weight
    if n_channels == 2:
        children = pair_score(left[0], left[1], criterion, l1, l2) + pair_score(
            right[0], right[1], criterion, l1, l2
        )
    else:
        children = class_score(left, criterion) + class_score(right, criterion)
    return children - parent_score, left_weight, right_weight


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
    """Best random cut of each node's candidate features.

    ``uniforms[j · S + s]`` is the draw of node ``s``'s ``j``-th candidate (the twin's
    feature-major segment order); ``settings`` as for
    :func:`engine.tree._search_kernels.search_rows`. With ``classes`` non-empty, ``channels``
    is one column of row weights added to the row's class.
    """
    n_slots, n_per_node = features.shape
    n_channels = parents.shape[1]
    by_class = classes.size > 0
    criterion, l1, l2 = int(settings[0]), settings[1], settings[2]
    min_samples_leaf, min_weight_leaf = settings[4], settings[5]
    sides = np.zeros((3, 1 + n_channels))  # left, right, missing: count then channel sums
    left = np.empty(n_channels)
    right = np.empty(n_channels)
    # A node's channels and one feature's codes, gathered once into contiguous buffers: by
    # deep levels the rows are scattered, and each is read twice per feature.
    largest = 0
    for node in range(n_slots):
        largest = max(largest, node_start[node + 1] - node_start[node])
    width = 1 if by_class else n_channels
    node_channels = np.empty((largest, width))
    node_classes = np.empty(largest if by_class else 0, dtype=np.int64)
    node_codes = np.empty(largest, dtype=np.intp)
    for node in range(n_slots):
        parent = parents[node]
        parent_score = node_score(parent, criterion, l1, l2, 0.0, -np.inf, np.inf, False)
        start, stop = node_start[node], node_start[node + 1]
        size = stop - start
        for i in range(size):
            row = rows[start + i]
            for c in range(width):
                node_channels[i, c] = channels[row, c]
            if by_class:
                node_classes[i] = classes[row]
        best_gain, best_feature, best_cut, best_missing_left = -np.inf, -1, 0, False
        for j in range(n_per_node):
            feature = features[node, j]
            if feature < 0:
                continue
            codes = columns[feature]
            low, high = missing_code, -1
            for i in range(size):
                code = int(codes[rows[start + i]])
                node_codes[i] = code
                low = min(low, code)
                if code != missing_code:
                    high = max(high, code)
            if high < 0:
                continue  # every row missing: no present value to cut between
            low_value = bin_values[feature, min(low, missing_code - 1)]
            high_value = bin_values[feature, high]
            threshold = low_value + uniforms[j * n_slots + node] * (high_value - low_value)
            # The last representative ≤ threshold (searchsorted side="right", minus one).
            lo, hi = 0, int(n_bins[feature])
            while lo < hi:
                middle = (lo + hi) // 2
                if bin_values[feature, middle] <= threshold:
                    lo = middle + 1
                else:
                    hi = middle
            # A cut at or past the largest present bin would leave no present value on
            # the right: that happens only when the node's values are all equal.
            cut = min(lo - 1, high - 1)
            if cut < low:
                continue
            sides[:] = 0.0
            for i in range(size):
                code = node_codes[i]
                side = 2 if code == missing_code else (1 if code > cut else 0)
                sides[side, 0] += 1.0
                if by_class:
                    sides[side, 1 + node_classes[i]] += node_channels[i, 0]
                else:
                    for c in range(n_channels):
                        sides[side, 1 + c] += node_channels[i, c]
            cut_gain, left_weight, right_weight = _cut_gain(
                sides,
                False,
                parents[node],
                parent_counts[node],
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
                    parents[node],
                    parent_counts[node],
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
                best_missing_left = goes_left
        found[node] = np.isfinite(best_gain)
        if not found[node]:
            gain[node], split_feature[node], split_bin[node] = 0.0, -1, 0
            missing_left[node] = False
            left_codes[node, :] = False
            continue
        gain[node] = max(best_gain, 0.0)
        split_feature[node], split_bin[node] = best_feature, best_cut
        missing_left[node] = best_missing_left
        for bin_code in range(left_codes.shape[1]):
            left_codes[node, bin_code] = bin_code <= best_cut
        left_codes[node, missing_code] = best_missing_left
