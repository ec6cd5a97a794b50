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
            times: dict[str, list[float]] = {"local": [], "out of core": []}
            if args.in_memory:
                times["in memory"] = []
            if args.before:
                times["out of core, before"] = []
            for _ in range(args.rounds):
                t, local = _timed(lambda: XGBoostClassifier(**params).fit(X, y))
                times["local"].append(t)
                with parallel_backend(client):
                    fitted = []
                    if args.in_memory:
                        t, scattered = _timed(lambda: XGBoostClassifier(**params).fit(X, y))
                        times["in memory"].append(t)
                        fitted.append(scattered)
                    t, parted = _timed(
                        lambda: XGBoostClassifier(**params).fit_parts(parts, read_part)
                    )
                    times["out of core"].append(t)
                    fitted.append(parted)
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
