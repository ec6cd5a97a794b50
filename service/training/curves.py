"""Learning curves: a score per iteration, on training, validation and out-of-bag rows.

- gradient boosting: log loss (classification) or MSE (regression) after each stage, from
  ``staged_predict_proba`` / ``staged_predict`` on the training and validation rows;
- AdaBoost: misclassification rate (``error``) or MSE after each round, from ``staged_predict``;
- Arc-x4, RegionBoost, XGBoost: the training metric the engine reports after each round
  (``train_error``, ``train_logloss``, ``train_rmse``, ...; the curve's metric is the name after
  ``train_``). They have no staged prediction, so no validation curve;
- random forests, extra trees, bagging: the OOB error (``error`` or ``mse``) after 1, 2, ...
  members (``oob_curve_``), when out-of-bag estimates are on;
- a single tree: no curve (None).

A series a method does not have is an empty list. Curves longer than ``MAX_POINTS`` are
thinned to evenly spaced iterations (always keeping the last).

The staged curves read their rows' feature values ``CHUNK_ROWS`` rows at a time (a fit from
a dataset's parts decodes them from its bin codes), and a series is the chunks' scores
weighted by their share of the rows: the score itself when the rows fit in one chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import metrics
from engine.callbacks import TRAIN_PREFIX, ProgressEvent, train_metric
from service.training.metrics import json_number

MAX_POINTS = 1000
# Rows whose feature values a staged curve holds at once.
CHUNK_ROWS = 1 << 16

# The feature values of a series' rows ``start:stop``, as the model predicts them.
RowValues = Callable[[int, int], npt.NDArray[np.float64]]


def learning_curves(
    method: str,
    model: Any,
    *,
    classification: bool,
    classes: Sequence[str] | None,
    train: tuple[RowValues, npt.NDArray[Any]],
    validation: tuple[RowValues, npt.NDArray[Any]] | None,
    events: Sequence[ProgressEvent],
) -> dict[str, Any] | None:
    series: dict[str, list[float]] = {"train": [], "validation": [], "oob": []}
    if method == "gradient_boosting":
        metric = "log_loss" if classification else "mse"
        series["train"] = _staged(model, *train, classification, classes, proba=True)
        if validation is not None:
            series["validation"] = _staged(model, *validation, classification, classes, proba=True)
    elif method == "adaboost":
        metric = "error" if classification else "mse"
        series["train"] = _staged(model, *train, classification, classes, proba=False)
        if validation is not None:
            series["validation"] = _staged(model, *validation, classification, classes, proba=False)
    elif hasattr(model, "oob_curve_"):
        metric = "error" if classification else "mse"
        series["oob"] = [float(v) for v in np.asarray(model.oob_curve_)]
    elif reported := _reported_train_metric(events):
        metric = reported
        series["train"] = [float(e.metrics[train_metric(reported)]) for e in events]
    else:
        return None
    length = max(len(values) for values in series.values())
    if length == 0:
        return None
    keep = _thin(length)
    return {
        "iterations": [int(i + 1) for i in keep],
        **{
            name: [json_number(values[i]) for i in keep] if values else []
            for name, values in series.items()
        },
        "metric": metric,
    }


def _reported_train_metric(events: Sequence[ProgressEvent]) -> str | None:
    """The ``train_<metric>`` every event of the fit reported (e.g. ``train_error``), if any."""
    if not events:
        return None
    for key in events[0].metrics:
        if key.startswith(TRAIN_PREFIX) and all(key in e.metrics for e in events):
            return key.removeprefix(TRAIN_PREFIX)
    return None


def _staged(
    model: Any,
    values: RowValues,
    y: npt.NDArray[Any],
    classification: bool,
    classes: Sequence[str] | None,
    *,
    proba: bool,
) -> list[float]:
    n = y.shape[0]
    series: list[float] = []
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        scores = _stage_scores(model, values(start, stop), y[start:stop], classification,
                               classes, proba=proba)  # fmt: skip
        share = (stop - start) / n
        if start == 0:
            series = [score * share for score in scores]
        else:
            series = [total + score * share for total, score in zip(series, scores, strict=True)]
    return series


def _stage_scores(
    model: Any,
    X: npt.NDArray[np.float64],
    y: npt.NDArray[Any],
    classification: bool,
    classes: Sequence[str] | None,
    *,
    proba: bool,
) -> list[float]:
    if classification and proba:
        labels = np.asarray(classes)
        stages: Iterable[Any] = model.staged_predict_proba(X)
        return [metrics.log_loss(y, p, labels=labels) for p in stages]
    if classification:
        return [float(np.mean(np.asarray(p) != y)) for p in model.staged_predict(X)]
    return [metrics.mean_squared_error(y, p) for p in model.staged_predict(X)]


def _thin(length: int) -> list[int]:
    if length <= MAX_POINTS:
        return list(range(length))
    return sorted(set(np.linspace(0, length - 1, MAX_POINTS).round().astype(int).tolist()))
