"""Out-of-fold predictions in SQL: a candidate's held-out outputs, the stacked ensemble's input.

Stored when the candidate's model is (in the same transaction), keyed by the model, so they
outlive the search and an ensemble can always be rebuilt from them; H2O users lose theirs when
the frame holding them is deleted (h2oai/h2o-tutorials#168). The bytes are zlib-compressed
little-endian float64, row-major, never pickled.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from sqlalchemy import select
from sqlalchemy.orm import Session, undefer

from service.db.tables import OutOfFoldRecord

Matrix = npt.NDArray[np.float64]


def encode(values: Matrix) -> bytes:
    return zlib.compress(np.ascontiguousarray(values, dtype="<f8").tobytes(), level=1)


def decode(record: OutOfFoldRecord) -> Matrix:
    """The (n_rows, n_columns) float64 matrix of a record; a malformed one is a ValueError."""
    raw = zlib.decompress(record.data)
    values = np.frombuffer(raw, dtype="<f8")
    if values.size != record.n_rows * record.n_columns:
        raise ValueError(f"the out-of-fold predictions of model {record.model_id} are truncated")
    return values.reshape(record.n_rows, record.n_columns).astype(np.float64)


def add(session: Session, *, model_id: str, job_id: str, folds: int, values: Matrix) -> None:
    """Store a candidate's out-of-fold predictions beside its model (flushed by the caller)."""
    session.add(
        OutOfFoldRecord(
            model_id=model_id,
            job_id=job_id,
            n_rows=int(values.shape[0]),
            n_columns=int(values.shape[1]),
            folds=folds,
            data=encode(values),
        )
    )


def load(session: Session, model_ids: Sequence[str]) -> dict[str, Matrix]:
    """The stored predictions of these models, by model id (a model without any is absent)."""
    records = session.scalars(
        select(OutOfFoldRecord)
        .where(OutOfFoldRecord.model_id.in_(list(model_ids)))
        .options(undefer(OutOfFoldRecord.data))
    ).all()
    return {record.model_id: decode(record) for record in records}
