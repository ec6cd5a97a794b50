"""L2-penalised logistic regression, binary and multinomial (softmax).

The objective is scikit-learn's exactly, so the two agree to solver tolerance::

    F(W, b) = Σᵢ sᵢ · ℓ(yᵢ, xᵢ Wᵀ + b) + ½ ‖W‖² / C

with ``sᵢ`` the sample weight times the class weight, ``ℓ`` the log-loss and the intercept
unpenalised. Binary problems have one coefficient vector, multinomial ones one per class (the
penalty makes the over-parameterised softmax unique up to the intercepts, which are centred
to sum to zero). Modest problems are solved by damped Newton steps on the full Hessian
(quadratic convergence); large ones by L-BFGS. Both use a backtracking (Armijo) line search
on ``F`` and stop when ``max |∇F| / Σ sᵢ ≤ tol``; Newton then takes one last step, which
makes its solution accurate far beyond ``tol`` for one more iteration.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, Interval, MappingValue, NoneValue, Options
from engine._targets import class_weight_per_row, encode_labels
from engine._validation import CompleteInputMixin, check_sample_weight, check_target
from engine.base import BaseEstimator, ClassifierMixin
from engine.callbacks import TRAIN_LOSS, Callback, ProgressEvent, notify
from engine.explain._background import training_mean
from engine.linear._logistic_solver import (
    _binary,
    _minimise,
    _multinomial,
    _Problem,
    _sigmoid,
    _softmax,
)

__all__ = ["ConvergenceWarning", "LogisticRegression"]

# Newton builds and factors the Hessian, O(n_samples · n_params² + n_params³) per step; above
# these sizes L-BFGS's many cheap steps win (n_params = (n_features + 1) · coefficient rows).
NEWTON_MAX_PARAMETERS = 1000
NEWTON_MAX_WORK = 5e9


class ConvergenceWarning(UserWarning):
    """The solver stopped at ``max_iter`` before reaching ``tol`` (named as scikit-learn's)."""


class LogisticRegression(CompleteInputMixin, ClassifierMixin, BaseEstimator):
    """Logistic regression with an L2 penalty, binary or multinomial (softmax).

    Parameters
    ----------
    C : float
        Inverse penalty strength: the penalty is ``½‖W‖²/C`` on the coefficients against the
        sum (not the mean) of weighted log-losses, as in scikit-learn.
    fit_intercept : bool
        Fit unpenalised intercepts.
    max_iter : int
        Newton (or L-BFGS) iterations at most; a :class:`ConvergenceWarning` says when
        they ran out.
    tol : float
        Stop when the largest gradient entry of the objective divided by the total weight
        is at most ``tol``.
    class_weight : "balanced", mapping or None
        Multiplies the sample weights by class.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) for two classes, else (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : ndarray of shape (1,), int
        Solver iterations taken.

    Notes
    -----
    Inputs must be complete: NaN is refused (impute first, or use a tree-based method). No
    internal standardisation; scale features for fast, well-conditioned fits. Data of a
    single class (a bootstrap sample may be one) gives a constant model predicting it.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "C": [Interval("real", 0.0, None, closed="neither")],
        "fit_intercept": [Boolean()],
        "max_iter": [Interval("int", 0, None)],
        "tol": [Interval("real", 0.0, None)],
        "class_weight": [Options(("balanced",)), MappingValue(), NoneValue()],
    }

    classes_: NDArray[Any]
    coef_: NDArray[np.float64]
    intercept_: NDArray[np.float64]
    n_iter_: NDArray[np.int64]
    n_features_in_: int

    def __init__(
        self,
        C: float = 1.0,
        *,
        fit_intercept: bool = True,
        max_iter: int = 100,
        tol: float = 1e-6,
        class_weight: Any = None,
    ) -> None:
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.class_weight = class_weight

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> LogisticRegression:
        """Fit on ``X`` (n_samples, n_features) and labels ``y``; weights scale each loss term."""
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        labels = check_target(y, X.shape[0], numeric=False)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes, target = encode_labels(labels)
        if classes.size == 1:
            # A bootstrap or boosting sample may hold one class; the model then predicts it.
            notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
            self._store_constant(classes, X.shape[1])
            self.X_mean_ = training_mean(X, weights)  # the reference of exact explanations
            return self
        weights = weights * class_weight_per_row(self.class_weight, target, classes)
        problem = self._problem(X, target, weights, classes.size)
        theta, n_iter = self._solve(problem, callbacks)
        W = theta.reshape(problem.n_rows, -1)
        n_features = X.shape[1]
        intercept = W[:, n_features].copy() if self.fit_intercept else np.zeros(problem.n_rows)
        if problem.n_rows > 1:
            intercept -= intercept.mean()  # F is flat along their sum; pick the centred one
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(W[:, :n_features])
        self.intercept_ = intercept
        self.n_iter_ = np.array([n_iter], dtype=np.int64)
        self.n_features_in_ = n_features
        self.X_mean_ = training_mean(X, weights)  # the reference of exact explanations
        return self

    def _store_constant(self, classes: NDArray[Any], n_features: int) -> None:
        self.classes_ = classes
        self.coef_ = np.zeros((1, n_features))
        self.intercept_ = np.zeros(1)
        self.n_iter_ = np.zeros(1, dtype=np.int64)
        self.n_features_in_ = n_features

    def _problem(
        self,
        X: NDArray[np.float64],
        target: NDArray[np.int64],
        weights: NDArray[np.float64],
        n_classes: int,
    ) -> _Problem:
        design = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        penalty = np.full(design.shape[1], 1.0 / self.C)
        if self.fit_intercept:
            penalty[-1] = 0.0
        n_rows = 1 if n_classes == 2 else n_classes
        return _Problem(design, target, weights, penalty, n_rows)

    def _solve(
        self, problem: _Problem, callbacks: list[Callback] | None
    ) -> tuple[NDArray[np.float64], int]:
        n_params = problem.design.shape[1] * problem.n_rows
        evaluate = _binary(problem) if problem.n_rows == 1 else _multinomial(problem)
        null = np.zeros((problem.n_rows, problem.design.shape[1]))
        if self.fit_intercept and problem.n_rows > 1:
            null[:, -1] = 1.0
        total_weight = float(problem.weights.sum())
        name = type(self).__name__

        def report(done: int, loss: float) -> None:
            event = ProgressEvent(name, done, self.max_iter, {TRAIN_LOSS: loss / total_weight})
            notify(callbacks, event)

        theta, n_iter, converged = _minimise(
            evaluate,
            np.zeros(n_params),
            newton=n_params <= NEWTON_MAX_PARAMETERS
            and problem.design.shape[0] * n_params**2 <= NEWTON_MAX_WORK,
            null_directions=null.ravel(),
            tol=self.tol * total_weight,
            max_iter=self.max_iter,
            report=report,
        )
        if not converged:
            warnings.warn(
                f"LogisticRegression did not converge in max_iter={self.max_iter} iterations; "
                "raise max_iter or scale the features.",
                ConvergenceWarning,
                stacklevel=3,
            )
        return theta, n_iter

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """Log-odds of the second class (n_samples,) for two classes, else the class scores
        (n_samples, n_classes)."""
        X = self._check_complete_X(X, fitted=True)
        scores = X @ self.coef_.T + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities, shape (n_samples, n_classes), rows summing to one."""
        scores = self.decision_function(X)
        if self.classes_.size == 1:
            return np.ones((scores.shape[0], 1))
        if scores.ndim == 1:
            positive = _sigmoid(scores)
            return np.column_stack([1.0 - positive, positive])
        return _softmax(scores)

    def predict_log_proba(self, X: Any) -> NDArray[np.float64]:
        scores = self.decision_function(X)
        if self.classes_.size == 1:
            return np.zeros((scores.shape[0], 1))
        if scores.ndim == 1:
            return np.column_stack([-np.logaddexp(0.0, scores), -np.logaddexp(0.0, -scores)])
        shifted = scores - scores.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    def predict(self, X: Any) -> NDArray[Any]:
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[scores.argmax(axis=1)]
