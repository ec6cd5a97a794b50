"""A monitoring report over a large prediction log, timed in-process on a real database.

    python -m benchmarks.monitoring_report [--rows N] [--features N] [--repeats N]
                                          [--database-url URL]

A fresh SQLite file (or ``--database-url``, migrated to head) gets one model with a training
baseline (``--features`` numeric features, a classifier) and ``--rows`` logged rows in the
last hour, 1% of them labelled and 0.1% with an unseen category, with their hourly counts
added as the log's writer adds them (``service.monitoring.aggregates.Tally``); then
``service.monitoring.service.report`` over the last 24 hours is timed ``--repeats`` times
(median), in its own read-only session, as the route runs it. ``--from-rows`` times the same
report counted from the rows themselves too (the way it was done before the hourly counts).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import insert
from sqlalchemy.orm import Session

from benchmarks.machine import describe_machine
from benchmarks.progress import log
from service.db.migrate import upgrade_to_head
from service.db.session import create_db_engine, reading, transaction
from service.db.tables import JobRecord, ModelRecord
from service.db.types import utc_now
from service.monitoring import repository, service
from service.monitoring.aggregates import Tally, hour_of
from service.monitoring.baseline import training_baseline
from service.monitoring.repository import LOG

RESULTS = Path(__file__).resolve().parent / "results" / "monitoring_report.json"
CHUNK = 50_000


def _model(session: Session, n_features: int, rng: np.random.Generator) -> tuple[str, dict]:
    X = rng.normal(size=(5_000, n_features))
    features = [{"name": f"f{j}", "kind": "numeric"} for j in range(n_features - 1)]
    features.append({"name": "colour", "kind": "categorical"})
    X[:, -1] = rng.integers(0, 4, size=5_000)
    predicted = np.where(rng.random(5_000) < 0.3, "yes", "no")
    baseline = training_baseline(X, features, {"colour": list("abcd")}, predicted, ["no", "yes"])
    job = JobRecord(method="random_forest", task="classification", target="y", features=[], params={},
                    validation={}, seed=0, status="succeeded")  # fmt: skip
    session.add(job)
    session.flush()
    model = ModelRecord(
        job_id=job.id, dataset_id="", method="random_forest", task="classification",
        target="y", features=features, classes=["no", "yes"], params={},
        encoding={"categories": {"colour": list("abcd")}},
        metrics={"monitoring": baseline}, curves=None, n_estimators=1, size_bytes=1,
    )  # fmt: skip
    session.add(model)
    session.flush()
    return model.id, baseline


def fill(database_url: str, n_rows: int, n_features: int) -> str:
    rng = np.random.default_rng(0)
    engine = create_db_engine(database_url)
    with transaction(engine) as session:
        model_id, baseline = _model(session, n_features, rng)
    now = utc_now()
    written = 0
    while written < n_rows:
        n = min(CHUNK, n_rows - written)
        features = rng.normal(0.3, 1.1, size=(n, n_features)).astype(np.float32)
        bins = rng.integers(0, 11, size=(n, n_features + 1)).astype(np.uint16)
        bins[:, -1] = rng.integers(0, 2, size=n)
        # Written as they come: in time order, over the last hour.
        times = [now - timedelta(seconds=3600 * (1 - (written + i) / n_rows)) for i in range(n)]
        tally = Tally()
        hours = [hour_of(t) for t in times]
        for hour in sorted(set(hours)):
            mask = np.array([h == hour for h in hours])
            purple = [(n_features - 1, "purple") for i in np.flatnonzero(mask) if i % 1000 == 0]
            tally.add(model_id, hour, int(mask.sum()), bins[mask], purple)
        rows = [
            {
                "model_id": model_id,
                "row_id": f"r{written + i}",
                "logged_at": times[i],
                "features": features[i].tobytes(),
                "bins": bins[i].tobytes(),
                "unseen": {"colour": "purple"} if i % 1000 == 0 else None,
                "prediction": float(bins[i, -1]),
                "proba": np.array([0.4, 0.6], dtype=np.float32).tobytes(),
                "actual": float(i % 2) if i % 100 == 0 else None,
            }
            for i in range(n)
        ]
        with transaction(engine) as session:
            session.execute(insert(LOG), rows)
            repository.add_counts(session, list(tally.count_rows()))
            for key, values in tally.unseen_rows():
                repository.add_unseen(session, key, values, 100)
        written += n
        log(f"logged {written:,} rows")
    del baseline
    engine.dispose()
    return model_id


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.monitoring_report")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--from-rows", action="store_true", help="time the row-by-row report too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="coppice-bench-report-") as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'coppice.db'}"
        upgrade_to_head(url)
        started = time.perf_counter()
        model_id = fill(url, args.rows, args.features)
        fill_s = time.perf_counter() - started
        engine = create_db_engine(url)
        timings: list[float] = []
        from_rows: list[float] = []
        for _ in range(args.repeats):
            for rows_too, out in ((False, timings), (True, from_rows)):
                if rows_too and not args.from_rows:
                    continue
                started = time.perf_counter()
                since, until = service.window(None, None, utc_now())
                with reading(engine) as session:
                    body = service.report(session, None, model_id, since, until, from_rows=rows_too)
                out.append(time.perf_counter() - started)
                log(f"report (from {'rows' if rows_too else 'hourly counts'}): {out[-1]:.3f} s, "
                    f"{body['n_predictions']:,} rows")  # fmt: skip
        engine.dispose()
    result = {
        "rows": args.rows,
        "features": args.features,
        "fill_s": fill_s,
        "report_median_s": statistics.median(timings),
        "report_all_s": timings,
        "report_from_rows_median_s": statistics.median(from_rows) if from_rows else None,
        "n_labelled": body["performance"]["n_labelled"],
        "backend": url.split(":", 1)[0],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": describe_machine(), **result}, indent=2) + "\n")
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
