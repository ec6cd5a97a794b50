"""An artifact larger than any SQL value can hold, stored and read back on both databases.

PostgreSQL's ``bytea`` and SQLite's BLOB stop at 1 GB a value; model artifacts live in the
data store, so a 1.5 GiB one goes through the same functions a trained model does: written
to the store in pieces (``write_artifact``), checked and named in SQL by the worker's
``finish_succeeded``, and read back verified by ``read_artifact``, which loading a model uses.
The bytes are synthetic (no model that large is fitted here); memory stays one 16 MiB block
while writing and verifying, and the artifact's size once while reading it back.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from worker_helpers import FAST_POLICY, add_dataset, add_job
from worker_standins import make_outcome

from service.db.session import transaction
from service.db.tables import ModelArtifactRecord, ModelRecord
from service.db.types import utc_now
from service.models import repository
from service.models.artifacts import read_artifact, write_artifact
from service.store import DataStore
from service.worker import queue
from service.worker.fit_process import JobSnapshot
from service.worker.messages import StoredOutcome

# 50-70 s a database at load 15 (most of it hashing and copying 1.5 GiB four times), so in
# `make long`, not `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.long]

BLOCK = 16 * 1024 * 1024
BLOCKS = 97  # 1.52 GiB
SIZE = BLOCK * BLOCKS


def _pieces(block: bytes) -> Iterator[bytes]:
    for index in range(BLOCKS):
        # Each block differs from the others, so a piece written twice or left out shows.
        yield index.to_bytes(8, "little") + block[8:]


def test_a_1_5_gib_artifact_is_stored_named_in_sql_and_read_back(
    engine: Engine, data_store: DataStore
) -> None:
    block = os.urandom(BLOCK)
    expected = hashlib.sha256()
    for piece in _pieces(block):
        expected.update(piece)
    add_job(engine, add_dataset(engine))
    with transaction(engine) as session:
        claimed = queue.claim(session, worker_id="w", now=utc_now(), policy=FAST_POLICY)
    assert claimed is not None
    snapshot = JobSnapshot.of(claimed, n_jobs=1)
    model_id = "big-" + claimed.id[:8]
    try:
        stored = write_artifact(data_store, model_id, _pieces(block))
        assert (stored.size, stored.sha256) == (SIZE, expected.hexdigest())
        outcome = StoredOutcome.of(make_outcome(snapshot), model_id, stored)
        with transaction(engine) as session:
            assert (
                queue.finish_succeeded(session, data_store, snapshot, "w", outcome, now=utc_now())
                == model_id
            )

        with Session(engine) as session:
            record = session.get_one(ModelArtifactRecord, model_id)
            assert (record.path, record.size_bytes) == (f"models/{model_id}/model.cpm", SIZE)
            assert session.get_one(ModelRecord, model_id).size_bytes == SIZE
            named = repository.artifact(session, model_id)
        assert named is not None
        data = read_artifact(data_store, named)
        assert len(data) == SIZE and hashlib.sha256(data).hexdigest() == expected.hexdigest()
        del data
    finally:
        data_store.delete_prefix(f"models/{model_id}/")
    assert list(data_store.walk()) == []
