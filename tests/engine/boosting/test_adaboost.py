"""AdaBoost (SAMME) and AdaBoost.R2: a worked example, the textbook claims, and parity
with scikit-learn (used here as a reference only; the engine never imports it)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine, make_hastie_10_2
from sklearn.ensemble import AdaBoostClassifier as SkAdaBoostClassifier
from sklearn.ensemble import AdaBoostRegressor as SkAdaBoostRegressor
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier as SkDecisionTreeClassifier

import engine  # noqa: F401  (registers the engine's member classes for persistence)
from engine._params import InvalidParameterError
from engine.base import BaseEstimator, ClassifierMixin
from engine.boosting import AdaBoostClassifier, AdaBoostRegressor
from engine.boosting._adaboost import learner_weight, normalise, reweight
from engine.boosting._adaboost_r2 import r2_row_loss, weighted_median
from engine.callbacks import ProgressEvent, TrainingInterrupted
from engine.persistence import load_model, register_model_class, save_model
from engine.tree import DecisionTreeClassifier

RECORDED_WEIGHTS: list[np.ndarray] = []


class RecordingStump(DecisionTreeClassifier):
    """A stump that remembers the sample weights of every fit (module level, so clone works)."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None, callbacks: Any = None) -> Any:
        RECORDED_WEIGHTS.append(np.array(sample_weight, dtype=float))
        return super().fit(X, y, sample_weight=sample_weight)


class ContrarianStump(ClassifierMixin, BaseEstimator):
    """A stump that predicts the class its tree does not: weighted error above ½."""

    def __init__(self) -> None:
        pass

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> ContrarianStump:
        self.tree_ = DecisionTreeClassifier(max_depth=1).fit(X, y, sample_weight=sample_weight)
        self.classes_ = self.tree_.classes_
        return self

    def predict(self, X: Any) -> np.ndarray:
        return 1 - self.tree_.predict(X)


# --- the worked example of AdaBoost's first round with stumps (steps 1–4) ---------------------

# Blood pressure (1 = yes), weight, age -> heart disease (1 = yes): the example's seven patients.
HEART = np.array(
    [[1, 68, 56], [0, 75, 44], [1, 80, 35], [1, 76, 49], [0, 78, 50], [0, 83, 38], [1, 85, 60]],
    dtype=float,
)
DISEASE = np.array([1, 0, 1, 0, 1, 0, 1])


def test_adaboost_worked_example_by_formula() -> None:
    # Step 2: total error 2/7 -> λ1 = ½ log((1 − 2/7)/(2/7)) = 0.458 (the example rounds to 0.45).
    alpha_1 = learner_weight(2 / 7, n_classes=2, alpha="half")
    assert round(alpha_1, 3) == 0.458
    # Step 3: misclassified rows (4 and 5) × e^λ = 0.22, the others × e^−λ = 0.09. The example
    # computes with λ as it printed it, 0.45; the unrounded λ gives 0.226 and 0.090.
    incorrect = np.array([False, False, False, True, True, False, False])
    slide = reweight(np.full(7, 1 / 7), incorrect, 0.45, "half")
    assert np.round(slide, 2).tolist() == [0.09, 0.09, 0.09, 0.22, 0.22, 0.09, 0.09]
    updated = reweight(np.full(7, 1 / 7), incorrect, alpha_1, "half")
    np.testing.assert_allclose(updated, slide, atol=0.005)
    # Step 4: normalised, 0.25 and 0.1 (exactly ½ of the mass on the misclassified rows).
    assert np.round(normalise(slide), 2).tolist() == [0.1, 0.1, 0.1, 0.25, 0.25, 0.1, 0.1]
    np.testing.assert_allclose(normalise(updated), [0.1, 0.1, 0.1, 0.25, 0.25, 0.1, 0.1])
    # Freund and Schapire's (1997) convention: α doubles, the normalised weights are the same.
    alpha_full = learner_weight(2 / 7, alpha="full")
    assert alpha_full == pytest.approx(2 * alpha_1)
    full = normalise(reweight(np.full(7, 1 / 7), incorrect, alpha_full, "full"))
    np.testing.assert_allclose(full, normalise(updated))


