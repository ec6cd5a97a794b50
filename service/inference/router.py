"""HTTP routes of the Open Inference Protocol (KServe v2): health, metadata, readiness, infer.

Every error here is the protocol's ``{"error": "..."}`` (``service.errors`` renders ``/v2``
paths that way); docs/inference.md describes the surface for users.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from engine.parallel import prediction_threads
from service.bodies import read_limited
from service.db.health import database_ready
from service.deps import (
    DbEngineDep,
    ModelCacheDep,
    ReferenceCacheDep,
    SettingsDep,
    StoreDep,
    get_resources,
)
from service.inference import metadata, service, serving, wire
from service.inference.schemas import (
    ErrorResponse,
    InferenceRequest,
    InferenceResponse,
    LiveResponse,
    ModelMetadataResponse,
    ModelReadyResponse,
    ReadyResponse,
    ServerMetadataResponse,
)
from service.monitoring.capture import log_v2
from service.openapi import body_schema

# Every /v2 error is the protocol's {"error": ...}; declaring 4XX also keeps FastAPI from
# documenting its own 422 body, which this router never sends.
router = APIRouter(
    prefix="/v2",
    tags=["inference"],
    responses={"4XX": {"model": ErrorResponse, "description": "The request cannot be served."}},
)

REQUEST_LIMIT_SETTING = "COPPICE_MAX_REQUEST_BYTES"


@router.get("/health/live")
async def live() -> LiveResponse:
    """The process is up and serving HTTP."""
    return LiveResponse(live=True)


# A plain `def`: FastAPI runs it in a thread, so a slow database cannot stall the event loop.
@router.get(
    "/health/ready",
    responses={503: {"model": ReadyResponse, "description": "The database is unreachable."}},
)
def ready(db_engine: DbEngineDep, response: Response) -> ReadyResponse:
    """The service can handle requests: its database answers."""
    if not database_ready(db_engine):
        response.status_code = 503
        return ReadyResponse(ready=False)
    return ReadyResponse(ready=True)


# --- server and model metadata ----------------------------------------------------------------

_MODEL_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No model has that id (or that version)."},
    503: {"model": ErrorResponse, "description": "The model cannot be loaded now."},
}
_INFER_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Malformed request, or tensors that do not fit."},
    **_MODEL_ERRORS,
    413: {"model": ErrorResponse, "description": "Too many rows, or too large a body."},
    415: {"model": ErrorResponse, "description": "A Content-Encoding other than gzip/deflate."},
}


@router.get("")
async def server_metadata(request: Request) -> ServerMetadataResponse:
    """The server's name, version and the protocol extensions it supports."""
    return ServerMetadataResponse.model_validate(metadata.server_metadata(request.app.version))


