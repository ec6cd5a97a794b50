"""Callbacks that stop and keep, and the one EarlyStopping callback of every family (issue 17).

- the callback's three rules on hand-made metric sequences;
- each family's early-stopping parameter fits the models it fitted before it became the
  callback (the numbers of members below were recorded from the code before the change);
- the callback handed to ``fit`` by a user gives the same model as the parameter;
- a callback that answers :class:`StopTraining` leaves a fitted model of the iterations so
  far, or of the best ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_classification, make_regression

from engine import RandomForestClassifier, RandomForestRegressor
from engine.boosting import (
    AdaBoostClassifier,
    AdaBoostRegressor,
    ArcX4Classifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RegionBoostClassifier,
    XGBoostClassifier,
    XGBoostRegressor,
)
from engine.callbacks import (
    OOB_ERROR,
    VALIDATION_LOSS,
    ProgressEvent,
    StopTraining,
    eval_set_metric,
    notify,
)
from engine.early_stopping import EarlyStopping
from engine.ensemble import BaggingClassifier
from engine.linear import LogisticRegression


def _feed(callback: EarlyStopping, values: list[float]) -> list[StopTraining | None]:
    """The callback's answers to one fit whose metric takes ``values``."""
    return [
        callback(ProgressEvent("Model", done, 100, {"loss": value}))
        for done, value in enumerate(values, start=1)
    ]


def _stopped_at(answers: list[StopTraining | None]) -> int | None:
    return next((done for done, answer in enumerate(answers, 1) if answer is not None), None)


# --- the rules ----------------------------------------------------------------------------------


def test_best_rule_counts_iterations_since_the_best_and_can_keep_it() -> None:
    callback = EarlyStopping("loss", patience=2, keep_best=True)
    answers = _feed(callback, [5.0, 4.0, 4.0, 4.0])
    # A tie is no improvement (as XGBoost and LightGBM): two rounds after the best, stop.
    assert _stopped_at(answers) == 4
    assert answers[3] == StopTraining(keep=2)
    assert (callback.best_iteration, callback.best_score, callback.stopped_at) == (1, 4.0, 4)


def test_best_rule_moves_the_best_only_by_more_than_min_delta() -> None:
    callback = EarlyStopping("loss", patience=2, min_delta=0.5)
    answers = _feed(callback, [5.0, 4.6, 4.7])
    assert _stopped_at(answers) == 3  # 4.6 and 4.7 are within 0.5 of 5.0
    assert callback.best_iteration == 0


def test_window_rule_compares_the_recent_best_with_the_earlier_best() -> None:
    # 10, 5, 6, 7 with patience 2: the window (6, 7) does not beat 5.
    answers = _feed(EarlyStopping("loss", patience=2, rule="window"), [10.0, 5.0, 6.0, 7.0])
    assert _stopped_at(answers) == 4
    # A tie with min_delta 0 counts as holding the best: the forests' rule keeps growing.
    answers = _feed(EarlyStopping("loss", patience=1, rule="window"), [3.0, 3.0, 3.0, 4.0])
    assert _stopped_at(answers) == 4
    # NaN (no out-of-bag row yet) is skipped; an all-NaN start never stops.
    answers = _feed(EarlyStopping("loss", patience=1, rule="window"), [np.nan, np.nan, 2.0, 3.0])
    assert _stopped_at(answers) == 4


def test_last_rule_needs_to_beat_one_of_the_previous_values() -> None:
    # scikit-learn: 6 beats 10 (one of the last two), so go on; 7 beats neither 5 nor 6.
    answers = _feed(EarlyStopping("loss", patience=2, rule="last"), [10.0, 5.0, 6.0, 7.0])
    assert _stopped_at(answers) == 4
    # Fewer values than the patience never stop; a gain within min_delta is none.
    answers = _feed(EarlyStopping("loss", patience=2, rule="last", min_delta=5.0), [10.0, 5.0])
    assert _stopped_at(answers) is None
    answers = _feed(EarlyStopping("loss", patience=1, rule="last", min_delta=5.0), [10.0, 5.0])
    assert _stopped_at(answers) == 2


