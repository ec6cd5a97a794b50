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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, Interval, MappingValue, NoneValue, Options
from engine._targets import class_weight_per_row, encode_labels
from engine._validation import CompleteInputMixin, check_sample_weight, check_target
from engine.base import BaseEstimator, ClassifierMixin
from engine.callbacks import TRAIN_LOSS, Callback, ProgressEvent, notify
from engine.explain._background import training_mean

__all__ = ["ConvergenceWarning", "LogisticRegression"]

# Newton builds and factors the Hessian, O(n_samples · n_params² + n_params³) per step; above
# these sizes L-BFGS's many cheap steps win (n_params = (n_features + 1) · coefficient rows).
NEWTON_MAX_PARAMETERS = 1000
NEWTON_MAX_WORK = 5e9
_ARMIJO = 1e-4
_MAX_HALVINGS = 60
_LBFGS_MEMORY = 10
_CHUNK_BYTES = 32 * 2**20  # bound on the temporary of one chunk of the multinomial Hessian

Evaluate = Callable[[NDArray[np.float64], bool], tuple[float, NDArray[np.float64], Any]]


class ConvergenceWarning(UserWarning):
    """The solver stopped at ``max_iter`` before reaching ``tol`` (named as scikit-learn's)."""


@dataclass(frozen=True)
class _Problem:
    """The data of one fit: design with a ones column when fitting an intercept."""

    design: NDArray[np.float64]  # (n_samples, n_params_per_row)
    target: NDArray[np.int64]  # (n_samples,) encoded classes
    weights: NDArray[np.float64]  # (n_samples,)
    penalty: NDArray[np.float64]  # (n_params_per_row,): 1/C, 0 for the intercept column
    n_rows: int  # coefficient rows: 1 (binary) or n_classes


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _softmax(Z: NDArray[np.float64]) -> NDArray[np.float64]:
    shifted = Z - Z.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=1, keepdims=True)


def _binary(problem: _Problem) -> Evaluate:
    A, s, r = problem.design, problem.weights, problem.penalty
    y = problem.target.astype(np.float64)

    def evaluate(theta: NDArray[np.float64], hessian: bool) -> tuple[float, Any, Any]:
        z = A @ theta
        loss = float(s @ (np.logaddexp(0.0, z) - y * z)) + 0.5 * float(r @ theta**2)
        p = _sigmoid(z)
        gradient = A.T @ (s * (p - y)) + r * theta
        if not hessian:
            return loss, gradient, None
        H = (A * (s * p * (1.0 - p))[:, None]).T @ A
        H[np.diag_indices_from(H)] += r
        return loss, gradient, H

    return evaluate


