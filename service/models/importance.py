"""Feature importances of a loaded model: which kinds it has, and computing them.

``impurity`` is stored at training time. The others are computed on the first request and
then stored like it (one ``ImportanceRecord`` per kind):

- ``gain``, ``split_count``, ``cover``: XGBoost's ``importance("gain" | "weight" | "cover")``;
- ``permutation``: the drop in the model's score (accuracy or R²) when a feature is shuffled,
  on the job's validation rows (5 repeats; ``std`` over repeats);
- ``oob_permutation``: Breiman's out-of-bag permutation importance of forests and bagging,
  on the training rows (``std`` over members);
- ``shap``: the mean absolute contribution (``engine.explain``: exact, or sampled Shapley
  values) over the validation rows (summed over the classes of a multiclass model; ``std`` of
  the per-row value); a sampled model averages over an even spread of at most
  ``explanations.SHAP_IMPORTANCE_ROWS`` of them.

The validation and training rows are rebuilt from the job exactly as training split them
(same dataset, same features, same seed), so they need the dataset to still exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from service.models import explanations

KINDS = ("impurity", "gain", "split_count", "cover", "permutation", "oob_permutation", "shap")
# Computed from the model alone.
MODEL_KINDS = ("gain", "split_count", "cover")
# Computed from the model and rows of its training data.
DATA_KINDS = ("permutation", "oob_permutation", "shap")
XGBOOST_KINDS = {"gain": "gain", "split_count": "weight", "cover": "cover"}
PERMUTATION_REPEATS = 5


def has_oob(estimator: Any) -> bool:
    """Forests and bagging of trees that left rows out of bag for at least one member."""
    if not hasattr(estimator, "oob_permutation_importance"):
        return False
    try:
        trees = estimator.trees_
        return any(
            bool(np.any(estimator.in_bag_counts(member) == 0)) for member in range(len(trees))
        )
    except (AttributeError, ValueError, TypeError):
        return False


def available_kinds(
    method: str,
    estimator: Any,
    stored: Sequence[str],
    *,
    has_validation: bool,
) -> list[str]:
    """The kinds this model can give, in ``KINDS`` order."""
    kinds = set(stored)
    if method == "xgboost" and hasattr(estimator, "importance"):
        kinds.update(MODEL_KINDS)
    if has_validation:
        kinds.add("permutation")
        if explanations.refusal(method, estimator) is None:
            kinds.add("shap")
    if has_oob(estimator):
        kinds.add("oob_permutation")
    return [kind for kind in KINDS if kind in kinds]


def default_kind(method: str, kinds: Sequence[str]) -> str | None:
    """XGBoost: gain; everything else: impurity; failing those, the first kind it has."""
    preferred = "gain" if method == "xgboost" else "impurity"
    if preferred in kinds:
        return preferred
    return kinds[0] if kinds else None


def from_model(estimator: Any, kind: str) -> tuple[npt.NDArray[np.float64], None]:
    values = np.asarray(estimator.importance(XGBOOST_KINDS[kind]), dtype=np.float64)
    return values, None


def permutation(
    estimator: Any, X: npt.NDArray[np.float64], y: npt.NDArray[Any], seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    result = engine.permutation_importance(
        estimator, X, y, n_repeats=PERMUTATION_REPEATS, random_state=seed
    )
    return (
        np.asarray(result.importances_mean, dtype=np.float64),
        np.asarray(result.importances_std, dtype=np.float64),
    )


def oob_permutation(
    estimator: Any, X: npt.NDArray[np.float64], y: npt.NDArray[Any], seed: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    mean, std = estimator.oob_permutation_importance(X, y, random_state=seed)
    return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)


def shap(
    estimator: Any, X: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    per_row = np.abs(explanations.explain_rows(estimator, X, None).contributions)
    if per_row.ndim == 3:  # multiclass: (rows, features, classes)
        per_row = per_row.sum(axis=2)
    return per_row.mean(axis=0), per_row.std(axis=0)


def ranked(
    names: Sequence[str],
    values: npt.NDArray[np.float64],
    std: npt.NDArray[np.float64] | None,
) -> list[dict[str, Any]]:
    """``[{"name", "importance", "std"}]`` sorted by importance, descending (ties keep feature order)."""
    items = [
        {
            "name": name,
            "importance": _finite(values[j]),
            "std": None if std is None else _finite(std[j]),
        }
        for j, name in enumerate(names)
    ]
    return sorted(items, key=lambda item: -(item["importance"] or 0.0))


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if np.isfinite(number) else None
