"""Parsing uploads into columns: kinds, missing values, exact categories, errors, byte format."""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from service.datasets.columns import (
    CategoricalColumn,
    ColumnData,
    ColumnDataError,
    NumericColumn,
    decode_column,
    encode_column,
    summarize,
)
from service.datasets.ingest import ParsedTable, parse_csv, parse_json_upload
from service.errors import BadRequest, InvalidInput


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _csv(data: bytes, *, chunk: int = 7, categorical: tuple[str, ...] = ()) -> ParsedTable:
    table, counted = parse_csv(_chunks(data, chunk), max_columns=100)
    return table.finish(categorical, size_bytes=counted.size, sha256=counted.sha256)


def _by_name(table: ParsedTable) -> dict[str, ColumnData]:
    return {column.name: column for column in table.columns}


def _categories(column: ColumnData) -> list[str | None]:
    assert isinstance(column, CategoricalColumn)
    return [column.categories[code] if code >= 0 else None for code in column.codes]


def test_kinds_are_inferred_and_missing_spellings_recognised() -> None:
    data = b"num,cat,blank\n1,red,\n2.5,blue,NA\nNaN,red, \nnull,N/A,nan\n-3e2,NULL,\n"

    table = _csv(data)
    columns = _by_name(table)

    assert table.n_rows == 5
    num = columns["num"]
    assert isinstance(num, NumericColumn)
    np.testing.assert_array_equal(num.values, [1.0, 2.5, np.nan, np.nan, -300.0])
    assert _categories(columns["cat"]) == ["red", "blue", "red", None, None]
    # A column with no value at all is numeric and wholly missing.
    blank = columns["blank"]
    assert isinstance(blank, NumericColumn) and np.isnan(blank.values).all()


def test_chunk_boundaries_do_not_matter() -> None:
    # A BOM, a multi-byte character, a quoted comma and a quoted newline, CRLF line ends.
    data = '\ufeffname,note\r\n"Zoë","a, b"\r\n"Ærø","two\nlines"\r\n'.encode()

    for size in (1, 2, 3, 5, 64):
        columns = _by_name(_csv(data, chunk=size))
        assert _categories(columns["name"]) == ["Zoë", "Ærø"]
        assert _categories(columns["note"]) == ["a, b", "two\nlines"]


def test_size_and_hash_are_of_the_bytes_received() -> None:
    data = b"a\n1\n2\n"

    table = _csv(data)

    assert table.size_bytes == len(data)
    assert table.sha256 == hashlib.sha256(data).hexdigest()


def test_numbers_keep_their_text_when_the_column_turns_categorical() -> None:
    data = b"zip\n02139\n1.50\n1e3\n-0\n7\nK1A0B1\n"

    column = _by_name(_csv(data))["zip"]

    assert _categories(column) == ["02139", "1.50", "1e3", "-0", "7", "K1A0B1"]


def test_many_odd_texts_come_back_in_their_rows() -> None:
    # Odd texts are stored apart from the numbers; rows between them, missing cells and
    # non-ASCII digits (float() reads them) must not shift which text goes with which row.
    data = b"n\n1.50\n2\nNA\n3.0\n\xd9\xa1\xd9\xa2\n4\n005\nword\n"

    column = _by_name(_csv(data))["n"]

    assert _categories(column) == ["1.50", "2", None, "3.0", "١٢", "4", "005", "word"]


def test_an_infinity_after_odd_texts_is_named_as_written() -> None:
    with pytest.raises(InvalidInput, match=r"the infinite value '\+Infinity' in row 4"):
        _csv(b"x\n1.50\n2\n3.0\n+Infinity\n5.0\n")


def test_forced_categorical_keeps_text_verbatim() -> None:
    table = _csv(b"code,x\n007,1\n7,2\n,3\n", categorical=("code",))
    columns = _by_name(table)

    assert _categories(columns["code"]) == ["007", "7", None]
    assert isinstance(columns["x"], NumericColumn)


def test_forcing_an_unknown_column_names_it() -> None:
    with pytest.raises(InvalidInput, match="'nope'"):
        _csv(b"a\n1\n", categorical=("nope",))


def test_infinity_in_a_numeric_column_is_refused_with_its_place() -> None:
    with pytest.raises(InvalidInput, match=r"Column 'x' holds the infinite value 'inf' in row 2"):
        _csv(b"x\n1\ninf\n3\n")
    with pytest.raises(InvalidInput, match="'1e999'"):
        _csv(b"x\n1e999\n")


def test_infinity_spelt_in_a_text_column_is_a_category() -> None:
    column = _by_name(_csv(b"w\nalpha\ninf\n"))["w"]

    assert _categories(column) == ["alpha", "inf"]


