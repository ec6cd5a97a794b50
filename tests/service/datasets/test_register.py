"""Tables registered in place: footers only, the allow-list, what is not Parquet, a changed
source; on a local directory and on a real S3 server."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session

from service.config import Settings
from service.datasets import repository, service
from service.datasets.columns import CategoricalColumn, NumericColumn
from service.datasets.part_reader import DatasetChanged
from service.db.session import create_db_engine
from service.store import store_from_settings
from tests.service.datasets.conftest import app_client

pytestmark = pytest.mark.anyio


def _table(start: int, n: int) -> pa.Table:
    return pa.table(
        {
            "x": pa.array(range(start, start + n), type=pa.int32()),
            "label": pa.array([["a", "b", None][i % 3] for i in range(start, start + n)]),
        }
    )


def _write_dir(directory: Path, files: int = 3, rows: int = 10) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        pq.write_table(_table(index * rows, rows), directory / f"part-{index}.parquet")
    (directory / "_SUCCESS").write_bytes(b"")


def _with_roots(settings: Settings, *roots: str) -> Settings:
    return settings.model_copy(update={"import_roots": list(roots)})


async def test_a_directory_registers_from_its_footers_and_reads_where_it_lies(
    settings: Settings, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    _write_dir(lake / "events")
    settings = _with_roots(settings, str(lake))
    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets", json={"name": "events", "source": {"url": str(lake / "events")}}
        )
        assert response.status_code == 201, response.text
        dataset = response.json()
        download = await client.get(f"/v1/datasets/{dataset['id']}/data")

    assert dataset["n_rows"] == 30
    assert dataset["storage"] == {
        "format": "parquet",
        "n_parts": 3,
        "bytes": sum(os.path.getsize(lake / "events" / f"part-{i}.parquet") for i in range(3)),
        "registered": True,
        "url": str(lake / "events"),
    }
    columns = {c["name"]: c for c in dataset["columns"]}
    assert columns["x"]["kind"] == "numeric" and columns["x"]["n_missing"] == 0
    assert columns["label"]["kind"] == "categorical" and columns["label"]["n_missing"] == 10
    assert columns["x"]["distribution"] is None  # not computed: footers only
    back = pq.read_table(io.BytesIO(download.content))
    assert back.column("x").to_pylist() == [float(i) for i in range(30)]
    assert back.column("label").to_pylist() == [["a", "b", None][i % 3] for i in range(30)]
    # Nothing was copied into the store.
    assert list(store_from_settings(settings).walk("datasets")) == []

    engine = create_db_engine(settings.resolved_database_url)
    with Session(engine) as session:
        parts = repository.parts(session, dataset["id"])
        assert [(p.row_offset, p.n_rows) for p in parts] == [(0, 10), (10, 10), (20, 10)]
        loaded = service.load_columns(
            session, dataset["id"], ["x", "label"], store_from_settings(settings)
        )
        x, label = loaded["x"], loaded["label"]
        assert isinstance(x, NumericColumn) and isinstance(label, CategoricalColumn)
        assert x.values.tolist() == list(map(float, range(30)))
        assert label.categories == ("a", "b")

        # The source changes: a read fails with dataset_changed, never trains on it.
        pq.write_table(_table(100, 12), lake / "events" / "part-1.parquet")
        with pytest.raises(DatasetChanged, match=r"part-1\.parquet"):
            service.load_columns(session, dataset["id"], ["x"], store_from_settings(settings))
    engine.dispose()
    assert DatasetChanged.code == "dataset_changed"
    async with app_client(settings) as client:
        changed = await client.get(f"/v1/datasets/{dataset['id']}/data", params={"format": "csv"})
    assert changed.status_code == 409


@pytest.mark.parametrize(
    ("roots", "url", "detail"),
    [
        ([], "{lake}/events", "turned off"),
        (["{lake}/other"], "{lake}/events", "not under any of the roots"),
        (["{lake}/events"], "{lake}/events/../../secret", "not under any of the roots"),
        (["{lake}/ev"], "{lake}/events", "not under any of the roots"),
    ],
    ids=["no roots", "elsewhere", "dot-dot", "prefix is not a directory"],
)
async def test_outside_the_roots_is_403(
    settings: Settings, tmp_path: Path, roots: list[str], url: str, detail: str
) -> None:
    lake = tmp_path / "lake"
    _write_dir(lake / "events")
    settings = _with_roots(settings, *[root.format(lake=lake) for root in roots])
    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets", json={"source": {"url": url.format(lake=lake)}}
        )

    assert response.status_code == 403, response.text
    assert detail in response.json()["detail"]


async def test_a_source_that_is_not_parquet_is_422(settings: Settings, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "notes.parquet").write_text("a,b\n1,2\n")
    (lake / "empty").mkdir()
    settings = _with_roots(settings, str(lake))
    async with app_client(settings) as client:
        not_parquet = await client.post(
            "/v1/datasets", json={"source": {"url": str(lake / "notes.parquet")}}
        )
        empty = await client.post("/v1/datasets", json={"source": {"url": str(lake / "empty")}})
        missing = await client.post("/v1/datasets", json={"source": {"url": str(lake / "nope")}})
        extra = await client.post("/v1/datasets", json={"source": {"url": str(lake), "colour": 1}})

    assert not_parquet.status_code == 422
    assert "is not a Parquet file" in not_parquet.json()["detail"]
    assert empty.status_code == missing.status_code == extra.status_code == 422


async def test_a_predict_key_cannot_register_and_does_not_see_the_url(
    settings: Settings, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    _write_dir(lake / "events")
    settings = _with_roots(settings, str(lake)).model_copy(
        update={"api_keys": "admin-key-0123456789:admin,predict-key-0123456789:predict"}
    )
    settings = Settings.model_validate(settings.model_dump() | {"api_keys": settings.api_keys})
    admin = {"authorization": "Bearer admin-key-0123456789"}
    reader = {"authorization": "Bearer predict-key-0123456789"}
    body = {"source": {"url": str(lake / "events")}}
    async with app_client(settings) as client:
        refused = await client.post("/v1/datasets", json=body, headers=reader)
        created = await client.post("/v1/datasets", json=body, headers=admin)
        as_reader = await client.get(f"/v1/datasets/{created.json()['id']}", headers=reader)

    assert refused.status_code == 403
    assert created.status_code == 201, created.text
    assert created.json()["storage"]["url"] == str(lake / "events")
    assert as_reader.json()["storage"]["url"] is None
    assert as_reader.json()["storage"]["registered"] is True


async def test_a_prefix_on_s3_registers_and_downloads(settings: Settings, s3_server: Any) -> None:
    prefix = f"lake-{uuid.uuid4().hex[:8]}"
    filesystem = fsspec.filesystem("s3", **s3_server.options)
    for index in range(2):
        with filesystem.open(f"{s3_server.bucket}/{prefix}/t/part-{index}.parquet", "wb") as f:
            pq.write_table(_table(index * 5, 5), f)
    settings = settings.model_copy(
        update={
            "store_url": s3_server.url(f"{prefix}-store"),
            "store_options": s3_server.options,
            "import_roots": [s3_server.url(prefix)],
        }
    )
    async with app_client(settings) as client:
        response = await client.post(
            "/v1/datasets", json={"source": {"url": s3_server.url(f"{prefix}/t")}}
        )
        assert response.status_code == 201, response.text
        dataset = response.json()
        download = await client.get(f"/v1/datasets/{dataset['id']}/data")
        outside = await client.post(
            "/v1/datasets", json={"source": {"url": s3_server.url("elsewhere")}}
        )

    assert dataset["n_rows"] == 10 and dataset["storage"]["n_parts"] == 2
    assert pq.read_table(io.BytesIO(download.content)).column("x").to_pylist() == [
        float(i) for i in range(10)
    ]
    assert outside.status_code == 403
    # A rewritten object has a new ETag: the dataset has changed.
    with filesystem.open(f"{s3_server.bucket}/{prefix}/t/part-0.parquet", "wb") as f:
        pq.write_table(_table(50, 5), f)
    async with app_client(settings) as client:
        changed = await client.get(f"/v1/datasets/{dataset['id']}/data", params={"format": "csv"})
    assert changed.status_code == 409
