"""Accuracy parity with scikit-learn's matching estimators on its bundled data sets.

Criteria (from the issue): over several seeds, the engine's mean test accuracy is at least
scikit-learn's minus 0.02 (classification), and its mean test RMSE at most 1.05 times
scikit-learn's (regression).

Protocol. Each seed gives one stratified 75/25 split (regression: stratified on target
quintiles), used by both libraries, and is also each estimator's ``random_state``.
Hyperparameters are matched where they mean the same thing:

- decision trees: both libraries' defaults (fully grown, all features per split);
- random forests: 100 trees, bootstrap; ``max_features="sqrt"`` for classification, and
  ``max_features=1/3`` for regression in *both* libraries (the engine's default, after Hastie,
  Tibshirani and Friedman 2009, §15.3; scikit-learn's default is 1.0, i.e. bagged trees);
- extra trees: 100 trees, no bootstrap; ``"sqrt"`` (classification) / 1.0 (regression),
  both libraries' defaults;
- bagging: 50 fully grown trees on bootstrap samples in both libraries. The issue asks only
  for equal counts; scikit-learn's default of 10 gives a noisy average, and 50 rather than
  100 halves the cost of the slowest family here (bagging fits every feature at every split).

The engine bins features (at most 255 quantile bins per feature), scikit-learn splits on
exact values; on these data sets that costs nothing measurable.

Seeds per data set trade noise against time (the whole file runs in about a minute on one
core): wine has 45 test rows per split, so one misclassified row moves accuracy by 0.022 —
more than the whole tolerance — and it gets 10 seeds; breast cancer and diabetes get 5;
digits has 450 test rows per split (a far steadier estimate per split) and the costliest
fits, and gets 3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from sklearn import datasets
from sklearn import ensemble as sk_ensemble
from sklearn import tree as sk_tree
from sklearn.model_selection import train_test_split

import engine

pytestmark = pytest.mark.slow

N_TREES = 100
N_BAGGED = 50
ACCURACY_TOLERANCE = 0.02
RMSE_RATIO = 1.05

SEEDS = {"wine": 10, "breast_cancer": 5, "digits": 3, "diabetes": 5}
LOADERS: dict[str, Callable[..., Any]] = {
    "wine": datasets.load_wine,
    "breast_cancer": datasets.load_breast_cancer,
    "digits": datasets.load_digits,
    "diabetes": datasets.load_diabetes,
}

Factory = Callable[[int], Any]


@dataclass(frozen=True)
class Pair:
    """The engine's estimator and scikit-learn's, each built from a seed."""

    ours: Factory
    theirs: Factory


CLASSIFIERS: dict[str, Pair] = {
    "decision_tree": Pair(
        lambda s: engine.DecisionTreeClassifier(random_state=s),
        lambda s: sk_tree.DecisionTreeClassifier(random_state=s),
    ),
    "random_forest": Pair(
        lambda s: engine.RandomForestClassifier(N_TREES, max_features="sqrt", random_state=s),
        lambda s: sk_ensemble.RandomForestClassifier(N_TREES, max_features="sqrt", random_state=s),
    ),
    "extra_trees": Pair(
        lambda s: engine.ExtraTreesClassifier(N_TREES, max_features="sqrt", random_state=s),
        lambda s: sk_ensemble.ExtraTreesClassifier(N_TREES, max_features="sqrt", random_state=s),
    ),
    "bagging": Pair(
        lambda s: engine.BaggingClassifier(n_estimators=N_BAGGED, random_state=s),
        lambda s: sk_ensemble.BaggingClassifier(n_estimators=N_BAGGED, random_state=s),
    ),
}
REGRESSORS: dict[str, Pair] = {
    "decision_tree": Pair(
        lambda s: engine.DecisionTreeRegressor(random_state=s),
        lambda s: sk_tree.DecisionTreeRegressor(random_state=s),
    ),
    "random_forest": Pair(
        lambda s: engine.RandomForestRegressor(N_TREES, max_features=1 / 3, random_state=s),
        lambda s: sk_ensemble.RandomForestRegressor(N_TREES, max_features=1 / 3, random_state=s),
    ),
    "extra_trees": Pair(
        lambda s: engine.ExtraTreesRegressor(N_TREES, max_features=1.0, random_state=s),
        lambda s: sk_ensemble.ExtraTreesRegressor(N_TREES, max_features=1.0, random_state=s),
    ),
    "bagging": Pair(
        lambda s: engine.BaggingRegressor(n_estimators=N_BAGGED, random_state=s),
        lambda s: sk_ensemble.BaggingRegressor(n_estimators=N_BAGGED, random_state=s),
    ),
}


def _accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(y_true == y_pred))


def _rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def mean_scores(dataset: str, pair: Pair, *, regression: bool) -> tuple[float, float]:
    """Mean test score (accuracy, or RMSE for regression) of both libraries over the seeds."""
    X, y = LOADERS[dataset](return_X_y=True)
    strata = np.digitize(y, np.quantile(y, [0.2, 0.4, 0.6, 0.8])) if regression else y
    metric = _rmse if regression else _accuracy
    ours, theirs = [], []
    for seed in range(SEEDS[dataset]):
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.25, stratify=strata, random_state=seed
        )
        ours.append(metric(y_test, pair.ours(seed).fit(X_train, y_train).predict(X_test)))
        theirs.append(metric(y_test, pair.theirs(seed).fit(X_train, y_train).predict(X_test)))
    return float(np.mean(ours)), float(np.mean(theirs))


# Binary (breast cancer) and multiclass (digits) parity in `make test`; wine, whose 45 test
# rows need 10 seeds (the costliest runs of this file), is a third look `make long` takes.
@pytest.mark.parametrize("model", sorted(CLASSIFIERS))
@pytest.mark.parametrize(
    "dataset", [pytest.param("wine", marks=pytest.mark.long), "breast_cancer", "digits"]
)
def test_classification_accuracy_matches_sklearn(dataset: str, model: str) -> None:
    ours, theirs = mean_scores(dataset, CLASSIFIERS[model], regression=False)
    assert ours >= theirs - ACCURACY_TOLERANCE, (
        f"{model} on {dataset}: accuracy {ours:.4f}, scikit-learn {theirs:.4f}"
    )


@pytest.mark.parametrize("model", sorted(REGRESSORS))
def test_regression_rmse_matches_sklearn(model: str) -> None:
    ours, theirs = mean_scores("diabetes", REGRESSORS[model], regression=True)
    assert ours <= RMSE_RATIO * theirs, (
        f"{model} on diabetes: RMSE {ours:.3f}, scikit-learn {theirs:.3f}"
    )


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1, ties sharing their mean rank (as Spearman's coefficient needs)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(values.size)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation: Pearson's correlation of the ranks."""
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def test_spearman_handles_ties_and_order() -> None:
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])) == pytest.approx(1)
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])) == pytest.approx(-1)
    np.testing.assert_array_equal(_ranks(np.array([5.0, 1.0, 5.0, 0.0])), [2.5, 1, 2.5, 0])


def test_random_forest_importances_rank_like_sklearn() -> None:
    """Impurity-based importances on breast cancer: same ranking, both normalised."""
    X, y = datasets.load_breast_cancer(return_X_y=True)
    ours = engine.RandomForestClassifier(N_TREES, random_state=0).fit(X, y)
    theirs = sk_ensemble.RandomForestClassifier(N_TREES, random_state=0).fit(X, y)
    assert ours.feature_importances_.shape == (X.shape[1],)
    assert ours.feature_importances_.sum() == pytest.approx(1.0, abs=1e-12)
    assert theirs.feature_importances_.sum() == pytest.approx(1.0, abs=1e-12)
    assert (ours.feature_importances_ >= 0).all()
    assert spearman(ours.feature_importances_, theirs.feature_importances_) >= 0.8
