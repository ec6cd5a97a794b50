"""The objective of logistic regression and the minimiser that fits it.

:func:`_binary` and :func:`_multinomial` evaluate the penalised, weighted log-loss ``F`` of
:class:`engine.linear._logistic.LogisticRegression`, its gradient and (for Newton) its Hessian;
:func:`_minimise` takes damped Newton steps on the full Hessian or L-BFGS steps, each with a
backtracking (Armijo) line search on ``F`` (Nocedal and Wright 2006, Algorithms 3.1 and 7.4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

_ARMIJO = 1e-4
_MAX_HALVINGS = 60
_LBFGS_MEMORY = 10
_CHUNK_BYTES = 32 * 2**20  # bound on the temporary of one chunk of the multinomial Hessian

Evaluate = Callable[[NDArray[np.float64], bool], tuple[float, NDArray[np.float64], Any]]


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
