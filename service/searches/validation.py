"""Checking a search's candidates before anything runs: 422s that name method and parameter.

Every value a space can produce is checked against the method's schema (a list's every item,
a range's two ends), then every planned configuration as a whole, so a search never queues a
job that its worker would refuse.
"""

from __future__ import annotations

from typing import Any

from service.config import Settings
from service.errors import InvalidInput
from service.methods import service as methods
from service.methods.catalog import Method, Task
from service.searches import spaces
from service.searches.schemas import CandidateSpace, Strategy

CLASSIFICATION_METRICS = {"roc_auc": "maximize", "accuracy": "maximize", "f1_macro": "maximize"}
CLASSIFICATION_METRICS["log_loss"] = "minimize"
REGRESSION_METRICS = {"rmse": "minimize", "mae": "minimize", "r2": "maximize"}
# A grid past this many points, without max_models to cut it, is refused before it is
# enumerated (a search trains at most schemas.MAX_MODELS anyway).
MAX_GRID_POINTS = 10_000


def metric_and_direction(metric: str | None, task: Task) -> tuple[str, str]:
    known = CLASSIFICATION_METRICS if task == Task.CLASSIFICATION else REGRESSION_METRICS
    chosen = metric or ("roc_auc" if task == Task.CLASSIFICATION else "rmse")
    if chosen not in known:
        raise InvalidInput(
            f"'{chosen}' is not a {task.value} metric; use one of {', '.join(known)}.",
            errors=[{"loc": ["body", "metric"], "msg": f"unknown {task.value} metric"}],
        )
    return chosen, known[chosen]


def direction_of(metric: str) -> str:
    return {**CLASSIFICATION_METRICS, **REGRESSION_METRICS}.get(metric, "maximize")


def checked_entries(
    candidates: list[CandidateSpace],
    task: Task,
    strategy: Strategy,
    settings: Settings,
    *,
    max_models: int | None = None,
    where: str = "candidates",
) -> list[tuple[str, spaces.Space]]:
    """``(method, space)`` per candidate entry, every value checked; 422 on the first problem.

    ``max_models``: the budget that cuts a grid (then a grid may have any number of points).
    """
    entries = []
    for index, candidate in enumerate(candidates):
        loc: list[str | int] = ["body", where, index]
        method = _method(candidate.method, task, loc)
        try:
            space = spaces.parse(candidate.params)
        except spaces.SpaceError as error:
            raise _invalid(method.name, error.name, error.message, [*loc, "params"]) from None
        for name, dimension in space.items():
            for value in spaces.extremes(dimension):
                check_config(method, task, {name: value}, settings, [*loc, "params"])
        if strategy == Strategy.GRID:
            _check_grid(method.name, space, loc, bounded=max_models is not None)
        entries.append((method.name, space))
    return entries


def check_config(
    method: Method,
    task: Task,
    params: dict[str, Any],
    settings: Settings,
    loc: list[str | int],
) -> dict[str, Any]:
    """The resolved params of one configuration; 422 naming the method and each parameter."""
    try:
        return methods.check_params(method, task, params, settings)
    except InvalidInput as error:
        problems = error.errors or []
        names = [str(e["loc"][-1]) for e in problems] or list(params)
        raise InvalidInput(
            f"Method '{method.name}', parameter {', '.join(repr(n) for n in names)}: "
            f"{error.detail}",
            errors=[
                {"loc": [*loc, *_within_params(e["loc"])], "msg": f"{method.name}: {e['msg']}"}
                for e in problems
            ],
        ) from None


def _within_params(loc: list[str | int]) -> list[str | int]:
    """A jobs-style location (``body.params.max_depth``) from ``params`` on."""
    rest = loc[1:] if loc[:1] == ["body"] else loc
    return rest[1:] if rest[:1] == ["params"] else rest


def _method(name: str, task: Task, loc: list[str | int]) -> Method:
    try:
        method = methods.get_method_or_422(name)
        methods.check_task(method, task)
    except InvalidInput as error:
        msg = error.errors[0]["msg"] if error.errors else "not usable here"
        raise InvalidInput(error.detail, errors=[{"loc": [*loc, "method"], "msg": msg}]) from None
    return method


def _check_grid(method: str, space: spaces.Space, loc: list[str | int], *, bounded: bool) -> None:
    ranged = [name for name, d in space.items() if isinstance(d, spaces.Range)]
    if ranged:
        raise _invalid(
            method,
            ranged[0],
            f"'{ranged[0]}' is a range, and a grid needs lists; give a list of values, or "
            "use strategy 'random' or 'halving'.",
            [*loc, "params"],
        )
    size = spaces.grid_size(space) or 0
    if size > MAX_GRID_POINTS and not bounded:
        raise InvalidInput(
            f"Method '{method}': the grid has {size} points, more than {MAX_GRID_POINTS}; "
            "shorten the lists, or set budget.max_models.",
            errors=[{"loc": [*loc, "params"], "msg": "grid too large"}],
        )


def _invalid(method: str, name: str, message: str, loc: list[str | int]) -> InvalidInput:
    return InvalidInput(
        f"Method '{method}', parameter '{name}': {message}",
        errors=[{"loc": [*loc, name], "msg": f"{method}: {message}"}],
    )
