"""Out-of-fold predictions: a candidate's held-out outputs, the stacked ensemble's input.

The fit process writes them to the data store beside the model's artifact
(``models/<model id>/out_of_fold.f8``: raw little-endian float64, row-major, never pickled)
and only the object's name crosses the pipe; the worker verifies the object and names it in
SQL when it stores the model (same transaction), keyed by the model, so they outlive the
search and an ensemble can always be rebuilt from them (H2O users lose theirs when the frame
holding them is deleted: h2oai/h2o-tutorials#168). Deleting the model deletes the object.
Rows written before revision ``0010_oof_store`` held the bytes zlib-compressed in SQL; that
revision moves them, and :func:`load` still reads either.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.orm import Session, undefer

from service.db.tables import OutOfFoldRecord
from service.store import DataStore, StoredObject

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class StoredPredictions:
    """Out-of-fold predictions written to the store: the object and the matrix's shape."""

    stored: StoredObject
    n_rows: int
    n_columns: int


def object_path(model_id: str) -> str:
    return f"models/{model_id}/out_of_fold.f8"


def to_bytes(values: Matrix) -> bytes:
    return np.ascontiguousarray(values, dtype="<f8").tobytes()


def write(store: DataStore, model_id: str, values: Matrix) -> StoredPredictions:
    """Write a candidate's predictions to the store (before any row names them)."""
    stored = store.put(object_path(model_id), to_bytes(values))
    return StoredPredictions(stored, int(values.shape[0]), int(values.shape[1]))


def encode(values: Matrix) -> bytes:
    """The layout before revision 0010_oof_store (zlib in SQL); kept for tests of the move."""
    return zlib.compress(to_bytes(values), level=1)


def decode(record: OutOfFoldRecord, store: DataStore | None = None) -> Matrix:
    """The (n_rows, n_columns) float64 matrix of a record, read from the store (verified) or,
    for a row the move has not reached, from SQL; a malformed one is a ValueError."""
    if record.path is not None:
        if store is None:
            raise ValueError(
                f"the out-of-fold predictions of model {record.model_id} are in "
                "the data store, and no store was given"
            )
        assert record.size is not None and record.sha256 is not None
        raw = store.get(StoredObject(record.path, record.size, record.sha256))
    else:
        raw = zlib.decompress(record.data)
    values = np.frombuffer(raw, dtype="<f8")
    if values.size != record.n_rows * record.n_columns:
        raise ValueError(f"the out-of-fold predictions of model {record.model_id} are truncated")
    return values.reshape(record.n_rows, record.n_columns).astype(np.float64)


def add(
    session: Session, *, model_id: str, job_id: str, folds: int, kept: StoredPredictions
) -> None:
    """Name a candidate's stored predictions beside its model (flushed by the caller)."""
    session.add(
        OutOfFoldRecord(
            model_id=model_id,
            job_id=job_id,
            n_rows=kept.n_rows,
            n_columns=kept.n_columns,
            folds=folds,
            data=b"",
            path=kept.stored.path,
            size=kept.stored.size,
            sha256=kept.stored.sha256,
        )
    )


def load(session: Session, store: DataStore, model_ids: Sequence[str]) -> dict[str, Matrix]:
    """The stored predictions of these models, by model id (a model without any is absent)."""
    records = session.scalars(
        select(OutOfFoldRecord)
        .where(OutOfFoldRecord.model_id.in_(list(model_ids)))
        .options(undefer(OutOfFoldRecord.data))
    ).all()
    return {record.model_id: decode(record, store) for record in records}
