"""Diversity of an ensemble's classifiers, from their oracle outputs (Kuncheva 2004, ch. 10).

The oracle output of member i on row j is 1 when it classifies the row correctly, 0 when
not. For a pair of members (i, k), N^{ab} counts the rows where i's oracle output is a and
k's is b, over N rows (Kuncheva and Whitaker, 2003):

- disagreement  D = (N^{01} + N^{10}) / N
- Yule's Q      Q = (N^{11}N^{00} − N^{01}N^{10}) / (N^{11}N^{00} + N^{01}N^{10})
- correlation   ρ = (N^{11}N^{00} − N^{01}N^{10}) /
                    √((N^{11}+N^{10})(N^{01}+N^{00})(N^{11}+N^{01})(N^{10}+N^{00}))
  (Pearson's correlation of the two oracle columns)
- double fault  DF = N^{00} / N

The ensemble figures average each over the L(L−1)/2 pairs. Q and ρ are undefined (0/0) for
a pair in which one member is always right or always wrong (or, for Q, both agree on every
row); such pairs are left out of the average, which is NaN if no pair is defined.

The "pattern of success" and "pattern of failure" (Kuncheva, Whitaker, Shipp and Duin 2003;
Kuncheva 2004, §4.2): with members of equal accuracy p,
the majority vote can be far better (P_maj − p > 0: errors spread so that a majority is right
on most rows; negatively related members) or worse (P_maj − p < 0: the members' errors pile
up on the same rows in just-too-large groups) than a single member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_X

__all__ = ["EnsembleDiversity", "ensemble_diversity", "member_predictions", "oracle_diversity"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class EnsembleDiversity:
    """Accuracy and pairwise diversity of an ensemble's members on one labelled set.

    Attributes
    ----------
    n_members, n_samples : int
    mean_accuracy : float
        p, the average accuracy of the members.
    majority_vote_accuracy : float
        P_maj, the accuracy of the members' (unweighted) majority vote.
    majority_gain : float
        P_maj − p: positive for a pattern of success, negative for a pattern of failure.
    disagreement, q_statistic, correlation, double_fault : float
        Averages over pairs of members (Q and ρ over the pairs where they are defined).
    member_accuracy : ndarray of shape (n_members,)
    pairwise_disagreement, pairwise_q, pairwise_correlation, pairwise_double_fault :
        ndarray of shape (n_members, n_members), symmetric; NaN where undefined. The
        diagonal compares each member with itself.
    """

    n_members: int
    n_samples: int
    mean_accuracy: float
    majority_vote_accuracy: float
    majority_gain: float
    disagreement: float
    q_statistic: float
    correlation: float
    double_fault: float
    member_accuracy: FloatArray = field(repr=False, compare=False)
    pairwise_disagreement: FloatArray = field(repr=False, compare=False)
    pairwise_q: FloatArray = field(repr=False, compare=False)
    pairwise_correlation: FloatArray = field(repr=False, compare=False)
    pairwise_double_fault: FloatArray = field(repr=False, compare=False)


def oracle_diversity(oracle: Any) -> EnsembleDiversity:
    """Diversity figures from an oracle matrix (1/True = correct, 0/False = wrong).

    Parameters
    ----------
    oracle : array-like of shape (n_samples, n_members), boolean or 0/1

    The majority vote counts as correct on a row when more than half of the members are
    (Kuncheva's definition: exact for two classes and an odd number of members; with more
    classes a plurality can also be right with fewer correct votes).
    """
    correct = _oracle(oracle)
    n_members = correct.shape[1]
    majority = correct.sum(axis=1) > n_members / 2
    return _diversity(correct, majority)


def ensemble_diversity(ensemble: Any, X: Any, y: Any) -> EnsembleDiversity:
    """Diversity of a fitted classification ensemble's members on ``(X, y)``.

    Parameters
    ----------
    ensemble : fitted classifier ensemble, or list of fitted classifiers
        Engine bagging, forests and extra trees (members read through the ensemble's own
        per-member prediction, so members fitted on feature subspaces see their own
        columns), AdaBoost/RegionBoost/ArcX4, any other object with ``estimators_`` and
        ``classes_`` (columns taken from ``estimators_features_`` when present), or a list
        of fitted classifiers predicting labels of ``y``.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        True labels.

    The majority vote is the plurality of the members' predicted labels, ties going to the
    label first in sorted order (as ``argmax`` over ``classes_``). It is the unweighted vote
    of the members, which for soft-voting or weighted ensembles (AdaBoost) may differ from the
    ensemble's own prediction.
    """
    predictions = member_predictions(ensemble, X)
    y = np.asarray(y)
    if y.shape != (predictions.shape[0],):
        raise ValueError(f"y must have shape ({predictions.shape[0]},); got {y.shape}.")
    correct = predictions == y[:, None]
    labels, codes = np.unique(predictions, return_inverse=True)
    codes = codes.reshape(predictions.shape)
    n_samples, n_labels = predictions.shape[0], labels.size
    rows = np.repeat(np.arange(n_samples), predictions.shape[1])
    votes = np.bincount(rows * n_labels + codes.ravel(), minlength=n_samples * n_labels)
    winners = labels[votes.reshape(n_samples, n_labels).argmax(axis=1)]
    return _diversity(_oracle(correct), winners == y)


def member_predictions(ensemble: Any, X: Any) -> NDArray[Any]:
    """Each member's predicted labels, shape (n_samples, n_members).

    See :func:`ensemble_diversity` for the ensembles understood.
    """
    if isinstance(ensemble, list | tuple):
        if len(ensemble) < 1:
            raise ValueError("The list of classifiers is empty.")
        return np.column_stack([np.asarray(member.predict(X)) for member in ensemble])
    classes = getattr(ensemble, "classes_", None)
    if classes is None:
        raise TypeError(
            f"{type(ensemble).__name__} is not a fitted classifier ensemble: diversity "
            "measures compare members' correct and incorrect classifications."
        )
    if hasattr(ensemble, "members_") and hasattr(ensemble, "_prepare"):
        # Bagging and forests: the ensemble encodes X for its members (binning) and each
        # member returns scores over all classes, reading its own feature subspace.
        prepared = ensemble._prepare(X)
        columns = [member.predict(prepared).argmax(axis=1) for member in ensemble.members_]
        return np.asarray(classes)[np.column_stack(columns)]
    if hasattr(ensemble, "_member_predictions") and hasattr(ensemble, "_prepare"):
        # AdaBoost/RegionBoost: class indices, with any reversed member already flipped.
        return np.asarray(classes)[ensemble._member_predictions(ensemble._prepare(X))]
    return _generic_member_predictions(ensemble, X, np.asarray(classes))


def _generic_member_predictions(ensemble: Any, X: Any, classes: NDArray[Any]) -> NDArray[Any]:
    members = getattr(ensemble, "estimators_", None)
    if not members or not all(hasattr(m, "predict") and hasattr(m, "classes_") for m in members):
        raise TypeError(
            f"Cannot read the members of {type(ensemble).__name__}: expected estimators_ "
            "holding fitted classifiers."
        )
    X = check_X(X)
    subspaces = getattr(ensemble, "estimators_features_", None) or [None] * len(members)
    outputs = [
        np.asarray(member.predict(X if features is None else X[:, np.asarray(features)]))
        for member, features in zip(members, subspaces, strict=True)
    ]
    predicted = np.column_stack(outputs)
    if _fitted_on_codes(ensemble, members, classes):
        return classes[predicted.astype(np.int64)]
    return predicted


def _fitted_on_codes(ensemble: Any, members: list[Any], classes: NDArray[Any]) -> bool:
    """Whether the members learnt class indices 0..K−1 rather than the labels themselves.

    Engine ensembles always encode (ArcX4). Others are judged by the labels the members
    saw: indices when they are all in 0..K−1 but not all among the ensemble's labels.
    """
    if type(ensemble).__module__.startswith("engine."):
        return True
    seen = np.unique(np.concatenate([np.asarray(m.classes_).ravel() for m in members]))
    as_labels = bool(np.isin(seen, classes).all())
    if as_labels:
        return False
    try:
        codes = seen.astype(np.float64)
    except (TypeError, ValueError):
        return False
    return bool(((codes >= 0) & (codes < classes.size) & (codes == np.floor(codes))).all())


def _oracle(oracle: Any) -> NDArray[np.bool_]:
    correct = np.asarray(oracle)
    if correct.ndim != 2:
        raise ValueError(
            f"The oracle matrix must be 2-D (n_samples, n_members); got {correct.ndim}D."
        )
    if correct.dtype != bool:
        if not np.isin(correct, (0, 1)).all():
            raise ValueError("The oracle matrix may hold only 0/1 or booleans.")
        correct = correct.astype(bool)
    if correct.shape[0] < 1 or correct.shape[1] < 2:
        raise ValueError(
            f"Diversity needs at least one row and two members; got shape {correct.shape}."
        )
    return correct


def _diversity(
    correct: NDArray[np.bool_], majority_correct: NDArray[np.bool_]
) -> EnsembleDiversity:
    n_samples, n_members = correct.shape
    right = correct.astype(np.float64)
    wrong = 1.0 - right
    n11 = right.T @ right  # [i, k]: rows both get right
    n00 = wrong.T @ wrong
    n10 = right.T @ wrong  # i right, k wrong
    n01 = n10.T
    agreement = n11 * n00 - n01 * n10
    with np.errstate(invalid="ignore", divide="ignore"):
        q = agreement / (n11 * n00 + n01 * n10)
        rho = agreement / np.sqrt((n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00))
    disagreement = (n01 + n10) / n_samples
    double_fault = n00 / n_samples
    upper = np.triu_indices(n_members, k=1)
    accuracy = right.mean(axis=0)
    p = float(accuracy.mean())
    p_majority = float(majority_correct.mean())
    return EnsembleDiversity(
        n_members=n_members,
        n_samples=n_samples,
        mean_accuracy=p,
        majority_vote_accuracy=p_majority,
        majority_gain=p_majority - p,
        disagreement=float(disagreement[upper].mean()),
        q_statistic=_defined_mean(q[upper]),
        correlation=_defined_mean(rho[upper]),
        double_fault=float(double_fault[upper].mean()),
        member_accuracy=accuracy,
        pairwise_disagreement=disagreement,
        pairwise_q=q,
        pairwise_correlation=rho,
        pairwise_double_fault=double_fault,
    )


def _defined_mean(values: FloatArray) -> float:
    defined = values[np.isfinite(values)]
    return float(defined.mean()) if defined.size else float("nan")
