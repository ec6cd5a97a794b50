"""Batch predictions scored on a Dask cluster (``service.batch.cluster``): a real local cluster
of two worker processes, the batch process's ``run_batch`` with its scheduler's address. The
output is the one the batch process writes when it scores alone, and the input's parts are
opened only in the workers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.orm import Session

from service.batch import process
from service.batch.outcome import BatchOutcome, Scored
from service.batch.process import outcome_of
from service.datasets import parts as parts_module
from service.datasets.part_reader import open_part
from service.datasets.service import part_records
from service.db.tables import DatasetPartRecord
from service.worker.messages import Failed
from tests.service.batch.test_batch import SMALL_PARTS, upload
from tests.service.models.helpers import COLUMNS, Service, dataset_rows
from tests.service.parquet_opens import log_opens, register_by_value

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

# The workers do not import the tests: the open logger travels by value.
register_by_value()

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster, set_as_default=False) as client:
        yield client
    cluster.close()


def _batch(svc: Service, batch_id: str, address: str | None) -> Any:
    return outcome_of(
        lambda: process.run_batch(
            svc.settings.resolved_database_url,
            svc.store,
            batch_id,
            lambda fraction, stage: None,
            lambda: False,
            dask_scheduler=address,
        )
    )


def _rows(svc: Service, outcome: BatchOutcome) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {}
    for part in part_records(outcome.dataset_id, outcome.parts):
        table = open_part(svc.store, part).read()
        for name in table.column_names:
            columns.setdefault(name, []).extend(table.column(name).to_pylist())
    return columns


async def _queued(svc: Service, **body: Any) -> str:
    created = await svc.client.post("/v1/batch-predictions", json=body)
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


async def test_the_cluster_scores_as_the_batch_process_does_opening_no_input_part(
    open_service: Any, cluster: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("random_forest", params={"n_estimators": 8})
        monkeypatch.setattr(parts_module, "layout", lambda row_bytes: SMALL_PARTS)
        dataset = await upload(svc, COLUMNS, dataset_rows(70, seed=3))
        monkeypatch.undo()
        body = {"model": model, "dataset_id": dataset, "keep_columns": ["amount", "colour"]}
        body["return_proba"] = True

        alone = _batch(svc, await _queued(svc, **body), None)
        log = tmp_path / "opens.log"
        workers = set(cluster.run(os.getpid).values())
        cluster.run(log_opens, str(log))
        log_opens(str(log))
        try:
            on_cluster = _batch(svc, await _queued(svc, **body), cluster.scheduler.address)
        finally:
            log_opens(None)
            cluster.run(log_opens, None)

    assert isinstance(alone, Scored) and isinstance(on_cluster, Scored), on_cluster
    here, there = alone.outcome, on_cluster.outcome
    assert _rows(svc, there) == _rows(svc, here)
    assert there.n_rows == here.n_rows == 70
    assert list(there.kinds) == list(here.kinds)
    assert there.summaries == here.summaries
    assert there.metrics == here.metrics and there.metrics is not None
    # One output part per input part, numbered and placed as the input's.
    assert [(p.index, p.row_offset, p.n_rows) for p in there.parts] == [
        (i, 16 * i, min(16, 70 - 16 * i)) for i in range(5)
    ]
    assert any("Dask cluster" in note for note in there.notes)
    # Each input part opened once, on a worker; this process opened only the output's parts
    # (once each for the summaries, and again for the histograms only up to the part where a
    # column's range last widened).
    pids = [int(line) for line in log.read_text().split()]
    assert sum(pid in workers for pid in pids) == 5
    assert len(there.parts) <= pids.count(os.getpid()) <= 2 * len(there.parts)
    assert set(pids) <= workers | {os.getpid()}


async def test_a_corrupt_part_fails_the_batch_and_leaves_no_output(
    open_service: Any, cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("decision_tree", params={})
        monkeypatch.setattr(parts_module, "layout", lambda row_bytes: SMALL_PARTS)
        dataset = await upload(svc, COLUMNS, dataset_rows(40))
        monkeypatch.undo()
        with Session(svc.db_engine) as session:
            last = session.query(DatasetPartRecord).filter_by(dataset_id=dataset, part=2).one()
            path = svc.store.full_path(last.path)
        with open(path, "r+b") as handle:
            handle.seek(20)
            handle.write(b"\0\0\0\0")
        before = {info.path for info in svc.store.walk()}

        result = _batch(
            svc, await _queued(svc, model=model, dataset_id=dataset), cluster.scheduler.address
        )

        assert isinstance(result, Failed) and result.code == "dataset_corrupt", result
        assert path.endswith(last.path) and last.path in result.message
        # The parts the other workers wrote are deleted with the failure.
        assert {info.path for info in svc.store.walk()} == before


async def test_an_unreachable_scheduler_fails_the_batch(open_service: Any) -> None:
    async with open_service(embedded_worker=False) as svc:
        model = await svc.train("decision_tree", params={})
        dataset = await upload(svc, COLUMNS, dataset_rows(10))
        result = _batch(
            svc, await _queued(svc, model=model, dataset_id=dataset), "tcp://127.0.0.1:9"
        )
        assert isinstance(result, Failed) and result.code == "dask_unreachable", result
        assert "tcp://127.0.0.1:9" in result.message
