"""HTTP routes of ``/v1/models``: translate requests to service calls, and results to bodies."""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated, Any

import numpy as np
import orjson
from anyio import to_thread
from fastapi import APIRouter, BackgroundTasks, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from engine.parallel import prediction_threads
from service.bodies import parse_json, read_limited
from service.db.session import reading
from service.db.tables import ModelRecord
from service.deps import (
    ModelCacheDep,
    ReferenceCacheDep,
    SessionDep,
    StoreDep,
    get_resources,
)
from service.errors import PayloadTooLarge, problem_responses
from service.methods.catalog import Task
from service.models import service
from service.models.artifacts import delete_objects
from service.models.cache import LoadedModel
from service.models.json_rows import parse_rows
from service.models.schemas import (
    CurvesOut,
    DiagnosticsOut,
    FeatureImportanceOut,
    FeatureOut,
    MetricsOut,
    ModelOut,
    ModelPage,
    PredictRequest,
    PredictResponse,
    RegisteredAs,
    records_only,
)
from service.monitoring.capture import log_v1, row_ids
from service.monitoring.log import PredictionLog
from service.openapi import body_schema
from service.paging import Limit, Offset
from service.registry.resolve import peek, resolve

router = APIRouter(prefix="/v1/models", tags=["models"], responses=problem_responses())

# Every route below takes a model reference; responses carry the id it resolved to.
ModelRef = Annotated[
    str,
    Path(
        description="A model id, or a registered model's `name@alias`, `name@N` or `name@latest`."
    ),
]

# Largest predict body (bytes) answered on the event loop when its model is cached.
INLINE_PREDICT_BYTES = 4096


@router.get("")
def list_models(
    session: SessionDep,
    method: str | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> ModelPage:
    """List models, newest first, optionally only those of one method."""
    records, total = service.list_models(session, method=method, limit=limit, offset=offset)
    registered = service.registered_as(session, [record.id for record in records])
    items = [model_out(record, registered.get(record.id, [])) for record in records]
    return ModelPage(items=items, total=total)


@router.get("/{model_id}")
def get_model(
    model_id: ModelRef,
    session: SessionDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
) -> ModelOut:
    """The model. Its `importance_kinds` are kept at training; for a model trained before,
    they are asked of the model, which this loads (into the cache: the first prediction or
    importance finds it there)."""
    record = service.get_model(session, resolve(session, refs, model_id).model_id)
    out = model_out(record, service.registered_as(session, [record.id]).get(record.id, []))
    out.importance_kinds = service.importance_kinds(session, cache, store, record)
    return out


@router.delete(
    "/{model_id}",
    status_code=204,
    responses=problem_responses({409: "The model is a registered version."}),
)
def delete_model(
    model_id: ModelRef,
    session: SessionDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    after: BackgroundTasks,
) -> Response:
    """Delete the model, its artifact and importances; its job keeps its history. A model that
    is a registered version is kept until that version is deleted."""
    paths = service.delete_model(session, cache, resolve(session, refs, model_id).model_id)
    # Background tasks run after the response, so after the session's commit: the objects
    # go only once no row names them (a crash in between leaves them to `coppice store gc`).
    after.add_task(delete_objects, store, paths)
    return Response(status_code=204)


@router.get("/{model_id}/curves", responses=problem_responses({404: "Unknown id, or no curves."}))
def get_curves(model_id: ModelRef, session: SessionDep, refs: ReferenceCacheDep) -> CurvesOut:
    """Per-iteration learning curves; a series the method does not have is `[]`."""
    resolved = resolve(session, refs, model_id).model_id
    return CurvesOut.model_validate(service.curves(session, resolved) | {"model_id": resolved})


@router.get("/{model_id}/diagnostics")
def get_diagnostics(
    model_id: ModelRef, session: SessionDep, refs: ReferenceCacheDep
) -> DiagnosticsOut:
    """The points behind the validation metrics, kept at training: ROC curves (classifiers)
    or a sample of residuals (regressors). What a model lacks is null."""
    resolved = resolve(session, refs, model_id).model_id
    return DiagnosticsOut.model_validate(
        service.diagnostics(session, resolved) | {"model_id": resolved}
    )


@router.post(
    "/{model_id}/predict",
    response_model=PredictResponse,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": body_schema(PredictRequest)}},
        }
    },
    responses=problem_responses(
        {409: "The stored artifact is corrupt.", 413: "Too many rows, or too large a body."}
    ),
)
async def predict(model_id: ModelRef, request: Request) -> Response:
    """Predict rows; optionally with class probabilities and per-feature explanations. The
    rows go to the model's prediction log (docs/monitoring.md), each with an id."""
    # The app's resources read here, not as six dependencies: FastAPI resolving a dependency
    # costs more than the attribute it returns, and this route's one-row answer is held to
    # 1.3x a health check (benchmarks/README.md).
    resources = get_resources(request)
    db_engine, settings = resources.db_engine, resources.settings
    cache, store, refs = resources.model_cache, resources.store, resources.references
    log = resources.prediction_log
    raw = await read_limited(
        request, settings.max_request_bytes, setting="COPPICE_MAX_REQUEST_BYTES"
    )

    def work(model: LoadedModel | None = None) -> dict[str, Any]:
        body = _predict_request(raw, settings.max_predict_rows)
        if model is None:
            # No request session: predictions write nothing, and a Session connects on first
            # use, so a cached model is served without touching the database.
            with reading(db_engine) as session:
                resolved = resolve(session, refs, model_id).model_id
                model = service.loaded_model(session, cache, store, resolved)
        # The model's n_jobs were its fit's processes; the server's setting says how many
        # threads a large batch may share here (the same answer to the bit, sooner).
        with prediction_threads(settings.predict_threads):
            return _logged_predict(model, body, log)

    known = peek(refs, model_id)
    if (
        len(raw) <= INLINE_PREDICT_BYTES
        and b"explain" not in raw
        and known is not None
        and known.model_id in cache
    ):
        # A few rows for a model in memory: a fraction of a millisecond of work, less than
        # handing it to a worker thread and back. Loading a model, large bodies and explanations
        # stay off the event loop.
        cached = cache.get(known.model_id)
        if cached is not None:  # unless another request evicted it just now
            return _json(work(cached))
    return _json(await to_thread.run_sync(work))


