"""Out-of-core boosting on Dask (``fit_parts``, issue 27) beside its peers, fit by fit.

    python -m benchmarks.dask_parts [--rounds N] [--rows N] [--features N] [--trees N]
        [--classes K] [--no-in-memory] [--before]

Each round times, interleaved so that a busy moment of the shared machine falls on all alike,
XGBoost-style boosting (50 rounds, depth 6, binary target) on the same table:

- locally with one kernel thread, from the float matrix in memory (the issue's reference:
  target at most 1.5x);
- through a ``LocalCluster`` of two single-thread worker processes with the table in memory
  (the fit process bins it, scatters the codes to partition actors and moves rows itself);
- out of core on the same cluster: the table as four Parquet parts, which the workers read, bin
  and keep (``fit_parts``); the fit process holds no row; actor 0 grows each round's trees
  among the workers, over direct connections;
- with ``--before``, out of core as before that: the trees grown in the fit process, every
  level a call to every actor through Dask's actor proxies (the A/B of the change, in one run).

With ``--cpu``, the out-of-core fits' CPU time is printed beside their wall time, a tree level
at a time (wall time on a loaded machine is mostly waiting for a core; CPU time is not): the
fit process's, and on each worker the process's (reading and binning included) and the
threads' that run the actor's calls (``levels`` and the round's start and end on every actor;
on actor 0 the round's growth, its own share and the exchanges with its peers included).

The models are checked equal (predictions within 1e-12). Medians over rounds and their
ratios to the local fit are printed; the cluster is started once and warmed with small fits.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import XGBoostClassifier, parallel_backend
from engine.parallel import DataPart


def read_part(path: str) -> tuple[np.ndarray, np.ndarray, None]:
    """One part's rows, on a Dask worker (this module is importable there by name)."""
    table = pq.read_table(path)
    X = np.column_stack([table.column(name).to_numpy() for name in table.column_names[:-1]])
    return X, table.column("y").to_numpy().astype(np.float64), None


def _parts(directory: Path, X: np.ndarray, y: np.ndarray, n_parts: int) -> list[DataPart]:
    bounds = np.linspace(0, X.shape[0], n_parts + 1).astype(int)
    parts = []
    for index, (low, high) in enumerate(itertools.pairwise(bounds)):
        columns = {f"x{j}": X[low:high, j] for j in range(X.shape[1])}
        path = directory / f"part-{index:05d}.parquet"
        pq.write_table(pa.table({**columns, "y": y[low:high].astype(np.float64)}), path)
        parts.append(DataPart(str(path), int(low), int(high - low)))
    return parts


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _count_actor_cpu() -> None:
    """On a worker: wrap the actor's methods to add up their threads' CPU time (once)."""
    from engine.parallel import _dask_parts

    actor = _dask_parts.PartsActor
    if hasattr(actor, "cpu_counted"):
        return
    # Kept on the class: this module runs as __main__, whose functions reach a worker by
    # value, with copies of its globals.
    counts: dict[str, float] = {}
    actor.cpu_counted = counts  # type: ignore[attr-defined]
    for name in ("_grow_round", "levels", "start_trees", "end_round"):

        def counted(self: Any, *args: Any, _method: Any = getattr(actor, name), _name: str = name):
            start = time.thread_time()
            try:
                return _method(self, *args)
            finally:
                counts[_name] = counts.get(_name, 0.0) + time.thread_time() - start
                counts[_name + " calls"] = counts.get(_name + " calls", 0.0) + 1

        setattr(actor, name, counted)


def _cpu_now() -> dict[str, float]:
    """On a worker: its process's CPU seconds so far and the actor threads' by method."""
    from engine.parallel._dask_parts import PartsActor

    return {"process": time.process_time(), **getattr(PartsActor, "cpu_counted", {})}


def _cpu_fit(client: Any, fit: Callable[[], Any]) -> tuple[float, Any, dict[str, Any]]:
    """``fit()``'s wall time, result and CPU: the fit process's and each worker's, by method."""
    before = client.run(_cpu_now)
    cpu = time.process_time()
    wall, result = _timed(fit)
    cpu = time.process_time() - cpu
    after = client.run(_cpu_now)
    workers = {
        address: {key: value - before[address].get(key, 0.0) for key, value in now.items()}
        for address, now in after.items()
    }
    return wall, result, {"fit process": cpu, "workers": workers}