def test_underscored_numbers_are_text() -> None:
    column = _by_name(_csv(b"v\n1_000\n"))["v"]

    assert isinstance(column, CategoricalColumn)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (
            b"a,b\n1,2\n3,4,5\n",
            BadRequest,
            r"Row 2 \(line 3 of the file\) has 3 cells; the header has 2",
        ),
        (b"a,b,a\n1,2,3\n", InvalidInput, "column 'a' appears more than once"),
        (b"a,,c\n1,2,3\n", InvalidInput, "column 2 has no name"),
        (b"a,b\n", InvalidInput, "no rows"),
        (b"", InvalidInput, "empty"),
        (b"\n\n", InvalidInput, "empty"),
        (b"a\n\xff\xfe\n", BadRequest, "not UTF-8 text: undecodable bytes near byte 2"),
        (b'a\n"unterminated\n', BadRequest, "not valid CSV"),
    ],
)
def test_bad_csv_is_refused_naming_the_problem(
    data: bytes, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        _csv(data)


def test_too_many_columns_fails_at_the_header() -> None:
    header = ",".join(f"c{i}" for i in range(11)).encode()

    with pytest.raises(InvalidInput, match="11 columns; this server accepts at most 10"):
        parse_csv(iter([header + b"\n"]), max_columns=10)


def _json(document: object) -> ParsedTable:
    table, _name = parse_json_upload(document, max_columns=100, size_bytes=1, sha256="x")
    return table


def test_json_rows_and_records_give_the_same_columns() -> None:
    rows = _json(
        {
            "columns": ["a", "b", "c"],
            "rows": [[1, "x", True], [None, "y", False], [2.5, None, None]],
        }
    )
    records = _json(
        {"records": [{"a": 1, "b": "x", "c": True}, {"b": "y", "c": False}, {"a": 2.5}]}
    )

    for table in (rows, records):
        columns = _by_name(table)
        np.testing.assert_array_equal(columns["a"].as_float(), [1.0, np.nan, 2.5])
        assert _categories(columns["b"]) == ["x", "y", None]
        assert _categories(columns["c"]) == ["true", "false", None]


def test_json_numbers_in_a_text_column_become_their_shortest_text() -> None:
    column = _by_name(_json({"columns": ["m"], "rows": [[1], [1.0], [2.5], ["x"]]}))["m"]

    assert _categories(column) == ["1", "1", "2.5", "x"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ({"columns": ["a"], "rows": [[{"k": 1}]]}, "Row 1, column 'a' holds a JSON dict"),
        ({"columns": ["a"], "rows": [[1, 2]]}, "Row 1 has 2 cells; 'columns' names 1"),
        ({"columns": ["a"], "rows": [], "extra": 1}, "extra"),
        ({"columns": ["a"], "rows": []}, "no rows"),
        ({"columns": ["a"], "rows": [[10**400]]}, "infinite"),
        ({"columns": ["a"], "rows": [["\ud800"]]}, "not valid Unicode"),
        ({"columns": ["a\x00"], "rows": [[1]]}, "NUL"),
    ],
)
def test_bad_json_is_refused_naming_the_problem(document: object, message: str) -> None:
    with pytest.raises((BadRequest, InvalidInput), match=message):
        _json(document)


@pytest.mark.parametrize(
    "column",
    [
        NumericColumn("n", np.array([1.5, np.nan, -0.0, 1e300, 5e-324])),
        NumericColumn("empty", np.array([], dtype=np.float64)),
        CategoricalColumn("c", np.array([1, -1, 0, 2], dtype=np.int32), ("a", "é 🌲", 'q"\x00')),
    ],
    ids=["numeric", "empty", "categorical"],
)
def test_column_bytes_round_trip_exactly(column: ColumnData) -> None:
    data = encode_column(column)

    back = decode_column(column.name, column.kind, data)

    assert type(back) is type(column)
    if isinstance(column, NumericColumn):
        assert isinstance(back, NumericColumn)
        assert back.values.dtype == np.float64
        np.testing.assert_array_equal(back.values, column.values)
        assert np.signbit(back.values).tolist() == np.signbit(column.values).tolist()
    else:
        assert isinstance(back, CategoricalColumn)
        assert back.codes.dtype == np.int32
        np.testing.assert_array_equal(back.codes, column.codes)
        assert back.categories == column.categories


def test_categorical_as_float_marks_missing_as_nan() -> None:
    column = CategoricalColumn("c", np.array([1, -1, 0], dtype=np.int32), ("a", "b"))

    np.testing.assert_array_equal(column.as_float(), [1.0, np.nan, 0.0])


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("numeric", b"not zlib"),
        ("numeric", zlib.compress(b"1234567")),
        ("categorical", zlib.compress(b'\x05\x00\x00\x00["a"]\x03\x00\x00\x00')),
        ("categorical", zlib.compress(b"\x05\x00\x00\x00[1,2]")),
        ("other", zlib.compress(b"")),
    ],
)
def test_damaged_bytes_are_a_clear_error(kind: str, data: bytes) -> None:
    with pytest.raises(ColumnDataError, match="column 'x'"):
        decode_column("x", kind, data)


def test_summaries() -> None:
    numeric = summarize(NumericColumn("n", np.array([1.0, np.nan, 3.0, 3.0])))
    categorical = summarize(
        CategoricalColumn("c", np.array([0, 1, 1, -1, 2, 1], dtype=np.int32), ("a", "b", "c"))
    )

    assert (numeric.n_missing, numeric.n_unique) == (1, 2)
    assert numeric.stats["min"] == 1.0 and numeric.stats["max"] == 3.0
    assert math.isclose(numeric.stats["mean"], 7 / 3)
    assert (categorical.n_missing, categorical.n_unique) == (1, 3)
    assert categorical.stats["top"] == [
        {"value": "b", "count": 3},
        {"value": "a", "count": 1},
        {"value": "c", "count": 1},
    ]