# The predict route again, matched before every other route and left out of the OpenAPI
# document (the route above documents it). FastAPI's router tries the app's routes in turn,
# twice over for an included router's (54 routes; predict was the 17th), and validates the path
# parameter through pydantic on each call: ~20-40 us of a one-row predict's ~400 us in
# process, where its answer is held to 1.3x a health check (benchmarks/README.md). Nothing
# else can match this path, so taking it first changes no answer.
hot_router = APIRouter(prefix="/v1/models", include_in_schema=False)


@hot_router.post("/{model_id}/predict")
async def predict_first(request: Request) -> Response:
    """:func:`predict`, its ``model_id`` read as FastAPI reads it (the path's text)."""
    return await predict(request.path_params["model_id"], request)


def _logged_predict(
    model: LoadedModel, body: PredictRequest, log: PredictionLog | None
) -> dict[str, Any]:
    """``service.predict``, its rows handed to the prediction log (when it logs) by id."""
    logging = log is not None and log.enabled
    if not logging and body.ids is None:
        return service.predict(model, body)
    ids = row_ids(body.n_rows, body.ids)
    observe = None
    if log is not None and logging:
        observe = partial(log_v1, log, model, body, ids)
    out = service.predict(model, body, observe)
    out["ids"] = ids
    return out


def _json(body: dict[str, Any]) -> Response:
    """The predict answer; its NumPy arrays are written by orjson in C (a Python list of
    20,000 × 2 floats costs more to build than to send)."""
    return Response(
        orjson.dumps(body, default=_listed, option=orjson.OPT_SERIALIZE_NUMPY),
        media_type="application/json",
    )


