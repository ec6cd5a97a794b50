"""Gaussian naive Bayes with weighted class means, variances and priors."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, Interval, NoneValue
from engine._targets import encode_labels
from engine._validation import CompleteInputMixin, check_sample_weight, check_target
from engine.base import BaseEstimator, ClassifierMixin
from engine.callbacks import Callback, ProgressEvent, notify

__all__ = ["GaussianNB"]


class ProbabilityVector(Constraint):
    """A sequence of non-negative numbers (class priors; their sum is checked in ``fit``)."""

    def is_satisfied_by(self, value: Any) -> bool:
        if isinstance(value, str | bytes | dict):
            return False
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        return array.ndim == 1 and bool(np.isfinite(array).all() and (array >= 0).all())

    def describe(self) -> str:
        return "a sequence of non-negative class probabilities"

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "number", "minimum": 0}}


class GaussianNB(CompleteInputMixin, ClassifierMixin, BaseEstimator):
    """Gaussian naive Bayes: per class, independent normal features.

    Parameters
    ----------
    var_smoothing : float
        ``var_smoothing`` × the largest feature variance is added to every variance, for
        stability. That variance is weighted by ``sample_weight``, so an integer weight means
        exactly a repeated row (scikit-learn takes the unweighted variance; the two agree
        for unit weights).
    priors : sequence of shape (n_classes,) or None
        Class priors in the order of ``classes_``; None estimates them from the (weighted)
        class totals.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of shape (n_classes,), the weight of each class
    class_prior_ : ndarray of shape (n_classes,)
    theta_ : ndarray of shape (n_classes, n_features), weighted class means
    var_ : ndarray of shape (n_classes, n_features), weighted class variances + epsilon_
    epsilon_ : float
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "var_smoothing": [Interval("real", 0.0, None)],
        "priors": [ProbabilityVector(), NoneValue()],
    }

    classes_: NDArray[Any]
    class_count_: NDArray[np.float64]
    class_prior_: NDArray[np.float64]
    theta_: NDArray[np.float64]
    var_: NDArray[np.float64]
    epsilon_: float
    n_features_in_: int

    def __init__(self, *, priors: Any = None, var_smoothing: float = 1e-9) -> None:
        self.priors = priors
        self.var_smoothing = var_smoothing

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> GaussianNB:
        """Fit on ``X`` (n_samples, n_features) and labels ``y``."""
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        labels = check_target(y, X.shape[0], numeric=False)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes, encoded = encode_labels(labels)
        n_classes = classes.size
        members = np.zeros((n_classes, X.shape[0]))
        members[encoded, np.arange(X.shape[0])] = weights
        counts = members.sum(axis=1)
        safe = np.maximum(counts, np.finfo(np.float64).tiny)[:, None]
        theta = members @ X / safe
        # From deviations, one class at a time: E[x²] − E[x]² would cancel badly.
        var = np.stack([members[k] @ (X - theta[k]) ** 2 for k in range(n_classes)]) / safe
        overall = weights @ X / weights.sum()
        epsilon = self.var_smoothing * float((weights @ (X - overall) ** 2 / weights.sum()).max())
        notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
        self.classes_ = classes
        self.class_count_ = counts
        self.class_prior_ = self._priors(counts)
        self.theta_ = theta
        self.var_ = var + epsilon
        self.epsilon_ = epsilon
        self.n_features_in_ = X.shape[1]
        return self

    def _priors(self, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.priors is None:
            return counts / counts.sum()
        priors = np.asarray(self.priors, dtype=np.float64)
        if priors.shape != counts.shape:
            raise ValueError(f"priors has {priors.size} entries; y has {counts.size} classes.")
        if not np.isclose(priors.sum(), 1.0):
            raise ValueError(f"The sum of the priors should be 1; got {priors.sum()!r}.")
        return priors

    def _joint_log_likelihood(self, X: Any) -> NDArray[np.float64]:
        X = self._check_complete_X(X, fitted=True)
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.class_prior_)
        normaliser = -0.5 * np.log(2.0 * np.pi * self.var_).sum(axis=1)
        # Class by class keeps memory at (n_samples, n_features), not × n_classes.
        squared = np.column_stack(
            [
                ((X - theta) ** 2 / var).sum(axis=1)
                for theta, var in zip(self.theta_, self.var_, strict=True)
            ]
        )
        return log_prior + normaliser - 0.5 * squared

    def predict_log_proba(self, X: Any) -> NDArray[np.float64]:
        """Log class probabilities, shape (n_samples, n_classes), by log-sum-exp."""
        joint = self._joint_log_likelihood(X)
        top = joint.max(axis=1, keepdims=True)
        return joint - (top + np.log(np.exp(joint - top).sum(axis=1, keepdims=True)))

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities, shape (n_samples, n_classes), rows summing to one."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X: Any) -> NDArray[Any]:
        winners = self._joint_log_likelihood(X).argmax(axis=1)
        return self.classes_[winners]
