"""HTTP route of ``/v1/methods``: the catalog of trainable methods."""

from __future__ import annotations

from fastapi import APIRouter

from service.errors import problem_responses
from service.methods import service
from service.methods.schemas import MethodList

router = APIRouter(prefix="/v1/methods", tags=["methods"], responses=problem_responses())


@router.get("")
def list_methods() -> MethodList:
    """Every trainable method, the tasks it supports and the JSON Schema of its params."""
    return MethodList(items=service.list_methods())
