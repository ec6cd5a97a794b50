"""The batch process: one batch prediction's scoring, in a process of its own, like a fit.

The worker claims a batch's jobs row as it claims a fit's and starts this process in its
place (:func:`process_target`); everything else about the run (lease, heartbeats, progress
writes, cancel, the runtime limit, a crash, a shutdown) is the worker's, unchanged
(``service.worker.job_watch``). The process reads the batch's request, loads the model, and
scores the dataset part by part: each part is read (verified), encoded, predicted and written
to a new dataset's parts through the datasets' ``PartWriter``, so memory holds one input part
and one output row group, plus the few numbers a row the metrics need.

The new dataset gets a fresh id on every attempt, and its rows are committed by the worker
with the job's success, in one transaction (:mod:`service.batch.finish`). A killed attempt
leaves parts no row names, which ``coppice store gc`` sweeps; the retry writes its own, so
the output is written once, whole, and nothing of it is visible before.
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

import pyarrow as pa
from sqlalchemy.orm import Session

from service.batch.outcome import BatchOutcome, Scored
from service.batch.scoring import InfiniteValue, TargetScore, Unseen, score
from service.datasets import repository as datasets
from service.datasets.part_reader import DatasetChanged, open_part
from service.datasets.parts import PartWriter
from service.datasets.service import part_records
from service.datasets.summaries import Summary, add_batch, count_histograms, summary_for
from service.db.session import create_db_engine, reading
from service.db.tables import BatchPredictionRecord, ColumnKind, DatasetPartRecord, new_id
from service.errors import NotFound, ServiceError
from service.models import encoding
from service.models.cache import LoadedModel, ModelCache
from service.models.service import ArtifactCorrupt, loaded_model
from service.store import DataStore, ObjectCorrupt, StoreUnavailable
from service.worker.fit_process import JobSnapshot, StoreConfig, child_process, send_result
from service.worker.messages import Errored, Failed, FitResult, Stopped

# Of the progress bar: the rest is summarising the output's columns.
SCORING_SHARE = 0.95


class Interrupted(Exception):
    """The worker asked the batch to stop (a cancel, the runtime limit)."""


class BatchFailed(Exception):
    """The batch cannot succeed however often it is tried."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def run_batch(
    database_url: str,
    store: DataStore,
    batch_id: str,
    on_progress: Callable[[float, str], None],
    should_stop: Callable[[], bool],
    *,
    dask_scheduler: str | None = None,
) -> BatchOutcome:
    """Score batch ``batch_id``'s dataset and write the output's parts; what the worker commits.

    Raises ``BatchFailed`` (do not retry), ``Interrupted``, ``StoreUnavailable`` or anything
    unexpected (retried).
    """
    engine = create_db_engine(database_url)
    try:
        with reading(engine) as session:
            request = _request(session, batch_id)
            model = _model(session, store, request.model_id)
            dataset = datasets.get(session, request.dataset_id)
            if dataset is None:
                raise BatchFailed(
                    "dataset_not_found", f"Dataset '{request.dataset_id}' has been deleted."
                )
            columns = datasets.columns(session, dataset.id)
            parts = datasets.parts(session, dataset.id)
            dataset_name = dataset.name
            n_rows = dataset.n_rows
    finally:
        engine.dispose()
    kinds = {column.name: column.kind for column in columns}
    features = encoding.feature_names(model)
    absent = [name for name in features if name not in kinds]
    keep = list(request.keep_columns)
    wanted = list(dict.fromkeys([*keep, *(f for f in features if f in kinds)]))
    target = TargetScore(model, kinds[model.target]) if model.target in kinds else None
    if target is not None and model.target not in wanted:
        wanted.append(model.target)
    unseen = Unseen()
    output_id = new_id()
    writer: PartWriter | None = None
    output_kinds: list[tuple[str, ColumnKind]] = []
    summaries: list[Summary] = []
    done = 0
    try:
        for part in parts:
            if should_stop():
                raise Interrupted
            table = _read(store, part, wanted)
            try:
                scored = score(
                    model,
                    table,
                    kinds,
                    keep,
                    return_proba=request.return_proba,
                    explain=request.explain,
                    first_row=int(part.row_offset),
                    unseen=unseen,
                    with_proba=target is not None,
                )
            except InfiniteValue as error:
                raise BatchFailed("invalid_value", str(error)) from None
            if target is not None:
                target.add(table.column(model.target), scored)
            del table
            if writer is None:
                writer = PartWriter(store, output_id, scored.batch.schema)
                output_kinds = [
                    (
                        field.name,
                        ColumnKind.CATEGORICAL
                        if pa.types.is_string(field.type)
                        else ColumnKind.NUMERIC,
                    )
                    for field in writer.schema
                ]
                summaries = [summary_for(kind) for _, kind in output_kinds]
            add_batch(summaries, scored.batch)
            writer.write(scored.batch)
            done += scored.batch.num_rows
            on_progress(SCORING_SHARE * done / max(1, n_rows), f"rows {done}/{n_rows}")
        if writer is None:
            raise BatchFailed("dataset_empty", f"Dataset '{request.dataset_id}' has no parts.")
        if should_stop():
            raise Interrupted
        written = writer.finish()
        on_progress(SCORING_SHARE, "summarising the output's columns")
        # Counts, moments and categories were taken batch by batch; the histograms are
        # counted from the parts just written, once each column's range is known.
        finished = count_histograms(
            store,
            part_records(output_id, written),
            [name for name, _ in output_kinds],
            summaries,
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    metrics, n_labelled = target.metrics() if target is not None else (None, 0)
    notes = _notes(model, absent, unseen, target, n_labelled, n_rows, dask_scheduler)
    digest = hashlib.sha256()
    for piece in written:
        stored = piece.stored
        digest.update(f"{stored.path}\t{stored.size}\t{stored.sha256}\n".encode())
    name = request.name or f"{dataset_name} scored by {request.model_ref}"
    return BatchOutcome(
        dataset_id=output_id,
        name=name,
        n_rows=done,
        parts=written,
        kinds=output_kinds,
        summaries=finished,
        size_bytes=sum(piece.stored.size for piece in written),
        sha256=digest.hexdigest(),
        metrics=metrics,
        notes=notes,
    )


def _request(session: Session, batch_id: str) -> BatchPredictionRecord:
    record = session.get(BatchPredictionRecord, batch_id)
    if record is None:
        raise BatchFailed("batch_not_found", f"Batch prediction '{batch_id}' has no record.")
    session.expunge(record)
    return record


def _model(session: Session, store: DataStore, model_id: str) -> LoadedModel:
    try:
        # A cache of its own: this process scores one batch with one model.
        return loaded_model(session, ModelCache(1 << 62), store, model_id)
    except NotFound:
        raise BatchFailed("model_not_found", f"Model '{model_id}' has been deleted.") from None
    except ArtifactCorrupt as error:
        raise BatchFailed("artifact_corrupt", error.detail) from None


def _read(store: DataStore, part: DatasetPartRecord, names: list[str]) -> pa.Table:
    """One part's named columns, verified against its recorded digest as it is read."""
    try:
        return open_part(store, part).read(columns=names)
    except ObjectCorrupt as error:
        raise BatchFailed("dataset_corrupt", error.detail) from None
    except DatasetChanged as error:
        raise BatchFailed("dataset_changed", error.detail) from None


def _notes(
    model: LoadedModel,
    absent: list[str],
    unseen: Unseen,
    target: TargetScore | None,
    n_labelled: int,
    n_rows: int,
    dask_scheduler: str | None,
) -> list[str]:
    notes = []
    if absent:
        notes.append(
            "The dataset has no column "
            + ", ".join(f"'{name}'" for name in absent)
            + (": that feature is" if len(absent) == 1 else ": those features are")
            + " treated as missing in every row, as /v1 predict treats an absent feature."
        )
    for name, count in unseen.counts.items():
        notes.append(
            f"Feature '{name}': {count} value{'s' if count != 1 else ''} training never saw, "
            "treated as missing."
        )
    if target is not None:
        notes.append(
            f"The dataset holds the model's target '{model.target}': metrics are on the "
            f"{n_labelled} of {n_rows} rows where it is known."
        )
        if target.unknown_labels:
            notes.append(
                f"{target.unknown_labels} row{'s' if target.unknown_labels != 1 else ''} hold "
                "a target class the model does not know; the metrics leave them out."
            )
    if dask_scheduler:
        notes.append(
            "Scored on the worker, part by part; the Dask cluster does not score batch "
            "predictions yet."
        )
    return notes


# --- the process --------------------------------------------------------------------------


def batch_process_main(
    conn: Connection,
    stop: Event,
    database_url: str,
    store: StoreConfig,
    job: JobSnapshot,
    _train: Any,
) -> None:
    """The batch process's whole life, as ``fit_process_main``'s: score, report, exit."""
    should_stop, on_progress = child_process(conn, stop)
    send_result(
        conn,
        outcome_of(
            lambda: run_batch(
                database_url,
                store.open(),
                job.id,
                on_progress,
                should_stop,
                dask_scheduler=job.dask_scheduler,
            )
        ),
    )


def outcome_of(run: Callable[[], BatchOutcome]) -> FitResult:
    """Run a batch; every way it can end, as the message the worker reads."""
    try:
        return Scored(run())
    except StoreUnavailable as error:
        return Errored(error.detail)
    except BatchFailed as error:
        return Failed(error.code, error.message)
    except ServiceError as error:
        return Failed("batch_failed", error.detail)
    except Interrupted:
        return Stopped()
    except Exception as error:
        summary = "".join(traceback.format_exception_only(error)).strip()
        return Errored(f"the batch prediction raised {summary}")
