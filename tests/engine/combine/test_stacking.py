"""StackingClassifier and StackingRegressor: held-out meta-features, scikit-learn parity, folds."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn import ensemble as sk_ensemble

from engine import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    GaussianNB,
    KNeighborsRegressor,
    LinearRegression,
    LogisticRegression,
    Perceptron,
    Ridge,
)
from engine.base import clone
from engine.combine import (
    StackingClassifier,
    StackingRegressor,
    cv_folds,
    fold_splits,
)


def _classifiers() -> list[tuple[str, Any]]:
    return [
        ("lr", LogisticRegression()),
        ("nb", GaussianNB()),
        ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
    ]


def _regressors() -> list[tuple[str, Any]]:
    return [
        ("lin", LinearRegression()),
        ("knn", KNeighborsRegressor(7)),
        ("tree", DecisionTreeRegressor(max_depth=4, random_state=0)),
    ]


class RecordingLogisticRegression(LogisticRegression):
    """A final estimator that keeps the meta-features it was fitted on."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None, callbacks: Any = None) -> Any:
        super().fit(X, y, sample_weight=sample_weight)
        self.X_fit_ = np.array(X)  # after fit, which forgets every attribute ending in _
        return self


def _by_hand(
    members: list[tuple[str, Any]], X: np.ndarray, y: np.ndarray, folds: np.ndarray, drop: bool
) -> np.ndarray:
    """Out-of-fold meta-features computed the plain way, one member and fold at a time."""
    columns = []
    for _, prototype in members:
        method = "predict_proba" if hasattr(prototype, "predict_proba") else "predict"
        output = None
        for k in range(folds.max() + 1):
            fitted = clone(prototype).fit(X[folds != k], y[folds != k])
            held_out = np.asarray(getattr(fitted, method)(X[folds == k]), dtype=float)
            held_out = held_out.reshape(held_out.shape[0], -1)
            if output is None:
                output = np.empty((X.shape[0], held_out.shape[1]))
            output[folds == k] = held_out
        assert output is not None
        columns.append(output[:, 1:] if drop and method == "predict_proba" else output)
    return np.hstack(columns)


@pytest.mark.parametrize("data", ["binary", "multiclass"])
def test_meta_features_are_the_out_of_fold_outputs(data: str, request: Any) -> None:
    X, y = request.getfixturevalue(data)
    model = StackingClassifier(
        _classifiers(), RecordingLogisticRegression(), cv=4, random_state=3
    ).fit(X, y)
    folds = cv_folds(4, classes=y, random_state=3)
    expected = _by_hand(_classifiers(), X, y, folds, drop=len(np.unique(y)) == 2)
    # 1e-12: the same fits on the same rows; equal up to (absent) rounding differences.
    np.testing.assert_allclose(model.final_estimator_.X_fit_, expected, rtol=0, atol=1e-12)
    n_classes = len(np.unique(y))
    assert expected.shape[1] == 3 * (n_classes - 1 if n_classes == 2 else n_classes)
    # The held-out outputs are not the refitted members' outputs on their own training rows.
    assert not np.allclose(model.transform(X), expected)


