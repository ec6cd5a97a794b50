"""The out-of-core scale test (issue 27, ``make scale-test``): a table larger than the Dask
workers' memory, trained through the service.

1. A ``dask scheduler`` and two ``dask worker`` processes (one thread each, a nanny each,
   ``--memory-limit`` per worker: the nanny kills a worker at 95% of it, the hard limit, since
   Dask cannot spill an actor's state; notes/distributed-data.md, "Testing on one machine").
2. The workers write the table: one seeded task per Parquet part (``ROWS_PER_PART`` rows,
   row groups of 2^17), so no process ever holds the table.
3. ``coppice serve`` (``COPPICE_DASK_SCHEDULER`` the cluster, ``COPPICE_IMPORT_ROOTS`` the
   parts' directory) registers the directory in place and trains XGBoost-style boosting on it
   (depth 6, 50 rounds by default): the workers read and bin their parts, the fit process
   grows the trees from their histograms (``engine.boosting._xgboost_parts``).
4. It reports the job's ``resources`` (the fit process's peak RSS among them), each worker's
   peak RSS (``getrusage`` through ``client.run``) and whether any worker was restarted (a
   nanny's kill at the memory limit), and fails when the job failed or a worker was.

    python -m benchmarks.scale_test                        # 16 M x 24, 1 GiB a worker
    python -m benchmarks.scale_test --rows 2000000 --rounds 5
    python -m benchmarks.scale_test --rows 2000000 --rounds 10 --method random_forest

Never run it beside benchmarks: it takes both cores and most of the memory for minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests.e2e.processes import coppice_environment, free_port, kill_sessions, serving, submit_job

ROWS_PER_PART = 500_000  # 24 float64 features + target: ~100 MB a part, under the 128 MiB aim
ROW_GROUP_ROWS = 1 << 17
JOB_TIMEOUT = 6 * 3600.0


def write_part(directory: str, index: int, n_rows: int, n_features: int, seed: int) -> int:
    """On a worker: part ``index`` of the table, its rows drawn from ``(seed, index)``, so the
    table is the same whatever worker writes which part. Returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng([seed, index])
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.01] = np.nan  # some missing values, as real tables have
    clean = np.nan_to_num(X[:, :4])
    signal = clean[:, 0] + clean[:, 1] * clean[:, 2] + np.sin(2 * clean[:, 3])
    y = (signal + 0.5 * rng.normal(size=n_rows) > 0).astype(np.float64)
    columns = {f"x{j:02d}": X[:, j] for j in range(n_features)}
    columns["y"] = y
    path = Path(directory) / f"part-{index:05d}.parquet"
    pq.write_table(pa.table(columns), path.with_suffix(".tmp"), row_group_size=ROW_GROUP_ROWS)
    path.with_suffix(".tmp").rename(path)
    return n_rows


def peak_rss_kib() -> int:
    """On a worker: its process's peak resident set since :func:`reset_peak` (KiB, Linux's
    ``VmHWM``; ``ru_maxrss`` where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def reset_peak() -> None:
    """On a worker: start its peak resident set again from now (Linux: ``clear_refs`` 5),
    so that the fit's peak is not the table writer's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


