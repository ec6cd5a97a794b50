"""NaiveBayesCombiner on a hand-worked example (Kuncheva §4.4)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from engine.fusion import NaiveBayesCombiner

# Labels of three members (columns) for eight rows, and the true classes.
S = np.array(
    [
        [0, 0, 0],
        [0, 0, 1],
        [0, 1, 0],
        [1, 0, 0],
        [1, 0, 0],
        [1, 1, 1],
        [1, 1, 0],
        [0, 1, 1],
    ]
)
Y = np.array([0, 0, 0, 0, 0, 1, 1, 1])

# Counted by hand: cm[i][k][s] = rows of class k that member i labelled s.
CONFUSION = [
    [[3, 2], [1, 2]],  # member 0: class 0 rows say 0,0,0,1,1; class 1 rows say 1,1,0
    [[4, 1], [0, 3]],  # member 1: 0,0,1,0,0 and 1,1,1
    [[4, 1], [1, 2]],  # member 2: 0,1,0,0,0 and 1,0,1
]


def hand_posterior(query: list[int], alpha: Fraction) -> list[Fraction]:
    """P(ω_k | s) ∝ (N_k/N) ∏ (cm_i[k, s_i] + α) / (N_k + c·α), in exact arithmetic."""
    n_k = [5, 3]
    scores = []
    for k in range(2):
        score = Fraction(n_k[k], 8)
        for i, s_i in enumerate(query):
            score *= (CONFUSION[i][k][s_i] + alpha) / (n_k[k] + 2 * alpha)
        scores.append(score)
    return [score / sum(scores) for score in scores]


def test_confusion_matrices_are_the_hand_counts(echo_members: Callable[..., Any]) -> None:
    model = NaiveBayesCombiner(echo_members(3, S, Y), prefit=True).fit(S, Y)
    np.testing.assert_array_equal(model.confusion_matrices_, CONFUSION)
    np.testing.assert_array_equal(model.class_count_, [5, 3])


def test_posterior_matches_kunchevas_formula(echo_members: Callable[..., Any]) -> None:
    """With α = 1/c: (cm + 1/2)/(N_k + 1). For s = (1, 0, 1) that is 8/11 for class 0:
    5/8 · (2.5·4.5·1.5)/6³ against 3/8 · (2.5·0.5·2.5)/4³."""
    model = NaiveBayesCombiner(echo_members(3, S, Y), prefit=True).fit(S, Y)
    queries = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 0]])
    expected = [hand_posterior(list(q), Fraction(1, 2)) for q in queries]
    assert expected[0][0] == Fraction(8, 11)
    # float64 arithmetic on a handful of factors: agreement to a few ulps of 1.
    np.testing.assert_allclose(model.predict_proba(queries), np.array(expected, float), atol=1e-15)
    np.testing.assert_array_equal(model.predict(queries), [0, 0, 1, 0])


@pytest.mark.parametrize("alpha", [0.0, 0.25, 2.0])
def test_other_pseudo_counts(echo_members: Callable[..., Any], alpha: float) -> None:
    """α = 0 is the uncorrected estimate: member 1 never said 0 for class 1, so s_1 = 0
    rules class 1 out entirely."""
    model = NaiveBayesCombiner(echo_members(3, S, Y), alpha=alpha, prefit=True).fit(S, Y)
    queries = np.array([[1, 0, 1], [1, 1, 1]])
    expected = [hand_posterior(list(q), Fraction(alpha)) for q in queries]
    np.testing.assert_allclose(model.predict_proba(queries), np.array(expected, float), atol=1e-15)
    if alpha == 0.0:
        np.testing.assert_array_equal(model.predict_proba(queries[:1]), [[1.0, 0.0]])


def test_cross_validated_fit_learns_the_same_tables(echo_members: Callable[..., Any]) -> None:
    """Echo members label every row alike whatever they were fitted on, so the out-of-fold
    tables of a cv fit equal the hand counts too (this exercises the fold machinery)."""
    model = NaiveBayesCombiner(echo_members(3), cv=2, random_state=0).fit(S, Y)
    np.testing.assert_array_equal(model.confusion_matrices_, CONFUSION)


def test_sample_weight_counts_rows(echo_members: Callable[..., Any]) -> None:
    """An integer weight counts the row that many times in the confusion matrices."""
    weights = np.array([1, 1, 1, 1, 1, 3, 1, 1])
    weighted = NaiveBayesCombiner(echo_members(3, S, Y), prefit=True)
    weighted.fit(S, Y, sample_weight=weights)
    rows = np.repeat(np.arange(8), weights)
    repeated = NaiveBayesCombiner(echo_members(3, S, Y), prefit=True).fit(S[rows], Y[rows])
    np.testing.assert_array_equal(weighted.confusion_matrices_, repeated.confusion_matrices_)
    np.testing.assert_array_equal(weighted.confusion_matrices_[0][1], [1, 4])
    np.testing.assert_allclose(weighted.predict_proba(S), repeated.predict_proba(S), rtol=1e-15)
