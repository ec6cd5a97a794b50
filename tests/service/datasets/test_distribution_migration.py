"""Revision 0006 on a database holding a dataset: the old columns keep their data and counts and
have no distribution (the API says null), new uploads get one; down and up again keeps rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from alembic import command
from sqlalchemy import MetaData, insert, inspect

from service.config import Settings
from service.datasets.columns import (
    DATA_FORMAT,
    CategoricalColumn,
    NumericColumn,
    encode_column,
    summarize,
)
from service.db.migrate import alembic_config
from service.db.session import create_db_engine
from service.store import DataStore
from tests.service.datasets.conftest import app_client
from tests.service.db.test_migrations import _differences, _row

BEFORE = "0005_searches"
COLUMNS = [
    NumericColumn("x", np.array([1.0, np.nan, 2.5, 2.5])),
    CategoricalColumn("colour", np.array([0, 1, -1, 1], dtype=np.int32), ("blue", "red")),
]


def _store_old_dataset(url: str) -> None:
    """A dataset as revision 0005 stored it: its columns' data, counts and stats."""
    engine = create_db_engine(url)
    try:
        tables = MetaData()
        tables.reflect(engine, only=["datasets", "dataset_columns"])
        datasets, columns = tables.tables["datasets"], tables.tables["dataset_columns"]
        assert "distribution" not in columns.c
        with engine.begin() as connection:
            connection.execute(
                insert(datasets).values(_row(datasets, id="old", name="old", n_rows=4, n_columns=2))
            )
            for position, column in enumerate(COLUMNS):
                summary = summarize(column)
                connection.execute(
                    insert(columns).values(
                        dataset_id="old",
                        position=position,
                        name=column.name,
                        kind=column.kind.value,
                        n_missing=summary.n_missing,
                        n_unique=summary.n_unique,
                        stats=summary.stats,
                        data_format=DATA_FORMAT,
                        data=bytes(encode_column(column)),
                    )
                )
    finally:
        engine.dispose()


async def _check_through_the_api(url: str, data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, database_url=url, embedded_worker=False)
    async with app_client(settings) as client:
        old = (await client.get("/v1/datasets/old")).json()
        assert [(c["name"], c["n_missing"], c["n_unique"]) for c in old["columns"]] == [
            ("x", 1, 2),
            ("colour", 1, 2),
        ]
        assert [c["distribution"] for c in old["columns"]] == [None, None]
        new = await client.post(
            "/v1/datasets", json={"columns": ["x"], "rows": [[1.0], [None], [3.0]]}
        )
        assert new.status_code == 201, new.text
        assert new.json()["columns"][0]["distribution"]["histogram"]["counts"][0] == 1


async def _round_trip(url: str, data_dir: Path) -> None:
    config = alembic_config(url)
    # Revision 0009 moves the dataset's columns into this store.
    config.attributes["store"] = DataStore(str(data_dir / "store"))
    command.upgrade(config, BEFORE)
    _store_old_dataset(url)
    command.upgrade(config, "head")
    await _check_through_the_api(url, data_dir)

    command.downgrade(config, BEFORE)
    engine = create_db_engine(url)
    try:
        names = {column["name"] for column in inspect(engine).get_columns("dataset_columns")}
        assert "distribution" not in names
        command.upgrade(config, "head")
        assert _differences(engine) == []
    finally:
        engine.dispose()


@pytest.mark.anyio
async def test_old_columns_have_no_distribution_after_the_upgrade_on_sqlite(
    tmp_path: Path,
) -> None:
    await _round_trip(f"sqlite:///{tmp_path / 'old.db'}", tmp_path)


@pytest.mark.anyio
@pytest.mark.postgres
async def test_old_columns_have_no_distribution_after_the_upgrade_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    await _round_trip(postgres_url, tmp_path)
