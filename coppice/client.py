"""The entry point of the Python client: one server, its datasets, jobs, models, registered
models and searches."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import httpx

from coppice._http import DEFAULT_TIMEOUT, Transport
from coppice._resource import api_path
from coppice._upload import upload_request
from coppice.batch import BatchPrediction
from coppice.datasets import Dataset
from coppice.errors import ConflictError, NotFoundError
from coppice.jobs import Job
from coppice.models import Model
from coppice.pagination import Page
from coppice.registry import Alias, AliasMove, ModelVersion, RegisteredModel
from coppice.searches import Candidates, Search, candidate_spaces


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

    # The request methods every resource binds (coppice/_resource.py): the answer's JSON.

    def _get(self, path: str, **kwargs: Any) -> Any:
        return self._transport.json("GET", path, **kwargs)

    def _post(self, path: str, **kwargs: Any) -> Any:
        return self._transport.json("POST", path, **kwargs)

    def _put(self, path: str, **kwargs: Any) -> Any:
        return self._transport.json("PUT", path, **kwargs)

    def _delete(self, path: str, **kwargs: Any) -> None:
        self._transport.request("DELETE", path, **kwargs)

    def _get_bytes(self, path: str, **kwargs: Any) -> bytes:
        """A GET whose answer is a file (a model export), not JSON."""
        return self._transport.request("GET", path, **kwargs).content

    def _stream(self, path: str, **kwargs: Any) -> AbstractContextManager[httpx.Response]:
        """A GET whose body is read as it arrives (downloads)."""
        return self._transport.stream("GET", path, **kwargs)

    def _list(self, path: str, **params: Any) -> dict[str, Any]:
        """A listing's answer, ``{"items", "total"}``; ``None`` parameters are left out."""
        query = {key: value for key, value in params.items() if value is not None}
        answer: dict[str, Any] = self._get(path, params=query)
        return answer

    # Datasets

    def upload(
        self,
        data: Any,
        *,
        name: str | None = None,
        categorical: Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> Dataset:
        """Upload a table: a CSV, Parquet or Arrow file's path (``.csv``, ``.parquet``,
        ``.arrow``, ``.feather``), a pandas DataFrame (sent as Parquet when pyarrow is
        installed, else as CSV), a 2-D NumPy array (with ``columns``) or a list of records.
        Files and tables are streamed in chunks.

        ``categorical`` names columns to keep as categories even when they hold numbers;
        non-numeric columns of a DataFrame or array are always sent as categorical.
        """
        request = upload_request(data, name=name, categorical=categorical, columns=columns)
        return Dataset(self, self._post(Dataset.path_for(), **request.kwargs))

    def register_table(
        self, url: str, *, name: str | None = None, categorical: Sequence[str] | None = None
    ) -> Dataset:
        """Register a Parquet file or directory where it lies (``s3://...`` or a server path
        under ``COPPICE_IMPORT_ROOTS``) without copying it; needs an admin key."""
        body: dict[str, Any] = {"source": {"url": url}}
        if name is not None:
            body["name"] = name
        if categorical:
            body["categorical"] = list(categorical)
        return Dataset(self, self._post(Dataset.path_for(), json=body))

    def dataset(self, dataset_id: str) -> Dataset:
        return Dataset(self, self._get(Dataset.path_for(dataset_id)))

    def datasets(self, *, limit: int = 50, offset: int = 0) -> Page[Dataset]:
        """Datasets, newest first."""
        answer = self._list(Dataset.path_for(), limit=limit, offset=offset)
        return Page.of(answer, lambda info: Dataset(self, info))

    # Methods

    def methods(self) -> list[dict[str, Any]]:
        """Every trainable method: ``{"name", "tasks", "params_schema", "description"}``."""
        items: list[dict[str, Any]] = self._get(api_path("methods"))["items"]
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
        return Job(self, self._post(Job.path_for(), json=body))

    def job(self, job_id: str) -> Job:
        return Job(self, self._get(Job.path_for(job_id)))

    def jobs(
        self,
        *,
        status: str | None = None,
        search_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Page[Job]:
        """Jobs, newest first; ``status`` keeps one status (``running``, ``failed``, ...),
        ``search_id`` one search's candidates."""
        answer = self._list(
            Job.path_for(), status=status, search_id=search_id, limit=limit, offset=offset
        )
        return Page.of(answer, lambda info: Job(self, info))

    # Models

    def model(self, ref: str) -> Model:
        """A model by id, or by a registered model's ``name@alias``, ``name@N`` or
        ``name@latest``; then ``model.registered_version`` is the version it resolved to."""
        name, at, selector = ref.partition("@")
        if not at:
            return Model(self, self._get(Model.path_for(ref)))
        version = self.registered_model(name).version(selector)
        if version is None:
            # No such alias or version as last read: the server's answer names what is
            # missing (or, should it have just been made, the model).
            return Model(self, self._get(Model.path_for(ref)), ref=ref)
        return version.model(ref=ref)

    def models(self, *, method: str | None = None, limit: int = 50, offset: int = 0) -> Page[Model]:
        """Models, newest first; ``method`` keeps one method's."""
        answer = self._list(Model.path_for(), method=method, limit=limit, offset=offset)
        return Page.of(answer, lambda info: Model(self, info))

    # Batch predictions

    def batch_predict(
        self,
        model: Model | str,
        dataset: Dataset | str,
        *,
        keep_columns: Sequence[str] = (),
        return_proba: bool = False,
        explain: bool = False,
        name: str | None = None,
    ) -> BatchPrediction:
        """Queue the scoring of a stored dataset by ``model`` (a model, an id, or
        ``name@alias``/``name@N``); ``batch.wait()`` returns the scored dataset: the
        ``keep_columns``, ``prediction``, ``proba_<class>`` per class with ``return_proba``,
        and ``contribution_<feature>`` per feature plus ``bias`` with ``explain``."""
        reference = (model.ref or model.id) if isinstance(model, Model) else model
        body: dict[str, Any] = {
            "model": reference,
            "dataset_id": dataset.id if isinstance(dataset, Dataset) else dataset,
            "keep_columns": list(keep_columns),
            "return_proba": return_proba,
            "explain": explain,
        }
        if name is not None:
            body["name"] = name
        return BatchPrediction(self, self._post(BatchPrediction.path_for(), json=body))

    def batch_prediction(self, batch_id: str) -> BatchPrediction:
        return BatchPrediction(self, self._get(BatchPrediction.path_for(batch_id)))

    def batch_predictions(
        self,
        *,
        status: str | None = None,
        model_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> Page[BatchPrediction]:
        """Batch predictions, newest first; ``status`` keeps one status, ``model_id`` one
        model's."""
        answer = self._list(
            BatchPrediction.path_for(), status=status, model_id=model_id, limit=limit, offset=offset
        )
        return Page.of(answer, lambda info: BatchPrediction(self, info))

    # Registered models

    def register(
        self,
        model: Model | str,
        name: str,
        *,
        alias: str | None = None,
        description: str | None = None,
    ) -> ModelVersion:
        """Register ``model`` (a :class:`Model`, a model id or a ``name@…`` reference) as the
        next version of ``name``, creating the name (with ``description``) when it does not
        exist, as ``mlflow.register_model`` does; ``alias`` is then pointed at the new version.
        """
        model_id = model.id if isinstance(model, Model) else model
        if "@" in model_id:
            model_id = self.model(model_id).id
        with contextlib.suppress(ConflictError):  # the name exists: add to it
            self.create_registered_model(name, description=description or "")
        body = {"model_id": model_id} | ({"alias": alias} if alias is not None else {})
        return ModelVersion(self, self._post(ModelVersion.path_for(name), json=body))

    def create_registered_model(self, name: str, *, description: str = "") -> RegisteredModel:
        """Create the name, with no versions yet; a taken name is a
        :class:`~coppice.errors.ConflictError`. :meth:`register` creates it when needed."""
        body = {"name": name, "description": description}
        return RegisteredModel(self, self._post(RegisteredModel.path_for(), json=body))

    def registered_model(self, name: str) -> RegisteredModel:
        """A registered model with its versions and aliases."""
        return RegisteredModel(self, self._get(RegisteredModel.path_for(name)))

    def registered_models(self, *, limit: int = 50, offset: int = 0) -> Page[RegisteredModel]:
        """Registered models by name, each with its aliases and newest version."""
        answer = self._list(RegisteredModel.path_for(), limit=limit, offset=offset)
        return Page.of(answer, lambda info: RegisteredModel(self, info))

    def delete_registered_model(self, name: str) -> None:
        """Delete the name, its versions, aliases and history; the models stay."""
        self._delete(RegisteredModel.path_for(name))

    def model_version(self, name: str, version: int | str) -> ModelVersion:
        """Version ``version`` of ``name``; a text ``version`` may be an alias (``"production"``)
        or ``"latest"``, as after the ``@`` of a reference."""
        text = str(version)
        if text == "latest":
            found = self.registered_model(name).version("latest")
            if found is None:
                raise NotFoundError(f"Registered model {name!r} has no versions.", status=404)
            return found
        if not text.isdigit():
            text = str(self._get(Alias.path_for(name, text))["version"])
        return ModelVersion(self, self._get(ModelVersion.path_for(name, text)))

    def delete_model_version(self, name: str, version: int) -> None:
        """Remove a version (the model stays); a :class:`~coppice.errors.ConflictError` while
        an alias names it. Its number is never given again."""
        self._delete(ModelVersion.path_for(name, version))

    def set_alias(self, name: str, alias: str, version: int) -> Alias:
        """Point ``alias`` of ``name`` at ``version``, atomically; the move is recorded
        (:meth:`alias_history`) and ``Alias.previous_version`` says what it named before."""
        return Alias(self._put(Alias.path_for(name, alias), json={"version": version}))

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove the alias (recorded in the history too); its version stays."""
        self._delete(Alias.path_for(name, alias))

    def alias_history(self, name: str, *, limit: int = 50, offset: int = 0) -> Page[AliasMove]:
        """Every alias move of ``name``, newest first: which version an alias named, when,
        and who moved it."""
        answer = self._list(AliasMove.path_for(name), limit=limit, offset=offset)
        return Page.of(answer, AliasMove)

    # Searches

    def search(
        self,
        dataset: Dataset | str,
        *,
        target: str,
        candidates: Candidates | None = None,
        auto: bool = False,
        strategy: str = "random",
        max_models: int | None = None,
        max_seconds: float | None = None,
        folds: int | None = None,
        metric: str | None = None,
        stack: bool = False,
        register_as: str | None = None,
        seed: int | None = None,
        task: str | None = None,
        features: Sequence[str] | None = None,
        name: str | None = None,
    ) -> Search:
        """Start a hyper-parameter search; ``search.wait()`` waits for its leaderboard.

        ``candidates`` maps methods to their spaces, ``{"random_forest": {"max_features":
        ["sqrt", 0.5], "min_samples_leaf": {"int": [1, 10]}}}`` (or is the API's list of
        ``{"method", "params"}``, or a list of method names); ``auto=True`` lets the server
        choose instead. ``strategy`` is ``random``, ``grid`` or ``halving``; ``max_models``
        and ``max_seconds`` are the budget; ``folds`` (server default 5) and ``metric``
        score the candidates. ``stack`` adds a stacked ensemble of the best of each method;
        ``register_as`` makes the best model the next version of that name (alias
        ``candidate``). Every parameter is checked before anything runs (a
        :class:`~coppice.errors.ValidationError` naming the method and parameter).
        """
        budget = {"max_models": max_models, "max_seconds": max_seconds}
        optional = {
            "candidates": candidate_spaces(candidates) if candidates is not None else None,
            "auto": auto or None,
            "budget": {k: v for k, v in budget.items() if v is not None} or None,
            "validation": {"folds": folds} if folds is not None else None,
            "metric": metric,
            "stack": stack or None,
            "register_as": register_as,
            "seed": seed,
            "task": task,
            "features": list(features) if features is not None else None,
            "name": name,
        }
        body: dict[str, Any] = {
            "dataset_id": dataset.id if isinstance(dataset, Dataset) else dataset,
            "target": target,
            "strategy": strategy,
        }
        body |= {key: value for key, value in optional.items() if value is not None}
        return Search(self, self._post(Search.path_for(), json=body))

    def search_by_id(self, search_id: str) -> Search:
        """A search, with its leaderboard."""
        return Search(self, self._get(Search.path_for(search_id)))

    def searches(
        self, *, status: str | None = None, limit: int = 50, offset: int = 0
    ) -> Page[Search]:
        """Searches, newest first (without their leaderboards, read on first use)."""
        answer = self._list(Search.path_for(), status=status, limit=limit, offset=offset)
        return Page.of(answer, lambda info: Search(self, info))
