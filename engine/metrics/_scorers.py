"""Scorers: a metric name made into ``scorer(estimator, X, y, sample_weight=None) -> float``,
signed so that greater is always better, as in scikit-learn's scorer registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, Protocol

from engine.metrics._classification import accuracy_score, f1_score
from engine.metrics._probability import log_loss, roc_auc_score
from engine.metrics._regression import (
    mean_absolute_error,
    mean_squared_error,
    r2_score,
    root_mean_squared_error,
)


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
