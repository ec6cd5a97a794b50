"""The service end to end: training through the API against the same fit in-process, and
prediction latency and throughput over HTTP.

    python -m benchmarks.service [--rows N] [--trees N] [--n-jobs N] [--latency-calls N]
                                 [--predict-rows N] [--clients N] [--duration S] [--output PATH]

A real ``coppice serve`` (uvicorn, embedded worker, SQLite in a temporary data dir) is started
for the run. Every request goes through a real socket with httpx. The markdown table goes to
stdout, progress to stderr, the results to a JSON file (and a markdown copy beside it).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from benchmarks.datasets import DATASETS, DatasetSpec, load_dataset, write_dataset
from benchmarks.machine import describe_machine
from benchmarks.progress import log
from benchmarks.report import render_machine
from tests.e2e.processes import Processes, free_port, wait_until_ready

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATASET = next(spec for spec in DATASETS if spec.name == "binary")
TARGET = "y"
SEED = 0


@dataclass(frozen=True)
class Settings:
    """The knobs of one run, recorded in the results."""

    rows: int
    trees: int
    n_jobs: int
    fit_repeats: int
    latency_calls: int
    latency_warmup: int
    predict_rows: int
    predict_repeats: int
    clients: int
    duration_s: float


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.service", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DATASET.n_samples,
        help=f"rows of the '{DATASET.name}' dataset before its 80/20 split "
        f"(default {DATASET.n_samples:,})",
    )
    parser.add_argument("--trees", type=int, default=100, help="n_estimators (default 100)")
    parser.add_argument(
        "--n-jobs",
        type=int,
        default=2,
        help="processes per fit: COPPICE_PROCESSES_PER_JOB and the in-process n_jobs (default 2)",
    )
    parser.add_argument(
        "--fit-repeats", type=int, default=1, help="API fit / in-process fit pairs (default 1)"
    )
    parser.add_argument(
        "--latency-calls", type=int, default=1000, help="sequential 1-row predicts (default 1000)"
    )
    parser.add_argument(
        "--latency-warmup",
        type=int,
        default=50,
        help="unmeasured 1-row predicts first (default 50)",
    )
    parser.add_argument(
        "--predict-rows",
        type=int,
        default=20_000,
        help="rows of the large predict (default 20,000)",
    )
    parser.add_argument(
        "--predict-repeats", type=int, default=5, help="large predicts, median taken (default 5)"
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument(
        "--duration", type=float, default=10.0, help="seconds of the concurrent phase (default 10)"
    )
    parser.add_argument(
        "--output", type=Path, default=RESULTS_DIR / "service.json", help="results JSON"
    )
    args = parser.parse_args(argv)
    settings = Settings(
        rows=args.rows,
        trees=args.trees,
        n_jobs=args.n_jobs,
        fit_repeats=args.fit_repeats,
        latency_calls=args.latency_calls,
        latency_warmup=args.latency_warmup,
        predict_rows=args.predict_rows,
        predict_repeats=args.predict_repeats,
        clients=args.clients,
        duration_s=args.duration,
    )
    return settings, args.output


def _ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99, mean and max of latencies, in milliseconds."""
    values = np.asarray(seconds) * 1000
    return {
        "p50_ms": float(np.percentile(values, 50)),
        "p99_ms": float(np.percentile(values, 99)),
        "mean_ms": float(values.mean()),
        "max_ms": float(values.max()),
    }


