"""Which model a ``/v2`` model name (and version) serves: a model id, or a registered name.

``/v2/models/{name}`` is a model id, a registered name (its ``production`` alias, else its
newest version) or any ``/v1`` reference (``churn@staging``, ``churn@3``);
``/v2/models/{name}/versions/{N}`` is version N of a registered name, or ``1`` of a model id
(models are immutable, so an id has one version). Answers then carry the registered name and
version as the protocol's ``model_name`` and ``model_version``, and the model id in
``parameters``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.errors import NotFound
from service.inference.service import MODEL_VERSION, ModelNotReady, loaded_model
from service.models.cache import LoadedModel, ModelCache
from service.registry import repository as registry
from service.registry.cache import ReferenceCache, Resolved
from service.registry.resolve import resolve

logger = logging.getLogger(__name__)


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
    refs: ReferenceCache,
    name: str,
    version: str | None = None,
) -> Served:
    """Resolve ``name`` (and ``version``) and load the model, from the caches when they know."""
    try:
        # A Session connects on first use: with both caches warm, nothing touches the database.
        with Session(db_engine) as session:
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
            loaded_model(db_engine, cache, resolved.model_id, version), name, MODEL_VERSION
        )
    model = loaded_model(db_engine, cache, resolved.model_id)
    return Served(model, resolved.name, str(resolved.version), resolved.name)


def _version(session: Session, refs: ReferenceCache, name: str, version: str) -> Resolved:
    if not (version.isdecimal() and version.isascii()):
        raise NotFound(
            f"Registered model '{name}' has no version '{version}'; versions are numbers."
        )
    return resolve(session, refs, f"{name}@{int(version)}")


def metadata(db_engine: Engine, served: Served, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (the model's metadata) under its served name, with its registered versions."""
    if served.registered_name is None:
        return document
    with Session(db_engine) as session:
        numbers = [str(v.version) for v in registry.versions(session, [served.registered_name])]
    parameters = {**document.get("parameters", {}), **served.parameters, "version": served.version}
    return document | {"name": served.name, "versions": numbers, "parameters": parameters}
