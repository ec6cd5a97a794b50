"""The dense encoding that lets linear, neighbour and Bayes learners take the trees' tables."""

from __future__ import annotations

import numpy as np
import pytest

from engine import (
    EncodedClassifier,
    EncodedRegressor,
    KNeighborsClassifier,
    LinearRegression,
    LogisticRegression,
    Perceptron,
    load_model,
    save_model,
)
from engine.preprocessing import DenseEncoding


def _table() -> np.ndarray:
    # Column 0 numeric with a gap, column 1 categorical codes {0, 2, 5} with a gap.
    return np.array(
        [
            [1.0, 0.0],
            [3.0, 2.0],
            [np.nan, 5.0],
            [5.0, np.nan],
            [7.0, 2.0],
        ]
    )


def test_encoding_by_hand() -> None:
    X = _table()
    encoding = DenseEncoding.fit(X, np.array([False, True]), standardize=False)
    # Median of 1, 3, 5, 7 is 4; one indicator for the numeric gap; one-hot over 0, 2, 5.
    expected = np.array(
        [
            [1.0, 0, 1, 0, 0],
            [3.0, 0, 0, 1, 0],
            [4.0, 1, 0, 0, 1],
            [5.0, 0, 0, 0, 0],
            [7.0, 0, 0, 1, 0],
        ]
    )
    np.testing.assert_array_equal(encoding.transform(X), expected)
    # An unseen code (9) and a missing one are both "no known category".
    unseen = encoding.transform(np.array([[2.0, 9.0], [2.0, np.nan]]))
    np.testing.assert_array_equal(unseen[:, 2:], np.zeros((2, 3)))


def test_standardised_training_columns_have_zero_mean_unit_variance() -> None:
    X = _table()
    dense = DenseEncoding.fit(X, np.array([False, True]), standardize=True).transform(X)
    np.testing.assert_allclose(dense.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(dense.std(axis=0), 1.0, rtol=1e-12)


def test_linear_regression_learns_category_offsets_and_missingness() -> None:
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    colour = rng.integers(0, 3, size=n).astype(np.float64)
    y = 2.0 * x + np.array([0.0, 5.0, -3.0])[colour.astype(int)]
    x[:40] = np.nan
    # Where x is missing the target is the category offset shifted by 10: representable
    # only through the missing indicator (x is filled with its median there).
    y[:40] = np.array([0.0, 5.0, -3.0])[colour[:40].astype(int)] + 10.0
    X = np.column_stack([x, colour])
    model = EncodedRegressor(LinearRegression(), categorical_features=[1]).fit(X, y)
    # Noise-free and exactly representable, so least squares recovers it to rounding.
    np.testing.assert_allclose(model.predict(X), y, atol=1e-9)
    without_colour = EncodedRegressor(LinearRegression()).fit(X[:, :1], y)
    assert np.abs(without_colour.predict(X[:, :1]) - y).max() > 1.0


def test_wrapped_classifier_accepts_nan_and_round_trips() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    X[::7, 2] = np.nan
    for learner in (LogisticRegression(), KNeighborsClassifier()):
        model = EncodedClassifier(learner).fit(X, y)
        assert model.score(X, y) > 0.9
        restored = load_model(save_model(model))
        np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))
        np.testing.assert_array_equal(model.classes_, [0, 1])


def test_unwrapped_learner_refuses_nan_with_a_clear_error() -> None:
    X = _table()
    with pytest.raises(ValueError, match="does not accept missing values"):
        LinearRegression().fit(X, np.arange(5.0))


def test_probabilities_exist_only_when_the_learner_has_them() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    assert not hasattr(EncodedClassifier(Perceptron()), "predict_proba")
    model = EncodedClassifier(Perceptron(random_state=0)).fit(X, y)
    assert not hasattr(model, "predict_proba")
    assert model.decision_function(X).shape == (60,)
    assert hasattr(EncodedClassifier(LogisticRegression()).fit(X, y), "predict_proba")