@pytest.mark.parametrize("data", ["binary", "multiclass"])
def test_parity_with_sklearn_stacking_on_the_same_folds(data: str, request: Any) -> None:
    X, y = request.getfixturevalue(data)
    labels = np.array(["a", "b", "c"])[y]
    ours = StackingClassifier(_classifiers(), cv=5, random_state=0).fit(X, labels)
    folds = cv_folds(5, classes=y, random_state=0)  # labels encode to y: same strata
    theirs = sk_ensemble.StackingClassifier(
        _classifiers(), final_estimator=LogisticRegression(), cv=fold_splits(folds, 5)
    )
    with warnings.catch_warnings():  # engine members do not inherit sklearn's BaseEstimator
        warnings.simplefilter("ignore")
        theirs.fit(X, labels)
    assert ours.stack_method_ == theirs.stack_method_
    # Identical members, folds and final estimator: equal to rounding (1e-12).
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_regressor_parity_with_sklearn_stacking(regression: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression
    ours = StackingRegressor(_regressors(), cv=4, passthrough=True, random_state=5).fit(X, y)
    folds = cv_folds(4, n_samples=len(y), random_state=5)
    theirs = sk_ensemble.StackingRegressor(
        _regressors(), final_estimator=Ridge(), cv=fold_splits(folds, 4), passthrough=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs.fit(X, y)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=0, atol=1e-12)
    # 1e-10: the same Ridge fit on meta-features equal to rounding.
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(ours.transform(X)[:, 3:], X)  # passthrough comes last


def test_final_estimator_gets_the_sample_weights(binary: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary
    sample_weight = np.random.default_rng(0).integers(1, 4, size=y.size).astype(float)
    model = StackingClassifier(
        _classifiers(), RecordingLogisticRegression(), cv=3, random_state=0
    ).fit(X, y, sample_weight=sample_weight)
    alone = LogisticRegression().fit(model.final_estimator_.X_fit_, y, sample_weight=sample_weight)
    np.testing.assert_allclose(model.final_estimator_.coef_, alone.coef_, atol=1e-12)
    unweighted = StackingClassifier(_classifiers(), cv=3, random_state=0).fit(X, y)
    assert not np.allclose(unweighted.final_estimator_.coef_, alone.coef_, atol=1e-6)


def test_stack_methods(multiclass: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = multiclass
    members = [("p", Perceptron(random_state=0)), ("nb", GaussianNB())]
    auto = StackingClassifier(members, cv=3, random_state=0).fit(X, y)
    assert auto.stack_method_ == ["decision_function", "predict_proba"]
    assert auto.transform(X).shape == (len(y), 6)
    predicted = StackingClassifier(members, cv=3, stack_method="predict", random_state=0)
    predicted.fit(X, y)
    np.testing.assert_array_equal(
        predicted.transform(X), np.column_stack([m.predict(X) for m in predicted.estimators_])
    )
    with pytest.raises(ValueError, match="has no predict_proba"):
        StackingClassifier(members, stack_method="predict_proba").fit(X, y)


def test_folds_are_stratified_balanced_and_reproducible(
    multiclass: tuple[np.ndarray, np.ndarray],
) -> None:
    _, y = multiclass
    y = y[:-7]  # uneven class counts
    folds = cv_folds(5, classes=y, random_state=0)
    counts = np.array([[np.sum((folds == k) & (y == c)) for k in range(5)] for c in range(3)])
    assert (counts.max(axis=1) - counts.min(axis=1) <= 1).all()  # every class spread evenly
    sizes = np.bincount(folds)
    assert sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(folds, cv_folds(5, classes=y, random_state=0))
    assert not np.array_equal(folds, cv_folds(5, classes=y, random_state=1))
    with pytest.raises(ValueError, match="n_samples=3"):
        cv_folds(5, n_samples=3)


def test_explicit_splits(binary: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary
    folds = cv_folds(3, classes=y, random_state=9)
    by_count = StackingClassifier(_classifiers(), cv=3, random_state=9).fit(X, y)
    by_splits = StackingClassifier(_classifiers(), cv=fold_splits(folds, 3)).fit(X, y)
    np.testing.assert_array_equal(by_count.predict_proba(X), by_splits.predict_proba(X))
    overlapping = [
        (np.arange(120, 240), np.arange(0, 120)),
        (np.arange(0, 100), np.arange(100, 240)),
    ]
    with pytest.raises(ValueError, match="overlap"):
        StackingClassifier(_classifiers(), cv=overlapping).fit(X, y)
    not_complement = [
        (np.arange(150, 240), np.arange(0, 120)),
        (np.arange(0, 120), np.arange(120, 240)),
    ]
    with pytest.raises(ValueError, match="not held out"):
        StackingClassifier(_classifiers(), cv=not_complement).fit(X, y)
