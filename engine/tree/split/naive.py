"""Plain-loop reference of the split search in :mod:`engine.tree.split.vectorised`.

:func:`find_splits_naive` tries every candidate one at a time; the tests hold the vectorised
search and the compiled kernels equal to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from engine.tree._criteria import Newton, score
from engine.tree.split.gains import weight_of

if TYPE_CHECKING:
    from engine.tree.split.context import SplitContext

__all__ = ["find_splits_naive"]


def find_splits_naive(
    ctx: SplitContext,
    rows: NDArray[np.intp],
    slot_of_row: NDArray[np.intp],
    features: NDArray[np.int64],
    bounds: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Plain-loop reference: the best gain and feature of each node (no random splits).

    Evaluates every numeric threshold and every prefix of the categories in statistic order,
    with missing values sent either way, exactly as :func:`find_splits` should; with
    ``ctx.monotone`` and ``bounds``, at clipped weights and under the constraints.
    """
    n_slots = features.shape[0]
    best_gain = np.full(n_slots, -np.inf)
    best_feature = np.full(n_slots, -1, dtype=np.int64)
    for slot in range(n_slots):
        node_rows = rows[slot_of_row == slot]
        channels = ctx.channels[node_rows]
        parent = channels.sum(axis=0)
        node_bounds = None if ctx.monotone is None or bounds is None else bounds[slot]
        parent_score = _naive_score(ctx, parent, node_bounds)
        for feature in features[slot]:
            if feature < 0:
                continue
            codes = ctx.binned[node_rows, feature].astype(np.int64)
            present = sorted(set(codes.tolist()) - {ctx.missing_code})
            if ctx.is_categorical[feature]:
                present.sort(key=lambda c: _naive_statistic(ctx, channels, codes, c, parent))
            missing = codes == ctx.missing_code
            for cut in range(len(present)):
                left_set = set(present[: cut + 1])
                base_left = np.isin(codes, list(left_set))
                for missing_left in (False, True):
                    if missing_left and not missing.any():
                        continue
                    left = base_left | (missing & missing_left)
                    if left.all() or not left.any():
                        continue
                    n_left, n_right = int(left.sum()), int((~left).sum())
                    if min(n_left, n_right) < ctx.min_samples_leaf:
                        continue
                    left_sum, right_sum = channels[left].sum(0), channels[~left].sum(0)
                    weights = (
                        weight_of(left_sum, ctx.criterion),
                        weight_of(right_sum, ctx.criterion),
                    )
                    if min(weights) <= 0 or min(weights) < ctx.min_weight_leaf:
                        continue
                    if node_bounds is not None and not _naive_respects(
                        ctx, left_sum, right_sum, node_bounds, int(feature)
                    ):
                        continue
                    gain = (
                        _naive_score(ctx, left_sum, node_bounds)
                        + _naive_score(ctx, right_sum, node_bounds)
                        - parent_score
                    )
                    if gain > best_gain[slot]:
                        best_gain[slot], best_feature[slot] = gain, feature
    return best_gain, best_feature


def _naive_weight(ctx: SplitContext, total: NDArray[np.float64], bounds: Any) -> float:
    assert isinstance(ctx.criterion, Newton)
    lower, upper = bounds
    return min(max(float(ctx.criterion.leaf_weight(total)), lower), upper)


def _naive_score(ctx: SplitContext, total: NDArray[np.float64], bounds: Any) -> float:
    """The node's score; with bounds, −(G·w + ½(H+λ)w² + α|w|) at the clipped weight w."""
    if bounds is None:
        return float(score(total, ctx.criterion))
    assert isinstance(ctx.criterion, Newton)
    gradient, hessian = float(total[0]), float(total[1])
    if hessian + ctx.criterion.l2 <= 0:
        return 0.0
    w = _naive_weight(ctx, total, bounds)
    return -(gradient * w + 0.5 * (hessian + ctx.criterion.l2) * w * w + ctx.criterion.l1 * abs(w))


def _naive_respects(
    ctx: SplitContext,
    left: NDArray[np.float64],
    right: NDArray[np.float64],
    bounds: Any,
    feature: int,
) -> bool:
    assert ctx.monotone is not None
    w_left, w_right = _naive_weight(ctx, left, bounds), _naive_weight(ctx, right, bounds)
    constraint = int(ctx.monotone[feature])
    return (constraint >= 0 or w_left >= w_right) and (constraint <= 0 or w_left <= w_right)


def _naive_statistic(
    ctx: SplitContext,
    channels: NDArray[np.float64],
    codes: NDArray[np.int64],
    code: int,
    parent: NDArray[np.float64],
) -> float:
    total = channels[codes == code].sum(axis=0)
    if isinstance(ctx.criterion, Newton):
        return float(-total[0] / (total[1] + ctx.criterion.l2))
    if ctx.criterion == "squared_error":
        return float(total[1] / total[0])
    target = 1 if total.size == 2 else int(parent.argmax())
    return float(total[target] / total.sum())
