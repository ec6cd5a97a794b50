"""A large forest through the service: its artifact's size, stored in the data store, and predicted.

    python -m benchmarks.artifact_size [--rows 1000000] [--features 40] [--trees 100]

Writes a noisy regression table (``rows`` x ``features`` standard normals, the target a sum of
a few of them plus as much noise, so fully grown trees keep about one leaf per row: the heavy
case), starts a real ``coppice serve`` (uvicorn, embedded worker, SQLite and the default data
store under a temporary data dir), uploads the table as CSV, trains a ``random_forest`` of
``trees`` trees on every row, and reports: the model's ``size_bytes`` and the object in the store
that holds it (its size must agree), the fit's wall time, and the first predict of 1,000 rows
(which loads the artifact from the store, verified) and a second one (from the model cache).
Memory: every process under the server is sampled twice a second (``psutil``); reported are the
fit process's RSS when its job's stage turned to "storing the model" and its peak from then to
the job's end (the artifact streamed into the store), the job's own ``peak_rss_bytes``, and the
serving process's RSS before the first predict and after it (the model loaded and cached).
Prints one JSON object. Issue 23: a 100-tree forest on 1 M x 40 weighs about 0.84 GiB, more
than a PostgreSQL ``bytea`` or SQLite BLOB may hold comfortably; here it lives in the store.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from benchmarks.progress import log
from tests.e2e.processes import Processes, free_port, wait_until_ready

SEED = 23


def write_table(path: Path, rows: int, features: int) -> None:
    """The CSV, written in blocks of rows so its memory stays small."""
    rng = np.random.default_rng(SEED)
    names = [f"f{i}" for i in range(features)]
    with path.open("w") as out:
        out.write(",".join([*names, "y"]) + "\n")
        for start in range(0, rows, 100_000):
            n = min(100_000, rows - start)
            X = rng.normal(size=(n, features))
            y = X[:, :5].sum(axis=1) + rng.normal(scale=2.0, size=n)
            np.savetxt(out, np.column_stack([X, y]), fmt="%.5g", delimiter=",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--processes", type=int, default=2, help="COPPICE_PROCESSES_PER_JOB")
    parser.add_argument(
        "--model-cache-gib", type=float, default=16.0, help="COPPICE_MODEL_CACHE_BYTES, in GiB"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coppice-artifact-") as tmp:
        root = Path(tmp)
        table = root / "table.csv"
        write_table(table, args.rows, args.features)
        log(f"wrote {table.stat().st_size / 2**20:.0f} MiB of CSV")
        port = free_port()
        processes = Processes(
            root / "logs",
            data_dir=str(root / "data"),
            log_format="text",
            max_upload_bytes=str(8 * 2**30),
            max_job_memory_bytes=str(64 * 2**30),
            processes_per_job=str(args.processes),
            model_cache_bytes=str(int(args.model_cache_gib * 2**30)),
        )
        try:
            server = processes.start("serve", "serve", "--port", str(port))
            base_url = f"http://127.0.0.1:{port}"
            wait_until_ready(base_url, server, timeout=120)
            with sampling(server.pid) as samples:
                result = _run(base_url, root, table, args, samples)
        finally:
            processes.stop_all()
    print(json.dumps(result, indent=2))


class Samples:
    """RSS of the server and every process under it, twice a second: ``(time, pid, rss)``."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.rows: list[tuple[float, int, int]] = []

    def take(self) -> None:
        server = psutil.Process(self.server_pid)
        now = time.monotonic()
        for process in [server, *server.children(recursive=True)]:
            try:
                self.rows.append((now, process.pid, process.memory_info().rss))
            except psutil.Error:  # ended between the listing and the reading
                continue

    def rss(self, pid: int) -> int:
        """The latest RSS sampled of ``pid``."""
        return max(((t, r) for t, p, r in self.rows if p == pid), default=(0.0, 0))[1]

    def biggest_after(self, since: float) -> tuple[int, int, int]:
        """``(pid, its RSS at the first sample from since, its peak from since)`` of the
        process under the server (not the server) with the highest RSS at ``since``."""
        window = [(t, p, r) for t, p, r in self.rows if t >= since and p != self.server_pid]
        if not window:
            return 0, 0, 0
        first = min(t for t, _, _ in window)
        pid = max((r, p) for t, p, r in window if t == first)[1]
        at_start = next(r for t, p, r in window if p == pid and t == first)
        return pid, at_start, max(r for _, p, r in window if p == pid)


