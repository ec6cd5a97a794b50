"""The ``/v1`` predict path against its floors, measured from outside on a real server.

    python -m benchmarks.predict_path [--rows N] [--trees N] [--predict-rows N] [--rounds N]
                                      [--calls N] [--output PATH] [--peer CHECKOUT]

Two ratios (issue 26, "The predict path itself"):

- a ``--predict-rows``-row ``{"columns", "rows"}`` request (body encoded once, before timing)
  over the in-process ``predict`` of the same rows by the same forest (fitted in this process
  with the params and seed the service resolved; the share of equal predictions is reported);
- a one-row ``{"records"}`` predict's p50 over the p50 of ``GET /v2/health/live`` on the same
  server and connection (the framework-and-loopback floor).

Each round times one large request, then the in-process predict, then ``--calls`` one-row
predicts alternating with as many health calls; the figures are medians over the rounds, so
a neighbour's load falls on both sides of each ratio alike. ``--peer CHECKOUT`` starts a
second server running another checkout's code on the same data directory; each round then
runs the same steps against both, in an order that rotates.
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
import psutil

from benchmarks import service as svc
from benchmarks.machine import describe_machine
from benchmarks.prediction_log import python_path
from benchmarks.progress import log
from tests.e2e.processes import Processes, start_server

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
    parser.add_argument(
        "--peer",
        type=Path,
        default=None,
        help="a checkout whose code a second server runs, interleaved with ours",
    )
    return parser.parse_args(argv)


def run_rounds(
    clients: dict[str, httpx.Client], url: str, data: svc.Data, model: Any,
    args: argparse.Namespace, pids: dict[str, int] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The rounds against each server in ``clients`` (``serve``, and ``peer`` with
    ``--peer``), their order rotating from round to round; the figures of ``serve`` at the
    top level, the peer's under ``peer``.

    With ``pids`` (each server's process), the large request's CPU time in the server's
    process (user + system, all its threads) is set beside the in-process predict's
    (``time.process_time``): on a machine others load, wall time follows the share of the
    cores the scheduler gives each side, CPU time much less."""
    servers = {name: psutil.Process(pid) for name, pid in (pids or {}).items()}
    rows = data.test_rows(args.predict_rows)
    matrix = np.asarray(rows)
    content = json.dumps({"columns": data.columns, "rows": rows}).encode()
    headers = {"content-type": "application/json"}
    one_row = [{"records": [svc._record(data.columns, row)]} for row in data.test_rows(50)]
    agreement = 1.0
    for client in clients.values():
        for body in one_row:  # warm-up: the model into the cache, the connection open
            client.post(url, json=body).raise_for_status()
        served = client.post(url, content=content, headers=headers).json()["predictions"]
        agreement = min(agreement, float(np.mean(np.asarray(served) == model.predict(matrix))))
    names = list(clients)
    large: dict[str, list[float]] = {name: [] for name in names}
    large_cpu: dict[str, list[float]] = {name: [] for name in names}
    one_row_cpu: dict[str, list[float]] = {name: [] for name in names}
    health_cpu: dict[str, list[float]] = {name: [] for name in names}
    local_cpu: dict[str, list[float]] = {name: [] for name in names}
    local: dict[str, list[float]] = {name: [] for name in names}
    predict_p50: dict[str, list[float]] = {name: [] for name in names}
    health_p50: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            client = clients[name]
            server = servers.get(name)
            cpu_before = _cpu(server)
            started = time.perf_counter()
            client.post(url, content=content, headers=headers).raise_for_status()
            large[name].append(time.perf_counter() - started)
            if server is not None:
                large_cpu[name].append(_cpu(server) - cpu_before)
            cpu_started = time.process_time()
            started = time.perf_counter()
            model.predict(matrix)
            local[name].append(time.perf_counter() - started)
            local_cpu[name].append(time.process_time() - cpu_started)
            predicts, healths = [], []
            for i in range(args.calls):
                started = time.perf_counter()
                client.post(url, json=one_row[i % len(one_row)]).raise_for_status()
                predicts.append(time.perf_counter() - started)
                started = time.perf_counter()
                client.get("/v2/health/live").raise_for_status()
                healths.append(time.perf_counter() - started)
            predict_p50[name].append(statistics.median(predicts))
            health_p50[name].append(statistics.median(healths))
            if server is not None:
                # The same calls again in two blocks, the server's CPU counted over each: its
                # clock ticks (10 ms) are too coarse for one call, and a loaded machine's
                # wall times follow the scheduler more than the work.
                for kind, calls in (("predict", one_row_cpu), ("health", health_cpu)):
                    before = _cpu(server)
                    for i in range(args.calls):
                        if kind == "predict":
                            client.post(url, json=one_row[i % len(one_row)]).raise_for_status()
                        else:
                            client.get("/v2/health/live").raise_for_status()
                    calls[name].append((_cpu(server) - before) / args.calls)
            log(
                f"round {round_ + 1} {name}: {args.predict_rows} rows {large[name][-1]:.3f} s "
                f"(in-process {local[name][-1]:.3f} s){_cpu_note(large_cpu[name], local_cpu[name])}; "
                f"one row p50 "
                f"{predict_p50[name][-1] * 1e3:.2f} ms, health {health_p50[name][-1] * 1e3:.2f} ms"
                + (
                    f"; server CPU a call {one_row_cpu[name][-1] * 1e3:.3f} / "
                    f"{health_cpu[name][-1] * 1e3:.3f} ms"
                    if server is not None
                    else ""
                )
            )

    def figures(name: str) -> dict[str, Any]:
        large_s, local_s = statistics.median(large[name]), statistics.median(local[name])
        one_ms = statistics.median(predict_p50[name]) * 1e3
        health_ms = statistics.median(health_p50[name]) * 1e3
        return {
            "rows": args.predict_rows,
            "body_bytes": len(content),
            "agreement": agreement,
            "large_request_s": large_s,
            "in_process_s": local_s,
            "large_ratio": large_s / local_s,
            # Medians of each round's own ratio, so a round's load is on both sides of it.
            "large_ratio_of_rounds": statistics.median(
                a / b for a, b in zip(large[name], local[name], strict=True)
            ),
            "large_all_s": large[name],
            "in_process_all_s": local[name],
            "one_row_p50_ms": one_ms,
            "health_p50_ms": health_ms,
            "one_row_ratio": one_ms / health_ms,
            "one_row_ratio_of_rounds": statistics.median(
                a / b for a, b in zip(predict_p50[name], health_p50[name], strict=True)
            ),
            "one_row_p50_all_ms": [v * 1e3 for v in predict_p50[name]],
            "health_p50_all_ms": [v * 1e3 for v in health_p50[name]],
        } | _cpu_figures(large_cpu[name], local_cpu[name], one_row_cpu[name], health_cpu[name])

    result = figures("serve")
    if "peer" in clients:
        result["peer"] = figures("peer")
    return result


