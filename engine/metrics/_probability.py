"""Metrics of predicted probabilities and scores: log loss, the ROC curve and the area under it."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.metrics._checks import _as_1d, _check_lengths, _encode, _weights


def _sorted_classes(labels: ArrayLike | None, y_true: NDArray[Any]) -> NDArray[Any]:
    """The class order probability columns follow: ``labels`` (checked) or sorted ``y_true``."""
    if labels is None:
        return np.unique(y_true)
    classes = np.asarray(labels).ravel()
    unique = np.unique(classes)
    if unique.shape[0] != classes.shape[0]:
        raise ValueError("labels must be unique.")
    if not np.array_equal(unique, classes):
        raise ValueError(
            f"labels must be sorted, as probability columns follow the sorted class order "
            f"(like classes_); pass labels={unique.tolist()!r}."
        )
    _, known = _encode(y_true, classes)
    if not known.all():
        missing = sorted({str(v) for v in y_true[~known]})
        raise ValueError(f"y_true contains labels {missing} that are not in labels.")
    return classes


def _probabilities(proba: ArrayLike, name: str = "proba") -> NDArray[np.float64]:
    array = np.asarray(proba, dtype=np.float64)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.ravel()
    if array.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1- or 2-dimensional; got shape {array.shape}.")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinity.")
    return array


def log_loss(
    y_true: ArrayLike,
    proba: ArrayLike,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Mean negative log-likelihood of the true labels (cross-entropy), natural log.

    Probabilities are clipped to ``[eps, 1 - eps]`` with ``eps`` the float64 machine epsilon,
    as scikit-learn does since 1.5, so a confident mistake costs about 36 rather than inf.
    Rows that do not sum to one raise a ``UserWarning`` and are not renormalised.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes) or (n_samples,)
        Columns follow the sorted labels; a 1-D array is the probability of the second label.
    labels : array-like of shape (n_classes,), optional
        All class labels, sorted; needed when ``y_true`` lacks some of them.
    sample_weight : array-like of shape (n_samples,), optional
    """
    true = _as_1d(y_true, "y_true")
    p = _probabilities(proba)
    _check_lengths(y_true=true, proba=p, sample_weight=sample_weight)
    weight = _weights(sample_weight, true.shape[0])
    if p.min() < 0 or p.max() > 1:
        raise ValueError("proba must lie in [0, 1].")
    if p.ndim == 1:
        p = np.column_stack([1.0 - p, p])
    classes = _sorted_classes(labels, true)
    if classes.size < 2:
        raise ValueError(
            f"y_true contains only one label ({classes.tolist()!r}); pass all class labels "
            "through the labels argument."
        )
    if classes.size != p.shape[1]:
        raise ValueError(
            f"proba has {p.shape[1]} columns but there are {classes.size} classes "
            f"{classes.tolist()!r}; pass the full label set through labels."
        )
    eps = np.finfo(np.float64).eps
    if not np.allclose(p.sum(axis=1), 1.0, rtol=math.sqrt(eps), atol=0.0):
        warnings.warn(
            "The proba rows do not sum to one; pass probabilities.", UserWarning, stacklevel=2
        )
    codes, _ = _encode(true, classes)
    p_true = np.clip(p[np.arange(true.shape[0]), codes], eps, 1.0 - eps)
    return float(np.average(-np.log(p_true), weights=weight))


