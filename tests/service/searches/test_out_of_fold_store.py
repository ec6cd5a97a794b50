"""Out-of-fold predictions live in the data store: revision 0010_oof_store moves the BLOBs of
an existing database there (SQLite and PostgreSQL), the reader takes the moved rows, the
downgrade brings the BLOBs back, and deleting the model names its object for deletion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from alembic import command
from sqlalchemy import MetaData, insert, text
from sqlalchemy.orm import Session

from service.db.migrate import alembic_config, upgrade_to_head
from service.db.session import create_db_engine
from service.models import repository
from service.searches import predictions
from service.store import DataStore
from tests.service.db.test_migrations import _differences, _row

BEFORE = "0010_job_resources"


def _check_the_move(url: str, tmp_path: Path) -> None:
    command.upgrade(alembic_config(url), BEFORE)
    rng = np.random.default_rng(0)
    kept = {f"m{j}": rng.random((50 + j, 2 + j)) for j in range(3)}
    db = create_db_engine(url)
    try:
        with db.begin() as connection:
            tables = MetaData()
            tables.reflect(connection)

            def add(name: str, **values: object) -> None:
                table = tables.tables[name]
                connection.execute(insert(table).values(_row(table, **values)))

            for model_id, values in kept.items():
                add("jobs", id=f"j-{model_id}", status="succeeded", progress=1.0)
                add("models", id=model_id, job_id=f"j-{model_id}")
                add(
                    "out_of_fold_predictions",
                    model_id=model_id,
                    job_id=f"j-{model_id}",
                    n_rows=values.shape[0],
                    n_columns=values.shape[1],
                    folds=5,
                    data=predictions.encode(values),
                )
        store = DataStore(str(tmp_path / "store"))
        upgrade_to_head(url, store)

        with db.connect() as connection:
            rows = connection.execute(
                text("SELECT model_id, path, size, data FROM out_of_fold_predictions")
            ).all()
        for model_id, path, size, data in rows:
            assert path == f"models/{model_id}/out_of_fold.f8"
            assert size == kept[model_id].size * 8 and bytes(data) == b""
            raw = store.fs.cat_file(store.full_path(path))
            assert raw == np.ascontiguousarray(kept[model_id], dtype="<f8").tobytes()
        with Session(db) as session:
            loaded = predictions.load(session, store, list(kept))
        assert set(loaded) == set(kept)
        for model_id, values in kept.items():
            np.testing.assert_array_equal(loaded[model_id], values)
        assert _differences(db) == []

        # A model's deletion names its predictions' object too (deleted after the commit).
        with Session(db) as session, session.begin():
            paths = repository.delete_model(session, "m0")
        assert paths is not None and "models/m0/out_of_fold.f8" in paths

        config = alembic_config(url)
        config.attributes["store"] = store  # the downgrade reads the objects back
        command.downgrade(config, BEFORE)
        with db.connect() as connection:
            back = connection.execute(
                text("SELECT model_id, data FROM out_of_fold_predictions")
            ).all()
        assert sorted(model_id for model_id, _ in back) == ["m1", "m2"]
        for model_id, data in back:
            assert bytes(data) == predictions.encode(kept[model_id])  # the BLOB as it was
    finally:
        db.dispose()


def test_the_predictions_move_to_the_store_and_back_on_sqlite(tmp_path: Path) -> None:
    _check_the_move(f"sqlite:///{tmp_path / 'oof.db'}", tmp_path)


@pytest.mark.postgres
def test_the_predictions_move_to_the_store_and_back_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    _check_the_move(postgres_url, tmp_path)
