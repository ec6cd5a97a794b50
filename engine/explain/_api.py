"""``explain`` itself: describe the model, then explain exactly or by sampling.

Importing this module registers every model family's description (it imports the estimators,
which is why :mod:`engine.explain` imports it only when a model is first explained: estimator
modules import :mod:`engine.explain._background` while the engine is still loading).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine._validation import check_X
from engine.base import check_is_fitted
from engine.explain import (  # noqa: F401  (registrations)
    _bagging,
    _combiners,
    _encoded,
    _linear,
    _trees,
)
from engine.explain._explainer import Explainer, describe
from engine.explain._sampling import sampled_shapley

__all__ = ["describe", "explain_rows"]


def explain_rows(
    model: Any,
    X: Any,
    *,
    n_permutations: int,
    background: Any,
    random_state: int | np.random.Generator | None,
) -> tuple[Explainer, NDArray[np.float64], NDArray[np.float64], bool]:
    """``(explainer, contributions (n, p, m), bias (m,), exact)`` of ``model`` at ``X``."""
    check_is_fitted(model)
    rows = check_X(X, n_features=model.n_features_in_, estimator=type(model).__name__)
    explainer = describe(model)
    if explainer.exact is not None and background is None:
        phi, bias = explainer.exact(rows)
        return explainer, phi, np.asarray(bias, dtype=np.float64), True
    chosen = explainer.background if background is None else background
    if chosen is None:
        raise ValueError(
            f"This {type(model).__name__} has no exact explanation and kept no background rows "
            "for sampling (it was fitted before models kept them): refit it, or pass "
            "background= (training rows)."
        )
    chosen = check_X(chosen, n_features=model.n_features_in_, name="background")
    phi, bias = sampled_shapley(
        explainer.output,
        rows,
        chosen,
        n_permutations=n_permutations,
        random_state=random_state,
    )
    return explainer, phi, bias, False
