"""Ensemble diversity: hand-made oracle matrices, Kuncheva's (2004) tables, and real ensembles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.ensemble import BaggingClassifier as SkBaggingClassifier
from sklearn.linear_model import Perceptron as SkPerceptron

from engine import (
    AdaBoostClassifier,
    ArcX4Classifier,
    BaggingClassifier,
    DecisionTreeClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.diagnostics import ensemble_diversity, member_predictions, oracle_diversity

# -- oracle matrices with known answers -----------------------------------------------------


def test_one_pair_by_hand() -> None:
    # Rows:        0  1  2  3  4
    a = np.array([1, 1, 0, 0, 1])
    b = np.array([1, 0, 1, 0, 1])
    # N11 = 2 (rows 0, 4), N10 = 1 (row 1), N01 = 1 (row 2), N00 = 1 (row 3).
    result = oracle_diversity(np.column_stack([a, b]))
    assert result.q_statistic == pytest.approx((2 * 1 - 1 * 1) / (2 * 1 + 1 * 1))
    assert result.correlation == pytest.approx((2 * 1 - 1 * 1) / math.sqrt(3 * 2 * 3 * 2))
    assert result.disagreement == pytest.approx(2 / 5)
    assert result.double_fault == pytest.approx(1 / 5)
    np.testing.assert_allclose(result.member_accuracy, [3 / 5, 3 / 5])
    # The correlation of oracle outputs is Pearson's correlation of the two columns.
    assert result.correlation == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-15)
    # Two members: the "majority" needs both right (more than half).
    assert result.majority_vote_accuracy == pytest.approx(2 / 5)


def test_identical_and_complementary_members() -> None:
    same = np.array([[1, 1], [0, 0], [1, 1], [1, 1]])
    result = oracle_diversity(same)
    assert (result.q_statistic, result.correlation, result.disagreement) == (1.0, 1.0, 0.0)
    opposite = np.array([[1, 0], [0, 1], [1, 0], [0, 1]])
    result = oracle_diversity(opposite)
    assert (result.q_statistic, result.correlation, result.disagreement) == (-1.0, -1.0, 1.0)
    assert result.double_fault == 0.0


def test_undefined_pairs_are_left_out_of_the_averages() -> None:
    # Member 0 is always right: its Q with member 1 is 0/0 and its ρ has a zero variance.
    # Members 1 and 2 are defined: N11=1, N10=1, N01=1, N00=1 -> Q = 0, ρ = 0.
    oracle = np.array([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 0, 1]])
    result = oracle_diversity(oracle)
    assert np.isnan(result.pairwise_q[0, 1]) and np.isnan(result.pairwise_correlation[0, 2])
    assert result.q_statistic == 0.0 and result.correlation == 0.0
    all_right = oracle_diversity(np.ones((4, 3), dtype=bool))
    assert math.isnan(all_right.q_statistic) and math.isnan(all_right.correlation)
    assert all_right.disagreement == 0.0 and all_right.majority_gain == 0.0


def test_pairwise_matrices_are_symmetric_and_averaged_over_pairs() -> None:
    rng = np.random.default_rng(0)
    oracle = rng.random((50, 6)) < 0.7
    result = oracle_diversity(oracle)
    for matrix in (result.pairwise_disagreement, result.pairwise_q, result.pairwise_correlation):
        np.testing.assert_allclose(matrix, matrix.T)
    upper = np.triu_indices(6, k=1)
    pearson = np.corrcoef(oracle.T.astype(float))
    np.testing.assert_allclose(result.pairwise_correlation, pearson, atol=1e-12)
    assert result.correlation == pytest.approx(pearson[upper].mean(), abs=1e-12)
    disagreements = [np.mean(oracle[:, i] != oracle[:, k]) for i, k in zip(*upper, strict=True)]
    assert result.disagreement == pytest.approx(np.mean(disagreements), abs=1e-15)


# The limits of the majority vote (Kuncheva et al. 2003; Kuncheva 2004, §4.2): three
# classifiers, ten objects, each right on six. Each row
# gives how many objects fall in each oracle pattern (classifier 1, 2, 3) and P_maj.
PATTERNS = ["111", "101", "011", "001", "110", "100", "010", "000"]
PATTERNS_TABLE = [
    # counts per pattern, P_maj
    ([0, 3, 3, 0, 3, 0, 0, 1], 0.9),  # 1: the best pattern of success
    ([2, 2, 2, 0, 2, 0, 0, 2], 0.8),
    ([1, 2, 2, 1, 3, 0, 0, 1], 0.8),
    ([6, 0, 0, 0, 0, 0, 0, 4], 0.6),  # 13: identical members
    ([4, 0, 1, 1, 1, 1, 0, 2], 0.6),  # 15
    ([3, 1, 1, 1, 1, 1, 1, 1], 0.6),  # 17 (Kuncheva 2004 prints P_maj − p = 0.1 here: a misprint)
    ([5, 0, 0, 1, 0, 1, 1, 2], 0.5),  # 24
    ([4, 0, 0, 2, 0, 2, 2, 0], 0.4),  # 28: the pattern of failure
]


def _oracle_from_counts(counts: list[int]) -> np.ndarray:
    rows = [
        [int(bit) for bit in pattern]
        for pattern, n in zip(PATTERNS, counts, strict=True)
        for _ in range(n)
    ]
    return np.array(rows)


@pytest.mark.parametrize(("counts", "p_majority"), PATTERNS_TABLE)
def test_patterns_of_success_and_failure(counts: list[int], p_majority: float) -> None:
    result = oracle_diversity(_oracle_from_counts(counts))
    np.testing.assert_allclose(result.member_accuracy, [0.6, 0.6, 0.6])
    assert result.majority_vote_accuracy == pytest.approx(p_majority)
    assert result.majority_gain == pytest.approx(p_majority - 0.6)


def test_success_goes_with_negative_dependence_and_failure_with_positive() -> None:
    success = oracle_diversity(_oracle_from_counts(PATTERNS_TABLE[0][0]))
    failure = oracle_diversity(_oracle_from_counts(PATTERNS_TABLE[-1][0]))
    # Success, every pair: N11 = 3, N10 = 3, N01 = 3, N00 = 1 (the errors are spread).
    assert success.q_statistic == pytest.approx((3 * 1 - 3 * 3) / (3 * 1 + 3 * 3))
    assert success.correlation == pytest.approx((3 - 9) / math.sqrt(6 * 4 * 6 * 4))
    assert success.disagreement == pytest.approx(0.6)
    # Failure, every pair: N11 = 4, N10 = 2, N01 = 2, N00 = 2 (right together, wrong in pairs).
    assert failure.q_statistic == pytest.approx((4 * 2 - 2 * 2) / (4 * 2 + 2 * 2))
    assert failure.correlation == pytest.approx((8 - 4) / math.sqrt(6 * 4 * 6 * 4))
    assert failure.disagreement == pytest.approx(0.4)
    assert success.majority_gain == pytest.approx(0.3)
    assert failure.majority_gain == pytest.approx(-0.2)


# -- fitted ensembles ---------------------------------------------------------------------------


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(160, 4))
    score = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=160)
    y = np.where(score > 0.3, "b", np.where(score < -0.8, "c", "a"))
    return X, y


def _vote_shares(predictions: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return np.stack([(predictions == label).mean(axis=1) for label in classes], axis=1)


@pytest.mark.parametrize(
    "ensemble",
    [
        BaggingClassifier(n_estimators=7, max_features=0.5, voting="hard", random_state=0),
        BaggingClassifier(
            DecisionTreeClassifier(max_depth=3),
            n_estimators=7,
            max_features=2,
            voting="hard",
            random_state=0,
        ),
        ArcX4Classifier(n_estimators=5, random_state=0),
    ],
    ids=["tree_bagging_subspace", "generic_bagging_subspace", "arc_x4"],
)
def test_member_predictions_match_the_ensembles_own_votes(ensemble: object) -> None:
    """Hard-voting ensembles publish vote shares as predict_proba: the members must agree."""
    X, y = _data()
    ensemble.fit(X, y)  # type: ignore[attr-defined]
    predictions = member_predictions(ensemble, X)
    assert predictions.shape == (160, 7 if "Bagging" in type(ensemble).__name__ else 5)
    classes = ensemble.classes_  # type: ignore[attr-defined]
    np.testing.assert_allclose(
        _vote_shares(predictions, classes),
        ensemble.predict_proba(X),  # type: ignore[attr-defined]
        atol=1e-12,
    )
    result = ensemble_diversity(ensemble, X, y)
    expected = (ensemble.predict(X) == y).mean()  # type: ignore[attr-defined]
    # Plurality vote with ties to the first class, as the ensemble's argmax does.
    assert result.majority_vote_accuracy == pytest.approx(expected)


def test_adaboost_members_include_reversals_and_use_labels() -> None:
    X, y = _data(1)
    binary = np.where(y == "b", "b", "other")
    model = AdaBoostClassifier(n_estimators=8, random_state=0).fit(X, binary)
    predictions = member_predictions(model, X)
    assert set(np.unique(predictions)) <= {"b", "other"}
    for m, estimator in enumerate(model.estimators_):
        column = model.classes_[estimator.predict(X).astype(int)]
        if model.estimator_reversed_[m]:
            column = model.classes_[1 - estimator.predict(X).astype(int)]
        np.testing.assert_array_equal(predictions[:, m], column)


def test_foreign_ensemble_on_feature_subspaces_with_encoded_members() -> None:
    # scikit-learn's bagging fits members on class indices and on estimators_features_;
    # members without predict_proba vote, so its predict_proba is the vote share.
    X, y = _data(2)
    model = SkBaggingClassifier(
        SkPerceptron(random_state=0), n_estimators=6, max_features=0.5, random_state=0
    ).fit(X, y)
    predictions = member_predictions(model, X)
    assert set(np.unique(predictions)) <= {"a", "b", "c"}
    np.testing.assert_allclose(
        _vote_shares(predictions, model.classes_), model.predict_proba(X), atol=1e-12
    )


def test_a_list_of_classifiers() -> None:
    X, y = _data(3)
    members = [DecisionTreeClassifier(max_depth=d).fit(X, y) for d in (1, 2, 4)]
    result = ensemble_diversity(members, X, y)
    accuracies = [m.score(X, y) for m in members]
    np.testing.assert_allclose(result.member_accuracy, accuracies)
    assert result.mean_accuracy == pytest.approx(np.mean(accuracies))
    assert result.n_members == 3 and result.n_samples == 160


def test_random_forest_members_are_diverse_but_accurate() -> None:
    X, y = _data(4)
    forest = RandomForestClassifier(n_estimators=15, random_state=0).fit(X[:100], y[:100])
    result = ensemble_diversity(forest, X[100:], y[100:])
    assert 0.0 < result.disagreement < 1.0
    # Members are better than chance (1/3) and their errors are positively related
    # (they learn from overlapping samples): Kuncheva's typical Q for forests is 0.3–0.9.
    assert result.mean_accuracy > 0.4
    assert result.q_statistic > 0.0


def test_regressors_and_bad_inputs_are_refused() -> None:
    X, y = _data()
    forest = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, X[:, 0])
    with pytest.raises(TypeError, match="classifier"):
        ensemble_diversity(forest, X, y)
    with pytest.raises(ValueError, match="two members"):
        oracle_diversity(np.ones((5, 1)))
    with pytest.raises(ValueError, match="0/1"):
        oracle_diversity(np.full((5, 2), 2))
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="shape"):
        ensemble_diversity(model, X, y[:-1])
