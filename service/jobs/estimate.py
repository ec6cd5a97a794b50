"""How much memory a training job may need, estimated before it is queued.

``POST /v1/jobs`` refuses a job whose estimate passes ``COPPICE_MAX_JOB_MEMORY_BYTES``, so a
request that would exhaust the worker's machine fails at once with a 422 instead of hours
later with an out-of-memory kill. The estimate is an upper bound, simple on purpose::

    bytes = BASE + (n_jobs - 1) · PROCESS
          + n · p · (table_per_cell + n_jobs · work_per_cell) + n · row_bytes
          + nodes · (NODE_BYTES + 8 · K)

with ``n`` rows, ``p`` features, ``K`` classes (1 for regression) and ``n_jobs`` processes
(``COPPICE_PROCESSES_PER_JOB``). What a cell and a row cost depends on where the fit holds
its table (:class:`TableHolding`): the float columns whole (most methods), the bin codes read
part by part (histogram trees; the float table never whole in the process), or nothing but
per-row state when the fit runs out of core on a Dask cluster, whose workers hold the parts
(and, with a holdout or none, the target, the split and the metrics' rows too).
``nodes`` bounds the tree nodes the fitted model can hold: each tree has at most
``min(2⌈n/min_samples_leaf⌉ − 1, 2·max_leaf_nodes − 1, 2^(max_depth+1) − 1)``; a method's
``n_estimators`` (or ``n_experts``) multiplies the trees of everything below it, multiclass
gradient boosting grows ``K`` trees a round, and a combiner's members count twice (the final
fit and one cross-validation fold's fit in flight).

The constants come from the peak RSS of real fits (``tests/service/jobs/test_estimate.py``
measures some and holds the estimate between 1× and 4× of each): a fit process with the
service's modules loaded takes ~240 MiB before any data (Numba with LLVM ~150 MiB of it, pyarrow
~35 MiB), and a signature compiled on the spot adds LLVM's working memory on top; the decoded
columns, ``X`` and the holdout split take ~32 bytes a cell; a tree grower's per-level gathers,
keys and histograms took up to ~70 more bytes a cell (per process, as every process grows its
own trees); a fitted node with its share of the model's bookkeeping took up to ~170 bytes.
From parts, a fit holds a byte or two of codes a cell (and a feature-major copy), one part's
float values while binning it, and per row its target, margins, gradients, hessians and row
indices (2M × 20 XGBoost-style from parts grew 389–487 MiB, ~200–250 bytes a row, glibc's
kept heap included); out of core with folds (or successive halving's subsamples), the fit
process keeps ~70 bytes a row (the target, the split's row indices and the validation rows'
codes: 392 MB at 1M rows, 460 MB at 2M); with a holdout or none, the target, split and metrics
stay on the workers (``service.training.out_of_core``) and it keeps only the held-out rows'
ranks while it sends them, four bytes each (335.5 MB at 1M rows, 335.9 MB at 2M).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

MIB = 1024 * 1024
BASE = 384 * MIB
PROCESS = 128 * MIB
DATA_PER_CELL = 32
WORK_PER_CELL = 96
NODE_BYTES = 256
# From parts: codes and their feature-major copy; per row, the boosting state and indices.
CODES_PER_CELL = 4
CODES_ROW_BYTES = 384
# The float values of the one part being binned (parts are at most 2^17 rows).
PART_ROWS = 1 << 17
# Out of core on a Dask cluster: the fit process's own per-row state with folds, and with
# a holdout or none (the held-out rows' int32 ranks, charged for every row).
CLUSTER_ROW_BYTES = 160
WORKERS_ROW_BYTES = 4
# Methods that grow K trees a round for K classes (one per class's gradient).
PER_CLASS_TREES = frozenset({"gradient_boosting", "xgboost"})
TREE_LIMIT_KEYS = ("max_depth", "max_leaf_nodes", "max_leaves")


class TableHolding(Enum):
    """Where a fit holds its table, which sets what a cell and a row of it cost."""

    FLOATS = "floats"  # the float columns whole, in the fit process
    CODES = "codes"  # bin codes read part by part (service.training.run.bins_from_parts)
    CLUSTER = "cluster"  # out of core: the Dask workers hold the parts, this process rows' state
    # Out of core with a holdout or none: the workers hold the target, split and metrics too.
    WORKERS = "workers"


def estimate_job_bytes(
    method: str,
    params: Mapping[str, Any],
    *,
    n_rows: int,
    n_features: int,
    n_classes: int,
    n_jobs: int,
    holding: TableHolding = TableHolding.FLOATS,
) -> int:
    """Upper bound on the peak memory of one job's fit, in bytes.

    ``params`` are the resolved params (defaults filled in, nested learners expanded to
    ``{"method", "params"}``); ``n_classes`` is 1 for regression.
    """
    n_classes = max(1, n_classes)
    nodes = _nodes(method, params, n_rows, n_classes)
    return int(
        BASE
        + (n_jobs - 1) * PROCESS
        + _table_bytes(holding, n_rows, n_features, n_jobs)
        + nodes * (NODE_BYTES + 8 * n_classes)
    )


def _table_bytes(holding: TableHolding, n_rows: int, n_features: int, n_jobs: int) -> int:
    if holding is TableHolding.WORKERS:
        return n_rows * WORKERS_ROW_BYTES
    if holding is TableHolding.CLUSTER:
        return n_rows * CLUSTER_ROW_BYTES
    if holding is TableHolding.CODES:
        one_part = min(n_rows, PART_ROWS) * n_features * DATA_PER_CELL
        # Codes are shared with a forest's processes; each keeps its own rows' state.
        return n_rows * (n_features * CODES_PER_CELL + n_jobs * CODES_ROW_BYTES) + one_part
    return n_rows * n_features * (DATA_PER_CELL + n_jobs * WORK_PER_CELL)


def _nodes(method: str, params: Mapping[str, Any], n_rows: int, n_classes: int) -> int:
    """Tree nodes a fitted learner (and every learner inside it) can hold at most."""
    own = _tree_nodes(params, n_rows) if _grows_trees(params) else 0
    if own and method in PER_CLASS_TREES and n_classes > 2:
        own *= n_classes
    inner = sum(
        _nodes(learner["method"], learner["params"], n_rows, n_classes)
        for learner in _learners(params)
    )
    if "cv" in params:
        inner *= 2
    copies = params.get("n_estimators") or params.get("n_experts") or 1
    return int(copies) * (own + inner)


def _grows_trees(params: Mapping[str, Any]) -> bool:
    return any(key in params for key in TREE_LIMIT_KEYS)


def _tree_nodes(params: Mapping[str, Any], n_rows: int) -> int:
    leaf = params.get("min_samples_leaf") or 1
    # An int is a count of rows, a float a fraction of them (scikit-learn's convention).
    min_leaf = max(1, int(leaf) if isinstance(leaf, int) else math.ceil(float(leaf) * n_rows))
    bounds = [2 * math.ceil(n_rows / min_leaf) - 1]
    leaves = params.get("max_leaf_nodes") or params.get("max_leaves")
    if leaves:
        bounds.append(2 * int(leaves) - 1)
    depth = params.get("max_depth")
    if depth is not None and depth < 62:
        bounds.append(2 ** (int(depth) + 1) - 1)
    return max(1, min(bounds))


def _learners(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The nested learners of resolved params: ``{"method", "params"}`` mappings."""
    found: list[Mapping[str, Any]] = []
    for value in params.values():
        candidates = value if isinstance(value, list) else [value]
        found.extend(
            candidate
            for candidate in candidates
            if isinstance(candidate, Mapping)
            and isinstance(candidate.get("method"), str)
            and isinstance(candidate.get("params"), Mapping)
        )
    return found
