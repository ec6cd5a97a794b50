"""A batch prediction of a large stored dataset against its pieces measured alone (issue 26).

    python -m benchmarks.batch_predict [--rows N] [--features N] [--trees N] [--train-rows N]
                                       [--worker]

A fresh data directory (SQLite and a local store) gets a random forest of ``--trees`` trees
trained on ``--train-rows`` rows, and a dataset of ``--rows`` rows × ``--features`` numeric
features (1 % missing) stored as Parquet parts by the upload path. Then, in this process:

- **read**: every part of the dataset read and verified, the feature columns only, as the batch
  reads them;
- **predict**: the loaded estimator's ``predict`` on the whole (rows × features) matrix, built
  beforehand (not timed);
- **write**: the predictions written as a new dataset's parts with their column summaries, as
  the datasets' write path does (``PartWriter``, ``summaries``);
- **batch**: the batch prediction as the batch process runs it (``service.batch.process.
  run_batch``: model load, part by part read, encode, predict, write, summaries) plus the
  worker's commit (``queue.finish_scored``), from its claimed job.

The target is ``batch <= 1.3 x (read + predict + write)``, each round timing every piece and the
batch back to back (``--rounds``, medians of the per-round ratios). ``--worker`` also times the batch
through a real worker (``Supervisor``: claim, a process of its own, the commit) from queued to
succeeded. Results go to ``benchmarks/results/batch_predict.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import engine
from benchmarks.machine import describe_machine
from benchmarks.progress import log
from service.batch import service as batches
from service.batch.process import run_batch
from service.batch.schemas import BatchCreate
from service.config import Settings
from service.datasets import repository as datasets
from service.datasets.formats import Spooled, UploadFormat
from service.datasets.part_reader import open_part
from service.datasets.parts import PartWriter
from service.datasets.service import create_from_file, load_columns, part_records
from service.datasets.summaries import add_batch, count_histograms, summary_for
from service.db.migrate import upgrade_to_head
from service.db.session import create_db_engine, reading, transaction
from service.db.tables import ColumnKind, JobRecord, new_id
from service.db.types import utc_now
from service.jobs.schemas import JobCreate
from service.jobs.service import create_job
from service.models import repository as models
from service.models.artifacts import read_artifact
from service.models.cache import ModelCache
from service.registry.cache import ReferenceCache
from service.store import DataStore, store_from_settings
from service.training import TrainingSpec, run_training
from service.worker import queue
from service.worker.claim_loop import Supervisor, WorkerConfig
from service.worker.fit_process import JobSnapshot, store_outcome
from service.worker.lease import LeasePolicy

RESULTS = Path(__file__).resolve().parent / "results" / "batch_predict.json"
WORKER = "benchmark"
WRITE_BATCH_ROWS = 1 << 17


def _table(X: np.ndarray, names: list[str], label: np.ndarray | None) -> pa.Table:
    columns = {name: pa.array(X[:, j], from_pandas=True) for j, name in enumerate(names)}
    if label is not None:
        columns["label"] = pa.array(label)
    return pa.table(columns)


def _upload(session: Any, store: DataStore, table: pa.Table, name: str, tmp: Path) -> str:
    path = tmp / f"{name}.parquet"
    pq.write_table(table, path, row_group_size=WRITE_BATCH_ROWS)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    spooled = Spooled(path, path.stat().st_size, digest)
    record, _ = create_from_file(
        session, spooled, UploadFormat.PARQUET, name=name, categorical=[], store=store,
        max_columns=10_000,
    )  # fmt: skip
    path.unlink()
    return record.id


def _claim(session: Any, job_id: str) -> JobRecord:
    policy = LeasePolicy(
        lease=timedelta(hours=2), heartbeat=timedelta(minutes=1), backoff=timedelta(0)
    )
    job = queue.claim(session, worker_id=WORKER, now=utc_now(), policy=policy)
    assert job is not None and job.id == job_id, "another job was claimable"
    return job


def _train(url: str, store: DataStore, settings: Settings, dataset_id: str, trees: int) -> str:
    engine_ = create_db_engine(url)
    try:
        with transaction(engine_) as session:
            job = create_job(
                session,
                JobCreate(dataset_id=dataset_id, target="label", method="random_forest",
                          params={"n_estimators": trees}, validation={"holdout": 0}, seed=0),  # type: ignore[arg-type]
                settings,
            )  # fmt: skip
            job_id = job.id
        with transaction(engine_) as session:
            record = _claim(session, job_id)
            spec = TrainingSpec.from_job(record)
            columns = load_columns(session, dataset_id, spec.columns, store)
            snapshot = JobSnapshot.of(record, n_jobs=1)
        outcome = run_training(spec, columns, lambda fraction, stage: None, lambda: False)
        stored = store_outcome(store, outcome)
        with transaction(engine_) as session:
            model_id = queue.finish_succeeded(
                session, store, snapshot, WORKER, stored, now=utc_now()
            )
        assert model_id is not None
        return model_id
    finally:
        engine_.dispose()


def _queue_batch(url: str, store: DataStore, settings: Settings, model: str, dataset: str) -> str:
    engine_ = create_db_engine(url)
    try:
        with transaction(engine_) as session:
            batch, _ = batches.create_batch(
                session, ReferenceCache(), ModelCache(1 << 62), store,
                BatchCreate(model=model, dataset_id=dataset), settings,
            )  # fmt: skip
            return batch.id
    finally:
        engine_.dispose()


def _run_queued(db: Any, batch_id: str, supervisor: Supervisor) -> None:
    supervisor.wake()
    while True:
        with reading(db) as session:
            job = session.get(JobRecord, batch_id)
            assert job is not None
            status = job.status
        if status not in ("queued", "running"):
            break
        time.sleep(0.02)
    assert status == "succeeded", f"{status}: {job.error_message}"


def _one_round(
    args: argparse.Namespace,
    db: Any,
    url: str,
    store: DataStore,
    settings: Settings,
    estimator: Any,
    X: np.ndarray,
    names: list[str],
    parts: list[Any],
    model_id: str,
    score_id: str,
    supervisor: Supervisor | None,
) -> dict[str, float]:
    """Every piece alone, the batch in this process, and (``--worker``) through a worker."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    read_rows = sum(open_part(store, part).read(columns=names).num_rows for part in parts)
    timings["read_s"] = time.perf_counter() - started
    assert read_rows == args.rows

    started = time.perf_counter()
    predicted = np.asarray(estimator.predict(X))
    timings["predict_s"] = time.perf_counter() - started

    output = pa.table({"prediction": pa.array(predicted.astype(str))})
    batches_out = output.to_batches(max_chunksize=WRITE_BATCH_ROWS)
    started = time.perf_counter()
    out_id = new_id()
    writer = PartWriter(store, out_id, output.schema)
    summaries = [summary_for(ColumnKind.CATEGORICAL)]
    for batch in batches_out:
        add_batch(summaries, batch)
        writer.write(batch)
    written = writer.finish()
    count_histograms(store, part_records(out_id, written), ["prediction"], summaries)
    timings["write_s"] = time.perf_counter() - started
    del output, batches_out
    timings["pieces_s"] = timings["read_s"] + timings["predict_s"] + timings["write_s"]

    batch_id = _queue_batch(url, store, settings, model_id, score_id)
    with transaction(db) as session:
        _claim(session, batch_id)
    started = time.perf_counter()
    outcome = run_batch(url, store, batch_id, lambda fraction, stage: None, lambda: False)
    with transaction(db) as session:
        assert queue.finish_scored(session, store, batch_id, WORKER, outcome, now=utc_now())
    timings["batch_s"] = time.perf_counter() - started
    timings["ratio"] = timings["batch_s"] / timings["pieces_s"]
    with reading(db) as session:
        scored = open_part(store, datasets.parts(session, outcome.dataset_id)[0]).read()
    assert scored.column("prediction").to_pylist()[:1000] == predicted[:1000].astype(str).tolist()

    if supervisor is not None:
        batch_id = _queue_batch(url, store, settings, model_id, score_id)
        started = time.perf_counter()
        supervisor.wake()
        _run_queued(db, batch_id, supervisor)
        timings["worker_batch_s"] = time.perf_counter() - started
        timings["worker_ratio"] = timings["worker_batch_s"] / timings["pieces_s"]
    return timings


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    settings = Settings(data_dir=tmp / "data", database_url=None, embedded_worker=False)
    (tmp / "data").mkdir()
    url = settings.resolved_database_url
    upgrade_to_head(url)
    store = store_from_settings(settings)
    rng = np.random.default_rng(0)
    names = [f"f{j:02d}" for j in range(args.features)]
    X = rng.normal(size=(args.rows, args.features))
    score = X[:, 0] + 0.5 * X[:, 1] - X[:, 2] * X[:, 3] + rng.normal(0, 0.5, args.rows)
    X[rng.random(X.shape) < 0.01] = np.nan
    label = np.where(score > 0, "yes", "no")
    db = create_db_engine(url)
    with transaction(db) as session:
        train_id = _upload(
            session, store, _table(X[: args.train_rows], names, label[: args.train_rows]),
            "train", tmp,
        )  # fmt: skip
    log(f"training dataset stored ({args.train_rows:,} rows)")
    started = time.perf_counter()
    model_id = _train(url, store, settings, train_id, args.trees)
    log(f"trained {args.trees} trees in {time.perf_counter() - started:.1f} s")
    with transaction(db) as session:
        score_id = _upload(session, store, _table(X, names, None), "score", tmp)
    with reading(db) as session:
        parts = datasets.parts(session, score_id)
        artifact = models.artifact(session, model_id)
    assert artifact is not None
    log(f"dataset stored: {args.rows:,} rows x {args.features} in {len(parts)} part(s)")
    estimator = engine.load_model(read_artifact(store, artifact))
    supervisor = Supervisor(url, WorkerConfig.from_settings(settings)) if args.worker else None
    if supervisor is not None:
        supervisor.start()
        # A small batch first: the worker's start (its fork server's imports) is not the
        # batch's cost.
        _run_queued(db, _queue_batch(url, store, settings, model_id, train_id), supervisor)
    rounds: list[dict[str, float]] = []
    try:
        for round_ in range(args.rounds):
            # Each round times every piece and both batches back to back, so that the load a
            # shared machine puts on one of them is also on the others (the ratios are taken
            # per round, then their median).
            timings = _one_round(args, db, url, store, settings, estimator, X, names, parts,
                                 model_id, score_id, supervisor)  # fmt: skip
            rounds.append(timings)
            log(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
                f"{key} {value:.2f}" for key, value in timings.items()
            ))  # fmt: skip
    finally:
        if supervisor is not None:
            supervisor.stop(grace=0)
    db.dispose()
    result: dict[str, Any] = {
        "rows": args.rows,
        "features": args.features,
        "trees": args.trees,
        "train_rows": args.train_rows,
        "input_parts": len(parts),
        "rounds": rounds,
        **{
            f"median_{key}": round(float(np.median([r[key] for r in rounds])), 3)
            for key in rounds[0]
        },
    }
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_predict")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--train-rows", type=int, default=20_000)
    parser.add_argument("--worker", action="store_true", help="also time it through a worker")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of every measurement"
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    machine = describe_machine()
    with tempfile.TemporaryDirectory(prefix="coppice-bench-batch-") as tmp:
        result = measure(args, Path(tmp))
    result["load_average_at_end"] = os.getloadavg()[0]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": machine, **result}, indent=2) + "\n")
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
