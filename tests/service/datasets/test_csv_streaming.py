"""CSV streamed into parts gives what the in-memory parser gives: kinds, cells, errors.

``ingest.parse_csv`` (Python's ``csv`` module, cell by cell into ``ColumnBuilder``) is the
reference the service kept to before CSV was streamed; ``csv_ingest.ingest_csv`` reads with
pyarrow a block at a time. Each file here goes through both, on a real local store, with
blocks of a few bytes (pyarrow) or rows (Python's reader) so that columns turn categorical
after parts were written, and the cells, kinds and error messages are compared.
"""

from __future__ import annotations

import csv
import io
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.datasets import csv_blocks, csv_live
from service.datasets import parts as parts_module
from service.datasets.columns import CategoricalColumn, NumericColumn, summarize
from service.datasets.csv_ingest import CsvTable, ingest_csv
from service.datasets.csv_live import LiveCsv
from service.datasets.csv_spool import spool_csv
from service.datasets.ingest import parse_csv
from service.datasets.service import part_records
from service.datasets.summaries import count_histograms
from service.errors import PayloadTooLarge, ServiceError
from service.store import DataStore
from tests.service.fuzz.test_ingest_fuzz import tables, write_csv

Cells = tuple[str, list[Any]]


def _chunks(data: bytes) -> Iterator[bytes]:
    size = 5 if len(data) < 4096 else 65536  # chunk boundaries anywhere, but not too many
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _reference(data: bytes, categorical: tuple[str, ...]) -> dict[str, Cells] | str:
    try:
        table, counted = parse_csv(_chunks(data), max_columns=100)
        parsed = table.finish(categorical, size_bytes=counted.size, sha256=counted.sha256)
    except ServiceError as error:
        return f"{type(error).__name__}: {error.detail}"
    out: dict[str, Cells] = {}
    for column in parsed.columns:
        if isinstance(column, NumericColumn):
            out[column.name] = ("numeric", column.values.tolist())
        else:
            assert isinstance(column, CategoricalColumn)
            out[column.name] = (
                "categorical",
                [column.categories[code] if code >= 0 else None for code in column.codes],
            )
    return out


def _streamed(
    data: bytes,
    categorical: tuple[str, ...],
    root: Path,
    *,
    block_bytes: int = 1 << 20,
    block_rows: int = 16384,
    threaded: bool = False,
    live: bool = False,
) -> dict[str, Cells] | str:
    """``live``: the first pass reads the spool from its middle on, as it is written."""
    store = DataStore(str(root / "store"))
    reader = None
    if live:
        reader = LiveCsv(
            "d",
            store=store,
            categorical=lambda: categorical,
            max_columns=100,
            start_bytes=len(data) // 2,
            block_bytes=block_bytes,
            threaded=threaded,
        )
    spooled = spool_csv(_chunks(data), root / "uploads", live=reader)
    try:
        first = reader.take(set(categorical), plain=spooled.plain) if reader else None
        table = ingest_csv(
            spooled,
            categorical=categorical,
            store=store,
            dataset_id="d",
            max_columns=100,
            block_bytes=block_bytes,
            block_rows=block_rows,
            threaded=threaded,
            first=first,
        )
    except ServiceError as error:
        if reader is not None:
            reader.close()
        assert not list((root / "store").rglob("*.parquet")), "a refused upload left parts"
        return f"{type(error).__name__}: {error.detail}"
    finally:
        if reader is not None:
            reader.close()
        spooled.path.unlink()
    assert spooled.size == len(data)
    # Nothing but the table's parts: a first pass not taken left none of its own.
    assert {
        str(path.relative_to(root / "store")) for path in (root / "store").rglob("*.parquet")
    } == {part.stored.path for part in table.parts}
    out: dict[str, Cells] = {
        name: (kind.value, []) for name, kind in zip(table.names, table.kinds, strict=True)
    }
    for part in table.parts:
        read = pq.read_table(store.full_path(part.stored.path))
        for name in table.names:
            out[name][1].extend(read.column(name).to_pylist())
    for name, (kind, values) in out.items():
        if kind == "numeric":
            out[name] = (kind, [math.nan if v is None else v for v in values])
    count_histograms(store, part_records("d", table.parts), table.names, table.summaries)
    store.delete_prefix("datasets/")
    return out


