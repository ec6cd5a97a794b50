"""Every table of the service, in one place so the schema reads top to bottom.

ORM classes end in ``Record`` so that "model" always means the fitted ML model. Ids are UUID
strings, times are timezone-aware UTC (``UTCDateTime``), and only portable types are used
(``JSON``, ``LargeBinary`` → ``BLOB``/``BYTEA``), so the schema is the same on SQLite and
PostgreSQL. Bulky bytes — a column's data, a model's artifact — live in their own column or
table and are never loaded by listings. There are no ORM relationships: repositories join
explicitly, so nothing loads behind a caller's back.

Migrations in ``migrations/versions`` must match this module; a test runs Alembic's
autogenerate comparison and fails on any difference.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from service.db.base import Base
from service.db.types import UTCDateTime, utc_now

ID_LENGTH = 36


def new_id() -> str:
    """A fresh opaque id (a UUID4 in its canonical text form)."""
    return str(uuid.uuid4())


def _in(column: str, values: type[StrEnum]) -> str:
    """SQL for ``column IN (...)`` over an enum's values, for a CHECK constraint."""
    return f"{column} IN ({', '.join(repr(member.value) for member in values)})"


class ColumnKind(StrEnum):
    NUMERIC = "numeric"
    CATEGORICAL = "categorical"


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# A dataset cannot be deleted while a job in one of these states uses it.
ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)


# --- datasets -----------------------------------------------------------------------------


class DatasetRecord(Base):
    """An uploaded table; immutable once created. Its columns are ``DatasetColumnRecord`` rows."""

    __tablename__ = "datasets"
    __table_args__ = (Index("ix_datasets_created_at", "created_at"),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    # Text, not String(n): names are echoed verbatim, however long.
    name: Mapped[str] = mapped_column(Text)
    n_rows: Mapped[int] = mapped_column(Integer)
    n_columns: Mapped[int] = mapped_column(Integer)
    # Of the upload as received (CSV file or JSON body), so a client can tell duplicates apart.
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    # A table registered where it lies (a Parquet file or directory, fsspec URL): its parts
    # are read from there, never copied. NULL for an uploaded table, whose parts are in the
    # data store.
    source_url: Mapped[str | None] = mapped_column(Text, nullable=True)


class DatasetPartRecord(Base):
    """One Parquet part of a dataset: rows ``row_offset`` to ``row_offset + n_rows``.

    Parts of an uploaded table are data-store objects (``datasets/<id>/part-NNNNN.parquet``)
    named by ``path`` with their ``size`` and ``sha256``, verified when read. Parts of a
    registered table are the source's own files: ``path`` is their full URL, ``sha256`` is
    NULL and ``source_stamp`` (modification time or ETag) with ``size`` tells whether the
    source has changed since it was registered. The global row offset lets a reader (a Dask
    worker) take rows by position without opening the parts before it.
    """

    __tablename__ = "dataset_parts"

    dataset_id: Mapped[str] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    row_offset: Mapped[int] = mapped_column(BigInteger)
    n_rows: Mapped[int] = mapped_column(BigInteger)
    path: Mapped[str] = mapped_column(Text, info={"store_path": True})
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    source_stamp: Mapped[str | None] = mapped_column(Text, nullable=True)


class DatasetColumnRecord(Base):
    """One column of a dataset: its summary, statistics and distribution.

    The column's values are in the dataset's Parquet parts (``DatasetPartRecord``) when
    ``data_format`` is ``PARTS_FORMAT`` (2), and ``data`` is then empty. ``data_format`` 1 is
    the layout before revision 0009 (kept readable, and moved into parts by that revision):
    ``data`` zlib-compressed and never pickled (``service.datasets.columns`` owns it), numeric
    columns little-endian float64 with NaN for missing, categorical ones a JSON list of category
    strings followed by little-endian int32 codes, -1 for missing.
    """

    __tablename__ = "dataset_columns"
    __table_args__ = (
        CheckConstraint(_in("kind", ColumnKind), name="kind"),
        # No unique index on (dataset_id, name): PostgreSQL cannot index arbitrarily long text,
        # and names are unique by construction at ingestion.
    )

    dataset_id: Mapped[str] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    n_missing: Mapped[int] = mapped_column(Integer)
    n_unique: Mapped[int] = mapped_column(Integer)
    # numeric: {"min", "max", "mean", "std"}; categorical: {"top": [{"value", "count"}, ...]}.
    stats: Mapped[dict[str, Any]] = mapped_column(JSON)
    # numeric: {"histogram": {"edges", "counts"}, "min", "max", "mean", "std"}; categorical:
    # {"top": [{"value", "count"}, ...], "n_other"} (service.datasets.distributions). NULL for
    # columns stored before revision 0006: not computed. Deferred: only GET of one dataset
    # reads it, not the job and search checks that read the columns.
    distribution: Mapped[dict[str, Any] | None] = mapped_column(
        JSON(none_as_null=True), nullable=True, deferred=True
    )
    # Bumped when the byte layout of `data` changes, so old rows stay readable; 2: in the parts.
    data_format: Mapped[int] = mapped_column(Integer, default=1)
    data: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)


