"""Rules about models: reading, deleting, loading (checked and cached), predicting, importances.

Routers call these and turn their results into bodies; domain errors are ``ServiceError``s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

import engine
from engine.explain import explainable
from service.class_columns import over_classes
from service.datasets.service import load_columns
from service.db.tables import ImportanceRecord, ModelRecord
from service.errors import Conflict, InvalidInput, NotFound
from service.models import explanations, repository
from service.models import importance as imp
from service.models.artifacts import read_artifact
from service.models.cache import LoadedModel, ModelCache
from service.models.encoding import encode_matrix, encode_records, encode_rows
from service.models.schemas import PredictRequest
from service.registry import service as registry
from service.store import DataStore, ObjectCorrupt, StoredObject
from service.training.data import prepare
from service.training.spec import TrainingError, TrainingSpec
from service.training.split import holdout_split


class ArtifactCorrupt(Conflict):
    """The model's stored artifact is damaged and cannot be used; delete the model and retrain."""

    status = HTTPStatus.CONFLICT
    type = "urn:coppice:problem:artifact-corrupt"

    @property
    def title(self) -> str:
        return "Model artifact corrupt"


class TrainingDataGone(Conflict):
    """The model's training data is no longer available, so this cannot be computed."""


# --- reading and deleting -------------------------------------------------------------------


