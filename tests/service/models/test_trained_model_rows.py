"""A trained model's rows: added by one repository function, removed with the model."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db.session import reading, transaction
from service.db.tables import ImportanceRecord, JobRecord, ModelArtifactRecord, ModelRecord
from service.models import repository
from service.models.artifacts import write_artifact
from tests.service.models.helpers import Service

pytestmark = pytest.mark.anyio


def _rows(session: Session, model_id: str) -> tuple[int, int]:
    """The model's artifact and importance rows."""
    artifacts = select(func.count()).where(ModelArtifactRecord.model_id == model_id)
    importances = select(func.count()).where(ImportanceRecord.model_id == model_id)
    return session.scalar(artifacts) or 0, session.scalar(importances) or 0


async def test_deleting_a_model_removes_its_artifact_and_importances(svc: Service) -> None:
    model_id = await svc.train("random_forest")
    with reading(svc.db_engine) as session:
        artifacts, importances = _rows(session, model_id)
        job_id = session.get_one(ModelRecord, model_id).job_id
    assert artifacts == 1 and importances >= 1

    # The schema's ON DELETE CASCADE does it, on SQLite as on PostgreSQL.
    with transaction(svc.db_engine) as session:
        assert repository.delete_model(session, model_id)

    with reading(svc.db_engine) as session:
        assert _rows(session, model_id) == (0, 0)
        assert session.get(ModelRecord, model_id) is None
        assert session.get_one(JobRecord, job_id).model_id is None
    with transaction(svc.db_engine) as session:
        assert not repository.delete_model(session, model_id)


async def test_a_model_built_elsewhere_is_stored_with_its_artifact(svc: Service) -> None:
    # As a search stores its stacked ensemble: a model not made by a training job's fit.
    trained = await svc.train("random_forest")
    with reading(svc.db_engine) as session:
        job_id = session.get_one(ModelRecord, trained).job_id
    with transaction(svc.db_engine) as session:
        assert repository.delete_model(session, trained)  # frees the job: one model per job
        model = repository.add_trained_model(
            session,
            model_id="m" * 32,
            job_id=job_id,
            name="stacked",
            dataset_id=None,
            method="stacking",
            task="classification",
            target="label",
            features=[{"name": "x", "kind": "numeric"}],
            classes=("no", "yes"),
            params={"members": []},
            encoding={},
            metrics={"holdout": {"accuracy": 1.0}},
            curves=None,
            n_estimators=2,
            artifact=write_artifact(svc.store, "m" * 32, b"stacked-bytes"),
            created_at=datetime.now(UTC),
        )
    assert model.id == "m" * 32
    with reading(svc.db_engine) as session:
        stored = session.get_one(ModelRecord, model.id)
        artifact = session.get_one(ModelArtifactRecord, model.id)
        assert (stored.dataset_id, stored.classes, stored.size_bytes) == ("", ["no", "yes"], 13)
        assert (artifact.path, artifact.size_bytes) == (f"models/{'m' * 32}/model.cpm", 13)
        assert artifact.sha256 == hashlib.sha256(b"stacked-bytes").hexdigest()
        assert _rows(session, model.id) == (1, 0)
