"""What training keeps for the model page's plots: thinned ROC curves, a residual sample, and
the kinds of importance, checked on ``run_training``'s outcome and on the functions alone."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.typing import NDArray

from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.training import TrainingSpec, run_training
from service.training.diagnostics import (
    MAX_ROC_CLASSES,
    RESIDUAL_ROWS,
    ROC_POINTS,
    residual_sample,
    roc_curves,
    thin_curve,
)
from service.training.split import holdout_split


def deviation(x: NDArray[np.float64], y: NDArray[np.float64], kept: NDArray[np.intp]) -> float:
    """The farthest any point of the polyline lies from the polyline through ``kept``."""
    worst = 0.0
    for start, end in itertools.pairwise(kept.tolist()):
        if end - start < 2:
            continue
        chord = np.array([x[end] - x[start], y[end] - y[start]])
        offsets = np.column_stack([x[start + 1 : end] - x[start], y[start + 1 : end] - y[start]])
        cross = np.abs(chord[0] * offsets[:, 1] - chord[1] * offsets[:, 0])
        worst = max(worst, float(cross.max() / np.hypot(*chord)))
    return worst


def scores(n: int, seed: int = 0) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return y, rng.random(n) + 0.5 * y


@pytest.mark.parametrize("n", [2_000, 20_000, 200_000])
def test_a_long_curve_keeps_its_shape_in_200_points(n: int) -> None:
    y, s = scores(n)
    fpr, tpr, _ = skm.roc_curve(y, s)
    assert fpr.size > ROC_POINTS

    kept = thin_curve(fpr, tpr, ROC_POINTS)

    assert kept.size == ROC_POINTS
    assert kept[0] == 0 and kept[-1] == fpr.size - 1 and np.all(np.diff(kept) > 0)
    # Within 0.2% of the unit square everywhere (a pixel or less on the page); as many points
    # taken evenly along the curve miss it by more than 0.25%.
    assert deviation(fpr, tpr, kept) < 0.002
    evenly = np.unique(np.linspace(0, fpr.size - 1, ROC_POINTS).round().astype(np.intp))
    assert deviation(fpr, tpr, kept) < deviation(fpr, tpr, evenly)


def test_a_short_curve_keeps_every_corner_and_only_corners() -> None:
    # Steps (1, 2) then (2, 4): one straight line that drop_intermediate keeps two points of.
    x = np.array([0.0, 0.0, 0.1, 0.3, 0.3, 1.0])
    y = np.array([0.0, 0.2, 0.4, 0.8, 1.0, 1.0])

    assert thin_curve(x, y, ROC_POINTS).tolist() == [0, 1, 3, 4, 5]
    assert thin_curve(x[:2], y[:2], ROC_POINTS).tolist() == [0, 1]


def test_roc_curves_skip_a_class_the_rows_lack_and_too_many_classes() -> None:
    y = np.array(["a", "b", "a", "b", "a"])
    proba = np.array([[0.7, 0.2, 0.1], [0.3, 0.6, 0.1], [0.5, 0.4, 0.1], [0.2, 0.5, 0.3]] * 2)[:5]

    curves = roc_curves(y, proba, ["a", "b", "c"])

    assert curves is not None and list(curves) == ["a", "b"]  # no "c" row: no curve
    many = [f"k{i:02d}" for i in range(MAX_ROC_CLASSES + 1)]
    wide = np.full((5, len(many)), 1 / len(many))
    assert roc_curves(np.array(many[:5]), wide, many) is None
    assert roc_curves(y, None, ["a", "b", "c"]) is None


def test_residual_sample_is_seeded_and_in_row_order() -> None:
    y = np.arange(2_000, dtype=np.float64)
    predicted = y + 0.5
    predicted[3] = np.nan

    first = residual_sample(y, predicted, seed=4)

    assert first == residual_sample(y, predicted, seed=4)
    assert first != residual_sample(y, predicted, seed=5)
    actual = np.array(first["actual"], dtype=float)  # rows 0-1999: each value its row
    assert actual.size == RESIDUAL_ROWS and np.all(np.diff(actual) > 0)
    sampled = np.array([np.nan if p is None else p for p in first["predicted"]])
    assert np.array_equal(sampled, predicted[actual.astype(int)], equal_nan=True)
    small = residual_sample(y[:10], predicted[:10], seed=4)
    assert small["actual"] == y[:10].tolist() and small["predicted"][3] is None


# --- through run_training -------------------------------------------------------------------


def columns(n: int, n_classes: int = 2, seed: int = 0) -> dict[str, ColumnData]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    noise = rng.normal(size=n)
    amount = 2 * x + noise
    # Classes by quantile of a noisy score of x: every class has rows, none is separable.
    edges = np.quantile(amount, np.linspace(0, 1, n_classes + 1)[1:-1])
    label = np.searchsorted(edges, amount).astype(np.int32)
    return {
        "x": NumericColumn("x", x),
        "w": NumericColumn("w", rng.normal(size=n)),
        "amount": NumericColumn("amount", amount),
        "label": CategoricalColumn("label", label, tuple(f"c{k:02d}" for k in range(n_classes))),
    }


def train(method: str, task: str, data: dict[str, ColumnData], **params: Any) -> dict[str, Any]:
    spec = TrainingSpec(
        method=method,
        task=task,
        target="label" if task == "classification" else "amount",
        features=("x", "w"),
        params=params,
        validation={"holdout": 0.5},
        seed=11,
    )
    metrics: dict[str, Any] = run_training(spec, data, lambda f, s: None, lambda: False).metrics
    return metrics


def test_a_large_holdout_keeps_200_points_and_the_exact_auc() -> None:
    # A linear model's probabilities all differ: a curve of hundreds of corners.
    metrics = train("logistic_regression", "classification", columns(6_000))

    diagnostics = metrics["diagnostics"]
    (curve,) = diagnostics["roc"].values()
    assert diagnostics["rows"] == 3_000
    assert len(curve["fpr"]) == len(curve["tpr"]) == ROC_POINTS
    assert curve["auc"] == metrics["validation"]["roc_auc"]
    assert (curve["fpr"][0], curve["tpr"][0], curve["fpr"][-1], curve["tpr"][-1]) == (0, 0, 1, 1)
    assert metrics["importance_kinds"] == ["permutation", "shap"]


@pytest.mark.parametrize("n_classes", [MAX_ROC_CLASSES, MAX_ROC_CLASSES + 1])
def test_one_curve_per_class_up_to_the_limit(n_classes: int) -> None:
    metrics = train("decision_tree", "classification", columns(600, n_classes), max_depth=4)

    roc = metrics["diagnostics"]["roc"]
    if n_classes > MAX_ROC_CLASSES:
        assert roc is None
    else:
        assert list(roc) == [f"c{k:02d}" for k in range(n_classes)]
        macro = np.mean([curve["auc"] for curve in roc.values()])
        assert macro == pytest.approx(metrics["validation"]["roc_auc"], abs=1e-12)


def test_a_large_regression_holdout_keeps_a_seeded_sample_of_500() -> None:
    data = columns(3_000)

    first = train("decision_tree", "regression", data, max_depth=4)["diagnostics"]
    again = train("decision_tree", "regression", data, max_depth=4)["diagnostics"]

    assert first == again and first["rows"] == 1_500 and first["roc"] is None
    residuals = first["residuals"]
    assert len(residuals["actual"]) == len(residuals["predicted"]) == RESIDUAL_ROWS
    amount = data["amount"].values  # type: ignore[union-attr]
    _, validation = holdout_split(amount, 0.5, classification=False, seed=11)
    assert set(residuals["actual"]) <= set(amount[validation].tolist())
