"""Per-row explanations for predict, feature importance and ``/v2``: ``engine.explain``, bounded.

Exact explanations cost about what predicting does; sampled ones cost ``explain_samples × (p −
1)`` predictions per row (``p`` features), so a request's sampled work is bounded: beyond
``MAX_SAMPLED_EVALUATIONS`` model evaluations it is refused with a ``422`` that says how many
rows or samples would fit. ``kind=shap`` importance of a sampled model averages over at most
``SHAP_IMPORTANCE_ROWS`` validation rows (evenly spread over them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine.explain import DEFAULT_PERMUTATIONS, explainable
from service.errors import InvalidInput

MAX_EXPLAIN_SAMPLES = 1024
# About 20 s of a 100-tree forest on one core; a few seconds for most models.
MAX_SAMPLED_EVALUATIONS = 2_000_000
SHAP_IMPORTANCE_ROWS = 200


@dataclass(frozen=True, slots=True)
class RowExplanations:
    """``engine.explain``'s result for the rows of one request."""

    contributions: npt.NDArray[np.float64]  # (n, p) or (n, p, n_classes)
    bias: npt.NDArray[np.float64]  # () or (n_classes,)
    method: str  # "exact" | "sampled"


def refusal(method: str, estimator: Any) -> str | None:
    """Why ``estimator`` cannot be explained, or None when it can."""
    if explainable(estimator) is not None:
        return None
    return (
        f"This '{method}' model cannot be explained: it has no exact explanation and was trained "
        "before models kept the background rows sampled explanations need. Train it again."
    )


def check_budget(estimator: Any, n_rows: int, samples: int | None, *, field: str) -> None:
    """Refuse a sampled explanation of ``n_rows`` rows that would cost too many evaluations."""
    if explainable(estimator) != "sampled" or n_rows == 0:
        return
    per_row = _permutations(samples) * max(1, estimator.n_features_in_ - 1)
    if n_rows * per_row <= MAX_SAMPLED_EVALUATIONS:
        return
    fits = max(1, MAX_SAMPLED_EVALUATIONS // per_row)
    raise InvalidInput(
        f"Explaining {n_rows} rows of this model samples {per_row} predictions per row, more "
        f"than the {MAX_SAMPLED_EVALUATIONS} a request may cost; send at most {fits} rows, or "
        f"fewer {field}.",
        errors=[{"loc": ["body", field], "msg": "too much sampling for one request"}],
    )


def explain_rows(
    estimator: Any, X: npt.NDArray[np.float64], samples: int | None
) -> RowExplanations:
    explanation = engine.explain(estimator, X, n_permutations=_permutations(samples))
    return RowExplanations(
        np.asarray(explanation.contributions, dtype=np.float64),
        np.asarray(explanation.bias, dtype=np.float64),
        explanation.method,
    )


def importance_rows(estimator: Any, n_rows: int) -> npt.NDArray[np.intp]:
    """The validation rows ``kind=shap`` averages over: all, or an even spread when sampled."""
    if explainable(estimator) != "sampled" or n_rows <= SHAP_IMPORTANCE_ROWS:
        return np.arange(n_rows, dtype=np.intp)
    return np.linspace(0, n_rows - 1, SHAP_IMPORTANCE_ROWS).round().astype(np.intp)


def _permutations(samples: int | None) -> int:
    return DEFAULT_PERMUTATIONS if samples is None else samples
