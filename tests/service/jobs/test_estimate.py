"""The up-front memory estimate of a job: its arithmetic, and its constants against real fits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.jobs.estimate import (
    BASE,
    DATA_PER_CELL,
    NODE_BYTES,
    PROCESS,
    WORK_PER_CELL,
    TableHolding,
    estimate_job_bytes,
)
from service.methods.catalog import Task
from service.methods.params import resolve_params

REPO = Path(__file__).resolve().parents[3]
MIB = 1024 * 1024


def _estimate(method: str, task: Task, params: dict[str, Any], **shape: int) -> int:
    resolved = resolve_params(method, task, params)
    return estimate_job_bytes(method, resolved, **({"n_jobs": 1} | shape))  # type: ignore[arg-type]


def test_data_and_work_grow_with_cells_and_processes() -> None:
    shape = {"n_rows": 1000, "n_features": 10, "n_classes": 1}
    one = _estimate("linear_regression", Task.REGRESSION, {}, **shape)
    two = _estimate("linear_regression", Task.REGRESSION, {}, **shape, n_jobs=2)

    assert one == BASE + 10_000 * (DATA_PER_CELL + WORK_PER_CELL)
    assert two - one == PROCESS + 10_000 * WORK_PER_CELL


def test_nodes_are_bounded_by_rows_depth_and_leaves_and_multiplied_through_nesting() -> None:
    shape = {"n_rows": 1000, "n_features": 1, "n_classes": 2}
    floor = BASE + 1000 * (DATA_PER_CELL + WORK_PER_CELL)
    node = NODE_BYTES + 16

    def nodes(method: str, params: dict[str, Any]) -> float:
        return (_estimate(method, Task.CLASSIFICATION, params, **shape) - floor) / node

    assert nodes("decision_tree", {}) == 1999  # 2n - 1
    assert nodes("decision_tree", {"max_depth": 3}) == 15
    assert nodes("decision_tree", {"min_samples_leaf": 10}) == 199  # 2·⌈n/10⌉ - 1
    assert nodes("decision_tree", {"min_samples_leaf": 0.25}) == 7
    assert nodes("decision_tree", {"max_leaf_nodes": 10, "max_depth": 8}) == 19
    assert nodes("random_forest", {"n_estimators": 7, "max_depth": 2}) == 7 * 7
    bagged_stumps = {"n_estimators": 4, "estimator": {"method": "adaboost", "params": {}}}
    assert nodes("bagging", bagged_stumps) == 4 * 50 * 3  # AdaBoost: 50 stumps by default
    members = [
        {"name": "a", "method": "decision_tree", "params": {"max_depth": 1}},
        {"name": "b", "method": "random_forest", "params": {"n_estimators": 2, "max_depth": 1}},
    ]
    # A combiner's members count twice: the final fit and one fold's fit in flight.
    assert nodes("voting", {"estimators": members}) == 2 * (3 + 2 * 3)


def test_multiclass_gradient_boosting_grows_a_tree_per_class() -> None:
    params = {"n_estimators": 10, "max_depth": 2}
    shape = {"n_rows": 100, "n_features": 1}
    binary = _estimate("gradient_boosting", Task.CLASSIFICATION, params, **shape, n_classes=2)
    five = _estimate("gradient_boosting", Task.CLASSIFICATION, params, **shape, n_classes=5)
    floor = BASE + 100 * (DATA_PER_CELL + WORK_PER_CELL)

    assert binary - floor == 10 * 7 * (NODE_BYTES + 16)
    assert five - floor == 10 * 5 * 7 * (NODE_BYTES + 40)


def test_codes_and_a_cluster_cost_less_than_the_float_table_and_a_cluster_no_cells() -> None:
    shape = {"n_rows": 1_000_000, "n_classes": 2, "n_jobs": 1}
    params = resolve_params("xgboost", Task.CLASSIFICATION, {})

    def bytes_of(holding: TableHolding, n_features: int) -> int:
        return estimate_job_bytes(
            "xgboost", params, **shape, n_features=n_features, holding=holding
        )

    wide = {holding: bytes_of(holding, 40) for holding in TableHolding}
    assert (
        wide[TableHolding.WORKERS]
        < wide[TableHolding.CLUSTER]
        < wide[TableHolding.CODES]
        < wide[TableHolding.FLOATS]
    )
    # Out of core the workers hold every feature; the fit process, per-row state alone: with
    # folds its target and split (160 B a row), with a holdout the held-out rows' ranks.
    assert bytes_of(TableHolding.CLUSTER, 400) == wide[TableHolding.CLUSTER]
    assert bytes_of(TableHolding.WORKERS, 400) == wide[TableHolding.WORKERS]
    assert wide[TableHolding.CLUSTER] - wide[TableHolding.WORKERS] == 1_000_000 * (160 - 4)
    assert bytes_of(TableHolding.CODES, 400) > wide[TableHolding.CODES]


# Fits whose real peak the estimate must bound, without overshooting it past 4×: one grower's
# working set (a deep tree on many cells), a forest of deep regression trees (many nodes),
# and multiclass boosting (K trees a round). Each takes a second or two.
FITS = [
    ("decision_tree", Task.CLASSIFICATION, 100_000, 20, 2, {}),
    ("random_forest", Task.REGRESSION, 20_000, 10, 1, {"n_estimators": 20}),
    ("gradient_boosting", Task.CLASSIFICATION, 40_000, 10, 4, {"n_estimators": 10}),
]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("method", "task", "rows", "features", "classes", "params"), FITS)
def test_the_estimate_bounds_the_peak_of_real_fits(
    method: str, task: Task, rows: int, features: int, classes: int, params: dict[str, Any]
) -> None:
    command = [sys.executable, "-m", "tests.service.jobs.fit_memory_probe", method, task.value]
    command += [str(rows), str(features), str(classes), json.dumps(params)]
    # A second or two with the kernels compiled (`make kernels`); minutes where this checkout's
    # kernels are not, on a loaded machine: the deadline is for a hang, not for speed.
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    peak = json.loads(result.stdout)["peak_bytes"]

    estimate = _estimate(method, task, params, n_rows=rows, n_features=features, n_classes=classes)

    ratio = estimate / peak
    assert 1 <= ratio <= 4, (
        f"{method}: estimate {estimate / MIB:.0f} MiB, real peak {peak / MIB:.0f} MiB"
    )