def test_adaboost_worked_example_by_fitting() -> None:
    """The example's first stump splits on blood pressure (rows 4 and 5 wrong, error 2/7)."""
    RECORDED_WEIGHTS.clear()
    model = AdaBoostClassifier(RecordingStump(max_depth=1), n_estimators=5)
    model.fit(HEART[:, :1], DISEASE)
    np.testing.assert_allclose(RECORDED_WEIGHTS[0], np.full(7, 1 / 7))
    assert model.estimator_errors_[0] == pytest.approx(2 / 7)
    assert round(float(model.estimator_weights_[0]), 3) == 0.458
    assert np.round(RECORDED_WEIGHTS[1], 2).tolist() == [0.1, 0.1, 0.1, 0.25, 0.25, 0.1, 0.1]
    # Round 2: with the new weights, both blood-pressure groups lean "yes" (0.3 vs 0.25 and
    # 0.25 vs 0.2), so the stump says "yes" everywhere and errs on the three "no" rows.
    assert model.estimator_errors_[1] == pytest.approx(0.1 + 0.25 + 0.1)
    assert model.predict(HEART[:, :1]).tolist() == [1, 0, 1, 1, 0, 0, 1]


# --- the α conventions ----------------------------------------------------------------------


def _blobs(seed: int = 0, n: int = 300, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.5, size=n) > 0.5).astype(int)
    if k == 3:
        y = y + (X[:, 2] > 0.8)
    return X, y


def test_half_and_full_alpha_differ_only_in_the_scale_of_the_score() -> None:
    X, y = _blobs()
    half = AdaBoostClassifier(n_estimators=20, learning_rate=0.7, random_state=0).fit(X, y)
    full = AdaBoostClassifier(n_estimators=20, learning_rate=0.7, alpha="full", random_state=0)
    full.fit(X, y)
    np.testing.assert_allclose(full.estimator_weights_, 2 * half.estimator_weights_)
    np.testing.assert_allclose(full.estimator_errors_, half.estimator_errors_)
    np.testing.assert_allclose(full.decision_function(X), 2 * half.decision_function(X))
    np.testing.assert_array_equal(full.predict(X), half.predict(X))
    np.testing.assert_allclose(full.predict_proba(X), half.predict_proba(X))
    # Friedman, Hastie and Tibshirani (2000): P(y = 1 | x) = e^{2F}/(1 + e^{2F}) with F the
    # "half" additive score.
    F = half.decision_function(X)
    np.testing.assert_allclose(half.predict_proba(X)[:, 1], np.exp(2 * F) / (1 + np.exp(2 * F)))
    assert ((F > 0) == (half.predict(X) == 1)).all()


def test_exponential_loss_and_training_error_fall() -> None:
    """Exponential loss goes down, and so does the training error it bounds (Freund and
    Schapire 1997; Friedman, Hastie and Tibshirani 2000)."""
    X, y = _blobs()
    events: list[ProgressEvent] = []
    model = AdaBoostClassifier(n_estimators=40, random_state=0).fit(X, y, callbacks=[events.append])
    signs = 2 * y - 1
    losses = [np.mean(np.exp(-signs * F)) for F in model.staged_decision_function(X)]
    assert all(b < a for a, b in itertools.pairwise(losses))
    errors = [e.metrics["train_error"] for e in events]
    assert len(errors) == len(model.estimators_) and events[-1].done == len(errors)
    assert errors[-1] < errors[0] and errors[-1] <= min(errors[:5])
    assert all(err <= loss for err, loss in zip(errors, losses, strict=True))  # 0-1 ≤ exp loss
    assert 1 - next(iter(model.staged_score(X, y))) == pytest.approx(errors[0])


def test_hastie_10_2_boosted_stumps_beat_one_stump() -> None:
    """ESL example 10.2 (Figure 10.2): one stump errs ~46% on the test set, 400 boosted stumps
    ~12%. 10 000 test rows give a standard error of ~0.3 points, so < 0.2 leaves a wide
    margin for the binned stumps and the seed while still failing any broken booster (which
    stays near the single stump's 46%)."""
    X, y = make_hastie_10_2(n_samples=12_000, random_state=1)
    model = AdaBoostClassifier(n_estimators=400, random_state=0).fit(X[:2000], y[:2000])
    scores = list(model.staged_score(X[2000:], y[2000:]))
    assert 0.40 < 1 - scores[0] < 0.5
    assert 1 - scores[-1] < 0.2
    assert len(scores) == 400


