"""Response bodies of the ``/v1/datasets`` endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from service.db.tables import ColumnKind


class ColumnOut(BaseModel):
    name: str
    kind: ColumnKind
    n_missing: int = Field(description="Cells with no value.")
    n_unique: int = Field(description="Distinct present values (categories, for categorical).")


class DatasetOut(BaseModel):
    id: str
    name: str
    n_rows: int
    n_columns: int
    columns: list[ColumnOut]
    size_bytes: int = Field(description="Size of the upload as received (CSV file or JSON body).")
    sha256: str = Field(description="SHA-256 of the upload as received, hex.")
    created_at: datetime


class DatasetSummaryOut(BaseModel):
    """A dataset in a listing: everything but its columns."""

    id: str
    name: str
    n_rows: int
    n_columns: int
    size_bytes: int
    sha256: str
    created_at: datetime


class DatasetPage(BaseModel):
    items: list[DatasetSummaryOut]
    total: int
