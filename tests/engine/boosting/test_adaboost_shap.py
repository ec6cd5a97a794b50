"""TreeSHAP for AdaBoost over decision trees: additivity, brute force, and the refusals.

AdaBoost's score is Σ_m α_m · vote_m(x), each member's vote a function of the leaf x reaches
(±1 for two classes, SAMME's 1 / −1/(K−1) coding beyond). The leaf votes are read here from
the model's own member predictions, independently of the explainer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine import (
    AdaBoostClassifier,
    AdaBoostRegressor,
    DecisionTreeClassifier,
    LogisticRegression,
    RegionBoostClassifier,
    tree_contributions,
)
from engine.tree._tree import Tree
from tests.engine.test_shap import brute_force_shap


class FlippedTree(DecisionTreeClassifier):
    """A tree fitted to the other class: weighted error above ½, so AdaBoost reverses it."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None, callbacks: Any = None) -> Any:
        return super().fit(X, 1 - np.asarray(y), sample_weight=sample_weight)


def data(n_classes: int, seed: int = 0, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 3] = rng.integers(0, 4, n)
    X[rng.random(n) < 0.1, 0] = np.nan
    score = np.nan_to_num(X[:, 0]) + X[:, 1] * (X[:, 3] - 1.5) + 0.5 * rng.normal(size=n)
    cuts = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.searchsorted(cuts, score)


MODELS = [
    (2, AdaBoostClassifier(n_estimators=25, random_state=0)),
    (2, AdaBoostClassifier(FlippedTree(max_depth=2), n_estimators=6, random_state=0)),
    (
        2,
        AdaBoostClassifier(
            DecisionTreeClassifier(max_depth=3, categorical_features=[3]),
            n_estimators=15,
            alpha="full",
            learning_rate=0.5,
            random_state=0,
        ),
    ),
    (3, AdaBoostClassifier(DecisionTreeClassifier(max_depth=2), n_estimators=20, random_state=0)),
    (
        4,
        AdaBoostClassifier(
            DecisionTreeClassifier(max_depth=3),
            n_estimators=10,
            boosting_mode="resample",
            random_state=1,
        ),
    ),
]


@pytest.mark.parametrize(("n_classes", "model"), MODELS)
def test_contributions_add_up_to_the_decision_function(n_classes: int, model: Any) -> None:
    X, y = data(n_classes)
    model.fit(X, y)
    contributions, bias = tree_contributions(model, X)
    score = model.decision_function(X)
    assert contributions.shape == (X.shape[0], 4) + ((n_classes,) if n_classes > 2 else ())
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, score, atol=1e-6)


def test_reversed_members_are_explained_as_reversed() -> None:
    X, y = data(2)
    model = AdaBoostClassifier(FlippedTree(max_depth=2), n_estimators=4, random_state=0)
    model.fit(X, y)
    assert model.estimator_reversed_.all()
    contributions, bias = tree_contributions(model, X)
    np.testing.assert_allclose(contributions.sum(axis=1) + bias, model.decision_function(X))


def vote_trees(model: Any, X: np.ndarray) -> list[Tree]:
    """Each member's tree with its leaves' coded votes, read from the model's predictions."""
    K = model.n_classes_
    predicted = model._member_predictions(model._prepare(X))  # after reversal
    trees = []
    for m, member in enumerate(model.estimators_):
        tree = member.tree_
        leaves = tree.apply(X)
        values = np.zeros((tree.node_count, 1 if K == 2 else K))
        for leaf in np.unique(leaves):
            k = predicted[leaves == leaf, m][0]
            values[leaf] = (
                (1.0 if k == 1 else -1.0)
                if K == 2
                else np.where(np.arange(K) == k, 1.0, -1.0 / (K - 1))
            )
        trees.append(Tree(tree.nodes, values, tree.category_bitsets, tree.n_features))
    return trees


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_tiny_model_matches_brute_force_shapley_values(n_classes: int) -> None:
    X, y = data(n_classes, seed=1, n=200)
    X = np.nan_to_num(X[:, :3])  # three features: 2³ coalitions
    model = AdaBoostClassifier(
        DecisionTreeClassifier(max_depth=2), n_estimators=4, random_state=0
    ).fit(X, y)
    contributions, _ = tree_contributions(model, X[:6])
    trees = vote_trees(model, X)
    for row in range(6):
        # Shapley values are linear in the game: the model's are the α-weighted members'.
        expected = sum(
            alpha * brute_force_shap(tree, X[row])
            for alpha, tree in zip(model.estimator_weights_, trees, strict=True)
        )
        got = contributions[row] if n_classes > 2 else contributions[row][:, None]
        np.testing.assert_allclose(got, expected, atol=1e-9)


def test_models_that_are_not_sums_of_tree_outputs_are_refused() -> None:
    X, y = data(2)
    X = np.nan_to_num(X)
    regressor = AdaBoostRegressor(n_estimators=5, random_state=0).fit(X, X[:, 1])
    with pytest.raises(ValueError, match="weighted median"):
        tree_contributions(regressor, X)
    region = RegionBoostClassifier(n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="depend on the input"):
        tree_contributions(region, X)
    linear = AdaBoostClassifier(LogisticRegression(), n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="LogisticRegression"):
        tree_contributions(linear, X)
