"""Combiners of heterogeneous members: voting (Kuncheva 2004, ch. 4), stacking (Wolpert 1992)
and grading (Seewald and Fürnkranz 2001).

- :class:`VotingClassifier` / :class:`VotingRegressor`: majority or weighted vote, probability
  or prediction averaging, with given weights or log-odds weights learned on held-out folds.
- :class:`StackingClassifier` / :class:`StackingRegressor`: a final estimator fitted on the
  members' out-of-fold outputs.
- :class:`GradingClassifier`: per member, a grader that learns where the member is right; the
  members graded right vote.
- :func:`vote_accuracy` / :func:`log_odds_weights`: the exact accuracy of a vote of independent
  members, and the weights that maximise it.
"""

from engine.combine._folds import cv_folds, fold_splits
from engine.combine._grading import GradingClassifier
from engine.combine._stacking import StackingClassifier, StackingRegressor
from engine.combine._voting import VotingClassifier, VotingRegressor
from engine.combine._weights import log_odds_weights, vote_accuracy

__all__ = [
    "GradingClassifier",
    "StackingClassifier",
    "StackingRegressor",
    "VotingClassifier",
    "VotingRegressor",
    "cv_folds",
    "fold_splits",
    "log_odds_weights",
    "vote_accuracy",
]
