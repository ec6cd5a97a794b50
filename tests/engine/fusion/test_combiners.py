"""What all five label-fusion combiners share: the estimator contract, cross-fitting,
weights, persistence, parallel fits and errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_iris

from engine import DecisionTreeClassifier, GaussianNB, LogisticRegression, load_model, save_model
from engine.base import NotFittedError, clone
from engine.callbacks import ProgressEvent
from engine.fusion import (
    BKSCombiner,
    DependenceTreeCombiner,
    MixtureOfExpertsClassifier,
    MixtureOfExpertsRegressor,
    NaiveBayesCombiner,
    SVDCombiner,
    WerneckeCombiner,
)

COMBINERS = [NaiveBayesCombiner, BKSCombiner, WerneckeCombiner, DependenceTreeCombiner, SVDCombiner]


def members() -> list[tuple[str, Any]]:
    return [
        ("tree", DecisionTreeClassifier(max_depth=2, random_state=0)),
        ("nb", GaussianNB()),
        ("lr", LogisticRegression(max_iter=300)),
    ]


@pytest.fixture(scope="module")
def iris() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_iris(return_X_y=True)
    return X, y


ids = [cls.__name__ for cls in COMBINERS]


@pytest.mark.parametrize("cls", COMBINERS, ids=ids)
def test_probabilities_and_predictions(cls: Any, iris: Any) -> None:
    X, y = iris
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    model = cls(members(), cv=3, random_state=0).fit(X, labels)
    proba = model.predict_proba(X)
    assert proba.shape == (150, 3) and (proba >= 0).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(X), model.classes_[proba.argmax(axis=1)])
    np.testing.assert_array_equal(model.classes_, ["setosa", "versicolor", "virginica"])
    # Iris is easy: members reach ~0.95; any combiner that mangles the labels would not.
    assert model.score(X, labels) > 0.9
    assert model.n_features_in_ == 4
    np.testing.assert_array_equal(model.combine_labels(model.predict_members(X)), proba)
    assert list(model.named_estimators_) == ["tree", "nb", "lr"]


@pytest.mark.parametrize("cls", COMBINERS, ids=ids)
def test_persistence_round_trip_predicts_identically(cls: Any, iris: Any) -> None:
    X, y = iris
    model = cls(members(), cv=3, random_state=0).fit(X, y)
    restored = load_model(save_model(model))
    np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))


@pytest.mark.parametrize("cls", COMBINERS, ids=ids)
def test_zero_weight_rows_are_absent(cls: Any, iris: Any) -> None:
    """Zero-weight rows take no fold and weigh nothing in the members or the tables, so the
    model equals one fitted without them (the members here respect zero weights exactly)."""
    X, y = iris
    weights = np.ones(150)
    weights[::7] = 0.0
    kept = weights > 0
    weighted = cls(members(), cv=3, random_state=0).fit(X, y, sample_weight=weights)
    removed = cls(members(), cv=3, random_state=0).fit(X[kept], y[kept])
    np.testing.assert_allclose(weighted.predict_proba(X), removed.predict_proba(X), atol=1e-9)


def test_members_are_cloned_and_refitted(iris: Any) -> None:
    X, y = iris
    prototypes = members()
    model = NaiveBayesCombiner(prototypes, cv=3, random_state=0).fit(X, y)
    assert not hasattr(prototypes[0][1], "n_features_in_")  # the prototypes stay unfitted
    for (_, prototype), fitted in zip(prototypes, model.estimators_, strict=True):
        assert fitted is not prototype and type(fitted) is type(prototype)
        # Refitted on every row: the same model as fitting the member directly.
        np.testing.assert_array_equal(fitted.predict(X), clone(prototype).fit(X, y).predict(X))


def test_out_of_fold_labels_differ_from_in_sample_labels(iris: Any) -> None:
    """The tables come from held-out labels: a depth-1 tree (two leaves, three classes) is
    wrong on a third of the rows in and out of sample, but the unpruned tree is perfect in
    sample and not out of it; its out-of-fold confusion matrix shows its true errors."""
    X, y = iris
    deep = [("deep", DecisionTreeClassifier(random_state=0))]
    crossed = NaiveBayesCombiner(deep, cv=5, random_state=0).fit(X, y)
    fitted = [("deep", DecisionTreeClassifier(random_state=0).fit(X, y))]
    prefit = NaiveBayesCombiner(fitted, prefit=True).fit(X, y)
    in_sample_errors = prefit.confusion_matrices_[0].sum() - np.trace(prefit.confusion_matrices_[0])
    held_out_errors = crossed.confusion_matrices_[0].sum() - np.trace(
        crossed.confusion_matrices_[0]
    )
    assert in_sample_errors == 0 and held_out_errors >= 3


def test_prefit_uses_the_given_members(iris: Any) -> None:
    X, y = iris
    fitted = [(name, est.fit(X, y)) for name, est in members()]
    model = NaiveBayesCombiner(fitted, prefit=True).fit(X, y)
    assert all(a is b for (_, a), b in zip(fitted, model.estimators_, strict=True))
    for i, (_, member) in enumerate(fitted):
        counts = np.zeros((3, 3))
        np.add.at(counts, (y, member.predict(X)), 1.0)
        np.testing.assert_array_equal(model.confusion_matrices_[i], counts)


def test_explicit_splits(iris: Any) -> None:
    X, y = iris
    halves = [(np.arange(75, 150), np.arange(75)), (np.arange(75), np.arange(75, 150))]
    model = NaiveBayesCombiner(members(), cv=halves).fit(X, y)
    assert model.confusion_matrices_.sum() == 3 * 150
    # Rows no test set holds are left out of the combiner's tables.
    partial = [(np.arange(75, 150), np.arange(50))]
    model = NaiveBayesCombiner(members(), cv=partial).fit(X, y)
    assert model.confusion_matrices_.sum() == 3 * 50
    overlapping = [(np.arange(75), np.arange(80, 150)), (np.arange(75, 150), np.arange(90))]
    with pytest.raises(ValueError, match="overlap"):
        NaiveBayesCombiner(members(), cv=overlapping).fit(X, y)
    with pytest.raises(ValueError, match="outside"):
        NaiveBayesCombiner(members(), cv=[(np.arange(75), np.arange(140, 160))]).fit(X, y)


def test_parallel_fit_equals_serial_fit(iris: Any) -> None:
    X, y = iris
    serial = SVDCombiner(members(), cv=3, random_state=0, n_jobs=1).fit(X, y)
    parallel = SVDCombiner(members(), cv=3, random_state=0, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(parallel.predict_proba(X), serial.predict_proba(X))


def test_callbacks_report_every_member_fit(iris: Any) -> None:
    X, y = iris
    events: list[ProgressEvent] = []
    BKSCombiner(members(), cv=4, random_state=0).fit(X, y, callbacks=[events.append])
    total = 3 * (4 + 1) + 1
    assert [e.done for e in events] == list(range(1, total + 1))
    assert {e.total for e in events} == {total}


def test_parameters_reach_members_and_clone(iris: Any) -> None:
    model = DependenceTreeCombiner(members(), structure="shared", cv=3)
    shallow = model.get_params(deep=False)
    assert set(shallow) == {
        "estimators",
        "structure",
        "alpha",
        "cv",
        "prefit",
        "n_jobs",
        "random_state",
    }
    deep = model.get_params(deep=True)
    assert deep["tree__max_depth"] == 2 and deep["nb"] is model.estimators[1][1]
    model.set_params(tree__max_depth=1, cv=4)
    assert model.estimators[0][1].max_depth == 1 and model.cv == 4
    copy = clone(model)
    assert copy.get_params(deep=False)["structure"] == "shared"
    assert copy.estimators[0][1] is not model.estimators[0][1]
    assert copy.estimators[0][1].max_depth == 1


def test_errors(iris: Any) -> None:
    X, y = iris
    with pytest.raises(NotFittedError):
        BKSCombiner(members()).predict(X)
    with pytest.raises(ValueError, match="'estimators' parameter"):
        BKSCombiner([("a", GaussianNB()), ("a", GaussianNB())]).fit(X, y)
    with pytest.raises(ValueError, match="must not contain"):
        BKSCombiner([("cv", GaussianNB())]).fit(X, y)
    assert BKSCombiner([("cv", GaussianNB())]).get_params()["cv"] == 5  # not the member
    with pytest.raises(ValueError, match="n_samples=2"):
        BKSCombiner(members(), cv=3).fit(X[[0, 100]], y[[0, 100]])
    model = BKSCombiner(members(), cv=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="expecting 4 features"):
        model.predict(X[:, :3])
    # A prefit member that knows a class the combiner's data lack.
    foreign = [("nb", GaussianNB().fit(X, y))]
    with pytest.raises(ValueError, match="not classes"):
        BKSCombiner(foreign, prefit=True).fit(X[y < 2], y[y < 2])

    class Unweighted(GaussianNB):
        def fit(self, X: Any, y: Any) -> Any:  # type: ignore[override]
            return super().fit(X, y)

    with pytest.raises(TypeError, match="sample_weight"):
        BKSCombiner([("u", Unweighted())], cv=3).fit(X, y, sample_weight=np.ones(150))


def test_single_class(echo_members: Callable[..., Any]) -> None:
    S = np.zeros((6, 2), dtype=np.int64)
    y = np.zeros(6, dtype=np.int64)
    for cls in COMBINERS:
        model = cls(echo_members(2), cv=2, random_state=0).fit(S, y)
        np.testing.assert_array_equal(model.predict_proba(S), np.ones((6, 1)))


@pytest.mark.parametrize(
    "model",
    [cls(members()) for cls in COMBINERS]
    + [MixtureOfExpertsClassifier(), MixtureOfExpertsRegressor()],
    ids=lambda model: type(model).__name__,
)
def test_unfitted_estimators_raise_not_fitted_error(model: Any, iris: Any) -> None:
    """The contract scikit-learn's (xfailed) check_estimators_unfitted would hold."""
    X, y = iris
    calls = [lambda: model.predict(X), lambda: model.score(X, y)]
    if hasattr(model, "predict_proba"):
        calls.append(lambda: model.predict_proba(X))
    for call in calls:
        with pytest.raises(NotFittedError, match="is not fitted yet"):
            call()
