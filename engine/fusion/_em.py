"""EM for the mixture of experts (Jacobs, Jordan, Nowlan and Hinton 1991: a gate's weight
``g_k(x)`` says how expert member ``k`` is at ``x``, dividing the input space into regions),
fitted as Jordan and Jacobs (1994) fit it.

The model is a softmax *gate* over the inputs, linear in ``x`` (multinomial logistic),
weighting ``K`` experts:

    p(y | x) = Σ_k g_k(x) p_k(y | x),   g(x) = softmax(W x + b).

Regression experts are Gaussian around their prediction with a variance per expert,
``p_k(y | x) = N(y; f_k(x), σ_k²)``; classification experts give class probabilities. EM
alternates

* E-step: responsibilities ``h_ik = g_k(x_i) p_k(y_i | x_i) / Σ_j g_j(x_i) p_j(y_i | x_i)``;
* M-step: every expert refitted with ``sample_weight = w_i h_ik`` (and
  ``σ_k² = Σ_i w_i h_ik (y_i − f_k(x_i))² / Σ_i w_i h_ik``), and the gate refitted on the soft
  targets ``h_i``: maximising ``Σ_i w_i Σ_k h_ik log g_k(x_i)``, which is a weighted
  multinomial logistic regression on K copies of the rows (copy k labelled k, weighted
  ``w_i h_ik``), solved by the engine's :class:`~engine.linear.LogisticRegression`.

EM starts from random responsibilities, the outputs of a random linear gate on the
standardised inputs (random, but smooth in ``x`` and equal for equal rows), and stops after
``max_iter`` iterations or when the objective changes by less than ``tol``.

The objective is the log-likelihood per unit of weight less the L2 penalties the M-step
fits carry (the gate's, and that of engine ``LogisticRegression`` experts): MAP-EM, which
never decreases it when every M-step maximises its part exactly, as least squares and the
logistic regressions do (to solver tolerance). Other experts (trees, say) make it a
generalised EM without that guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Constraint, EstimatorValue, Interval, NoneValue, RandomStateValue
from engine._validation import CompleteInputMixin, check_sample_weight, resolve_seed_sequence
from engine.base import BaseEstimator
from engine.callbacks import LOG_LIKELIHOOD, Callback, ProgressEvent, notify
from engine.combine._members import accepts_sample_weight
from engine.explain._background import background_sample
from engine.fusion._gate import (
    fit_gate,
    gate_log_proba,
    initial_responsibilities,
    l2_penalty,
    logsumexp,
    standardise,
)
from engine.linear import LogisticRegression

__all__ = ["MOE_CONSTRAINTS", "BaseMixtureOfExperts"]

_MIN_RESPONSIBILITY = 1e-10  # keeps every expert and gate class some weight in the M-step

MOE_CONSTRAINTS: dict[str, list[Constraint]] = {
    "estimator": [EstimatorValue(), NoneValue()],
    "n_experts": [Interval("int", 1, None)],
    "max_iter": [Interval("int", 1, None)],
    "tol": [Interval("real", 0.0, None)],
    "gate_C": [Interval("real", 0.0, None, closed="neither")],
    "n_init": [Interval("int", 1, None)],
    "random_state": [RandomStateValue()],
}


@dataclass
class _EMRun:
    experts: list[Any]
    gate: LogisticRegression
    variances: NDArray[np.float64] | None
    history: list[float]
    converged: bool


class BaseMixtureOfExperts(CompleteInputMixin, BaseEstimator):
    """EM for a softmax-gated mixture of experts; subclasses define the experts' likelihood."""

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = MOE_CONSTRAINTS

    estimator: Any
    n_experts: int
    max_iter: int
    tol: float
    gate_C: float
    n_init: int
    random_state: Any

    experts_: list[Any]
    gate_: LogisticRegression
    log_likelihood_: float
    log_likelihood_history_: NDArray[np.float64]
    n_iter_: int
    converged_: bool
    n_features_in_: int

    def _default_expert(self) -> Any:
        raise NotImplementedError

    def _prepare_target(self, y: Any, n_samples: int) -> NDArray[Any]:
        raise NotImplementedError

    def _check_expert(self, prototype: Any) -> None:
        """Refuse an expert the likelihood cannot use (before any fitting)."""

    def _fit_experts(
        self,
        prototype: Any,
        X: NDArray[np.float64],
        target: NDArray[Any],
        weights: NDArray[np.float64],
        responsibilities: NDArray[np.float64],
    ) -> tuple[list[Any], NDArray[np.float64] | None]:
        raise NotImplementedError

    def _log_densities(
        self,
        experts: list[Any],
        variances: NDArray[np.float64] | None,
        X: NDArray[np.float64],
        target: NDArray[Any],
    ) -> NDArray[np.float64]:
        """``log p_k(y_i | x_i)``, shape (n_samples, K)."""
        raise NotImplementedError

    def _em_fit(self, X: Any, y: Any, sample_weight: Any, callbacks: list[Callback] | None) -> None:
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        target = self._prepare_target(y, X.shape[0])
        weights = check_sample_weight(sample_weight, X.shape[0])
        prototype = self._default_expert() if self.estimator is None else self.estimator
        if not accepts_sample_weight(prototype):
            raise TypeError(
                f"The expert {type(prototype).__name__} does not accept sample_weight, which "
                "EM needs to fit it on its responsibilities."
            )
        self._check_expert(prototype)
        standardised = standardise(X, weights)
        seeds = resolve_seed_sequence(self.random_state).spawn(self.n_init)
        best: _EMRun | None = None
        for run, seed in enumerate(seeds):
            rng = np.random.default_rng(seed)
            start = initial_responsibilities(standardised, self.n_experts, rng)
            result = self._run_em(prototype, X, target, weights, start, run, callbacks)
            if best is None or result.history[-1] > best.history[-1]:
                best = result
        assert best is not None
        self.experts_ = best.experts
        self.gate_ = best.gate
        if best.variances is not None:
            self.variances_ = best.variances
        self.log_likelihood_history_ = np.asarray(best.history)
        self.log_likelihood_ = best.history[-1]
        self.n_iter_ = len(best.history)
        self.converged_ = best.converged
        self.n_features_in_ = X.shape[1]
        self.background_ = background_sample(X, weights)  # for sampled explanations

    def _run_em(
        self,
        prototype: Any,
        X: NDArray[np.float64],
        target: NDArray[Any],
        weights: NDArray[np.float64],
        responsibilities: NDArray[np.float64],
        run: int,
        callbacks: list[Callback] | None,
    ) -> _EMRun:
        history: list[float] = []
        total_weight = float(weights.sum())
        name = type(self).__name__
        for iteration in range(self.max_iter):
            kept = np.maximum(responsibilities, _MIN_RESPONSIBILITY)
            experts, variances = self._fit_experts(prototype, X, target, weights, kept)
            gate = fit_gate(X, kept, weights, self.gate_C)
            joint = gate_log_proba(gate, X) + self._log_densities(experts, variances, X, target)
            per_row = logsumexp(joint)
            penalty = l2_penalty(gate) + sum(l2_penalty(expert) for expert in experts)
            history.append((float(weights @ per_row) - penalty) / total_weight)
            responsibilities = np.exp(joint - per_row[:, None])
            notify(
                callbacks,
                ProgressEvent(
                    name,
                    run * self.max_iter + iteration + 1,
                    self.n_init * self.max_iter,
                    {LOG_LIKELIHOOD: history[-1]},
                ),
            )
            if len(history) > 1 and abs(history[-1] - history[-2]) < self.tol:
                return _EMRun(experts, gate, variances, history, True)
        return _EMRun(experts, gate, variances, history, False)

    def predict_gate(self, X: Any) -> NDArray[np.float64]:
        """The gate's weights ``g_k(x)`` of the experts, shape (n_samples, n_experts)."""
        X = self._check_complete_X(X, fitted=True)
        return np.exp(gate_log_proba(self.gate_, X))
