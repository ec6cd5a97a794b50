"""Bagging linear classifiers gives a piecewise-linear decision boundary (Flach 2012, §11.1).

A majority vote of logistic regressions fitted on bootstrap samples is constant on every cell
of the arrangement of the members' lines, so its boundary is made of pieces of those lines;
on a curved class boundary it bends and, on average over training sets, classifies better
than one logistic regression.
"""

from __future__ import annotations

import warnings

import numpy as np

from engine import BaggingClassifier
from engine.linear import LogisticRegression


def parabola(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    return X, (X[:, 1] > X[:, 0] ** 2 - 1.5).astype(int)


def bagged(C: float, seed: int) -> BaggingClassifier:
    return BaggingClassifier(
        estimator=LogisticRegression(C=C), n_estimators=25, voting="hard", random_state=seed
    )


def member_votes(model: BaggingClassifier, X: np.ndarray) -> np.ndarray:
    """Each member's predicted class (n_members, n_samples), from its own linear rule."""
    votes = []
    for member, features in zip(model.estimators_, model.estimators_features_, strict=True):
        columns = X if features is None else X[:, features]
        score = columns @ member.coef_[0] + member.intercept_[0]
        votes.append((score > 0).astype(int))
    return np.array(votes)


def test_majority_vote_boundary_is_made_of_member_lines() -> None:
    rng = np.random.default_rng(0)
    X, y = parabola(60, rng)
    model = bagged(100.0, 0).fit(X, y)
    axis = np.linspace(-2.0, 2.0, 241)
    grid = np.array(np.meshgrid(axis, axis)).reshape(2, -1).T
    votes = member_votes(model, grid)
    # The ensemble is exactly the vote share of linear rules...
    np.testing.assert_allclose(model.predict_proba(grid)[:, 1], votes.mean(axis=0))
    predicted = model.predict(grid).reshape(axis.size, axis.size)
    votes = votes.reshape(-1, axis.size, axis.size)
    # ...so wherever the prediction changes between neighbouring grid points, some member's
    # line lies between them: the boundary is contained in the union of the members' lines.
    crossings = []
    for dim in (0, 1):
        changes = np.diff(predicted, axis=dim) != 0
        crossed = np.diff(votes, axis=dim + 1) != 0
        assert changes.any()
        assert crossed.any(axis=0)[changes].all()
        crossings.append(crossed[:, changes])
    # And it bends: no one member's line carries the whole boundary, several carry pieces.
    share = np.hstack(crossings).mean(axis=1)  # per member: fraction of boundary it crosses
    assert share.max() < 0.9
    assert (share > 0.1).sum() >= 3
    on_boundary = grid[(np.diff(predicted, axis=1, append=predicted[:, -1:]) != 0).ravel()]
    centred = on_boundary - on_boundary.mean(axis=0)
    normal = np.linalg.svd(centred, full_matrices=False)[2][1]  # of the best-fitting line
    # Grid points beside one straight line stay within a step of it; these do not.
    assert np.abs(centred @ normal).max() > 3 * (axis[1] - axis[0])


def test_bagged_logistic_regressions_beat_one_on_a_curved_boundary() -> None:
    single_scores, bagged_scores = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nearly separable bootstrap samples at C=100
        for seed in range(12):
            rng = np.random.default_rng(seed)
            X, y = parabola(40, rng)
            X_test, y_test = parabola(3000, rng)
            single_scores.append(LogisticRegression(C=100.0).fit(X, y).score(X_test, y_test))
            bagged_scores.append(bagged(100.0, seed).fit(X, y).score(X_test, y_test))
    wins = sum(b > s for b, s in zip(bagged_scores, single_scores, strict=True))
    assert np.mean(bagged_scores) > np.mean(single_scores)
    assert wins >= 8