def _cpu(server: psutil.Process | None) -> float:
    """CPU seconds (user + system) the server's process has used, all its threads."""
    return 0.0 if server is None else float(sum(server.cpu_times()[:2]))


def _cpu_note(server: list[float], local: list[float]) -> str:
    if not server:
        return ""
    return f", CPU {server[-1]:.3f} s (in-process {local[-1]:.3f} s)"


def _cpu_figures(
    server: list[float], local: list[float], one_row: list[float], health: list[float]
) -> dict[str, Any]:
    """The large request's server CPU against the in-process predict's, and a one-row
    predict's against a health check's, when measured."""
    if not server:
        return {}
    return {
        "one_row_cpu_ms": statistics.median(one_row) * 1e3,
        "health_cpu_ms": statistics.median(health) * 1e3,
        "one_row_cpu_ratio_of_rounds": statistics.median(
            a / b for a, b in zip(one_row, health, strict=True)
        ),
        "large_request_cpu_s": statistics.median(server),
        "in_process_cpu_s": statistics.median(local),
        "large_cpu_ratio_of_rounds": statistics.median(
            a / b for a, b in zip(server, local, strict=True)
        ),
        "large_request_cpu_all_s": server,
        "in_process_cpu_all_s": local,
    }


def render(result: dict[str, Any]) -> str:
    lines = ["| server | measure | value | floor | ratio | median of rounds' ratios |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, figures in (("this tree", result), ("peer", result.get("peer"))):
        if figures is None:
            continue
        lines += [
            f"| {name} | {figures['rows']:,}-row predict | {figures['large_request_s']:.3f} s | "
            f"in-process {figures['in_process_s']:.3f} s | {figures['large_ratio']:.2f}× | "
            f"{figures['large_ratio_of_rounds']:.2f}× |",
            f"| {name} | one-row predict p50 | {figures['one_row_p50_ms']:.2f} ms | health "
            f"{figures['health_p50_ms']:.2f} ms | {figures['one_row_ratio']:.2f}× | "
            f"{figures['one_row_ratio_of_rounds']:.2f}× |",
        ]
        if "large_request_cpu_s" in figures:
            lines.append(
                f"| {name} | {figures['rows']:,}-row predict, server CPU | "
                f"{figures['large_request_cpu_s']:.3f} s | in-process CPU "
                f"{figures['in_process_cpu_s']:.3f} s | "
                f"{figures['large_request_cpu_s'] / figures['in_process_cpu_s']:.2f}× | "
                f"{figures['large_cpu_ratio_of_rounds']:.2f}× |"
            )
            lines.append(
                f"| {name} | one-row predict, server CPU | {figures['one_row_cpu_ms']:.3f} ms | "
                f"health CPU {figures['health_cpu_ms']:.3f} ms | "
                f"{figures['one_row_cpu_ms'] / figures['health_cpu_ms']:.2f}× | "
                f"{figures['one_row_cpu_ratio_of_rounds']:.2f}× |"
            )
    return "\n".join([*lines, ""])


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
            base_url, started = start_server(processes, "serve")
            clients = {"serve": httpx.Client(base_url=base_url, timeout=600)}
            pids = {"serve": started.pid}
            _, model_id, model = svc.measure_fit(clients["serve"], data, settings)
            if args.peer is not None:  # started once the first has migrated the database
                with python_path(args.peer):
                    peer_url, peer = start_server(processes, "peer")
                clients["peer"] = httpx.Client(base_url=peer_url, timeout=600)
                pids["peer"] = peer.pid
            try:
                result = run_rounds(
                    clients, f"/v1/models/{model_id}/predict", data, model, args, pids
                )
            finally:
                for client in clients.values():
                    client.close()
        finally:
            processes.stop_all()
    payload = {
        "args": vars(args) | {"output": str(args.output), "peer": args.peer and str(args.peer)},
        "machine": describe_machine(),
    }
    payload["result"] = result
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(payload, indent=2) + "\n")
    sys.stdout.write(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
