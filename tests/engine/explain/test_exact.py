"""Exact explanations: additivity to 1e-9 and equality to the closed forms.

Linear models: ``coef · (x − training mean)``; Gaussian naive Bayes: each feature's
log-likelihood-ratio term minus its mean over the training rows, computed here directly on the
training rows (the engine derives it from the per-class moments it stores).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import engine
from engine import (
    AdaBoostClassifier,
    ArcX4Classifier,
    BaggingClassifier,
    BaggingRegressor,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    EncodedClassifier,
    EncodedRegressor,
    GaussianNB,
    GradientBoostingClassifier,
    KNeighborsClassifier,
    KNeighborsRegressor,
    LinearRegression,
    LogisticRegression,
    Perceptron,
    RandomForestClassifier,
    RandomForestRegressor,
    Ridge,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
    explain,
    load_model,
    save_model,
    tree_contributions,
)
from engine.explain._api import describe


def data(n_classes: int, n: int = 160, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    score = X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.3 * X[:, 2]
    if n_classes == 0:
        return X, score + 0.1 * rng.normal(size=n)
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(score, edges)


def tree(**params: Any) -> DecisionTreeClassifier:
    return DecisionTreeClassifier(max_depth=3, random_state=0, **params)


def forest() -> RandomForestClassifier:
    return RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)


CLASSIFIERS: dict[str, Callable[[], Any]] = {
    "logistic": lambda: LogisticRegression(),
    "perceptron": lambda: Perceptron(random_state=0),
    "naive_bayes": lambda: GaussianNB(),
    "encoded_logistic": lambda: EncodedClassifier(LogisticRegression(), categorical_features=[3]),
    "encoded_naive_bayes": lambda: EncodedClassifier(GaussianNB(), categorical_features=[3]),
    "arc_x4": lambda: ArcX4Classifier(tree(), n_estimators=6, random_state=0),
    "adaboost": lambda: AdaBoostClassifier(n_estimators=6, random_state=0),
    "soft_voting": lambda: VotingClassifier(
        [("forest", forest()), ("tree", tree())], voting="soft", weights=[2, 1]
    ),
    "stacking": lambda: StackingClassifier(
        [("forest", forest()), ("tree", tree())], cv=2, random_state=0
    ),
    "stacking_on_decisions": lambda: StackingClassifier(
        [
            ("adaboost", AdaBoostClassifier(n_estimators=4, random_state=0)),
            ("boosting", GradientBoostingClassifier(n_estimators=5, random_state=0)),
        ],
        stack_method="decision_function",
        cv=2,
        random_state=0,
    ),
    "stacking_on_encoded_logistic": lambda: StackingClassifier(
        [("forest", forest()), ("tree", tree())],
        final_estimator=EncodedClassifier(LogisticRegression()),
        cv=2,
        random_state=0,
    ),
    "bagged_trees": lambda: BaggingClassifier(tree(), n_estimators=5, random_state=0),
    "bagged_forests": lambda: BaggingClassifier(
        forest(), n_estimators=3, max_features=0.75, random_state=0
    ),
}
REGRESSORS: dict[str, Callable[[], Any]] = {
    "linear": lambda: LinearRegression(),
    "ridge": lambda: Ridge(alpha=3.0),
    "encoded_ridge": lambda: EncodedRegressor(Ridge(), categorical_features=[3]),
    "voting": lambda: VotingRegressor(
        [("linear", LinearRegression()), ("tree", DecisionTreeRegressor(max_depth=3))]
    ),
    "stacking": lambda: StackingRegressor(
        [("linear", LinearRegression()), ("tree", DecisionTreeRegressor(max_depth=3))],
        cv=2,
        random_state=0,
    ),
    "bagged_linear": lambda: BaggingRegressor(LinearRegression(), n_estimators=6, random_state=0),
    "bagged_ridge_in_subspaces": lambda: BaggingRegressor(
        Ridge(), n_estimators=6, max_features=0.5, bootstrap_features=True, random_state=0
    ),
    "bagged_encoded_ridge": lambda: BaggingRegressor(
        EncodedRegressor(Ridge(), categorical_features=[3]), n_estimators=4, random_state=0
    ),
    "bagged_trees": lambda: BaggingRegressor(
        DecisionTreeRegressor(max_depth=3), n_estimators=5, random_state=0
    ),
    "bagged_forests": lambda: BaggingRegressor(
        RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0),
        n_estimators=4,
        max_features=0.75,
        random_state=0,
    ),
}


def with_category(X: np.ndarray) -> np.ndarray:
    """Column 3 as category codes (with a missing one), as the service's tables carry them."""
    X = X.copy()
    X[:, 3] = np.digitize(X[:, 3], [-0.5, 0.5])
    X[::17, 3] = np.nan
    return X


