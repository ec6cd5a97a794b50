"""Per-row explanations of every engine model: exact where its structure allows, else sampled.

``explain(model, X)`` returns each feature's additive contribution to each row's explained
output and the bias they start from (``contributions.sum(axis=1) + bias`` is the output).

- **Exact** where the model is a sum of per-feature terms in some output space: TreeSHAP for
  trees, forests, bagged trees and boosted trees (Lundberg, Erion & Lee 2018); ``coef · (x −
  training mean)`` for linear models and per-feature log-likelihood terms for Gaussian naive
  Bayes (Lundberg & Lee 2017, Corollary 1); Arc-x4's one-hot vote trees; soft voting, voting
  regression, bagging (soft voting, or regression) and stacking on a linear final estimator as
  the same linear combination of their members' exact explanations.
- **Sampled** for everything else (k-NN, hard voting, grading, the label-fusion combiners,
  mixtures of experts, RegionBoost, AdaBoost.R2, stacking on non-linear final estimators, and
  combiners with a member that is not exact in the space they combine):
  interventional Shapley values by antithetic permutation sampling (Štrumbelj & Kononenko
  2014; Mitchell et al. 2022) against the ≤ 100 training rows the model kept at fit, with the
  efficiency property enforced, so contributions plus bias still equal the output.

Each model family is explained in one space, the one its structure is additive in (see
:mod:`engine.explain._explainer`); ``Explanation.output`` names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.explain._background import BACKGROUND_SIZE, background_sample, training_mean

__all__ = [
    "BACKGROUND_SIZE",
    "DEFAULT_PERMUTATIONS",
    "Explanation",
    "background_sample",
    "explain",
    "explainable",
    "training_mean",
]

# Orders sampled per row (32 antithetic pairs, each order from its own background row): one
# row of a 30-feature stacking model in well under 100 ms (benchmarks/README.md), and a
# correlation of at least 0.955 with shap's exact values for every sampled family over 50
# draws each (tests/engine/explain/test_shap_reference.py's models, five data and ten sampling
# seeds; the mean 0.991). 100, one order per background row, would raise the worst to 0.968
# and the mean to 0.996 at 1.56 times the cost.
DEFAULT_PERMUTATIONS = 64


@dataclass(frozen=True)
class Explanation:
    """Per-row additive explanations of a model's output.

    Attributes
    ----------
    contributions : ndarray of float64
        ``(n_samples, n_features)`` for regression and two classes (the second class in
        ``classes_``), ``(n_samples, n_features, n_classes)`` beyond.
    bias : float or ndarray of float64 of shape (n_classes,)
        The expected output; ``contributions.sum(axis=1) + bias`` is the explained output.
    method : {"exact", "sampled"}
    output : {"probability", "decision", "log_odds", "prediction"}
        What is explained: ``predict_proba``, ``decision_function`` (log-odds, margins or
        vote scores), naive Bayes' log-odds, or a regressor's ``predict``.
    """

    contributions: NDArray[np.float64]
    bias: float | NDArray[np.float64]
    method: str
    output: str


def explain(
    model: Any,
    X: Any,
    *,
    n_permutations: int = DEFAULT_PERMUTATIONS,
    background: Any = None,
    random_state: int | np.random.Generator | None = 0,
) -> Explanation:
    """Explain ``model``'s output at the rows of ``X``.

    Parameters
    ----------
    model : fitted engine estimator
    X : array-like of shape (n_samples, n_features)
        Raw features, as given to ``predict``.
    n_permutations : int
        Orders sampled per row when sampling (rounded up to an even number); ignored by
        exact explanations.
    background : array-like of shape (n_background, n_features), optional
        Rows to sample against instead of those the model kept at fit; giving it makes the
        explanation sampled even where an exact one exists.
    random_state : int, Generator or None
        Seeds the sampled orders (the default 0 makes explanations repeatable).

    Returns
    -------
    Explanation
    """
    # Deferred: it imports every estimator module, and those import this package at load.
    from engine.explain._api import explain_rows

    explainer, phi, bias, exact = explain_rows(
        model, X, n_permutations=n_permutations, background=background, random_state=random_state
    )
    if bias.size == 1:
        return Explanation(phi[:, :, 0], float(bias[0]), _method(exact), explainer.space)
    return Explanation(phi, bias, _method(exact), explainer.space)


def explainable(model: Any) -> str | None:
    """``"exact"`` or ``"sampled"``: how ``explain`` would explain ``model``; None if it cannot."""
    from engine.explain._api import describe

    try:
        explainer = describe(model)
    except (AttributeError, TypeError, ValueError):
        return None
    if explainer.exact is not None:
        return "exact"
    return "sampled" if explainer.background is not None else None


def _method(exact: bool) -> str:
    return "exact" if exact else "sampled"