# --- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    columns: list[str]
    X_train: NDArray[np.float64]
    y_train: NDArray[Any]
    X_test: NDArray[np.float64]

    def csv_bytes(self) -> bytes:
        """The training rows as a CSV file; floats written by repr, so they read back exactly."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([*self.columns, TARGET])
        for row, label in zip(self.X_train.tolist(), self.y_train.tolist(), strict=True):
            writer.writerow([*row, label])
        return buffer.getvalue().encode()

    def test_rows(self, n: int) -> list[list[float]]:
        """``n`` test rows, cycling through the test split when it is shorter."""
        index = np.arange(n) % len(self.X_test)
        rows: list[list[float]] = self.X_test[index].tolist()
        return rows


def _data(spec: DatasetSpec, workdir: Path) -> Data:
    loaded = load_dataset(write_dataset(spec, workdir))
    columns = [f"f{i}" for i in range(spec.n_features)]
    return Data(columns, loaded.X_train, loaded.y_train, loaded.X_test)


# --- training ---------------------------------------------------------------------------------


def _seconds_between(start: str, end: str) -> float:
    return (
        datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)
    ).total_seconds()


def _fit_through_api(
    client: httpx.Client, dataset_id: str, settings: Settings
) -> tuple[dict[str, Any], float]:
    """Submit the job and wait until it ends; returns the job and the client-side seconds.

    Waiting is ``GET /v1/jobs/{id}?wait=30``, as a client should: polling over HTTP every 50 ms
    instead costs the server ~8% of a core, which a fit on both cores of this machine feels.
    """
    started = time.perf_counter()
    response = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset_id,
            "target": TARGET,
            "task": "classification",
            "method": "random_forest",
            "params": {"n_estimators": settings.trees},
            # The in-process fit uses every row; so does the job.
            "validation": {"holdout": 0},
            "seed": SEED,
        },
    )
    response.raise_for_status()
    job_id = response.json()["id"]
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", params={"wait": 30}).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            elapsed = time.perf_counter() - started
            if job["status"] != "succeeded":
                raise RuntimeError(f"the training job ended {job['status']}: {job['error']}")
            return job, elapsed


def _fit_in_process(data: Data, params: dict[str, Any], n_jobs: int) -> tuple[Any, float]:
    """The same estimator with the params the service resolved (oob_score included)."""
    from engine import RandomForestClassifier

    model = RandomForestClassifier(**params, n_jobs=n_jobs, random_state=SEED)
    started = time.perf_counter()
    model.fit(data.X_train, data.y_train.astype(str))
    return model, time.perf_counter() - started


def measure_fit(
    client: httpx.Client, data: Data, settings: Settings
) -> tuple[dict[str, Any], str, Any]:
    """Upload, then API fit and in-process fit in turn; returns results, a model id and model."""
    body = data.csv_bytes()
    started = time.perf_counter()
    response = client.post(
        "/v1/datasets", files={"file": ("binary.csv", body, "text/csv")}, data={"name": "binary"}
    )
    response.raise_for_status()
    upload_s = time.perf_counter() - started
    dataset_id = response.json()["id"]
    log(f"uploaded {len(body) / 1e6:.1f} MB of CSV in {upload_s:.2f} s")

    runs: list[dict[str, Any]] = []
    model_id, local_model = "", None
    for repeat in range(settings.fit_repeats):
        job, api_s = _fit_through_api(client, dataset_id, settings)
        model_id = job["model_id"]
        model = client.get(f"/v1/models/{model_id}").json()
        local_model, local_s = _fit_in_process(data, model["params"], settings.n_jobs)
        run = {
            "api_s": api_s,
            "in_process_s": local_s,
            "overhead_s": api_s - local_s,
            "overhead_pct": 100 * (api_s - local_s) / local_s,
            "queued_s": _seconds_between(job["created_at"], job["started_at"]),
            "running_s": _seconds_between(job["started_at"], job["finished_at"]),
            "model_size_bytes": model["size_bytes"],
            "oob_accuracy": (model["metrics"].get("oob") or {}).get("accuracy"),
        }
        log(
            f"fit {repeat + 1}/{settings.fit_repeats}: API {api_s:.2f} s "
            f"(queued {run['queued_s']:.2f} s, running {run['running_s']:.2f} s), "
            f"in-process {local_s:.2f} s"
        )
        runs.append(run)
    summary = {
        key: statistics.median(run[key] for run in runs)
        for key in ("api_s", "in_process_s", "overhead_s", "overhead_pct", "queued_s", "running_s")
    }
    result = {
        "upload_s": upload_s,
        "upload_bytes": len(body),
        "train_rows": len(data.y_train),
        "runs": runs,
        **summary,
        "model_size_bytes": runs[-1]["model_size_bytes"],
    }
    return result, model_id, local_model


# --- prediction -------------------------------------------------------------------------------


def _record(columns: list[str], row: list[float]) -> dict[str, float]:
    return dict(zip(columns, row, strict=True))


def measure_latency(
    client: httpx.Client, url: str, data: Data, model: Any, settings: Settings
) -> dict[str, Any]:
    """Sequential one-row predicts on one kept-alive connection, after a warm-up."""
    rows = data.test_rows(settings.latency_calls + settings.latency_warmup)
    bodies = [{"records": [_record(data.columns, row)]} for row in rows]
    for body in bodies[: settings.latency_warmup]:
        client.post(url, json=body).raise_for_status()
    latencies = []
    for body in bodies[settings.latency_warmup :]:
        started = time.perf_counter()
        response = client.post(url, json=body)
        latencies.append(time.perf_counter() - started)
        response.raise_for_status()
    # The same call without HTTP: what the service adds around the model.
    local = []
    for row in rows[: min(200, len(rows))]:
        started = time.perf_counter()
        model.predict(np.asarray([row]))
        local.append(time.perf_counter() - started)
    return {"calls": len(latencies), **_ms(latencies), "in_process_p50_ms": _ms(local)["p50_ms"]}


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) the process ``pid`` has used so far."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def measure_batch(
    client: httpx.Client, url: str, data: Data, model: Any, settings: Settings, server_pid: int
) -> dict[str, Any]:
    """One request of ``predict_rows`` rows (columns/rows form), repeated; median taken.

    Beside the wall time, the CPU time the server process spent on each request: on a
    machine shared with other work the wall time swings with the neighbours' load, the CPU
    time much less (it counts the server's own work, on every thread, and not its waiting).
    """
    rows = data.test_rows(settings.predict_rows)
    content = json.dumps({"columns": data.columns, "rows": rows}).encode()
    headers = {"content-type": "application/json"}
    client.post(url, content=content, headers=headers).raise_for_status()  # warm-up
    timings, server_cpu = [], []
    for _ in range(settings.predict_repeats):
        cpu_before = _cpu_seconds(server_pid)
        started = time.perf_counter()
        response = client.post(url, content=content, headers=headers)
        timings.append(time.perf_counter() - started)
        server_cpu.append(_cpu_seconds(server_pid) - cpu_before)
        response.raise_for_status()
    served = response.json()["predictions"]
    started = time.perf_counter()
    local = model.predict(np.asarray(rows))
    local_s = time.perf_counter() - started
    return {
        "rows": len(rows),
        "body_bytes": len(content),
        "median_s": statistics.median(timings),
        "all_s": timings,
        "server_cpu_median_s": statistics.median(server_cpu),
        "server_cpu_all_s": server_cpu,
        "in_process_s": local_s,
        # Same data, params and seed: the served model and the in-process one should agree.
        "agreement": float(np.mean(np.asarray(served) == local)),
    }


def measure_concurrent(base_url: str, url: str, data: Data, settings: Settings) -> dict[str, Any]:
    """``clients`` threads, each with its own connection, sending 1-row predicts in a loop."""
    bodies = [{"records": [_record(data.columns, row)]} for row in data.test_rows(500)]
    latencies: list[list[float]] = [[] for _ in range(settings.clients)]
    errors = [0] * settings.clients
    clock = {"start": 0.0, "deadline": 0.0}

    def start_clock() -> None:
        clock["start"] = time.perf_counter()
        clock["deadline"] = clock["start"] + settings.duration_s

    # The clock starts once every client has connected, before any is released.
    start = threading.Barrier(settings.clients, action=start_clock)

    def client_loop(index: int) -> None:
        with httpx.Client(base_url=base_url, timeout=30) as client:
            client.get("/v2/health/ready")  # open the connection before the clock starts
            start.wait(timeout=120)
            n = index
            while time.perf_counter() < clock["deadline"]:
                body = bodies[n % len(bodies)]
                n += settings.clients
                began = time.perf_counter()
                try:
                    ok = client.post(url, json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies[index].append(time.perf_counter() - began)
                else:
                    errors[index] += 1

    threads = [
        threading.Thread(target=client_loop, args=(i,), daemon=True)
        for i in range(settings.clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Until the last client's last answer: requests in flight at the deadline count in full.
    elapsed = time.perf_counter() - clock["start"]
    done = [value for per_client in latencies for value in per_client]
    return {
        "clients": settings.clients,
        "duration_s": elapsed,
        "requests": len(done),
        "errors": sum(errors),
        "throughput_rps": len(done) / elapsed,
        **(_ms(done) if done else {}),
    }


# --- the report -------------------------------------------------------------------------------


def render(payload: dict[str, Any]) -> str:
    s, fit = payload["settings"], payload["fit"]
    latency, batch, load = payload["latency"], payload["batch"], payload["concurrent"]
    rows = [
        (
            "upload (CSV, multipart)",
            f"{fit['upload_s']:.2f} s",
            f"{fit['upload_bytes'] / 1e6:.1f} MB, {fit['train_rows']:,} rows",
        ),
        (
            "fit through the API",
            f"{fit['api_s']:.2f} s",
            f"submit → succeeded seen; queued {fit['queued_s']:.2f} s, running {fit['running_s']:.2f} s",
        ),
        ("same fit in-process", f"{fit['in_process_s']:.2f} s", f"n_jobs={s['n_jobs']}"),
        ("API overhead", f"{fit['overhead_s']:.2f} s", f"{fit['overhead_pct']:+.1f}%"),
        (
            "1-row predict p50 / p99",
            f"{latency['p50_ms']:.2f} / {latency['p99_ms']:.2f} ms",
            f"{latency['calls']} sequential calls; in-process p50 {latency['in_process_p50_ms']:.2f} ms",
        ),
        (
            f"{batch['rows']:,}-row predict",
            f"{batch['median_s']:.2f} s",
            f"median of {len(batch['all_s'])}; server CPU "
            f"{batch.get('server_cpu_median_s', float('nan')):.2f} s; "
            f"{batch['body_bytes'] / 1e6:.1f} MB body; in-process {batch['in_process_s']:.2f} s; "
            f"{batch['agreement']:.1%} same predictions",
        ),
        (
            f"{load['clients']} concurrent clients",
            f"{load['throughput_rps']:.0f} req/s",
            f"{load['duration_s']:.1f} s, {load['requests']:,} requests, {load['errors']} errors",
        ),
        (
            "… their latency p50 / p99",
            f"{load.get('p50_ms', float('nan')):.1f} / {load.get('p99_ms', float('nan')):.1f} ms",
            "",
        ),
    ]
    lines = [
        f"## Service: random forest ({s['trees']} trees) on `{DATASET.name}` "
        f"({s['rows']:,} rows before the split)",
        "",
        render_machine(payload["machine"]),
        "",
        "| measure | value | notes |",
        "|---|---|---|",
        *(f"| {name} | {value} | {notes} |" for name, value, notes in rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    settings, output = parse_args(argv)
    started = time.monotonic()
    machine = describe_machine()
    log(f"machine: {machine['cpu']}, {machine['usable_cpus']} CPUs; settings: {settings}")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coppice-bench-service-") as tmp:
        workdir = Path(tmp)
        data = _data(DATASET.with_samples(settings.rows), workdir / "data")
        processes = Processes(
            workdir / "logs",
            data_dir=str(workdir / "coppice"),
            processes_per_job=str(settings.n_jobs),
        )
        try:
            port = free_port()
            server = processes.start("serve", "serve", "--port", str(port))
            base_url = f"http://127.0.0.1:{port}"
            wait_until_ready(base_url, server)
            log(f"coppice serve on {base_url} (pid {server.pid})")
            with httpx.Client(base_url=base_url, timeout=600) as client:
                fit, model_id, model = measure_fit(client, data, settings)
                url = f"/v1/models/{model_id}/predict"
                latency = measure_latency(client, url, data, model, settings)
                log(
                    f"1-row predict: p50 {latency['p50_ms']:.2f} ms, p99 {latency['p99_ms']:.2f} ms"
                )
                batch = measure_batch(client, url, data, model, settings, server.pid)
                log(
                    f"{batch['rows']}-row predict: median {batch['median_s']:.2f} s, "
                    f"server CPU {batch['server_cpu_median_s']:.2f} s"
                )
            concurrent = measure_concurrent(base_url, url, data, settings)
            log(f"{settings.clients} clients: {concurrent['throughput_rps']:.0f} req/s")
        finally:
            processes.stop_all()
    payload = {
        "settings": asdict(settings),
        "machine": machine | {"load_average_at_end": os.getloadavg()[0]},
        "fit": fit,
        "latency": latency,
        "batch": batch,
        "concurrent": concurrent,
        "wall_time_s": time.monotonic() - started,
    }
    markdown = render(payload)
    output.write_text(json.dumps(payload, indent=2) + "\n")
    output.with_suffix(".md").write_text(markdown)
    log(f"wrote {output} and {output.with_suffix('.md')}")
    sys.stdout.write(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
