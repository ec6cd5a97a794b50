"""Gradient tree boosting: a worked example, behaviour, parity with scikit-learn, persistence."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import ensemble as sk_ensemble
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
from sklearn.model_selection import train_test_split

from engine import load_model, save_model
from engine._params import InvalidParameterError
from engine.boosting._gradient import GradientBoostingClassifier, GradientBoostingRegressor
from engine.callbacks import ProgressEvent, TrainingInterrupted
from engine.persistence import register_model_class


def noisy_regression(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + rng.normal(scale=1.0, size=n)
    return X, y


def noisy_classification(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(scale=0.8, size=n) > 0).astype(int)
    return X, y


# --- the algorithm by hand ------------------------------------------------------------------


def test_two_stages_of_stumps_by_hand() -> None:
    # F0 = mean = 1; residuals (−1, −1, 0, 2): the best stump cuts at 2.5 with leaf means
    # −2/3 and 2. With ν = ½: F1 = (2/3, 2/3, 2/3, 2); residuals (−2/3, −2/3, 1/3, 1): the best
    # cut is 1.5 with means −2/3 and 2/3, so F2 = (1/3, 1/3, 1, 7/3).
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0.0, 0.0, 1.0, 3.0])
    model = GradientBoostingRegressor(n_estimators=2, max_depth=1, learning_rate=0.5).fit(X, y)
    assert model.init_ == 1.0
    first, second = (stage[0] for stage in model.estimators_)
    assert first.nodes["threshold"][0] == 2.5
    assert second.nodes["threshold"][0] == 1.5
    np.testing.assert_allclose(first.values[1:, 0], [-2 / 3, 2.0])
    np.testing.assert_allclose(second.values[1:, 0], [-2 / 3, 2 / 3])
    np.testing.assert_allclose(model.predict(X), [1 / 3, 1 / 3, 1.0, 7 / 3])
    # train_score_ is the MSE after each stage: (4+4+1+9)/9/4 and (1+1+0+4)/9/4.
    np.testing.assert_allclose(model.train_score_, [0.5, 1 / 6])
    staged = list(model.staged_predict(X))
    np.testing.assert_allclose(staged[0], [2 / 3, 2 / 3, 2 / 3, 2.0])


def test_training_loss_decreases_with_shrinkage() -> None:
    X, y = noisy_regression()
    model = GradientBoostingRegressor(n_estimators=60, learning_rate=0.1, random_state=0).fit(X, y)
    scores = model.train_score_
    assert scores.shape == (60,)
    # Adding ν × the leaf means of the residuals can only lower the squared error.
    assert np.all(np.diff(scores) <= 1e-9 * scores[:-1])
    assert scores[-1] < 0.5 * scores[0]


def test_multiclass_grows_k_trees_per_stage_and_softmax_probabilities() -> None:
    X, y = load_wine(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
    assert len(model.estimators_) == 5
    assert all(len(stage) == 3 for stage in model.estimators_)
    assert np.shape(model.init_) == (3,)
    raw = model.decision_function(X)
    assert raw.shape == (X.shape[0], 3)
    expected = np.exp(raw) / np.exp(raw).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(X), expected)
    staged = list(model.staged_decision_function(X))
    np.testing.assert_allclose(staged[-1], raw)
    assert len(list(model.staged_predict_proba(X))) == 5


@pytest.mark.parametrize("loss", ["log_loss", "exponential"])
def test_binary_probabilities_from_the_raw_score(loss: str) -> None:
    X, y = noisy_classification()
    labels = np.array(["no", "yes"])[y]
    model = GradientBoostingClassifier(loss=loss, n_estimators=20, random_state=0).fit(X, labels)
    raw = model.decision_function(X)
    assert raw.shape == (X.shape[0],)
    # P = e^{2F} / (1 + e^{2F}) for the exponential loss (Friedman, Hastie and Tibshirani 2000)
    scale = 2.0 if loss == "exponential" else 1.0
    positive = np.exp(scale * raw) / (1 + np.exp(scale * raw))
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], positive)
    np.testing.assert_array_equal(model.predict(X), np.where(raw > 0, "yes", "no"))
    assert model.score(X, labels) > 0.8


@pytest.mark.parametrize("loss", ["absolute_error", "huber", "quantile", "poisson"])
def test_other_regression_losses_fit(loss: str) -> None:
    X, y = noisy_regression()
    if loss == "poisson":
        y = np.random.default_rng(0).poisson(np.exp(0.5 * X[:, 0])).astype(float)
    model = GradientBoostingRegressor(loss=loss, n_estimators=30, random_state=0).fit(X, y)
    assert model.train_score_[-1] < model.train_score_[0]
    prediction = model.predict(X)
    if loss == "poisson":
        assert (prediction > 0).all()
        assert np.corrcoef(prediction, np.exp(0.5 * X[:, 0]))[0, 1] > 0.8
    if loss == "quantile":
        assert 0.8 < np.mean(y <= prediction) < 0.97  # alpha = 0.9


def test_tree_size_limits() -> None:
    X, y = noisy_regression()
    stumps = GradientBoostingRegressor(n_estimators=5, max_depth=1).fit(X, y)
    assert all(stage[0].n_leaves == 2 for stage in stumps.estimators_)
    leafy = GradientBoostingRegressor(n_estimators=5, max_depth=None, max_leaf_nodes=5).fit(X, y)
    assert all(stage[0].n_leaves == 5 for stage in leafy.estimators_)
    sparse = GradientBoostingRegressor(n_estimators=5, min_samples_leaf=50).fit(X, y)
    for stage in sparse.estimators_:
        leaves = stage[0].nodes[stage[0].nodes["left_child"] < 0]
        assert leaves["n_samples"].min() >= 50


def test_feature_importances_favour_informative_features() -> None:
    X, y = noisy_regression()
    model = GradientBoostingRegressor(n_estimators=30, random_state=0).fit(X, y)
    importances = model.feature_importances_
    assert importances.sum() == pytest.approx(1.0)
    assert set(np.argsort(importances)[-2:]) == {0, 1}


# --- early stopping, subsampling, callbacks ------------------------------------------------


def test_early_stopping_on_a_noisy_problem() -> None:
    X, y = noisy_classification(600)
    model = GradientBoostingClassifier(
        n_estimators=500, learning_rate=0.3, n_iter_no_change=5, random_state=0
    ).fit(X, y)
    assert model.n_estimators_ < 500
    assert len(model.estimators_) == model.n_estimators_
    assert model.validation_score_.shape == (model.n_estimators_,)
    assert model.train_score_.shape == (model.n_estimators_,)


def test_early_stopping_holds_out_a_stratified_validation_set() -> None:
    X, y = noisy_regression(300)
    events: list[ProgressEvent] = []
    GradientBoostingRegressor(
        n_estimators=10, n_iter_no_change=100, validation_fraction=0.2, random_state=0
    ).fit(X, y, callbacks=[events.append])
    assert all("validation_loss" in event.metrics for event in events)


def test_subsample_is_reproducible_and_tracks_oob() -> None:
    X, y = noisy_regression()
    params = {"n_estimators": 20, "subsample": 0.5, "random_state": 3}
    first = GradientBoostingRegressor(**params).fit(X, y)  # type: ignore[arg-type]
    second = GradientBoostingRegressor(**params).fit(X, y)  # type: ignore[arg-type]
    np.testing.assert_array_equal(first.predict(X), second.predict(X))
    np.testing.assert_array_equal(first.train_score_, second.train_score_)
    assert first.oob_scores_.shape == first.oob_improvement_.shape == (20,)
    assert first.oob_score_ == first.oob_scores_[-1]
    np.testing.assert_allclose(first.oob_improvement_[1:], -np.diff(first.oob_scores_))
    other = GradientBoostingRegressor(**{**params, "random_state": 4}).fit(X, y)  # type: ignore[arg-type]
    assert not np.array_equal(first.predict(X), other.predict(X))
    # Each stage's tree saw only half of the rows.
    assert first.estimators_[0][0].nodes["n_samples"][0] == 200


def test_callbacks_get_one_event_per_stage() -> None:
    X, y = noisy_regression()
    events: list[ProgressEvent] = []
    model = GradientBoostingRegressor(n_estimators=7).fit(X, y, callbacks=[events.append])
    assert [event.done for event in events] == list(range(1, 8))
    assert all(event.total == 7 for event in events)
    np.testing.assert_allclose([e.metrics["train_loss"] for e in events], model.train_score_)


def test_training_interrupted_aborts_and_leaves_the_model_unfitted() -> None:
    X, y = noisy_regression()

    def stop_at_three(event: ProgressEvent) -> None:
        if event.done == 3:
            raise TrainingInterrupted("cancelled")

    model = GradientBoostingRegressor(n_estimators=50)
    with pytest.raises(TrainingInterrupted):
        model.fit(X, y, callbacks=[stop_at_three])
    assert not hasattr(model, "estimators_")
    with pytest.raises(AttributeError):
        model.predict(X)


# --- missing values, categories, validation --------------------------------------------------


def test_missing_values_and_categorical_features() -> None:
    rng = np.random.default_rng(0)
    n = 600
    category = rng.integers(0, 6, n).astype(float)
    numeric = rng.normal(size=n)
    missing = rng.random(n) < 0.2
    # Missingness itself is informative: the trees must learn where NaN goes.
    y = np.isin(category, [1, 4]).astype(int) ^ (missing | (numeric > 1.5)).astype(int)
    numeric[missing] = np.nan
    X = np.column_stack([category, numeric])
    model = GradientBoostingClassifier(
        n_estimators=40, categorical_features=[0], random_state=0
    ).fit(X, y)
    assert model.score(X, y) > 0.97
    assert np.isfinite(model.decision_function(X)).all()


def test_invalid_parameters_are_named() -> None:
    X, y = noisy_regression(50)
    with pytest.raises(InvalidParameterError) as error:
        GradientBoostingRegressor(loss="log_loss").fit(X, y)
    assert error.value.parameter == "loss"
    with pytest.raises(InvalidParameterError):
        GradientBoostingClassifier(subsample=0.0).fit(X, y > 0)
    with pytest.raises(ValueError, match="binary"):
        GradientBoostingClassifier(loss="exponential").fit(X, np.arange(50) % 3)


# --- persistence -----------------------------------------------------------------------------


@pytest.mark.parametrize("multiclass", [False, True])
def test_persistence_round_trip_is_bit_identical(multiclass: bool) -> None:
    # Registration is idempotent (it maps the qualified name to the class), so registering
    # here is safe whether or not the package registers the classes too.
    register_model_class(GradientBoostingClassifier)
    register_model_class(GradientBoostingRegressor)
    X, y = noisy_classification()
    if multiclass:
        y = y + (X[:, 3] > 0.5)
    X[::7, 1] = np.nan
    model = GradientBoostingClassifier(n_estimators=15, subsample=0.8, random_state=0).fit(X, y)
    loaded = load_model(save_model(model))
    assert type(loaded) is GradientBoostingClassifier
    np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.oob_scores_, model.oob_scores_)
    regressor = GradientBoostingRegressor(loss="huber", n_estimators=10).fit(X, X[:, 0])
    again = load_model(save_model(regressor))
    np.testing.assert_array_equal(again.predict(X), regressor.predict(X))


def test_predictions_follow_a_refit_and_a_save_after_predicting() -> None:
    # Prediction packs the trees once and keeps them beside the model: a refit must drop
    # them, and saving must leave them out.
    X, y = noisy_classification()
    model = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y)
    before = model.predict_proba(X)
    model.fit(X, 1 - y)
    flipped = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, 1 - y)
    np.testing.assert_array_equal(model.predict_proba(X), flipped.predict_proba(X))
    np.testing.assert_allclose(model.predict_proba(X), before[:, ::-1], atol=1e-12)
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    # Staged prediction adds ν·h_m(x) stage by stage; the packed sum multiplies once.
    staged = list(model.staged_decision_function(X))[-1]
    np.testing.assert_allclose(model.decision_function(X), staged, rtol=0, atol=1e-12)


# --- parity with scikit-learn ----------------------------------------------------------------


def test_regression_parity_with_sklearn_on_diabetes() -> None:
    X, y = load_diabetes(return_X_y=True)
    ours, theirs = [], []
    for seed in range(3):
        X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=seed)
        params = {"n_estimators": 100, "max_depth": 3, "learning_rate": 0.1, "random_state": seed}
        model = GradientBoostingRegressor(**params).fit(X_train, y_train)  # type: ignore[arg-type]
        reference = sk_ensemble.GradientBoostingRegressor(**params).fit(X_train, y_train)
        ours.append(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)))
        theirs.append(np.sqrt(np.mean((reference.predict(X_test) - y_test) ** 2)))
    assert np.mean(ours) <= 1.05 * np.mean(theirs)


def _digits_subset() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_digits(return_X_y=True)
    keep = np.isin(y, [0, 1, 3, 5, 8])
    return X[keep][:500], y[keep][:500]


@pytest.mark.parametrize(
    "loader",
    [
        lambda: load_breast_cancer(return_X_y=True),
        lambda: load_wine(return_X_y=True),
        _digits_subset,
    ],
    ids=["breast_cancer", "wine", "digits_subset"],
)
def test_classification_parity_with_sklearn(loader: object) -> None:
    X, y = loader()  # type: ignore[operator]
    ours, theirs = [], []
    for seed in range(1 if X.shape[1] > 40 else 2):
        X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=seed, stratify=y)
        params = {"n_estimators": 100, "max_depth": 3, "learning_rate": 0.1, "random_state": seed}
        model = GradientBoostingClassifier(**params).fit(X_train, y_train)  # type: ignore[arg-type]
        reference = sk_ensemble.GradientBoostingClassifier(**params).fit(X_train, y_train)
        ours.append(model.score(X_test, y_test))
        theirs.append(reference.score(X_test, y_test))
    assert np.mean(ours) >= np.mean(theirs) - 0.02
