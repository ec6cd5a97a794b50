"""Agreement with the ``shap`` library (a test-only reference, skipped when it is absent).

Same models, same background: ``shap.LinearExplainer`` (interventional, on the training rows)
for linear models, ``shap.ExactExplainer`` (every coalition against an independent masker)
for naive Bayes and the sampled models. The issue's targets: correlation ≥ 0.99 for exact
methods, ≥ 0.95 for sampled ones at the default sample count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine import (
    DecisionTreeClassifier,
    GaussianNB,
    KNeighborsClassifier,
    LogisticRegression,
    RandomForestClassifier,
    StackingClassifier,
    explain,
)
from engine.explain._api import describe

shap = pytest.importorskip("shap")


def data(n: int = 160, p: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, (X[:, 0] + X[:, 1] * X[:, 2] - 0.5 * X[:, 3] > 0).astype(int)


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


def exact_reference(model: object, rows: np.ndarray, background: np.ndarray) -> np.ndarray:
    output = describe(model).output
    masker = shap.maskers.Independent(background, max_samples=background.shape[0])
    explainer = shap.ExactExplainer(lambda Z: output(np.asarray(Z))[:, 0], masker)
    return np.asarray(explainer(rows).values)


def test_logistic_regression_matches_the_linear_explainer() -> None:
    X, y = data()
    model = LogisticRegression().fit(X, y)
    masker = shap.maskers.Independent(X, max_samples=X.shape[0])
    reference = shap.LinearExplainer((model.coef_[0], model.intercept_[0]), masker)

    ours = explain(model, X[:30]).contributions

    theirs = reference.shap_values(X[:30])
    assert correlation(ours, theirs) >= 0.99
    np.testing.assert_allclose(ours, theirs, atol=1e-9)


def test_naive_bayes_matches_the_exact_explainer_on_the_training_rows() -> None:
    X, y = data(p=4)
    model = GaussianNB().fit(X, y)

    ours = explain(model, X[:20]).contributions

    theirs = exact_reference(model, X[:20], X)
    assert correlation(ours, theirs) >= 0.99
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


@pytest.mark.parametrize("name", ["k_neighbors", "stacking_on_a_tree"])
def test_sampled_models_correlate_with_the_exact_explainer(name: str) -> None:
    X, y = data()
    makers: dict[str, Callable[[], Any]] = {
        "k_neighbors": lambda: KNeighborsClassifier(n_neighbors=9),
        "stacking_on_a_tree": lambda: StackingClassifier(
            [
                ("forest", RandomForestClassifier(n_estimators=10, random_state=0)),
                ("logistic", LogisticRegression()),
            ],
            final_estimator=DecisionTreeClassifier(max_depth=3, random_state=0),
            cv=2,
            random_state=0,
        ),
    }
    model = makers[name]().fit(X, y)
    background = describe(model).background
    assert background is not None

    ours = explain(model, X[:15])

    assert ours.method == "sampled"
    assert correlation(ours.contributions, exact_reference(model, X[:15], background)) >= 0.95
