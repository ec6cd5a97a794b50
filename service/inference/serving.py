"""Which model a ``/v2`` model name (and version) serves: a model id, or a registered name.

``/v2/models/{name}`` is a model id, a registered name (its ``production`` alias, else its
newest version) or any ``/v1`` reference (``churn@staging``, ``churn@3``);
``/v2/models/{name}/versions/{N}`` is version N of a registered name, or ``1`` of a model id
(models are immutable, so an id has one version). Answers then carry the registered name and
version as the protocol's ``model_name`` and ``model_version``, and the model id in
``parameters``. Models come from the app's ``ModelCache``, so once a model is loaded an
inference reads nothing from the database.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.db.session import reading
from service.errors import NotFound, NotReady
from service.models import service as models
from service.models.cache import LoadedModel, ModelCache
from service.registry import repository as registry
from service.registry.cache import ReferenceCache, Resolved
from service.registry.resolve import resolve
from service.store import DataStore

logger = logging.getLogger(__name__)

# Models are immutable, so a model id has one version.
MODEL_VERSION = "1"


class ModelNotReady(NotReady):
    """The model cannot serve right now."""


@dataclass(frozen=True, slots=True)
class Served:
    """The loaded model and what the protocol calls it."""

    model: LoadedModel
    name: str
    version: str
    # The registered name it was reached through; None for a model id.
    registered_name: str | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """Response parameters naming the model behind a registered name (none for an id)."""
        return {} if self.registered_name is None else {"model_id": self.model.id}


def served_model(
    db_engine: Engine,
    cache: ModelCache,
    store: DataStore,
    refs: ReferenceCache,
    name: str,
    version: str | None = None,
) -> Served:
    """Resolve ``name`` (and ``version``) and load the model, from the caches when they know."""
    try:
        # reading() connects on first use: with both caches warm, nothing touches the database.
        with reading(db_engine) as session:
            resolved = resolve(session, refs, name, bare_names=True)
            if resolved.name is not None and version is not None:
                if "@" in name:
                    raise NotFound(
                        f"'{name}' names one version already; ask for versions of '{resolved.name}'."
                    )
                resolved = _version(session, refs, resolved.name, version)
    except SQLAlchemyError:
        logger.warning("model %s could not be resolved: database unreachable", name, exc_info=True)
        raise ModelNotReady(
            f"Model '{name}' cannot be read now: the model store is unreachable. Try again shortly."
        ) from None
    if resolved.name is None:
        return Served(
            loaded_model(db_engine, cache, store, resolved.model_id, version), name, MODEL_VERSION
        )
    model = loaded_model(db_engine, cache, store, resolved.model_id)
    return Served(model, resolved.name, str(resolved.version), resolved.name)


def loaded_model(
    db_engine: Engine,
    cache: ModelCache,
    store: DataStore,
    model_id: str,
    version: str | None = None,
) -> LoadedModel:
    """The usable model: from the cache, or read (once) with a short read-only session."""
    try:
        with reading(db_engine) as session:  # connects on first use: a cache hit never does
            model = models.loaded_model(session, cache, store, model_id)
    except models.ArtifactCorrupt as error:
        raise ModelNotReady(error.detail) from None
    except SQLAlchemyError:
        # No URL in the message: it may carry a password.
        logger.warning("model %s could not be read: database unreachable", model_id, exc_info=True)
        raise ModelNotReady(
            f"Model '{model_id}' cannot be read now: the model store is unreachable. Try again "
            "shortly."
        ) from None
    if version is not None and version != MODEL_VERSION:
        raise NotFound(
            f"Model '{model_id}' has no version '{version}'; its only version is '{MODEL_VERSION}'."
        )
    return model


def _version(session: Session, refs: ReferenceCache, name: str, version: str) -> Resolved:
    if not (version.isdecimal() and version.isascii()):
        raise NotFound(
            f"Registered model '{name}' has no version '{version}'; versions are numbers."
        )
    return resolve(session, refs, f"{name}@{int(version)}")


def served_metadata(db_engine: Engine, served: Served, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the model's metadata) under its served name, with its registered versions."""
    if served.registered_name is None:
        return document
    with reading(db_engine) as session:
        numbers = [str(v.version) for v in registry.versions(session, [served.registered_name])]
    parameters = {**document.get("parameters", {}), **served.parameters, "version": served.version}
    return document | {"name": served.name, "versions": numbers, "parameters": parameters}