def _listed(value: Any) -> Any:
    """What orjson does not write itself: a non-contiguous array (a view) as lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


@router.get(
    "/{model_id}/feature-importance",
    responses=problem_responses({409: "The training data needed is gone, or artifact corrupt."}),
)
def get_feature_importance(
    model_id: ModelRef,
    session: SessionDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    kind: str | None = Query(
        default=None,
        description=(
            "impurity, gain, split_count, cover, permutation, oob_permutation or shap; "
            "default: the method's."
        ),
    ),
) -> FeatureImportanceOut:
    """Feature importances of one kind, sorted descending; computed once, then stored."""
    return FeatureImportanceOut.model_validate(
        service.feature_importance(
            session, cache, store, resolve(session, refs, model_id).model_id, kind
        )
    )


def _predict_request(raw: bytes, max_rows: int) -> PredictRequest:
    fast = _tabular_request(raw, max_rows)
    if fast is not None:
        return fast
    document = parse_json(raw, numbers_as_floats=True)
    if isinstance(document, dict):
        # Counted before validating, so an oversized request is refused cheaply.
        for key in ("records", "rows"):
            rows = document.get(key)
            if isinstance(rows, list):
                _refuse_past(len(rows), max_rows)
    body = records_only(document)
    if body is None:
        body = _validated(document)
    if body.rows:
        body.numbers_only = _only_numbers(raw, len(body.rows))
    return body


def _refuse_past(n_rows: int, max_rows: int) -> None:
    if n_rows > max_rows:
        raise PayloadTooLarge(
            f"The request has {n_rows} rows; at most {max_rows} are predicted per "
            "request (COPPICE_MAX_PREDICT_ROWS). Split it into smaller requests."
        )


def _validated(document: Any) -> PredictRequest:
    try:
        return PredictRequest.model_validate(document)
    except ValidationError as error:
        raise RequestValidationError(
            [
                {"type": e["type"], "loc": ("body", *e["loc"]), "msg": e["msg"]}
                for e in error.errors(include_url=False)
            ]
        ) from None


def _tabular_request(raw: bytes, max_rows: int) -> PredictRequest | None:
    """A ``{"columns", "rows"}`` body with its ``rows`` read straight into a float matrix
    (``service.models.json_rows``), the rest of the body parsed and validated as usual with
    a placeholder per row; None when the body is anything else or the reading is not certain
    (``_predict_request`` then parses the whole body, and words any error, as before).

    The rest is the body with the ``rows`` value cut out: it must hold that key once (a second
    ``rows`` key would win in a JSON parser) and no escape after it (a key spelt with escapes)."""
    start = _rows_start(raw)
    if start is None:
        return None
    parsed = parse_rows(raw, start, max_rows + 1)
    if parsed is None:
        return None
    matrix, end = parsed
    if matrix.shape[0] == 0:
        return None
    tail = raw[end:]
    rest = b"".join((raw[:start], b"[]", tail))
    if b"\\" in tail or rest.count(b'"rows"') != 1:
        return None
    try:
        document = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict) or document.get("rows") != []:
        return None
    _refuse_past(matrix.shape[0], max_rows)
    document["rows"] = [None] * matrix.shape[0]
    body = _validated(document)
    if body.columns is None or len(body.columns) != matrix.shape[1]:
        return None  # ragged against the columns: the general path says which row
    body.read_as(matrix)
    return body


_ROWS_KEY = re.compile(rb'"rows"\s*:\s*\[')
_ROWS_END = re.compile(rb"\]\s*\]")
_STRING = re.compile(rb'"[^"]*"')


def _rows_start(raw: bytes) -> int | None:
    """Where the body's own ``rows`` array starts (its ``[``), found by a search: trusted only
    when the bytes before the key hold no backslash (so every quote delimits a string), an
    even number of quotes (the key is not text inside a string) and, strings left out, one
    open ``{`` and no open ``[`` (it is the body's own key). None when in doubt."""
    # A search for the key's bytes first: most bodies have none (records), and the
    # expression's first run after a while costs a one-row predict more.
    key = _ROWS_KEY.search(raw) if b'"rows"' in raw else None
    if key is None:
        return None
    prefix = raw[: key.start()]
    if b"\\" in prefix or prefix.count(b'"') % 2:
        return None
    bare = _STRING.sub(b"", prefix)
    if bare.count(b"{") - bare.count(b"}") != 1 or bare.count(b"[") != bare.count(b"]"):
        return None
    return key.end() - 1


def _only_numbers(raw: bytes, n_rows: int) -> bool:
    """Whether the body's ``rows`` can hold nothing but numbers and nulls, read from its bytes
    (a search for bytes runs at memory speed; a type check per cell of 20,000 × 40 costs as
    much as converting them). No quote means no text, no ``t``/``f`` no booleans, no ``{`` no
    objects, and as many ``]`` as ``[``, one per row and the outer one, no nested lists.

    The ``rows`` key is found by :func:`_rows_start`. When in doubt the answer is False: the
    encoder checks every cell.
    """
    start = _rows_start(raw)
    if start is None:
        return False
    stop = raw.find(b"]]", start) + 2
    if stop < 2:
        found = _ROWS_END.search(raw, start)
        if found is None:
            return False
        stop = found.end()
    rows = raw[start:stop]
    brackets = rows.count(b"[")
    return (
        brackets == n_rows + 1
        and rows.count(b"]") == brackets
        and not any(mark in rows for mark in (b'"', b"t", b"f", b"{"))
    )


def model_out(record: ModelRecord, registered: list[tuple[str, int]] | None = None) -> ModelOut:
    metrics = record.metrics or {}
    return ModelOut(
        id=record.id,
        name=record.name,
        job_id=record.job_id,
        dataset_id=record.dataset_id or None,
        method=record.method,
        task=Task(record.task),
        target=record.target,
        features=[FeatureOut(name=f["name"], kind=f["kind"]) for f in record.features],
        classes=None if record.classes is None else [str(c) for c in record.classes],
        params=dict(record.params),
        metrics=MetricsOut(
            train=metrics.get("train"),
            validation=metrics.get("validation"),
            oob=metrics.get("oob"),
            cv=metrics.get("cv"),
        ),
        n_estimators=record.n_estimators,
        size_bytes=record.size_bytes,
        created_at=record.created_at,
        registered=[RegisteredAs(name=name, version=version) for name, version in registered or ()],
        importance_kinds=metrics.get("importance_kinds"),
    )
