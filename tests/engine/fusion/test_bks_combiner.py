"""BKSCombiner: the look-up table and its majority-vote fallback, by hand (Kuncheva §4.5.1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.fusion import BKSCombiner

S = np.array(
    [
        [0, 0, 1],  # cell (0,0,1): classes 1,1,1,0 -> class 1, although the vote says 0
        [0, 0, 1],
        [0, 0, 1],
        [0, 0, 1],
        [1, 1, 0],  # cell (1,1,0): classes 0,1 -> a tie
        [1, 1, 0],
        [0, 0, 0],  # cell (0,0,0): classes 0,0 -> class 0
        [0, 0, 0],
    ]
)
Y = np.array([1, 1, 1, 0, 0, 1, 0, 0])


def fitted(echo_members: Callable[..., Any], **kwargs: Any) -> BKSCombiner:
    return BKSCombiner(echo_members(3, S, Y), prefit=True).fit(S, Y, **kwargs)


def test_table_holds_the_hand_counts(echo_members: Callable[..., Any]) -> None:
    model = fitted(echo_members)
    np.testing.assert_array_equal(model.cells_, [[0, 0, 0], [0, 0, 1], [1, 1, 0]])
    np.testing.assert_array_equal(model.cell_counts_, [[2, 0], [1, 3], [1, 1]])


def test_seen_cells_take_their_most_frequent_class(echo_members: Callable[..., Any]) -> None:
    model = fitted(echo_members)
    queries = np.array([[0, 0, 1], [0, 0, 0]])
    np.testing.assert_allclose(model.predict_proba(queries), [[0.25, 0.75], [1.0, 0.0]])
    np.testing.assert_array_equal(model.predict(queries), [1, 0])


def test_ties_and_unseen_cells_fall_back_to_the_majority_vote(
    echo_members: Callable[..., Any],
) -> None:
    """(1,1,0) is a tied cell, (1,0,1) and (0,1,0) are unseen: the vote decides, and its
    shares are the probabilities."""
    model = fitted(echo_members)
    queries = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 0]])
    np.testing.assert_allclose(
        model.predict_proba(queries), [[1 / 3, 2 / 3], [1 / 3, 2 / 3], [2 / 3, 1 / 3]]
    )
    np.testing.assert_array_equal(model.predict(queries), [1, 1, 0])


def test_weights_break_the_tie(echo_members: Callable[..., Any]) -> None:
    """Weight 3 on the class-0 row of the tied cell makes it (3, 1): class 0, against the vote."""
    model = fitted(echo_members, sample_weight=[1, 1, 1, 1, 3, 1, 1, 1])
    np.testing.assert_allclose(model.predict_proba([[1, 1, 0]]), [[0.75, 0.25]])


def test_a_cell_seen_only_with_zero_weight_counts_as_unseen(
    echo_members: Callable[..., Any],
) -> None:
    model = fitted(echo_members, sample_weight=[1, 1, 1, 1, 1, 1, 0, 0])
    np.testing.assert_allclose(model.predict_proba([[0, 0, 0]]), [[1.0, 0.0]])  # the vote
    np.testing.assert_allclose(model.predict_proba([[0, 0, 1]]), [[0.25, 0.75]])
