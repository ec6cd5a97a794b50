"""Parquet and Arrow uploads, raw bodies, and what is refused: kinds from Arrow types, the
same columns as the CSV of the same table, 422 / 400 / 415 / 413 / 503 naming the fault."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.config import Settings
from service.store import DataStore, store_from_settings
from tests.service.datasets.conftest import app_client

pytestmark = pytest.mark.anyio

TABLE = pa.table(
    {
        "i": pa.array([1, 2, None, 4, 5], type=pa.int64()),
        "f": pa.array([0.5, float("nan"), None, -1.0, 2.0]),
        "b": pa.array([True, False, None, True, True]),
        "s": pa.array(["x", "y", None, "x", "é"]),
        "d": pa.array(["a", "b", "a", None, "a"]).dictionary_encode(),
    }
)
CSV = b"i,f,b,s,d\n1,0.5,1,x,a\n2,,0,y,b\n,,,,a\n4,-1,1,x,\n5,2,1,\xc3\xa9,a\n"


def _parquet(table: pa.Table = TABLE) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2)
    return sink.getvalue()


def _arrow(table: pa.Table = TABLE, *, stream: bool) -> bytes:
    sink = io.BytesIO()
    opener = pa.ipc.new_stream if stream else pa.ipc.new_file
    with opener(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    return sink.getvalue()


def _columns(body: dict) -> list[tuple[str, str, int, int]]:
    return [(c["name"], c["kind"], c["n_missing"], c["n_unique"]) for c in body["columns"]]


EXPECTED = [
    ("i", "numeric", 1, 4),
    ("f", "numeric", 2, 3),
    ("b", "numeric", 1, 2),
    ("s", "categorical", 1, 3),
    ("d", "categorical", 1, 2),
]


@pytest.mark.parametrize(
    ("filename", "content_type", "maker"),
    [
        ("t.parquet", "application/octet-stream", lambda: _parquet()),
        ("upload", "application/vnd.apache.parquet", lambda: _parquet()),
        ("blob", "application/octet-stream", lambda: _parquet()),  # magic bytes
        ("t.arrow", "application/octet-stream", lambda: _arrow(stream=False)),
        ("blob", "application/octet-stream", lambda: _arrow(stream=False)),
        ("blob", "application/vnd.apache.arrow.stream", lambda: _arrow(stream=True)),
        ("blob", "application/octet-stream", lambda: _arrow(stream=True)),
    ],
    ids=[
        "parquet by name",
        "parquet by type",
        "parquet by magic",
        "arrow file by name",
        "arrow file by magic",
        "arrow stream by type",
        "arrow stream by magic",
    ],
)
async def test_a_form_takes_parquet_and_arrow_with_kinds_from_their_types(
    any_client: httpx.AsyncClient, filename: str, content_type: str, maker: object
) -> None:
    body = maker()  # type: ignore[operator]
    response = await any_client.post(
        "/v1/datasets", files={"file": (filename, body, content_type)}, data={"name": "t"}
    )

    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["n_rows"] == 5 and dataset["name"] == "t"
    assert _columns(dataset) == EXPECTED
    download = await any_client.get(f"/v1/datasets/{dataset['id']}/data")
    back = pq.read_table(io.BytesIO(download.content))
    assert back.column("i").to_pylist() == [1.0, 2.0, None, 4.0, 5.0]
    assert back.column("f").to_pylist() == [0.5, None, None, -1.0, 2.0]
    assert back.column("b").to_pylist() == [1.0, 0.0, None, 1.0, 1.0]
    assert back.column("s").to_pylist() == ["x", "y", None, "x", "é"]
    assert back.column("d").to_pylist() == ["a", "b", "a", None, "a"]


async def test_parquet_and_the_same_csv_give_the_same_summaries(
    any_client: httpx.AsyncClient,
) -> None:
    as_parquet = await any_client.post(
        "/v1/datasets",
        files={"file": ("t.parquet", _parquet())},
        data={"categorical": "b"},
    )
    as_csv = await any_client.post(
        "/v1/datasets", files={"file": ("t.csv", CSV)}, data={"categorical": "b"}
    )

    assert as_parquet.status_code == as_csv.status_code == 201, as_parquet.text
    parquet_columns = as_parquet.json()["columns"]
    csv_columns = as_csv.json()["columns"]
    # Booleans forced categorical read as 1/0 the way a CSV's numbers do.
    assert parquet_columns == csv_columns


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/vnd.apache.parquet", _parquet()),
        ("application/octet-stream", _parquet()),
        ("application/x-www-form-urlencoded", _parquet()),  # curl --data-binary's default
        ("application/vnd.apache.arrow.file", _arrow(stream=False)),
        ("application/vnd.apache.arrow.stream", _arrow(stream=True)),
        ("text/csv", CSV),
    ],
)
async def test_a_raw_body_with_a_name(
    any_client: httpx.AsyncClient, content_type: str, body: bytes
) -> None:
    response = await any_client.post(
        "/v1/datasets",
        params={"name": "raw"},
        content=body,
        headers={"content-type": content_type},
    )

    assert response.status_code == 201, response.text
    assert response.json()["name"] == "raw"
    assert _columns(response.json())[:3] == EXPECTED[:3]


async def test_unsupported_column_types_are_422_naming_column_and_type(
    any_client: httpx.AsyncClient,
) -> None:
    table = pa.table(
        {
            "ok": [1.0, 2.0],
            "nested": pa.array([[1], [2, 3]]),
            "blob": pa.array([b"a", b"b"], type=pa.binary()),
        }
    )

    response = await any_client.post("/v1/datasets", files={"file": ("t.parquet", _parquet(table))})

    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "column 'nested' is of type list<element: int64>" in detail
    assert "column 'blob' is of type binary" in detail


async def test_infinite_numbers_are_refused_naming_the_row(any_client: httpx.AsyncClient) -> None:
    table = pa.table({"x": [1.0, 2.0, float("inf")]})

    response = await any_client.post("/v1/datasets", files={"file": ("t.parquet", _parquet(table))})

    assert response.status_code == 422
    assert "Column 'x' holds the infinite value 'inf' in row 3" in response.json()["detail"]


@pytest.mark.parametrize("cut", [10, -10, -100])
async def test_truncated_or_corrupt_parquet_is_400_and_leaves_nothing(
    any_client: httpx.AsyncClient, store: DataStore, cut: int
) -> None:
    data = _parquet()
    damaged = data[:cut] if cut > 0 or cut == -10 else data[:cut] + data[cut + 50 :]
    if cut == -100:
        damaged = data[:40] + b"\x00" * 60 + data[100:]

    response = await any_client.post(
        "/v1/datasets", files={"file": ("t.parquet", damaged)}, data={"name": "x"}
    )

    assert response.status_code == 400, response.text
    assert "not a readable Parquet file" in response.json()["detail"]
    assert (await any_client.get("/v1/datasets")).json()["total"] == 0
    assert list(store.walk("datasets")) == []


async def test_unknown_content_type_is_415(any_client: httpx.AsyncClient) -> None:
    response = await any_client.post(
        "/v1/datasets", content=b"GIF89a", headers={"content-type": "image/gif"}
    )

    assert response.status_code == 415
    assert "image/gif" in response.json()["detail"]


async def test_a_raw_body_over_the_limit_is_413(settings: Settings) -> None:
    settings = settings.model_copy(update={"max_upload_bytes": 100})

    async def body() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        yield _parquet()

    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets",
            content=body(),
            headers={"content-type": "application/vnd.apache.parquet"},
        )

    assert response.status_code == 413


async def test_an_unreachable_store_is_503_with_nothing_committed(settings: Settings) -> None:
    # An S3 endpoint nobody listens on: the first part cannot be written.
    settings = settings.model_copy(
        update={
            "store_url": "s3://coppice/store",
            "store_options": {
                "endpoint_url": "http://127.0.0.1:9",
                "key": "k",
                "secret": "s",
                "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
            },
        }
    )
    async with app_client(settings) as client:
        parquet = await client.post("/v1/datasets", files={"file": ("t.parquet", _parquet())})
        csv = await client.post("/v1/datasets", files={"file": ("t.csv", CSV)})
        listed = await client.get("/v1/datasets")

    assert parquet.status_code == csv.status_code == 503, parquet.text
    assert "data store" in parquet.json()["detail"]
    assert listed.json()["total"] == 0


async def test_uploads_go_to_an_s3_store(settings: Settings, s3_server: object) -> None:
    server = s3_server
    settings = settings.model_copy(
        update={"store_url": server.url("ds"), "store_options": server.options}  # type: ignore[attr-defined]
    )
    async with app_client(settings) as client:
        created = await client.post("/v1/datasets", files={"file": ("t.parquet", _parquet())})
        assert created.status_code == 201, created.text
        dataset = created.json()
        download = await client.get(f"/v1/datasets/{dataset['id']}/data", params={"format": "csv"})
        deleted = await client.delete(f"/v1/datasets/{dataset['id']}")

    assert download.status_code == 200
    assert download.text.splitlines()[0] == '"i","f","b","s","d"'
    assert deleted.status_code == 204
    assert list(store_from_settings(settings).walk("datasets")) == []
    assert dataset["storage"]["n_parts"] == 1
