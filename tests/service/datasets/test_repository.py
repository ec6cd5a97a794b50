"""Datasets in the database: storage, column loading, listing without bytes, deletion rules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session

from service.datasets import repository, service
from service.datasets.columns import CategoricalColumn, NumericColumn
from service.datasets.ingest import ParsedTable
from service.db.tables import DatasetColumnRecord, JobRecord, JobStatus
from service.errors import Conflict, InvalidInput, NotFound
from service.store import DataStore

VALUES = np.array([0.1, np.nan, -0.0, 1e308, 5e-324, -7.25])
CODES = np.array([2, 0, -1, 1, 1, 0], dtype=np.int32)
CATEGORIES = ("a", "Ünïcode 🌲", "x'); DROP TABLE datasets;--")


def _table() -> ParsedTable:
    return ParsedTable(
        columns=[NumericColumn("num", VALUES), CategoricalColumn("cat", CODES, CATEGORIES)],
        n_rows=len(VALUES),
        size_bytes=123,
        sha256="ab" * 32,
    )


@pytest.fixture(autouse=True)
def _the_store(store: DataStore) -> None:
    global STORE
    STORE = store


STORE: DataStore


def _create(session: Session, name: str = "d") -> str:
    dataset, _ = service.create_dataset(session, _table(), name=name, store=STORE)
    session.commit()
    return dataset.id


def _texts(column: CategoricalColumn) -> list[str | None]:
    return [column.categories[code] if code >= 0 else None for code in column.codes]


def test_load_columns_round_trips_exactly(session: Session) -> None:
    dataset_id = _create(session)
    session.expunge_all()

    loaded = service.load_columns(session, dataset_id, ["cat", "num"], STORE)

    assert list(loaded) == ["cat", "num"]
    num, cat = loaded["num"], loaded["cat"]
    assert isinstance(num, NumericColumn) and isinstance(cat, CategoricalColumn)
    np.testing.assert_array_equal(num.values, VALUES)
    assert np.signbit(num.values).tolist() == np.signbit(VALUES).tolist()
    # Categories come back sorted by code point, as every upload builds them; the cells'
    # texts are exactly the ones stored.
    assert cat.categories == tuple(sorted(CATEGORIES))
    assert _texts(cat) == _texts(CategoricalColumn("cat", CODES, CATEGORIES))


def test_load_columns_reads_only_what_it_is_asked_for(session: Session) -> None:
    dataset_id = _create(session)

    assert list(service.load_columns(session, dataset_id, ["num"], STORE)) == ["num"]
    with pytest.raises(InvalidInput, match="no column named 'nope'"):
        service.load_columns(session, dataset_id, ["num", "nope"], STORE)
    with pytest.raises(NotFound):
        service.load_columns(session, "no-such-id", ["num"], STORE)


def test_a_dataset_is_parts_in_the_store_with_row_offsets(session: Session) -> None:
    dataset_id = _create(session)

    parts = repository.parts(session, dataset_id)

    assert [(p.part, p.row_offset, p.n_rows) for p in parts] == [(0, 0, len(VALUES))]
    assert parts[0].path == f"datasets/{dataset_id}/part-00000.parquet"
    table = pq.read_table(STORE.full_path(parts[0].path))
    assert table.schema.field("num").type == pa.float64()
    assert table.column("num").null_count == 1  # NaN is stored as null
    assert table.column("cat").to_pylist() == _texts(CategoricalColumn("cat", CODES, CATEGORIES))


def test_a_damaged_part_is_an_error_naming_it(session: Session) -> None:
    dataset_id = _create(session)
    path = STORE.full_path(repository.parts(session, dataset_id)[0].path)
    with open(path, "r+b") as part:
        part.seek(10)
        part.write(b"\xff")

    with pytest.raises(service.DatasetDataCorrupt, match=r"part-00000\.parquet"):
        service.load_columns(session, dataset_id, ["num"], STORE)


def test_reading_a_dataset_leaves_column_bytes_unloaded(session: Session) -> None:
    dataset_id = _create(session)
    session.expunge_all()

    _, columns = service.get_dataset(session, dataset_id)

    assert [column.name for column in columns] == ["num", "cat"]
    assert all("data" in inspect(column).unloaded for column in columns)
    assert columns[1].stats["top"][:2] == [
        {"value": "a", "count": 2},
        {"value": "Ünïcode 🌲", "count": 2},
    ]
    assert columns[1].distribution == {
        "top": [
            {"value": "a", "count": 2},
            {"value": "Ünïcode 🌲", "count": 2},
            {"value": "x'); DROP TABLE datasets;--", "count": 1},
        ],
        "n_other": 0,
    }
    assert columns[0].distribution is not None
    assert sum(columns[0].distribution["histogram"]["counts"]) == 5


def test_job_checks_read_columns_without_their_distributions(session: Session) -> None:
    # POST /v1/jobs and /v1/searches read every column's kind and counts; a wide dataset's
    # histograms would be loaded for nothing.
    dataset_id = _create(session)
    session.expunge_all()

    columns = repository.columns(session, dataset_id)

    assert all({"data", "distribution"} <= inspect(column).unloaded for column in columns)


def test_list_pages_newest_first(session: Session) -> None:
    ids = [_create(session, name=f"d{i}") for i in range(3)]

    page, total = service.list_datasets(session, limit=2, offset=1)

    assert total == 3
    assert [record.id for record in page] == [ids[1], ids[0]]


def _add_job(session: Session, dataset_id: str, status: JobStatus) -> JobRecord:
    job = JobRecord(
        dataset_id=dataset_id,
        method="random_forest",
        task="classification",
        target="cat",
        features=["num"],
        params={},
        validation={"holdout": 0.2},
        status=status,
    )
    session.add(job)
    session.commit()
    return job


@pytest.mark.parametrize("status", [JobStatus.QUEUED, JobStatus.RUNNING])
def test_delete_is_refused_while_a_job_uses_the_dataset(
    session: Session, status: JobStatus
) -> None:
    dataset_id = _create(session)
    _add_job(session, dataset_id, status)

    with pytest.raises(Conflict, match="used by 1 queued or running job"):
        service.delete_dataset(session, dataset_id)


def test_delete_removes_columns_and_detaches_finished_jobs(session: Session) -> None:
    dataset_id = _create(session)
    job = _add_job(session, dataset_id, JobStatus.SUCCEEDED)

    service.delete_dataset(session, dataset_id)
    session.commit()
    session.expunge_all()

    assert repository.get(session, dataset_id) is None
    remaining = session.scalars(
        select(DatasetColumnRecord).where(DatasetColumnRecord.dataset_id == dataset_id)
    ).all()
    assert remaining == []
    assert session.get(JobRecord, job.id).dataset_id is None  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        service.delete_dataset(session, dataset_id)
