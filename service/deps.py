"""FastAPI dependencies that hand request handlers the app's long-lived objects.

``create_app`` stores a ``Resources`` on ``app.state`` in its lifespan; handlers ask for
``SettingsDep`` or ``DbEngineDep`` instead of reaching for module-level globals, so every
app instance (one per test, say) is self-contained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy import Engine

from service.config import Settings


@dataclass(frozen=True, slots=True)
class Resources:
    """What the lifespan opens at start-up and closes at shutdown."""

    settings: Settings
    db_engine: Engine


def get_resources(request: Request) -> Resources:
    return cast(Resources, request.app.state.resources)


def get_settings(request: Request) -> Settings:
    return get_resources(request).settings


def get_db_engine(request: Request) -> Engine:
    return get_resources(request).db_engine


SettingsDep = Annotated[Settings, Depends(get_settings)]
DbEngineDep = Annotated[Engine, Depends(get_db_engine)]
