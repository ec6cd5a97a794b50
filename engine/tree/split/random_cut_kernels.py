"""One random cut of one (node, feature), compiled: what the extra-trees search weighs.

:mod:`engine.tree.split.random_kernels` draws a threshold per candidate feature of a node and keeps
the best cut; the pieces here take a node's codes of one feature and give the range of its
present codes, the bin a drawn threshold falls in, the row count and channel sums of the rows
left of the cut and of the missing rows (the right side is the parent minus the left), and the
gain of the cut with the missing rows sent either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel
from engine.tree._criterion_kernels import class_score, class_weight, pair_score, pair_weight

__all__ = ["ONE_HOT_CLASSES"]

# Up to this many classes, each side's class sums are register sums over the node's one-hot
# channels (one weighted channel per class); with more, each row adds its weight to its class's
# cell instead, one pass whatever the number of classes.
ONE_HOT_CLASSES = 8


# _cut_gain and _side_sums are inlined into the random-cut search, which calls them once per
# (node, candidate): as real calls they cost extra trees a fifth of their fit.
@inline_kernel
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


@inline_kernel
def _side_sums(
    node_codes: NDArray[Any],
    cut: int,
    missing_code: int,
    n_missing: int,
    node_channels: NDArray[np.float64],
    node_classes: NDArray[np.int64],
    sides: NDArray[np.float64],
) -> None:
    """Row count and channel sums of the rows left of ``cut`` (``sides[0]``) and of the
    missing rows (``sides[2]``), each added in row order, as the twin's ``bincount`` does.

    ``node_channels`` (m, C) are the node's rows' channels, in the order of ``node_codes``;
    with ``node_classes`` given and more than :data:`ONE_HOT_CLASSES` channels, row ``i``
    adds ``node_channels[i, node_classes[i]]`` to its class only.

    Each row adds its channels times 1.0 or 0.0: adding ±0.0 leaves a sum bit for bit what
    adding only the side's rows gives, and the loop has no branch to mispredict (a random
    cut sends rows either way at random, so a branch per row misses half the time) and no
    store to memory that the next row must wait for. The right side is never summed; callers
    take it as parent minus left (Louppe 2014, §5.3.3: scikit-learn's criterion likewise
    updates one side and derives the other).
    """
    sides[:] = 0.0
    n_channels = sides.shape[1] - 1
    by_class = node_classes.size > 0 and n_channels > ONE_HOT_CLASSES
    if by_class:
        for i in range(node_codes.size):
            code = node_codes[i]
            side = 0 if code <= cut else (2 if code == missing_code else 1)
            if side != 1:
                c = node_classes[i]
                sides[side, 0] += 1.0
                sides[side, 1 + c] += node_channels[i, c]
        sides[1, :] = 0.0
        return
    # Separate loops for the two sides and the common two channels: a loop whose test is
    # the same for every row compiles to straight-line code.
    if n_channels == 2:
        no_values = sides[1, :0]
        _two_channel_sums(node_codes, cut, False, node_channels, sides[0], no_values, 0.0)
        if n_missing > 0:
            _two_channel_sums(
                node_codes, missing_code, True, node_channels, sides[2], no_values, 0.0
            )
        return
    for side, wanted in ((0, cut), (2, missing_code)):
        if side == 2 and n_missing == 0:
            continue
        count = 0
        for i in range(node_codes.size):
            take = node_codes[i] <= wanted if side == 0 else node_codes[i] == wanted
            count += take
            weight = np.float64(take)
            for c in range(n_channels):
                sides[side, 1 + c] += node_channels[i, c] * weight
        sides[side, 0] = count


@inline_kernel
def _two_channel_sums(
    node_codes: NDArray[Any],
    wanted: int,
    equal: bool,
    node_channels: NDArray[np.float64],
    side: NDArray[np.float64],
    values: NDArray[np.float64],
    threshold: float,
) -> None:
    """Count and two channel sums of the rows whose code is ≤ ``wanted`` (or == it), or,
    with ``values`` non-empty, whose representative ``values[code]`` is ≤ ``threshold``.

    The test is the same for every row: the compiler makes one straight loop of each.
    """
    by_value = values.size > 0
    count = 0
    first, second = 0.0, 0.0
    for i in range(node_codes.size):
        code = node_codes[i]
        if by_value:
            take = values[code] <= threshold
        elif equal:
            take = code == wanted
        else:
            take = code <= wanted
        count += take
        weight = np.float64(take)
        first += node_channels[i, 0] * weight
        second += node_channels[i, 1] * weight
    side[0], side[1], side[2] = count, first, second


@inline_kernel
def _cut_bin(values: NDArray[np.float64], n_bins: int, threshold: float) -> int:
    """The last of a feature's ``n_bins`` representatives ≤ ``threshold`` (searchsorted
    side="right", minus one)."""
    lo, hi = 0, int(n_bins)
    while lo < hi:
        middle = (lo + hi) // 2
        if values[middle] <= threshold:
            lo = middle + 1
        else:
            hi = middle
    return lo - 1


@inline_kernel
def _code_range(node_codes: NDArray[Any], missing_code: int) -> tuple[int, int, int]:
    """Smallest code, largest present code (−1 if none) and whether any is missing (0/1)."""
    if node_codes.size == 0:
        return missing_code, -1, 0
    smallest, largest = node_codes[0], node_codes[0]
    # Codes of one dtype, no branch: a min/max the compiler turns into vector instructions.
    for i in range(1, node_codes.size):
        smallest = min(smallest, node_codes[i])
        largest = max(largest, node_codes[i])
    if largest != missing_code:
        return int(smallest), int(largest), 0
    high = -1
    for i in range(node_codes.size):
        if node_codes[i] != missing_code:
            high = max(high, int(node_codes[i]))
    return int(smallest), high, 1
