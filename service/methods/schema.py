"""The JSON Schema of a method's ``params``, generated from the engine's constraint tables.

Classifier and regressor parameters are merged into one schema per method. A parameter only
one task has carries ``"x-tasks": [...]`` and says so in its description; one whose default
differs by task has no ``default`` and names both in its description. Nested learners refer to
``#/$defs/learner``: ``{"method": "...", "params": {...}}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine._params import json_schema_for
from service.methods.catalog import CATALOG, Method, Task
from service.methods.params import accepted_params, is_learner_param

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def params_schema(method: Method) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the ``params`` object of ``method``."""
    per_task = {task: method.estimator_class(task) for task in method.tasks}
    names: list[str] = []
    for cls in per_task.values():
        names += [name for name in accepted_params(cls, method) if name not in names]
    properties: dict[str, Any] = {}
    uses_learner = False
    for name in sorted(names):
        if name in method.learner_lists:
            properties[name] = _learner_list_property(method, name)
        else:
            properties[name] = _property(method, name, per_task)
        uses_learner = uses_learner or "learner" in json.dumps(properties[name])
    schema: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if uses_learner:
        schema["$defs"] = {"learner": learner_schema(), "named_learner": named_learner_schema()}
    return schema


def learner_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A nested learner: a method of this catalog and its params.",
        "properties": {
            "method": {"type": "string", "enum": list(CATALOG)},
            "params": {"type": "object", "default": {}},
        },
        "required": ["method"],
        "additionalProperties": False,
    }


def named_learner_schema() -> dict[str, Any]:
    learner = learner_schema()
    return {
        **learner,
        "description": "A member of a combiner: a unique name, a method and its params.",
        "properties": {"name": {"type": "string"}, **learner["properties"]},
        "required": ["name", "method"],
    }


def _learner_list_property(method: Method, name: str) -> dict[str, Any]:
    defaults = "; ".join(
        f"{json.dumps(members)} ({task.value})"
        for task, members in method.default_learners.get(name, {}).items()
    )
    return {
        "anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/named_learner"}},
            {"type": "null"},
        ],
        "default": None,
        "description": f"The learners to combine, each with a unique name. null means {defaults}.",
    }


def _property(method: Method, name: str, per_task: dict[Task, type[Any]]) -> dict[str, Any]:
    having = {task: cls for task, cls in per_task.items() if name in cls.parameter_defaults()}
    schemas = []
    for cls in having.values():
        constraints = cls._parameter_constraints.get(name, [])
        default = cls.parameter_defaults()[name]
        schema = json_schema_for(constraints, default) if constraints else {"default": default}
        schemas.append(schema)
    defaults = [s.get("default") for s in schemas]
    shapes = [{k: v for k, v in s.items() if k != "default"} for s in schemas]
    merged = shapes[0] if all(s == shapes[0] for s in shapes) else _union(shapes)
    notes: list[str] = []
    doc = _doc_of(next(iter(having.values())), name)
    if doc:
        notes.append(doc)
    if all(d == defaults[0] for d in defaults) and all("default" in s for s in schemas):
        merged = {**merged, "default": defaults[0]}
    else:
        notes.append(
            "Default: "
            + ", ".join(
                f"{json.dumps(default)} ({task.value})"
                for task, default in zip(having, defaults, strict=True)
            )
            + "."
        )
    if len(having) < len(per_task):
        only = [task.value for task in having]
        merged = {**merged, "x-tasks": only}
        notes.append(f"{' and '.join(only).capitalize()} only.")
    constraints = next(iter(having.values()))._parameter_constraints.get(name, [])
    if is_learner_param(constraints):
        for task in having:
            learner = method.default_learners.get(name, {}).get(task)
            if learner is not None:
                notes.append(f"null means {json.dumps(learner)} ({task.value}).")
    if notes:
        merged = {**merged, "description": " ".join(notes)}
    return merged


def _union(shapes: list[dict[str, Any]]) -> dict[str, Any]:
    enums = [s.get("enum") for s in shapes]
    if all(s.get("type") == "string" and e is not None for s, e in zip(shapes, enums, strict=True)):
        values: list[Any] = []
        for enum in enums:
            assert enum is not None
            values += [v for v in enum if v not in values]
        return {"type": "string", "enum": values}
    options: list[dict[str, Any]] = []
    for shape in shapes:
        for option in shape.get("anyOf", [shape]):
            if option not in options:
                options.append(option)
    return options[0] if len(options) == 1 else {"anyOf": options}


_PARAM_LINE = re.compile(r"^ {4}([A-Za-z_][\w, ]*?)\s*:")


def _doc_of(cls: type[Any], name: str) -> str:
    """The description of ``name`` in the class's NumPy-style 'Parameters' section, if any."""
    doc = cls.__doc__ or ""
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Parameters")
    except StopIteration:
        return ""
    collected: list[str] = []
    capturing = False
    for line in lines[start + 2 :]:
        if line.strip() and not line.startswith(" " * 4):
            break
        if line.strip() in ("Attributes", "Returns", "Notes", "See Also", "References"):
            break
        match = _PARAM_LINE.match(line)
        if match and not line.startswith(" " * 5):
            names = [part.strip() for part in match.group(1).split(",")]
            capturing = name in names
            continue
        if capturing and line.strip():
            collected.append(line.strip())
    return " ".join(collected)
