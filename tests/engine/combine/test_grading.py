"""GradingClassifier: graders learn where each member is right; fallback when none is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import DecisionTreeClassifier, GaussianNB, KNeighborsClassifier, LogisticRegression
from engine.base import BaseEstimator, ClassifierMixin
from engine.combine import GradingClassifier, VotingClassifier, cv_folds


class ConstantClassifier(ClassifierMixin, BaseEstimator):
    """Always predicts one class code: right exactly on the rows of that class."""

    def __init__(self, code: int = 0) -> None:
        self.code = code

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> ConstantClassifier:
        self.classes_ = np.unique(y)
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.full(np.asarray(X).shape[0], self.code)


def _bands(n_classes: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The class is the band of x0, bands separated by gaps (clean splits); x1 is noise."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, n_classes, size=n)
    X = np.column_stack([y + rng.uniform(0.1, 0.9, size=n), rng.uniform(size=n)])
    return X, y


def test_graders_pick_the_member_that_is_right() -> None:
    X, y = _bands(2)
    members = [("zero", ConstantClassifier(0)), ("one", ConstantClassifier(1))]
    grading = GradingClassifier(members, cv=3, random_state=0).fit(X, y)
    # Each constant member is right on half the rows; its grader learns which half.
    np.testing.assert_allclose(grading.oof_accuracies_, [np.mean(y == 0), np.mean(y == 1)])
    grades = grading.predict_grades(X)
    np.testing.assert_array_equal(grades > 0.5, np.column_stack([y == 0, y == 1]))
    assert grading.score(X, y) == 1.0
    # A vote of the same two members is a tie on every row, which goes to the first class.
    voting = VotingClassifier(members).fit(X, y)
    assert voting.score(X, y) == pytest.approx(np.mean(y == 0), abs=1e-15)


def test_falls_back_to_all_members_when_none_is_graded_right() -> None:
    X, y = _bands(3)
    members = [("zero", ConstantClassifier(0)), ("one", ConstantClassifier(1))]
    grading = GradingClassifier(members, cv=3, random_state=0).fit(X, y)
    grades = grading.predict_grades(X)
    nobody = y == 2  # neither member ever predicts class 2
    assert nobody.any()
    assert (grades[nobody] <= 0.5).all()  # the fallback is really taken on these rows
    probabilities = grading.predict_proba(X)
    # Both members vote once: a tie between classes 0 and 1, which goes to the first.
    np.testing.assert_array_equal(probabilities[nobody], [[0.5, 0.5, 0.0]] * nobody.sum())
    np.testing.assert_array_equal(grading.predict(X)[nobody], 0)
    np.testing.assert_array_equal(probabilities[y == 0], [[1.0, 0.0, 0.0]] * np.sum(y == 0))
    np.testing.assert_array_equal(probabilities[y == 1], [[0.0, 1.0, 0.0]] * np.sum(y == 1))


def test_graded_votes_are_weighted_by_the_grades() -> None:
    X, y = _bands(3)
    members = [
        ("lr", LogisticRegression()),
        ("nb", GaussianNB()),
        ("knn", KNeighborsClassifier(15)),
    ]
    grading = GradingClassifier(members, cv=4, random_state=1).fit(X, y)
    grades = grading.predict_grades(X)
    predictions = np.column_stack([m.predict(X) for m in grading.estimators_])
    weights = np.where(grades > 0.5, grades, 0.0)
    weights[(weights == 0).all(axis=1)] = 1.0
    votes = np.zeros((len(y), 3))
    for i in range(3):
        votes[np.arange(len(y)), predictions[:, i]] += weights[:, i]
    expected = votes / votes.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(grading.predict_proba(X), expected, atol=1e-12)
    assert grading.score(X, y) > 0.9


def test_graders_are_fitted_on_the_graded_out_of_fold_predictions() -> None:
    X, y = _bands(2)
    X = X + np.random.default_rng(1).normal(scale=0.3, size=X.shape)  # members now err
    members = [("lr", LogisticRegression()), ("tree", DecisionTreeClassifier(max_depth=2))]
    grading = GradingClassifier(members, cv=3, random_state=4).fit(X, y)
    folds = cv_folds(3, classes=y, random_state=4)
    for (_, prototype), grader, accuracy in zip(
        members, grading.graders_, grading.oof_accuracies_, strict=True
    ):
        right = np.empty(len(y), dtype=np.int64)
        for k in range(3):
            member = type(prototype)(**prototype.get_params()).fit(X[folds != k], y[folds != k])
            right[folds == k] = member.predict(X[folds == k]) == y[folds == k]
        assert accuracy == pytest.approx(right.mean(), abs=1e-15)
        assert 0 < right.mean() < 1
        expected = DecisionTreeClassifier(min_samples_leaf=5, random_state=0).fit(X, right)
        np.testing.assert_array_equal(grader.predict_proba(X), expected.predict_proba(X))


def test_grader_must_give_probabilities() -> None:
    X, y = _bands(2)
    from engine import Perceptron

    with pytest.raises(ValueError, match="needs predict_proba"):
        GradingClassifier([("lr", LogisticRegression())], grader=Perceptron()).fit(X, y)
