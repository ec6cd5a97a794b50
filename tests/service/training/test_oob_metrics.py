"""``metrics.oob`` comes from the fitted ensemble's own out-of-bag figures (issue 17).

The headline score is the engine's ``oob_score_`` (accuracy or R²), and the whole set equals
what the service computed before it read that figure: the metric set of the engine's
out-of-bag votes on the rows out of bag at least once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import engine
from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.training import TrainingSpec, run_training
from service.training import run as run_module
from service.training.data import prepare
from service.training.metrics import classification_metrics, regression_metrics
from service.training.split import holdout_split

N = 150


def _columns() -> dict[str, ColumnData]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=N)
    colour = rng.integers(0, 3, size=N).astype(np.int32)
    amount = x * 2 + (colour == 1) * 1.5 + rng.normal(size=N) * 0.5
    label = np.where(amount > 1.0, 2, (amount > -0.5).astype(np.int32)).astype(np.int32)
    return {
        "x": NumericColumn("x", x),
        "colour": CategoricalColumn("colour", colour, ("blue", "green", "red")),
        "amount": NumericColumn("amount", amount),
        "label": CategoricalColumn("label", label, ("low", "mid", "high")),
    }


def _spec(method: str, task: str, params: dict[str, Any]) -> TrainingSpec:
    return TrainingSpec(
        method=method,
        task=task,
        target="label" if task == "classification" else "amount",
        features=("x", "colour"),
        params=params,
        validation={"holdout": 0.2},
        seed=5,
    )


def _former_oob_metrics(model: Any, spec: TrainingSpec, columns: dict[str, ColumnData]) -> Any:
    """What the service computed before it read ``oob_score_``: everything from the votes."""
    data = prepare(spec, columns)
    classification = spec.task == "classification"
    train_rows, _ = holdout_split(data.y, 0.2, classification=classification, seed=spec.seed)
    y = data.y[train_rows]
    if classification:
        scores = np.asarray(model.oob_decision_function_, dtype=np.float64)
        seen = np.all(np.isfinite(scores), axis=1)
        assert data.classes is not None
        return classification_metrics(y[seen], scores[seen], data.classes)
    predicted = np.asarray(model.oob_prediction_, dtype=np.float64)
    seen = np.isfinite(predicted)
    return regression_metrics(y[seen], predicted[seen])


@pytest.mark.parametrize(
    ("method", "task", "params"),
    [
        ("random_forest", "classification", {"n_estimators": 15}),
        ("random_forest", "regression", {"n_estimators": 15}),
        ("bagging", "classification", {"n_estimators": 12}),
        ("bagging", "regression", {"n_estimators": 12, "max_samples": 0.7}),
    ],
)
def test_oob_metrics_are_the_engines_figures(method: str, task: str, params: Any) -> None:
    columns = _columns()
    spec = _spec(method, task, params)
    outcome = run_training(spec, columns, lambda fraction, stage: None, lambda: False)
    model = engine.load_model(outcome.artifact)
    oob = outcome.metrics["oob"]
    headline = "accuracy" if task == "classification" else "r2"
    assert oob[headline] == model.oob_score_
    assert oob == _former_oob_metrics(model, spec, columns)


def test_the_headline_is_read_from_the_model_not_recomputed() -> None:
    """A model whose ``oob_score_`` disagrees with its votes shows its own figure."""
    columns = _columns()
    spec = _spec("random_forest", "regression", {"n_estimators": 15})
    data = prepare(spec, columns)
    rows = np.arange(data.y.shape[0])

    class Stub:
        oob_prediction_ = np.where(rows % 4 == 0, np.nan, data.y + 0.1)
        oob_score_ = 0.123

    oob = run_module._oob_metrics(Stub(), data, rows, classification=False)
    assert oob is not None
    assert oob["r2"] == 0.123
    assert oob["rmse"] == pytest.approx(0.1)
