"""Metrics of predicted probabilities and scores: log loss and the area under the ROC curve."""

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


def _binary_auc(
    positive: NDArray[np.bool_], scores: NDArray[np.float64], weight: NDArray[np.float64] | None
) -> float:
    """Area under the ROC curve by the trapezoid rule over distinct score thresholds.

    Tied scores form one threshold, i.e. one diagonal step of the curve, which is what makes the
    area equal the Mann–Whitney statistic with midranks (and scikit-learn's value).
    """
    order = np.argsort(-scores, kind="stable")
    w = np.ones(scores.shape[0]) if weight is None else weight[order]
    is_pos = positive[order]
    ends = np.r_[np.flatnonzero(np.diff(scores[order])), scores.shape[0] - 1]
    tps = np.r_[0.0, np.cumsum(w * is_pos)[ends]]
    fps = np.r_[0.0, np.cumsum(w * ~is_pos)[ends]]
    if tps[-1] <= 0 or fps[-1] <= 0:
        raise ValueError(
            "Only one class is present in y_true (after weighting); ROC AUC is not defined."
        )
    tpr, fpr = tps / tps[-1], fps / fps[-1]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


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