def registered_as(session: Session, model_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
    """The registered ``(name, version)`` pairs of each model (one query for a page)."""
    return registry.registered_as(session, model_ids)


def get_model(session: Session, model_id: str) -> ModelRecord:
    record = repository.get(session, model_id)
    if record is None:
        raise NotFound(f"There is no model with id '{model_id}'.")
    return record


def list_models(
    session: Session, *, method: str | None, limit: int, offset: int
) -> tuple[list[ModelRecord], int]:
    return repository.list_page(session, method=method, limit=limit, offset=offset)


def delete_model(session: Session, cache: ModelCache, model_id: str) -> list[str]:
    """Delete the model's rows; the store objects they named, for the caller to delete once
    the deletion is committed (deleted before, a rollback would leave rows naming nothing;
    a crash in between leaves objects no row names, which ``coppice store gc`` sweeps)."""
    registry.ensure_deletable(session, model_id)
    paths = repository.delete_model(session, model_id)
    if paths is None:
        raise NotFound(f"There is no model with id '{model_id}'.")
    cache.evict(model_id)
    return paths


def curves(session: Session, model_id: str) -> dict[str, Any]:
    record = get_model(session, model_id)
    if not record.curves:
        raise NotFound(
            f"Model '{model_id}' ({record.method}) has no learning curves: its method records "
            "none, or, for a forest without bootstrap, it has no out-of-bag rows to score."
        )
    return dict(record.curves)


def diagnostics(session: Session, model_id: str) -> dict[str, Any]:
    """``{"validation_rows", "roc", "residuals"}`` kept at training; None for each a model
    lacks (a model trained before they were kept lacks all three)."""
    kept = (get_model(session, model_id).metrics or {}).get("diagnostics") or {}
    return {
        "validation_rows": kept.get("rows"),
        "roc": kept.get("roc"),
        "residuals": kept.get("residuals"),
    }


# --- loading --------------------------------------------------------------------------------


def loaded_model(
    session: Session, cache: ModelCache, store: DataStore, model_id: str
) -> LoadedModel:
    """The usable model, from the cache, or loaded (and checked) from the data store once."""
    return cache.get_or_load(model_id, lambda: _load(session, store, model_id))


def _load(session: Session, store: DataStore, model_id: str) -> LoadedModel:
    described, stored = described_model(session, model_id)
    return load_described(store, described, stored)


def described_model(session: Session, model_id: str) -> tuple[LoadedModel, StoredObject]:
    """The model's record as a ``LoadedModel`` without its estimator (``None``), and its
    stored artifact: what a process that loads the estimator elsewhere (a Dask worker
    scoring a batch) sends there."""
    record = get_model(session, model_id)
    stored = repository.artifact(session, model_id)
    if stored is None:
        raise ArtifactCorrupt(f"Model '{model_id}' has no stored artifact; delete it and retrain.")
    described = LoadedModel(
        id=record.id,
        method=record.method,
        task=record.task,
        target=record.target,
        estimator=None,
        features=[dict(feature) for feature in record.features],
        encoding=dict(record.encoding or {}),
        classes=None if record.classes is None else [str(c) for c in record.classes],
        size_bytes=stored.size,
    )
    return described, stored


def load_described(store: DataStore, described: LoadedModel, stored: StoredObject) -> LoadedModel:
    """``described`` with its estimator, read from the data store and checked."""
    model_id = described.id
    try:
        data = read_artifact(store, stored)
    except ObjectCorrupt as error:  # ObjectMissing too; StoreUnavailable (503) passes through
        raise ArtifactCorrupt(
            f"The stored artifact of model '{model_id}' cannot be used: {error.detail}"
        ) from None
    try:
        estimator = engine.load_model(data)
    except engine.ModelFormatError as error:
        raise ArtifactCorrupt(
            f"The stored artifact of model '{model_id}' cannot be read ({error}); delete the "
            "model and train again."
        ) from None
    return dataclasses.replace(described, estimator=estimator, size_bytes=len(data))


# --- predicting -----------------------------------------------------------------------------


def predict(
    model: LoadedModel,
    body: PredictRequest,
    observe: Callable[[npt.NDArray[np.float64], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The prediction body for ``body``'s rows (see ``PredictResponse``); ``observe`` is
    given the encoded rows and the body (the prediction log's hand-off)."""
    if body.explain:
        refused = explanations.refusal(model.method, model.estimator)
        if refused is not None:
            raise InvalidInput(
                f'{refused} Or send "explain": false.',
                errors=[{"loc": ["body", "explain"], "msg": "not supported by this model"}],
            )
        explanations.check_budget(
            model.estimator, body.n_rows, body.explain_samples, field="explain_samples"
        )
    classification = model.task == "classification"
    if classification and body.return_proba and not hasattr(model.estimator, "predict_proba"):
        raise InvalidInput(
            f"A '{model.method}' model predicts labels only, without probabilities. "
            'Send "return_proba": false.',
            errors=[{"loc": ["body", "return_proba"], "msg": "not supported by this model"}],
        )
    if body.records is not None:
        X = encode_records(model, body.records)
    elif body.matrix is not None:
        assert body.columns is not None
        X = encode_matrix(model, body.columns, body.matrix)
    else:
        assert body.columns is not None and body.rows is not None
        X = encode_rows(model, body.columns, body.rows, numbers_only=body.numbers_only)
    out: dict[str, Any] = {
        "model_id": model.id,
        "predictions": [],
        "probabilities": None,
        "classes": model.classes if classification else None,
        "contributions": None,
        "bias": None,
        "explanation": None,
    }
    if X.shape[0] == 0:
        if classification and body.return_proba:
            out["probabilities"] = []
        if body.explain:
            out["contributions"], out["bias"] = [], []
            out["explanation"] = explainable(model.estimator)
        return out
    estimator = model.estimator
    # Arrays stay arrays: the router serializes them with orjson, which writes a NumPy
    # array in one C loop (non-finite floats as null) instead of a Python object per cell.
    if classification:
        out["predictions"] = [str(label) for label in np.asarray(estimator.predict(X)).tolist()]
        if body.return_proba:
            out["probabilities"] = class_probabilities(estimator, X, model.classes or [])
    else:
        out["predictions"] = np.asarray(estimator.predict(X), dtype=np.float64)
    if body.explain:
        explained = explanations.explain_rows(estimator, X, body.explain_samples)
        out["contributions"] = explained.contributions
        out["bias"] = np.repeat(explained.bias[np.newaxis], X.shape[0], axis=0)
        out["explanation"] = explained.method
    if observe is not None:
        observe(X, out)
    return out


def class_probabilities(
    estimator: Any, X: npt.NDArray[np.float64], classes: list[str]
) -> npt.NDArray[np.float64]:
    """``predict_proba`` with one column per class of the model record, in that order (both
    protocols): an estimator that saw fewer classes than the record lists (a member of an
    ensemble, say) gets zero columns for the others."""
    proba = np.asarray(estimator.predict_proba(X), dtype=np.float64)
    return np.ascontiguousarray(over_classes(proba, estimator.classes_, classes))


# --- feature importance ---------------------------------------------------------------------


def importance_kinds(
    session: Session,
    cache: ModelCache,
    store: DataStore,
    record: ModelRecord,
    *,
    load: bool = True,
) -> list[str] | None:
    """The kinds ``feature_importance`` gives for the model.

    Kept at training; a model trained before they were kept (or built by a search) is asked
    when ``load``, which loads it into the cache. None when it is not asked, or when its
    artifact cannot be loaded (no kind can be given then, and reading the model should not
    fail).
    """
    kept = (record.metrics or {}).get("importance_kinds")
    if kept is not None:
        return [str(kind) for kind in kept]
    if not load:
        return None
    try:
        model = loaded_model(session, cache, store, record.id)
    except ArtifactCorrupt:
        return None
    return _kinds(session, record, model)


def _kinds(session: Session, record: ModelRecord, model: LoadedModel) -> list[str]:
    stored = repository.stored_importance_kinds(session, record.id)
    return imp.available_kinds(
        record.method, model.estimator, stored, has_validation=_has_holdout(record)
    )


def feature_importance(
    session: Session, cache: ModelCache, store: DataStore, model_id: str, kind: str | None
) -> dict[str, Any]:
    """``{"model_id", "kind", "features"}`` of ``kind`` (default: the method's), stored once."""
    record = get_model(session, model_id)
    model = loaded_model(session, cache, store, model_id)
    kinds = _kinds(session, record, model)
    chosen = kind if kind is not None else imp.default_kind(record.method, kinds)
    if chosen is None or chosen not in kinds:
        asked = f"'{chosen}'" if chosen is not None else "any"
        raise InvalidInput(
            f"Model '{model_id}' ({record.method}) has no {asked} importance; it has "
            + (", ".join(f"'{k}'" for k in kinds) if kinds else "none")
            + ".",
            errors=[{"loc": ["query", "kind"], "msg": f"one of: {', '.join(kinds)}"}],
        )
    existing = repository.importance(session, model_id, chosen)
    if existing is None:
        features = _compute(session, store, record, model, chosen)
        existing = repository.add_importance(
            session,
            ImportanceRecord(model_id=model_id, kind=chosen, payload={"features": features}),
        )
    return {"model_id": model_id, "kind": chosen, "features": existing.payload["features"]}


def _has_holdout(record: ModelRecord) -> bool:
    """Whether training kept validation rows apart (a holdout; not folds, not none)."""
    return bool((record.metrics or {}).get("validation"))


def _compute(
    session: Session, store: DataStore, record: ModelRecord, model: LoadedModel, kind: str
) -> list[dict[str, Any]]:
    names = [feature["name"] for feature in model.features]
    estimator = model.estimator
    if kind in imp.MODEL_KINDS:
        values, std = imp.from_model(estimator, kind)
        return imp.ranked(names, values, std)
    spec, X, y, train_rows, validation_rows = _training_rows(session, store, record)
    if kind == "permutation":
        assert validation_rows is not None
        mean, spread = imp.permutation(estimator, X[validation_rows], y[validation_rows], spec.seed)
    elif kind == "shap":
        assert validation_rows is not None
        rows = validation_rows[explanations.importance_rows(estimator, validation_rows.size)]
        mean, spread = imp.shap(estimator, X[rows])
    else:
        mean, spread = imp.oob_permutation(estimator, X[train_rows], y[train_rows], spec.seed)
    return imp.ranked(names, mean, spread)


def _training_rows(
    session: Session, store: DataStore, record: ModelRecord
) -> tuple[
    TrainingSpec,
    npt.NDArray[np.float64],
    npt.NDArray[Any],
    npt.NDArray[np.intp],
    npt.NDArray[np.intp] | None,
]:
    """The job's matrix and its (train, validation) rows, split exactly as training did."""
    job = repository.job(session, record.job_id)
    if job is None or not record.dataset_id or job.dataset_id is None:
        raise TrainingDataGone(
            f"Model '{record.id}' was trained on a dataset that has since been deleted, so its "
            "training and validation rows are gone; this importance cannot be computed."
        )
    try:
        spec = TrainingSpec.from_job(job)
    except TrainingError as error:
        raise TrainingDataGone(error.message) from None
    try:
        columns = load_columns(session, job.dataset_id, spec.columns, store)
    except NotFound:
        raise TrainingDataGone(
            f"Model '{record.id}' was trained on dataset '{job.dataset_id}', which has been "
            "deleted; this importance cannot be computed."
        ) from None
    data = prepare(spec, columns)
    n_rows = data.y.shape[0]
    folds = "folds" in spec.validation
    holdout = 0.0 if folds else float(spec.validation.get("holdout", 0.0))
    if holdout > 0:
        train, validation = holdout_split(
            data.y, holdout, classification=spec.task == "classification", seed=spec.seed
        )
        return spec, data.X, data.y, train, validation
    return spec, data.X, data.y, np.arange(n_rows, dtype=np.intp), None
