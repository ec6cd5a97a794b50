"""Kuncheva's (2004, §4.3) worked example of majority and weighted voting, by exact computation.

Five independent members of accuracies (0.9, 0.9, 0.6, 0.6, 0.6) vote between two classes. The
example gives P_maj ≈ 0.877 for the plain majority and P_maj^w ≈ 0.927 for the weighted vote with
weights (1/3, 1/3, 1/9, 1/9, 1/9). :func:`vote_accuracy` enumerates all 2^5 right/wrong patterns;
the tests below check it against an independent decomposition, the example's own expressions and
its rounded figures, and then check that a real :class:`VotingClassifier` reaches exactly these
accuracies on a data set that *is* the distribution of the patterns (one row per pattern and
class, weighted by the pattern's probability).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from engine.base import BaseEstimator, ClassifierMixin
from engine.combine import VotingClassifier, log_odds_weights, vote_accuracy

EXAMPLE_ACCURACIES = [0.9, 0.9, 0.6, 0.6, 0.6]
EXAMPLE_WEIGHTS = [1 / 3, 1 / 3, 1 / 9, 1 / 9, 1 / 9]
# Exact rational values of the two probabilities (see the decompositions below).
MAJORITY = 0.87696
WEIGHTED = 0.92664


def _at_least(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


def test_majority_vote_of_the_worked_example() -> None:
    # Independent decomposition by how many strong (0.9) members are right: both right need
    # one of the three weak ones, one right needs two of them, none right needs all three.
    by_strong = (
        0.9**2 * _at_least(1, 3, 0.6)
        + 2 * 0.9 * 0.1 * _at_least(2, 3, 0.6)
        + 0.1**2 * _at_least(3, 3, 0.6)
    )
    example_expression = 3 * 0.9**2 * 0.4 * 0.6 + 0.6**3 + 6 * 0.9 * 0.1 * 0.6**2 * 0.4
    exact = vote_accuracy(EXAMPLE_ACCURACIES)
    # 1e-12: sums of 32 products of five factors each; only rounding separates them.
    assert exact == pytest.approx(by_strong, abs=1e-12)
    assert exact == pytest.approx(example_expression, abs=1e-12)
    assert exact == pytest.approx(MAJORITY, abs=1e-12)
    assert round(exact, 3) == 0.877  # Kuncheva's figure


def test_weighted_vote_of_the_worked_example() -> None:
    # With these weights the two strong members outvote the three weak ones together (2/3 >
    # 1/3), and one strong member wins with the help of two weak ones (3/9 + 2/9 > 3/9 + 1/9).
    by_strong = 0.9**2 + 2 * 0.9 * 0.1 * _at_least(2, 3, 0.6)
    example_expression = 0.9**2 + 2 * 3 * 0.9 * 0.1 * 0.6**2 * 0.4 + 2 * 0.9 * 0.1 * 0.6**3
    example_weighted = vote_accuracy(EXAMPLE_ACCURACIES, EXAMPLE_WEIGHTS)
    learned = vote_accuracy(EXAMPLE_ACCURACIES, log_odds_weights(EXAMPLE_ACCURACIES))
    assert example_weighted == pytest.approx(by_strong, abs=1e-12)
    assert example_weighted == pytest.approx(example_expression, abs=1e-12)
    assert example_weighted == pytest.approx(WEIGHTED, abs=1e-12)
    assert round(example_weighted, 3) == 0.927  # Kuncheva's figure
    # The log-odds weights (log 9 ≈ 2.20 and log 1.5 ≈ 0.41) decide every pattern the same way.
    assert learned == pytest.approx(WEIGHTED, abs=1e-12)


def test_log_odds_weights_are_the_log_odds() -> None:
    weights = log_odds_weights(EXAMPLE_ACCURACIES)
    np.testing.assert_allclose(weights, [math.log(9)] * 2 + [math.log(1.5)] * 3, rtol=1e-15)
    # K classes: log((K - 1) p / (1 - p)); 0.25 is chance for four classes, so weight 0.
    np.testing.assert_allclose(
        log_odds_weights([0.5, 0.25, 0.1, 1.0], n_classes=4),
        [math.log(3), 0.0, 0.0, math.log(3 * 0.999 / 0.001)],
        rtol=1e-12,
    )
    np.testing.assert_array_equal(log_odds_weights([0.3, 0.5]), [1.0, 1.0])  # none beats chance


def test_vote_accuracy_against_the_binomial_tail() -> None:
    # k equal independent members, each wrong with probability p, err when more than
    # k/2 are wrong. With an odd k there are no ties and the tail is the whole story.
    assert 1 - vote_accuracy([0.9] * 11) == pytest.approx(_at_least(6, 11, 0.1), abs=1e-13)
    # k = 10, p = 0.1: "error(majority voting) < 0.001" (ties at 5-5 count one half here).
    error = 1 - vote_accuracy([0.9] * 10)
    tail = _at_least(6, 10, 0.1) + 0.5 * math.comb(10, 5) * 0.1**5 * 0.9**5
    assert error == pytest.approx(tail, abs=1e-13)
    assert error < 0.001


def test_vote_accuracy_properties() -> None:
    assert vote_accuracy([0.7]) == pytest.approx(0.7, abs=1e-15)
    assert vote_accuracy([1.0, 0.0]) == 0.5  # a tie, broken by a fair coin
    scaled = vote_accuracy(EXAMPLE_ACCURACIES, [7.0 * w for w in EXAMPLE_WEIGHTS])
    assert scaled == pytest.approx(WEIGHTED, abs=1e-12)
    with pytest.raises(ValueError, match="exceeds"):
        vote_accuracy([0.6] * 21)
    with pytest.raises(ValueError, match="one per member"):
        vote_accuracy([0.6, 0.7], [1.0])


class ColumnClassifier(ClassifierMixin, BaseEstimator):
    """Predicts the label stored in one column of X: a member whose mistakes we choose."""

    def __init__(self, column: int = 0) -> None:
        self.column = column

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> ColumnClassifier:
        self.classes_ = np.unique(y)
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(X)[:, self.column].astype(np.int64)


def _pattern_data(accuracies: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One row per (right/wrong pattern, true class), weighted by the pattern's probability.

    Column i holds member i's prediction: the true class where the member is right, the other
    class where it is wrong. Weighted accuracy on these rows is the expected accuracy.
    """
    rows, labels, weights = [], [], []
    for pattern in itertools.product([True, False], repeat=len(accuracies)):
        right = np.array(pattern)
        probability = float(np.prod(np.where(right, accuracies, 1 - np.array(accuracies))))
        for label in (0, 1):
            rows.append(np.where(right, label, 1 - label))
            labels.append(label)
            weights.append(probability / 2)
    return np.array(rows, dtype=np.float64), np.array(labels), np.array(weights)


