"""Parquet and Arrow IPC uploads: from a spooled file to parts, batch by batch.

Kinds come from the Arrow types (API.md, "Datasets at data-team scale"): integers, floats,
decimals and booleans are ``numeric`` (float64 in the parts, null and NaN missing); strings and
dictionaries of strings are ``categorical``; a column of nulls only is numeric, as an empty CSV
column is. Any other type (nested, binary, temporal, ...) is a 422 naming the column and its
type, before a byte is written. Infinite numbers are refused as they are in a CSV.

pyarrow reads the file a record batch at a time (a Parquet row group, an IPC batch), so memory
holds one batch and the part writer's one row group, whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from service.datasets.columns import canonical_text
from service.datasets.formats import UploadFormat
from service.datasets.ingest import check_column_names
from service.datasets.parts import CATEGORY_TYPE, NUMERIC_TYPE
from service.db.tables import ColumnKind
from service.errors import BadRequest, InvalidInput

# Rows pyarrow hands over at once when reading a Parquet file.
READ_BATCH_ROWS = 1 << 16
SOURCE_NAMES = {
    UploadFormat.PARQUET: "Parquet file",
    UploadFormat.ARROW_FILE: "Arrow IPC file",
    UploadFormat.ARROW_STREAM: "Arrow IPC stream",
}


@dataclass(frozen=True, slots=True)
class ColumnPlan:
    """How one source column becomes a dataset column."""

    name: str
    kind: ColumnKind
    source_type: pa.DataType
    forced: bool = False  # numeric in the source, categorical by request


def kind_of(field: pa.Field) -> ColumnKind | None:
    """The kind a column of this Arrow type gets; None when Coppice cannot hold it."""
    kind = field.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_null(kind)
    ):
        return ColumnKind.NUMERIC
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or _is_string_view(kind):
        return ColumnKind.CATEGORICAL
    return None


def _is_string_view(kind: pa.DataType) -> bool:
    check = getattr(pa.types, "is_string_view", None)
    return bool(check and check(kind))


def plan(
    schema: pa.Schema, categorical: Sequence[str], *, max_columns: int, source: str
) -> list[ColumnPlan]:
    """The dataset's columns for a source schema; 422 for names or types it cannot hold."""
    names = list(schema.names)
    check_column_names(names, max_columns=max_columns, source=f"{source}'s schema")
    unknown = [name for name in categorical if name not in set(names)]
    if unknown:
        quoted = ", ".join(f"'{name}'" for name in unknown)
        raise InvalidInput(
            f"'categorical' names {quoted}, which the dataset does not have.",
            errors=[
                {"loc": ["body", "categorical"], "msg": f"unknown column '{name}'"}
                for name in unknown
            ],
        )
    refused = [field for field in schema if kind_of(field) is None]
    if refused:
        detail = "; ".join(f"column '{f.name}' is of type {f.type}" for f in refused[:5])
        raise InvalidInput(
            f"The {source} has columns of types Coppice cannot hold: {detail}. Numbers, "
            "booleans and strings (or dictionaries of strings) are supported; convert or drop "
            "the others.",
            errors=[
                {"loc": ["body", field.name], "msg": f"unsupported type {field.type}"}
                for field in refused
            ],
        )
    forced = set(categorical)
    plans = []
    for field in schema:
        kind = kind_of(field)
        assert kind is not None
        force = field.name in forced and kind == ColumnKind.NUMERIC
        plans.append(
            ColumnPlan(
                field.name, ColumnKind.CATEGORICAL if force else kind, field.type, forced=force
            )
        )
    return plans


def parts_schema(plans: Sequence[ColumnPlan]) -> pa.Schema:
    return pa.schema(
        [
            pa.field(p.name, NUMERIC_TYPE if p.kind == ColumnKind.NUMERIC else CATEGORY_TYPE)
            for p in plans
        ]
    )


def open_source(path: str, fmt: UploadFormat) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The file's schema and its record batches; 400 when it is not what it claims to be."""
    source = SOURCE_NAMES[fmt]
    try:
        if fmt == UploadFormat.PARQUET:
            # pre_buffer (pyarrow's default) reads every requested row group's pages ahead:
            # over the whole file, that is the whole file in memory. One group at a time.
            parquet = pq.ParquetFile(path, pre_buffer=False)
            return parquet.schema_arrow, _guarded(_row_groups(parquet), source)
        if fmt == UploadFormat.ARROW_FILE:
            reader = pa.ipc.open_file(pa.memory_map(path))
            return reader.schema, _guarded(
                (reader.get_batch(i) for i in range(reader.num_record_batches)), source
            )
        stream = pa.ipc.open_stream(pa.OSFile(path))
        return stream.schema, _guarded(iter(stream), source)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise _unreadable(source, error) from None


def _row_groups(parquet: pq.ParquetFile) -> Iterator[pa.RecordBatch]:
    for group in range(parquet.num_row_groups):
        yield from parquet.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=[group])


def _guarded(batches: Iterator[pa.RecordBatch], source: str) -> Iterator[pa.RecordBatch]:
    # A file can be damaged past its footer: a row group that does not decode is a 400 too.
    try:
        yield from batches
    except (pa.ArrowException, OSError, ValueError) as error:
        raise _unreadable(source, error) from None


def _unreadable(source: str, error: BaseException) -> BadRequest:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return BadRequest(f"The file is not a readable {source} (truncated or corrupt?): {reason}.")


def normalize(
    batch: pa.RecordBatch, plans: Sequence[ColumnPlan], schema: pa.Schema, first_row: int
) -> pa.RecordBatch:
    """A source batch in the parts' schema; ``first_row`` is its first row's number (0-based)."""
    arrays = [_column(batch.column(index), plan, first_row) for index, plan in enumerate(plans)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(array: pa.Array, plan: ColumnPlan, first_row: int) -> pa.Array:
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    if plan.kind == ColumnKind.CATEGORICAL and not plan.forced:
        return array.cast(CATEGORY_TYPE)
    numbers = array.cast(NUMERIC_TYPE) if array.type != NUMERIC_TYPE else array
    # NaN is missing, as in a CSV: stored as null.
    nan = pc.is_nan(numbers)
    if pc.any(nan).as_py():
        numbers = pc.if_else(nan, pa.scalar(None, NUMERIC_TYPE), numbers)
    infinite = pc.is_inf(numbers)
    if pc.any(infinite).as_py():
        row = int(np.flatnonzero(infinite.fill_null(False).to_numpy(zero_copy_only=False))[0])
        value = numbers[row].as_py()
        raise InvalidInput(
            f"Column '{plan.name}' holds the infinite value '{value}' in row "
            f"{first_row + row + 1}; infinite numbers are not supported: use a finite number, "
            "or leave the cell empty for a missing value.",
            errors=[{"loc": ["body", plan.name], "msg": "infinite value"}],
        )
    if plan.forced:
        return pa.array(
            [None if v is None else canonical_text(v) for v in numbers.to_pylist()],
            type=CATEGORY_TYPE,
        )
    return numbers
