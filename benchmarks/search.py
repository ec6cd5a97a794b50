"""The auto search on the benchmark suite's ``binary`` dataset, against the default models.

    python -m benchmarks.search [--seconds 600] [--folds 5] [--rows N] [--output PATH]
    python -m benchmarks.search --speedup [--rows N]

A real ``coppice serve`` (uvicorn, an embedded worker running two fits at a time, SQLite in a
temporary data dir) trains everything through the API. The training split is uploaded as a
CSV; ``POST /v1/searches`` runs ``"auto": true`` with ``stack: true`` under a budget of
``--seconds``; then a grid search of the default random forest and the default XGBoost-style
model runs with the same seed, so with the same folds. The check: the auto search's best
model beats both defaults on CV ROC AUC, and the stacked ensemble is at least as good as the
best single candidate. The leaderboard as markdown goes to stdout, progress to stderr, the
results to a JSON file (and a markdown copy beside it). ``--speedup`` instead times one
search with one and with two worker processes.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.datasets import DATASETS, load_dataset, write_dataset
from benchmarks.machine import describe_machine
from benchmarks.progress import log
from tests.e2e.processes import Processes, start_server

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DATASET = next(spec for spec in DATASETS if spec.name == "binary")
SEED = 0
POLL_SECONDS = 5.0
WARM_UP_PAUSE = 10.0
SPEEDUP_CANDIDATES = 8


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="the auto search's budget")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=DATASET.n_samples, help="rows generated")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "search.json")
    parser.add_argument(
        "--speedup",
        action="store_true",
        help="instead: time an 8-candidate search with one and with two worker processes",
    )
    return parser.parse_args(argv)


def _csv(X: np.ndarray, y: np.ndarray) -> bytes:
    """The rows as CSV; nine significant digits keep the 80,000 × 40 upload near 40 MB."""
    buffer = io.StringIO()
    buffer.write(",".join([*(f"f{i}" for i in range(X.shape[1])), "label"]) + "\n")
    labels = np.asarray([f"c{int(v)}" for v in y])[:, None]
    np.savetxt(buffer, np.hstack([X.astype(object), labels]), fmt="%s", delimiter=",")
    text = buffer.getvalue()
    return text.encode()


def _wait(client: httpx.Client, search_id: str, what: str) -> dict[str, Any]:
    last_log = 0.0
    while True:
        search: dict[str, Any] = client.get(f"/v1/searches/{search_id}").json()
        if search["status"] in ("succeeded", "failed", "cancelled"):
            return search
        jobs = search["jobs"]
        if time.monotonic() - last_log >= POLL_SECONDS:
            last_log = time.monotonic()
            log(
                f"{what}: {search['status']}, {search['n_models']} models, "
                f"{jobs['running']} running, {jobs['queued']} queued"
            )
        time.sleep(0.5)  # a cheap read; the wall time is then right to half a second


def _search(client: httpx.Client, body: dict[str, Any], what: str) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    response = client.post("/v1/searches", json=body)
    response.raise_for_status()
    search = _wait(client, response.json()["id"], what)
    return search, time.monotonic() - started


def _short(params: dict[str, Any]) -> str:
    if "members" in params:
        return "best of each family: " + ", ".join(m["method"] for m in params["members"])
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()
    )


def render(payload: dict[str, Any]) -> str:
    auto, baseline = payload["auto"], payload["baseline"]
    lines = [
        f"Auto search, {payload['budget_seconds']:g} s budget, {payload['folds']}-fold CV ROC "
        f"AUC on `binary` ({payload['rows']:_} training rows × 40 features); "
        f"wall {auto['wall_seconds']:.0f} s, {auto['n_models']} models:",
        "",
        "| rank | method | params | CV AUC (mean ± std) | fit s |",
        "| ---: | --- | --- | --- | ---: |",
    ]
    for row in auto["leaderboard"]:
        metric = row["metric"]
        lines.append(
            f"| {row['rank']} | {row['method']} | {_short(row['params'])} | "
            f"{metric['mean']:.5f} ± {metric['std']:.5f} | {row['fit_seconds'] or 0:.0f} |"
        )
    lines += ["", "Defaults on the same folds:", ""]
    for row in baseline["leaderboard"]:
        metric = row["metric"]
        lines.append(f"- default {row['method']}: {metric['mean']:.5f} ± {metric['std']:.5f}")
    checks = payload["checks"]
    lines += [
        "",
        f"- best beats the default random forest: {checks['beats_random_forest']}",
        f"- best beats the default XGBoost-style model: {checks['beats_xgboost']}",
        f"- ensemble at least as good as the best single candidate: {checks['stack_at_least_best']}",
    ]
    return "\n".join(lines)


def _checks(auto: dict[str, Any], baseline: dict[str, Any]) -> dict[str, bool]:
    board = auto["leaderboard"]
    best = board[0]["metric"]["mean"] if board else float("nan")
    defaults = {row["method"]: row["metric"]["mean"] for row in baseline["leaderboard"]}
    singles = [row["metric"]["mean"] for row in board if row["kind"] == "candidate"]
    stacks = [row["metric"]["mean"] for row in board if row["kind"] == "stack"]
    return {
        "beats_random_forest": best > defaults.get("random_forest", float("inf")),
        "beats_xgboost": best > defaults.get("xgboost", float("inf")),
        "stack_at_least_best": bool(stacks and singles and stacks[0] >= max(singles)),
    }


def speedup(rows: int, candidates: int, workdir: Path) -> dict[str, float]:
    """Wall seconds of one search with one, then two ``coppice worker`` processes (one fit at a
    time each), and their ratio: candidates are ordinary jobs, so a second worker should
    nearly halve it."""
    loaded = load_dataset(write_dataset(DATASET.with_samples(rows), workdir / "data"))
    body = _csv(loaded.X_train, loaded.y_train)
    walls: dict[str, float] = {}
    for n_workers in (1, 2):
        processes = Processes(
            workdir / f"logs-{n_workers}",
            data_dir=str(workdir / f"coppice-{n_workers}"),
            embedded_worker="false",
            worker_concurrency="1",
            processes_per_job="1",
            poll_seconds="0.2",
            log_format="text",
        )
        try:
            for index in range(n_workers):
                processes.start(f"worker-{index + 1}", "worker")
            base_url, _ = start_server(processes, "serve")
            with httpx.Client(base_url=base_url, timeout=600) as client:
                upload = client.post("/v1/datasets", files={"file": ("b.csv", body, "text/csv")})
                upload.raise_for_status()
                # A worker claims nothing until its fork server has loaded the kernels (seconds
                # on a loaded machine): an untimed search first, then a pause, so that every
                # worker is ready when the timer starts.
                _search(client, _warm_up_search(upload.json()["id"], n_workers), "warm-up")
                time.sleep(WARM_UP_PAUSE)
                _, wall = _search(
                    client,
                    {
                        "dataset_id": upload.json()["id"],
                        "target": "label",
                        "candidates": [
                            {
                                "method": "random_forest",
                                "params": {"max_features": {"uniform": [0.1, 0.4]}},
                            }
                        ],
                        "budget": {"max_models": candidates},
                        "strategy": "random",
                        "validation": {"folds": 3},
                        "seed": SEED,
                    },
                    f"{n_workers} worker(s)",
                )
            walls[f"{n_workers}_workers_seconds"] = wall
        finally:
            processes.stop_all()
    walls["speedup"] = walls["1_workers_seconds"] / walls["2_workers_seconds"]
    return walls


def _warm_up_search(dataset_id: str, n_workers: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "target": "label",
        "candidates": [{"method": "logistic_regression", "params": {"C": {"uniform": [0.5, 2]}}}],
        "budget": {"max_models": 2 * n_workers},
        "validation": {"folds": 2},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.speedup:
        with tempfile.TemporaryDirectory(prefix="coppice-bench-search-") as tmp:
            result = speedup(args.rows, SPEEDUP_CANDIDATES, Path(tmp))
        result["load_average_at_end"] = os.getloadavg()[0]
        print(json.dumps(result, indent=2))
        return 0
    machine = describe_machine()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="coppice-bench-search-") as tmp:
        workdir = Path(tmp)
        loaded = load_dataset(write_dataset(DATASET.with_samples(args.rows), workdir / "data"))
        processes = Processes(
            workdir / "logs",
            data_dir=str(workdir / "coppice"),
            embedded_worker="true",
            worker_concurrency="2",
            processes_per_job="1",
            max_upload_bytes=str(512 * 1024**2),
            log_format="text",
        )
        try:
            base_url, server = start_server(processes, "serve")
            log(f"coppice serve on {base_url} (pid {server.pid})")
            with httpx.Client(base_url=base_url, timeout=600) as client:
                body = _csv(loaded.X_train, loaded.y_train)
                upload = client.post(
                    "/v1/datasets",
                    files={"file": ("binary.csv", body, "text/csv")},
                    data={"name": "binary"},
                )
                upload.raise_for_status()
                dataset_id = upload.json()["id"]
                log(f"uploaded {len(body) / 1e6:.0f} MB as dataset {dataset_id}")
                common = {
                    "dataset_id": dataset_id,
                    "target": "label",
                    "validation": {"folds": args.folds},
                    "metric": "roc_auc",
                    "seed": SEED,
                }
                auto, auto_wall = _search(
                    client,
                    {
                        **common,
                        "name": "auto",
                        "auto": True,
                        "stack": True,
                        "budget": {"max_seconds": args.seconds},
                    },
                    "auto",
                )
                baseline, _ = _search(
                    client,
                    {
                        **common,
                        "name": "defaults",
                        "strategy": "grid",
                        "candidates": [
                            {"method": "random_forest", "params": {}},
                            {"method": "xgboost", "params": {}},
                        ],
                    },
                    "defaults",
                )
        finally:
            processes.stop_all()
    auto["wall_seconds"] = auto_wall
    payload = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine | {"load_average_at_end": os.getloadavg()[0]},
        "budget_seconds": args.seconds,
        "folds": args.folds,
        "rows": int(loaded.X_train.shape[0]),
        "auto": auto,
        "baseline": baseline,
        "checks": _checks(auto, baseline),
    }
    args.output.write_text(json.dumps(payload, indent=2) + "\n")
    markdown = render(payload)
    args.output.with_suffix(".md").write_text(markdown + "\n")
    print(markdown)
    return 0 if all(payload["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
