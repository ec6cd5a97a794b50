"""What the prediction log costs a predict, measured from outside on real servers.

    python -m benchmarks.prediction_log [--rows N] [--trees N] [--rounds N] [--calls N]
                                        [--clients N] [--duration S] [--output PATH]
                                        [--peer CHECKOUT]

Two ``coppice serve`` processes share one data directory (one SQLite file, one store): one
logs every row (``COPPICE_PREDICTION_LOG_RATE=1``), the other none (``0``). The ``binary``
forest is trained once through the API; both then serve the same model. Each round, in an
order that alternates between rounds so a neighbour's load falls on both sides alike:

- ``--calls`` sequential one-row ``/v1`` predicts on one kept-alive connection to each server
  (their p50);
- ``--clients`` threads, each with its own connection, sending one-row predicts to one server
  for ``--duration`` seconds, then to the other (their throughput and errors).

The figures are medians over rounds of each round's difference (p50 on − off) and ratio
(throughput on / off). Last, the logging server's log table is dropped under it (its storage
failing: every batch the writer tries is refused) and the concurrent phase runs against it
again: the requests that did not answer 200 are the errors, and ``/metrics`` says how many rows
the log counted as failed.

``--peer CHECKOUT`` starts a third server, logging every row, that runs the code of another
checkout (e.g. main's, to compare a change of the log with what it replaces), interleaved
with the other two in every round; each server's CPU counts the processes under it (the
log's writer process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks import service as svc
from benchmarks.machine import describe_machine
from benchmarks.progress import log
from tests.e2e.processes import Processes, start_server

RESULTS = svc.RESULTS_DIR / "prediction_log.json"
TARGET_P50_MS = 0.1
TARGET_THROUGHPUT_DROP = 0.05
# After a concurrent phase, the log's last batch is shipped within its linger (2 s) and then
# written: its CPU is counted until this long after the phase.
WRITER_SETTLE_SECONDS = 3.5


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.prediction_log")
    parser.add_argument("--rows", type=int, default=5_000, help="dataset rows (default 5,000)")
    parser.add_argument("--trees", type=int, default=100, help="forest size (default 100)")
    parser.add_argument("--rounds", type=int, default=6, help="paired rounds (default 6)")
    parser.add_argument("--calls", type=int, default=300, help="one-row calls a server a round")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds a concurrent phase")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--peer",
        type=Path,
        default=None,
        help="a checkout whose code a third server (logging on) runs, interleaved with ours",
    )
    return parser.parse_args(argv)


def one_row_p50(client: httpx.Client, url: str, bodies: list[dict[str, Any]], calls: int) -> float:
    """Median seconds of ``calls`` sequential one-row predicts (every answer must be 200)."""
    times = []
    for i in range(calls):
        started = time.perf_counter()
        client.post(url, json=bodies[i % len(bodies)]).raise_for_status()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def concurrent(
    base_url: str, url: str, data: svc.Data, args: argparse.Namespace, pid: int | None = None
) -> dict[str, Any]:
    """The concurrent phase; with ``pid``, also the server's CPU milliseconds per answered
    request, counted until ``WRITER_SETTLE_SECONDS`` after the phase (the log's writer lingers
    a second before a batch, so its last batch is counted too). On a machine others load, throughput
    follows the CPU the scheduler gives the server; its CPU per request does not."""
    settings = svc.Settings(
        rows=args.rows, trees=args.trees, n_jobs=2, fit_repeats=1, latency_calls=0,
        latency_warmup=0, predict_rows=0, predict_repeats=0, clients=args.clients,
        duration_s=args.duration,
    )  # fmt: skip
    server = None if pid is None else psutil.Process(pid)
    before = None if server is None else cpu_seconds(server)
    result = svc.measure_concurrent(base_url, url, data, settings)
    if server is not None and before is not None:
        time.sleep(WRITER_SETTLE_SECONDS)
        after = cpu_seconds(server)
        answered = max(1, result["requests"] - result["errors"])
        result["cpu_ms_per_request"] = 1e3 * (after[0] - before[0]) / answered
        result["api_cpu_ms_per_request"] = 1e3 * (after[1] - before[1]) / answered
    return result


def cpu_seconds(server: psutil.Process) -> tuple[float, float]:
    """CPU seconds (user + system) of the server with the processes under it (the log's
    writer process, a child of the fork server), and of the server's own process alone."""
    own = sum(server.cpu_times()[:2])
    total = own
    for child in server.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:2])
    return total, own


