"""The application factory: ``create_app(settings)`` builds one self-contained service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from service.config import Settings
from service.datasets.router import router as datasets_router
from service.db.session import create_db_engine
from service.deps import Resources
from service.errors import install_error_handlers
from service.inference.router import router as inference_router


def _package_version() -> str:
    try:
        return version("coppice")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


def create_app(settings: Settings) -> FastAPI:
    """Build the ASGI app; every long-lived resource is opened and closed by its lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The model cache and the worker supervisor will be opened and closed here too.
        db_engine = create_db_engine(settings.resolved_database_url)
        app.state.resources = Resources(settings=settings, db_engine=db_engine)
        try:
            yield
        finally:
            db_engine.dispose()

    app = FastAPI(
        title="Coppice",
        summary="Train, inspect and serve ensemble ML models over HTTP.",
        version=_package_version(),
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.include_router(datasets_router)
    app.include_router(inference_router)
    return app
