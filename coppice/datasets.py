"""An uploaded dataset."""

from __future__ import annotations

from typing import Any

from coppice._resource import Resource
from coppice.pagination import Page

__all__ = ["Dataset", "Page"]  # Page: where it was first importable from


class Dataset(Resource):
    """A dataset as the server describes it; datasets are immutable."""

    collection = "datasets"

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
            self.info = self._get(self.path)
        return list(self.info["columns"])

    def delete(self) -> None:
        """Delete it on the server (409 while a queued or running job uses it)."""
        self._delete(self.path)
