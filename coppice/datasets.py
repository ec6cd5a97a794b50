"""A dataset: an uploaded table, or one registered where it lies."""

from __future__ import annotations

import io
import os
from pathlib import Path
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

    @property
    def storage(self) -> dict[str, Any] | None:
        """Where the values live: ``{"format", "n_parts", "bytes", "registered", "url"}``."""
        if "storage" not in self.info:
            self.info = self._get(self.path)
        storage = self.info.get("storage")
        return dict(storage) if storage is not None else None

    def download(self, path: str | os.PathLike[str], *, format: str | None = None) -> Path:
        """Write the table to ``path`` as Parquet or CSV (``format``; by default from the
        file's suffix, Parquet unless it is ``.csv``), streamed; returns the path."""
        target = Path(path)
        chosen = format or ("csv" if target.suffix.lower() == ".csv" else "parquet")
        partial = target.with_name(f".{target.name}.partial")
        try:
            with (
                self._stream(f"{self.path}/data", params={"format": chosen}) as response,
                partial.open("wb") as sink,
            ):
                for chunk in response.iter_bytes():
                    sink.write(chunk)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (needs pyarrow and pandas): numbers as float64
        with NaN for missing, categories as strings with None for missing."""
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        with self._stream(f"{self.path}/data", params={"format": "parquet"}) as response:
            for chunk in response.iter_bytes():
                buffer.write(chunk)
        buffer.seek(0)
        return pq.read_table(buffer).to_pandas()

    def delete(self) -> None:
        """Delete it on the server (409 while a queued or running job uses it)."""
        self._delete(self.path)
