"""``register_as``: the best model becomes the next version of a registered name, alias
``candidate`` (promotion to production stays a person's decision).

The registry (``service.registry``) is called in the same transaction that ends the search.
Where this build has no registry, the request is still checked and the search reports the
registration as ``pending`` with the reason, never silently dropped.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.errors import CoppiceError, InvalidInput

ALIAS = "candidate"
# The registry's own rule when it is present; this one otherwise (the same shape).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _registry() -> tuple[Any, Any] | None:
    """The registry's ``register_model_version`` and ``name_problem``, if this build has them."""
    try:
        service = importlib.import_module("service.registry.service")
        references = importlib.import_module("service.registry.references")
    except ImportError:
        return None
    register = getattr(service, "register_model_version", None)
    problem = getattr(references, "name_problem", None)
    return None if register is None or problem is None else (register, problem)


def check_name(name: str) -> None:
    """422 unless ``name`` can be a registered name."""
    registry = _registry()
    problem = registry[1](name) if registry else (None if _NAME.fullmatch(name) else "is invalid")
    if problem:
        raise InvalidInput(
            f"'register_as' {problem}.",
            errors=[{"loc": ["body", "register_as"], "msg": str(problem)}],
        )


def register(session: Session, name: str, model_id: str) -> dict[str, Any]:
    """Register ``model_id`` under ``name`` with alias ``candidate``; the registration's state.

    A registry error is reported in the search, not raised (its savepoint rolled back): the
    search's models are worth keeping either way, and a raise would leave the search unended.
    """
    registry = _registry()
    if registry is None:
        return {
            "status": "pending",
            "name": name,
            "model_id": model_id,
            "detail": "this server has no model registry yet; register the best model by hand",
        }
    try:
        with session.begin_nested():
            version = registry[0](session, name, model_id, alias=ALIAS)
    except CoppiceError as error:
        return {"status": "failed", "name": name, "model_id": model_id, "detail": error.detail}
    except SQLAlchemyError as error:  # a constraint the registry did not foresee
        detail = f"the registry refused it ({type(error).__name__})"
        return {"status": "failed", "name": name, "model_id": model_id, "detail": detail}
    return {
        "status": "registered",
        "name": name,
        "version": int(getattr(version, "version", 0)) or None,
        "model_id": model_id,
        "detail": f"version {getattr(version, 'version', '?')} with alias '{ALIAS}'",
    }
