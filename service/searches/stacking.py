"""The stacked ensemble: a meta-learner on the candidates' out-of-fold predictions.

The super learner (Wolpert 1992; Van der Laan, Polley & Hubbard 2007): each member's
prediction for a row comes from the fold model that did not see that row, so a meta-learner
trained on those predictions learns how far to trust each member on new data. The members are
never refitted for it: their out-of-fold predictions were kept when they were trained
(``service.searches.predictions``), on the one fold assignment every candidate of the search
shares. The ensemble's members are the candidates' final models, as they are.

As H2O's ``StackedEnsemble_BestOfFamily`` (LeDell & Poirier 2020), the members are the best
candidate of each method: diverse, and few enough to serve. The meta-learner is a logistic
regression (ridge for regression), the engine's ``StackingClassifier`` default. Its score is
its own k-fold CV over the level-one rows on the same folds, so it is ranked with the
candidates on the same footing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

import engine
from engine.base import clone
from engine.explain._background import background_sample
from engine.linear import LogisticRegression, Ridge
from service.datasets.service import load_columns
from service.db.tables import ModelRecord, SearchRecord
from service.models import repository as model_repository
from service.models.artifacts import read_artifact
from service.searches import predictions
from service.searches.leaderboard import Entry
from service.store import DataStore
from service.training import TrainingSpec
from service.training.data import TrainingData, prepare
from service.training.metrics import classification_metrics, regression_metrics, summarise_folds
from service.training.run import scored_training_rows
from service.training.split import fold_assignments

Matrix = npt.NDArray[np.float64]


class StackingSkipped(Exception):
    """No ensemble can be built (fewer than two members with predictions, data gone, ...)."""


@dataclass(frozen=True, slots=True)
class BuiltStack:
    # Streamed into the store (write_artifact) from the ensemble: its members are whole
    # models, as large as any the search trained, never held twice.
    artifact: engine.ModelPieces
    members: list[ModelRecord]
    metrics: dict[str, Any]
    final_estimator: str


def members_of(ranked: list[Entry]) -> list[Entry]:
    """The best candidate of each method among those trained on every row, best first."""
    best: dict[str, Entry] = {}
    for entry in ranked:
        if entry.candidate.n_rows is None and entry.candidate.kind == "candidate":
            best.setdefault(entry.job.method, entry)
    return list(best.values())


def build(
    session: Session, store: DataStore, search: SearchRecord, ranked: list[Entry]
) -> BuiltStack:
    """Fit the meta-learner and assemble the ensemble; reads only (the caller stores it)."""
    chosen = members_of(ranked)
    kept = predictions.load(session, store, [entry.model.id for entry in chosen])
    chosen = [entry for entry in chosen if entry.model.id in kept]
    if len(chosen) < 2:
        raise StackingSkipped(
            "no ensemble: it needs at least two methods with out-of-fold predictions "
            f"(found {len(chosen)})"
        )
    data = _data(session, store, search)
    classification = search.task == "classification"
    if any(kept[e.model.id].shape[0] != data.y.shape[0] for e in chosen):
        raise StackingSkipped("no ensemble: the candidates' predictions cover other rows")
    level_one = np.hstack([_level_one(kept[e.model.id], classification) for e in chosen])
    classes = data.classes or []
    target = (
        np.searchsorted(np.asarray(classes), data.y).astype(np.int64) if classification else data.y
    )
    assignment = fold_assignments(
        data.y, search.folds, classification=classification, seed=search.seed
    )
    per_fold = []
    for fold in range(search.folds):
        train, held = assignment != fold, assignment == fold
        meta = _meta(classification).fit(level_one[train], target[train])
        per_fold.append(_score(meta, level_one[held], data.y[held], classes, classification))
    meta = _meta(classification).fit(level_one, target)
    models = [
        _member(session, store, entry.model, len(classes), classification) for entry in chosen
    ]
    ensemble = _assemble(models, chosen, meta, data, search, classification)
    scored = scored_training_rows(data.y, np.arange(data.y.shape[0]), classification, search.seed)
    train = _evaluate(ensemble, data, scored, classification)
    return BuiltStack(
        artifact=engine.save_model_pieces(ensemble),
        members=[entry.model for entry in chosen],
        metrics={"train": train, "validation": None, "oob": None, "cv": summarise_folds(per_fold)},
        final_estimator="logistic_regression" if classification else "ridge",
    )


def _data(session: Session, store: DataStore, search: SearchRecord) -> TrainingData:
    if search.dataset_id is None:
        raise StackingSkipped("no ensemble: the search's dataset has been deleted")
    spec = TrainingSpec(
        method="stacking",
        task=search.task,
        target=search.target,
        features=tuple(search.features),
        params={},
        validation={"folds": search.folds},
        seed=search.seed,
    )
    columns = load_columns(session, search.dataset_id, list(dict.fromkeys(spec.columns)), store)
    return prepare(spec, columns)


def _level_one(values: Matrix, classification: bool) -> Matrix:
    # Two classes: one probability column says it all, and the collinear pair would only
    # destabilise the meta-learner (as engine.combine's stacking drops it too).
    return values[:, 1:] if classification and values.shape[1] == 2 else values


def _meta(classification: bool) -> Any:
    return LogisticRegression() if classification else Ridge()


def _score(
    meta: Any, level_one: Matrix, y: npt.NDArray[Any], classes: list[str], classification: bool
) -> dict[str, Any]:
    if not classification:
        return regression_metrics(y, np.asarray(meta.predict(level_one), dtype=np.float64))
    proba = np.zeros((level_one.shape[0], len(classes)))
    proba[:, np.asarray(meta.classes_, dtype=np.int64)] = meta.predict_proba(level_one)
    return classification_metrics(y, proba, classes)


def _member(
    session: Session, store: DataStore, model: ModelRecord, n_classes: int, classification: bool
) -> Any:
    stored = model_repository.artifact(session, model.id)
    if stored is None:
        raise StackingSkipped(f"no ensemble: model {model.id} has no artifact")
    member = engine.load_model(read_artifact(store, stored))
    if classification:
        # The stacking model addresses members' probability columns by class code, as it
        # does for members it fits itself; every final model saw every class, in this order.
        member.classes_ = np.arange(n_classes)
    return member


def _assemble(
    members: list[Any],
    chosen: list[Entry],
    meta: Any,
    data: TrainingData,
    search: SearchRecord,
    classification: bool,
) -> Any:
    """A fitted ``StackingClassifier``/``Regressor`` holding the members as they are."""
    names = [f"{entry.job.method}_{index}" for index, entry in enumerate(chosen, start=1)]
    kind = engine.StackingClassifier if classification else engine.StackingRegressor
    # The parameters hold unfitted copies, so the artifact stores each member's trees once.
    ensemble = kind(
        estimators=[(name, clone(m)) for name, m in zip(names, members, strict=True)],
        final_estimator=_meta(classification),
        cv=search.folds,
        random_state=search.seed,
    )
    ensemble.estimators_ = members
    ensemble.member_names_ = names
    ensemble.stack_method_ = ["predict_proba" if classification else "predict"] * len(members)
    ensemble.final_estimator_ = meta
    ensemble.n_features_in_ = data.X.shape[1]
    ensemble.background_ = background_sample(data.X)
    if classification:
        ensemble.classes_ = np.asarray(data.classes)
    return ensemble


def _evaluate(
    model: Any, data: TrainingData, rows: npt.NDArray[np.intp], classification: bool
) -> dict[str, Any]:
    X, y = data.X[rows], data.y[rows]
    if classification:
        return classification_metrics(y, np.asarray(model.predict_proba(X)), data.classes or [])
    return regression_metrics(y, np.asarray(model.predict(X), dtype=np.float64))
