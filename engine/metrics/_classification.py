"""Metrics of predicted class labels: accuracy, the confusion matrix, precision, recall, F1."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine.metrics._checks import _as_1d, _check_lengths, _encode, _is_text, _weights

Average = Literal["macro", "binary", "weighted", "micro"]


def _label_pair(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[NDArray[Any], NDArray[Any], NDArray[np.float64] | None]:
    true, pred = _as_1d(y_true, "y_true"), _as_1d(y_pred, "y_pred")
    _check_lengths(y_true=true, y_pred=pred, sample_weight=sample_weight)
    if _is_text(true) != _is_text(pred):
        # Comparing "1" with 1 would silently count as a mismatch everywhere.
        raise TypeError(
            "Labels in y_true and y_pred must be of one kind: got a mix of strings and numbers."
        )
    return true, pred, _weights(sample_weight, true.shape[0])


def accuracy_score(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Fraction of samples (weighted by ``sample_weight``) whose label is predicted exactly.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted class labels.
    sample_weight : array-like of shape (n_samples,), optional
    """
    true, pred, weight = _label_pair(y_true, y_pred, sample_weight)
    return float(np.average(true == pred, weights=weight))


def confusion_matrix(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
) -> NDArray[Any]:
    """Counts of (true, predicted) label pairs.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    labels : array-like of shape (n_classes,), optional
        Row/column order; samples whose true or predicted label is not listed are left out.
        Default: the sorted union of the labels in ``y_true`` and ``y_pred``.
    sample_weight : array-like of shape (n_samples,), optional

    Returns
    -------
    ndarray of shape (n_classes, n_classes)
        ``C[i, j]`` counts samples of true class ``labels[i]`` predicted as ``labels[j]``;
        int64 without weights, float64 with them.
    """
    true, pred, weight = _label_pair(y_true, y_pred, sample_weight)
    if labels is None:
        classes = np.union1d(true, pred)
    else:
        classes = np.asarray(labels).ravel()
        if classes.size == 0:
            raise ValueError("labels should contain at least one label.")
        if np.unique(classes).size != classes.size:
            raise ValueError("labels must be unique.")
    k = classes.size
    true_code, true_known = _encode(true, classes)
    pred_code, pred_known = _encode(pred, classes)
    if labels is not None and not true_known.any():
        raise ValueError("At least one label specified must be in y_true.")
    keep = true_known & pred_known
    flat = true_code[keep] * k + pred_code[keep]
    counts = np.bincount(flat, weights=None if weight is None else weight[keep], minlength=k * k)
    return counts.reshape(k, k)


def _prf(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *,
    average: Average,
    labels: ArrayLike | None,
    pos_label: Any,
    zero_division: float,
    sample_weight: ArrayLike | None,
) -> tuple[float, float, float]:
    """Precision, recall and F1 from per-label true/predicted/true-positive totals."""
    if average not in ("macro", "binary", "weighted", "micro"):
        raise ValueError(
            f"average must be one of 'macro', 'binary', 'weighted', 'micro'; got {average!r}."
        )
    if not isinstance(zero_division, float | int) or not (
        zero_division in (0, 1) or math.isnan(zero_division)
    ):
        raise ValueError(f"zero_division must be 0.0, 1.0 or nan; got {zero_division!r}.")
    true, pred, weight = _label_pair(y_true, y_pred, sample_weight)
    selected = _scored_labels(true, pred, average, labels, pos_label)
    tp, true_sum, pred_sum = _label_totals(true, pred, weight, selected)
    if average == "micro":
        tp, true_sum, pred_sum = (a.sum(keepdims=True) for a in (tp, true_sum, pred_sum))
    precision = _divide(tp, pred_sum, zero_division)
    recall = _divide(tp, true_sum, zero_division)
    f1 = _divide(2.0 * tp, true_sum + pred_sum, zero_division)
    weights = true_sum if average == "weighted" else None
    return _nanaverage(precision, weights), _nanaverage(recall, weights), _nanaverage(f1, weights)