def _threshold_counts(
    positive: NDArray[np.bool_], scores: NDArray[np.float64], weight: NDArray[np.float64] | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Weighted false and true positives when every score at or above each distinct score is
    called positive, highest score first, and those scores.

    Tied scores form one threshold, so they move both counts at once. Zero-weighted samples are
    left out: they move no count, and would only add thresholds where nothing changes.
    """
    if weight is not None:
        kept = weight != 0
        positive, scores, weight = positive[kept], scores[kept], weight[kept]
    if scores.shape[0] == 0:
        empty = np.zeros(0)
        return empty, empty, empty
    order = np.argsort(-scores, kind="stable")
    ranked = scores[order]
    w = np.ones(ranked.shape[0]) if weight is None else weight[order]
    is_pos = positive[order]
    ends = np.r_[np.flatnonzero(np.diff(ranked)), ranked.shape[0] - 1]
    return np.cumsum(w * ~is_pos)[ends], np.cumsum(w * is_pos)[ends], ranked[ends]


def _binary_auc(
    positive: NDArray[np.bool_], scores: NDArray[np.float64], weight: NDArray[np.float64] | None
) -> float:
    """Area under the ROC curve by the trapezoid rule over distinct score thresholds.

    Tied scores form one threshold, i.e. one diagonal step of the curve, which is what makes the
    area equal the Mann–Whitney statistic with midranks (and scikit-learn's value).
    """
    fps, tps, _ = _threshold_counts(positive, scores, weight)
    if tps.size == 0 or tps[-1] <= 0 or fps[-1] <= 0:
        raise ValueError(
            "Only one class is present in y_true (after weighting); ROC AUC is not defined."
        )
    tpr, fpr = np.r_[0.0, tps] / tps[-1], np.r_[0.0, fps] / fps[-1]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def roc_curve(
    y_true: ArrayLike,
    scores: ArrayLike,
    *,
    pos_label: Any = None,
    sample_weight: ArrayLike | None = None,
    drop_intermediate: bool = True,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The ROC curve: false and true positive rates as the threshold falls through the scores.

    Point ``i`` is the rates when a sample is called positive for ``score >= thresholds[i]``;
    the first point is ``(0, 0)`` at an infinite threshold, the last ``(1, 1)`` at the lowest
    score. Tied scores are one threshold, a diagonal step (Fawcett 2006, "An introduction to
    ROC analysis", algorithm 2).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    scores : array-like of shape (n_samples,)
        Higher means more likely ``pos_label`` (e.g. ``predict_proba(X)[:, k]``).
    pos_label : scalar, optional
        The positive class; every other label is negative (one-vs-rest for more than two).
        Default: the second of the two sorted labels of ``y_true`` (``1`` of ``{0, 1}`` and of
        ``{-1, 1}``, as scikit-learn; scikit-learn asks for it with other labels).
    sample_weight : array-like of shape (n_samples,), optional
    drop_intermediate : bool, default True
        Leave out the points that lie on a straight line between their neighbours: they are no
        corner of the drawn curve and do not change its area.

    Returns
    -------
    fpr, tpr, thresholds : ndarray of shape (n_points,)
        ``thresholds`` decrease and start with ``inf``.

    Raises
    ------
    ValueError
        When there is no positive or no negative sample (after weighting): the rates are then
        undefined. scikit-learn returns NaN rates with a warning there instead.
    """
    true = _as_1d(y_true, "y_true")
    s = _as_1d(scores, "scores").astype(np.float64)
    if not np.isfinite(s).all():
        raise ValueError("scores contains NaN or infinity.")
    _check_lengths(y_true=true, scores=s, sample_weight=sample_weight)
    weight = _weights(sample_weight, true.shape[0])
    if pos_label is None:
        labels = np.unique(true)
        if labels.size > 2:
            raise ValueError(
                f"y_true has {labels.size} labels; pass pos_label to draw one of them against "
                "the rest."
            )
        pos_label = labels[-1]
    fps, tps, thresholds = _threshold_counts(true == pos_label, s, weight)
    if tps.size == 0 or tps[-1] <= 0 or fps[-1] <= 0:
        raise ValueError(
            f"y_true has no {'negative' if tps.size and tps[-1] > 0 else 'positive'} sample "
            f"(pos_label={pos_label!r}, after weighting); the ROC curve is not defined."
        )
    if drop_intermediate and fps.size > 2:
        # A point is a corner when either count's second difference is non-zero there.
        corner = np.r_[True, (np.diff(fps, 2) != 0) | (np.diff(tps, 2) != 0), True]
        fps, tps, thresholds = fps[corner], tps[corner], thresholds[corner]
    return (
        np.r_[0.0, fps] / fps[-1],
        np.r_[0.0, tps] / tps[-1],
        np.r_[np.inf, thresholds],
    )


def roc_auc_score(
    y_true: ArrayLike,
    scores: ArrayLike,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Area under the ROC curve; macro one-vs-rest average for more than two classes.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    scores : array-like of shape (n_samples,) or (n_samples, n_classes)
        1-D: a score for the positive class, the second of the sorted labels (e.g.
        ``predict_proba(X)[:, 1]``). 2-D: class probabilities with columns in sorted label
        order; two columns are treated as binary, more need rows summing to one.
    labels : array-like of shape (n_classes,), optional
        All class labels, sorted. Default: the labels present in ``y_true``.
    sample_weight : array-like of shape (n_samples,), optional

    Raises
    ------
    ValueError
        When a class to score has no positive or no negative samples (e.g. ``y_true`` holds a
        single class). scikit-learn returns NaN with a warning there instead.
    """
    true = _as_1d(y_true, "y_true")
    s = _probabilities(scores, "scores")
    _check_lengths(y_true=true, scores=s, sample_weight=sample_weight)
    weight = _weights(sample_weight, true.shape[0])
    classes = _sorted_classes(labels, true)
    n_columns = 2 if s.ndim == 1 else s.shape[1]
    if classes.size < 2:
        raise ValueError(
            f"Only one class ({classes.tolist()!r}) is present in y_true; ROC AUC is not defined."
        )
    if classes.size != n_columns:
        raise ValueError(
            f"There are {classes.size} classes {classes.tolist()!r} but scores has "
            f"{'1 column (binary)' if s.ndim == 1 else f'{n_columns} columns'}; "
            "pass an (n_samples, n_classes) probability matrix and, when y_true lacks classes, labels."
        )
    if n_columns == 2:
        return _binary_auc(true == classes[1], s if s.ndim == 1 else s[:, 1], weight)
    if not np.allclose(s.sum(axis=1), 1.0):
        raise ValueError(
            "Multiclass ROC AUC needs probabilities: scores rows must sum to 1 over classes."
        )
    per_class = []
    for k, label in enumerate(classes):
        try:
            per_class.append(_binary_auc(true == label, s[:, k], weight))
        except ValueError:
            raise ValueError(
                f"Class {label!r} has no samples in y_true; its one-vs-rest ROC AUC is not defined."
            ) from None
    return float(np.mean(per_class))
