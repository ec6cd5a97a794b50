"""Wall-clock fits of XGBoost-style boosting beside LightGBM, as a user meets them: both on one
and on two threads, fitted alternately in one process, full tree counts.

``benchmarks.cpu_pairs`` measures one thread's CPU time, which moves least with other people's
load; this measures what issue 24 targets: the wall time at ``n_jobs=2`` and what the second
thread gains each library. Medians over the repeats, and the median of the per-round ratios.
Each fit's process CPU time is taken beside its wall time (on a machine others load, the CPU
ratios move less than the wall ones), and the load average before and after.

    python -m benchmarks.wall_pairs [--datasets binary multiclass5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
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


def _fit_seconds(model: Any, X: Any, y: Any) -> tuple[float, float]:
    """Wall and process CPU seconds of one fit."""
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X, y)
    return time.perf_counter() - start, time.process_time() - cpu


Times = dict[tuple[str, int], list[tuple[float, float]]]


def measure(dataset: str, repeats: int) -> Times:
    X, _, y, _, _ = _split(dataset)
    times: Times = {}
    for n_jobs in (1, 2):  # one warm-up fit each, not timed (kernels load, threads start)
        for model in _models(2, n_jobs).values():
            model.fit(X[:2000], y[:2000])
    for round_index in range(repeats):
        for n_jobs in (2, 1):
            for name, model in _models(TREES[dataset], n_jobs).items():
                wall, cpu = _fit_seconds(model, X, y)
                times.setdefault((name, n_jobs), []).append((wall, cpu))
                # Each fit as it ends, with the load it met: a noisy round shows as one.
                print(
                    f"  [{dataset} round {round_index + 1}] {name} n_jobs={n_jobs}: "
                    f"wall {wall:.2f} s, CPU {cpu:.2f} s, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
    return times


def report(dataset: str, times: Times, load: tuple[float, float]) -> None:
    def median(name: str, n_jobs: int, kind: int) -> float:
        return statistics.median(t[kind] for t in times[(name, n_jobs)])

    def ratio(a: tuple[str, int], b: tuple[str, int], kind: int) -> float:
        pairs = zip(times[a], times[b], strict=True)
        return statistics.median(x[kind] / y[kind] for x, y in pairs)

    print(
        f"{dataset}, {TREES[dataset]} trees, seconds (median of {len(times[('coppice', 2)])}), "
        f"load average {load[0]:.1f} before, {load[1]:.1f} after"
    )
    for name in ("coppice", "lightgbm"):
        one, two = median(name, 1, 0), median(name, 2, 0)
        cpu_one, cpu_two = median(name, 1, 1), median(name, 2, 1)
        speedup = ratio((name, 1), (name, 2), 0)
        print(
            f"  {name:9s} wall: 1 thread {one:7.2f}  2 threads {two:7.2f}  "
            f"second thread x{speedup:.2f};  CPU: 1 thread {cpu_one:7.2f}  2 threads {cpu_two:7.2f}"
        )
    for n_jobs in (2, 1):
        pair = ("coppice", n_jobs), ("lightgbm", n_jobs)
        print(
            f"  coppice / lightgbm, {n_jobs} thread(s): wall {ratio(*pair, 0):.2f}x, "
            f"CPU {ratio(*pair, 1):.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["binary", "multiclass5"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for dataset in (name for names in args.datasets for name in names.split(",") if name):
        before = os.getloadavg()[0]
        times = measure(dataset, args.repeats)
        report(dataset, times, (before, os.getloadavg()[0]))


if __name__ == "__main__":
    main()
