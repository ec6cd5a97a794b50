"""``"auto": true``: the families and ranges the service searches, sized to the data and budget.

As H2O's AutoML does (LeDell & Poirier 2020), the search starts with one sensible default of
each family, so a short budget still yields a diverse set to stack, then draws random
configurations (Bergstra & Bengio 2012) from ranges that are known to matter for each family:

- XGBoost-style boosting: rounds, depth, learning rate (log scale), row and column sampling,
  min child weight and L2 penalty; gradient boosting: rounds, depth, learning rate, subsample
  and leaf size. Shrinkage and rounds trade off (Friedman 2001), so both are drawn.
- Random forest and extra trees: the share of features per split and the leaf size, the two
  settings that move a forest's error most (Probst, Wright & Boulesteix 2019); the tree count
  is fixed, since more trees never hurt, only cost.
- A linear model (logistic regression, or ridge for regression) with its penalty on a log
  scale: cheap, and a member that differs from every tree for the ensemble.

Sizes follow the data: trees and rounds are as many as one fit can grow in a sixth of a
candidate slot's share of the budget (at least 50 trees, 100 rounds; at most 300 and 500), so
large tables get fewer and small ones more. With ``max_seconds`` and no ``max_models``, the number
of candidates is what the budget fits by a rough cost model (seconds per cell per tree,
measured on the benchmark machine) for two fits at a time, at most 60; the deadline stops
whatever the estimate got wrong, and what finished is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from service.methods.catalog import Task

# Seconds one tree (or round) costs per cell (row × feature), measured with the defaults on
# 64,000 × 40 on the 2-core benchmark machine: a coarse guide, never a limit.
SECONDS_PER_CELL = {
    "random_forest": 5e-8,
    "extra_trees": 1.5e-7,
    "xgboost": 3e-8,
    "gradient_boosting": 2e-8,
    "logistic_regression": 1.5e-6,  # per cell for the whole fit
    "ridge": 2e-7,
}
DEFAULT_AUTO_MODELS = 20
MAX_AUTO_MODELS = 60
ASSUMED_PARALLEL_FITS = 2


@dataclass(frozen=True, slots=True)
class AutoPlan:
    """What auto chose: the spaces, the defaults trained first, and why (for the response)."""

    spaces: list[dict[str, Any]]
    defaults: list[dict[str, Any]]
    max_models: int
    notes: dict[str, Any] = field(default_factory=dict)


def plan(
    task: Task,
    *,
    n_rows: int,
    n_features: int,
    folds: int,
    max_models: int | None,
    max_seconds: float | None,
) -> AutoPlan:
    cells = max(n_rows * max(n_features, 1), 1)
    # One fit's fair share of the budget: a sixth of what one candidate's k+1 fits may take
    # if a slot is to train six of them; without a budget, half a minute.
    fit_seconds = 30.0 if max_seconds is None else max(2.0, max_seconds / ((folds + 1) * 6))
    forest_trees = _count(fit_seconds, "random_forest", cells, 50, 300)
    extra_trees = _count(fit_seconds, "extra_trees", cells, 50, 300)
    rounds = _count(fit_seconds, "xgboost", cells, 100, 500)
    linear = "logistic_regression" if task == Task.CLASSIFICATION else "ridge"
    spaces = [
        {
            "method": "xgboost",
            "params": {
                "n_estimators": {"int": [50, rounds]},
                "max_depth": {"int": [3, 10]},
                "learning_rate": {"log_uniform": [0.02, 0.3]},
                "subsample": {"uniform": [0.6, 1.0]},
                "colsample_bytree": {"uniform": [0.5, 1.0]},
                "min_child_weight": {"log_uniform": [1.0, 20.0]},
                "reg_lambda": {"log_uniform": [0.1, 10.0]},
            },
        },
        {
            "method": "gradient_boosting",
            "params": {
                "n_estimators": {"int": [50, rounds]},
                "max_depth": {"int": [2, 8]},
                "learning_rate": {"log_uniform": [0.02, 0.3]},
                "subsample": {"uniform": [0.6, 1.0]},
                "min_samples_leaf": {"int": [1, 50]},
            },
        },
        {
            "method": "random_forest",
            "params": {
                "n_estimators": forest_trees,
                "max_features": ["sqrt", 0.2, 0.33, 0.5, 0.7],
                "min_samples_leaf": [1, 2, 4, 8, 16],
            },
        },
        {
            "method": "extra_trees",
            "params": {
                "n_estimators": extra_trees,
                "max_features": ["sqrt", 0.33, 0.5, 0.7, 1.0],
                "min_samples_leaf": [1, 2, 4, 8, 16],
            },
        },
        {
            "method": linear,
            "params": {"C": {"log_uniform": [1e-3, 1e2]}}
            if linear == "logistic_regression"
            else {"alpha": {"log_uniform": [1e-3, 1e3]}},
        },
    ]
    # H2O's order: the XGBoost-style default, the linear model, a forest, gradient boosting,
    # extra trees; the trees at the sized count.
    defaults = [
        {"method": "xgboost", "params": {}},
        {"method": linear, "params": {}},
        {"method": "random_forest", "params": {"n_estimators": forest_trees}},
        {"method": "gradient_boosting", "params": {}},
        {"method": "extra_trees", "params": {"n_estimators": extra_trees}},
    ]
    per_candidate = (folds + 1) * _mean_fit_seconds(
        cells, (forest_trees, extra_trees), rounds, linear
    )
    notes: dict[str, Any] = {
        "families": [space["method"] for space in spaces],
        "fit_seconds_target": round(fit_seconds, 1),
        "random_forest_trees": forest_trees,
        "extra_trees_trees": extra_trees,
        "max_rounds": rounds,
        "estimated_seconds_per_candidate": round(per_candidate, 1),
    }
    if max_models is None:
        if max_seconds is None:
            max_models = DEFAULT_AUTO_MODELS
        else:
            fits = max_seconds * ASSUMED_PARALLEL_FITS / max(per_candidate, 1e-3)
            max_models = max(len(defaults), min(MAX_AUTO_MODELS, math.floor(fits)))
    notes["max_models"] = max_models
    return AutoPlan(spaces, defaults[:max_models], max_models, notes)


def _count(fit_seconds: float, family: str, cells: int, low: int, high: int) -> int:
    """Trees or rounds that fit in ``fit_seconds``, within [low, high], a multiple of 10."""
    fitting = fit_seconds / (SECONDS_PER_CELL[family] * cells)
    return int(min(high, max(low, round(fitting / 10) * 10)))


def _mean_fit_seconds(cells: int, trees: tuple[int, int], rounds: int, linear: str) -> float:
    """A candidate's fit time averaged over the families, at mid-range settings."""
    mid_rounds = (50 + rounds) / 2
    costs = [
        SECONDS_PER_CELL["xgboost"] * cells * mid_rounds,
        SECONDS_PER_CELL["gradient_boosting"] * cells * mid_rounds * 5 / 3,  # depth ~5 vs 3
        SECONDS_PER_CELL["random_forest"] * cells * trees[0],
        SECONDS_PER_CELL["extra_trees"] * cells * trees[1],
        SECONDS_PER_CELL[linear] * cells,
    ]
    return sum(costs) / len(costs)
