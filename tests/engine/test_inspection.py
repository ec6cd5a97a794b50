"""engine.inspection.permutation_importance: exact behaviour on fakes, agreement with sklearn."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.inspection import permutation_importance as sklearn_permutation_importance
from sklearn.linear_model import LogisticRegression

from engine.inspection import PermutationImportance, permutation_importance


class SignClassifier:
    """Predicts ``X[:, 0] > 0`` (NaN counts as not positive); records what it was shown."""

    _estimator_type = "classifier"

    def __init__(self) -> None:
        self.nan_counts: list[NDArray[np.intp]] = []

    def fit(self, X: Any, y: Any) -> SignClassifier:
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict_proba(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        self.nan_counts.append(np.isnan(X).sum(axis=0))
        positive = (X[:, 0] > 0).astype(np.float64)
        return np.column_stack([1.0 - positive, positive])

    def predict(self, X: NDArray[np.float64]) -> NDArray[np.int64]:
        return self.predict_proba(X)[:, 1].astype(np.int64)


class LinearRegressor:
    """``y = X[:, 0] + 2 X[:, 1]``; every other column is ignored."""

    _estimator_type = "regressor"

    def predict(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        return X[:, 0] + 2.0 * X[:, 1]


def sign_data(n: int = 2000, n_features: int = 4, seed: int = 0) -> tuple[Any, Any]:
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, n_features))
    X[r.random((n, n_features)) < 0.1] = np.nan  # missing values in every column
    y = (X[:, 0] > 0).astype(np.int64)
    return X, y


def test_relevant_feature_drops_to_chance_and_others_to_exactly_zero() -> None:
    X, y = sign_data()
    result = permutation_importance(SignClassifier().fit(X, y), X, y, n_repeats=20, random_state=0)
    assert isinstance(result, PermutationImportance)
    assert result.importances.shape == (4, 20)
    assert result.importances_mean.shape == result.importances_std.shape == (4,)
    assert result.baseline_score == 1.0
    # A shuffled column still predicts "positive" for a fraction p of rows, agreeing with y by
    # chance p² + (1 - p)²; the mean of 20 repeats over 2000 rows has a standard error ≈ 0.003.
    p = y.mean()
    chance = p**2 + (1 - p) ** 2
    assert result.importances_mean[0] == pytest.approx(1.0 - chance, abs=0.015)
    assert np.all(result.importances[1:] == 0.0)
    assert np.all(result.importances_std[1:] == 0.0)
    np.testing.assert_allclose(result.importances_mean, result.importances.mean(axis=1))
    np.testing.assert_allclose(result.importances_std, result.importances.std(axis=1))


def test_nan_survives_permutation_and_input_is_untouched() -> None:
    X, y = sign_data(n=300)
    X_before = X.copy()
    model = SignClassifier().fit(X, y)
    permutation_importance(model, X, y, n_repeats=3, random_state=1)
    expected = np.isnan(X).sum(axis=0)
    assert len(model.nan_counts) == 1 + 4 * 3  # baseline, then every repeat of every feature
    for counts in model.nan_counts:
        np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(X, X_before)  # NaN-aware equality


def test_reproducible_for_a_fixed_random_state() -> None:
    X, y = sign_data(n=300)
    model = SignClassifier().fit(X, y)
    first = permutation_importance(model, X, y, n_repeats=4, random_state=7)
    again = permutation_importance(model, X, y, n_repeats=4, random_state=7)
    other = permutation_importance(model, X, y, n_repeats=4, random_state=8)
    np.testing.assert_array_equal(first.importances, again.importances)
    assert not np.array_equal(first.importances[0], other.importances[0])
    generator = permutation_importance(
        model, X, y, n_repeats=4, random_state=np.random.default_rng(7)
    )
    assert generator.importances.shape == (4, 4)


def test_a_feature_depends_only_on_its_own_seed() -> None:
    # Each column has its own child seed: appending a column leaves the others' numbers alone,
    # which is what lets a parallel executor score features in any order later.
    r = np.random.default_rng(2)
    X = r.normal(size=(200, 3))
    y = X[:, 0] + 2.0 * X[:, 1]
    wider = np.column_stack([X, r.normal(size=200)])
    narrow = permutation_importance(LinearRegressor(), X, y, n_repeats=3, random_state=3)
    wide = permutation_importance(LinearRegressor(), wider, y, n_repeats=3, random_state=3)
    np.testing.assert_array_equal(wide.importances[:3], narrow.importances)
    assert narrow.baseline_score == 1.0  # R², the regressors' default
    assert np.all(narrow.importances[1] > narrow.importances[0])
    assert np.all(wide.importances[2:] == 0.0)


def test_result_is_frozen_and_read_only() -> None:
    X, y = sign_data(n=100)
    result = permutation_importance(SignClassifier().fit(X, y), X, y, random_state=0)
    with pytest.raises(AttributeError):
        result.baseline_score = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        result.importances_mean[0] = 1.0


def test_scoring_names_callables_and_weights() -> None:
    X, y = sign_data(n=400)
    model = SignClassifier().fit(X, y)
    by_name = permutation_importance(model, X, y, scoring="accuracy", random_state=5)
    default = permutation_importance(model, X, y, random_state=5)
    np.testing.assert_array_equal(by_name.importances, default.importances)
    # Equal weights change nothing; a scikit-learn-style scorer without sample_weight works.
    weighted = permutation_importance(model, X, y, random_state=5, sample_weight=np.full(400, 2.0))
    np.testing.assert_array_equal(weighted.importances, default.importances)

    def accuracy(estimator: Any, X: Any, y: Any) -> float:
        return float(np.mean(estimator.predict(X) == y))

    custom = permutation_importance(model, X, y, scoring=accuracy, random_state=5)
    np.testing.assert_allclose(custom.importances, default.importances, atol=1e-12)
    proba = permutation_importance(model, X, y, scoring="neg_log_loss", random_state=5)
    assert proba.importances_mean[0] > 1.0 and np.all(proba.importances[1:] == 0.0)


@pytest.mark.parametrize("max_samples", [0.25, 100])
def test_max_samples_scores_one_shared_subsample(max_samples: float) -> None:
    X, y = sign_data(n=400)
    model = SignClassifier().fit(X, y)
    result = permutation_importance(
        model, X, y, n_repeats=3, random_state=0, max_samples=max_samples
    )
    assert result.baseline_score == 1.0
    assert np.all(result.importances[1:] == 0.0)  # baseline and permutations on the same rows
    assert result.importances_mean[0] > 0.3


def test_invalid_arguments() -> None:
    X, y = sign_data(n=50)
    model = SignClassifier().fit(X, y)
    with pytest.raises(ValueError, match="n_repeats"):
        permutation_importance(model, X, y, n_repeats=0)
    with pytest.raises(ValueError, match="max_samples"):
        permutation_importance(model, X, y, max_samples=1.5)
    with pytest.raises(ValueError, match="max_samples"):
        permutation_importance(model, X, y, max_samples=51)
    with pytest.raises(ValueError, match="selects no rows"):
        permutation_importance(model, X, y, max_samples=0.001)
    with pytest.raises(TypeError, match="max_samples"):
        permutation_importance(model, X, y, max_samples=True)
    with pytest.raises(ValueError, match="y must have shape"):
        permutation_importance(model, X, y[:-1])
    with pytest.raises(ValueError, match="2D"):
        permutation_importance(model, X[:, 0], y)
    with pytest.raises(ValueError, match="Unknown scoring"):
        permutation_importance(model, X, y, scoring="auc")


@pytest.mark.parametrize("scoring", ["accuracy", "neg_log_loss", "roc_auc"])
def test_agrees_with_sklearn_on_a_sklearn_estimator(scoring: str) -> None:
    """Same estimand, different random streams: means agree within sampling error.

    Both functions average ``n_repeats`` independent uniform permutations of one column, so for
    each feature the two means estimate the same expectation with standard errors σ/√R. Their
    difference has standard error √(σ₁² + σ₂²)/√R; we allow 5 of those (a false alarm under a
    normal approximation has probability below 1e-6, and the seeds are fixed anyway). The
    features' true weights 3 > 1.5 > 0.6 > 0 = 0 must also give the same top-3 ranking.
    """
    r = np.random.default_rng(0)
    X = r.normal(size=(800, 5))
    logit = X @ np.array([3.0, 1.5, 0.6, 0.0, 0.0])
    y = (r.random(800) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    model = LogisticRegression().fit(X[:400], y[:400])
    X_test, y_test = X[400:], y[400:]
    repeats = 30
    ours = permutation_importance(
        model, X_test, y_test, scoring=scoring, n_repeats=repeats, random_state=0
    )
    theirs = sklearn_permutation_importance(
        model, X_test, y_test, scoring=scoring, n_repeats=repeats, random_state=0
    )
    standard_error = np.sqrt((ours.importances_std**2 + theirs.importances_std**2) / repeats)
    difference = np.abs(ours.importances_mean - theirs.importances_mean)
    assert np.all(difference <= 5 * standard_error + 1e-12)
    assert list(np.argsort(-ours.importances_mean)[:3]) == [0, 1, 2]
    assert list(np.argsort(-theirs.importances_mean)[:3]) == [0, 1, 2]
