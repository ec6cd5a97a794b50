"""Datasets as Parquet parts: the layout, the storage field, download, delete."""

from __future__ import annotations

import io

import httpx
import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session

from service.datasets import download, repository, service
from service.datasets import parts as parts_module
from service.datasets.columns import CategoricalColumn, NumericColumn
from service.store import DataStore

pytestmark = pytest.mark.anyio

CSV = (
    "x,colour,y\n"
    + "".join(
        f"{i * 0.5},{['red', 'green', 'blue', ''][i % 4]},{'' if i % 7 == 3 else i % 3}\n"
        for i in range(37)
    )
).encode()


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row groups of 4 rows, 2 a part: 37 rows make 5 parts."""
    monkeypatch.setattr(parts_module, "layout", lambda row_bytes: (4, 2))


async def _upload(client: httpx.AsyncClient, body: bytes = CSV) -> dict:
    response = await client.post(
        "/v1/datasets", files={"file": ("t.csv", body, "text/csv")}, data={"name": "t"}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_an_upload_is_parts_of_fixed_row_groups_with_offsets(
    any_client: httpx.AsyncClient, session: Session, store: DataStore, small_parts: None
) -> None:
    dataset = await _upload(any_client)

    parts = repository.parts(session, dataset["id"])
    assert [(p.row_offset, p.n_rows) for p in parts] == [
        (0, 8),
        (8, 8),
        (16, 8),
        (24, 8),
        (32, 5),
    ]
    for part in parts:
        metadata = pq.ParquetFile(store.full_path(part.path)).metadata
        groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        assert groups == ([4, 4] if part.n_rows == 8 else [4, 1])
    assert dataset["storage"] == {
        "format": "parquet",
        "n_parts": 5,
        "bytes": sum(p.size for p in parts),
        "registered": False,
        "url": None,
    }
    loaded = service.load_columns(session, dataset["id"], ["colour", "x", "y"], store)
    colour, x, y = loaded["colour"], loaded["x"], loaded["y"]
    assert isinstance(colour, CategoricalColumn) and isinstance(x, NumericColumn)
    assert isinstance(y, NumericColumn)
    np.testing.assert_array_equal(x.values, np.arange(37) * 0.5)
    assert colour.categories == ("blue", "green", "red")
    assert [colour.categories[c] if c >= 0 else "" for c in colour.codes] == [
        ["red", "green", "blue", ""][i % 4] for i in range(37)
    ]
    assert np.isnan(y.values[3]) and y.values[4] == 1


@pytest.mark.parametrize("multi", [False, True], ids=["one part", "several parts"])
async def test_download_gives_the_table_back_as_parquet_and_csv(
    any_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, multi: bool
) -> None:
    if multi:
        monkeypatch.setattr(parts_module, "layout", lambda row_bytes: (4, 2))
    dataset = await _upload(any_client)
    url = f"/v1/datasets/{dataset['id']}/data"

    as_parquet = await any_client.get(url, params={"format": "parquet"})
    as_csv = await any_client.get(url, params={"format": "csv"})
    default = await any_client.get(url)

    assert as_parquet.status_code == as_csv.status_code == 200
    assert as_parquet.headers["content-type"] == "application/vnd.apache.parquet"
    assert "t.parquet" in as_parquet.headers["content-disposition"]
    assert default.content == as_parquet.content
    table = pq.read_table(io.BytesIO(as_parquet.content))
    expected = pa_csv.read_csv(io.BytesIO(CSV))
    assert table.column_names == ["x", "colour", "y"]
    assert table.column("x").to_pylist() == expected.column("x").to_pylist()
    assert table.column("colour").to_pylist() == [
        ["red", "green", "blue", None][i % 4] for i in range(37)
    ]
    assert table.column("y").to_pylist() == [
        None if i % 7 == 3 else float(i % 3) for i in range(37)
    ]
    back = pa_csv.read_csv(
        io.BytesIO(as_csv.content),
        convert_options=pa_csv.ConvertOptions(strings_can_be_null=True),
    )
    assert back.column("colour").to_pylist() == table.column("colour").to_pylist()
    assert back.column("y").to_pylist() == table.column("y").to_pylist()
    assert back.column("x").to_pylist() == table.column("x").to_pylist()


async def test_csv_download_is_one_csv_writer_s_bytes_whatever_the_slices(
    any_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 3 rows, formatted on the download's threads, across parts of 8 rows: the
    bytes, in order, of one ``CSVWriter`` fed the whole table."""
    monkeypatch.setattr(parts_module, "layout", lambda row_bytes: (4, 2))
    monkeypatch.setattr(download, "CSV_ROWS", 3)
    dataset = await _upload(any_client)
    url = f"/v1/datasets/{dataset['id']}/data"

    as_csv = await any_client.get(url, params={"format": "csv"})
    table = pq.read_table(io.BytesIO((await any_client.get(url)).content))

    expected = io.BytesIO()
    with pa_csv.CSVWriter(expected, table.schema) as writer:
        writer.write_table(table)
    assert as_csv.status_code == 200
    assert as_csv.content == expected.getvalue()


async def test_download_of_an_unknown_dataset_or_format(any_client: httpx.AsyncClient) -> None:
    dataset = await _upload(any_client)

    missing = await any_client.get("/v1/datasets/nope/data")
    wrong = await any_client.get(f"/v1/datasets/{dataset['id']}/data", params={"format": "xls"})

    assert missing.status_code == 404
    assert wrong.status_code == 422


async def test_delete_removes_the_parts_from_the_store(
    any_client: httpx.AsyncClient, store: DataStore, small_parts: None
) -> None:
    dataset = await _upload(any_client)
    assert len(list(store.walk(f"datasets/{dataset['id']}"))) == 5

    response = await any_client.delete(f"/v1/datasets/{dataset['id']}")

    assert response.status_code == 204
    assert list(store.walk(f"datasets/{dataset['id']}")) == []
