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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import metrics
from engine.callbacks import TRAIN_PREFIX, ProgressEvent, train_metric
from service.training.metrics import json_number

MAX_POINTS = 1000


def learning_curves(
    method: str,
    model: Any,
    *,
    classification: bool,
    classes: Sequence[str] | None,
    train: tuple[npt.NDArray[np.float64], npt.NDArray[Any]],
    validation: tuple[npt.NDArray[np.float64], npt.NDArray[Any]] | None,
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
    X: npt.NDArray[np.float64],
    y: npt.NDArray[Any],
    classification: bool,
    classes: Sequence[str] | None,
    *,
    proba: bool,
) -> list[float]:
    if X.shape[0] == 0:
        return []
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
