"""Parse uploads into columns in memory: a JSON body, or CSV by Python's ``csv`` module.

Both parsers are plain synchronous code over their input; the router runs them in a worker
thread. JSON bodies (at most ``COPPICE_MAX_REQUEST_BYTES``) are parsed here. CSV uploads are
streamed into parts by ``service.datasets.csv_ingest``, which keeps to what ``parse_csv`` does
and reads with ``csv_rows`` (the rows, and every error message about them) wherever pyarrow's
reader could read a file otherwise; ``parse_csv`` stays as the reference its tests compare
with. Errors name what is wrong and where.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import math
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from service.datasets.columns import ColumnBuilder, ColumnData, NonFiniteValue
from service.errors import BadRequest, FieldError, InvalidInput

# The csv module's default is 128 KiB a field; a cell that long is almost surely a broken
# quote, and the message for it names the line.
_CSV_FIELD_LIMIT = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ParsedTable:
    """An upload turned into columns, plus what identifies the upload itself."""

    columns: list[ColumnData]
    n_rows: int
    size_bytes: int
    sha256: str


class TableBuilder:
    """Rows in, columns out: header checks, row-length checks, per-column builders."""

    def __init__(self, names: Sequence[str], *, max_columns: int, source: str) -> None:
        check_column_names(names, max_columns=max_columns, source=source)
        self.names = list(names)
        self._builders = [ColumnBuilder(name) for name in names]

    @property
    def n_rows(self) -> int:
        return self._builders[0].n_rows

    def add_text_row(self, cells: Sequence[str]) -> None:
        for builder, cell in zip(self._builders, cells, strict=True):
            builder.add_text(cell)

    def add_json_row(self, cells: Iterable[Any], row: int) -> None:
        for builder, value in zip(self._builders, cells, strict=True):
            _add_json_value(builder, value, row)

    def finish(self, categorical: Collection[str], *, size_bytes: int, sha256: str) -> ParsedTable:
        """Finish every column; ``categorical`` names the columns forced to be categorical."""
        check_categorical_names(categorical, self.names)
        if self.n_rows == 0:
            raise InvalidInput("The dataset has a header but no rows; upload at least one row.")
        forced = set(categorical)
        try:
            columns = [b.finish(categorical=b.name in forced) for b in self._builders]
        except NonFiniteValue as error:
            raise InvalidInput(
                str(error), errors=[{"loc": ["body", error.column], "msg": "infinite value"}]
            ) from None
        return ParsedTable(columns, self.n_rows, size_bytes, sha256)


def check_categorical_names(categorical: Collection[str], names: Sequence[str]) -> None:
    """422 naming the forced-categorical names the table has no column for."""
    unknown = [name for name in categorical if name not in set(names)]
    if unknown:
        raise InvalidInput(
            f"'categorical' names {_quoted(unknown)}, which the dataset does not have; "
            f"its columns are {_quoted(names, limit=20)}.",
            errors=[
                {"loc": ["body", "categorical"], "msg": f"unknown column '{name}'"}
                for name in unknown
            ],
        )


def check_column_names(names: Sequence[str], *, max_columns: int, source: str) -> None:
    """Refuse a header with no columns, too many, unnamed, duplicated or unstorable names."""
    if not names:
        raise InvalidInput(f"The {source} names no columns.")
    if len(names) > max_columns:
        raise InvalidInput(
            f"The {source} has {len(names)} columns; this server accepts at most {max_columns} "
            "(COPPICE_MAX_COLUMNS)."
        )
    errors: list[FieldError] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    for position, name in enumerate(names, start=1):
        if not name.strip():
            errors.append(
                {"loc": ["columns", position - 1], "msg": f"column {position} has no name"}
            )
        elif not is_storable_text(name):
            errors.append(
                {
                    "loc": ["columns", position - 1],
                    "msg": f"column {position}'s name has a NUL "
                    "character or a lone surrogate, which cannot be stored",
                }
            )
        elif name in seen and name not in duplicates:
            duplicates.append(name)
        seen.add(name)
    for name in duplicates:
        errors.append({"loc": ["columns", name], "msg": f"column '{name}' appears more than once"})
    if errors:
        detail = "; ".join(error["msg"] for error in errors[:5])
        raise InvalidInput(f"The {source} has unusable column names: {detail}.", errors=errors)


# --- CSV ------------------------------------------------------------------------------------


class _HashingChunks:
    """Passes byte chunks through, counting and hashing them on the way."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self.size = 0
        self._hash = hashlib.sha256()

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.size += len(chunk)
            self._hash.update(chunk)
            yield chunk

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Decode UTF-8 (a leading BOM dropped) and yield lines, each with its ``\\n``."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
    pending = ""
    offset = 0
    try:
        for chunk in chunks:
            text = pending + decoder.decode(chunk)
            offset += len(chunk)
            # Only "\n" ends a line here: the csv module itself handles "\r\n" and newlines
            # inside quoted fields, and str.splitlines would also split on "\u2028" and friends.
            *complete, pending = text.split("\n")
            for line in complete:
                yield line + "\n"
        pending += decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        raise BadRequest(
            f"The file is not UTF-8 text: undecodable bytes near byte {offset + error.start}. "
            "Save it as UTF-8 (a BOM is fine) and upload it again."
        ) from None
    if pending:
        yield pending


