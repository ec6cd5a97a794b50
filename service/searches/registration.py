"""``register_as``: the best model becomes the next version of a registered name, alias
``candidate`` (promotion to production stays a person's decision).

The registry (``service.registry``) is called in the same transaction that ends the search.
Until then the search's registration is ``pending``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.errors import InvalidInput, ServiceError
from service.registry.references import name_problem
from service.registry.service import register_model_version

ALIAS = "candidate"


def check_name(name: str) -> None:
    """422 unless ``name`` can be a registered name (checked when the search is created)."""
    problem = name_problem(name)
    if problem:
        raise InvalidInput(
            f"'register_as' {problem}.",
            errors=[{"loc": ["body", "register_as"], "msg": problem}],
        )


def register(session: Session, name: str, model_id: str) -> dict[str, Any]:
    """Register ``model_id`` under ``name`` with alias ``candidate``; the registration's state.

    A registry error is reported in the search, not raised (its savepoint rolled back): the
    search's models are worth keeping either way, and a raise would leave the search unended.
    """
    try:
        with session.begin_nested():
            version = register_model_version(session, name, model_id, alias=ALIAS)
    except ServiceError as error:
        return {"status": "failed", "name": name, "model_id": model_id, "detail": error.detail}
    except SQLAlchemyError as error:  # a constraint the registry did not foresee
        detail = f"the registry refused it ({type(error).__name__})"
        return {"status": "failed", "name": name, "model_id": model_id, "detail": detail}
    return {
        "status": "registered",
        "name": name,
        "version": version.version,
        "model_id": model_id,
        "detail": f"version {version.version} with alias '{ALIAS}'",
    }