def fitted(make: Any, X: np.ndarray, y: np.ndarray) -> Any:
    model = make()
    inner = getattr(model, "estimator", None)
    if isinstance(model, EncodedClassifier | EncodedRegressor) or isinstance(
        inner, EncodedClassifier | EncodedRegressor
    ):
        X = with_category(X)
    return model.fit(X, y), X


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
def test_classifiers_add_up_to_their_output_exactly(name: str, n_classes: int) -> None:
    X, y = data(n_classes)
    model, X = fitted(CLASSIFIERS[name], X, y)

    explanation = explain(model, X[:25])

    assert explanation.method == "exact"
    phi = explanation.contributions
    expected_shape = (25, 4) if n_classes == 2 else (25, 4, n_classes)
    assert phi.shape == expected_shape
    output = describe(model).output(X[:25])
    np.testing.assert_allclose(
        (phi.sum(axis=1) + explanation.bias).reshape(output.shape), output, rtol=0, atol=1e-9
    )


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressors_add_up_to_their_prediction_exactly(name: str) -> None:
    X, y = data(0)
    model, X = fitted(REGRESSORS[name], X, y)

    explanation = explain(model, X[:25])

    assert explanation.method == "exact" and explanation.output == "prediction"
    total = explanation.contributions.sum(axis=1) + explanation.bias
    np.testing.assert_allclose(total, model.predict(X[:25]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("n_classes", [0, 2, 3])
def test_linear_models_are_coef_times_distance_from_the_training_mean(n_classes: int) -> None:
    X, y = data(n_classes)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, size=X.shape[0])
    model = (LinearRegression() if n_classes == 0 else LogisticRegression()).fit(
        X, y, sample_weight=weights
    )
    mean = np.average(X, axis=0, weights=weights)

    explanation = explain(model, X[:10])

    coef = np.atleast_2d(model.coef_)  # (outputs, features)
    expected = (X[:10] - mean)[:, :, None] * coef.T[None]
    phi = explanation.contributions.reshape(expected.shape)
    np.testing.assert_allclose(phi, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        np.atleast_1d(explanation.bias), np.atleast_1d(model.intercept_) + coef @ mean, rtol=1e-12
    )


def test_encoded_logistic_sums_its_one_hot_columns_onto_the_category() -> None:
    X, y = data(2)
    X = with_category(X)
    model = EncodedClassifier(LogisticRegression(), categorical_features=[3]).fit(X, y)
    encoded = model.encoding_.transform(X)
    coef = model.estimator_.coef_[0]
    terms = coef * (encoded - encoded.mean(axis=0))  # standardised columns: training mean 0

    phi = explain(model, X).contributions

    # Columns: 3 numeric, then the category's one-hot block (codes 0, 1, 2).
    np.testing.assert_allclose(phi[:, :3], terms[:, :3], atol=1e-12)
    np.testing.assert_allclose(phi[:, 3], terms[:, 3:].sum(axis=1), atol=1e-12)


def gaussian_terms(model: GaussianNB, X: np.ndarray) -> np.ndarray:
    """Per-feature class log-densities, shape (n, n_classes, n_features)."""
    var = model.var_[None]
    return -0.5 * np.log(2 * np.pi * var) - 0.5 * (X[:, None, :] - model.theta_[None]) ** 2 / var


def test_naive_bayes_binary_terms_are_log_likelihood_ratios_minus_their_training_mean() -> None:
    X, y = data(2)
    model = GaussianNB().fit(X, y)
    ratio = np.diff(gaussian_terms(model, X), axis=1)[:, 0]  # (n, p): class 1 − class 0
    prior_ratio = np.log(model.class_prior_[1] / model.class_prior_[0])

    explanation = explain(model, X)

    np.testing.assert_allclose(explanation.contributions, ratio - ratio.mean(axis=0), atol=1e-9)
    np.testing.assert_allclose(explanation.bias, prior_ratio + ratio.mean(axis=0).sum(), atol=1e-9)
    log_proba = model.predict_log_proba(X)
    np.testing.assert_allclose(
        explanation.contributions.sum(axis=1) + explanation.bias,
        log_proba[:, 1] - log_proba[:, 0],
        atol=1e-9,
    )


def test_naive_bayes_multiclass_explains_the_centred_log_likelihoods() -> None:
    X, y = data(3)
    model = GaussianNB().fit(X, y)
    terms = gaussian_terms(model, X)
    centred = terms - terms.mean(axis=1, keepdims=True)  # (n, K, p)

    explanation = explain(model, X)

    expected = np.transpose(centred - centred.mean(axis=0), (0, 2, 1))
    np.testing.assert_allclose(explanation.contributions, expected, atol=1e-9)
    proba = np.exp(explanation.contributions.sum(axis=1) + explanation.bias)
    np.testing.assert_allclose(proba / proba.sum(axis=1, keepdims=True), model.predict_proba(X))


def test_soft_voting_is_the_weighted_mean_of_its_members_tree_shap() -> None:
    X, y = data(3)
    model = VotingClassifier(
        [("forest", forest()), ("tree", tree())], voting="soft", weights=[3, 1]
    ).fit(X, y)
    parts = [tree_contributions(member, X[:8]) for member in model.estimators_]

    explanation = explain(model, X[:8])

    np.testing.assert_allclose(
        explanation.contributions, 0.75 * parts[0][0] + 0.25 * parts[1][0], atol=1e-12
    )
    np.testing.assert_allclose(explanation.bias, 0.75 * parts[0][1] + 0.25 * parts[1][1])


def test_bagged_linear_regressors_average_their_members_closed_forms_in_their_subspaces() -> None:
    X, y = data(0)
    model = BaggingRegressor(
        LinearRegression(), n_estimators=6, max_features=0.5, random_state=0
    ).fit(X, y)
    expected = np.zeros((10, X.shape[1]))
    expected_bias = 0.0
    for member in model.members_:
        columns, fitted_member = member.features, member.estimator
        # Each member: coef · (x − its own training mean), on the columns it was fitted on.
        expected[:, columns] += fitted_member.coef_ * (X[:10, columns] - fitted_member.X_mean_)
        expected_bias += fitted_member.intercept_ + fitted_member.coef_ @ fitted_member.X_mean_
    assert any(len(member.features) < X.shape[1] for member in model.members_)

    explanation = explain(model, X[:10])
    loaded = explain(load_model(save_model(model)), X[:10])

    assert explanation.method == "exact"
    np.testing.assert_allclose(explanation.contributions, expected / 6, rtol=1e-12, atol=1e-12)
    assert explanation.bias == pytest.approx(expected_bias / 6, rel=1e-12)
    np.testing.assert_array_equal(loaded.contributions, explanation.contributions)


BAGS_SAMPLED: dict[str, tuple[Callable[[], Any], int]] = {
    # probability is not linear in logistic regression's exact space, the log-odds
    "logistic_members": (lambda: BaggingClassifier(LogisticRegression(), n_estimators=3), 2),
    "hard_voting": (lambda: BaggingClassifier(forest(), n_estimators=3, voting="hard"), 2),
    "k_neighbors_members": (lambda: BaggingRegressor(KNeighborsRegressor(), n_estimators=3), 0),
    "k_neighbors_classifier": (
        lambda: BaggingClassifier(KNeighborsClassifier(), n_estimators=3),
        3,
    ),
    # members drawn from 10 rows miss a class: their probabilities have other columns
    "members_missing_a_class": (
        lambda: BaggingClassifier(forest(), n_estimators=4, max_samples=10, random_state=0),
        3,
    ),
}


@pytest.mark.parametrize("name", sorted(BAGS_SAMPLED))
def test_bagging_is_sampled_unless_every_member_is_exact_in_the_bags_space(name: str) -> None:
    make, n_classes = BAGS_SAMPLED[name]
    X, y = data(n_classes)
    model = make().fit(X, y)
    if name == "members_missing_a_class":
        assert min(len(member.estimator.classes_) for member in model.members_) < n_classes

    explanation = explain(model, X[:4], n_permutations=8)

    assert explanation.method == "sampled"
    assert explanation.output == ("probability" if n_classes else "prediction")
    output = describe(model).output(X[:4])
    total = explanation.contributions.sum(axis=1) + explanation.bias
    np.testing.assert_allclose(total.reshape(output.shape), output, rtol=0, atol=1e-9)


def test_arc_x4_is_tree_shap_of_its_vote_trees() -> None:
    X, y = data(2)
    model = ArcX4Classifier(tree(), n_estimators=6, random_state=0).fit(X, y)

    contributions, bias = tree_contributions(model, X[:10])

    total = contributions.sum(axis=1) + bias
    np.testing.assert_allclose(total, model.predict_proba(X[:10])[:, 1], atol=1e-12)
    np.testing.assert_array_equal(explain(model, X[:10]).contributions, contributions)


def test_stacking_on_a_non_linear_final_estimator_is_sampled() -> None:
    X, y = data(2)
    model = StackingClassifier([("tree", tree())], final_estimator=tree(), cv=2).fit(X, y)

    assert explain(model, X[:3]).method == "sampled"
    assert explain(model, X[:3]).output == "probability"


def test_a_linear_model_saved_before_it_kept_its_mean_is_explained_inside_its_wrapper() -> None:
    X, y = data(2)
    wrapped = EncodedClassifier(LogisticRegression()).fit(X, y)
    bare = LogisticRegression().fit(X, y)
    reference = explain(wrapped, X[:5])
    for model in (wrapped.estimator_, bare):
        del model.X_mean_

    # Standardised columns have training mean 0, the mean the model would have kept.
    np.testing.assert_allclose(explain(wrapped, X[:5]).contributions, reference.contributions)
    assert engine.explain.__module__ == "engine.explain"
    assert describe(bare).exact is None


def test_a_saved_model_explains_as_before() -> None:
    X, y = data(2)
    model = CLASSIFIERS["stacking"]().fit(X, y)

    loaded = load_model(save_model(model))

    np.testing.assert_array_equal(
        explain(loaded, X[:5]).contributions, explain(model, X[:5]).contributions
    )
