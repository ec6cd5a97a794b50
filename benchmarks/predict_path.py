"""The ``/v1`` predict path against its floors, measured from outside on a real server.

    python -m benchmarks.predict_path [--rows N] [--trees N] [--predict-rows N] [--rounds N]
                                      [--calls N] [--output PATH]

Two ratios (issue 26, "The predict path itself"):

- a ``--predict-rows``-row ``{"columns", "rows"}`` request (body encoded once, before timing)
  over the in-process ``predict`` of the same rows by the same forest (fitted in this process
  with the params and seed the service resolved; the share of equal predictions is reported);
- a one-row ``{"records"}`` predict's p50 over the p50 of ``GET /v2/health/live`` on the same
  server and connection (the framework-and-loopback floor).

Each round times one large request, then the in-process predict, then ``--calls`` one-row
predicts alternating with as many health calls; the figures are medians over the rounds, so
a neighbour's load falls on both sides of each ratio alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks import service as svc
from benchmarks.machine import describe_machine
from benchmarks.progress import log
from tests.e2e.processes import Processes, free_port, wait_until_ready

RESULTS = svc.RESULTS_DIR / "predict_path.json"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.predict_path")
    parser.add_argument("--rows", type=int, default=20_000, help="dataset rows (default 20,000)")
    parser.add_argument("--trees", type=int, default=100, help="forest size (default 100)")
    parser.add_argument("--n-jobs", type=int, default=2, help="processes per fit (default 2)")
    parser.add_argument("--predict-rows", type=int, default=20_000, help="large request rows")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--calls", type=int, default=200, help="one-row calls a round")
    parser.add_argument("--output", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def run_rounds(
    client: httpx.Client, url: str, data: svc.Data, model: Any, args: argparse.Namespace
) -> dict[str, Any]:
    rows = data.test_rows(args.predict_rows)
    matrix = np.asarray(rows)
    content = json.dumps({"columns": data.columns, "rows": rows}).encode()
    headers = {"content-type": "application/json"}
    one_row = [{"records": [svc._record(data.columns, row)]} for row in data.test_rows(50)]
    for body in one_row:  # warm-up: the model into the cache, the connection open
        client.post(url, json=body).raise_for_status()
    served = client.post(url, content=content, headers=headers).json()["predictions"]
    agreement = float(np.mean(np.asarray(served) == model.predict(matrix)))
    large, local, predict_p50, health_p50 = [], [], [], []
    for round_ in range(args.rounds):
        started = time.perf_counter()
        client.post(url, content=content, headers=headers).raise_for_status()
        large.append(time.perf_counter() - started)
        started = time.perf_counter()
        model.predict(matrix)
        local.append(time.perf_counter() - started)
        predicts, healths = [], []
        for i in range(args.calls):
            started = time.perf_counter()
            client.post(url, json=one_row[i % len(one_row)]).raise_for_status()
            predicts.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.get("/v2/health/live").raise_for_status()
            healths.append(time.perf_counter() - started)
        predict_p50.append(statistics.median(predicts))
        health_p50.append(statistics.median(healths))
        log(
            f"round {round_ + 1}: {args.predict_rows} rows {large[-1]:.3f} s (in-process "
            f"{local[-1]:.3f} s); one row p50 {predict_p50[-1] * 1e3:.2f} ms, health "
            f"{health_p50[-1] * 1e3:.2f} ms"
        )
    large_s, local_s = statistics.median(large), statistics.median(local)
    one_ms, health_ms = statistics.median(predict_p50) * 1e3, statistics.median(health_p50) * 1e3
    return {
        "rows": args.predict_rows,
        "body_bytes": len(content),
        "agreement": agreement,
        "large_request_s": large_s,
        "in_process_s": local_s,
        "large_ratio": large_s / local_s,
        "large_all_s": large,
        "in_process_all_s": local,
        "one_row_p50_ms": one_ms,
        "health_p50_ms": health_ms,
        "one_row_ratio": one_ms / health_ms,
        "one_row_p50_all_ms": [v * 1e3 for v in predict_p50],
        "health_p50_all_ms": [v * 1e3 for v in health_p50],
    }


def render(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            "| measure | value | floor | ratio |",
            "|---|---|---|---|",
            f"| {result['rows']:,}-row predict | {result['large_request_s']:.3f} s | in-process "
            f"{result['in_process_s']:.3f} s | {result['large_ratio']:.2f}× |",
            f"| one-row predict p50 | {result['one_row_p50_ms']:.2f} ms | health "
            f"{result['health_p50_ms']:.2f} ms | {result['one_row_ratio']:.2f}× |",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = svc.Settings(
        rows=args.rows, trees=args.trees, n_jobs=args.n_jobs, fit_repeats=1, latency_calls=0,
        latency_warmup=0, predict_rows=args.predict_rows, predict_repeats=0, clients=0,
        duration_s=0.0,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="coppice-bench-predict-") as tmp:
        workdir = Path(tmp)
        data = svc._data(svc.DATASET.with_samples(args.rows), workdir / "data")
        processes = Processes(workdir / "logs", data_dir=str(workdir / "coppice"))
        try:
            port = free_port()
            server = processes.start("serve", "serve", "--port", str(port))
            base_url = f"http://127.0.0.1:{port}"
            wait_until_ready(base_url, server)
            with httpx.Client(base_url=base_url, timeout=600) as client:
                _, model_id, model = svc.measure_fit(client, data, settings)
                result = run_rounds(client, f"/v1/models/{model_id}/predict", data, model, args)
        finally:
            processes.stop_all()
    payload = {"args": vars(args) | {"output": str(args.output)}, "machine": describe_machine()}
    payload["result"] = result
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=2) + "\n")
    sys.stdout.write(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
