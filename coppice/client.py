"""The entry point of the Python client: one server, its datasets, jobs and models."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from coppice._http import DEFAULT_TIMEOUT, Transport
from coppice._upload import upload_request
from coppice.datasets import Dataset, Page
from coppice.jobs import Job
from coppice.models import Model


class Client:
    """A connection to one Coppice server.

    ``url`` and ``api_key`` default to ``COPPICE_URL`` (else ``http://127.0.0.1:8000``) and
    ``COPPICE_API_KEY``. Idempotent calls (reads, predictions) are retried ``max_retries``
    times (default ``COPPICE_MAX_RETRIES``, else 3), with backoff doubling from 0.5 s, after a 503 or a broken connection; uploads and training requests
    never are, since a repeat could create a second dataset or job.

    A client copies (``copy.deepcopy``, scikit-learn's ``clone``) and pickles as its settings;
    each copy opens its own connections on first use.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int | None = None,
    ) -> None:
        self._transport = Transport(url, api_key, timeout=timeout, max_retries=max_retries)

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    @property
    def url(self) -> str:
        return self._transport.url

    def __deepcopy__(self, memo: dict[int, Any]) -> Client:
        clone = Client.__new__(Client)
        clone._transport = copy.deepcopy(self._transport, memo)
        return clone

    def close(self) -> None:
        """Close the connections (a later call opens new ones)."""
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # Datasets

    def upload(
        self,
        data: Any,
        *,
        name: str | None = None,
        categorical: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> Dataset:
        """Upload a table: a CSV file's path, a pandas DataFrame, a 2-D NumPy array (with
        ``columns``) or a list of records. Files and tables are streamed in chunks.

        ``categorical`` names columns to keep as categories even when they hold numbers;
        non-numeric columns of a DataFrame or array are always sent as categorical.
        """
        request = upload_request(data, name=name, categorical=categorical, columns=columns)
        info = self._transport.json("POST", "/v1/datasets", **request.kwargs)
        return Dataset(self, info)

    def dataset(self, dataset_id: str) -> Dataset:
        return Dataset(self, self._transport.json("GET", f"/v1/datasets/{_seg(dataset_id)}"))

    def datasets(self, *, limit: int = 50, offset: int = 0) -> Page[Dataset]:
        """Datasets, newest first."""
        page = self._page("/v1/datasets", limit=limit, offset=offset)
        return Page([Dataset(self, item) for item in page["items"]], page["total"])

    # Methods

    def methods(self) -> list[dict[str, Any]]:
        """Every trainable method: ``{"name", "tasks", "params_schema", "description"}``."""
        items: list[dict[str, Any]] = self._transport.json("GET", "/v1/methods")["items"]
        return items

    # Jobs

    def train(
        self,
        dataset: Dataset | str,
        *,
        target: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        validation: Mapping[str, Any] | None = None,
        task: str | None = None,
        features: Sequence[str] | None = None,
        seed: int | None = None,
        name: str | None = None,
        max_runtime_seconds: float | None = None,
    ) -> Job:
        """Queue a training job; ``job.wait()`` returns its model.

        ``validation`` is ``{"holdout": 0.2}`` (the server's default), ``{"folds": k}`` or
        ``{"holdout": 0}``; ``task`` and ``features`` are inferred when left out.
        """
        body: dict[str, Any] = {
            "dataset_id": dataset.id if isinstance(dataset, Dataset) else dataset,
            "target": target,
            "method": method,
        }
        optional = {
            "params": dict(params) if params is not None else None,
            "validation": dict(validation) if validation is not None else None,
            "task": task,
            "features": list(features) if features is not None else None,
            "seed": seed,
            "name": name,
            "max_runtime_seconds": max_runtime_seconds,
        }
        body |= {key: value for key, value in optional.items() if value is not None}
        return Job(self, self._transport.json("POST", "/v1/jobs", json=body))

    def job(self, job_id: str) -> Job:
        return Job(self, self._transport.json("GET", f"/v1/jobs/{_seg(job_id)}"))

    def jobs(self, *, status: str | None = None, limit: int = 50, offset: int = 0) -> Page[Job]:
        """Jobs, newest first; ``status`` keeps one status (``running``, ``failed``, ...)."""
        page = self._page("/v1/jobs", status=status, limit=limit, offset=offset)
        return Page([Job(self, item) for item in page["items"]], page["total"])

    # Models

    def model(self, ref: str) -> Model:
        """A model by id, or by ``name@alias`` / ``name@N`` of a registered model."""
        return Model(self, self._transport.json("GET", f"/v1/models/{_seg(ref)}"))

    def models(self, *, method: str | None = None, limit: int = 50, offset: int = 0) -> Page[Model]:
        """Models, newest first; ``method`` keeps one method's."""
        page = self._page("/v1/models", method=method, limit=limit, offset=offset)
        return Page([Model(self, item) for item in page["items"]], page["total"])

    def _page(self, path: str, **params: Any) -> dict[str, Any]:
        query = {key: value for key, value in params.items() if value is not None}
        page: dict[str, Any] = self._transport.json("GET", path, params=query)
        return page


def _seg(value: str) -> str:
    """An id or reference as one path segment (``name@alias`` keeps its ``@``)."""
    return quote(value, safe="@")
