"""Whether the database answers: the readiness checks' one query."""

from __future__ import annotations

import logging

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

logger = logging.getLogger(__name__)


def database_ready(engine: Engine) -> bool:
    """True when ``engine``'s database answers ``SELECT 1``; False (logged) when it does not."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError:
        # No URL in the message: it may carry a password.
        logger.warning("readiness check failed: database unreachable", exc_info=True)
        return False
    return True
