"""Reading a stored model back in a test, as the service does: the row names the object."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

import engine
from service.db.tables import ModelArtifactRecord
from service.models import repository
from service.models.artifacts import read_artifact
from service.store import DataStore


def load_stored_model(session: Session, store: DataStore, model_id: str) -> Any:
    """The fitted estimator of ``model_id``, read (verified) from the object its row names."""
    stored = repository.artifact(session, model_id)
    assert stored is not None, f"model {model_id} has no artifact row"
    return engine.load_model(read_artifact(store, stored))


def replace_stored_model(session: Session, store: DataStore, model_id: str, model: Any) -> None:
    """Store ``model`` as ``model_id``'s artifact, row and object both (as if trained so)."""
    path = repository.artifact(session, model_id)
    assert path is not None
    stored = store.put(path.path, engine.save_model(model))
    record = session.get_one(ModelArtifactRecord, model_id)
    record.size_bytes, record.sha256 = stored.size, stored.sha256


def damage_stored_model(session: Session, store: DataStore, model_id: str) -> str:
    """Flip one byte of the model's object, behind its row's back; the object's path."""
    stored = repository.artifact(session, model_id)
    assert stored is not None
    data = bytearray(store.fs.cat_file(store.full_path(stored.path)))
    data[len(data) // 2] ^= 0xFF
    store.put(stored.path, bytes(data))
    return stored.path