# --- jobs: the row is the queue -------------------------------------------------------------


class JobRecord(Base):
    """One training request; its status column is the work queue.

    ``queued → running → succeeded | failed | cancelled``. A worker claims a queued row by a
    guarded UPDATE, holds it by a lease it renews with heartbeats, and polls ``cancel_requested``.
    ``model_id`` repeats ``ModelRecord.job_id`` (the foreign key) for cheap reads and has no
    constraint of its own, which would make the two tables depend on each other.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_in("status", JobStatus), name="status"),
        CheckConstraint("progress >= 0 AND progress <= 1", name="progress"),
        CheckConstraint("attempts >= 0 AND max_attempts >= 1", name="attempts"),
        # The claim: the oldest queued job. Also serves listings filtered by status.
        Index("ix_jobs_status_created_at", "status", "created_at"),
        # Stale-lease recovery: running jobs whose lease has passed.
        Index("ix_jobs_status_lease_expires_at", "status", "lease_expires_at"),
        # "Is this dataset in use?" before a delete.
        Index("ix_jobs_dataset_id_status", "dataset_id", "status"),
        Index("ix_jobs_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str | None] = mapped_column(Text)
    # SET NULL: finished jobs outlive their dataset; active ones block its deletion.
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"))
    method: Mapped[str] = mapped_column(String(64))
    task: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(Text)
    features: Mapped[list[str]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    validation: Mapped[dict[str, Any]] = mapped_column(JSON)
    seed: Mapped[int | None] = mapped_column(Integer)
    # The job's own limit on its fit's seconds; NULL: only the server's limit applies.
    max_runtime_seconds: Mapped[float | None] = mapped_column(Float)

    status: Mapped[str] = mapped_column(String(16), default=JobStatus.QUEUED)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    stage: Mapped[str | None] = mapped_column(Text)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)

    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    # Not claimable before this time (retry back-off); NULL means at once.
    run_after: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    lease_owner: Mapped[str | None] = mapped_column(String(255))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    model_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    # What the ended fit cost, as its fit process measured it (service.worker.fit_process):
    # {"wall_seconds", "cpu_seconds", "peak_rss_bytes", "backend", "dask_workers"}; NULL
    # before the fit has ended, or when it ended without saying (a crash).
    resources: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The search this job is a candidate of; no foreign key, so adding the column never
    # rebuilds the jobs table on SQLite (the models' foreign keys to jobs would refuse it).
    search_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)


# The jobs row of a batch prediction has this ``method``: the queue runs it like a fit, but its
# process scores a dataset (``service.batch``) instead of training.
BATCH_METHOD = "batch_prediction"


class BatchPredictionRecord(Base):
    """One scoring of a stored dataset by one model (``service.batch``), written as a new dataset.

    Its id is the id of the jobs row that queues it (``method = BATCH_METHOD``): status,
    progress, attempts, lease and cancel are that row's, so a batch is claimed, leased,
    cancelled and retried exactly as a fit is. ``output_dataset_id``, ``metrics`` and ``notes``
    are written in the transaction that marks the job succeeded, with the output dataset's rows.
    """

    __tablename__ = "batch_predictions"
    __table_args__ = (
        Index("ix_batch_predictions_created_at", "created_at"),
        Index("ix_batch_predictions_model_id_created_at", "model_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str | None] = mapped_column(Text)
    # The reference as asked for (a model id, name@alias, name@N) and the model it named then.
    model_ref: Mapped[str] = mapped_column(Text)
    # No foreign keys to models or datasets: the record outlives both, as a job does.
    model_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    dataset_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    keep_columns: Mapped[list[str]] = mapped_column(JSON)
    return_proba: Mapped[bool] = mapped_column(Boolean, default=False)
    explain: Mapped[bool] = mapped_column(Boolean, default=False)
    n_rows: Mapped[int] = mapped_column(BigInteger)
    output_dataset_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    # The model's metric set on the rows whose target is known; NULL without a target column.
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    # What a person should know about the scoring (features absent from the dataset, ...).
    notes: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


# --- models ---------------------------------------------------------------------------------


class ModelRecord(Base):
    """A fitted ensemble's description: everything about it except the artifact bytes."""

    __tablename__ = "models"
    __table_args__ = (
        Index("ix_models_created_at", "created_at"),
        Index("ix_models_method_created_at", "method", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), unique=True)
    # No foreign key: a model stays usable after its training data is deleted.
    dataset_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    method: Mapped[str] = mapped_column(String(64))
    task: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(Text)
    features: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # [{"name", "kind"}]
    classes: Mapped[list[Any] | None] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)  # resolved, defaults included
    # Category lists per categorical feature as used at training, to encode predict inputs.
    encoding: Mapped[dict[str, Any]] = mapped_column(JSON)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    curves: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    n_estimators: Mapped[int | None] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class PredictionLogRecord(Base):
    """One logged prediction row (service.monitoring): compact, metadata-sized.

    ``features`` holds the row as the model saw it (float32 per feature: categories as codes,
    NaN missing), ``bins`` the baseline bin of each feature and of the prediction (uint16
    each), which is all a drift report reads; ``unseen`` the categorical values training never
    saw, by feature, only on rows that have one. ``prediction`` is the value (regression) or
    the class index, ``proba`` the class probabilities (float32) when the request asked for
    them; ``actual`` (same coding) arrives later as feedback.
    """

    __tablename__ = "prediction_log"
    __table_args__ = (
        Index("ix_prediction_log_model_id_logged_at", "model_id", "logged_at"),
        Index("ix_prediction_log_model_id_row_id", "model_id", "row_id"),
        Index("ix_prediction_log_model_id_id", "model_id", "id"),
        # Few rows have an actual: the report finds a window's labelled rows through this
        # partial index without reading the window's other rows.
        Index(
            "ix_prediction_log_labelled",
            "model_id",
            "logged_at",
            sqlite_where=text("actual IS NOT NULL"),
            postgresql_where=text("actual IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    row_id: Mapped[str] = mapped_column(String(128))
    logged_at: Mapped[datetime] = mapped_column(UTCDateTime())
    features: Mapped[bytes] = mapped_column(LargeBinary)
    bins: Mapped[bytes | None] = mapped_column(LargeBinary)
    # SQL NULL, not JSON null, for a row without unseen values: the report selects the others.
    unseen: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    prediction: Mapped[float | None] = mapped_column(Float)
    proba: Mapped[bytes | None] = mapped_column(LargeBinary)
    actual: Mapped[float | None] = mapped_column(Float)


class PredictionCountRecord(Base):
    """Counts of the prediction log per model and hour, which is what a drift report sums.

    The log's writer adds each batch's counts here in the batch's own transaction (an upsert
    that adds), and takes trimmed rows' counts away when the per-model cap deletes them, so
    these always equal counts over the rows the log holds. ``column_index`` is -1 for the rows
    logged (``bin`` 0), a feature's position in the model for the baseline bins of that
    feature, and the number of features for the prediction's bins.
    """

    __tablename__ = "prediction_counts"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    column_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    bin: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(BigInteger)


class PredictionUnseenRecord(Base):
    """How often each unseen categorical value was logged, per model, hour and feature (its
    position in the model, as in ``prediction_counts``; names can be longer than an index
    takes). At most ``service.monitoring.aggregates.UNSEEN_VALUES_PER_HOUR`` values each; the
    unseen bin of ``prediction_counts`` counts them all."""

    __tablename__ = "prediction_unseen"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    hour: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    column_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)


class ModelArtifactRecord(Base):
    """Where the serialised estimator (``engine.save_model`` bytes) is: an object in the data
    store (``service.models.artifacts``), with the size and SHA-256 it is checked against."""

    __tablename__ = "model_artifacts"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    # The object's path in the data store; service.store.gc keeps what such columns name.
    path: Mapped[str] = mapped_column(Text, info={"store_path": True})
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))


