"""Soak: many predictions at high concurrency against one real server, watching its memory.

    python -m benchmarks.soak [--requests N] [--concurrency N] [--warmup N] [--rows N]
                              [--max-growth-mib M] [--max-growth-pct P] [--output PATH]

Starts ``coppice serve`` (embedded worker, SQLite in a temporary data dir), trains a small
random forest through the API, sends ``--warmup`` unmeasured predictions, then ``--requests``
one-row predictions from ``--concurrency`` threads (each with its own kept-alive connection).
Meanwhile the resident memory (``VmRSS``) of the server and every process of its session (the
worker's fork server and fits) is sampled every ``--sample-seconds``.

It fails (exit 1) on any error response or transport error, or when memory is not flat: the
growth over the second half of the measured phase (median of the last samples minus median
of the samples around the half-way mark) must stay within ``--max-growth-mib`` or
``--max-growth-pct`` of the RSS at the half-way mark, whichever is larger. Progress goes to
stderr, a markdown summary to stdout, the results to a JSON file (and a markdown copy).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.machine import describe_machine
from benchmarks.progress import log
from benchmarks.report import render_machine
from tests.e2e.processes import live_processes, serving, wait_for_jobs

RESULTS_DIR = Path(__file__).resolve().parent / "results"
MIB = 1024 * 1024
FEATURES = [f"x{i}" for i in range(8)]
# Medians over this many samples at each end of the compared window smooth out GC and
# allocator noise.
EDGE_SAMPLES = 5


@dataclass(frozen=True)
class Settings:
    requests: int
    concurrency: int
    warmup: int
    rows: int
    trees: int
    sample_seconds: float
    max_growth_mib: float
    max_growth_pct: float


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path]:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0] if __doc__ else ""
    )
    parser.add_argument("--requests", type=int, default=20_000, help="measured predictions")
    parser.add_argument("--concurrency", type=int, default=32, help="client threads")
    parser.add_argument("--warmup", type=int, default=2_000, help="unmeasured predictions first")
    parser.add_argument("--rows", type=int, default=2_000, help="training rows")
    parser.add_argument("--trees", type=int, default=50, help="n_estimators of the forest")
    parser.add_argument("--sample-seconds", type=float, default=0.5, help="RSS sampling period")
    parser.add_argument("--max-growth-mib", type=float, default=8.0, help="allowed RSS growth")
    parser.add_argument("--max-growth-pct", type=float, default=3.0, help="... or this %% of it")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "soak.json")
    args = parser.parse_args(argv)
    # The option names are the field names (dashes become underscores).
    settings = Settings(**{field.name: getattr(args, field.name) for field in fields(Settings)})
    return settings, args.output


# --- memory -----------------------------------------------------------------------------------


def _session_rss(session_id: int) -> tuple[int, int]:
    """Total VmRSS of the processes in a session, and how many there are, from ``/proc``."""
    total, count = 0, 0
    for member in live_processes():
        if member.session != session_id:
            continue
        try:
            status = Path(f"/proc/{member.pid}/status").read_text()
        except OSError:
            continue  # the process ended while being read
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
                count += 1
    return total, count


class MemorySampler(threading.Thread):
    """Samples the server's session RSS every ``period`` seconds until stopped."""

    def __init__(self, session_id: int, period: float) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.session_id, self.period = session_id, period
        self.samples: list[tuple[float, int, int]] = []  # (seconds, rss bytes, processes)
        self.phase_marks: dict[str, int] = {}
        self._halt = threading.Event()
        self._start = time.monotonic()

    def mark(self, phase: str) -> None:
        self.phase_marks[phase] = len(self.samples)

    def run(self) -> None:
        while not self._halt.is_set():
            rss, count = _session_rss(self.session_id)
            self.samples.append((time.monotonic() - self._start, rss, count))
            self._halt.wait(self.period)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def judge_memory(samples: Sequence[int], settings: Settings) -> dict[str, Any]:
    """Growth over the second half of the measured samples, and whether it is flat enough."""
    if len(samples) < 4 * EDGE_SAMPLES:
        return {"ok": False, "reason": f"only {len(samples)} samples; run longer"}
    half = len(samples) // 2
    middle = statistics.median(samples[half - EDGE_SAMPLES // 2 : half + EDGE_SAMPLES // 2 + 1])
    end = statistics.median(samples[-EDGE_SAMPLES:])
    growth = end - middle
    allowed = max(settings.max_growth_mib * MIB, settings.max_growth_pct / 100 * middle)
    return {
        "ok": growth <= allowed,
        "half_rss_mib": middle / MIB,
        "end_rss_mib": end / MIB,
        "growth_mib": growth / MIB,
        "growth_pct": 100 * growth / middle,
        "allowed_mib": allowed / MIB,
    }


# --- the model --------------------------------------------------------------------------------


def _training_csv(rows: int) -> bytes:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, len(FEATURES)))
    y = np.where(X[:, 0] + X[:, 1] ** 2 > 0.5, "yes", "no")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*FEATURES, "y"])
    writer.writerows([*map(float, row), label] for row, label in zip(X, y, strict=True))
    return buffer.getvalue().encode()


