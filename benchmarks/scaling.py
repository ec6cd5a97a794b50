"""Scaling study: the engine's random forest fitted on 10k, 100k and (opt-in) 1M rows.

Only fit time and fit memory are measured; constant microseconds per row means fit time
grows linearly with the number of rows, and the 1M-row peak answers whether a 1M × 40 forest
fits within 2 GiB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.datasets import DatasetSpec, write_dataset
from benchmarks.measure import RunJob, measure_run
from benchmarks.models import BuildContext, ModelSpec, coppice_random_forest

__all__ = ["SCALING_MODEL", "default_sizes", "run_scaling", "scaling_dataset"]

SCALING_MODEL = ModelSpec(
    "coppice", coppice_random_forest, "RandomForestClassifier, max_features='sqrt', full depth"
)


def scaling_dataset(n_rows: int) -> DatasetSpec:
    return DatasetSpec(
        "scaling",
        "classification",
        "make_classification",
        n_rows,
        {"n_features": 40, "n_informative": 20, "random_state": 0},
        test_fraction=0.0,
    )


def default_sizes(*, quick: bool, include_million: bool) -> tuple[int, ...]:
    if quick:
        return (5_000, 20_000)
    return (10_000, 100_000, 1_000_000) if include_million else (10_000, 100_000)


def run_scaling(
    sizes: Sequence[int],
    *,
    repeats: int,
    n_estimators: int,
    n_jobs: int,
    workdir: Path,
    sample_interval: float,
    timeout: float | None,
    log: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Fit the model ``repeats`` times per size; one record per run, as the comparison's."""
    runs: list[dict[str, Any]] = []
    for n_rows in sizes:
        files = write_dataset(scaling_dataset(n_rows), workdir)
        context = BuildContext(
            task="classification",
            n_features=files.spec.n_features,
            n_train=files.n_train,
            n_estimators=n_estimators,
            n_jobs=n_jobs,
            random_state=0,
        )
        job = RunJob(SCALING_MODEL, context, files, predict=False)
        for repeat in range(repeats):
            result = measure_run(job, sample_interval=sample_interval, timeout=timeout)
            runs.append({"n_rows": n_rows, "repeat": repeat, **result.to_record()})
            log(f"scaling {n_rows:,} rows, repeat {repeat + 1}/{repeats}: {result.outcome()}")
        # A 1M-row dataset is 320 MB on disk; do not keep it once its runs are done.
        for path in files.directory.iterdir():
            path.unlink()
    return runs