@contextlib.contextmanager
def python_path(path: Path) -> Iterator[None]:
    """Servers started inside run the code at ``path``: their environment and working
    directory are this one's, and ``python -m`` puts the working directory first."""
    before, here = os.environ.get("PYTHONPATH"), Path.cwd()
    os.environ["PYTHONPATH"] = str(path)
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def failed_rows(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    found = re.search(r'coppice_prediction_log_dropped_total\{reason="write_failed"\} (\S+)', text)
    return float(found[1]) if found else 0.0


def logged_rows(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    return sum(
        float(v) for v in re.findall(r"coppice_predictions_logged_total\{[^}]*\} (\S+)", text)
    )


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    data = svc._data(svc.DATASET.with_samples(args.rows), workdir / "data")
    processes = Processes(workdir / "logs", data_dir=str(workdir / "coppice"))
    try:
        urls, pids = {}, {}
        # Started one after the other: the first migrates the shared database.
        for name, rate in (("off", "0"), ("on", "1")):
            urls[name], started = start_server(processes, name, prediction_log_rate=rate)
            pids[name] = started.pid
        if args.peer is not None:
            with python_path(args.peer):
                urls["peer"], started = start_server(processes, "peer", prediction_log_rate="1")
            pids["peer"] = started.pid
        clients = {name: httpx.Client(base_url=url, timeout=60) for name, url in urls.items()}
        fit = svc.Settings(
            rows=args.rows, trees=args.trees, n_jobs=2, fit_repeats=1, latency_calls=0,
            latency_warmup=0, predict_rows=0, predict_repeats=0, clients=0, duration_s=0.0,
        )  # fmt: skip
        _, model_id, _ = svc.measure_fit(clients["off"], data, fit)
        url = f"/v1/models/{model_id}/predict"
        bodies = [{"records": [svc._record(data.columns, row)]} for row in data.test_rows(200)]
        for client in clients.values():  # the model into each server's cache
            one_row_p50(client, url, bodies, 50)
        rounds: list[dict[str, Any]] = []
        for round_ in range(args.rounds):
            names = list(urls)
            shift = round_ % len(names)
            # Each server in every place of the order by turns, so a neighbour's load falls
            # on all of them alike.
            order = names[shift:] + names[:shift]
            if round_ // len(names) % 2:
                order.reverse()
            p50 = {name: one_row_p50(clients[name], url, bodies, args.calls) for name in order}
            load = {name: concurrent(urls[name], url, data, args, pids[name]) for name in order}
            rounds.append({"p50_ms": {k: v * 1e3 for k, v in p50.items()}, "concurrent": load})
            log(
                f"round {round_ + 1}: one-row p50 on {p50['on'] * 1e3:.3f} ms, off "
                f"{p50['off'] * 1e3:.3f} ms; {args.clients} clients on "
                f"{load['on']['throughput_rps']:.0f} req/s, off "
                f"{load['off']['throughput_rps']:.0f} req/s; CPU a request on "
                f"{load['on']['cpu_ms_per_request']:.3f} ms (API process "
                f"{load['on']['api_cpu_ms_per_request']:.3f}), off "
                f"{load['off']['cpu_ms_per_request']:.3f} ms; errors "
                f"{load['on']['errors']} / {load['off']['errors']}"
                + (
                    ""
                    if "peer" not in load
                    else f"; peer p50 {p50['peer'] * 1e3:.3f} ms, "
                    f"{load['peer']['throughput_rps']:.0f} req/s, CPU a request "
                    f"{load['peer']['cpu_ms_per_request']:.3f} ms (API process "
                    f"{load['peer']['api_cpu_ms_per_request']:.3f})"
                )
            )
        logged = logged_rows(clients["on"])
        # The log's storage fails: its table is gone, so every batch the writer tries is
        # refused by the database while the server goes on answering.
        with sqlite3.connect(workdir / "coppice" / "coppice.db", timeout=60) as connection:
            connection.execute("DROP TABLE prediction_log")
        failed_before = failed_rows(clients["on"])
        failing_p50 = one_row_p50(clients["on"], url, bodies, args.calls)
        failing = concurrent(urls["on"], url, data, args)
        time.sleep(WRITER_SETTLE_SECONDS)  # the writer's last batches
        failed = failed_rows(clients["on"]) - failed_before
        log(
            f"log storage failing: {failing['requests']} requests, {failing['errors']} errors, "
            f"{failed:.0f} rows counted as failed; one-row p50 {failing_p50 * 1e3:.3f} ms"
        )
        for client in clients.values():
            client.close()
    finally:
        processes.stop_all()
    growth = [r["p50_ms"]["on"] - r["p50_ms"]["off"] for r in rounds]

    def each(side: str, key: str) -> list[float]:
        return [float(r["concurrent"][side][key]) for r in rounds]

    ratio = [
        on / off
        for on, off in zip(each("on", "throughput_rps"), each("off", "throughput_rps"), strict=True)
    ]
    cpu = [
        on / off
        for on, off in zip(
            each("on", "cpu_ms_per_request"), each("off", "cpu_ms_per_request"), strict=True
        )
    ]
    peer: dict[str, Any] = {}
    if args.peer is not None:
        peer = {
            "path": str(args.peer),
            "p50_growth_ms": statistics.median(
                r["p50_ms"]["peer"] - r["p50_ms"]["off"] for r in rounds
            ),
            "throughput_ratio": statistics.median(
                a / b
                for a, b in zip(
                    each("peer", "throughput_rps"), each("off", "throughput_rps"), strict=True
                )
            ),
            "cpu_per_request_ratio": statistics.median(
                a / b
                for a, b in zip(
                    each("peer", "cpu_ms_per_request"),
                    each("off", "cpu_ms_per_request"),
                    strict=True,
                )
            ),
            "throughput_ratio_on_over_peer": statistics.median(
                a / b
                for a, b in zip(
                    each("on", "throughput_rps"), each("peer", "throughput_rps"), strict=True
                )
            ),
        }
    return {
        "peer": peer,
        "model_id": model_id,
        "rounds": rounds,
        "p50_on_ms": statistics.median(r["p50_ms"]["on"] for r in rounds),
        "p50_off_ms": statistics.median(r["p50_ms"]["off"] for r in rounds),
        "p50_growth_ms": statistics.median(growth),
        "p50_growth_all_ms": growth,
        "throughput_on_rps": statistics.median(each("on", "throughput_rps")),
        "throughput_off_rps": statistics.median(each("off", "throughput_rps")),
        "throughput_ratio": statistics.median(ratio),
        "throughput_ratio_all": ratio,
        "cpu_per_request_on_ms": statistics.median(each("on", "cpu_ms_per_request")),
        "cpu_per_request_off_ms": statistics.median(each("off", "cpu_ms_per_request")),
        "api_cpu_per_request_on_ms": statistics.median(each("on", "api_cpu_ms_per_request")),
        "cpu_per_request_ratio": statistics.median(cpu),
        "cpu_per_request_ratio_all": cpu,
        "errors_on": sum(r["concurrent"]["on"]["errors"] for r in rounds),
        "errors_off": sum(r["concurrent"]["off"]["errors"] for r in rounds),
        "rows_logged": logged,
        "failing": {
            "requests": failing["requests"],
            "errors": failing["errors"],
            "throughput_rps": failing["throughput_rps"],
            "one_row_p50_ms": failing_p50 * 1e3,
            "rows_counted_failed": failed,
        },
    }


def render(result: dict[str, Any]) -> str:
    drop = 1 - result["throughput_ratio"]
    failing = result["failing"]
    peer = result["peer"]
    return "\n".join(
        [
            *(
                []
                if not peer
                else [
                    f"peer ({peer['path']}, logging on) against off: p50 "
                    f"{peer['p50_growth_ms']:+.3f} ms, throughput "
                    f"{100 * (peer['throughput_ratio'] - 1):+.1f}%, CPU a request "
                    f"{100 * (peer['cpu_per_request_ratio'] - 1):+.1f}%; this tree's "
                    f"throughput over the peer's {peer['throughput_ratio_on_over_peer']:.3f}",
                    "",
                ]
            ),
            "| measure | logging off | logging on | difference | target |",
            "|---|---|---|---|---|",
            f"| one-row predict p50 | {result['p50_off_ms']:.3f} ms | {result['p50_on_ms']:.3f} ms "
            f"| {result['p50_growth_ms']:+.3f} ms | ≤ +{TARGET_P50_MS} ms |",
            f"| throughput, 16 clients | {result['throughput_off_rps']:.0f} req/s | "
            f"{result['throughput_on_rps']:.0f} req/s | {-100 * drop:+.1f}% | ≥ "
            f"{-100 * TARGET_THROUGHPUT_DROP:.0f}% |",
            f"| server CPU per request, 16 clients (writer process included) | "
            f"{result['cpu_per_request_off_ms']:.3f} ms | "
            f"{result['cpu_per_request_on_ms']:.3f} ms (API process "
            f"{result['api_cpu_per_request_on_ms']:.3f} ms) | "
            f"{100 * (result['cpu_per_request_ratio'] - 1):+.1f}% | |",
            f"| errors with the log's storage failing | — | {failing['errors']} of "
            f"{failing['requests']} | {failing['rows_counted_failed']:.0f} rows counted failed | 0 |",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="coppice-bench-log-") as tmp:
        result = run(args, Path(tmp))
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
