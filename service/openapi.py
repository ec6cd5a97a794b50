"""Request-body schemas for routes that read their body themselves.

The predict and infer routes parse their bodies with orjson (see :mod:`service.bodies`), so
FastAPI never sees their Pydantic models and the routes document the body through
``openapi_extra``. A model's own ``model_json_schema()`` keeps its nested models under a local
``$defs`` and points at them with ``#/$defs/...``, a reference that resolves against the root
of ``/openapi.json``, where no ``$defs`` exists: ReDoc stopped on the first such reference and
code generators fail on it. :func:`body_schema` points the references at
``#/components/schemas`` instead, and :func:`install_body_schemas` puts the nested models there.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

__all__ = ["body_schema", "install_body_schemas"]

_REF_TEMPLATE = "#/components/schemas/{model}"
# Nested models of every body_schema, by name; added to the document's components.
_NESTED: dict[str, dict[str, Any]] = {}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema for ``openapi_extra``, its nested models under components."""
    schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
    for name, definition in schema.pop("$defs", {}).items():
        _NESTED.setdefault(name, definition)
    return schema


def install_body_schemas(app: FastAPI) -> None:
    """Make ``app.openapi()`` include the nested models of every :func:`body_schema`."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()  # FastAPI keeps it as app.openapi_schema: later calls reuse it
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for name, definition in _NESTED.items():
            components.setdefault(name, definition)
        return document

    app.openapi = openapi  # type: ignore[method-assign]
