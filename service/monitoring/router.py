"""HTTP routes of monitoring: ``/v1/models/{ref}/feedback`` and ``/v1/models/{ref}/monitoring``."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Query, Request

from service.db.types import utc_now
from service.deps import ReferenceCacheDep, SessionDep
from service.errors import problem_responses
from service.models.router import ModelRef
from service.monitoring import service
from service.monitoring.log import PredictionLog
from service.monitoring.schemas import FeedbackOut, FeedbackRequest, MonitoringReport
from service.registry.resolve import resolve

router = APIRouter(prefix="/v1/models", tags=["monitoring"], responses=problem_responses())


def _log(request: Request) -> PredictionLog | None:
    resources = getattr(request.app.state, "resources", None)
    return getattr(resources, "prediction_log", None)


@router.post("/{model_id}/feedback", status_code=202)
def post_feedback(
    model_id: ModelRef,
    body: FeedbackRequest,
    request: Request,
    session: SessionDep,
    refs: ReferenceCacheDep,
) -> FeedbackOut:
    """Join actuals to logged predictions by row id; ids the log lacks are counted back."""
    resolved = resolve(session, refs, model_id).model_id
    return FeedbackOut.model_validate(
        service.feedback(session, _log(request), resolved, body.ids, body.actuals)
    )


@router.get("/{model_id}/monitoring")
def get_monitoring(
    model_id: ModelRef,
    request: Request,
    session: SessionDep,
    refs: ReferenceCacheDep,
    since: datetime | None = Query(default=None, description="Window start (ISO 8601)."),
    until: datetime | None = Query(default=None, description="Window end; default now."),
) -> MonitoringReport:
    """Drift of the window's logged rows against the training rows, and performance on the
    labelled ones (default window: the last 24 hours)."""
    start, end = service.window(since, until, utc_now())
    resolved = resolve(session, refs, model_id).model_id
    return MonitoringReport.model_validate(
        service.report(session, _log(request), resolved, start, end)
    )
