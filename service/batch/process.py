"""The batch process: one batch prediction's scoring, in a process of its own, like a fit.

The worker claims a batch's jobs row as it claims a fit's and starts this process in its
place (:func:`process_target`); everything else about the run (lease, heartbeats, progress
writes, cancel, the runtime limit, a crash, a shutdown) is the worker's, unchanged
(``service.worker.job_watch``). The process reads the batch's request, loads the model, and
scores the dataset part by part: each part is read (verified), encoded, predicted and written
to a new dataset's parts through the datasets' ``PartWriter``, so memory holds one input part
and one output row group, plus the few numbers a row the metrics need. With a Dask cluster
(``COPPICE_DASK_SCHEDULER``) the cluster's workers do that, each for the parts it is given
(:mod:`service.batch.cluster`), and this process opens no input part.

The new dataset gets a fresh id on every attempt, and its rows are committed by the worker
with the job's success, in one transaction (:mod:`service.batch.finish`). A killed attempt
leaves parts no row names, which ``coppice store gc`` sweeps; the retry writes its own, so
the output is written once, whole, and nothing of it is visible before.
"""

from __future__ import annotations

import contextlib
import hashlib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any

import pyarrow as pa
from sqlalchemy.orm import Session

from service.batch.cluster import PartToScore, add_targets, score_on_cluster
from service.batch.errors import BatchFailed, Interrupted
from service.batch.outcome import BatchOutcome, Scored
from service.batch.scoring import InfiniteValue, TargetScore, Unseen, score
from service.datasets import repository as datasets
from service.datasets.columns import ColumnSummary
from service.datasets.part_reader import DatasetChanged, open_part
from service.datasets.parts import PartWriter, WrittenPart, dataset_prefix
from service.datasets.service import part_records
from service.datasets.summaries import Summary, add_batch, count_histograms, summary_for
from service.db.session import create_db_engine, reading
from service.db.tables import BatchPredictionRecord, ColumnKind, DatasetPartRecord, new_id
from service.errors import NotFound, ServiceError
from service.models import encoding
from service.models.cache import LoadedModel, ModelCache
from service.models.service import ArtifactCorrupt, described_model, loaded_model
from service.store import DataStore, ObjectCorrupt, StoredObject, StoreUnavailable
from service.training.cluster import dask_client
from service.training.spec import TrainingError
from service.worker.fit_process import JobSnapshot, StoreConfig, child_process, send_result
from service.worker.messages import Errored, Failed, FitResult, Stopped

# Of the progress bar: the rest is summarising the output's columns.
SCORING_SHARE = 0.95


@dataclass(frozen=True)
class _Request:
    """What a batch's scoring needs of its rows in SQL, read once."""

    record: BatchPredictionRecord
    model: LoadedModel  # the estimator is None when the Dask workers load it
    artifact: StoredObject | None
    dataset_name: str
    n_rows: int
    kinds: dict[str, str]
    parts: list[DatasetPartRecord]


@dataclass(frozen=True)
class _Run:
    """The batch process's ties to its worker: progress by rows, and the stop check."""

    scored: Callable[[int], None]
    on_progress: Callable[[float, str], None]
    should_stop: Callable[[], bool]


# The output's parts, its columns' kinds and their summaries.
_Written = tuple[list[WrittenPart], list[tuple[str, ColumnKind]], list[ColumnSummary]]


