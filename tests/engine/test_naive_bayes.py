"""GaussianNB: parity with scikit-learn, weights, probabilities and the contract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.naive_bayes import GaussianNB as SkGaussianNB

from engine import load_model, save_model
from engine.base import NotFittedError
from engine.callbacks import ProgressEvent
from engine.naive_bayes import GaussianNB
from engine.persistence import register_model_class

# Until engine/_model_classes.py lists it (registering is idempotent).
register_model_class(GaussianNB)

LOADERS = [load_iris, load_wine, load_breast_cancer]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("var_smoothing", [1e-9, 1e-3])
def test_matches_scikit_learn(loader: object, var_smoothing: float) -> None:
    X, y = loader(return_X_y=True)  # type: ignore[operator]
    ours = GaussianNB(var_smoothing=var_smoothing).fit(X, y)
    theirs = SkGaussianNB(var_smoothing=var_smoothing).fit(X, y)
    np.testing.assert_allclose(ours.theta_, theirs.theta_, rtol=1e-12)
    np.testing.assert_allclose(ours.var_, theirs.var_, rtol=1e-10)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-8)
    np.testing.assert_allclose(
        ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=1e-8, atol=1e-8
    )
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_weighted_fit_and_priors_match_scikit_learn() -> None:
    X, y = load_wine(return_X_y=True)
    weights = np.random.default_rng(0).uniform(0.1, 3.0, size=y.size)
    ours = GaussianNB().fit(X, y, sample_weight=weights)
    theirs = SkGaussianNB().fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.theta_, theirs.theta_, rtol=1e-12)
    np.testing.assert_allclose(ours.class_count_, theirs.class_count_, rtol=1e-12)
    np.testing.assert_allclose(
        ours.var_ - ours.epsilon_, theirs.var_ - theirs.epsilon_, rtol=1e-10, atol=1e-12
    )
    # epsilon_ scales the weighted variance here, scikit-learn's the unweighted one (so that
    # here, unlike there, an integer weight equals repeating the row); without smoothing
    # the two models are the same.
    ours = GaussianNB(var_smoothing=0.0).fit(X, y, sample_weight=weights)
    theirs = SkGaussianNB(var_smoothing=0.0).fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-8)
    priors = [0.2, 0.3, 0.5]
    ours = GaussianNB(priors=priors).fit(X, y)
    theirs = SkGaussianNB(priors=priors).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-8)


def test_integer_weights_equal_repeated_rows() -> None:
    X, y = load_iris(return_X_y=True)
    counts = np.random.default_rng(1).integers(0, 4, size=y.size)
    weighted = GaussianNB().fit(X, y, sample_weight=counts)
    repeated = GaussianNB().fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_allclose(weighted.var_, repeated.var_, rtol=1e-10)
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n_classes=st.integers(2, 5))
def test_probabilities_sum_to_one_and_row_order_does_not_matter(seed: int, n_classes: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=rng.uniform(0.1, 50), size=(40, 3))
    y = np.arange(40) % n_classes
    model = GaussianNB().fit(X, y)
    probabilities = model.predict_proba(X * 30)  # far from the data: log-sum-exp must hold
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    assert np.isfinite(model.predict_log_proba(X * 30)).all()
    order = rng.permutation(40)
    shuffled = GaussianNB().fit(X[order], y[order])
    np.testing.assert_allclose(shuffled.predict_proba(X), model.predict_proba(X), atol=1e-10)


def test_contract_errors_callbacks_and_persistence() -> None:
    X, y = load_iris(return_X_y=True)
    with pytest.raises(NotFittedError):
        GaussianNB().predict(X)
    with pytest.raises(ValueError, match="sum of the priors"):
        GaussianNB(priors=[0.5, 0.5, 0.5]).fit(X, y)
    with pytest.raises(ValueError, match="'priors' parameter"):
        GaussianNB(priors=[-1.0, 1.0, 1.0]).fit(X, y)
    broken = X.copy()
    broken[2, 2] = np.nan
    with pytest.raises(ValueError, match="GaussianNB does not accept missing values"):
        GaussianNB().fit(broken, y)
    events: list[ProgressEvent] = []
    model = GaussianNB().fit(X, y, callbacks=[events.append])
    assert len(events) == 1
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
