"""The classic perceptron (Rosenblatt), one-vs-rest for more than two classes.

Each epoch visits the rows (shuffled when ``shuffle``) and, for every class whose sign the
row gets wrong or leaves on the boundary (``tₖ·fₖ(x) ≤ 0``, ``tₖ = ±1``), adds
``eta0 · sᵢ · tₖ · xᵢ`` to that class's weights. All one-vs-rest problems share one pass.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine._params import Boolean, Constraint, Interval, NoneValue, RandomStateValue
from engine._targets import encode_labels
from engine._validation import (
    CompleteInputMixin,
    check_sample_weight,
    check_target,
    resolve_seed_sequence,
)
from engine.base import BaseEstimator, ClassifierMixin
from engine.callbacks import TRAIN_LOSS, Callback, ProgressEvent, notify
from engine.explain._background import training_mean

__all__ = ["Perceptron"]

_N_ITER_NO_CHANGE = 5  # epochs without an improvement of ``tol`` before stopping (as sklearn)


class Perceptron(CompleteInputMixin, ClassifierMixin, BaseEstimator):
    """Perceptron classifier; sample weights scale the updates.

    Parameters
    ----------
    max_iter : int
        Epochs (passes over the data) at most.
    tol : float or None
        Stop when the epoch's mean perceptron loss ``mean(max(0, −tₖ·fₖ(x)))`` (summed over
        classes) has not fallen by ``tol`` below the best for 5 epochs; None disables this.
        An epoch without a single mistake always stops training.
    eta0 : float
        Update step size.
    shuffle : bool
        Visit rows in a fresh random order every epoch.
    random_state : int, Generator or None
    fit_intercept : bool

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) for two classes, else (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int
        Epochs run.
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "max_iter": [Interval("int", 1, None)],
        "tol": [Interval("real", 0.0, None), NoneValue()],
        "eta0": [Interval("real", 0.0, None, closed="neither")],
        "shuffle": [Boolean()],
        "random_state": [RandomStateValue()],
        "fit_intercept": [Boolean()],
    }

    classes_: NDArray[Any]
    coef_: NDArray[np.float64]
    intercept_: NDArray[np.float64]
    n_iter_: int
    n_features_in_: int

    def __init__(
        self,
        *,
        max_iter: int = 1000,
        tol: float | None = 1e-3,
        eta0: float = 1.0,
        shuffle: bool = True,
        random_state: Any = None,
        fit_intercept: bool = True,
    ) -> None:
        self.max_iter = max_iter
        self.tol = tol
        self.eta0 = eta0
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        callbacks: list[Callback] | None = None,
    ) -> Perceptron:
        """Fit on ``X`` (n_samples, n_features); one progress event per epoch."""
        self._validate_params()
        self._forget_fit()
        X = self._check_complete_X(X)
        labels = check_target(y, X.shape[0], numeric=False)
        weights = check_sample_weight(sample_weight, X.shape[0])
        classes, encoded = encode_labels(labels)
        if classes.size == 1:  # e.g. a bootstrap sample: a constant model predicting it
            notify(callbacks, ProgressEvent(type(self).__name__, 1, 1))
            self.classes_, self.n_iter_, self.n_features_in_ = classes, 0, X.shape[1]
            self.coef_, self.intercept_ = np.zeros((1, X.shape[1])), np.zeros(1)
            self.X_mean_ = training_mean(X, weights)  # the reference of exact explanations
            return self
        n_outputs = 1 if classes.size == 2 else classes.size
        signs = -np.ones((X.shape[0], n_outputs))
        if n_outputs == 1:
            signs[encoded == 1, 0] = 1.0
        else:
            signs[np.arange(X.shape[0]), encoded] = 1.0
        design = np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X
        W, n_iter = self._train(design, signs, weights, callbacks)
        n_features = X.shape[1]
        self.classes_ = classes
        self.coef_ = np.ascontiguousarray(W[:, :n_features])
        self.intercept_ = W[:, n_features].copy() if self.fit_intercept else np.zeros(n_outputs)
        self.n_iter_ = n_iter
        self.n_features_in_ = n_features
        self.X_mean_ = training_mean(X, weights)  # the reference of exact explanations
        return self

    def _train(
        self,
        design: NDArray[np.float64],
        signs: NDArray[np.float64],
        weights: NDArray[np.float64],
        callbacks: list[Callback] | None,
    ) -> tuple[NDArray[np.float64], int]:
        rng = np.random.default_rng(resolve_seed_sequence(self.random_state))
        W = np.zeros((signs.shape[1], design.shape[1]))
        rows = np.flatnonzero(weights > 0)  # a zero weight never updates: skip the row
        steps = self.eta0 * weights
        best_loss, stalled = np.inf, 0
        name = type(self).__name__
        for epoch in range(1, self.max_iter + 1):
            order = rng.permutation(rows) if self.shuffle else rows
            loss, mistakes = 0.0, 0
            for i in order:
                x, t = design[i], signs[i]
                margins = t * (W @ x)
                wrong = margins <= 0.0
                if wrong.any():
                    W[wrong] += np.outer(steps[i] * t[wrong], x)
                    mistakes += 1
                    loss -= float(margins[wrong].sum())
            loss /= max(rows.size, 1)
            notify(callbacks, ProgressEvent(name, epoch, self.max_iter, {TRAIN_LOSS: loss}))
            if mistakes == 0:
                return W, epoch
            if self.tol is not None:
                stalled = stalled + 1 if loss > best_loss - self.tol else 0
                best_loss = min(best_loss, loss)
                if stalled >= _N_ITER_NO_CHANGE:
                    return W, epoch
        return W, self.max_iter

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """Signed score of the second class (n_samples,) for two classes, else one score per
        class (n_samples, n_classes)."""
        X = self._check_complete_X(X, fitted=True)
        scores = X @ self.coef_.T + self.intercept_
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X: Any) -> NDArray[Any]:
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[scores.argmax(axis=1)]