@contextmanager
def dask_cluster(log_dir: Path, n_workers: int, memory_limit: str) -> Iterator[str]:
    """A scheduler and ``n_workers`` single-thread workers with nannies; yields the address."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    log_dir.mkdir(parents=True, exist_ok=True)
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *command: str) -> None:
        with (log_dir / f"{name}.log").open("ab") as log:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", *command],
                    env=coppice_environment({}),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    start(
        "scheduler",
        "distributed.cli.dask_scheduler",
        *("--host", "127.0.0.1", "--port", str(port), "--no-dashboard"),
    )
    for index in range(n_workers):
        start(
            f"worker-{index}",
            "distributed.cli.dask_worker",
            address,
            *("--nthreads", "1", "--memory-limit", memory_limit, "--no-dashboard"),
            *("--host", "127.0.0.1"),
        )
    try:
        yield address
    finally:
        kill_sessions(process.pid for process in started)
        for process in started:
            process.wait()


def _worker_pids(client: Any) -> dict[str, int]:
    return dict(client.run(os.getpid))


def run(args: argparse.Namespace) -> dict[str, Any]:
    import distributed

    root = Path(args.dir or tempfile.mkdtemp(prefix="coppice-scale-"))
    parts_dir = root / "table"
    parts_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "rows": args.rows,
        "features": args.features,
        "raw_table_bytes": args.rows * (args.features + 1) * 8,
        "worker_memory_limit": args.memory_limit,
        "method": args.method,
        "rounds": args.rounds,
        "max_depth": args.max_depth,
    }
    with (
        dask_cluster(root / "dask", args.workers, args.memory_limit) as address,
        distributed.Client(address, timeout=60, set_as_default=False) as client,
    ):
        client.wait_for_workers(args.workers, timeout=120)
        client.run(_warm_worker)  # compile-cache loads before the baseline is read
        report["worker_baseline_kib"] = client.run(peak_rss_kib)
        pids = _worker_pids(client)
        started = time.monotonic()
        sizes = [
            min(ROWS_PER_PART, args.rows - offset) for offset in range(0, args.rows, ROWS_PER_PART)
        ]
        futures = client.map(
            write_part,
            [str(parts_dir)] * len(sizes),
            range(len(sizes)),
            sizes,
            [args.features] * len(sizes),
            [args.seed] * len(sizes),
            pure=False,
        )
        assert sum(client.gather(futures)) == args.rows
        del futures
        report["write_seconds"] = round(time.monotonic() - started, 1)
        report["worker_peak_writing_kib"] = client.run(peak_rss_kib)
        client.run(reset_peak)
        report["parts"] = len(sizes)
        with (
            serving(
                root / "service",
                dask_scheduler=address,
                import_roots=str(parts_dir),
                worker_concurrency="1",
            ) as (base_url, processes),
            httpx.Client(base_url=base_url, timeout=120) as http,
        ):
            registered = http.post(
                "/v1/datasets", json={"name": "scale", "source": {"url": str(parts_dir)}}
            )
            assert registered.status_code == 201, registered.text
            job_id = submit_job(
                http,
                dataset_id=registered.json()["id"],
                method=args.method,
                task="classification",
                target="y",
                params={"n_estimators": args.rounds, "max_depth": args.max_depth},
                validation={"holdout": args.holdout},
                seed=1,
            )
            job = _follow(http, job_id, processes)
        report["job_status"] = job["status"]
        report["job_error"] = job.get("error")
        report["resources"] = job.get("resources")
        report["worker_peak_fit_kib"] = client.run(peak_rss_kib)
        report["workers_restarted"] = _worker_pids(client) != pids
        report["model_id"] = job.get("model_id")
    return report


def _warm_worker() -> None:
    """On a worker: import what an out-of-core fit's actor imports, before the baseline."""
    importlib.import_module("engine.parallel._dask_parts")


def _follow(http: httpx.Client, job_id: str, processes: Any) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT
    last = ""
    while True:
        job: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()
        stage = f"{job['status']} {job.get('stage')}"
        if stage != last:
            print(f"[{time.strftime('%H:%M:%S')}] {stage}", flush=True)
            last = stage
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        if time.monotonic() > deadline:
            raise SystemExit(f"job stuck: {job}\n{processes.logs()}")
        time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=16_000_000)
    parser.add_argument("--features", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument(
        "--method",
        default="xgboost",
        choices=["xgboost", "random_forest", "extra_trees"],
        help="the job's method (rounds: its n_estimators)",
    )
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--holdout", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", help="where the table and the service's data go (a temp dir)")
    args = parser.parse_args()
    report = run(args)
    print(json.dumps(report, indent=2))
    if report["job_status"] != "succeeded" or report["workers_restarted"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