def _same(reference: dict[str, Cells] | str, streamed: dict[str, Cells] | str) -> None:
    if isinstance(reference, str) or isinstance(streamed, str):
        assert streamed == reference
        return
    assert list(streamed) == list(reference)
    for name, (kind, values) in reference.items():
        assert streamed[name][0] == kind, name
        got = streamed[name][1]
        if kind == "numeric":
            expected = np.array(values, dtype=np.float64)
            actual = np.array(got, dtype=np.float64)
            np.testing.assert_array_equal(actual, expected, err_msg=name)
            assert np.signbit(actual).tolist() == np.signbit(expected).tolist(), name
        else:
            assert got == values, name


def _check(
    data: bytes, tmp_path: Path, categorical: tuple[str, ...] = (), *, small: bool = True
) -> None:
    reference = _reference(data, categorical)
    # pyarrow in blocks of 1 MiB, then of a few bytes (a row may straddle them: Python's
    # reader takes over); Python's reader in blocks of two rows (a lone CR sends files there);
    # and the parts written on a thread beside the parser, as for large files; and the first
    # pass reading the spool as it is written (csv_live), from its middle on.
    sizes: list[dict[str, Any]] = [{}]
    if small:
        sizes += [
            {"block_bytes": 32, "block_rows": 2},
            {"block_bytes": 4096, "block_rows": 1},
            {"block_bytes": 32, "block_rows": 2, "threaded": True},
            {"block_bytes": 32, "live": True},
        ]
    sizes += [{"live": True, "threaded": True}]
    for size in sizes:
        _same(reference, _streamed(data, categorical, tmp_path, **size))


CASES = {
    "kinds and missing": b"num,cat,blank\n1,red,\n2.5,blue,NA\nNaN,red, \nnull,N/A,nan\n-3e2,NULL,\n",
    "BOM, quotes, CRLF": '\ufeffname,note\r\n"Zoë","a, b"\r\n"Ærø","two\nlines"\r\n'.encode(),
    "numbers keep their text": b"zip\n02139\n1.50\n1e3\n-0\n7\nK1A0B1\n",
    "odd texts": b"n\n1.50\n2\nNA\n3.0\n\xd9\xa1\xd9\xa2\n4\n005\nword\n",
    "infinity named as written": b"x\n1.50\n2\n3.0\n+Infinity\n5.0\n",
    "infinity in a text column": b"w\nalpha\ninf\n",
    "infinity before a text": b"w\n1\ninf\n2\nword\n",
    "underscores": b"v\n1_000\n",
    "an overflowing number among padded ones": b"a\n 1 \n1e400\n",
    "NaN spellings before and after the first text": b"v\n1\n-nan\nNAN\nword\n+nan\nnan\n",
    "whitespace Python strips": b"v,w\n\x1c 1 \xe3\x80\x80,\x1fa\n2\t, b \n",
    "late turn": b"a,b\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(40)) + b"x,1\n",
    "two late turns": b"a,b,c\n"
    + b"".join(b"%d,%d,%d\n" % (i, i, i) for i in range(30))
    + b"1.0,y,2\n3,4,z\n",
    "quoted numbers": b'a,b\n"1","2.50"\n" 3 ",4\n',
    "ragged": b"a,b\n1,2\n3,4,5\n",
    "duplicate name": b"a,b,a\n1,2,3\n",
    "unnamed": b"a,,c\n1,2,3\n",
    "no rows": b"a,b\n",
    "empty": b"",
    "blank lines": b"\n\na,b\n\n1,2\n\n",
    "undecodable": b"a\n1\n\xff\xfe\n",
    "surrogate bytes": b"a,b\n1,\xed\xa0\x80\n",
    "unterminated quote": b'a\n"unterminated\n',
    "text after a closing quote": b'a,b\n"x"y,1\n',
    "text after a doubled quote": b'a,b\n"x"""y,1\n',
    "quote in an unquoted cell": b'a,b\nx"y,1\n',
    "doubled quotes": b'a,b\n"say ""hi""",1\n"",2\n',
    "lone CR": b"a,b\n1,2\r3,4\n",
    "lone CR in quotes": b'a,b\n"1\r2",3\n',
    "whitespace-only line": b"a\n \n2\n",
    "NUL": b"a,b\n1,x\x00y\n",
    "quote at the start": b'"a",b\n1,2\n',
    "BOM and quote": b'\xef\xbb\xbf"a",b\n1,2\n',
}


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
def test_streamed_csv_is_what_the_reference_parser_gives(data: bytes, tmp_path: Path) -> None:
    _check(data, tmp_path)


