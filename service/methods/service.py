"""Method rules for the HTTP layer: the listing, and checking a job's method, task and params.

The pure parts live in ``catalog``, ``schema`` and ``params``; this module turns their
findings into the service's errors (422 with the offending names).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from service.config import Settings
from service.errors import FieldError, InvalidInput
from service.methods.catalog import CATALOG, Method, Task
from service.methods.params import Limits, ParamsInvalid, accepted_params, resolve_params
from service.methods.schema import params_schema
from service.methods.schemas import MethodOut


@cache
def list_methods() -> list[MethodOut]:
    """Every method; computed once, since the catalog is fixed for the process's life."""
    return [
        MethodOut(
            name=method.name,
            tasks=list(method.tasks),
            params_schema=params_schema(method),
            description=_description(method),
        )
        for method in CATALOG.values()
    ]


def limits_from(settings: Settings) -> Limits:
    return Limits(max_estimators=settings.max_estimators, max_depth=settings.max_depth)


def get_method_or_422(name: str) -> Method:
    method = CATALOG.get(name)
    if method is None:
        known = ", ".join(CATALOG)
        raise InvalidInput(
            f"There is no method '{name}'; the methods are: {known} (GET /v1/methods).",
            errors=[{"loc": ["body", "method"], "msg": f"unknown method '{name}'"}],
        )
    return method


def check_task(method: Method, task: Task) -> None:
    if task not in method.tasks:
        supported = " and ".join(t.value for t in method.tasks)
        raise InvalidInput(
            f"Method '{method.name}' does not do {task.value}; it does {supported}.",
            errors=[{"loc": ["body", "task"], "msg": f"{method.name} does not do {task.value}"}],
        )


def check_params(
    method: Method, task: Task, params: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    """The resolved params; 422 naming every unknown or invalid parameter."""
    try:
        return resolve_params(method.name, task, params, limits_from(settings))
    except ParamsInvalid as error:
        errors: list[FieldError] = [
            {"loc": ["body", *problem.path.split(".")], "msg": problem.message}
            for problem in error.errors
        ]
        detail = (
            error.errors[0].message
            if len(error.errors) == 1
            else f"{len(error.errors)} parameters are invalid: "
            + " ".join(problem.message for problem in error.errors)
        )
        raise InvalidInput(detail, errors=errors) from None


def _description(method: Method) -> str:
    if len(method.tasks) == 1:
        return f"{method.description} {method.tasks[0].value.capitalize()} only."
    only: dict[Task, list[str]] = {task: [] for task in method.tasks}
    names = {task: set(accepted_params(method.estimator_class(task))) for task in method.tasks}
    for task in method.tasks:
        others = set().union(*(names[t] for t in method.tasks if t != task))
        only[task] = sorted(names[task] - others)
    notes = [
        f"{task.value.capitalize()} only: {', '.join(params)}."
        for task, params in only.items()
        if params
    ]
    return " ".join([method.description, *notes])