def _scored_labels(
    true: NDArray[Any],
    pred: NDArray[Any],
    average: Average,
    labels: ArrayLike | None,
    pos_label: Any,
) -> NDArray[Any]:
    """The labels precision/recall/F1 are computed for, following scikit-learn's rules."""
    present = np.union1d(true, pred)
    if average != "binary":
        # pos_label only means something for average="binary", as in scikit-learn.
        return present if labels is None else np.asarray(labels).ravel()
    if present.size > 2:
        raise ValueError(
            f"Target is multiclass ({present.size} labels) but average='binary'; "
            "choose average='macro', 'micro' or 'weighted'."
        )
    # Python equality, so that pos_label=1 against string labels is "absent", not an error.
    if present.size == 2 and not any(label == pos_label for label in present.tolist()):
        raise ValueError(
            f"pos_label={pos_label!r} is not a valid label; it should be one of "
            f"{present.tolist()!r}."
        )
    return np.asarray([pos_label])


def _label_totals(
    true: NDArray[Any],
    pred: NDArray[Any],
    weight: NDArray[np.float64] | None,
    selected: NDArray[Any],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Weighted true positives, true counts and predicted counts per selected label.

    Returns
    -------
    tp, true_sum, pred_sum : ndarray of shape (n_selected,), dtype float64
    """
    true_code, true_known = _encode(true, selected)
    pred_code, pred_known = _encode(pred, selected)

    def total(codes: NDArray[np.intp], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        w = None if weight is None else weight[mask]
        return np.bincount(codes[mask], weights=w, minlength=selected.size).astype(np.float64)

    hit = true_known & (true == pred)
    return total(true_code, hit), total(true_code, true_known), total(pred_code, pred_known)


def _divide(
    num: NDArray[np.float64], den: NDArray[np.float64], zero_division: float
) -> NDArray[np.float64]:
    zero = den == 0
    out = num / np.where(zero, 1.0, den)
    out[zero] = zero_division
    return out


def _nanaverage(values: NDArray[np.float64], weights: NDArray[np.float64] | None) -> float:
    # zero_division=nan marks undefined per-label scores that the average then skips.
    keep = ~np.isnan(values)
    if values.size == 0 or not keep.any():
        return float("nan")
    if weights is None or weights[keep].sum() == 0:
        return float(np.mean(values[keep]))
    return float(np.average(values[keep], weights=weights[keep]))


def precision_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    labels: ArrayLike | None = None,
    pos_label: Any = 1,
    zero_division: float = 0.0,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Precision tp / (tp + fp); see :func:`f1_score` for the parameters."""
    scores = _prf(
        y_true,
        y_pred,
        average=average,
        labels=labels,
        pos_label=pos_label,
        zero_division=zero_division,
        sample_weight=sample_weight,
    )
    return scores[0]


def recall_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    labels: ArrayLike | None = None,
    pos_label: Any = 1,
    zero_division: float = 0.0,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Recall tp / (tp + fn); see :func:`f1_score` for the parameters."""
    scores = _prf(
        y_true,
        y_pred,
        average=average,
        labels=labels,
        pos_label=pos_label,
        zero_division=zero_division,
        sample_weight=sample_weight,
    )
    return scores[1]


def f1_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    average: Average = "macro",
    labels: ArrayLike | None = None,
    pos_label: Any = 1,
    zero_division: float = 0.0,
    sample_weight: ArrayLike | None = None,
) -> float:
    """F1 score 2·tp / (2·tp + fp + fn), the harmonic mean of precision and recall.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    average : {"macro", "binary", "weighted", "micro"}, default "macro"
        ``macro``: unweighted mean over labels; ``weighted``: mean weighted by each label's
        (weighted) support; ``micro``: from totals over labels; ``binary``: the score of
        ``pos_label`` alone (at most two labels allowed). Note scikit-learn defaults to
        ``binary``; ``macro`` is defined for every target, hence the default here.
    labels : array-like, optional
        Labels to score and average over (not for ``binary``); labels absent from the data
        score ``zero_division``. Default: the sorted union of ``y_true`` and ``y_pred``.
    pos_label : label, default 1
        Used only with ``average="binary"``.
    zero_division : {0.0, 1.0, nan}, default 0.0
        The score of a label whose denominator is zero; ``nan`` leaves it out of the average.
    sample_weight : array-like of shape (n_samples,), optional
    """
    scores = _prf(
        y_true,
        y_pred,
        average=average,
        labels=labels,
        pos_label=pos_label,
        zero_division=zero_division,
        sample_weight=sample_weight,
    )
    return scores[2]
