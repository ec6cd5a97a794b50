"""Response bodies of the ``/v1/datasets`` endpoints."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from service.db.tables import ColumnKind


class Histogram(BaseModel):
    edges: list[float] = Field(
        description="Bin edges, ascending: one more than `counts`, from the smallest present "
        "value to the largest. Both edges are the value when the column is constant; empty "
        "when no value is present."
    )
    counts: list[int] = Field(
        description="Present values per bin: `edges[i] <= x < edges[i + 1]`, the last bin "
        "closed; as `np.histogram(values, bins=20)`."
    )


class NumericDistribution(BaseModel):
    """A numeric column's distribution over its present values."""

    histogram: Histogram
    min: float | None
    max: float | None
    mean: float | None = Field(description="None when no value is present, or on overflow.")
    std: float | None = Field(description="Population standard deviation (ddof=0).")


class CategoryCount(BaseModel):
    value: str
    count: int


class CategoricalDistribution(BaseModel):
    """A categorical column's most frequent categories."""

    top: list[CategoryCount] = Field(
        description="Up to 10 categories, most frequent first; ties in sorted order."
    )
    n_other: int = Field(description="Present cells in every other category.")


class ColumnOut(BaseModel):
    name: str
    kind: ColumnKind
    n_missing: int = Field(description="Cells with no value.")
    n_unique: int = Field(description="Distinct present values (categories, for categorical).")
    distribution: NumericDistribution | CategoricalDistribution | None = Field(
        description="A histogram (numeric) or the top categories (categorical), computed at "
        "upload; null for datasets uploaded before the server computed them (not computed)."
    )


class StorageOut(BaseModel):
    """Where a dataset's values live."""

    format: str = Field(description="Always `parquet`: the parts are Parquet files.")
    n_parts: int
    bytes: int = Field(description="Total size of the parts.")
    registered: bool = Field(
        description="True for a table registered where it lies (read from its source, never "
        "copied); false for an uploaded one, whose parts are in the data store."
    )
    url: str | None = Field(
        default=None, description="The registered source's URL; shown to admin keys only."
    )


class DatasetOut(BaseModel):
    id: str
    name: str
    n_rows: int
    n_columns: int
    columns: list[ColumnOut]
    size_bytes: int = Field(description="Size of the upload as received (CSV file or JSON body).")
    sha256: str = Field(description="SHA-256 of the upload as received, hex.")
    created_at: datetime
    storage: StorageOut | None = Field(
        default=None, description="Where the values live; null for a dataset not yet moved."
    )


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