@contextmanager
def sampling(server_pid: int, interval: float = 0.5) -> Iterator[Samples]:
    samples = Samples(server_pid)
    done = threading.Event()

    def loop() -> None:
        while not done.wait(interval):
            try:
                samples.take()
            except psutil.Error:
                return

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


def _run(
    base_url: str, root: Path, table: Path, args: argparse.Namespace, samples: Samples
) -> dict[str, Any]:
    with httpx.Client(base_url=base_url, timeout=3600) as client:
        started = time.perf_counter()
        with table.open("rb") as body:
            upload = client.post(
                "/v1/datasets", files={"file": ("table.csv", body, "text/csv")}, data={"name": "t"}
            )
        upload.raise_for_status()
        upload_s = time.perf_counter() - started
        log(f"uploaded in {upload_s:.1f} s")
        started = time.perf_counter()
        job = client.post(
            "/v1/jobs",
            json={
                "dataset_id": upload.json()["id"],
                "target": "y",
                "method": "random_forest",
                "params": {"n_estimators": args.trees},
                "validation": {"holdout": 0},
                "seed": SEED,
            },
        )
        job.raise_for_status()
        job_id = job.json()["id"]
        storing_since = None
        last_log = 0.0
        while True:
            state = client.get(f"/v1/jobs/{job_id}").json()
            if state["status"] in ("succeeded", "failed", "cancelled"):
                break
            if storing_since is None and "storing" in str(state.get("stage")):
                storing_since = time.monotonic()
                log(f"storing the model from {time.perf_counter() - started:.0f} s")
            if time.monotonic() - last_log > 30:
                last_log = time.monotonic()
                log(f"{state['status']} {state.get('progress')} {state.get('stage')}")
            time.sleep(1.0)
        fit_s = time.perf_counter() - started
        stored_s = None if storing_since is None else time.monotonic() - storing_since
        fit_pid, rss_storing, peak_storing = (
            samples.biggest_after(storing_since) if storing_since else (0, 0, 0)
        )
        log(f"job {state['status']}: {state.get('error')} resources {state.get('resources')}")
        if state["status"] != "succeeded":
            raise RuntimeError(f"the job ended {state['status']}: {state.get('error')}")
        model_id = state["model_id"]
        model = client.get(f"/v1/models/{model_id}").json()
        stored = root / "data" / "store" / "models" / model_id / "model.cpm"
        rng = np.random.default_rng(SEED + 1)
        rows = rng.normal(size=(1000, args.features)).round(5).tolist()
        request = {"columns": [f"f{i}" for i in range(args.features)], "rows": rows}
        serve_rss_before = samples.rss(samples.server_pid)
        timings = []
        for _ in range(2):
            started = time.perf_counter()
            predicted = client.post(f"/v1/models/{model_id}/predict", json=request)
            predicted.raise_for_status()
            timings.append(time.perf_counter() - started)
        return {
            "rows": args.rows,
            "features": args.features,
            "trees": args.trees,
            "csv_mib": round(table.stat().st_size / 2**20, 1),
            "upload_s": round(upload_s, 1),
            "fit_wall_s": round(fit_s, 1),
            "model_size_bytes": model["size_bytes"],
            "model_size_gib": round(model["size_bytes"] / 2**30, 3),
            "store_object_bytes": stored.stat().st_size,
            "fit_process_pid": fit_pid,
            "storing_s": None if stored_s is None else round(stored_s, 1),
            "fit_rss_at_storing_gib": round(rss_storing / 2**30, 3),
            "fit_rss_peak_while_storing_gib": round(peak_storing / 2**30, 3),
            "job_peak_rss_gib": round(
                (state.get("resources") or {}).get("peak_rss_bytes", 0) / 2**30, 3
            ),
            "job_resources": state.get("resources"),
            "serve_rss_before_predict_gib": round(serve_rss_before / 2**30, 3),
            "serve_rss_after_predicts_gib": round(
                psutil.Process(samples.server_pid).memory_info().rss / 2**30, 3
            ),
            "first_predict_1000_rows_s": round(timings[0], 2),
            "cached_predict_1000_rows_s": round(timings[1], 3),
            "predictions": len(predicted.json()["predictions"]),
        }


if __name__ == "__main__":
    main()
