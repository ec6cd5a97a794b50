"""HTTP routes of the Open Inference Protocol (KServe v2); health first, models later."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from service.deps import DbEngineDep
from service.inference.schemas import LiveResponse, ReadyResponse

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v2", tags=["inference"])


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
    try:
        with db_engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        # No URL in the message: it may carry a password.
        logger.warning("readiness check failed: database unreachable", exc_info=True)
        response.status_code = 503
        return ReadyResponse(ready=False)
    return ReadyResponse(ready=True)
