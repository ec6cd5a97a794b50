"""Perceptron: convergence, accuracy comparable to scikit-learn's, weights and the contract."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.linear_model import Perceptron as SkPerceptron

from engine import load_model, save_model
from engine.callbacks import ProgressEvent
from engine.linear import Perceptron
from engine.persistence import register_model_class

# Until engine/_model_classes.py lists the linear models (registering is idempotent).
register_model_class(Perceptron)


def separable(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 2))
    margin = X @ np.array([1.0, -2.0]) + 0.3
    keep = np.abs(margin) > 0.2
    return X[keep], (margin[keep] > 0).astype(int)


def test_converges_on_a_separable_problem() -> None:
    X, y = separable()
    model = Perceptron(random_state=0, tol=None).fit(X, y)
    assert model.score(X, y) == 1.0
    assert model.n_iter_ < 1000  # stopped by an epoch without mistakes
    assert model.coef_.shape == (1, 2) and model.intercept_.shape == (1,)
    assert SkPerceptron(random_state=0).fit(X, y).score(X, y) <= 1.0


@pytest.mark.parametrize("loader", [load_breast_cancer, load_iris])
def test_accuracy_comparable_to_scikit_learn(loader: object) -> None:
    X, y = loader(return_X_y=True)  # type: ignore[operator]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    ours = Perceptron(random_state=0).fit(X, y).score(X, y)
    theirs = SkPerceptron(random_state=0).fit(X, y).score(X, y)
    assert ours >= theirs - 0.05
    assert ours > 0.85


def test_multiclass_decision_function_and_string_labels() -> None:
    X, y = load_iris(return_X_y=True)
    labels = np.array(["a", "b", "c"])[y]
    model = Perceptron(random_state=0).fit(X, labels)
    scores = model.decision_function(X)
    assert scores.shape == (150, 3)
    np.testing.assert_array_equal(model.predict(X), model.classes_[scores.argmax(axis=1)])
    assert not hasattr(model, "predict_proba")


def test_integer_weights_scale_updates_and_zero_weight_rows_are_ignored() -> None:
    X, y = separable(1)
    weights = np.ones(y.size)
    weights[::3] = 0.0
    flipped = y.copy()
    flipped[::3] = 1 - flipped[::3]  # noise only on rows of zero weight
    ignored = Perceptron(shuffle=False, tol=None).fit(X, flipped, sample_weight=weights)
    dropped = Perceptron(shuffle=False, tol=None).fit(X[weights > 0], y[weights > 0])
    np.testing.assert_array_equal(ignored.coef_, dropped.coef_)
    doubled = Perceptron(shuffle=False, eta0=1.0).fit(X, y, sample_weight=np.full(y.size, 2.0))
    larger_step = Perceptron(shuffle=False, eta0=2.0).fit(X, y)
    np.testing.assert_array_equal(doubled.coef_, larger_step.coef_)


def test_seeded_fits_repeat_callbacks_per_epoch_and_persistence() -> None:
    X, y = load_iris(return_X_y=True)
    first = Perceptron(random_state=3).fit(X, y)
    second = Perceptron(random_state=3).fit(X, y)
    np.testing.assert_array_equal(first.coef_, second.coef_)
    events: list[ProgressEvent] = []
    model = Perceptron(random_state=3, max_iter=7).fit(X, y, callbacks=[events.append])
    assert [e.done for e in events] == list(range(1, model.n_iter_ + 1))
    loaded = load_model(save_model(model))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="Perceptron does not accept missing values"):
        model.predict(X)
