"""``GET /v1/models/{ref}/export``: the model as ONNX, or as a Triton model repository."""

from __future__ import annotations

from enum import StrEnum

from fastapi import APIRouter, Query, Response

from service.deps import ModelCacheDep, ReferenceCacheDep, SessionDep, StoreDep
from service.errors import problem_responses
from service.export.families import to_onnx
from service.export.triton import repository_name, repository_zip
from service.models import service
from service.models.router import ModelRef
from service.registry.resolve import resolve

router = APIRouter(prefix="/v1/models", tags=["models"], responses=problem_responses())


class ExportFormat(StrEnum):
    ONNX = "onnx"
    TRITON = "triton"


@router.get(
    "/{model_id}/export",
    response_class=Response,
    responses={
        200: {
            "description": "The ONNX file, or the zipped Triton model repository.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "application/zip": {"schema": {"type": "string", "format": "binary"}},
            },
        },
        **problem_responses(
            {
                409: "The stored artifact is corrupt.",
                422: "The model's method does not export; the methods that do are listed.",
            }
        ),
    },
)
def export_model(
    model_id: ModelRef,
    session: SessionDep,
    cache: ModelCacheDep,
    store: StoreDep,
    refs: ReferenceCacheDep,
    format: ExportFormat = Query(
        default=ExportFormat.ONNX,
        description="`onnx`: the model file; `triton`: a zip of `<name>/config.pbtxt` and "
        "`<name>/1/model.onnx` for Triton's onnxruntime backend.",
    ),
) -> Response:
    """The model for serving outside Coppice, with the same answers as `/v1` predict. One
    graph input per feature, named as the feature, shape `[N, 1]` (`double`, or `string` for
    categorical features); outputs `label` and `probabilities` (classifiers) or `prediction`
    (regressors)."""
    resolved = resolve(session, refs, model_id).model_id
    model = service.loaded_model(session, cache, store, resolved)
    exported = to_onnx(model)
    headers = {"X-Model-Id": resolved}
    if format == ExportFormat.TRITON:
        name = repository_name(resolved)
        headers["Content-Disposition"] = f'attachment; filename="{name}.zip"'
        return Response(
            repository_zip(resolved, exported), media_type="application/zip", headers=headers
        )
    headers["Content-Disposition"] = f'attachment; filename="{repository_name(resolved)}.onnx"'
    return Response(
        exported.SerializeToString(), media_type="application/octet-stream", headers=headers
    )