@dataclass
class _Output:
    """The output dataset as it is scored: its writer's parts, the notes' and metrics' parts."""

    id: str
    keep: list[str]
    wanted: list[str]
    target: TargetScore | None
    unseen: Unseen = field(default_factory=Unseen)
    done: int = 0


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

    With ``dask_scheduler``, the cluster's workers score the parts (:mod:`service.batch.
    cluster`); otherwise this process scores them one after another.

    Raises ``BatchFailed`` (do not retry), ``Interrupted``, ``StoreUnavailable`` or anything
    unexpected (retried).
    """
    request = _read_request(database_url, store, batch_id, on_cluster=dask_scheduler is not None)
    model, kinds = request.model, request.kinds
    features = encoding.feature_names(model)
    absent = [name for name in features if name not in kinds]
    keep = list(request.record.keep_columns)
    wanted = list(dict.fromkeys([*keep, *(f for f in features if f in kinds)]))
    target = TargetScore(model, kinds[model.target]) if model.target in kinds else None
    if target is not None and model.target not in wanted:
        wanted.append(model.target)
    output = _Output(new_id(), keep, wanted, target)
    n_rows = request.n_rows

    def scored(rows: int) -> None:
        output.done += rows
        on_progress(SCORING_SHARE * output.done / max(1, n_rows), f"rows {output.done}/{n_rows}")

    if not request.parts:
        raise BatchFailed("dataset_empty", f"Dataset '{request.record.dataset_id}' has no parts.")
    run = _Run(scored, on_progress, should_stop)
    if dask_scheduler is None:
        written, output_kinds, summaries = _score_here(store, request, output, run)
    else:
        written, output_kinds, summaries = _score_on_cluster(
            dask_scheduler, store, request, output, run
        )
    metrics, n_labelled = target.metrics() if target is not None else (None, 0)
    notes = _notes(model, absent, output.unseen, target, n_labelled, n_rows, dask_scheduler)
    digest = hashlib.sha256()
    for piece in written:
        stored = piece.stored
        digest.update(f"{stored.path}\t{stored.size}\t{stored.sha256}\n".encode())
    name = request.record.name or f"{request.dataset_name} scored by {request.record.model_ref}"
    return BatchOutcome(
        dataset_id=output.id,
        name=name,
        n_rows=output.done,
        parts=written,
        kinds=output_kinds,
        summaries=summaries,
        size_bytes=sum(piece.stored.size for piece in written),
        sha256=digest.hexdigest(),
        metrics=metrics,
        notes=notes,
    )


def _read_request(
    database_url: str, store: DataStore, batch_id: str, *, on_cluster: bool
) -> _Request:
    engine = create_db_engine(database_url)
    try:
        with reading(engine) as session:
            record = _request(session, batch_id)
            model, artifact = _model(session, store, record.model_id, load=not on_cluster)
            dataset = datasets.get(session, record.dataset_id)
            if dataset is None:
                raise BatchFailed(
                    "dataset_not_found", f"Dataset '{record.dataset_id}' has been deleted."
                )
            columns = datasets.columns(session, dataset.id)
            parts = datasets.parts(session, dataset.id)
            for part in parts:
                session.expunge(part)
            return _Request(
                record=record,
                model=model,
                artifact=artifact,
                dataset_name=dataset.name,
                n_rows=dataset.n_rows,
                kinds={column.name: column.kind for column in columns},
                parts=list(parts),
            )
    finally:
        engine.dispose()


def _score_here(store: DataStore, request: _Request, output: _Output, run: _Run) -> _Written:
    """Score the parts one after another in this process, writing the output as it goes."""
    model, kinds, record = request.model, request.kinds, request.record
    writer: PartWriter | None = None
    output_kinds: list[tuple[str, ColumnKind]] = []
    summaries: list[Summary] = []
    try:
        for part in request.parts:
            if run.should_stop():
                raise Interrupted
            table = _read(store, part, output.wanted)
            try:
                result = score(
                    model,
                    table,
                    kinds,
                    output.keep,
                    return_proba=record.return_proba,
                    explain=record.explain,
                    first_row=int(part.row_offset),
                    unseen=output.unseen,
                    with_proba=output.target is not None,
                )
            except InfiniteValue as error:
                raise BatchFailed("invalid_value", str(error)) from None
            if output.target is not None:
                output.target.add(table.column(model.target), result)
            del table
            if writer is None:
                writer = PartWriter(store, output.id, result.batch.schema)
                output_kinds = _kinds_of(writer.schema)
                summaries = [summary_for(kind) for _, kind in output_kinds]
            add_batch(summaries, result.batch)
            writer.write(result.batch)
            run.scored(result.batch.num_rows)
        assert writer is not None
        if run.should_stop():
            raise Interrupted
        written = writer.finish()
        run.on_progress(SCORING_SHARE, "summarising the output's columns")
        # Counts, moments and categories were taken batch by batch; the histograms are
        # counted from the parts just written, once each column's range is known.
        finished = count_histograms(
            store,
            part_records(output.id, written),
            [name for name, _ in output_kinds],
            summaries,
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return written, output_kinds, finished


def _score_on_cluster(
    address: str, store: DataStore, request: _Request, output: _Output, run: _Run
) -> _Written:
    """Let the Dask cluster's workers score the parts; summarise the output they wrote."""
    assert request.artifact is not None
    record = request.record
    tasks = [
        PartToScore(
            store_url=store.url,
            store_options=dict(store.options),
            index=int(part.part),
            row_offset=int(part.row_offset),
            n_rows=int(part.n_rows),
            path=part.path,
            size=int(part.size),
            sha256=part.sha256,
            source_stamp=part.source_stamp,
            columns=tuple(output.wanted),
            kinds={name: str(kind) for name, kind in request.kinds.items()},
            keep=tuple(output.keep),
            return_proba=record.return_proba,
            explain=record.explain,
            with_target=output.target is not None,
            model=request.model,
            artifact=request.artifact,
            output_id=output.id,
        )
        for part in sorted(request.parts, key=lambda part: part.row_offset)
    ]
    try:
        with dask_client(address) as client:
            answers = score_on_cluster(client, store, tasks, run.scored, run.should_stop)
    except TrainingError as error:
        raise BatchFailed(error.code, error.message) from None
    written = [piece for answer in answers for piece in answer.written]
    for answer in answers:
        for feature, count in answer.unseen.items():
            output.unseen.add(feature, count)
    if output.target is not None:
        add_targets(output.target, answers)
    output_kinds = _kinds_of(answers[0].schema)
    if run.should_stop():
        store.delete_prefix(dataset_prefix(output.id))
        raise Interrupted
    run.on_progress(SCORING_SHARE, "summarising the output's columns")
    try:
        summaries = summarise(store, part_records(output.id, written), output_kinds)
    except BaseException:
        with contextlib.suppress(Exception):
            store.delete_prefix(dataset_prefix(output.id))
        raise
    return written, output_kinds, summaries


def summarise(
    store: DataStore,
    parts: Sequence[DatasetPartRecord],
    kinds: Sequence[tuple[str, ColumnKind]],
) -> list[ColumnSummary]:
    """The column summaries of parts another process wrote: each part read (verified) a row
    group at a time for the counts, moments and categories, then the histograms counted."""
    summaries = [summary_for(kind) for _, kind in kinds]
    for part in parts:
        parquet = open_part(store, part)
        for group in range(parquet.num_row_groups):
            add_batch(summaries, parquet.read_row_group(group, use_threads=False))
    return count_histograms(store, parts, [name for name, _ in kinds], summaries)


def _kinds_of(schema: pa.Schema) -> list[tuple[str, ColumnKind]]:
    """The output's columns as a dataset's: text columns categorical, the rest numeric."""
    return [
        (
            field.name,
            ColumnKind.CATEGORICAL if pa.types.is_string(field.type) else ColumnKind.NUMERIC,
        )
        for field in schema
    ]


def _request(session: Session, batch_id: str) -> BatchPredictionRecord:
    record = session.get(BatchPredictionRecord, batch_id)
    if record is None:
        raise BatchFailed("batch_not_found", f"Batch prediction '{batch_id}' has no record.")
    session.expunge(record)
    return record


def _model(
    session: Session, store: DataStore, model_id: str, *, load: bool
) -> tuple[LoadedModel, StoredObject | None]:
    """The batch's model, loaded (``load``) or described for the workers to load, and its
    artifact (None when loaded here)."""
    try:
        if not load:
            return described_model(session, model_id)
        # A cache of its own: this process scores one batch with one model.
        return loaded_model(session, ModelCache(1 << 62), store, model_id), None
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
            f"Scored on the Dask cluster at {dask_scheduler}: each worker read, scored and "
            "wrote the parts it was given."
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
