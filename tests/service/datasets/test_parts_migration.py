"""Revision 0009 on a database holding datasets as column BLOBs: each dataset's columns move
into Parquet parts in the store, load and download as before, and a second run moves nothing."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from alembic import command
from sqlalchemy import MetaData, insert

from service.config import Settings
from service.datasets.columns import (
    DATA_FORMAT,
    CategoricalColumn,
    NumericColumn,
    encode_column,
    summarize,
)
from service.datasets.service import PARTS_FORMAT, load_columns
from service.db.migrate import alembic_config
from service.db.session import create_db_engine
from service.store import DataStore
from tests.service.datasets.conftest import app_client
from tests.service.db.test_migrations import _differences, _row

BEFORE = "0008_prediction_log"
COLUMNS = [
    NumericColumn("x", np.array([1.0, np.nan, 2.5, -0.0, 1e300])),
    CategoricalColumn("colour", np.array([0, 1, -1, 1, 2], dtype=np.int32), ("blue", "red", "é")),
]


def _store_old_datasets(url: str, ids: list[str]) -> None:
    engine = create_db_engine(url)
    try:
        tables = MetaData()
        tables.reflect(engine, only=["datasets", "dataset_columns"])
        datasets, columns = tables.tables["datasets"], tables.tables["dataset_columns"]
        with engine.begin() as connection:
            for dataset_id in ids:
                connection.execute(
                    insert(datasets).values(
                        _row(datasets, id=dataset_id, name=dataset_id, n_rows=5, n_columns=2)
                    )
                )
                for position, column in enumerate(COLUMNS):
                    summary = summarize(column)
                    connection.execute(
                        insert(columns).values(
                            dataset_id=dataset_id,
                            position=position,
                            name=column.name,
                            kind=column.kind.value,
                            n_missing=summary.n_missing,
                            n_unique=summary.n_unique,
                            stats=summary.stats,
                            distribution=summary.distribution,
                            data_format=DATA_FORMAT,
                            data=bytes(encode_column(column)),
                        )
                    )
            # A damaged dataset stays as it was (a job reports it corrupt, as before).
            connection.execute(
                insert(datasets).values(_row(datasets, id="bad", name="bad", n_rows=1))
            )
            connection.execute(
                insert(columns).values(
                    _row(columns, dataset_id="bad", position=0, kind="numeric", data=b"\x00")
                )
            )
    finally:
        engine.dispose()


async def _upgrade_and_check(url: str, tmp_path: Path) -> None:
    store = DataStore(str(tmp_path / "store"))
    config = alembic_config(url)
    config.attributes["store"] = store
    command.upgrade(config, BEFORE)
    ids = [f"old-{i}" for i in range(3)]
    _store_old_datasets(url, ids)

    command.upgrade(config, "head")

    engine = create_db_engine(url)
    try:
        assert _differences(engine) == []
        from sqlalchemy.orm import Session

        from service.datasets import repository

        with Session(engine) as session:
            for dataset_id in ids:
                parts = repository.parts(session, dataset_id)
                assert [(p.row_offset, p.n_rows) for p in parts] == [(0, 5)]
                records = repository.columns(session, dataset_id)
                assert {r.data_format for r in records} == {PARTS_FORMAT}
                loaded = load_columns(session, dataset_id, ["x", "colour"], store)
                x, colour = loaded["x"], loaded["colour"]
                assert isinstance(x, NumericColumn) and isinstance(colour, CategoricalColumn)
                np.testing.assert_array_equal(x.values, COLUMNS[0].values)
                assert colour.categories == ("blue", "red", "é")
                assert colour.codes.tolist() == [0, 1, -1, 1, 2]
            assert repository.parts(session, "bad") == []
    finally:
        engine.dispose()

    settings = Settings(
        data_dir=tmp_path,
        database_url=url,
        store_url=str(tmp_path / "store"),
        embedded_worker=False,
    )
    async with app_client(settings) as client:
        response = await client.get(f"/v1/datasets/{ids[0]}/data")
        assert response.status_code == 200
        table = pq.read_table(io.BytesIO(response.content))
        assert table.column("colour").to_pylist() == ["blue", "red", None, "red", "é"]
        assert (await client.get(f"/v1/datasets/{ids[0]}")).json()["storage"]["n_parts"] == 1


@pytest.mark.anyio
async def test_column_blobs_move_into_parts_on_sqlite(tmp_path: Path) -> None:
    await _upgrade_and_check(f"sqlite:///{tmp_path / 'old.db'}", tmp_path)


@pytest.mark.anyio
@pytest.mark.postgres
async def test_column_blobs_move_into_parts_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    await _upgrade_and_check(postgres_url, tmp_path)


def test_the_revision_keeps_its_own_decoder_and_part_writer() -> None:
    # A later change to the service's column decoder or part writer must not change what this
    # revision does: it imports neither (only the store, whose interface it shares).
    source = (Path(__file__).parents[3] / "migrations/versions/0009_dataset_parts.py").read_text()

    imports = [line.strip() for line in source.splitlines() if "import" in line]
    assert not [line for line in imports if "service.datasets" in line], imports