def train(client: httpx.Client, settings: Settings, processes: Any) -> str:
    uploaded = client.post(
        "/v1/datasets", files={"file": ("soak.csv", _training_csv(settings.rows))}
    )
    uploaded.raise_for_status()
    job = client.post(
        "/v1/jobs",
        json={
            "dataset_id": uploaded.json()["id"],
            "target": "y",
            "method": "random_forest",
            "params": {"n_estimators": settings.trees},
            "seed": 0,
        },
    )
    job.raise_for_status()
    ended = wait_for_jobs(client, [job.json()["id"]], timeout=300, logs=processes)
    result = next(iter(ended.values()))
    if result["status"] != "succeeded":
        raise RuntimeError(f"the training job ended {result['status']}: {result['error']}")
    return str(result["model_id"])


# --- the load ---------------------------------------------------------------------------------


def send(base_url: str, model_id: str, total: int, concurrency: int) -> dict[str, Any]:
    """``total`` one-row predictions from ``concurrency`` threads; latencies and errors."""
    rng = np.random.default_rng(1)
    bodies = [
        {"records": [dict(zip(FEATURES, map(float, row), strict=True))]}
        for row in rng.standard_normal((500, len(FEATURES)))
    ]
    url = f"/v1/models/{model_id}/predict"
    lock = threading.Lock()
    counter = {"next": 0}
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[list[str]] = [[] for _ in range(concurrency)]
    ready = threading.Barrier(concurrency + 1)

    def take() -> int | None:
        with lock:
            index = counter["next"]
            if index >= total:
                return None
            counter["next"] = index + 1
            return index

    def client_loop(slot: int) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            client.get("/v2/health/ready")  # connect before the clock starts
            ready.wait(timeout=120)
            while (index := take()) is not None:
                began = time.perf_counter()
                try:
                    response = client.post(url, json=bodies[index % len(bodies)])
                except httpx.HTTPError as error:
                    errors[slot].append(f"{type(error).__name__}: {error}")
                    continue
                if response.status_code == 200:
                    latencies[slot].append(time.perf_counter() - began)
                else:
                    errors[slot].append(f"{response.status_code}: {response.text[:200]}")

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait(timeout=120)
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done = np.asarray([value for per_thread in latencies for value in per_thread]) * 1000
    failures = [error for per_thread in errors for error in per_thread]
    return {
        "requests": total,
        "ok": int(done.size),
        "errors": len(failures),
        "first_errors": failures[:5],
        "seconds": elapsed,
        "throughput_rps": done.size / elapsed,
        "p50_ms": float(np.percentile(done, 50)) if done.size else None,
        "p99_ms": float(np.percentile(done, 99)) if done.size else None,
        "max_ms": float(done.max()) if done.size else None,
    }


