"""Exact explanations of models that are sums of per-feature terms: linear models, naive Bayes.

For an additive model ``f(x) = b + Σ_j g_j(x_j)`` the interventional Shapley value of feature
``j`` is ``g_j(x_j) − E[g_j(X_j)]`` whatever the background (Lundberg & Lee 2017, Corollary 1
for the linear case): every coalition's value differs from its neighbour's by feature ``j``'s
term alone. The expectation is taken over the training rows, so the bias is the mean output
over the training set.

- Linear and logistic regression, the perceptron: ``g_j(x_j) = w_j x_j`` in the space of the
  decision function (log-odds for logistic regression), so ``φ_j = w_j (x_j − mean_j)``.
- Gaussian naive Bayes: the class log-likelihoods are sums of one Gaussian log-density per
  feature; their differences (the log-odds for two classes, the centred log-likelihoods
  beyond, whose softmax is ``predict_proba``) are additive too. The training mean of each
  quadratic term follows from the per-class means and variances the model stores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.explain._explainer import (
    DECISION,
    LOG_ODDS,
    PREDICTION,
    Exact,
    Explainer,
    decision_output,
    describe,
    prediction_output,
)
from engine.linear import LinearRegression, LogisticRegression, Perceptron, Ridge
from engine.naive_bayes import GaussianNB

__all__ = ["affine_exact", "linear_map"]

LINEAR_CLASSIFIERS = (LogisticRegression, Perceptron)
LINEAR_REGRESSORS = (LinearRegression, Ridge)


def linear_map(model: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """``(W, b)`` with the model's explained output ``X @ W + b``, or None if it is not linear.

    Returns
    -------
    W : ndarray of float64, shape (n_features, m)
    b : ndarray of float64, shape (m,)
    """
    if isinstance(model, LINEAR_CLASSIFIERS):
        return np.asarray(model.coef_, np.float64).T, np.asarray(model.intercept_, np.float64)
    if isinstance(model, LINEAR_REGRESSORS):
        coef = np.asarray(model.coef_, dtype=np.float64).reshape(-1, 1)
        return coef, np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64))
    return None


def affine_exact(
    W: NDArray[np.float64], b: NDArray[np.float64], mean: NDArray[np.float64]
) -> Exact:
    """Exact contributions ``W_jk (x_j − mean_j)`` and bias ``b + mean @ W``.

    Parameters
    ----------
    W : ndarray of float64, shape (n_features, m)
    b : ndarray of float64, shape (m,)
    mean : ndarray of float64, shape (n_features,)
        The reference row (the training mean).
    """

    def exact(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        centred = np.asarray(X, dtype=np.float64) - mean
        return centred[:, :, None] * W[None, :, :], b + mean @ W

    return exact


def _linear(model: Any) -> Explainer:
    space, output = (
        (PREDICTION, prediction_output(model))
        if isinstance(model, LINEAR_REGRESSORS)
        else (DECISION, decision_output(model))
    )
    mapped = linear_map(model)
    mean = getattr(model, "X_mean_", None)  # None: saved before models kept their mean
    exact = None if mapped is None or mean is None else affine_exact(*mapped, mean)
    return Explainer(space, output, exact)


for _cls in (*LINEAR_CLASSIFIERS, *LINEAR_REGRESSORS):
    describe.register(_cls, _linear)


@describe.register
def _gaussian_nb(model: GaussianNB) -> Explainer:
    n_classes = len(model.classes_)
    priors = np.asarray(model.class_prior_, dtype=np.float64)
    if n_classes < 2 or not np.all(priors > 0):
        return describe.dispatch(object)(model)
    # Output = class log-likelihoods @ contrast: their difference for two classes, the
    # centred ones beyond (softmax of which is predict_proba).
    contrast = np.array([[-1.0], [1.0]]) if n_classes == 2 else np.eye(n_classes) - 1.0 / n_classes
    theta, var = model.theta_, model.var_  # (K, p)
    log_norm = -0.5 * np.log(2.0 * np.pi * var)
    share = model.class_count_ / model.class_count_.sum()
    within = var - model.epsilon_  # the classes' own training variances
    # E over the training rows of (X_j − θ_kj)², from the per-class means and variances.
    spread = np.einsum("c,cj->j", share, within)[None, :] + np.einsum(
        "c,ckj->kj", share, (theta[:, None, :] - theta[None, :, :]) ** 2
    )
    expected = log_norm - 0.5 * spread / var  # (K, p)
    log_priors = np.log(priors)

    def output(X: NDArray[np.float64]) -> NDArray[np.float64]:
        # log P(k | x) differs from the log-likelihood by a per-row constant the contrast cancels.
        return np.asarray(model.predict_log_proba(X), dtype=np.float64) @ contrast

    def exact(X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        X = model._check_complete_X(X, fitted=True)
        terms = log_norm[None] - 0.5 * (X[:, None, :] - theta[None]) ** 2 / var[None]  # (n, K, p)
        phi = (terms - expected[None]).transpose(0, 2, 1) @ contrast
        return phi, (log_priors + expected.sum(axis=1)) @ contrast

    return Explainer(LOG_ODDS, output, exact)
