"""An uploaded dataset, and pages of listed resources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from coppice.client import Client

T = TypeVar("T")


class Page(list[T], Generic[T]):
    """One page of a listing; ``total`` counts every item on the server."""

    def __init__(self, items: list[T], total: int) -> None:
        super().__init__(items)
        self.total = total


class Dataset:
    """A dataset as the server describes it; datasets are immutable."""

    def __init__(self, client: Client, info: dict[str, Any]) -> None:
        self._client = client
        self.info = info

    def __repr__(self) -> str:
        return f"<Dataset {self.id} {self.name!r} {self.n_rows}x{self.n_columns}>"

    @property
    def id(self) -> str:
        return str(self.info["id"])

    @property
    def name(self) -> str:
        return str(self.info.get("name") or "")

    @property
    def n_rows(self) -> int:
        return int(self.info["n_rows"])

    @property
    def n_columns(self) -> int:
        return int(self.info["n_columns"])

    @property
    def columns(self) -> list[dict[str, Any]]:
        """``{"name", "kind", "n_missing", "n_unique"}`` per column (fetched if not listed)."""
        if "columns" not in self.info:
            self.info = self._client.dataset(self.id).info
        return list(self.info["columns"])

    def delete(self) -> None:
        """Delete it on the server (409 while a queued or running job uses it)."""
        self._client._transport.request("DELETE", f"/v1/datasets/{self.id}")