def parse_csv(chunks: Iterable[bytes], *, max_columns: int) -> tuple[TableBuilder, _HashingChunks]:
    """Read a CSV with a header row from byte chunks into a ``TableBuilder``, in memory.

    Returns the builder (call ``finish`` once the forced-categorical names are known, which in
    a form may come after the file) and the chunk counter holding the upload's size and hash.
    The service streams CSV uploads into parts instead (``service.datasets.csv_ingest``); this
    is the reference it keeps to: same rows, same kinds, same messages.
    """
    counted = _HashingChunks(chunks)
    rows = csv_rows(counted, max_columns=max_columns)
    table = TableBuilder(next(rows), max_columns=max_columns, source="CSV header")
    for cells in rows:
        table.add_text_row(cells)
    return table, counted


def csv_rows(chunks: Iterable[bytes], *, max_columns: int) -> Generator[list[str], None, None]:
    """The header (its names checked), then each data row as cells, from UTF-8 byte chunks.

    Python's ``csv`` module in strict mode: blank lines are skipped, a row of another length
    than the header, an unterminated quote, undecodable bytes or an empty file is the error
    (400 or 422) that names it, raised when the reader reaches it.
    """
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    # strict: an unterminated quote is an error, not a cell swallowing the rest of the file.
    reader = csv.reader(_lines(chunks), strict=True)
    width: int | None = None
    n_rows = 0
    try:
        for cells in reader:
            if not cells:  # blank line
                continue
            if width is None:
                check_column_names(cells, max_columns=max_columns, source="CSV header")
                width = len(cells)
                yield cells
                continue
            if len(cells) != width:
                raise BadRequest(
                    f"Row {n_rows + 1} (line {reader.line_num} of the file) has "
                    f"{len(cells)} cells; the header has {width}."
                )
            n_rows += 1
            yield cells
    except csv.Error as error:
        raise BadRequest(
            f"The file is not valid CSV at line {reader.line_num}: {_csv_fault(error)}."
        ) from None
    if width is None:
        raise InvalidInput("The file is empty; upload a CSV file with a header row.")


def _csv_fault(error: csv.Error) -> str:
    """The csv module's complaint, in words for someone who sent a file over HTTP."""
    text = str(error)
    if text.startswith("new-line character seen in unquoted field"):
        # Python's own hint ("open the file in universal-newline mode") means nothing here.
        return (
            "a line break (a lone carriage return) inside an unquoted cell; quote the cell, "
            "or end lines with \\n or \\r\\n"
        )
    return text


# --- JSON -----------------------------------------------------------------------------------


class _RowsUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    columns: list[str]
    rows: list[list[Any]]
    categorical: list[str] = []


class _RecordsUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    records: list[dict[str, Any]]
    categorical: list[str] = []


def parse_json_upload(
    document: Any, *, max_columns: int, size_bytes: int, sha256: str
) -> tuple[ParsedTable, str | None]:
    """Turn a decoded JSON body (``columns`` + ``rows``, or ``records``) into columns."""
    if not isinstance(document, dict):
        raise InvalidInput(
            'The body must be a JSON object: {"columns": [...], "rows": [[...]]} '
            'or {"records": [{...}]}.'
        )
    shape: type[_RowsUpload] | type[_RecordsUpload]
    shape = _RecordsUpload if "records" in document else _RowsUpload
    try:
        upload = shape.model_validate(document)
    except ValidationError as error:
        errors: list[FieldError] = [
            {"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in error.errors()
        ]
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidInput(f"{where}: {first['msg']}.", errors=errors) from None
    if isinstance(upload, _RecordsUpload):
        table = _records_table(upload.records, max_columns)
    else:
        table = _rows_table(upload.columns, upload.rows, max_columns)
    parsed = table.finish(upload.categorical, size_bytes=size_bytes, sha256=sha256)
    return parsed, upload.name


def _rows_table(columns: list[str], rows: list[list[Any]], max_columns: int) -> TableBuilder:
    table = TableBuilder(columns, max_columns=max_columns, source="'columns' list")
    for number, row in enumerate(rows, start=1):
        if len(row) != len(columns):
            raise BadRequest(f"Row {number} has {len(row)} cells; 'columns' names {len(columns)}.")
        table.add_json_row(row, number)
    return table


def _records_table(records: list[dict[str, Any]], max_columns: int) -> TableBuilder:
    # Columns are the keys in the order first seen; a key a record lacks is a missing value.
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
        if len(names) > max_columns:
            break
    table = TableBuilder(list(names), max_columns=max_columns, source="records")
    for number, record in enumerate(records, start=1):
        table.add_json_row((record.get(name) for name in table.names), number)
    return table


def _add_json_value(builder: ColumnBuilder, value: Any, row: int) -> None:
    if value is None:
        builder.add_missing()
    elif isinstance(value, bool):  # before int: bool is an int subclass
        builder.add_text("true" if value else "false")
    elif isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond float64; a float literal overflows to inf
            number = math.inf
        builder.add_number(number)
    elif isinstance(value, str):
        _check_unicode(value, builder.name, row)
        builder.add_text(value)
    else:
        raise InvalidInput(
            f"Row {row}, column '{builder.name}' holds a JSON {type(value).__name__}; "
            "a cell must be a number, a string, a boolean or null.",
            errors=[{"loc": ["body", row - 1, builder.name], "msg": "not a scalar"}],
        )


def is_storable_text(text: str) -> bool:
    """Whether every database can store ``text``: no NUL (PostgreSQL), valid Unicode."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_unicode(text: str, column: str, row: int) -> None:
    # JSON escapes can spell lone surrogates, which no database text column can store.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"Row {row}, column '{column}' holds a string that is not valid Unicode "
            "(a lone surrogate escape)."
        ) from None


def _quoted(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(f"'{name}'" for name in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
