"""Scores for fitted models, numerically matching scikit-learn's metrics of the same names.

Every function takes array-likes and returns a Python ``float`` (``confusion_matrix`` and
``roc_curve`` return arrays). Class labels may be any sortable scalars (ints, bools, strings);
probability columns always follow the sorted label order, as an estimator's ``classes_`` does. ``get_scorer`` turns
a metric name into a callable ``scorer(estimator, X, y, sample_weight=None) -> float`` where
greater is always better, as in scikit-learn's scorer registry.
"""

from engine.metrics._classification import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_score,
    recall_score,
)
from engine.metrics._probability import log_loss, roc_auc_score, roc_curve
from engine.metrics._regression import (
    mean_absolute_error,
    mean_poisson_deviance,
    mean_squared_error,
    r2_score,
    root_mean_squared_error,
)
from engine.metrics._scorers import Scorer, default_scorer, get_scorer, get_scorer_names

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
    "roc_curve",
    "root_mean_squared_error",
]
