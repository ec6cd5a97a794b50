"""LinearRegression and Ridge: parity with scikit-learn, weights and the contract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression as SkLinearRegression
from sklearn.linear_model import Ridge as SkRidge

from engine import load_model, save_model
from engine.base import NotFittedError
from engine.callbacks import ProgressEvent
from engine.linear import LinearRegression, Ridge
from engine.persistence import register_model_class

# Until engine/_model_classes.py lists the linear models (registering is idempotent).
register_model_class(LinearRegression)
register_model_class(Ridge)

X_DIABETES, Y_DIABETES = load_diabetes(return_X_y=True)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_linear_regression_matches_scikit_learn(fit_intercept: bool, weighted: bool) -> None:
    weights = np.random.default_rng(0).uniform(0.1, 4.0, Y_DIABETES.size) if weighted else None
    ours = LinearRegression(fit_intercept=fit_intercept)
    ours.fit(X_DIABETES, Y_DIABETES, sample_weight=weights)
    theirs = SkLinearRegression(fit_intercept=fit_intercept)
    theirs.fit(X_DIABETES, Y_DIABETES, sample_weight=weights)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours.predict(X_DIABETES), theirs.predict(X_DIABETES), rtol=1e-8)
    assert ours.score(X_DIABETES, Y_DIABETES) == pytest.approx(
        theirs.score(X_DIABETES, Y_DIABETES), rel=1e-10
    )


@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0, 100.0])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_matches_scikit_learn(alpha: float, fit_intercept: bool, weighted: bool) -> None:
    weights = np.random.default_rng(1).uniform(0.1, 4.0, Y_DIABETES.size) if weighted else None
    ours = Ridge(alpha, fit_intercept=fit_intercept)
    ours.fit(X_DIABETES, Y_DIABETES, sample_weight=weights)
    theirs = SkRidge(alpha, fit_intercept=fit_intercept, solver="svd")
    theirs.fit(X_DIABETES, Y_DIABETES, sample_weight=weights)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-8, atol=1e-8)


def test_collinear_features_give_the_minimum_norm_solution() -> None:
    X = np.column_stack([X_DIABETES[:, :3], X_DIABETES[:, 0] + X_DIABETES[:, 1]])
    ours = LinearRegression().fit(X, Y_DIABETES)
    theirs = SkLinearRegression().fit(X, Y_DIABETES)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-6)


@pytest.mark.parametrize("model", [LinearRegression(), Ridge(alpha=0.5)])
def test_integer_weights_equal_repeated_rows(model: LinearRegression | Ridge) -> None:
    counts = np.random.default_rng(2).integers(0, 4, size=Y_DIABETES.size)
    weighted = model.fit(X_DIABETES, Y_DIABETES, sample_weight=counts)
    coef, intercept = weighted.coef_.copy(), weighted.intercept_
    repeated = model.fit(np.repeat(X_DIABETES, counts, axis=0), np.repeat(Y_DIABETES, counts))
    np.testing.assert_allclose(repeated.coef_, coef, rtol=1e-9, atol=1e-9)
    assert repeated.intercept_ == pytest.approx(intercept, rel=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_row_order_does_not_matter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(40, 4)), rng.normal(size=40)
    order = rng.permutation(40)
    for model in (LinearRegression(), Ridge(alpha=0.3)):
        first = model.fit(X, y).predict(X)
        np.testing.assert_allclose(model.fit(X[order], y[order]).predict(X), first, atol=1e-10)


def test_contract_missing_values_callbacks_and_persistence() -> None:
    with pytest.raises(NotFittedError):
        Ridge().predict(X_DIABETES)
    broken = X_DIABETES.copy()
    broken[0, 0] = np.nan
    with pytest.raises(ValueError, match="Ridge does not accept missing values"):
        Ridge().fit(broken, Y_DIABETES)
    with pytest.raises(ValueError, match="'alpha' parameter"):
        Ridge(alpha=-1.0).fit(X_DIABETES, Y_DIABETES)
    events: list[ProgressEvent] = []
    model = Ridge().fit(X_DIABETES, Y_DIABETES, callbacks=[events.append])
    assert [(e.done, e.total) for e in events] == [(1, 1)]
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict(X_DIABETES), model.predict(X_DIABETES))
