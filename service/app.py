"""The application factory: ``create_app(settings)`` builds one self-contained service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI

from engine.process_setup import limit_malloc_arenas
from service.batch.router import router as batch_router
from service.config import Settings
from service.console import OPEN_PATHS as CONSOLE_PATHS
from service.console import install_console
from service.datasets.router import router as datasets_router
from service.db.session import create_db_engine
from service.deps import Resources
from service.errors import install_error_handlers
from service.export.router import router as export_router
from service.inference.router import router as inference_router
from service.jobs.router import router as jobs_router
from service.methods.router import router as methods_router
from service.models.cache import ModelCache
from service.models.router import hot_router as models_hot_router
from service.models.router import router as models_router
from service.monitoring.log import PredictionLog
from service.monitoring.router import router as monitoring_router
from service.observability import install_observability
from service.openapi import install_body_schemas
from service.registry.cache import ReferenceCache
from service.registry.listener import RegistryListener
from service.registry.router import router as registry_router
from service.searches.router import router as searches_router
from service.security import install_cors, install_security
from service.store import store_from_settings
from service.worker.claim_loop import Supervisor, WorkerConfig


def _package_version() -> str:
    try:
        return version("coppice")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


def _start_embedded_worker(settings: Settings) -> Supervisor:
    """The worker `coppice serve` runs beside the API: its own threads and fit processes."""
    worker = Supervisor(settings.resolved_database_url, WorkerConfig.from_settings(settings))
    worker.start()
    return worker


# glibc malloc arenas for the API process: one per busy thread by default, each keeping its
# own freed memory, made an upload's peak RSS depend on which pool thread took it
# (engine.process_setup.limit_malloc_arenas); two is the usual advice for threaded servers.
API_MALLOC_ARENAS = 2


def create_app(settings: Settings) -> FastAPI:
    """Build the ASGI app; every long-lived resource is opened and closed by its lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Before the thread pool that runs uploads and sync handlers exists (see there).
        limit_malloc_arenas(API_MALLOC_ARENAS)
        db_engine = create_db_engine(settings.resolved_database_url)
        model_cache = ModelCache(settings.model_cache_bytes)
        references = ReferenceCache()
        listener = None
        if db_engine.dialect.name == "postgresql":
            listener = RegistryListener(settings.resolved_database_url, references)
            listener.start()
        worker = _start_embedded_worker(settings) if settings.embedded_worker else None
        prediction_log = PredictionLog(
            db_engine,
            rate=settings.prediction_log_rate,
            max_rows=settings.prediction_log_max_rows,
            queue_size=settings.prediction_log_queue,
        )
        prediction_log.start()
        app.state.resources = Resources(
            settings=settings,
            db_engine=db_engine,
            data_store=store_from_settings(settings),
            model_cache=model_cache,
            references=references,
            worker=worker,
            prediction_log=prediction_log,
        )
        try:
            yield
        finally:
            if listener is not None:
                await asyncio.to_thread(listener.stop)
            if worker is not None:
                # Stopping waits up to the shutdown grace for running fits; not on the loop.
                await asyncio.to_thread(worker.stop)
            await asyncio.to_thread(prediction_log.stop)
            model_cache.clear()
            db_engine.dispose()

    app = FastAPI(
        title="Coppice",
        summary="Train, inspect and serve ensemble ML models over HTTP.",
        version=_package_version(),
        lifespan=lifespan,
        # The console serves /docs and /redoc from vendored files; FastAPI's load a CDN's.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    # First: a one-row predict is the most frequent request (see service.models.router).
    app.include_router(models_hot_router)
    app.include_router(datasets_router)
    app.include_router(methods_router)
    app.include_router(jobs_router)
    app.include_router(models_router)
    app.include_router(export_router)
    app.include_router(monitoring_router)
    app.include_router(registry_router)
    app.include_router(inference_router)
    app.include_router(searches_router)
    app.include_router(batch_router)
    install_console(app, settings)
    install_body_schemas(app)
    # Middleware added last runs first: CORS answers preflights before anything else, the
    # request middleware (request id, access log, metrics) then sees every request, and the
    # key check runs in front of the routes, whichever router added them.
    install_security(app, settings, open_pages=CONSOLE_PATHS)
    install_observability(app)
    install_cors(app, settings)
    return app
