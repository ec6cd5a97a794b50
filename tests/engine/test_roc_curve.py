"""``engine.metrics.roc_curve`` against ``sklearn.metrics.roc_curve``: distinct and tied scores,
unit, float and integer (some zero) sample weights, with and without ``drop_intermediate``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.typing import NDArray

from engine import metrics

N = 400
# Cumulative sums of weights in another order within a tie: equal to rounding only.
TOL = 1e-12


def sample(
    seed: int, decimals: int | None, weighting: str
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64] | None]:
    r = np.random.default_rng(seed)
    y = r.integers(0, 2, N)
    scores = r.random(N) + 0.4 * y
    if decimals is not None:  # few distinct scores: many ties, many diagonal steps
        scores = np.round(scores, decimals)
    weight: NDArray[np.float64] | None = None
    if weighting == "float":
        weight = r.uniform(0.1, 3.0, N)
    elif weighting == "integer":  # collinear runs stay exactly collinear; zeros are dropped
        weight = r.integers(0, 4, N).astype(np.float64)
    return y, scores, weight


def assert_same_curve(ours: Any, theirs: Any) -> None:
    for mine, expected, name in zip(ours, theirs, ("fpr", "tpr", "thresholds"), strict=True):
        assert mine.shape == expected.shape, name
        np.testing.assert_allclose(mine, expected, rtol=TOL, atol=TOL, err_msg=name)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("decimals", [None, 2, 1], ids=["distinct", "ties", "many-ties"])
@pytest.mark.parametrize("weighting", ["none", "float", "integer"])
@pytest.mark.parametrize("drop", [True, False], ids=["drop", "keep"])
def test_matches_sklearn(seed: int, decimals: int | None, weighting: str, drop: bool) -> None:
    y, scores, weight = sample(seed, decimals, weighting)

    ours = metrics.roc_curve(y, scores, sample_weight=weight, drop_intermediate=drop)
    theirs = skm.roc_curve(y, scores, sample_weight=weight, drop_intermediate=drop)

    assert_same_curve(ours, theirs)
    fpr, tpr, _ = ours
    assert np.trapezoid(tpr, fpr) == pytest.approx(
        skm.roc_auc_score(y, scores, sample_weight=weight), abs=TOL
    )


def test_dropped_points_lie_between_their_neighbours() -> None:
    y, scores, _ = sample(5, None, "none")  # runs of one class: straight runs of steps
    fpr, tpr, thresholds = metrics.roc_curve(y, scores)
    full_fpr, full_tpr, full_thresholds = metrics.roc_curve(y, scores, drop_intermediate=False)

    assert fpr.size < full_fpr.size
    kept = np.isin(full_thresholds, thresholds)
    assert np.array_equal(full_fpr[kept], fpr) and np.array_equal(full_tpr[kept], tpr)
    # A point left out is on the straight line through the points either side of it.
    for i in np.flatnonzero(~kept):
        before = (full_fpr[i] - full_fpr[i - 1], full_tpr[i] - full_tpr[i - 1])
        after = (full_fpr[i + 1] - full_fpr[i], full_tpr[i + 1] - full_tpr[i])
        assert before[0] * after[1] - before[1] * after[0] == pytest.approx(0.0, abs=1e-15)
    assert np.trapezoid(tpr, fpr) == pytest.approx(np.trapezoid(full_tpr, full_fpr), abs=TOL)


@pytest.mark.parametrize("positive", ["cat", "dog", "eel"])
def test_one_label_against_the_rest_like_sklearn(positive: str) -> None:
    r = np.random.default_rng(3)
    y = np.array(["cat", "dog", "eel"])[r.integers(0, 3, N)]
    scores = np.round(r.random(N) + 0.3 * (y == positive), 2)

    ours = metrics.roc_curve(y, scores, pos_label=positive)

    assert_same_curve(ours, skm.roc_curve(y, scores, pos_label=positive))


def test_default_positive_label_is_the_second_sorted_one() -> None:
    y = np.array(["no", "yes", "yes", "no", "yes"])
    scores = np.array([0.1, 0.8, 0.4, 0.35, 0.9])

    assert_same_curve(metrics.roc_curve(y, scores), skm.roc_curve(y, scores, pos_label="yes"))
    for minus_one in (np.array([-1, 1, 1, -1, 1]), np.array([0, 1, 1, 0, 1])):
        assert_same_curve(metrics.roc_curve(minus_one, scores), skm.roc_curve(minus_one, scores))


def test_undefined_curves_and_bad_input_are_refused() -> None:
    with pytest.raises(ValueError, match="no negative"):
        metrics.roc_curve([1, 1, 1], [0.2, 0.5, 0.9])
    with pytest.raises(ValueError, match="no positive"):
        metrics.roc_curve([0, 1, 1], [0.2, 0.5, 0.9], pos_label=2)
    with pytest.raises(ValueError, match="no negative"):
        metrics.roc_curve([0, 1, 1], [0.2, 0.5, 0.9], sample_weight=[0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="pass pos_label"):
        metrics.roc_curve([0, 1, 2], [0.2, 0.5, 0.9])
    with pytest.raises(ValueError, match="NaN"):
        metrics.roc_curve([0, 1, 1], [0.2, np.nan, 0.9])
    with pytest.raises(ValueError, match="inconsistent"):
        metrics.roc_curve([0, 1, 1], [0.2, 0.5])
    with pytest.raises(ValueError, match="1-dimensional"):
        metrics.roc_curve([0, 1], [[0.2, 0.8], [0.5, 0.5]])
