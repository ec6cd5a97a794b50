"""The Dask backend's own cost: fits through a two-worker ``LocalCluster`` beside local ones.

    python -m benchmarks.dask_backend [--rounds N] [--rows N] [--features N]

Each round times, interleaved so that a busy moment of the shared machine falls on all alike:

- a 100-tree random forest fitted with the local two-process executor (``n_jobs=2``) and
  through a ``LocalCluster`` of two worker processes with one thread each (target: ≤ 1.2×);
- XGBoost-style boosting (50 rounds, depth 6) fitted locally with ``n_jobs=1`` and
  ``n_jobs=2`` kernel threads, and data-parallel on the same two Dask workers (target: ≤ 1.5×
  the local fit);
- the per-task overhead: 200 empty tasks through each executor;
- the per-round overhead: one boosting level's histogram exchange on a tiny matrix.

Medians over rounds, and the medians' ratios, are printed; the cluster is started once (its
start-up, ~2 s, is not part of any fit) and each worker is warmed with one fit first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import RandomForestClassifier, XGBoostClassifier, parallel_backend
from engine.parallel import ProcessExecutor, SharedData

FOREST = {"n_estimators": 100, "random_state": 0}
BOOSTING = {"n_estimators": 50, "max_depth": 6, "random_state": 0}


def _empty(shared: SharedData, task: int) -> int:
    return task


def _data(rows: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=rows) > 0).astype(int)
    return X, y


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _per_task_ms(executor: Any, n_tasks: int = 200) -> float:
    start = time.perf_counter()
    assert list(executor.map(_empty, list(range(n_tasks)))) == list(range(n_tasks))
    return 1000 * (time.perf_counter() - start) / n_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=80_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument(
        "--boosting-only",
        action="store_true",
        help="skip the forest pair (for larger --rows, where its fits take minutes)",
    )
    args = parser.parse_args()
    from distributed import Client, LocalCluster

    from engine.parallel._dask import DaskExecutor
    from engine.parallel._dask_histograms import DaskHistograms

    X, y = _data(args.rows, args.features)
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    # Dask's default client sends an actor's calls through the scheduler; a client that may
    # reach the workers calls them directly (one network hop a boosting level instead of two).
    direct = Client(cluster, direct_to_workers=True, set_as_default=False)
    small = _data(2000, 8)

    def on_dask(fit: Callable[[], Any], through: Any = client) -> Callable[[], Any]:
        def run() -> Any:
            with parallel_backend(through):
                return fit()

        return run

    runs: dict[str, Callable[[], Any]] = {
        "forest local n_jobs=2": lambda: RandomForestClassifier(**FOREST, n_jobs=2).fit(X, y),
        "forest dask 2 workers": on_dask(lambda: RandomForestClassifier(**FOREST).fit(X, y)),
        "boosting local n_jobs=1": lambda: XGBoostClassifier(**BOOSTING, n_jobs=1).fit(X, y),
        "boosting local n_jobs=2": lambda: XGBoostClassifier(**BOOSTING, n_jobs=2).fit(X, y),
        "boosting dask 2 workers": on_dask(lambda: XGBoostClassifier(**BOOSTING).fit(X, y)),
        "boosting dask direct": on_dask(
            lambda: XGBoostClassifier(**BOOSTING).fit(X, y), through=direct
        ),
    }
    if args.boosting_only:
        runs = {name: run for name, run in runs.items() if not name.startswith("forest")}
    # Warm-up: kernels loaded in every worker, pages of the data touched once.
    on_dask(lambda: RandomForestClassifier(n_estimators=4).fit(*small))()
    on_dask(lambda: XGBoostClassifier(n_estimators=2).fit(*small))()
    on_dask(lambda: XGBoostClassifier(n_estimators=2).fit(*small), through=direct)()
    RandomForestClassifier(n_estimators=4, n_jobs=2).fit(*small)

    times: dict[str, list[float]] = {name: [] for name in runs}
    overheads: dict[str, list[float]] = {"task local": [], "task dask": [], "level dask": []}
    for round_index in range(args.rounds):
        for name, run in runs.items():
            times[name].append(_timed(run))
        with ProcessExecutor({"x": np.zeros(1)}, 2) as local:
            overheads["task local"].append(_per_task_ms(local))
        with DaskExecutor(client, {"x": np.zeros(1)}) as remote:
            overheads["task dask"].append(_per_task_ms(remote))
        with DaskHistograms(client, np.zeros((1000, 4), dtype=np.uint8)) as source:
            tree = source.tree(np.arange(1000), np.ones((1000, 2)))
            rows, slots = np.arange(1000), np.zeros(1000, dtype=np.intp)
            tree(rows, slots, 1, np.arange(4))  # sends the tree's part
            start = time.perf_counter()
            for _ in range(20):
                tree(rows, slots, 1, np.arange(4))
            overheads["level dask"].append(1000 * (time.perf_counter() - start) / 20)
        print(
            f"round {round_index + 1}: " + ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items())
        )

    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"\n{args.rows} x {args.features}, medians of {args.rounds} rounds:")
    for name, value in median.items():
        print(f"  {name:26s} {value:7.2f} s")
    for name, values in overheads.items():
        print(f"  per {name:22s} {statistics.median(values):7.2f} ms")
    # Ratios of the medians, and the median of each round's own ratio (the two fits of a
    # round ran back to back, so a busy spell of the shared machine falls on both).
    for label, (dask, local, target) in {
        "forest dask / local 2 processes": ("forest dask 2 workers", "forest local n_jobs=2", 1.2),
        "boosting dask / local n_jobs=1": (
            "boosting dask 2 workers",
            "boosting local n_jobs=1",
            1.5,
        ),
        "boosting dask / local n_jobs=2": (
            "boosting dask 2 workers",
            "boosting local n_jobs=2",
            None,
        ),
        "boosting dask direct / local n_jobs=1": (
            "boosting dask direct",
            "boosting local n_jobs=1",
            1.5,
        ),
    }.items():
        if dask not in times:
            continue
        paired = statistics.median(a / b for a, b in zip(times[dask], times[local], strict=True))
        goal = f" (target <= {target}x)" if target else ""
        print(
            f"  {label}: {median[dask] / median[local]:.2f}x of medians, "
            f"{paired:.2f}x median of rounds{goal}"
        )
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