def test_maximize_reverses_the_sense() -> None:
    callback = EarlyStopping("loss", patience=1, maximize=True)
    assert _stopped_at(_feed(callback, [1.0, 2.0, 1.5])) == 3
    assert callback.best_score == 2.0


def test_keep_best_asks_at_the_last_planned_iteration_too() -> None:
    callback = EarlyStopping("loss", patience=5, keep_best=True)
    answers = [
        callback(ProgressEvent("Model", done, 3, {"loss": value}))
        for done, value in enumerate([3.0, 1.0, 2.0], start=1)
    ]
    assert answers == [None, None, StopTraining(keep=2)]
    assert callback.stopped_at is None


def test_state_starts_over_with_a_new_fit() -> None:
    callback = EarlyStopping("loss", patience=1)
    _feed(callback, [1.0, 2.0])
    assert _feed(callback, [5.0, 4.0]) == [None, None]
    assert callback.history == [5.0, 4.0]


def test_a_missing_metric_and_bad_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"'oob_error'.*Model does not report.*loss"):
        EarlyStopping(OOB_ERROR)(ProgressEvent("Model", 1, 2, {"loss": 1.0}))
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping("loss", patience=0)
    with pytest.raises(ValueError, match="rule"):
        EarlyStopping("loss", rule="sometimes")
    with pytest.raises(ValueError, match="min_delta"):
        EarlyStopping("loss", min_delta=-1.0)


def test_notify_tells_every_callback_and_keeps_the_fewest() -> None:
    heard: list[int] = []

    def keep_three(event: ProgressEvent) -> StopTraining:
        return StopTraining(keep=3)

    def keep_all(event: ProgressEvent) -> StopTraining:
        return StopTraining()

    def listen(event: ProgressEvent) -> None:
        heard.append(event.done)

    event = ProgressEvent("Model", 5, 10)
    assert notify([keep_all, keep_three, listen], event) == StopTraining(keep=3)
    assert notify([keep_all, listen], event) == StopTraining()
    assert notify([listen], event) is None
    assert heard == [5, 5, 5]


# --- the parameters fit the models they fitted before ------------------------------------------


def _classification() -> tuple[Any, Any]:
    X, y = make_classification(500, 8, n_informative=4, flip_y=0.15, random_state=0)
    return X, y


def _regression() -> tuple[Any, Any]:
    X, y = make_regression(400, 6, noise=20.0, random_state=0)
    return X, y


def _diabetes() -> tuple[Any, ...]:
    X, y = load_diabetes(return_X_y=True)
    return X[:300], y[:300], X[300:], y[300:]


# The stopping points of the block-wise bootstrap (engine.ensemble._sampling), which moved
# them all when it replaced the one-stream draw (22, 37, 9, 25 and 17 before).
@pytest.mark.parametrize(
    ("patience", "tol", "expected"), [(3, 1e-4, 4), (8, 1e-4, 30), (3, 0.01, 4), (8, 0.01, 9)]
)
def test_forest_oob_early_stopping_grows_as_many_trees_as_before(
    patience: int, tol: float, expected: int
) -> None:
    X, y = _classification()
    model = RandomForestClassifier(
        150, early_stopping="oob", n_iter_no_change=patience, tol=tol, random_state=0
    ).fit(X, y)
    assert model.n_estimators_ == expected


def test_regression_forest_and_bagging_stop_where_they_did() -> None:
    X, y = _regression()
    forest = RandomForestRegressor(
        150, early_stopping="oob", n_iter_no_change=3, max_samples=0.5, random_state=1
    ).fit(X, y)
    assert forest.n_estimators_ == 37
    X, y = _classification()
    bagging = BaggingClassifier(
        LogisticRegression(),
        n_estimators=60,
        early_stopping="oob",
        n_iter_no_change=4,
        tol=0.0,
        random_state=0,
    ).fit(X, y)
    assert bagging.n_estimators_ == 7


@pytest.mark.parametrize(("patience", "expected"), [(2, 10), (5, 24)])
def test_gradient_boosting_stops_where_it_did(patience: int, expected: int) -> None:
    X, y = _classification()
    model = GradientBoostingClassifier(
        n_estimators=300, learning_rate=0.3, n_iter_no_change=patience, random_state=0
    ).fit(X, y)
    assert model.n_estimators_ == expected
    X, y = _regression()
    regressor = GradientBoostingRegressor(
        n_estimators=300, learning_rate=0.3, n_iter_no_change=2, subsample=0.7, random_state=0
    ).fit(X, y)
    assert regressor.n_estimators_ == 29


