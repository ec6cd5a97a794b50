"""Scores for fitted models, numerically matching scikit-learn's metrics of the same names.

Every function takes array-likes and returns a Python ``float`` (``confusion_matrix`` returns
an array). Class labels may be any sortable scalars (ints, bools, strings); probability columns
always follow the sorted label order, as an estimator's ``classes_`` does. ``get_scorer`` turns
a metric name into a callable ``scorer(estimator, X, y, sample_weight=None) -> float`` where
greater is always better, as in scikit-learn's scorer registry.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine._validation import check_sample_weight

__all__ = [
    "Scorer",
    "accuracy_score",
    "confusion_matrix",
    "default_scorer",
    "f1_score",
    "get_scorer",
    "get_scorer_names",
    "log_loss",
    "mean_absolute_error",
    "mean_poisson_deviance",
    "mean_squared_error",
    "precision_score",
    "r2_score",
    "recall_score",
    "roc_auc_score",
    "root_mean_squared_error",
]

Average = Literal["macro", "binary", "weighted", "micro"]


# --------------------------------------------------------------------------- input checks


def _as_1d(values: ArrayLike, name: str) -> NDArray[Any]:
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional; got shape {array.shape}.")
    if array.shape[0] == 0:
        raise ValueError(f"{name} is empty; a minimum of 1 sample is required.")
    return array


def _check_lengths(**arrays: Any) -> None:
    lengths = {name: len(a) for name, a in arrays.items() if a is not None}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: {lengths}.")


def _weights(sample_weight: ArrayLike | None, n_samples: int) -> NDArray[np.float64] | None:
    return None if sample_weight is None else check_sample_weight(sample_weight, n_samples)


def _is_text(array: NDArray[Any]) -> bool:
    if array.dtype.kind in "US":
        return True
    return array.dtype.kind == "O" and array.size > 0 and isinstance(array.flat[0], str)


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


def _encode(values: NDArray[Any], labels: NDArray[Any]) -> tuple[NDArray[np.intp], NDArray[Any]]:
    """Index of each value in ``labels`` (any order) and a mask of values found there.

    Returns
    -------
    codes : ndarray of shape (n_samples,), dtype intp
        Meaningful only where ``known`` is True.
    known : ndarray of shape (n_samples,), dtype bool
    """
    if labels.size == 0 or _is_text(values) != _is_text(labels):
        return np.zeros(values.shape[0], dtype=np.intp), np.zeros(values.shape[0], dtype=bool)
    order = np.argsort(labels, kind="stable")
    position = np.minimum(np.searchsorted(labels[order], values), labels.size - 1)
    return order[position], labels[order][position] == values


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


# --------------------------------------------------------------------------- classification


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


# --------------------------------------------------------------------------- regression


def _target_pair(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64] | None]:
    true = _as_1d(y_true, "y_true").astype(np.float64)
    pred = _as_1d(y_pred, "y_pred").astype(np.float64)
    _check_lengths(y_true=true, y_pred=pred, sample_weight=sample_weight)
    if not (np.isfinite(true).all() and np.isfinite(pred).all()):
        raise ValueError("y_true and y_pred must be finite.")
    return true, pred, _weights(sample_weight, true.shape[0])


def mean_squared_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean of ``(y_true - y_pred) ** 2``; inputs are 1-D arrays of shape (n_samples,)."""
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    return float(np.average((true - pred) ** 2, weights=weight))


def root_mean_squared_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Square root of :func:`mean_squared_error`."""
    return math.sqrt(mean_squared_error(y_true, y_pred, sample_weight))


def mean_absolute_error(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean of ``|y_true - y_pred|``; inputs are 1-D arrays of shape (n_samples,)."""
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    return float(np.average(np.abs(true - pred), weights=weight))


