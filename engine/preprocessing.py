"""Dense numeric input for learners that cannot take missing values or category codes.

Trees route NaN and split categories natively; a linear model, a distance or a Gaussian
density needs a complete numeric matrix. ``EncodedClassifier`` and ``EncodedRegressor`` wrap
such a learner so it accepts the same tables the trees do:

- numeric columns: NaN replaced by the column's training median, plus a 0/1 indicator column
  for every numeric column that had missing values in training (missingness is often
  informative, so it is learned rather than hidden), then standardised to mean 0, variance 1
  (distances and L2 penalties otherwise depend on the units);
- categorical columns (integer codes): one-hot encoded over the codes seen in training; a
  missing (NaN) or unseen code is all zeros, i.e. "none of the known categories".

The statistics are unweighted over the rows of positive weight: ``sample_weight`` still
reaches the wrapped learner, where it changes the fit.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, EstimatorValue, NoneValue, SequenceValue
from engine._validation import check_sample_weight, check_X
from engine.base import BaseEstimator, ClassifierMixin, RegressorMixin, check_is_fitted, clone
from engine.callbacks import Callback
from engine.explain._background import background_sample
from engine.tree._binning import categorical_mask

__all__ = ["DenseEncoding", "EncodedClassifier", "EncodedRegressor"]

FloatArray = NDArray[np.float64]


class DenseEncoding:
    """The fitted column transformation: medians, indicators, scales and one-hot categories."""

    numeric: NDArray[np.int64]
    medians: FloatArray
    indicators: NDArray[np.int64]  # numeric columns (indices into X) that get a missing flag
    means: FloatArray
    scales: FloatArray
    categorical: NDArray[np.int64]
    categories: list[FloatArray]
    n_features_in: int

    @classmethod
    def fit(
        cls, X: FloatArray, categorical: NDArray[np.bool_], *, standardize: bool
    ) -> DenseEncoding:
        encoding = cls()
        encoding.n_features_in = X.shape[1]
        encoding.numeric = np.flatnonzero(~categorical).astype(np.int64)
        encoding.categorical = np.flatnonzero(categorical).astype(np.int64)
        numeric = X[:, encoding.numeric]
        missing = np.isnan(numeric)
        with np.errstate(all="ignore"):
            medians = np.array(
                [
                    np.median(col[~gap]) if (~gap).any() else 0.0
                    for col, gap in zip(numeric.T, missing.T, strict=True)
                ]
            )
        encoding.medians = medians.astype(np.float64)
        encoding.indicators = encoding.numeric[missing.any(axis=0)]
        encoding.categories = [
            np.unique(column[~np.isnan(column)]) for column in X[:, encoding.categorical].T
        ]
        # The scales are those of the encoded training matrix, so transform() of the
        # training rows has mean 0 and variance 1 in every non-constant column.
        encoding.means = np.zeros(encoding.width)
        encoding.scales = np.ones(encoding.width)
        if standardize:
            dense = encoding.unscaled(X)
            encoding.means = dense.mean(axis=0)
            spread = dense.std(axis=0)
            encoding.scales = np.where(spread > 0, spread, 1.0)
        return encoding

    @property
    def width(self) -> int:
        """Columns of the encoded matrix."""
        return self.numeric.size + self.indicators.size + sum(c.size for c in self.categories)

    def transform(self, X: FloatArray) -> FloatArray:
        """The encoded, standardised matrix, shape (n_samples, width)."""
        return (self.unscaled(X) - self.means) / self.scales

    def unscaled(self, X: FloatArray) -> FloatArray:
        numeric = X[:, self.numeric]
        gaps = np.isnan(numeric)
        filled = np.where(gaps, self.medians, numeric)
        blocks = [filled, np.isnan(X[:, self.indicators]).astype(np.float64)]
        for column, known in zip(X[:, self.categorical].T, self.categories, strict=True):
            # NaN equals nothing, so missing and unseen codes both give an all-zero row.
            blocks.append((column[:, None] == known[None, :]).astype(np.float64))
        return np.hstack(blocks)


class _Delegated:
    """A method of the wrapped learner, applied to the encoded input; absent if it lacks it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, wrapper: Any, owner: type | None = None) -> Any:
        if wrapper is None:
            return self
        learner = getattr(wrapper, "estimator_", wrapper.estimator)
        if not hasattr(learner, self.name):
            raise AttributeError(f"{type(learner).__name__} has no {self.name}")

        def method(X: Any) -> NDArray[Any]:
            encoded = wrapper._encoded(X)  # checks that the wrapper is fitted
            return np.asarray(getattr(wrapper.estimator_, self.name)(encoded))

        return method


class _EncodedEstimator(BaseEstimator):
    estimator: Any
    categorical_features: Any
    standardize: bool

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "estimator": [EstimatorValue()],
        "categorical_features": [SequenceValue(), NoneValue()],
        "standardize": [Boolean()],
    }

    def __init__(
        self, estimator: Any, *, categorical_features: Any = None, standardize: bool = True
    ) -> None:
        self.estimator = estimator
        self.categorical_features = categorical_features
        self.standardize = standardize

    def _fit(self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None) -> None:
        self._validate_params()
        X = check_X(X, estimator=type(self).__name__)
        weights = check_sample_weight(sample_weight, X.shape[0])
        mask = categorical_mask(self.categorical_features, X.shape[1])
        self.encoding_ = DenseEncoding.fit(X[weights > 0], mask, standardize=self.standardize)
        self.n_features_in_ = X.shape[1]
        learner = clone(self.estimator)
        learner.fit(
            self.encoding_.transform(X), y, sample_weight=sample_weight, callbacks=callbacks
        )
        self.estimator_ = learner
        self.background_ = background_sample(X, weights)  # for sampled explanations

    def _encoded(self, X: Any) -> FloatArray:
        check_is_fitted(self, "estimator_")
        X = check_X(X, n_features=self.n_features_in_, estimator=type(self).__name__)
        return self.encoding_.transform(X)

    def predict(self, X: Any) -> NDArray[Any]:
        return np.asarray(self.estimator_.predict(self._encoded(X)))


class EncodedClassifier(ClassifierMixin, _EncodedEstimator):
    """A classifier fitted on the dense encoding of the input (see the module docstring).

    Parameters
    ----------
    estimator : engine classifier
        Fitted on the encoded matrix; it need not accept NaN or categorical codes.
    categorical_features : indices, boolean mask or None
        Columns holding integer category codes, one-hot encoded.
    standardize : bool
        Scale encoded columns to mean 0 and variance 1.
    """

    classes_: NDArray[Any]

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> EncodedClassifier:
        self._fit(X, y, sample_weight, callbacks)
        self.classes_ = self.estimator_.classes_
        return self

    # Only when the wrapped learner has them, so ``hasattr(model, "predict_proba")`` tells the
    # truth (a perceptron has no probabilities).
    predict_proba = _Delegated("predict_proba")
    decision_function = _Delegated("decision_function")


class EncodedRegressor(RegressorMixin, _EncodedEstimator):
    """A regressor fitted on the dense encoding of the input; parameters as ``EncodedClassifier``."""

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> EncodedRegressor:
        self._fit(X, y, sample_weight, callbacks)
        return self