# Pyarrow blocks of 4 KiB: a table of a few thousand rows is many blocks.
_SMALL_BLOCKS: dict[str, Any] = {
    "categorical": (),
    "dataset_id": "d",
    "max_columns": 10,
    "block_bytes": 4096,
}


def _written(store: DataStore, table: CsvTable) -> tuple[Any, ...]:
    """What an ingest wrote, to compare: kinds, parts (offsets, rows, SHA-256), their
    cells, and the finished summaries."""
    finished = count_histograms(store, part_records("d", table.parts), table.names, table.summaries)
    read = [pq.read_table(store.full_path(part.stored.path)) for part in table.parts]
    return (
        [kind.value for kind in table.kinds],
        [(part.row_offset, part.n_rows, part.stored.sha256) for part in table.parts],
        [t.to_pydict() for t in read],
        finished,
    )


def test_the_writing_thread_writes_what_the_parser_alone_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Row groups of 64 rows, 3 a part: 3,000 rows make 16 parts, and the column "late" turns
    # categorical at row 2,500, after parts were written (the file is read again).
    monkeypatch.setattr(parts_module, "layout", lambda row_bytes: (64, 3))
    rng = np.random.default_rng(5)
    x = rng.normal(size=3000)
    lines = [
        f"{x[i]:.6f},{i % 7},id-{i * 7919 % 3001},{'word' if i == 2500 else i * 0.5}"
        for i in range(3000)
    ]
    data = ("x,code,id,late\n" + "\n".join(lines) + "\n").encode()
    results = []
    for threaded in (False, True):
        store = DataStore(str(tmp_path / f"store-{threaded}"))
        spooled = spool_csv([data], tmp_path / "uploads")
        table = ingest_csv(spooled, store=store, threaded=threaded, **_SMALL_BLOCKS)
        spooled.path.unlink()
        results.append(_written(store, table))
    assert results[0] == results[1]
    kinds, parts, _, finished = results[1]
    assert kinds == ["numeric", "numeric", "categorical", "categorical"]
    assert len(parts) == 16
    expected = summarize(NumericColumn("x", np.array([float(f"{v:.6f}") for v in x])))
    assert finished[0].distribution["histogram"] == expected.distribution["histogram"]
    assert finished[0].stats["mean"] == pytest.approx(expected.stats["mean"], rel=1e-12)


def _numeric_csv(rows: int) -> bytes:
    rng = np.random.default_rng(3)
    lines = [f"{v:.6f},{i % 5},k{i % 3}" for i, v in enumerate(rng.normal(size=rows))]
    return ("x,code,k\n" + "\n".join(lines) + "\n").encode()


