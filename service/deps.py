"""FastAPI dependencies that hand request handlers the app's long-lived objects.

``create_app`` stores a ``Resources`` on ``app.state`` in its lifespan; handlers ask for
``SettingsDep``, ``DbEngineDep``, ``ModelCacheDep``, ``StoreDep`` or ``SessionDep`` instead of reaching for
module-level globals, so every app instance (one per test, say) is self-contained.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, cast

from fastapi import Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from service.config import Settings
from service.models.cache import ModelCache
from service.registry.cache import ReferenceCache
from service.store import DataStore, store_from_settings

if TYPE_CHECKING:
    from service.monitoring.log import PredictionLog
    from service.worker.claim_loop import Supervisor


@dataclass(frozen=True, slots=True)
class Resources:
    """What the lifespan opens at start-up and closes at shutdown."""

    settings: Settings
    db_engine: Engine
    # Loaded models for predict and importances, bounded by COPPICE_MODEL_CACHE_BYTES
    # (create_app sizes it; the default keeps nothing, for apps assembled by hand in tests).
    model_cache: ModelCache = field(default_factory=lambda: ModelCache(0))
    # Reference (name@alias, name@N) → model id, briefly or until a notice drops it.
    references: ReferenceCache = field(default_factory=ReferenceCache)
    # The embedded training worker, when `coppice serve` runs one (COPPICE_EMBEDDED_WORKER).
    worker: Supervisor | None = None
    # Where dataset parts and model artifacts live (COPPICE_STORE_URL); None: the settings'.
    data_store: DataStore | None = None
    # The prediction log's writer (service.monitoring); None: predictions are not logged.
    prediction_log: PredictionLog | None = None

    @property
    def store(self) -> DataStore:
        """The data store; an app assembled by hand in a test gets the settings' default."""
        if self.data_store is None:
            object.__setattr__(self, "data_store", store_from_settings(self.settings))
        assert self.data_store is not None
        return self.data_store


def get_resources(request: Request) -> Resources:
    return cast(Resources, request.app.state.resources)


# async: FastAPI runs a plain ``def`` dependency in its thread pool, and a thread hop per
# dependency costs more than these attribute lookups (a third of a one-row predict's time).
async def get_settings(request: Request) -> Settings:
    return get_resources(request).settings


async def get_db_engine(request: Request) -> Engine:
    return get_resources(request).db_engine


async def get_model_cache(request: Request) -> ModelCache:
    return get_resources(request).model_cache


async def get_reference_cache(request: Request) -> ReferenceCache:
    return get_resources(request).references


async def get_prediction_log(request: Request) -> PredictionLog | None:
    return get_resources(request).prediction_log


async def get_store(request: Request) -> DataStore:
    return get_resources(request).store


def get_session(request: Request) -> Iterator[Session]:
    """One session per request, and the request's one transaction.

    Commits when the handler returns, rolls back when it raises; services and repositories only
    add and flush. ``expire_on_commit=False`` keeps returned records readable after the commit.
    """
    with Session(get_resources(request).db_engine, expire_on_commit=False) as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()


SettingsDep = Annotated[Settings, Depends(get_settings)]
DbEngineDep = Annotated[Engine, Depends(get_db_engine)]
ModelCacheDep = Annotated[ModelCache, Depends(get_model_cache)]
ReferenceCacheDep = Annotated[ReferenceCache, Depends(get_reference_cache)]
StoreDep = Annotated[DataStore, Depends(get_store)]
PredictionLogDep = Annotated["PredictionLog | None", Depends(get_prediction_log)]
# scope="function": the commit happens before the response is sent, so a failed commit is the
# client's error response instead of a success that did not happen.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