def _print_cpu(wall: float, cpu: dict[str, Any]) -> None:
    """One fit's CPU per tree level (the levels counted on a peer's ``levels`` calls)."""
    workers = list(cpu["workers"].values())
    levels = max(worker.get("levels calls", 0.0) for worker in workers) or 1.0
    line = [f"wall {1e3 * wall / levels:.2f} ms a level ({levels:.0f} levels)"]
    line.append(f"fit process {1e3 * cpu['fit process'] / levels:.2f}")
    for index, worker in enumerate(workers):
        calls = sum(worker.get(name, 0.0) for name in ("levels", "start_trees", "end_round"))
        line.append(
            f"worker {index}: process {1e3 * worker['process'] / levels:.2f}, "
            f"round growth {1e3 * worker.get('_grow_round', 0.0) / levels:.2f}, "
            f"actor calls {1e3 * calls / levels:.2f}"
        )
    print("    CPU ms a level: " + "; ".join(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=80_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument(
        "--classes",
        type=int,
        default=2,
        help="more than 2: multiclass (a round's K trees grow in lockstep out of core)",
    )
    parser.add_argument(
        "--in-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the cluster fit from the table in memory (scattered codes)",
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="also time the out-of-core fit as it ran before actor 0 coordinated the rounds: "
        "trees grown in the fit process, calling every actor through Dask's actor proxies "
        "(the client's event loop; the scheduler relays unless the client is direct)",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="CPU time per tree level of the out-of-core fits"
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also time the out-of-core fit with every peer's calls handed to its actor "
        "thread, as before they ran on small peers' event loops (DaskPartitions.inline_rows)",
    )
    args = parser.parse_args()
    import distributed

    from engine.parallel._dask_parts import DaskPartitions

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    signal = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.normal(size=args.rows)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, args.classes + 1)[1:-1]))
    params = {"n_estimators": args.trees, "max_depth": 6, "random_state": 0}
    with tempfile.TemporaryDirectory() as directory:
        parts = _parts(Path(directory), X, y, 4)
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = distributed.Client(cluster, set_as_default=False)
        try:
            warm = {**params, "n_estimators": 2}
            XGBoostClassifier(**warm).fit(X, y)
            with parallel_backend(client):
                XGBoostClassifier(**warm).fit(X, y)
                XGBoostClassifier(**warm).fit_parts(parts, read_part)
            if args.cpu:
                client.run(_count_actor_cpu)
            times: dict[str, list[float]] = {"local": [], "out of core": []}
            if args.in_memory:
                times["in memory"] = []
            if args.before:
                times["out of core, before"] = []
            if args.threads:
                times["out of core, threads"] = []
            for _ in range(args.rounds):
                t, local = _timed(lambda: XGBoostClassifier(**params).fit(X, y))
                times["local"].append(t)
                with parallel_backend(client):
                    fitted = []
                    if args.in_memory:
                        t, scattered = _timed(lambda: XGBoostClassifier(**params).fit(X, y))
                        times["in memory"].append(t)
                        fitted.append(scattered)
                    t, parted, cpu = _cpu_fit(
                        client, lambda: XGBoostClassifier(**params).fit_parts(parts, read_part)
                    )
                    times["out of core"].append(t)
                    if args.cpu:
                        _print_cpu(t, cpu)
                    fitted.append(parted)
                    if args.threads:
                        inline_rows, DaskPartitions.inline_rows = DaskPartitions.inline_rows, 0
                        try:
                            t, threaded, cpu = _cpu_fit(
                                client,
                                lambda: XGBoostClassifier(**params).fit_parts(parts, read_part),
                            )
                        finally:
                            DaskPartitions.inline_rows = inline_rows
                        times["out of core, threads"].append(t)
                        fitted.append(threaded)
                        if args.cpu:
                            _print_cpu(t, cpu)
                    if args.before:
                        DaskPartitions.direct = DaskPartitions.coordinated = False
                        try:
                            t, before = _timed(
                                lambda: XGBoostClassifier(**params).fit_parts(parts, read_part)
                            )
                        finally:
                            DaskPartitions.direct = DaskPartitions.coordinated = True
                        times["out of core, before"].append(t)
                        fitted.append(before)
                for other in fitted:
                    np.testing.assert_allclose(
                        other.predict_proba(X), local.predict_proba(X), rtol=0, atol=1e-12
                    )
                print({name: round(values[-1], 2) for name, values in times.items()}, flush=True)
        finally:
            client.close()
            cluster.close()
    base = statistics.median(times["local"])
    for name, values in times.items():
        median = statistics.median(values)
        ratios = [value / local for value, local in zip(values, times["local"], strict=True)]
        print(
            f"{name:>12}: median {median:.2f} s ({median / base:.2f}x the local fit; "
            f"median of the rounds' ratios {statistics.median(ratios):.2f}x)"
        )


if __name__ == "__main__":
    main()
