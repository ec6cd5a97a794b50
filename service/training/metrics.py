"""The metric sets of the API, computed with ``engine.metrics``; JSON-ready (NaN → None)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import metrics

CLASSIFICATION_METRICS = ("accuracy", "log_loss", "roc_auc", "f1_macro")
REGRESSION_METRICS = ("rmse", "mae", "r2")


def classification_metrics(
    y: npt.NDArray[Any],
    proba: npt.NDArray[np.float64] | None,
    classes: Sequence[str],
    predicted: npt.NDArray[Any] | None = None,
) -> dict[str, Any]:
    """Accuracy, log loss, ROC AUC, macro F1 and the confusion matrix (rows: true class).

    ``proba`` has one column per class in ``classes`` order; the prediction is its argmax. A
    model without probabilities (the perceptron) passes ``proba=None`` and its ``predicted``
    labels: log loss and ROC AUC are then None. A metric undefined on these rows (ROC AUC with
    one class present) is None.
    """
    labels = np.asarray(classes)
    if proba is not None:
        predicted = labels[np.argmax(proba, axis=1)]
    assert predicted is not None, "pass proba or predicted labels"
    scored = proba  # bound for the lambdas below, which mypy cannot narrow through
    return {
        "accuracy": _number(lambda: metrics.accuracy_score(y, predicted)),
        "log_loss": None
        if scored is None
        else _number(lambda: metrics.log_loss(y, _normalised(scored), labels=labels)),
        "roc_auc": None if scored is None else _number(lambda: _roc_auc(y, scored, labels)),
        "f1_macro": _number(lambda: metrics.f1_score(y, predicted, average="macro", labels=labels)),
        "confusion_matrix": metrics.confusion_matrix(y, predicted, labels=labels)
        .astype(int)
        .tolist(),
    }


def regression_metrics(
    y: npt.NDArray[np.float64], predicted: npt.NDArray[np.float64]
) -> dict[str, Any]:
    return {
        "rmse": _number(lambda: metrics.root_mean_squared_error(y, predicted)),
        "mae": _number(lambda: metrics.mean_absolute_error(y, predicted)),
        "r2": _number(lambda: metrics.r2_score(y, predicted)),
    }


def summarise_folds(per_fold: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """``{metric: {"mean", "std"}}`` over folds (population std); None-valued folds skipped."""
    names = [name for name in per_fold[0] if name != "confusion_matrix"]
    summary: dict[str, dict[str, float | None]] = {}
    for name in names:
        values = [fold[name] for fold in per_fold if fold.get(name) is not None]
        if values:
            summary[name] = {"mean": float(np.mean(values)), "std": float(np.std(values))}
        else:
            summary[name] = {"mean": None, "std": None}
    return summary


def _roc_auc(
    y: npt.NDArray[Any], proba: npt.NDArray[np.float64], labels: npt.NDArray[Any]
) -> float:
    present = np.unique(y)
    if present.size < 2:
        return math.nan
    if labels.size == 2:
        return metrics.roc_auc_score(y, proba[:, 1], labels=labels)
    return metrics.roc_auc_score(y, ranking_scores(proba), labels=labels)


def ranking_scores(proba: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The class scores multiclass ROC AUC and curves rank rows by: the probabilities, unless
    a row strays from summing to one by more than rounding.

    Not renormalised otherwise: dividing rows by sums of 1 ± 1e-16 turns equal scores (a
    tree's leaves with the same class fractions) into unequal ones at random, and the area
    counts a tie as half a pair, a broken one as a whole (Fawcett 2006, section 5).
    """
    return proba if np.allclose(proba.sum(axis=1), 1.0) else _normalised(proba)


def _normalised(proba: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    # Members' probabilities are averaged in float64; tiny drift from 1 would only warn.
    sums = proba.sum(axis=1, keepdims=True)
    return np.asarray(proba / np.where(sums > 0, sums, 1.0))


def json_number(value: Any) -> float | None:
    """``value`` as a float; None when it is not finite (JSON has no NaN)."""
    number = float(value)
    return number if math.isfinite(number) else None


def _number(compute: Any) -> float | None:
    try:
        return json_number(compute())
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return None
