"""Fitting from codes binned elsewhere (``engine.tree.Binned``): the plan's rows, binned piece
by piece, give the model ``fit(X, y)`` gives, bit for bit, with missing values and categories."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    XGBoostClassifier,
    XGBoostRegressor,
)
from engine.tree import Binned
from engine.tree._binned import routing_values


def _data(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.normal(size=n_rows),
            rng.integers(0, 6, n_rows).astype(float),  # categorical codes
            np.round(rng.lognormal(size=n_rows), 2),
            rng.integers(0, 4, n_rows).astype(float),  # few distinct numeric values
        ]
    )
    X[rng.random(X.shape) < 0.08] = np.nan
    signal = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, 1]) % 2) - 0.3 * np.nan_to_num(X[:, 2])
    labels = np.where(signal + rng.normal(scale=0.5, size=n_rows) > 0.2, "yes", "no")
    return X, labels, signal + rng.normal(scale=0.1, size=n_rows)


def _from_pieces(estimator: Any, X: np.ndarray, y: np.ndarray, piece: int = 777) -> Any:
    plan = estimator.binning_plan(X.shape[0], X.shape[1])
    mapper = plan.fit(X[plan.rows])
    codes = np.concatenate(
        [mapper.transform(X[start : start + piece]) for start in range(0, X.shape[0], piece)]
    )
    return estimator.fit(Binned(codes, mapper), y)


CASES = [
    (DecisionTreeClassifier, {"max_depth": 6}),
    (DecisionTreeRegressor, {"max_depth": 6}),
    (RandomForestClassifier, {"n_estimators": 8, "oob_score": True}),
    (RandomForestRegressor, {"n_estimators": 8, "oob_score": True, "n_jobs": 2}),
    (ExtraTreesClassifier, {"n_estimators": 8, "bootstrap": True, "oob_score": True}),
    (ExtraTreesRegressor, {"n_estimators": 8}),
    (XGBoostClassifier, {"n_estimators": 8, "max_depth": 4, "subsample": 0.7}),
    (XGBoostRegressor, {"n_estimators": 8, "max_depth": 4, "subsample": 0.7}),
    (XGBoostRegressor, {"n_estimators": 6, "objective": "reg:absoluteerror"}),
    (XGBoostClassifier, {"n_estimators": 6, "grow_policy": "lossguide", "max_leaves": 9}),
    # Subsampled, so rows out of a stage's sample take their leaves from the decoded codes.
    (GradientBoostingClassifier, {"n_estimators": 8, "max_depth": 3, "subsample": 0.7}),
    (GradientBoostingRegressor, {"n_estimators": 8, "max_leaf_nodes": 7, "loss": "huber"}),
]


@pytest.mark.parametrize(("cls", "params"), CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_a_fit_from_codes_predicts_as_the_fit_from_floats(cls: type, params: dict) -> None:
    X, labels, values = _data(3_000)
    y = labels if cls.__name__.endswith("Classifier") else values
    kwargs = {**params, "random_state": 11, "categorical_features": [1]}
    expected = cls(**kwargs).fit(X, y)
    model = _from_pieces(cls(**kwargs), X, y)
    X_new, _, _ = _data(1_000, seed=1)
    X_new[::50, 1] = 9.0  # a category training never saw
    for name in ("predict", "predict_proba"):
        if hasattr(expected, name):
            np.testing.assert_array_equal(
                getattr(model, name)(X_new), getattr(expected, name)(X_new)
            )
    for name in ("oob_score_", "oob_decision_function_", "oob_prediction_", "feature_importances_"):
        if hasattr(expected, name):
            np.testing.assert_array_equal(getattr(model, name), getattr(expected, name))


def test_the_plan_reads_a_subsample_past_the_binner_limit_and_still_matches() -> None:
    X, _, values = _data(200_500, seed=3)
    kwargs = {"n_estimators": 3, "max_depth": 3, "random_state": 5, "categorical_features": [1]}
    plan = XGBoostRegressor(**kwargs).binning_plan(*X.shape)
    assert plan.rows.size == 200_000 and np.all(np.diff(plan.rows) > 0)
    model = _from_pieces(XGBoostRegressor(**kwargs), X, values, piece=65_536)
    expected = XGBoostRegressor(**kwargs).fit(X, values)
    np.testing.assert_array_equal(model.predict(X[:5_000]), expected.predict(X[:5_000]))


def test_routing_values_send_every_row_where_its_own_value_goes() -> None:
    X, labels, _ = _data(4_000, seed=4)
    forest = RandomForestClassifier(n_estimators=5, random_state=2, categorical_features=[1])
    forest.fit(X, labels)
    mapper = forest.bin_mapper_
    codes = mapper.transform(X)
    np.testing.assert_array_equal(
        forest.predict_proba(routing_values(mapper, codes, raw=True)), forest.predict_proba(X)
    )


def test_codes_binned_with_other_settings_are_refused() -> None:
    X, labels, _ = _data(500)
    plan = RandomForestClassifier(max_bins=32, random_state=0).binning_plan(*X.shape)
    binned = Binned(plan.mapper.fit(X, plan.categorical).transform(X), plan.mapper)
    with pytest.raises(ValueError, match="other max_bins"):
        RandomForestClassifier(random_state=0).fit(binned, labels)
    with pytest.raises(ValueError, match="other max_bins"):
        DecisionTreeClassifier(random_state=0, categorical_features=[1]).fit(binned, labels)


def test_gradient_boosting_with_early_stopping_refuses_codes() -> None:
    X, labels, _ = _data(500)
    model = GradientBoostingClassifier(n_iter_no_change=3, random_state=0)
    with pytest.raises(ValueError, match="n_iter_no_change"):
        _from_pieces(model, X, labels)
