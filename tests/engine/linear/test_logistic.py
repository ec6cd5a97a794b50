"""LogisticRegression: parity with scikit-learn, weights, properties and the contract."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.linear_model import LogisticRegression as SkLogisticRegression

from engine import load_model, save_model
from engine.base import NotFittedError
from engine.callbacks import ProgressEvent, TrainingInterrupted
from engine.linear import LogisticRegression, _logistic, _logistic_solver
from engine.persistence import register_model_class

# Until engine/_model_classes.py lists the linear models (registering is idempotent).
register_model_class(LogisticRegression)


def standardised(loader: Any) -> tuple[np.ndarray, np.ndarray]:
    X, y = loader(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


DATASETS = {"breast_cancer": load_breast_cancer, "wine": load_wine, "iris": load_iris}


@pytest.mark.parametrize("name", sorted(DATASETS))
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_matches_scikit_learn_lbfgs(name: str, C: float) -> None:
    X, y = standardised(DATASETS[name])
    ours = LogisticRegression(C=C).fit(X, y)
    theirs = SkLogisticRegression(C=C, tol=1e-10, max_iter=10_000).fit(X, y)
    scale = np.abs(theirs.coef_).max()
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-4 * scale)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=0, atol=1e-4 * scale)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)
    assert (ours.predict(X) == theirs.predict(X)).mean() > 0.995


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_newton_solution_matches_scikit_learn_newton_cholesky_closely(name: str) -> None:
    X, y = standardised(DATASETS[name])
    ours = LogisticRegression(tol=1e-10).fit(X, y)
    theirs = SkLogisticRegression(solver="newton-cholesky", tol=1e-12, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", ["breast_cancer", "wine"])
def test_lbfgs_path_for_large_problems_agrees(name: str, monkeypatch: Any) -> None:
    X, y = standardised(DATASETS[name])
    newton = LogisticRegression(tol=1e-10).fit(X, y)
    monkeypatch.setattr(_logistic, "NEWTON_MAX_PARAMETERS", 0)
    lbfgs = LogisticRegression(tol=1e-9, max_iter=2000).fit(X, y)
    np.testing.assert_allclose(lbfgs.predict_proba(X), newton.predict_proba(X), atol=1e-6)
    assert lbfgs.n_iter_[0] > newton.n_iter_[0]


def test_weighted_fit_matches_scikit_learn() -> None:
    X, y = standardised(load_wine)
    weights = np.random.default_rng(0).uniform(0.2, 3.0, size=y.size)
    ours = LogisticRegression(C=0.5).fit(X, y, sample_weight=weights)
    theirs = SkLogisticRegression(C=0.5, tol=1e-10, max_iter=10_000)
    theirs.fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)


def test_class_weights_match_scikit_learn() -> None:
    X, y = standardised(load_wine)
    ours = LogisticRegression(C=0.5, class_weight="balanced").fit(X, y)
    theirs = SkLogisticRegression(C=0.5, class_weight="balanced", tol=1e-10, max_iter=10_000)
    theirs.fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)
    # "balanced" counts rows (engine._targets, shared with the trees); scikit-learn ≥ 1.7
    # balances weighted class totals when sample_weight is given. The mapping below is
    # that weighted balance, passed explicitly.
    weights = np.random.default_rng(0).uniform(0.2, 3.0, size=y.size)
    totals = np.bincount(y, weights=weights)
    mapping = {k: weights.sum() / (3 * totals[k]) for k in range(3)}
    ours = LogisticRegression(C=0.5, class_weight=mapping).fit(X, y, sample_weight=weights)
    theirs.fit(X, y, sample_weight=weights)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize("name", ["breast_cancer", "iris"])
def test_integer_weights_equal_repeated_rows(name: str) -> None:
    X, y = standardised(DATASETS[name])
    counts = np.random.default_rng(1).integers(0, 4, size=y.size)
    weighted = LogisticRegression(tol=1e-10).fit(X, y, sample_weight=counts)
    repeated = LogisticRegression(tol=1e-10).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, rtol=0, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), n_classes=st.integers(2, 4))
def test_probabilities_sum_to_one_and_row_order_does_not_matter(seed: int, n_classes: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 3))
    y = np.arange(60) % n_classes
    model = LogisticRegression(tol=1e-10).fit(X, y)
    probabilities = model.predict_proba(X)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(model.predict_log_proba(X)), probabilities, atol=1e-12)
    order = rng.permutation(60)
    shuffled = LogisticRegression(tol=1e-10).fit(X[order], y[order])
    np.testing.assert_allclose(shuffled.predict_proba(X), probabilities, atol=1e-9)


def test_string_labels_shapes_and_decision_function() -> None:
    X, y = standardised(load_iris)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    model = LogisticRegression().fit(X, labels)
    assert model.coef_.shape == (3, 4) and model.intercept_.shape == (3,)
    assert model.decision_function(X).shape == (150, 3)
    assert set(model.predict(X)) <= set(labels)
    binary = LogisticRegression().fit(X[:100], labels[:100])
    assert binary.coef_.shape == (1, 4) and binary.decision_function(X).shape == (150,)
    np.testing.assert_array_equal(
        binary.predict(X), binary.classes_[(binary.predict_proba(X)[:, 1] > 0.5).astype(int)]
    )


def test_missing_values_are_refused_with_a_clear_error() -> None:
    X, y = standardised(load_iris)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="does not accept missing values"):
        LogisticRegression().fit(X, y)
    model = LogisticRegression().fit(np.nan_to_num(X), y)
    with pytest.raises(ValueError, match="impute them or use a tree-based method"):
        model.predict(X)


def test_unfitted_single_class_and_bad_parameters() -> None:
    with pytest.raises(NotFittedError):
        LogisticRegression().predict(np.zeros((2, 2)))
    constant = LogisticRegression().fit(np.zeros((3, 2)), ["a", "a", "a"])
    assert constant.predict(np.ones((2, 2))).tolist() == ["a", "a"]
    np.testing.assert_array_equal(constant.predict_proba(np.ones((2, 2))), [[1.0], [1.0]])
    with pytest.raises(ValueError, match="'C' parameter"):
        LogisticRegression(C=0.0).fit(np.eye(2), [0, 1])


def test_callbacks_per_iteration_interrupt_and_convergence_warning() -> None:
    X, y = standardised(load_breast_cancer)
    events: list[ProgressEvent] = []
    model = LogisticRegression().fit(X, y, callbacks=[events.append])
    assert [e.done for e in events] == list(range(1, model.n_iter_[0] + 1))
    assert all("train_loss" in e.metrics for e in events)
    losses = [e.metrics["train_loss"] for e in events]
    assert losses == sorted(losses, reverse=True)

    def stop(event: ProgressEvent) -> None:
        raise TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        model.fit(X, y, callbacks=[stop])
    assert not hasattr(model, "coef_")
    with pytest.warns(_logistic.ConvergenceWarning):
        LogisticRegression(max_iter=1).fit(X, y)


def test_persistence_round_trip_predicts_identically() -> None:
    X, y = standardised(load_wine)
    model = LogisticRegression(C=2.0).fit(X, y)
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_hessian_accumulated_in_row_chunks_equals_one_block(monkeypatch: Any) -> None:
    X, y = standardised(load_wine)
    whole = LogisticRegression(tol=1e-10).fit(X, y)
    monkeypatch.setattr(_logistic_solver, "_CHUNK_BYTES", 8 * 3 * 14 * 7)  # 7 rows per chunk
    chunked = LogisticRegression(tol=1e-10).fit(X, y)
    np.testing.assert_allclose(chunked.coef_, whole.coef_, rtol=0, atol=1e-12)
