"""Wall-clock fits of XGBoost-style boosting beside LightGBM, as a user meets them: both on one
and on two threads, fitted alternately in one process, full tree counts.

``benchmarks.cpu_pairs`` measures one thread's CPU time, which moves least with other people's
load; this measures what issue 24 targets: the wall time at ``n_jobs=2`` and what the second
thread gains each library. Medians over the repeats, and the median of the per-round ratios.

    python -m benchmarks.wall_pairs [--datasets binary,multiclass5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from benchmarks.cpu_pairs import LIGHTGBM_PARAMS, _split

# The workloads: 100 trees for two classes, 50 rounds for five.
TREES = {"binary": 100, "multiclass5": 50}


def _models(trees: int, n_jobs: int) -> dict[str, Any]:
    import lightgbm

    import engine

    return {
        "coppice": engine.XGBoostClassifier(
            n_estimators=trees, max_depth=6, learning_rate=0.1, n_jobs=n_jobs
        ),
        "lightgbm": lightgbm.LGBMClassifier(n_estimators=trees, n_jobs=n_jobs, **LIGHTGBM_PARAMS),
    }


def _fit_seconds(model: Any, X: Any, y: Any) -> float:
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start


def measure(dataset: str, repeats: int) -> dict[tuple[str, int], list[float]]:
    X, _, y, _, _ = _split(dataset)
    times: dict[tuple[str, int], list[float]] = {}
    for n_jobs in (1, 2):  # one warm-up fit each, not timed (kernels load, threads start)
        for model in _models(2, n_jobs).values():
            model.fit(X[:2000], y[:2000])
    for _ in range(repeats):
        for n_jobs in (2, 1):
            for name, model in _models(TREES[dataset], n_jobs).items():
                times.setdefault((name, n_jobs), []).append(_fit_seconds(model, X, y))
    return times


def report(dataset: str, times: dict[tuple[str, int], list[float]]) -> None:
    def median(name: str, n_jobs: int) -> float:
        return statistics.median(times[(name, n_jobs)])

    def ratio(a: tuple[str, int], b: tuple[str, int]) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))

    print(
        f"{dataset}, {TREES[dataset]} trees, wall seconds (median of {len(times[('coppice', 2)])})"
    )
    for name in ("coppice", "lightgbm"):
        one, two = median(name, 1), median(name, 2)
        speedup = ratio((name, 1), (name, 2))
        print(
            f"  {name:9s} 1 thread {one:7.2f}  2 threads {two:7.2f}  second thread x{speedup:.2f}"
        )
    print(f"  coppice / lightgbm, 2 threads: {ratio(('coppice', 2), ('lightgbm', 2)):.2f}x")
    print(f"  coppice / lightgbm, 1 thread:  {ratio(('coppice', 1), ('lightgbm', 1)):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="binary,multiclass5")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for dataset in args.datasets.split(","):
        report(dataset, measure(dataset, args.repeats))


if __name__ == "__main__":
    main()
