"""The estimator contract of every combiner: parameters, cloning, persistence, n_jobs,
callbacks, missing values and probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sklearn.base

from engine import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    EncodedClassifier,
    GaussianNB,
    LogisticRegression,
    ProgressEvent,
    Ridge,
    TrainingInterrupted,
    load_model,
    save_model,
)
from engine.base import NotFittedError, clone
from engine.combine import (
    GradingClassifier,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
)


def _classifiers() -> list[tuple[str, Any]]:
    return [
        ("lr", LogisticRegression()),
        ("nb", GaussianNB()),
        ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
    ]


def _regressors() -> list[tuple[str, Any]]:
    return [("ridge", Ridge()), ("tree", DecisionTreeRegressor(max_depth=3, random_state=0))]


def _classification_models() -> list[Any]:
    return [
        VotingClassifier(_classifiers()),
        VotingClassifier(_classifiers(), voting="soft", weights=[1, 2, 3]),
        VotingClassifier(_classifiers(), weights="log_odds", cv=3, random_state=0),
        StackingClassifier(_classifiers(), cv=3, random_state=0),
        StackingClassifier(_classifiers(), cv=3, passthrough=True, random_state=0),
        GradingClassifier(_classifiers(), cv=3, random_state=0),
    ]


def _regression_models() -> list[Any]:
    return [
        VotingRegressor(_regressors(), weights=[2, 1]),
        StackingRegressor(_regressors(), cv=3, random_state=0),
    ]


def _fitted(model: Any, request: Any) -> tuple[Any, np.ndarray, np.ndarray]:
    regression = isinstance(model, VotingRegressor | StackingRegressor)
    X, y = request.getfixturevalue("regression" if regression else "multiclass")
    return model.fit(X, y), X, y


def _output(model: Any, X: np.ndarray) -> np.ndarray:
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


MODELS = _classification_models() + _regression_models()
IDS = [f"{type(m).__name__}-{i}" for i, m in enumerate(MODELS)]


@pytest.mark.parametrize("model", _classification_models(), ids=IDS[:6])
def test_probabilities_sum_to_one(model: Any, request: Any) -> None:
    fitted, X, y = _fitted(model, request)
    probabilities = fitted.predict_proba(X)
    assert probabilities.shape == (len(y), 3)
    assert (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fitted.predict(X), probabilities.argmax(axis=1))
    assert fitted.score(X, y) > 0.6  # three balanced classes: chance is 1/3


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_persistence_round_trip_predicts_identically(model: Any, request: Any) -> None:
    fitted, X, _ = _fitted(model, request)
    restored = load_model(save_model(fitted))
    assert type(restored) is type(fitted)
    np.testing.assert_array_equal(_output(restored, X), _output(fitted, X))
    np.testing.assert_array_equal(restored.predict(X), fitted.predict(X))
    assert list(restored.named_estimators_) == [name for name, _ in fitted.estimators]
    assert restored.get_params(deep=False).keys() == fitted.get_params(deep=False).keys()


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_clone_and_params(model: Any) -> None:
    shallow = model.get_params(deep=False)
    assert set(shallow) == set(type(model)._get_param_names())
    for copy in (clone(model), sklearn.base.clone(model)):
        assert type(copy) is type(model)
        assert repr(copy) == repr(model)
        for (name, original), (copy_name, copied) in zip(
            model.estimators, copy.estimators, strict=True
        ):
            assert name == copy_name
            assert copied is not original  # members are copied, not shared
            assert copied.get_params() == original.get_params()
    deep = model.get_params(deep=True)
    first_name, first = model.estimators[0]
    assert deep[first_name] is first
    assert all(deep[f"{first_name}__{k}"] == v for k, v in first.get_params().items())


def test_set_params_reaches_members_and_final_estimator() -> None:
    model = StackingClassifier(_classifiers(), LogisticRegression())
    model.set_params(lr__C=0.25, final_estimator__C=4.0, cv=3)
    assert dict(model.estimators)["lr"].C == 0.25
    assert model.final_estimator.C == 4.0 and model.cv == 3
    model.set_params(nb="drop", tree=GaussianNB())
    assert [type(e).__name__ if e != "drop" else e for _, e in model.estimators] == [
        "LogisticRegression",
        "drop",
        "GaussianNB",
    ]
    with pytest.raises(ValueError, match="Invalid parameter 'svm'"):
        model.set_params(svm__C=1.0)


def test_n_jobs_gives_the_same_model(multiclass: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = multiclass
    serial = GradingClassifier(_classifiers(), cv=3, random_state=0).fit(X, y)
    parallel = GradingClassifier(_classifiers(), cv=3, random_state=0, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(parallel.predict_proba(X), serial.predict_proba(X))
    np.testing.assert_array_equal(parallel.predict_grades(X), serial.predict_grades(X))


@pytest.mark.parametrize(
    ("model", "total"),
    [
        (VotingClassifier(_classifiers()), 3),
        (VotingClassifier(_classifiers(), weights="log_odds", cv=4), 3 * 5),
        (StackingClassifier(_classifiers(), cv=4), 3 * 5 + 1),
        (GradingClassifier(_classifiers(), cv=4), 3 * 5 + 3),
    ],
    ids=["voting", "log-odds", "stacking", "grading"],
)
def test_one_progress_event_per_fit(
    model: Any, total: int, multiclass: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = multiclass
    events: list[ProgressEvent] = []
    model.fit(X, y, callbacks=[events.append])
    assert [(e.done, e.total) for e in events] == [(k, total) for k in range(1, total + 1)]
    assert {e.estimator for e in events} == {type(model).__name__}


def test_interrupted_fit_leaves_no_model(multiclass: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = multiclass
    model = StackingClassifier(_classifiers(), cv=3).fit(X, y)

    def stop_at_fourth(event: ProgressEvent) -> None:
        if event.done == 4:
            raise TrainingInterrupted

    with pytest.raises(TrainingInterrupted):
        model.fit(X, y, callbacks=[stop_at_fourth])
    with pytest.raises(NotFittedError):
        model.predict(X)
    assert not [name for name in vars(model) if name.endswith("_")]


def test_missing_values_pass_to_members_that_accept_them(
    multiclass: tuple[np.ndarray, np.ndarray],
) -> None:
    X, y = multiclass
    X = X.copy()
    X[np.random.default_rng(0).random(X.shape) < 0.1] = np.nan
    trees = [
        ("a", DecisionTreeClassifier(max_depth=3, random_state=0)),
        ("b", DecisionTreeClassifier(max_depth=5, random_state=0)),
        ("lr", EncodedClassifier(LogisticRegression())),  # encodes NaN itself
    ]
    for model in (
        VotingClassifier(trees, voting="soft"),
        StackingClassifier(trees, cv=3, random_state=0),
        GradingClassifier(trees, cv=3, random_state=0),
    ):
        model.fit(X, y)
        assert np.isfinite(model.predict_proba(X)).all()
        assert model.__sklearn_tags__().input_tags.allow_nan
    refusing = VotingClassifier(_classifiers())
    assert not refusing.__sklearn_tags__().input_tags.allow_nan
    with pytest.raises(ValueError, match="NaN"):
        refusing.fit(X, y)
    # Passthrough hands X to the final estimator too, which then must accept NaN.
    assert not StackingClassifier(trees, passthrough=True).__sklearn_tags__().input_tags.allow_nan


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_unfitted_and_feature_count(model: Any, request: Any) -> None:
    X = np.zeros((3, 5))
    with pytest.raises(NotFittedError):
        clone(model).predict(X)
    fitted, X, _ = _fitted(clone(model), request)
    assert fitted.n_features_in_ == X.shape[1]
    with pytest.raises(ValueError, match="features"):
        fitted.predict(X[:, :-1])
