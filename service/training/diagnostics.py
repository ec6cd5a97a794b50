"""What the model page plots from the validation rows: ROC curves and a sample of residuals.

Both are computed once, at training, on the holdout rows the validation metrics are scored on
(folds and ``holdout: 0`` have none), and stored inside the model's metrics document, so a
model trained before them has none:

- ``roc``: per class label ``{"fpr", "tpr", "auc"}``; for a binary model only the second
  class's curve (its scores are the ones ``roc_auc`` uses), for 3 to ``MAX_ROC_CLASSES``
  classes one curve per class against the rest, leaving out a class the rows lack (its curve
  is undefined). None for a model without probabilities, or with more classes.
- ``residuals``: ``{"predicted", "actual"}`` of at most ``RESIDUAL_ROWS`` rows drawn with the
  job's seed (regression).

A curve keeps its exact corners up to ``ROC_POINTS`` of them; see ``thin_curve``.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import metrics
from service.training.metrics import json_number, ranking_scores

MAX_ROC_CLASSES = 10
ROC_POINTS = 200
RESIDUAL_ROWS = 500
# The sine of the smallest turn that is a corner: below it, rounding of the rates (about 1e-16)
# turned a straight run, and no drawing could show the difference anyway.
_MIN_TURN = 1e-9


def validation_diagnostics(
    y: npt.NDArray[Any],
    proba: npt.NDArray[np.float64] | None,
    predicted: npt.NDArray[Any] | None,
    classes: Sequence[str] | None,
    *,
    seed: int,
) -> dict[str, Any]:
    """``{"rows", "roc", "residuals"}`` of a model on its validation rows ``y``.

    ``proba`` has one column per class of ``classes`` (None for a classifier without
    probabilities); ``predicted`` holds the regressor's values (unused for classifiers).
    """
    if classes is not None:
        return {"rows": int(y.shape[0]), "roc": roc_curves(y, proba, classes), "residuals": None}
    assert predicted is not None
    return {
        "rows": int(y.shape[0]),
        "roc": None,
        "residuals": residual_sample(y, predicted, seed),
    }


def roc_curves(
    y: npt.NDArray[Any], proba: npt.NDArray[np.float64] | None, classes: Sequence[str]
) -> dict[str, dict[str, Any]] | None:
    if proba is None or len(classes) > MAX_ROC_CLASSES:
        return None
    # The scores roc_auc ranks by: the second class's probability, or one per class.
    drawn, ranked = (classes[1:], proba) if len(classes) == 2 else (classes, ranking_scores(proba))
    curves: dict[str, dict[str, Any]] = {}
    for label in drawn:
        scores = ranked[:, list(classes).index(label)]
        try:
            fpr, tpr, _ = metrics.roc_curve(y, scores, pos_label=label)
        except ValueError:  # the rows hold no positive or no negative of this class
            continue
        # The area of the whole curve, before thinning: the value roc_auc is made of.
        auc = json_number(metrics.roc_auc_score(y == label, scores))
        kept = thin_curve(fpr, tpr, ROC_POINTS)
        curves[str(label)] = {"fpr": fpr[kept].tolist(), "tpr": tpr[kept].tolist(), "auc": auc}
    return curves


def thin_curve(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], limit: int
) -> npt.NDArray[np.intp]:
    """Indices of at most ``limit`` points of the polyline ``(x, y)`` that draw it as closely
    as that many can; the first and last are always kept.

    Points on the straight line between their neighbours go first: they are no corner, so the
    curve through the rest is the same curve (what ``drop_intermediate`` misses, e.g. steps
    (1, 2) then (2, 4), included). If more than ``limit`` corners remain, they are chosen as
    Douglas & Peucker (1973) simplify a line, with a budget of points instead of a tolerance:
    starting from the two ends, the point farthest from the chord of its stretch is added,
    again and again, so each point added is the one the drawing would miss most.
    """
    corners = _corners(x, y)
    if corners.size <= limit:
        return corners
    cx, cy = x[corners], y[corners]
    kept = {0, corners.size - 1}
    heap: list[tuple[float, int, int, int]] = []
    _push_farthest(heap, cx, cy, 0, corners.size - 1)
    while heap and len(kept) < limit:
        _, start, farthest, end = heapq.heappop(heap)
        kept.add(farthest)
        _push_farthest(heap, cx, cy, start, farthest)
        _push_farthest(heap, cx, cy, farthest, end)
    return corners[np.array(sorted(kept), dtype=np.intp)]


def _corners(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    """The ends, and every point where the polyline turns (non-zero cross product)."""
    if x.size <= 2:
        return np.arange(x.size, dtype=np.intp)
    dx, dy = np.diff(x), np.diff(y)
    lengths = np.hypot(dx, dy)
    turn = dx[:-1] * dy[1:] - dy[:-1] * dx[1:]  # |a| |b| sin(angle) of consecutive segments
    inner = np.flatnonzero(np.abs(turn) > _MIN_TURN * lengths[:-1] * lengths[1:]) + 1
    return np.asarray(np.r_[0, inner, x.size - 1], dtype=np.intp)


def _push_farthest(
    heap: list[tuple[float, int, int, int]],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    start: int,
    end: int,
) -> None:
    """Queue the point strictly between ``start`` and ``end`` farthest from their chord."""
    if end - start < 2:
        return
    between = slice(start + 1, end)
    chord_x, chord_y = x[end] - x[start], y[end] - y[start]
    length = float(np.hypot(chord_x, chord_y))
    offsets_x, offsets_y = x[between] - x[start], y[between] - y[start]
    if length > 0:
        distance = np.abs(chord_x * offsets_y - chord_y * offsets_x) / length
    else:
        distance = np.hypot(offsets_x, offsets_y)
    at = int(np.argmax(distance))
    # heapq is a min-heap: the negated distance pops the farthest first.
    heapq.heappush(heap, (-float(distance[at]), start, start + 1 + at, end))


def residual_sample(
    y: npt.NDArray[np.float64], predicted: npt.NDArray[np.float64], seed: int
) -> dict[str, list[float | None]]:
    """``{"predicted", "actual"}`` of at most ``RESIDUAL_ROWS`` rows, drawn with ``seed``
    without replacement and kept in row order; a non-finite prediction is None."""
    rows = np.arange(y.shape[0])
    if rows.size > RESIDUAL_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(rows, RESIDUAL_ROWS, replace=False))
    return {
        "predicted": [json_number(value) for value in predicted[rows].tolist()],
        "actual": [json_number(value) for value in y[rows].tolist()],
    }