# --- the report -------------------------------------------------------------------------------


def render(payload: dict[str, Any]) -> str:
    s, load, memory = payload["settings"], payload["load"], payload["memory"]
    timeline = ", ".join(
        f"{seconds:.0f} s {rss:.0f}" for seconds, rss in payload["rss_timeline_mib"]
    )
    verdict = "PASS" if payload["passed"] else "FAIL"
    lines = [
        f"## Soak: {s['requests']:,} one-row predictions at concurrency {s['concurrency']} "
        f"({verdict})",
        "",
        render_machine(payload["machine"]),
        "",
        "| measure | value |",
        "|---|---|",
        f"| requests / errors | {load['requests']:,} / {load['errors']} |",
        f"| throughput | {load['throughput_rps']:.0f} req/s over {load['seconds']:.1f} s |",
        f"| latency p50 / p99 / max | {load['p50_ms']:.1f} / {load['p99_ms']:.1f} / "
        f"{load['max_ms']:.1f} ms |",
        f"| server RSS (session) at half-way / end | {memory.get('half_rss_mib', 0):.1f} / "
        f"{memory.get('end_rss_mib', 0):.1f} MiB |",
        f"| growth over the second half | {memory.get('growth_mib', 0):+.1f} MiB "
        f"({memory.get('growth_pct', 0):+.2f}%; allowed {memory.get('allowed_mib', 0):.1f} MiB) |",
        "",
        f"RSS over time (MiB, from the server's start): {timeline}",
        "",
    ]
    return "\n".join(lines)


def _timeline(sampler: MemorySampler, points: int = 12) -> list[tuple[float, float]]:
    samples = sampler.samples
    step = max(1, len(samples) // points)
    picked = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    return [(seconds, rss / MIB) for seconds, rss, _ in picked]


def main(argv: Sequence[str] | None = None) -> int:
    settings, output = parse_args(argv)
    machine = describe_machine()
    log(f"machine: {machine['cpu']}, {machine['usable_cpus']} CPUs; settings: {settings}")
    with (
        tempfile.TemporaryDirectory(prefix="coppice-soak-") as tmp,
        serving(Path(tmp), worker_concurrency="1", log_format="json") as (url, processes),
    ):
        server = processes.started[0]
        sampler = MemorySampler(server.pid, settings.sample_seconds)
        sampler.start()
        with httpx.Client(base_url=url, timeout=120) as client:
            model_id = train(client, settings, processes)
        log(f"trained model {model_id}; warming up with {settings.warmup} predictions")
        sampler.mark("warmup")
        warmup = send(url, model_id, settings.warmup, settings.concurrency)
        sampler.mark("measured")
        log(f"sending {settings.requests} predictions at concurrency {settings.concurrency}")
        load = send(url, model_id, settings.requests, settings.concurrency)
        sampler.mark("end")
        sampler.stop()
        alive = server.alive()
    measured = [rss for _, rss, _ in sampler.samples[sampler.phase_marks["measured"] :]]
    memory = judge_memory(measured, settings)
    passed = load["errors"] == 0 and warmup["errors"] == 0 and memory["ok"] and alive
    payload = {
        "settings": asdict(settings),
        "machine": machine | {"load_average_at_end": os.getloadavg()[0]},
        "warmup": warmup,
        "load": load,
        "memory": memory,
        "rss_samples": sampler.samples,
        "phase_marks": sampler.phase_marks,
        "rss_timeline_mib": _timeline(sampler),
        "server_alive_at_end": alive,
        "passed": passed,
    }
    markdown = render(payload)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(payload, indent=2) + "\n")
    output.with_suffix(".md").write_text(markdown)
    log(f"wrote {output} and {output.with_suffix('.md')}")
    sys.stdout.write(markdown)
    if not passed:
        log(f"FAILED: errors {load['errors']} (first: {load['first_errors']}), memory {memory}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