def r2_score(y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot.

    Follows scikit-learn's default ``force_finite=True``: a constant ``y_true`` scores 1.0
    when predicted perfectly and 0.0 otherwise, instead of NaN or -inf. Fewer than two samples
    give NaN (scikit-learn also warns), as R² is not defined there.
    """
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    if true.shape[0] < 2:
        return float("nan")
    w = np.ones_like(true) if weight is None else weight
    residual = float(np.sum(w * (true - pred) ** 2))
    total = float(np.sum(w * (true - np.average(true, weights=weight)) ** 2))
    if residual == 0:
        return 1.0
    if total == 0:
        return 0.0
    return 1.0 - residual / total


def mean_poisson_deviance(
    y_true: ArrayLike, y_pred: ArrayLike, sample_weight: ArrayLike | None = None
) -> float:
    """Mean Poisson deviance 2·(y·log(y/μ) - y + μ), with y·log(y/μ) = 0 where y = 0.

    Requires ``y_true >= 0`` and ``y_pred > 0`` (the loss of Poisson boosting).
    """
    true, pred, weight = _target_pair(y_true, y_pred, sample_weight)
    if (true < 0).any() or (pred <= 0).any():
        raise ValueError("Poisson deviance needs y_true >= 0 and y_pred > 0.")
    positive = true > 0
    y_log_ratio = np.where(positive, true * np.log(np.where(positive, true, 1.0) / pred), 0.0)
    return float(np.average(2.0 * (y_log_ratio - true + pred), weights=weight))


# --------------------------------------------------------------------------- scorers


class Scorer(Protocol):
    """``scorer(estimator, X, y, sample_weight=None) -> float``; greater is better."""

    def __call__(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float: ...


@dataclass(frozen=True)
class _MetricScorer:
    """A metric applied to ``predict`` (or ``predict_proba``) output, signed so greater is better."""

    name: str
    metric: Callable[..., float]
    response: Literal["predict", "predict_proba"] = "predict"
    sign: float = 1.0

    def __call__(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        if self.response == "predict_proba":
            # classes_ keeps the columns labelled even when y lacks some classes.
            value = self.metric(
                y,
                estimator.predict_proba(X),
                labels=getattr(estimator, "classes_", None),
                sample_weight=sample_weight,
            )
        else:
            value = self.metric(y, estimator.predict(X), sample_weight=sample_weight)
        return self.sign * value

    def __repr__(self) -> str:
        return f"get_scorer({self.name!r})"


_SCORERS: dict[str, _MetricScorer] = {
    scorer.name: scorer
    for scorer in [
        _MetricScorer("accuracy", accuracy_score),
        _MetricScorer("neg_log_loss", log_loss, "predict_proba", -1.0),
        _MetricScorer("roc_auc", roc_auc_score, "predict_proba"),
        _MetricScorer("f1_macro", partial(f1_score, average="macro")),
        _MetricScorer("r2", r2_score),
        _MetricScorer("neg_mean_squared_error", mean_squared_error, sign=-1.0),
        _MetricScorer("neg_root_mean_squared_error", root_mean_squared_error, sign=-1.0),
        _MetricScorer("neg_mean_absolute_error", mean_absolute_error, sign=-1.0),
    ]
}


def get_scorer_names() -> list[str]:
    """The names :func:`get_scorer` accepts, sorted."""
    return sorted(_SCORERS)


def get_scorer(scoring: str | Callable[..., float]) -> Callable[..., float]:
    """The :class:`Scorer` registered under ``scoring``, or ``scoring`` itself when callable.

    A callable is returned unchanged; it should follow the :class:`Scorer` signature, though
    callers that pass no ``sample_weight`` may also use ``scorer(estimator, X, y)`` ones.
    """
    if isinstance(scoring, str):
        try:
            return _SCORERS[scoring]
        except KeyError:
            raise ValueError(
                f"Unknown scoring {scoring!r}; use one of {get_scorer_names()} or a callable."
            ) from None
    if callable(scoring):
        return scoring
    raise TypeError(f"scoring must be a metric name or a callable; got {type(scoring).__name__}.")


def _estimator_type(estimator: Any) -> str | None:
    kind = getattr(estimator, "_estimator_type", None)
    if kind is None and hasattr(estimator, "__sklearn_tags__"):
        # Recent scikit-learn estimators declare their type only through tags.
        try:
            kind = estimator.__sklearn_tags__().estimator_type
        except Exception:
            return None
    return kind if isinstance(kind, str) else None


def default_scorer(estimator: Any) -> Scorer:
    """Accuracy for classifiers, R² for regressors (the estimators' own ``score``)."""
    kind = _estimator_type(estimator)
    if kind == "classifier":
        return _SCORERS["accuracy"]
    if kind == "regressor":
        return _SCORERS["r2"]
    raise TypeError(
        f"{type(estimator).__name__} is neither a classifier nor a regressor; pass scoring."
    )