def _multinomial(problem: _Problem) -> Evaluate:
    A, s, r, K = problem.design, problem.weights, problem.penalty, problem.n_rows
    q = A.shape[1]
    Y = np.zeros((A.shape[0], K))
    Y[np.arange(A.shape[0]), problem.target] = 1.0

    def evaluate(theta: NDArray[np.float64], hessian: bool) -> tuple[float, Any, Any]:
        W = theta.reshape(K, q)
        Z = A @ W.T
        top = Z.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(Z - top).sum(axis=1))
        loss = float(s @ (log_norm - (Z * Y).sum(axis=1))) + 0.5 * float((r * W**2).sum())
        P = np.exp(Z - log_norm[:, None])
        gradient = ((P - Y) * s[:, None]).T @ A + r * W
        if not hessian:
            return loss, gradient.ravel(), None
        # Σᵢ sᵢ (diag(pᵢ) − pᵢpᵢᵀ) ⊗ aᵢaᵢᵀ: K diagonal blocks less one low-rank product,
        # accumulated over row chunks so the (rows, K·q) factor stays small.
        H = np.zeros((K * q, K * q))
        chunk = max(1, _CHUNK_BYTES // (8 * K * q))
        for start in range(0, A.shape[0], chunk):
            rows = slice(start, start + chunk)
            factor = np.sqrt(s[rows])[:, None, None] * P[rows, :, None] * A[rows, None, :]
            flat = factor.reshape(-1, K * q)
            H -= flat.T @ flat
        for k in range(K):
            H[k * q : (k + 1) * q, k * q : (k + 1) * q] += (A * (s * P[:, k])[:, None]).T @ A
        H[np.diag_indices_from(H)] += np.tile(r, K)
        return loss, gradient.ravel(), H

    return evaluate


def _line_search(
    evaluate: Evaluate,
    theta: NDArray[np.float64],
    loss: float,
    gradient: NDArray[np.float64],
    direction: NDArray[np.float64],
    step: float = 1.0,
) -> tuple[NDArray[np.float64], float] | None:
    """Backtrack until the Armijo condition holds; None when no step decreases ``F``.

    Near the optimum the decrease a step promises falls below the rounding of ``F`` itself;
    there a step is also taken when ``F`` is unchanged to rounding and the gradient shrinks.
    """
    slope = float(gradient @ direction)
    rounding = 64 * np.finfo(np.float64).eps * max(abs(loss), 1.0)
    largest = np.abs(gradient).max()
    for _ in range(_MAX_HALVINGS):
        candidate = theta + step * direction
        new_loss, new_gradient, _ = evaluate(candidate, False)
        if new_loss <= loss + _ARMIJO * step * slope:
            return candidate, new_loss
        if new_loss - loss <= rounding and np.abs(new_gradient).max() < largest:
            return candidate, new_loss
        step *= 0.5
    return None


def _newton_direction(H: NDArray[np.float64], gradient: NDArray[np.float64]) -> Any:
    try:
        return np.linalg.solve(H, -gradient)
    except np.linalg.LinAlgError:  # singular (e.g. huge C with collinear features)
        return np.linalg.lstsq(H, -gradient, rcond=None)[0]


def _minimise(
    evaluate: Evaluate,
    theta: NDArray[np.float64],
    *,
    newton: bool,
    null_directions: NDArray[np.float64],
    tol: float,
    max_iter: int,
    report: Callable[[int, float], None],
) -> tuple[NDArray[np.float64], int, bool]:
    """Minimise ``F`` from ``theta``; returns (theta, iterations, converged).

    ``null_directions`` marks parameters (the multinomial intercepts) along whose sum ``F``
    is flat; a tiny ridge there keeps the Newton system non-singular without moving along it.
    """
    history: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = []
    loss, gradient, H = evaluate(theta, newton)
    for iteration in range(max_iter):
        small = bool(np.abs(gradient).max() <= tol)
        if small and not newton:
            return theta, iteration, True
        if newton:
            H[np.diag_indices_from(H)] += null_directions * 1e-10 * (1.0 + np.abs(H).max())
            direction = _newton_direction(H, gradient)
            step = 1.0
        else:
            direction = _two_loop(gradient, history)
            step = 1.0 if history else 1.0 / max(1.0, float(np.abs(gradient).max()))
        if float(gradient @ direction) >= 0:  # not a descent direction: fall back on -∇F
            direction, history = -gradient, []
            step = 1.0 / max(1.0, float(np.abs(gradient).max()))
        found = _line_search(evaluate, theta, loss, gradient, direction, step)
        if found is None:  # no decrease left at machine precision: as converged as it gets
            return theta, iteration, True
        new_theta, _ = found
        new_loss, new_gradient, H = evaluate(new_theta, newton)
        if not newton:
            change, gradient_change = new_theta - theta, new_gradient - gradient
            if float(change @ gradient_change) > 1e-12 * float(gradient_change @ gradient_change):
                history = [*history[-(_LBFGS_MEMORY - 1) :], (change, gradient_change)]
        theta, loss, gradient = new_theta, new_loss, new_gradient
        report(iteration + 1, loss)
        if small:  # Newton converges quadratically: one step past tol costs little, gains much
            return theta, iteration + 1, True
    return theta, max_iter, bool(np.abs(gradient).max() <= tol)


def _two_loop(
    gradient: NDArray[np.float64],
    history: list[tuple[NDArray[np.float64], NDArray[np.float64]]],
) -> NDArray[np.float64]:
    """L-BFGS: −H⁻¹∇F from the last pairs of parameter and gradient changes."""
    q = gradient.copy()
    alphas = []
    for s, y in reversed(history):
        alpha = float(s @ q) / float(y @ s)
        alphas.append(alpha)
        q -= alpha * y
    if history:
        s, y = history[-1]
        q *= float(s @ y) / float(y @ y)
    for (s, y), alpha in zip(history, reversed(alphas), strict=True):
        beta = float(y @ q) / float(y @ s)
        q += (alpha - beta) * s
    return -q


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