def test_a_first_pass_read_while_spooling_is_the_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass run on the growing spool is taken as it is: the same parts, kinds and
    summaries as a pass over the finished spool."""
    monkeypatch.setattr(parts_module, "layout", lambda row_bytes: (256, 2))
    data = _numeric_csv(3000)
    chunks = [data[start : start + 1000] for start in range(0, len(data), 1000)]
    results = []
    for live in (False, True):
        store = DataStore(str(tmp_path / f"store-{live}"))
        reader = LiveCsv(
            "d", store=store, categorical=tuple, max_columns=10, start_bytes=5000, block_bytes=4096
        )
        spooled = spool_csv(chunks, tmp_path / "uploads", live=reader if live else None)
        first = reader.take(set(), plain=spooled.plain) if live else None
        if live:
            assert first is not None and first.table is not None and first.error is None
        table = ingest_csv(spooled, store=store, threaded=True, first=first, **_SMALL_BLOCKS)
        reader.close()
        spooled.path.unlink()
        if first is not None:
            assert table is first.table
        results.append(_written(store, table))
    assert results[0] == results[1]
    assert results[1][0] == ["numeric", "numeric", "categorical"]


def test_a_spool_that_fails_stops_the_first_pass_and_leaves_no_part(tmp_path: Path) -> None:
    data = _numeric_csv(3000)
    store = DataStore(str(tmp_path / "store"))
    reader = LiveCsv("d", store=store, categorical=tuple, max_columns=10, start_bytes=5000)

    def chunks() -> Iterator[bytes]:
        yield from (data[start : start + 1000] for start in range(0, len(data) // 2, 1000))
        raise PayloadTooLarge("too large")

    with pytest.raises(PayloadTooLarge):
        spool_csv(chunks(), tmp_path / "uploads", live=reader)

    assert reader.started
    assert not any(thread.name == "csv-live" for thread in threading.enumerate())
    assert not list((tmp_path / "store").rglob("*.parquet"))
    assert not list((tmp_path / "uploads").iterdir())


class _HeldRead:
    """A file whose reads wait until let go, to hold one in progress."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb", buffering=0)
        self.entered = threading.Event()
        self.release = threading.Event()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def readinto(self, view: memoryview) -> int:
        self.entered.set()
        self.release.wait(timeout=120)
        return self._file.readinto(view)

    def close(self) -> None:
        self._file.close()


def test_the_growing_spool_is_not_closed_under_a_read(tmp_path: Path) -> None:
    """pyarrow reads ahead on a thread of its own, which may still be reading when the pass
    closes the file: the descriptor must not be freed (and taken by the next file opened)
    inside that read; a read after closing is the file's end."""
    path = tmp_path / "spool"
    path.write_bytes(b"a,b\n1,2\n")
    growth = csv_live._Growth()
    growth.wrote(8)
    growth.end(failed=False)
    growing = csv_live._GrowingFile(path, growth)
    held = _HeldRead(path)
    growing._file.close()
    growing._file = held  # type: ignore[assignment]
    got: list[int] = []
    reader = threading.Thread(target=lambda: got.append(growing.readinto(bytearray(4))))
    reader.start()
    assert held.entered.wait(timeout=120)
    closer = threading.Thread(target=growing.close)
    closer.start()
    closer.join(timeout=0.5)
    assert closer.is_alive() and not held.closed, "closed while a read was in progress"
    held.release.set()
    reader.join(timeout=120)
    closer.join(timeout=120)
    assert got == [4] and held.closed
    assert growing.readinto(bytearray(4)) == 0


@pytest.mark.parametrize(
    ("data", "categorical"),
    [
        (b"code,x\n007,1\n7,2\n,3\n-nan,4\n", ("code",)),
        (b"code,x\n007,1\nnan,2\nabc,3\n-nan,4\n", ("code",)),
        (b"code,x\n1,1\ninf,2\n", ("code",)),
        (b"a\n1\n", ("nope",)),
        (b"a,b\n1,2\n3,4,5\n", ("nope",)),
    ],
)
def test_forced_categorical_is_as_before(
    data: bytes, categorical: tuple[str, ...], tmp_path: Path
) -> None:
    _check(data, tmp_path, categorical)


def test_a_cell_over_the_field_limit_is_refused_as_before(tmp_path: Path) -> None:
    _check(b"a\n" + b"x" * (1024 * 1024 + 1) + b"\n", tmp_path, small=False)
    _check(b"a\n" + b"x" * (1024 * 1024) + b"\n", tmp_path, small=False)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    table=tables(),
    line_end=st.sampled_from(["\n", "\r\n"]),
    quote_all=st.booleans(),
)
def test_generated_csv_is_what_the_reference_parser_gives(
    table: tuple[list[str], list[list[str]]], line_end: str, quote_all: bool, tmp_path: Path
) -> None:
    header, rows = table
    if not quote_all:
        text = write_csv(header, rows, line_end)
    else:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator=line_end, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        writer.writerows(rows)
        text = out.getvalue()
    _check(text.encode("utf-8", errors="replace"), tmp_path)