def _members() -> list[tuple[str, Any]]:
    return [(f"m{i}", ColumnClassifier(i)) for i in range(len(EXAMPLE_ACCURACIES))]


def test_voting_classifier_reaches_the_example_accuracies_exactly() -> None:
    X, y, weights = _pattern_data(EXAMPLE_ACCURACIES)
    majority = VotingClassifier(_members()).fit(X, y)
    weighted = VotingClassifier(_members(), weights=EXAMPLE_WEIGHTS).fit(X, y)
    # 1e-12: a weighted mean of 64 indicator values; rounding only.
    assert majority.score(X, y, sample_weight=weights) == pytest.approx(MAJORITY, abs=1e-12)
    assert weighted.score(X, y, sample_weight=weights) == pytest.approx(WEIGHTED, abs=1e-12)


def test_learned_log_odds_weights_reach_the_weighted_accuracy() -> None:
    X, y, weights = _pattern_data(EXAMPLE_ACCURACIES)
    model = VotingClassifier(_members(), weights="log_odds", cv=4, random_state=0)
    model.fit(X, y, sample_weight=weights)
    # A column member's held-out accuracy, weighted by the pattern probabilities, is exactly
    # its accuracy: the weights it learns are the log-odds of the example's accuracies.
    np.testing.assert_allclose(model.oof_accuracies_, EXAMPLE_ACCURACIES, atol=1e-12)
    np.testing.assert_allclose(model.weights_, log_odds_weights(EXAMPLE_ACCURACIES), atol=1e-10)
    assert model.score(X, y, sample_weight=weights) == pytest.approx(WEIGHTED, abs=1e-12)
