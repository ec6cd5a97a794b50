"""A page of a listing (``GET /v1/datasets``, ``/v1/jobs``, ...): the items, and how many
the server holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Page(list[T], Generic[T]):
    """One page of a listing; ``total`` counts every item on the server."""

    def __init__(self, items: list[T], total: int) -> None:
        super().__init__(items)
        self.total = total

    @classmethod
    def of(cls, answer: dict[str, Any], item: Callable[[dict[str, Any]], T]) -> Page[T]:
        """The page a listing's answer (``{"items", "total"}``) holds, each item made by
        ``item``."""
        return cls([item(info) for info in answer["items"]], int(answer["total"]))
