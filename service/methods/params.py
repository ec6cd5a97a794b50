"""Checking a job's ``params`` against a method, resolving defaults, building the estimator.

``resolve_params`` is the up-front check ``POST /v1/jobs`` runs; it collects every problem
(unknown names, values out of bounds, nested learners, the service's caps) with the dotted
name of the offending parameter (``params.estimator.params.max_depth``) and returns the
parameters with every default filled in and every nested learner expanded to
``{"method", "params"}``. ``build_estimator`` turns resolved parameters into an unfitted
engine estimator, adding what the service controls (seed, processes, categorical features).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import engine
from engine._params import (
    CallableValue,
    Constraint,
    EstimatorValue,
    InvalidParameterError,
)
from service.methods.catalog import CATALOG, SERVICE_CONTROLLED, Method, Task

# A learner inside a learner inside a learner is as deep as anyone needs.
MAX_NESTING = 3
LEARNER_KEYS = frozenset({"method", "params"})


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps the service puts on parameters (``COPPICE_MAX_*``); None means no cap."""

    max_estimators: int | None = None
    max_depth: int | None = None


@dataclass(frozen=True, slots=True)
class ParamError:
    """One problem: the dotted path of the parameter (``params.max_depth``) and a sentence."""

    path: str
    message: str


class ParamsInvalid(ValueError):
    """A job's ``params`` cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[ParamError]) -> None:
        self.errors = list(errors)
        super().__init__(" ".join(error.message for error in self.errors))


def accepted_params(cls: type[Any], method: Method | None = None) -> list[str]:
    """The parameters of ``cls`` a job may set: all but those the service controls or fixes.

    Required constructor arguments (a combiner's ``estimators``) are included.
    """
    fixed = method.fixed_params if method is not None else {}
    return [
        name
        for name in cls._get_param_names()
        if name not in SERVICE_CONTROLLED and name not in fixed
    ]


def is_learner_param(constraints: Sequence[Constraint]) -> bool:
    return any(isinstance(c, EstimatorValue) for c in constraints)


def resolve_params(
    method_name: str,
    task: Task,
    params: Mapping[str, Any],
    limits: Limits = Limits(),
    *,
    path: str = "params",
) -> dict[str, Any]:
    """The job's parameters with defaults filled in; raises ``ParamsInvalid`` listing problems.

    The method must exist and support ``task`` (the caller checks that first).
    """
    errors: list[ParamError] = []
    resolved = _resolve(CATALOG[method_name], task, params, limits, path, 0, errors)
    if errors:
        raise ParamsInvalid(errors)
    return resolved


def _resolve(
    method: Method,
    task: Task,
    params: Mapping[str, Any],
    limits: Limits,
    path: str,
    depth: int,
    errors: list[ParamError],
) -> dict[str, Any]:
    cls = method.estimator_class(task)
    defaults = cls.parameter_defaults()  # required arguments have none: None stands for them
    accepted = accepted_params(cls, method)
    constraints: Mapping[str, list[Constraint]] = cls._parameter_constraints
    n_errors = len(errors)
    for name in params:
        if name in SERVICE_CONTROLLED:
            errors.append(
                ParamError(
                    f"{path}.{name}", f"'{path}.{name}' {SERVICE_CONTROLLED[name]}; leave it out."
                )
            )
        elif name in method.fixed_params:
            errors.append(
                ParamError(
                    f"{path}.{name}",
                    f"'{path}.{name}' is fixed to {method.fixed_params[name]!r} by the service; "
                    "leave it out.",
                )
            )
        elif name not in accepted:
            known = ", ".join(accepted)
            errors.append(
                ParamError(
                    f"{path}.{name}",
                    f"'{path}.{name}' is not a parameter of {method.name} for {task.value}; "
                    f"it takes: {known}.",
                )
            )
    resolved: dict[str, Any] = {}
    for name in accepted:
        allowed = constraints.get(name, [])
        value = params.get(name, defaults.get(name))
        if name in method.learner_lists:
            resolved[name] = _resolve_learner_list(
                method, task, name, value, limits, f"{path}.{name}", depth, errors
            )
            continue
        if is_learner_param(allowed):
            resolved[name] = _resolve_learner(
                method, task, name, value, limits, f"{path}.{name}", depth, errors
            )
            continue
        resolved[name] = value
        if name in params and allowed and not any(c.is_satisfied_by(value) for c in allowed):
            errors.append(
                ParamError(f"{path}.{name}", _bounds_message(f"{path}.{name}", value, allowed))
            )
            continue
        _check_cap(name, value, limits, f"{path}.{name}", errors)
    if len(errors) == n_errors:
        _check_combinations(resolved, path, errors)
    if len(errors) == n_errors:
        # The engine's own check covers anything the per-parameter pass above cannot see.
        try:
            build_estimator(method.name, task, resolved)._validate_params()
        except InvalidParameterError as error:
            errors.append(
                ParamError(f"{path}.{error.parameter}", f"'{path}.{error.parameter}': {error}")
            )
    return resolved


def _resolve_learner(
    method: Method,
    task: Task,
    name: str,
    value: Any,
    limits: Limits,
    path: str,
    depth: int,
    errors: list[ParamError],
) -> Any:
    if value is None:
        default = method.default_learners.get(name, {}).get(task)
        if default is None:
            return None
        value = default
    if not isinstance(value, Mapping) or not isinstance(value.get("method"), str):
        errors.append(
            ParamError(
                path,
                f'\'{path}\' must be a learner, {{"method": "decision_tree", "params": {{...}}}}, '
                f"or null; got {value!r}.",
            )
        )
        return value
    extra = sorted(set(value) - LEARNER_KEYS)
    if extra:
        errors.append(
            ParamError(
                path,
                f"'{path}' takes only 'method' and 'params'; remove "
                + ", ".join(f"'{key}'" for key in extra)
                + ".",
            )
        )
    inner = CATALOG.get(value["method"])
    if inner is None or task not in inner.tasks:
        supported = ", ".join(m.name for m in CATALOG.values() if task in m.tasks)
        errors.append(
            ParamError(
                f"{path}.method",
                f"'{path}.method' must be a method for {task.value} ({supported}); "
                f"got {value['method']!r}.",
            )
        )
        return dict(value)
    if depth + 1 >= MAX_NESTING:
        errors.append(
            ParamError(path, f"'{path}' nests learners more than {MAX_NESTING} levels deep.")
        )
        return dict(value)
    inner_params = value.get("params", {})
    if inner_params is None:
        inner_params = {}
    if not isinstance(inner_params, Mapping):
        errors.append(ParamError(f"{path}.params", f"'{path}.params' must be an object."))
        return dict(value)
    resolved = _resolve(inner, task, inner_params, limits, f"{path}.params", depth + 1, errors)
    return {"method": inner.name, "params": resolved}


def _resolve_learner_list(
    method: Method,
    task: Task,
    name: str,
    value: Any,
    limits: Limits,
    path: str,
    depth: int,
    errors: list[ParamError],
) -> Any:
    """A list of named learners, each ``{"name", "method", "params"}``, resolved in turn."""
    if value is None:
        value = method.default_learners.get(name, {}).get(task)
    if not isinstance(value, list) or not value:
        errors.append(
            ParamError(
                path,
                f"'{path}' must be a non-empty list of named learners, "
                '[{"name": "forest", "method": "random_forest", "params": {...}}, ...], '
                f"or null; got {value!r}.",
            )
        )
        return value
    resolved: list[Any] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        item_path = f"{path}[{index}]"
        member_name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(member_name, str) or not member_name or "__" in member_name:
            errors.append(
                ParamError(
                    f"{item_path}.name",
                    f"'{item_path}.name' must be a non-empty string without '__'; "
                    f"got {member_name!r}.",
                )
            )
            continue
        if member_name in seen:
            errors.append(
                ParamError(f"{item_path}.name", f"'{item_path}.name' repeats {member_name!r}.")
            )
        seen.add(member_name)
        learner = {key: item[key] for key in item if key != "name"}
        inner = _resolve_learner(method, task, name, learner, limits, item_path, depth, errors)
        resolved.append({"name": member_name, **inner})
    return resolved


def _bounds_message(path: str, value: Any, allowed: Sequence[Constraint]) -> str:
    described = " or ".join(c.describe() for c in allowed if not isinstance(c, CallableValue))
    return f"'{path}' must be {described}; got {value!r}."


def _check_cap(name: str, value: Any, limits: Limits, path: str, errors: list[ParamError]) -> None:
    caps = {
        "n_estimators": (limits.max_estimators, "COPPICE_MAX_ESTIMATORS"),
        "max_depth": (limits.max_depth, "COPPICE_MAX_DEPTH"),
    }
    if name not in caps or not isinstance(value, int) or isinstance(value, bool):
        return
    cap, setting = caps[name]
    if cap is not None and value > cap:
        errors.append(
            ParamError(path, f"'{path}' is {value}; this server allows at most {cap} ({setting}).")
        )


def _check_combinations(resolved: Mapping[str, Any], path: str, errors: list[ParamError]) -> None:
    """Combinations the engine refuses only once ``fit`` starts; refused here, up front."""
    wants_oob = resolved.get("oob_score") is True or resolved.get("early_stopping") == "oob"
    whole_sample = resolved.get("max_samples") in (None, 1.0)
    if wants_oob and resolved.get("bootstrap") is False and whole_sample:
        name = "oob_score" if resolved.get("oob_score") is True else "early_stopping"
        errors.append(
            ParamError(
                f"{path}.{name}",
                f"'{path}.{name}' needs out-of-bag rows: set '{path}.bootstrap' to true or "
                f"'{path}.max_samples' below 1.",
            )
        )


def build_estimator(
    method_name: str,
    task: Task,
    resolved: Mapping[str, Any],
    *,
    random_state: int | None = None,
    n_jobs: int | None = None,
    categorical_features: Sequence[int] | None = None,
) -> Any:
    """An unfitted estimator from resolved parameters.

    ``random_state`` and ``n_jobs`` go to the top-level estimator (ensembles derive their
    members' seeds; members run inside the ensemble's processes). A combiner's members are
    not seeded by the combiner, so each named member gets a seed derived from it, and a job
    stays reproducible. ``categorical_features`` goes to every learner that sees the dataset's
    columns: not to one inside a dense-input method (it sees the encoded matrix) nor to one
    that learns from derived features (stacking's final estimator).
    """
    method = CATALOG[method_name]
    cls = method.estimator_class(task)
    accepted = cls.parameter_defaults()
    inner_categoricals = None if method.dense_input else categorical_features
    kwargs: dict[str, Any] = dict(method.fixed_params)
    for name, value in resolved.items():
        seen_columns = None if name in method.derived_input_learners else inner_categoricals
        if name in method.learner_lists and isinstance(value, list):
            value = [
                (
                    member["name"],
                    build_estimator(
                        member["method"],
                        task,
                        member.get("params", {}),
                        random_state=None if random_state is None else random_state + index + 1,
                        categorical_features=seen_columns,
                    ),
                )
                for index, member in enumerate(value)
            ]
        elif isinstance(value, Mapping) and "method" in value:
            value = build_estimator(
                value["method"],
                task,
                value.get("params", {}),
                categorical_features=seen_columns,
            )
        kwargs[name] = value
    if categorical_features and "categorical_features" in accepted:
        kwargs["categorical_features"] = list(categorical_features)
    if "random_state" in accepted and random_state is not None:
        kwargs["random_state"] = random_state
    if "n_jobs" in accepted and n_jobs is not None:
        kwargs["n_jobs"] = n_jobs
    if not method.dense_input:
        return cls(**kwargs)
    encoded = engine.EncodedClassifier if task == Task.CLASSIFICATION else engine.EncodedRegressor
    return encoded(cls(**kwargs), categorical_features=list(categorical_features or []) or None)