def test_xgboost_stops_and_keeps_the_best_rounds_where_it_did() -> None:
    X, y, X_val, y_val = _diabetes()
    model = XGBoostRegressor(
        n_estimators=200, learning_rate=0.3, early_stopping_rounds=5, random_state=0
    ).fit(X, y, eval_set=[(X_val, y_val)])
    assert (model.n_estimators_, model.best_iteration_) == (6, 5)
    assert len(model.evals_result_["validation_0"]["rmse"]) == 11
    X, y = _classification()
    classifier = XGBoostClassifier(
        n_estimators=200, learning_rate=0.5, early_stopping_rounds=5, subsample=0.8, random_state=0
    ).fit(X[:350], y[:350], eval_set=[(X[:100], y[:100]), (X[350:], y[350:])])
    # The last eval_set decides, as in XGBoost.
    assert (classifier.n_estimators_, classifier.best_iteration_) == (7, 6)
    # Without early_stopping_rounds every round is kept and the best is still found.
    X, y, X_val, y_val = _diabetes()
    full = XGBoostRegressor(n_estimators=40, learning_rate=0.3, random_state=0)
    full.fit(X, y, eval_set=[(X_val, y_val)])
    assert (full.n_estimators_, full.best_iteration_) == (40, 5)


# --- a user's EarlyStopping is the parameter ----------------------------------------------------


def test_a_forests_early_stopping_callback_is_the_parameter() -> None:
    X, y = _classification()
    by_parameter = RandomForestClassifier(
        150, early_stopping="oob", n_iter_no_change=8, random_state=0
    ).fit(X, y)
    callback = EarlyStopping(OOB_ERROR, patience=8, min_delta=1e-4, rule="window")
    by_callback = RandomForestClassifier(150, oob_score=True, random_state=0)
    by_callback.fit(X, y, callbacks=[callback])
    assert by_callback.n_estimators_ == by_parameter.n_estimators_ == callback.stopped_at
    np.testing.assert_array_equal(by_callback.predict_proba(X), by_parameter.predict_proba(X))
    np.testing.assert_array_equal(by_callback.oob_curve_, by_parameter.oob_curve_)
    assert by_callback.oob_score_ == by_parameter.oob_score_


def test_a_gradient_boosting_callback_is_the_parameter() -> None:
    X, y = _classification()
    params: dict[str, Any] = {"n_estimators": 300, "learning_rate": 0.3, "random_state": 0}
    by_parameter = GradientBoostingClassifier(n_iter_no_change=5, **params).fit(X, y)
    # A patience longer than the fit holds out the same rows and never stops by itself.
    by_callback = GradientBoostingClassifier(n_iter_no_change=1000, **params)
    callback = EarlyStopping(VALIDATION_LOSS, patience=5, min_delta=1e-4, rule="last")
    by_callback.fit(X, y, callbacks=[callback])
    assert by_callback.n_estimators_ == by_parameter.n_estimators_ == 24
    np.testing.assert_array_equal(by_callback.predict_proba(X), by_parameter.predict_proba(X))
    np.testing.assert_array_equal(by_callback.validation_score_, by_parameter.validation_score_)


def test_an_xgboost_callback_is_the_parameter() -> None:
    X, y, X_val, y_val = _diabetes()
    params: dict[str, Any] = {"n_estimators": 200, "learning_rate": 0.3, "random_state": 0}
    by_parameter = XGBoostRegressor(early_stopping_rounds=5, **params)
    by_parameter.fit(X, y, eval_set=[(X_val, y_val)])
    callback = EarlyStopping(eval_set_metric(0, "rmse"), patience=5, keep_best=True)
    by_callback = XGBoostRegressor(**params).fit(
        X, y, eval_set=[(X_val, y_val)], callbacks=[callback]
    )
    assert by_callback.n_estimators_ == by_parameter.n_estimators_ == callback.best_iteration + 1  # type: ignore[operator]
    assert by_callback.best_iteration_ == by_parameter.best_iteration_
    np.testing.assert_array_equal(by_callback.predict(X_val), by_parameter.predict(X_val))