@pytest.mark.anyio
async def test_an_upload_whose_later_rows_turn_a_column_categorical_is_as_before(
    any_client: httpx.AsyncClient,
) -> None:
    # Far past the first block pyarrow reads (256 KiB), so the column's first rows are
    # written as numbers before its text comes, and the file is read again. 5,000 distinct
    # numbers and two texts: few enough categories for an exact distinct count.
    n = 60_000
    lines = [f"{i % 5000 * 0.25:.2f},{i % 3}" for i in range(n)]
    lines[7] = "-nan,1"  # a NaN spelling before the column's first text: missing
    lines.append("n/a-code,2")
    lines.append("-nan,0")  # after it: a category
    data = ("code,k\n" + "\n".join(lines) + "\n").encode()

    upload = await any_client.post("/v1/datasets", files={"file": ("late.csv", data)})

    assert upload.status_code == 201, upload.text
    body = upload.json()
    assert body["n_rows"] == n + 2
    code, k = body["columns"]
    assert (code["kind"], code["n_missing"], code["n_unique"]) == ("categorical", 1, 5002)
    assert (k["kind"], k["n_unique"]) == ("numeric", 3)
    download = await any_client.get(f"/v1/datasets/{body['id']}/data", params={"format": "csv"})
    cells = [row.split(",")[0] for row in download.text.splitlines()[1:]]
    expected = [line.split(",")[0] for line in lines]
    expected[7] = ""
    # "0.00", "0.25", "0.50", ...: the texts as written, not the numbers they were read as.
    assert [cell.strip('"') for cell in cells] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["form, field after the file", "raw body"])
async def test_an_upload_read_while_it_arrives_is_as_before(
    any_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Every upload read as it arrives (csv_live from its first byte): a form's
    forced-categorical field sent after the file, which the first pass could not know, is
    obeyed (the spool is read again); a raw body's query is known from the start."""
    monkeypatch.setattr(csv_live, "LIVE_BYTES", 1)
    data = _numeric_csv(3000)
    if how == "raw body":
        upload = await any_client.post(
            "/v1/datasets",
            params={"name": "t", "categorical": "code"},
            content=data,
            headers={"content-type": "text/csv"},
        )
    else:
        boundary = "b0undary"
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="t.csv"\r\n'
            "Content-Type: text/csv\r\n\r\n".encode()
            + data
            + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="categorical"\r\n\r\n'
            f"code\r\n--{boundary}--\r\n".encode()
        )
        upload = await any_client.post(
            "/v1/datasets",
            content=body,
            headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        )

    assert upload.status_code == 201, upload.text
    body_out = upload.json()
    assert body_out["n_rows"] == 3000
    assert [c["kind"] for c in body_out["columns"]] == ["numeric", "categorical", "categorical"]
    assert body_out["columns"][1]["n_unique"] == 5
    download = await any_client.get(f"/v1/datasets/{body_out['id']}/data", params={"format": "csv"})
    assert download.text.splitlines()[1].split(",")[1].strip('"') == "0"


def test_columns_of_numbers_are_read_as_numbers_from_the_first_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow reads as float64 the columns whose first block holds numbers and missing
    texts only (at least one number), unless forced categorical; a later text or infinity
    in one refuses the pass, and the file is read again as text, as the reference reads it."""
    head = b"x,c,m,e,f,i\n1.5,a,,,1,1\n-2e3,b,NA,,2,inf\nNaN,c,3,NA,3,2\n"
    passes: list[set[str]] = []
    original = csv_blocks.fast_blocks_of

    def spy(source: Any, names: Any, block_bytes: int, numeric: Any = ()) -> Any:
        passes.append(set(numeric))
        return original(source, names, block_bytes, numeric)

    monkeypatch.setattr(csv_blocks, "fast_blocks_of", spy)
    tail = b"".join(b"%d,d,%d,,4,5\n" % (i, i) for i in range(2000))
    # The probe of the first block (all as text), then each pass.
    for data, expected in [
        (head + tail, [set(), {"x", "m"}]),
        # refused, then as text: m turns categorical late, so a pass more
        (head + tail + b"7,d,word,,4,5\n", [set(), {"x", "m"}, set(), set()]),
        (head + tail + b"-Infinity,d,1,,4,5\n", [set(), {"x", "m"}, set()]),
    ]:
        passes.clear()
        _same(_reference(data, ("f",)), _streamed(data, ("f",), tmp_path, block_bytes=4096))
        assert passes == expected
