"""VotingClassifier and VotingRegressor: the vote by hand, scikit-learn parity, weights."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn import ensemble as sk_ensemble
from sklearn import linear_model as sk_linear
from sklearn import naive_bayes as sk_naive_bayes
from sklearn import neighbors as sk_neighbors

from engine import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    GaussianNB,
    KNeighborsClassifier,
    KNeighborsRegressor,
    LinearRegression,
    LogisticRegression,
    Perceptron,
    Ridge,
)
from engine.base import clone
from engine.combine import VotingClassifier, VotingRegressor, log_odds_weights


def _classifiers() -> list[tuple[str, Any]]:
    return [
        ("lr", LogisticRegression()),
        ("nb", GaussianNB()),
        ("tree", DecisionTreeClassifier(max_depth=3, random_state=0)),
    ]


def _regressors() -> list[tuple[str, Any]]:
    return [
        ("lin", LinearRegression()),
        ("ridge", Ridge(alpha=3.0)),
        ("tree", DecisionTreeRegressor(max_depth=4, random_state=0)),
    ]


def _quiet_sklearn(model: Any, X: np.ndarray, y: np.ndarray) -> Any:
    with warnings.catch_warnings():  # engine members do not inherit sklearn's BaseEstimator
        warnings.simplefilter("ignore")
        return model.fit(X, y)


@pytest.mark.parametrize("data", ["binary", "multiclass"])
def test_soft_vote_is_the_weighted_mean_of_member_probabilities(data: str, request: Any) -> None:
    X, y = request.getfixturevalue(data)
    weights = [1.0, 2.0, 3.0]
    model = VotingClassifier(_classifiers(), voting="soft", weights=weights).fit(X, y)
    by_hand = sum(
        w * clone(est).fit(X, y).predict_proba(X)
        for w, (_, est) in zip(weights, _classifiers(), strict=True)
    ) / sum(weights)
    # 1e-12: the same deterministic member fits, summed in another order.
    np.testing.assert_allclose(model.predict_proba(X), by_hand, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(model.predict(X), model.classes_[by_hand.argmax(axis=1)])


def test_hard_vote_is_the_weighted_majority(multiclass: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = multiclass
    weights = [0.5, 0.3, 0.4]
    model = VotingClassifier(_classifiers(), weights=weights).fit(X, y)
    predictions = np.column_stack([clone(e).fit(X, y).predict(X) for _, e in _classifiers()])
    votes = np.zeros((X.shape[0], 3))
    for column, w in enumerate(weights):
        votes[np.arange(X.shape[0]), predictions[:, column]] += w
    np.testing.assert_array_equal(model.predict(X), votes.argmax(axis=1))
    np.testing.assert_allclose(model.predict_proba(X), votes / sum(weights), atol=1e-12)
    np.testing.assert_array_equal(model.transform(X), predictions)
    # 0.5 alone beats 0.3 + ... only where the others disagree: the vote differs from a plain
    # majority somewhere, or this test would not tell weights from no weights.
    plain = VotingClassifier(_classifiers()).fit(X, y)
    assert (plain.predict(X) != model.predict(X)).any()


@pytest.mark.parametrize("voting", ["hard", "soft"])
@pytest.mark.parametrize("weights", [None, [2.0, 1.0, 1.0]])
def test_parity_with_sklearn_voting_on_the_same_members(
    voting: str, weights: Any, multiclass: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = multiclass
    labels = np.array(["low", "mid", "high"])[y]  # string labels: both encode them
    ours = VotingClassifier(_classifiers(), voting=voting, weights=weights).fit(X, labels)
    theirs = _quiet_sklearn(
        sk_ensemble.VotingClassifier(_classifiers(), voting=voting, weights=weights), X, labels
    )
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    if voting == "soft":  # scikit-learn has no hard-vote probabilities
        # 1e-12: identical members; np.average and our weighted sum round differently.
        np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-12)
        np.testing.assert_allclose(ours.transform(X), theirs.transform(X), atol=0)
    else:
        np.testing.assert_array_equal(ours.transform(X), theirs.transform(X))


def test_parity_with_sklearn_voting_on_equivalent_members(
    binary: tuple[np.ndarray, np.ndarray],
) -> None:
    X, y = binary
    ours = VotingClassifier(
        [("lr", LogisticRegression()), ("nb", GaussianNB()), ("knn", KNeighborsClassifier(7))],
        voting="soft",
    ).fit(X, y)
    theirs = sk_ensemble.VotingClassifier(
        [
            ("lr", sk_linear.LogisticRegression(tol=1e-10)),
            ("nb", sk_naive_bayes.GaussianNB()),
            ("knn", sk_neighbors.KNeighborsClassifier(7)),
        ],
        voting="soft",
    ).fit(X, y)
    # 1e-5: the engine's and scikit-learn's logistic regressions agree to their solvers'
    # tolerance (tests/engine/linear); naive Bayes and k-NN agree to rounding.
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-5)


def test_regressor_parity_with_sklearn(regression: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = regression
    weights = [1.0, 2.0, 0.5]
    ours = VotingRegressor(_regressors(), weights=weights).fit(X, y)
    same = _quiet_sklearn(sk_ensemble.VotingRegressor(_regressors(), weights=weights), X, y)
    # 1e-12: identical members, averaged in another order.
    np.testing.assert_allclose(ours.predict(X), same.predict(X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.transform(X), same.transform(X), rtol=0, atol=0)
    equivalent = sk_ensemble.VotingRegressor(
        [
            ("lin", sk_linear.LinearRegression()),
            ("ridge", sk_linear.Ridge(alpha=3.0)),
            ("knn", sk_neighbors.KNeighborsRegressor(5)),
        ],
        weights=weights,
    ).fit(X, y)
    with_knn = [*_regressors()[:2], ("knn", KNeighborsRegressor(5))]
    ours = VotingRegressor(with_knn, weights=weights).fit(X, y)
    # 1e-9: least squares by different factorisations of a well-conditioned 200 × 4 system.
    np.testing.assert_allclose(ours.predict(X), equivalent.predict(X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("voting", ["hard", "soft"])
def test_scaling_the_weights_changes_nothing(
    voting: str, multiclass: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = multiclass
    base = VotingClassifier(_classifiers(), voting=voting, weights=[1.0, 2.0, 3.0]).fit(X, y)
    scaled = VotingClassifier(_classifiers(), voting=voting, weights=[7.5, 15.0, 22.5]).fit(X, y)
    np.testing.assert_array_equal(base.predict(X), scaled.predict(X))
    # 1e-12: the normalised weights differ by rounding only.
    np.testing.assert_allclose(base.predict_proba(X), scaled.predict_proba(X), atol=1e-12)


def test_regressor_weights_scale_free_and_sample_weight_reaches_members(
    regression: tuple[np.ndarray, np.ndarray],
) -> None:
    X, y = regression
    rng = np.random.default_rng(3)
    sample_weight = rng.integers(0, 4, size=y.size).astype(float)
    a = VotingRegressor(_regressors(), weights=[1, 2, 3]).fit(X, y, sample_weight=sample_weight)
    b = VotingRegressor(_regressors(), weights=[3, 6, 9]).fit(X, y, sample_weight=sample_weight)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=0, atol=1e-12)
    for (_, prototype), member in zip(_regressors(), a.estimators_, strict=True):
        alone = clone(prototype).fit(X, y, sample_weight=sample_weight)
        np.testing.assert_array_equal(member.predict(X), alone.predict(X))
    unweighted = VotingRegressor(_regressors()).fit(X, y)
    assert not np.allclose(unweighted.estimators_[0].coef_, a.estimators_[0].coef_)


def test_ties_go_to_the_first_class(binary: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary
    # Two members of equal weight that disagree on some rows: those rows are ties.
    members = [("lr", LogisticRegression()), ("tree", DecisionTreeClassifier(max_depth=1))]
    model = VotingClassifier(members).fit(X, y)
    votes = model.transform(X)
    tied = votes[:, 0] != votes[:, 1]
    assert tied.any()
    np.testing.assert_array_equal(model.predict(X)[tied], model.classes_[0])
    np.testing.assert_allclose(model.predict_proba(X)[tied], 0.5)


def test_learned_weights_are_the_log_odds_of_held_out_accuracy(
    multiclass: tuple[np.ndarray, np.ndarray],
) -> None:
    X, y = multiclass
    model = VotingClassifier(_classifiers(), weights="log_odds", cv=4, random_state=0).fit(X, y)
    assert model.oof_accuracies_.shape == (3,)
    assert np.all((model.oof_accuracies_ > 1 / 3) & (model.oof_accuracies_ < 1))
    np.testing.assert_array_equal(model.weights_, log_odds_weights(model.oof_accuracies_, 3))
    # The held-out accuracies are below the training accuracies of the refitted members.
    train = [np.mean(m.predict(X) == y) for m in model.estimators_]
    assert np.mean(model.oof_accuracies_) < np.mean(train)


def test_dropped_members_and_their_weights(binary: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary
    members = [*_classifiers()[:2], ("tree", "drop")]
    model = VotingClassifier(members, voting="soft", weights=[1.0, 3.0, 100.0]).fit(X, y)
    assert len(model.estimators_) == 2
    assert model.named_estimators_["tree"] == "drop"
    np.testing.assert_array_equal(model.weights_, [1.0, 3.0])
    expected = VotingClassifier(_classifiers()[:2], voting="soft", weights=[1.0, 3.0]).fit(X, y)
    np.testing.assert_allclose(model.predict_proba(X), expected.predict_proba(X), atol=1e-15)


def test_invalid_configurations_are_refused(binary: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = binary
    with pytest.raises(ValueError, match="has no predict_proba"):
        VotingClassifier([("p", Perceptron())], voting="soft").fit(X, y)
    with pytest.raises(ValueError, match="weights must be equal"):
        VotingClassifier(_classifiers(), weights=[1.0, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="not unique"):
        VotingClassifier([("a", GaussianNB()), ("a", GaussianNB())]).fit(X, y)
    with pytest.raises(ValueError, match="must not contain __"):
        VotingClassifier([("a__b", GaussianNB())]).fit(X, y)
    with pytest.raises(ValueError, match="All estimators are dropped"):
        VotingClassifier([("a", "drop")]).fit(X, y)
    with pytest.raises(ValueError, match="'voting' parameter"):
        VotingClassifier(_classifiers(), voting="average").fit(X, y)
    with pytest.raises(TypeError, match="does not accept sample_weight"):
        VotingClassifier([("knn", _NoWeights())]).fit(X, y, sample_weight=np.ones(len(y)))
    # A perceptron has no probabilities but votes fine by its predictions.
    hard = VotingClassifier([("p", Perceptron(random_state=0)), *_classifiers()]).fit(X, y)
    np.testing.assert_allclose(hard.predict_proba(X).sum(axis=1), 1.0, atol=1e-12)


class _NoWeights(GaussianNB):
    def fit(self, X: Any, y: Any) -> Any:  # type: ignore[override]
        return super().fit(X, y)