# --- stop and keep ------------------------------------------------------------------------------


def _stop_after(n: int, keep: int | None = None) -> Any:
    def callback(event: ProgressEvent) -> StopTraining | None:
        return StopTraining(keep) if event.done == n else None

    return callback


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_stopped_forest_is_the_forest_of_its_members(n_jobs: int) -> None:
    X, y = _classification()
    stopped = RandomForestClassifier(40, oob_score=True, n_jobs=n_jobs, random_state=0)
    stopped.fit(X, y, callbacks=[_stop_after(9, keep=6)])
    grown = RandomForestClassifier(40, oob_score=True, random_state=0).fit(X, y)
    assert stopped.n_estimators_ == 6
    # Members are drawn from per-member seeds: the first six are those of the full forest,
    # and the out-of-bag figures are counted again over those six alone.
    np.testing.assert_array_equal(stopped.apply(X), grown.apply(X)[:, :6])
    np.testing.assert_array_equal(stopped.oob_curve_, grown.oob_curve_[:6])
    six = RandomForestClassifier(6, oob_score=True, random_state=0).fit(X, y)
    np.testing.assert_array_equal(stopped.predict_proba(X), six.predict_proba(X))
    np.testing.assert_array_equal(stopped.oob_decision_function_, six.oob_decision_function_)
    assert stopped.oob_score_ == six.oob_score_


def test_a_forest_keeps_its_best_oob_iteration_when_asked() -> None:
    X, y = _classification()
    callback = EarlyStopping(OOB_ERROR, patience=8, rule="window", keep_best=True)
    model = RandomForestClassifier(150, oob_score=True, random_state=0)
    model.fit(X, y, callbacks=[callback])
    assert callback.best_iteration is not None
    assert model.n_estimators_ == callback.best_iteration + 1 < callback.stopped_at  # type: ignore[operator]
    assert model.oob_curve_[-1] == min(callback.history)


def test_stopped_boosting_is_the_boosting_of_its_stages() -> None:
    X, y = _regression()
    stopped = GradientBoostingRegressor(n_estimators=50, subsample=0.7, random_state=0)
    stopped.fit(X, y, callbacks=[_stop_after(12, keep=10)])
    ten = GradientBoostingRegressor(n_estimators=10, subsample=0.7, random_state=0).fit(X, y)
    assert stopped.n_estimators_ == 10
    np.testing.assert_array_equal(stopped.predict(X), ten.predict(X))
    np.testing.assert_array_equal(stopped.train_score_, ten.train_score_)
    np.testing.assert_array_equal(stopped.oob_scores_, ten.oob_scores_)
    X, y, X_val, _ = _diabetes()
    booster = XGBoostRegressor(n_estimators=50, random_state=0)
    booster.fit(X, y, callbacks=[_stop_after(7)])
    seven = XGBoostRegressor(n_estimators=7, random_state=0).fit(X, y)
    assert booster.n_estimators_ == 7
    np.testing.assert_array_equal(booster.predict(X_val), seven.predict(X_val))


@pytest.mark.parametrize(
    "make",
    [AdaBoostClassifier, ArcX4Classifier, RegionBoostClassifier, AdaBoostRegressor],
)
def test_the_adaboost_family_stops_and_keeps(make: Any) -> None:
    X, y = _regression() if make is AdaBoostRegressor else _classification()
    params: dict[str, Any] = {"random_state": 0}
    stopped = make(n_estimators=30, **params).fit(X, y, callbacks=[_stop_after(8, keep=5)])
    five = make(n_estimators=5, **params).fit(X, y)
    assert len(stopped.estimators_) == 5
    np.testing.assert_array_equal(stopped.predict(X), five.predict(X))
    if make is ArcX4Classifier:
        np.testing.assert_array_equal(
            stopped.misclassification_counts_, five.misclassification_counts_
        )
    kept_all = make(n_estimators=30, **params).fit(X, y, callbacks=[_stop_after(4)])
    assert len(kept_all.estimators_) == 4