@pytest.mark.parametrize("loader", [load_breast_cancer, load_wine], ids=["cancer", "wine"])
def test_accuracy_parity_with_sklearn_samme(loader: Any) -> None:
    X, y = loader(return_X_y=True)
    ours, theirs = [], []
    for seed in range(3):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=seed, stratify=y)
        params = {"n_estimators": 50, "learning_rate": 0.5, "random_state": seed}
        ours.append(AdaBoostClassifier(**params).fit(X_tr, y_tr).score(X_te, y_te))
        reference = SkAdaBoostClassifier(SkDecisionTreeClassifier(max_depth=1), **params)
        theirs.append(reference.fit(X_tr, y_tr).score(X_te, y_te))
    assert np.mean(ours) >= np.mean(theirs) - 0.02


def test_r2_rmse_parity_with_sklearn() -> None:
    X, y = load_diabetes(return_X_y=True)
    ours, theirs = [], []
    for seed in range(3):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=seed)
        ours.append(
            np.sqrt(
                np.mean(
                    (AdaBoostRegressor(random_state=seed).fit(X_tr, y_tr).predict(X_te) - y_te) ** 2
                )
            )
        )
        reference = SkAdaBoostRegressor(random_state=seed).fit(X_tr, y_tr)
        theirs.append(np.sqrt(np.mean((reference.predict(X_te) - y_te) ** 2)))
    assert np.mean(ours) <= 1.05 * np.mean(theirs)


# --- edge cases -----------------------------------------------------------------------------


def test_perfect_first_learner_stops_with_one_member() -> None:
    X = np.arange(10, dtype=float)[:, None]
    y = np.array(["a"] * 5 + ["b"] * 5)
    model = AdaBoostClassifier(n_estimators=10).fit(X, y)
    assert len(model.estimators_) == 1 and model.estimator_errors_.tolist() == [0.0]
    assert np.isfinite(model.estimator_weights_).all()
    assert (model.predict(X) == y).all()
    assert (model.predict_proba(X).max(axis=1) > 0.999).all()


def test_worse_than_chance_learner_is_reversed() -> None:
    X, y = _blobs()
    contrarian = AdaBoostClassifier(ContrarianStump(), n_estimators=10).fit(X, y)
    plain = AdaBoostClassifier(n_estimators=10).fit(X, y)
    assert contrarian.estimator_reversed_.all() and not plain.estimator_reversed_.any()
    assert (contrarian.estimator_errors_ < 0.5).all()
    np.testing.assert_allclose(contrarian.estimator_weights_, plain.estimator_weights_)
    np.testing.assert_array_equal(contrarian.predict(X), plain.predict(X))


def test_worse_than_chance_first_learner_with_stop_is_an_error() -> None:
    X, y = _blobs()
    model = AdaBoostClassifier(ContrarianStump(), worse_than_chance="stop")
    with pytest.raises(ValueError, match="no better than chance"):
        model.fit(X, y)


def test_samme_multiclass_alpha_and_probabilities() -> None:
    X, y = _blobs(k=3)
    model = AdaBoostClassifier(n_estimators=15, random_state=0).fit(X, y)
    eps = model.estimator_errors_
    expected = 0.5 * (np.log((1 - eps) / eps) + np.log(2))
    np.testing.assert_allclose(model.estimator_weights_, expected)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    scores = model.decision_function(X)
    assert scores.shape == (300, 3)
    np.testing.assert_allclose(scores.sum(axis=1), 0.0, atol=1e-9)  # SAMME's coding sums to 0
    np.testing.assert_array_equal(proba.argmax(axis=1), scores.argmax(axis=1))
    assert model.score(X, y) > 0.7


def test_resample_mode_is_reproducible_and_learns() -> None:
    X, y = _blobs()
    first = AdaBoostClassifier(n_estimators=20, boosting_mode="resample", random_state=3)
    second = AdaBoostClassifier(n_estimators=20, boosting_mode="resample", random_state=3)
    np.testing.assert_array_equal(
        first.fit(X, y).decision_function(X), second.fit(X, y).decision_function(X)
    )
    assert first.score(X, y) > 0.8