@router.get("/models/{model_id}", responses=_MODEL_ERRORS, response_model_exclude_none=True)
def model_metadata(
    model_id: str,
    db_engine: DbEngineDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> ModelMetadataResponse:
    """The model's input tensor (features, kinds, category codes) and output tensors.

    `model_id` may be a registered name (its `production` alias, else its latest version)."""
    served = serving.served_model(db_engine, cache, store, refs, model_id)
    document = serving.served_metadata(db_engine, served, metadata.model_metadata(served.model))
    return ModelMetadataResponse.model_validate(document)


@router.get(
    "/models/{model_id}/versions/{version}",
    responses=_MODEL_ERRORS,
    response_model_exclude_none=True,
)
def model_version_metadata(
    model_id: str,
    version: str,
    db_engine: DbEngineDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> ModelMetadataResponse:
    """As `GET /v2/models/{model_id}`: a registered name's version N; a model id's one, `1`."""
    served = serving.served_model(db_engine, cache, store, refs, model_id, version)
    document = serving.served_metadata(db_engine, served, metadata.model_metadata(served.model))
    return ModelMetadataResponse.model_validate(document)


# --- model readiness --------------------------------------------------------------------------


@router.get(
    "/models/{model_id}/ready",
    responses={
        404: _MODEL_ERRORS[404],
        503: {"model": ModelReadyResponse, "description": "The model cannot be loaded now."},
    },
)
def model_ready(
    model_id: str,
    db_engine: DbEngineDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> Response:
    """The model is loaded (into the cache, if it was not) and can serve inferences."""
    return _readiness(db_engine, cache, store, refs, model_id, None)


@router.get(
    "/models/{model_id}/versions/{version}/ready",
    responses={
        404: _MODEL_ERRORS[404],
        503: {"model": ModelReadyResponse, "description": "The model cannot be loaded now."},
    },
)
def model_version_ready(
    model_id: str,
    version: str,
    db_engine: DbEngineDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> Response:
    """As `GET /v2/models/{model_id}/ready`, for one version (a model id's one version is `1`)."""
    return _readiness(db_engine, cache, store, refs, model_id, version)


def _readiness(
    db_engine: DbEngineDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    model_id: str,
    version: str | None,
) -> Response:
    try:
        serving.served_model(db_engine, cache, store, refs, model_id, version)
    except serving.ModelNotReady as error:
        # Both shapes in one body: {"ready": false} for clients that read it, {"error"} for
        # clients (tritonclient) that turn any non-200 body into an exception message.
        body = ModelReadyResponse(name=model_id, ready=False, error=error.detail)
        return JSONResponse(body.model_dump(), status_code=503)
    return JSONResponse({"name": model_id, "ready": True})


# --- inference --------------------------------------------------------------------------------

_INFER_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            "The inference request as JSON; or, with an `Inference-Header-Content-Length` "
            "header, that many bytes of JSON followed by the inputs' binary data "
            "(Triton's binary tensor data extension)."
        ),
        "content": {
            "application/json": {"schema": body_schema(InferenceRequest)},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


@router.post(
    "/models/{model_id}/infer",
    response_model=InferenceResponse,
    response_model_exclude_none=True,
    responses=_INFER_ERRORS,
    openapi_extra=_INFER_OPENAPI,
)
async def infer(
    model_id: str,
    request: Request,
    db_engine: DbEngineDep,
    settings: SettingsDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> Response:
    """Predict the rows of the input tensor(s): `predictions` and, for classifiers, `probabilities`.

    `model_id` may be a registered name: its `production` alias, else its latest version."""
    return await _infer(request, db_engine, settings, cache, store, refs, model_id, None)


@router.post(
    "/models/{model_id}/versions/{version}/infer",
    response_model=InferenceResponse,
    response_model_exclude_none=True,
    responses=_INFER_ERRORS,
    openapi_extra=_INFER_OPENAPI,
)
async def infer_version(
    model_id: str,
    version: str,
    request: Request,
    db_engine: DbEngineDep,
    settings: SettingsDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> Response:
    """As `POST /v2/models/{model_id}/infer`: a registered name's version N; a model id's one
    version is `1`."""
    return await _infer(request, db_engine, settings, cache, store, refs, model_id, version)


async def _infer(
    request: Request,
    db_engine: DbEngineDep,
    settings: SettingsDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    model_id: str,
    version: str | None,
) -> Response:
    limit = settings.max_request_bytes
    log = get_resources(request).prediction_log
    raw = await read_limited(request, limit, setting=REQUEST_LIMIT_SETTING)
    encoding = request.headers.get("content-encoding", "")
    header_length = request.headers.get(wire.HEADER_LENGTH)

    # Decoding and predicting are CPU work: off the event loop, in a worker thread.
    def work() -> wire.InferenceResult:
        served = serving.served_model(db_engine, cache, store, refs, model_id, version)
        body = wire.split_request(
            wire.decompress(raw, encoding, limit, setting=REQUEST_LIMIT_SETTING), header_length
        )
        with prediction_threads(settings.predict_threads):  # as /v1 predict
            return service.infer(
                served.model,
                body.header,
                body.binary,
                max_rows=settings.max_predict_rows,
                setting="COPPICE_MAX_PREDICT_ROWS",
                served_as=None
                if served.registered_name is None
                else (served.name, served.version, served.parameters),
                observe=None
                if log is None or not log.enabled
                else partial(log_v2, log, served.model),
            )

    result = await to_thread.run_sync(work)
    return Response(result.content, media_type=result.media_type, headers=result.headers)
