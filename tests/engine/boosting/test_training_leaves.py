"""Boosting updates its training scores from the leaves the grower assigned, not by descending
each new tree: the scores it reports must equal those of predicting the training rows."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.callbacks import ProgressEvent


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2_000, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 5] = rng.integers(0, 5, 2_000)  # categorical
    return X, np.nan_to_num(X[:, 0]) * 2 + (X[:, 5] == 2) + rng.normal(size=2_000)


@pytest.mark.parametrize("subsample", [1.0, 0.7])
def test_xgboost_training_loss_is_that_of_its_predictions(subsample: float) -> None:
    X, y = data()
    events: list[ProgressEvent] = []
    model = engine.XGBoostRegressor(
        n_estimators=6, max_depth=4, subsample=subsample, categorical_features=[5], random_state=0
    ).fit(X, y, callbacks=[events.append])
    rmse = float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))
    assert events[-1].metrics["train_rmse"] == pytest.approx(rmse, rel=1e-12)


@pytest.mark.parametrize("subsample", [1.0, 0.7])
def test_gradient_boosting_training_loss_is_that_of_its_predictions(subsample: float) -> None:
    X, y = data()
    events: list[ProgressEvent] = []
    model = engine.GradientBoostingRegressor(
        n_estimators=6, max_depth=3, subsample=subsample, categorical_features=[5], random_state=0
    ).fit(X, y, callbacks=[events.append])
    # Squared error's reported loss is the mean squared error (on the in-bag rows when
    # subsampling, so compare the full-data case exactly and the subsampled one by trend).
    mse = float(np.mean((model.predict(X) - y) ** 2))
    if subsample == 1.0:
        assert events[-1].metrics["train_loss"] == pytest.approx(mse, rel=1e-12)
    else:
        assert events[-1].metrics["train_loss"] < events[0].metrics["train_loss"]