class ImportanceRecord(Base):
    """One kind of feature importance of one model (impurity, permutation, shap, ...)."""

    __tablename__ = "importances"
    __table_args__ = (UniqueConstraint("model_id", "kind", name="uq_importances_model_id_kind"),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    # {"features": [{"name", "importance", "std"}, ...]}, sorted by importance.
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


# --- registered models: names, versions, aliases ------------------------------------------


class RegisteredModelRecord(Base):
    """A name a team deploys by ("churn"), with numbered versions and movable aliases.

    ``last_version`` only grows: the next version is ``last_version + 1`` even after versions
    are deleted, so "churn version 3" never comes to mean a different model.
    """

    __tablename__ = "registered_models"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    last_version: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class RegisteredModelVersionRecord(Base):
    """Version ``version`` of a registered name: one model, for good."""

    __tablename__ = "registered_model_versions"
    __table_args__ = (
        # "Is this model a registered version?" before a model is deleted.
        Index("ix_registered_model_versions_model_id", "model_id"),
    )

    name: Mapped[str] = mapped_column(
        ForeignKey("registered_models.name", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    # No ON DELETE: the database itself refuses to delete a model that is a registered version.
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"))
    created_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class RegisteredModelAliasRecord(Base):
    """``name@alias`` → version: one alias names one version; a version may carry several."""

    __tablename__ = "registered_model_aliases"
    __table_args__ = (
        # A version an alias points at cannot disappear from under it.
        ForeignKeyConstraint(
            ["name", "version"],
            ["registered_model_versions.name", "registered_model_versions.version"],
        ),
    )

    name: Mapped[str] = mapped_column(
        ForeignKey("registered_models.name", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class AliasMoveRecord(Base):
    """One move of an alias (set, moved or removed): who, when, from which version to which.

    Written in the transaction that moves the alias. The model ids are copied, not referenced,
    so the record still says which model served after its version is deleted.
    """

    __tablename__ = "registered_model_alias_moves"
    __table_args__ = (Index("ix_registered_model_alias_moves_name_id", "name", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(ForeignKey("registered_models.name", ondelete="CASCADE"))
    alias: Mapped[str] = mapped_column(String(64))
    from_version: Mapped[int | None] = mapped_column(Integer)
    to_version: Mapped[int | None] = mapped_column(Integer)
    from_model_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    to_model_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    # The API key's label, or NULL when the server runs without keys.
    actor: Mapped[str | None] = mapped_column(Text)
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


# --- searches: hyper-parameter search, leaderboards, stacked ensembles -----------------------


class SearchStatus(StrEnum):
    RUNNING = "running"
    # Every candidate has ended; one worker is building the stacked ensemble.
    STACKING = "stacking"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SearchRecord(Base):
    """A hyper-parameter search: its request, its plan, and where it stands.

    The candidates are ordinary jobs (``JobRecord.search_id``); workers move a search on
    (``service.searches.driver``): halving's next rung, the deadline, the stacked ensemble.
    """

    __tablename__ = "searches"
    __table_args__ = (
        CheckConstraint(_in("status", SearchStatus), name="status"),
        Index("ix_searches_status", "status"),
        Index("ix_searches_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str | None] = mapped_column(Text)
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"))
    target: Mapped[str] = mapped_column(Text)
    task: Mapped[str] = mapped_column(String(32))
    features: Mapped[list[str]] = mapped_column(JSON)
    strategy: Mapped[str] = mapped_column(String(16))
    auto: Mapped[bool] = mapped_column(Boolean, default=False)
    # The parameter spaces as asked for, or as "auto" chose them (with its reasons).
    candidates: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    budget: Mapped[dict[str, Any]] = mapped_column(JSON)
    folds: Mapped[int] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(String(32))
    stack: Mapped[bool] = mapped_column(Boolean, default=False)
    register_as: Mapped[str | None] = mapped_column(Text)
    # {"status": "pending" | "registered" | "failed", "name", "version", "model_id", "detail"}.
    registration: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Every candidate's job uses this seed, so all share one fold assignment (stacking needs it).
    seed: Mapped[int] = mapped_column(Integer)

    status: Mapped[str] = mapped_column(String(16), default=SearchStatus.RUNNING)
    # Successive halving's current rung (0 for the other strategies).
    rung: Mapped[int] = mapped_column(Integer, default=0)
    deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    best_model_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    stack_model_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))
    # Why the ensemble or the registration is missing, when it is.
    notes: Mapped[list[str]] = mapped_column(JSON)
    # When a worker took the STACKING step; another may take it over once it is stale.
    stacking_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SearchCandidateRecord(Base):
    """One candidate of a search: which job trains it, on which rung and how many rows."""

    __tablename__ = "search_candidates"
    __table_args__ = (Index("ix_search_candidates_search_id_rung", "search_id", "rung"),)

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    search_id: Mapped[str] = mapped_column(ForeignKey("searches.id", ondelete="CASCADE"))
    # Which configuration of the plan (several rungs of halving train the same one).
    config_index: Mapped[int] = mapped_column(Integer)
    rung: Mapped[int] = mapped_column(Integer, default=0)
    # Rows the candidate trains on (halving's resource); NULL: all of them.
    n_rows: Mapped[int | None] = mapped_column(Integer)
    # "candidate", or "stack" for the stacked ensemble (a job recorded, never queued).
    kind: Mapped[str] = mapped_column(String(16), default="candidate")


class OutOfFoldRecord(Base):
    """A candidate's out-of-fold predictions: the level-one data of the stacked ensemble.

    Float64 of shape (n_rows, n_columns): class probabilities (in the model's class order) or
    the regression prediction, each row predicted by the fold model that did not train on it
    (``service.searches.predictions``). The bytes are an object in the data store
    (``models/<model id>/out_of_fold.f8``, raw little-endian, row-major) named by ``path``,
    ``size`` and ``sha256``; ``data`` is empty then. Before revision ``0010_oof_store`` they
    were zlib-compressed here in ``data`` (that revision moves them; the reader still takes
    both). Kept with the model, so a search can be stacked again later (H2O's lost frames:
    h2oai/h2o-tutorials#168).
    """

    __tablename__ = "out_of_fold_predictions"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), index=True)
    n_rows: Mapped[int] = mapped_column(Integer)
    n_columns: Mapped[int] = mapped_column(Integer)
    folds: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    path: Mapped[str | None] = mapped_column(Text, nullable=True, info={"store_path": True})
    size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