def test_learning_rate_scales_alpha_and_importances_sum_to_one() -> None:
    X, y = _blobs()
    model = AdaBoostClassifier(n_estimators=1, learning_rate=0.1).fit(X, y)
    assert model.estimator_weights_[0] == pytest.approx(
        learner_weight(model.estimator_errors_[0]) * 0.1
    )
    assert AdaBoostClassifier(n_estimators=10).fit(
        X, y
    ).feature_importances_.sum() == pytest.approx(1.0)


def test_invalid_parameter_is_named() -> None:
    with pytest.raises(InvalidParameterError) as info:
        AdaBoostClassifier(alpha="quarter").fit(*_blobs())
    assert info.value.parameter == "alpha"


def test_interrupted_fit_leaves_the_model_unfitted() -> None:
    def stop(event: ProgressEvent) -> None:
        if event.done == 3:
            raise TrainingInterrupted("cancelled")

    model = AdaBoostClassifier(n_estimators=10)
    with pytest.raises(TrainingInterrupted):
        model.fit(*_blobs(), callbacks=[stop])
    assert not hasattr(model, "estimators_")


# --- AdaBoost.R2 ----------------------------------------------------------------------------


def test_weighted_median_and_row_losses_by_hand() -> None:
    predictions = np.array([[3.0, 1.0, 2.0], [5.0, 7.0, 6.0]])
    # Row 1 sorted 1, 2, 3 with weights 0.2, 0.5, 0.3: cumulative 0.2, 0.7 -> 2.
    # Row 2 sorted 5, 6, 7 with weights 0.3, 0.5, 0.2: cumulative 0.3, 0.8 -> 6.
    assert weighted_median(predictions, np.array([0.3, 0.2, 0.5])).tolist() == [2.0, 6.0]
    errors, mask = np.array([0.0, 1.0, 2.0]), np.ones(3, dtype=bool)
    np.testing.assert_allclose(r2_row_loss(errors, mask, "linear"), [0, 0.5, 1])
    np.testing.assert_allclose(r2_row_loss(errors, mask, "square"), [0, 0.25, 1])
    np.testing.assert_allclose(
        r2_row_loss(errors, mask, "exponential"), 1 - np.exp(-np.array([0, 0.5, 1]))
    )


@pytest.mark.parametrize("loss", ["linear", "square", "exponential"])
def test_r2_learns_and_stages(loss: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    model = AdaBoostRegressor(n_estimators=20, loss=loss, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.8
    staged = list(model.staged_predict(X))
    assert len(staged) == len(model.estimators_)
    np.testing.assert_allclose(staged[-1], model.predict(X))
    assert model.feature_importances_[0] > model.feature_importances_[1]


def test_r2_perfect_learner_stops() -> None:
    X = np.arange(8, dtype=float)[:, None]
    y = np.where(X[:, 0] < 4, 1.0, 5.0)
    model = AdaBoostRegressor(n_estimators=10, boosting_mode="reweight").fit(X, y)
    assert len(model.estimators_) == 1 and model.estimator_errors_[0] == 0.0
    np.testing.assert_allclose(model.predict(X), y)


# --- persistence ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        AdaBoostClassifier(n_estimators=8, random_state=0),
        AdaBoostClassifier(ContrarianStump(), n_estimators=4),
        AdaBoostRegressor(n_estimators=8, random_state=0),
    ],
    ids=repr,
)
def test_round_trip_predicts_identically(model: Any) -> None:
    for cls in (AdaBoostClassifier, AdaBoostRegressor, ContrarianStump):
        register_model_class(cls)  # registration is idempotent (a dict assignment)
    X, y = _blobs(k=3) if isinstance(model, AdaBoostClassifier) else _blobs()
    if isinstance(model.estimator, ContrarianStump):
        X, y = _blobs()
    model.fit(X, y)
    restored = load_model(save_model(model))
    assert type(restored) is type(model)
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(restored.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert math.isclose(restored.score(X, y), model.score(X, y))
