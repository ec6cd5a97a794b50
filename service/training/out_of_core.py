"""A job run out of core on the Dask cluster, its fit process holding nothing per row.

The engine's ``fit_parts`` keeps the rows on the workers (issue 27); this module keeps the
run's own per-row state there too, which a run with the table in memory holds in one place:

- **the target**: each worker summarises its parts' targets (rows with one, each label's
  count, the range) (:func:`service.training.worker_parts.summarise_part`); the classes and
  every check of :func:`service.training.data.prepare` follow from the summaries;
- **the split**: drawn from the class counts as ranks (:mod:`service.training.row_split`):
  the same holdout and the same scored training rows, the workers tagging their rows;
- **predictions and metrics**: the actors hold every row's final score (held-out rows follow
  the trees' splits as training rows do), so each worker scores its own rows and sends sums
  (confusion counts, log-loss and squared-error sums, the target's mean and squared
  deviations, merged as Chan, Golub & LeVeque 1979), never rows. The ROC curves and areas
  need the scores' order: each worker sends its distinct scores with their positive and
  negative counts, which give every threshold's counts exactly (the engine's curves take
  them as weights), while the distinct scores are at most ``MAX_DISTINCT_SCORES``; past that,
  the scores are put in cells between order statistics of every worker's scores (a quantile
  sketch, as XGBoost's bins), rows in a cell counting as tied. A regression's quantiles are
  found exactly by bisection over the workers' counts, and its residual sample by position.

What stays here grows with no row count: the summaries (per part), the held-out rows' ranks
while they are sent (four bytes each), the bin edges' sample, the trees and the sums. The run
equals the one on the table in memory (tests hold its metrics within 1e-9).

Cross-validation folds and successive halving's row subsamples still take the target here
(``service.training.run``): their row assignments are per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import metrics
from engine.boosting._objectives import softmax
from engine.callbacks import TrainingInterrupted
from service.db.tables import ColumnKind
from service.methods.catalog import Method, Task
from service.models.importance import available_kinds
from service.monitoring.baseline import NUMERIC_BINS, numeric_bins, training_baseline
from service.training import fit_steps
from service.training.curves import learning_curves
from service.training.data import TrainingData, describe_features
from service.training.diagnostics import (
    MAX_ROC_CLASSES,
    RESIDUAL_ROWS,
    ROC_POINTS,
    thin_curve,
)
from service.training.fit_steps import (
    FIT_SHARE,
    Progress,
    drop_prediction_caches,
    impurity_importances,
    job_estimator,
    n_estimators_of,
)
from service.training.metrics import json_number, ranking_scores
from service.training.part_table import PartTable
from service.training.row_split import SCORED, VALIDATION, split_by_counts
from service.training.spec import TrainingError, TrainingOutcome, TrainingSpec
from service.training.worker_parts import (
    PartSummary,
    read_worker_part,
    summarise_part,
    worker_parts,
)

__all__ = ["MAX_DISTINCT_SCORES", "run_out_of_core"]

# Past this many distinct scores (summed over the workers) a ROC curve is drawn from cells
# between order statistics: a few MiB of counts here, whatever the rows.
MAX_DISTINCT_SCORES = 1 << 17
Array = npt.NDArray[Any]


def run_out_of_core(
    spec: TrainingSpec,
    table: PartTable,
    method: Method,
    task: Task,
    resolved: dict[str, Any],
    on_progress: Callable[[float, str], None],
    should_stop: Callable[[], bool],
) -> TrainingOutcome:
    """``run_training`` of a holdout (or no validation) job fitted out of core."""
    client = engine.parallel.active_backend().client  # type: ignore[union-attr]
    classification = task == Task.CLASSIFICATION
    missing = [name for name in spec.columns if name not in table]
    if missing:
        raise TrainingError(
            "missing_columns",
            "The dataset lacks the columns " + ", ".join(f"'{m}'" for m in missing) + ".",
        )
    if classification is False and table.kinds[spec.target] == ColumnKind.CATEGORICAL:
        raise TrainingError(
            "categorical_target",
            f"The target '{spec.target}' is categorical; regression needs numbers.",
        )
    sources = worker_parts(table.store, table.parts, spec.features, spec.target, table.kinds, {})
    summaries: list[PartSummary] = client.gather(
        client.map(summarise_part, [p.source for p in sources], [classification] * len(sources))
    )
    del sources
    data = _training_data(spec, table, summaries, classification)
    classes = data.classes
    counts = _group_counts(summaries, classes)
    holdout = float(spec.validation.get("holdout", 0.0))
    ranks = split_by_counts(
        counts, holdout, fit_steps.TRAIN_SCORE_ROWS, classification=classification, seed=spec.seed
    )
    sources = worker_parts(
        table.store,
        table.parts,
        spec.features,
        spec.target,
        table.kinds,
        table.categories,
        classes,
        ranks=ranks,
    )
    del ranks.held_out[:]  # the workers' sources hold them now
    progress = Progress(on_progress, should_stop, method.progress_unit, 1)
    progress.start(0, "")
    estimator = job_estimator(method, task, resolved, spec, data.categorical_features)
    has_validation = holdout > 0

    def evaluate(actors: Any) -> dict[str, Any]:
        on_progress(FIT_SHARE, "computing metrics")
        return _evaluate(actors, estimator, classes, has_validation, spec.seed)

    keep = engine.parallel.KeptRows([], evaluate=evaluate)
    progress.note("reading and binning the parts on the Dask workers")
    try:
        estimator.fit_parts(sources, read_worker_part, callbacks=[progress], keep=keep)
    except TrainingInterrupted:
        raise
    except ValueError as error:  # the engine refusing this data: deterministic
        raise TrainingError("fit_failed", f"Training failed: {error}") from None
    if classification:
        assert classes is not None
        codes = np.asarray(estimator.classes_).astype(np.intp)
        estimator.classes_ = np.asarray(classes)[codes]
    evaluation = keep.evaluation
    assert keep.sample is not None
    monitoring = training_baseline(
        keep.sample,
        data.features,
        data.categories,
        np.zeros(0, dtype=str if classification else np.float64),
        classes,
        rows=ranks.n_train,
    )
    monitoring["prediction"] = evaluation["prediction"]
    empty = (lambda start, stop: data.X[start:stop], data.y)
    curves = learning_curves(
        method.name,
        estimator,
        classification=classification,
        classes=classes,
        train=empty,
        validation=empty if has_validation else None,
        events=progress.events,
    )
    importances = impurity_importances(estimator, data)
    result_metrics: dict[str, Any] = {
        "train": evaluation["train"],
        "validation": evaluation["validation"],
        "oob": None,
        "cv": None,
        "diagnostics": evaluation["diagnostics"],
        "importance_kinds": available_kinds(
            method.name, estimator, list(importances), has_validation=has_validation
        ),
        "monitoring": monitoring,
    }
    drop_prediction_caches(estimator)
    return TrainingOutcome(
        model=estimator,
        features=data.features,
        classes=classes,
        encoding={"categories": data.categories, "classes": classes},
        resolved_params=resolved,
        metrics=result_metrics,
        curves=curves,
        importances=importances,
        n_estimators=n_estimators_of(estimator),
        n_rows=ranks.n_train + ranks.n_validation,
        n_train_rows=ranks.n_train,
        n_validation_rows=ranks.n_validation,
        out_of_fold=None,
    )


def _training_data(
    spec: TrainingSpec, table: PartTable, summaries: Sequence[PartSummary], classification: bool
) -> TrainingData:
    """The run's features, categories and classes (no row), with ``prepare``'s checks."""
    union: dict[str, set[str]] = {}
    for summary in summaries:
        for name, found in summary.categories.items():
            union.setdefault(name, set()).update(found)
    table.use_categories({name: sorted(found) for name, found in union.items()})
    features, categorical, categories = describe_features(table, spec.features)
    if sum(summary.n_known for summary in summaries) == 0:
        raise TrainingError(
            "no_rows", f"Every row's target '{spec.target}' is missing; there is nothing to learn."
        )
    classes = None
    if classification:
        classes = sorted({label for summary in summaries for label in summary.labels})
        if len(classes) < 2:
            raise TrainingError(
                "one_class",
                f"The target '{spec.target}' has only one class ({np.str_(classes[0])!r}) in "
                "the rows that have a value; classification needs at least two.",
            )
    else:
        low = min(summary.low for summary in summaries)
        if low == max(summary.high for summary in summaries):
            raise TrainingError(
                "constant_target",
                f"The target '{spec.target}' is constant ({low!r}); there is nothing to "
                "learn. Choose another target.",
            )
    return TrainingData(
        X=np.empty((0, len(spec.features))),
        y=np.zeros(0, dtype=str if classification else np.float64),
        features=features,
        categorical_features=categorical,
        categories=categories,
        classes=classes,
    )


def _group_counts(
    summaries: Sequence[PartSummary], classes: list[str] | None
) -> npt.NDArray[np.int64]:
    """``counts[p, g]``: part ``p``'s rows of class ``g`` (of its rows with a target)."""
    if classes is None:
        return np.array([[summary.n_known] for summary in summaries], dtype=np.int64)
    return np.array(
        [[summary.labels.get(label, 0) for label in classes] for summary in summaries],
        dtype=np.int64,
    )


# -- on the workers: the actors' rows, their roles and final scores --------------------------


def _outputs(actor: Any, tag: int, link: str) -> tuple[Array, Array]:
    """The target and the model's outputs (class probabilities, or values) of the actor's
    rows tagged ``tag``, as ``predict_proba``/``predict`` give them from the scores."""
    rows = np.flatnonzero(actor.tags == tag)
    raw = actor.raw[rows]
    y = actor.y[rows]
    if link == "votes":  # a forest's mean class probabilities, as predict_proba gives them
        return y.astype(np.intp), raw
    if link == "proba":
        if raw.shape[1] == 1:
            positive = 1.0 / (1.0 + np.exp(-raw[:, 0]))
            return y.astype(np.intp), np.column_stack([1.0 - positive, positive])
        return y.astype(np.intp), softmax(raw)
    return y, np.exp(raw[:, 0]) if link == "exp" else raw[:, 0]


def _sums(actor: Any, tag: int, link: str, n_classes: int) -> dict[str, Any]:
    """The sums the metric sets are made of, over the actor's rows tagged ``tag``; what the
    later calls read is kept on the actor (``scores``: the ROC's columns; ``sorted``: a
    regression's predictions in order)."""
    y, outputs = _outputs(actor, tag, link)
    if not hasattr(actor, "scored_rows"):
        actor.scored_rows = {}
    if link in ("proba", "votes"):
        predicted = outputs.argmax(axis=1)
        confusion = np.bincount(y * n_classes + predicted, minlength=n_classes * n_classes)
        sums = outputs.sum(axis=1, keepdims=True)
        normalised = outputs / np.where(sums > 0, sums, 1.0)
        eps = np.finfo(np.float64).eps
        p_true = np.clip(normalised[np.arange(y.size), y], eps, 1.0 - eps)
        scores = outputs[:, 1:] if n_classes == 2 else ranking_scores(outputs)
        actor.scored_rows[tag] = (y, scores)
        return {
            "n": int(y.size),
            "confusion": confusion.reshape(n_classes, n_classes),
            "log_loss": float(np.sum(-np.log(p_true))),
            "distinct": [int(np.unique(column).size) for column in scores.T],
            "finite": bool(np.isfinite(outputs).all()),
        }
    actor.scored_rows[tag] = (y, outputs, np.sort(_keys(outputs)))
    mean = float(y.mean()) if y.size else 0.0
    finite = bool(np.isfinite(outputs).all())
    return {
        "n": int(y.size),
        "squared": float(np.sum((y - outputs) ** 2)),
        "absolute": float(np.sum(np.abs(y - outputs))),
        "mean": mean,
        "deviations": float(np.sum((y - mean) ** 2)),
        "low": int(_keys(outputs).min()) if y.size and finite else None,
        "high": int(_keys(outputs).max()) if y.size and finite else None,
        "finite": finite,
    }


def _score_sketch(actor: Any, tag: int, points: int) -> list[Array]:
    """Per ROC column, ``points`` order statistics of the actor's scores (real scores)."""
    _, scores = actor.scored_rows[tag]
    if scores.shape[0] == 0:
        return [np.zeros(0) for _ in range(scores.shape[1])]
    at = np.linspace(0.0, 1.0, points)
    return [np.quantile(column, at, method="inverted_cdf") for column in scores.T]


def _score_counts(
    actor: Any, tag: int, edges: list[Array] | None
) -> list[tuple[Array, Array, Array]]:
    """Per ROC column: its distinct scores (or, with ``edges``, the cells' upper edges the
    scores fall in) and how many positive and negative rows have each."""
    y, scores = actor.scored_rows[tag]
    counted = []
    for k, column in enumerate(scores.T):
        positive = y == (1 if scores.shape[1] == 1 else k)
        if edges is not None:
            column = edges[k][np.searchsorted(edges[k], column)]
        values, inverse = np.unique(column, return_inverse=True)
        pos = np.bincount(inverse, weights=positive, minlength=values.size)
        total = np.bincount(inverse, minlength=values.size)
        counted.append((values, pos, total - pos))
    return counted


def _keys(values: Array) -> npt.NDArray[np.int64]:
    """Integers in the order of the floats ``values`` (IEEE 754 bits, negatives flipped)."""
    bits = np.asarray(values, dtype=np.float64).view(np.int64)
    return bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


def _from_keys(keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    bits = keys ^ ((keys >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    return bits.view(np.float64)


def _at_most(actor: Any, tag: int, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """How many of the actor's predictions are at most each key (:func:`_keys`)."""
    return np.searchsorted(actor.scored_rows[tag][2], keys, side="right").astype(np.int64)


def _rows_at(actor: Any, tag: int, positions: Array) -> tuple[Array, Array]:
    """The predictions and targets of the actor's rows tagged ``tag`` at ``positions``."""
    y, predicted, _ = actor.scored_rows[tag]
    return predicted[positions], y[positions]


def _bins(actor: Any, tag: int, edges: list[float]) -> Array:
    """The monitoring baseline's bin counts of the actor's predictions."""
    predicted = actor.scored_rows[tag][1]
    return np.bincount(numeric_bins(predicted, edges), minlength=len(edges) + 2)


# -- here: the actors' answers into the metric sets -----------------------------------------


def _evaluate(
    actors: Any, model: Any, classes: list[str] | None, has_validation: bool, seed: int
) -> dict[str, Any]:
    """``metrics.train`` (the scored training rows), ``metrics.validation``, the diagnostics
    and the monitoring baseline's prediction entry, from the actors (``KeptRows.evaluate``)."""
    if hasattr(model, "members_"):  # a forest: the actors' scores are its mean outputs
        link = "votes" if classes is not None else "identity"
    else:
        link = (
            "proba"
            if classes is not None
            else ("exp" if getattr(model, "objective_", None) == "count:poisson" else "identity")
        )
    n_classes = 0 if classes is None else len(classes)
    if classes is not None:
        model_classes = np.asarray(model.classes_)
        if not np.array_equal(model_classes, np.arange(n_classes)):
            raise TrainingError(
                "fit_failed", "A class has no training row: the metrics cannot be scored."
            )
    tags = [SCORED, VALIDATION] if has_validation else [SCORED]
    sums = {tag: actors.each(_sums, tag, link, n_classes) for tag in tags}
    found: dict[str, Any] = {"validation": None, "diagnostics": None}
    if classes is not None:
        counted = {tag: _roc_counts(actors, tag, sums[tag]) for tag in tags}
        found["train"] = _classification_set(sums[SCORED], counted[SCORED], classes)
        baseline_tag = tags[-1]
        if has_validation:
            found["validation"] = _classification_set(
                sums[VALIDATION], counted[VALIDATION], classes
            )
            found["diagnostics"] = {
                "rows": sum(s["n"] for s in sums[VALIDATION]),
                "roc": _roc_curves(counted[VALIDATION], classes),
                "residuals": None,
            }
        predicted = sum(s["confusion"] for s in sums[baseline_tag]).sum(axis=0)
        found["prediction"] = {
            "kind": "categorical",
            "labels": list(classes),
            "proportions": _proportions(np.r_[predicted, 0, 0]),
        }
        return found
    found["train"] = _regression_set(sums[SCORED])
    baseline_tag = tags[-1]
    if has_validation:
        found["validation"] = _regression_set(sums[VALIDATION])
        found["diagnostics"] = {
            "rows": sum(s["n"] for s in sums[VALIDATION]),
            "roc": None,
            "residuals": _residuals(actors, sums[VALIDATION], seed),
        }
    found["prediction"] = {"kind": "numeric", **_numeric_entry(actors, baseline_tag, sums)}
    return found


def _roc_counts(
    actors: Any, tag: int, sums: list[dict[str, Any]]
) -> list[tuple[Array, Array, Array]]:
    """Per ROC column, the scores' merged distinct values with positive and negative counts:
    exact up to ``MAX_DISTINCT_SCORES``, else cells between the workers' order statistics."""
    n_columns = len(sums[0]["distinct"])
    edges = None
    if sum(max(s["distinct"], default=0) for s in sums) > MAX_DISTINCT_SCORES:
        points = MAX_DISTINCT_SCORES // actors.n
        sketches = actors.each(_score_sketch, tag, points)
        edges = [np.unique(np.concatenate([s[k] for s in sketches])) for k in range(n_columns)]
    answers = actors.each(_score_counts, tag, edges)
    merged = []
    for k in range(n_columns):
        values = np.concatenate([answer[k][0] for answer in answers])
        distinct, inverse = np.unique(values, return_inverse=True)
        pos = np.bincount(
            inverse, np.concatenate([a[k][1] for a in answers]), minlength=distinct.size
        )
        neg = np.bincount(
            inverse, np.concatenate([a[k][2] for a in answers]), minlength=distinct.size
        )
        merged.append((distinct, pos, neg))
    return merged


def _weighted(counted: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
    """Distinct scores with counts as the engine's curves take them: (is positive, score,
    weight), each score once as positive and once as negative."""
    values, pos, neg = counted
    truth = np.r_[np.ones(values.size, dtype=bool), np.zeros(values.size, dtype=bool)]
    return truth, np.r_[values, values], np.r_[pos, neg]


def _classification_set(
    sums: list[dict[str, Any]], counted: list[tuple[Array, Array, Array]], classes: list[str]
) -> dict[str, Any]:
    """``classification_metrics`` of the rows the sums and counts describe."""
    confusion = sum(s["confusion"] for s in sums)
    n = int(confusion.sum())
    labels = np.asarray(classes)
    true, predicted = np.divmod(np.arange(confusion.size), len(classes))
    weights = confusion.reshape(-1).astype(np.float64)

    def number(compute: Callable[[], float]) -> float | None:
        try:
            return json_number(compute()) if n else None
        except (ValueError, ZeroDivisionError, FloatingPointError):
            return None

    def roc_auc() -> float:
        if np.count_nonzero(confusion.sum(axis=1)) < 2:
            return math.nan
        areas = []
        for column in counted:
            truth, scores, weights = _weighted(column)
            areas.append(metrics.roc_auc_score(truth, scores, sample_weight=weights))
        return areas[0] if len(classes) == 2 else float(np.mean(areas))

    finite = all(s["finite"] for s in sums)
    return {
        "accuracy": number(lambda: float(np.trace(confusion)) / n),
        "log_loss": number(lambda: sum(s["log_loss"] for s in sums) / n) if finite else None,
        "roc_auc": number(roc_auc) if finite else None,
        "f1_macro": number(
            lambda: metrics.f1_score(
                labels[true],
                labels[predicted],
                average="macro",
                labels=labels,
                sample_weight=weights,
            )
        ),
        "confusion_matrix": confusion.astype(int).tolist(),
    }


def _roc_curves(
    counted: list[tuple[Array, Array, Array]], classes: list[str]
) -> dict[str, dict[str, Any]] | None:
    """``diagnostics.roc_curves`` from the merged counts."""
    if len(classes) > MAX_ROC_CLASSES:
        return None
    drawn = classes[1:] if len(classes) == 2 else classes
    curves: dict[str, dict[str, Any]] = {}
    for label, column in zip(drawn, counted, strict=True):
        truth, scores, weights = _weighted(column)
        try:
            fpr, tpr, _ = metrics.roc_curve(truth, scores, pos_label=True, sample_weight=weights)
        except ValueError:  # the rows hold no positive or no negative of this class
            continue
        auc = json_number(metrics.roc_auc_score(truth, scores, sample_weight=weights))
        kept = thin_curve(fpr, tpr, ROC_POINTS)
        curves[str(label)] = {"fpr": fpr[kept].tolist(), "tpr": tpr[kept].tolist(), "auc": auc}
    return curves


def _regression_set(sums: list[dict[str, Any]]) -> dict[str, Any]:
    """``regression_metrics`` from the workers' sums (the target's deviations merged as
    Chan, Golub & LeVeque's pairwise update)."""
    n = sum(s["n"] for s in sums)
    if n == 0 or not all(s["finite"] for s in sums):
        return {"rmse": None, "mae": None, "r2": None}
    squared = sum(s["squared"] for s in sums)
    mean = sum(s["mean"] * s["n"] for s in sums) / n
    total = sum(s["deviations"] + s["n"] * (s["mean"] - mean) ** 2 for s in sums)
    r2 = math.nan if n < 2 else 1.0 if squared == 0 else 0.0 if total == 0 else 1 - squared / total
    return {
        "rmse": json_number(math.sqrt(squared / n)),
        "mae": json_number(sum(s["absolute"] for s in sums) / n),
        "r2": json_number(r2),
    }


def _residuals(actors: Any, sums: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """``diagnostics.residual_sample`` of the validation rows, fetched by position."""
    sizes = np.array([s["n"] for s in sums])
    n = int(sizes.sum())
    rows = np.arange(n)
    if n > RESIDUAL_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(n, RESIDUAL_ROWS, replace=False))
    starts = np.r_[0, np.cumsum(sizes)]
    positions = [
        rows[(rows >= starts[i]) & (rows < starts[i + 1])] - starts[i] for i in range(sizes.size)
    ]
    answers = actors.call(_rows_at, [VALIDATION] * actors.n, positions)
    predicted = np.concatenate([a[0] for a in answers])
    actual = np.concatenate([a[1] for a in answers])
    return {
        "predicted": [json_number(value) for value in predicted.tolist()],
        "actual": [json_number(value) for value in actual.tolist()],
    }


def _numeric_entry(actors: Any, tag: int, sums: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The baseline's numeric prediction entry (``baseline._numeric``): quantile edges of the
    predictions, found exactly, and the proportions in their bins."""
    answers = sums[tag]
    n = sum(s["n"] for s in answers)
    edges: list[float] = []
    if n and all(s["finite"] for s in answers):
        at = np.linspace(0, 1, NUMERIC_BINS + 1)[1:-1]
        virtual = (n - 1) * at  # numpy's "linear" quantile
        below = np.floor(virtual).astype(np.int64)
        above = np.minimum(below + 1, n - 1)
        values = _order_statistics(actors, tag, answers, np.r_[below, above])
        a, b = values[: at.size], values[at.size :]
        gamma = virtual - below
        difference = b - a
        quantiles = np.where(gamma >= 0.5, b - difference * (1 - gamma), a + difference * gamma)
        edges = [float(edge) for edge in np.unique(quantiles)]
    counts = sum(actors.each(_bins, tag, edges))
    return {"edges": edges, "proportions": _proportions(np.asarray(counts))}


def _order_statistics(
    actors: Any, tag: int, answers: list[dict[str, Any]], ranks: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """The predictions of 0-based ``ranks`` in their sorted order over every actor: per rank
    the least key with more than ``rank`` predictions at most it, by bisection."""
    low = np.full(ranks.size, min(s["low"] for s in answers if s["n"]), dtype=np.int64)
    high = np.full(ranks.size, max(s["high"] for s in answers if s["n"]), dtype=np.int64)
    while np.any(low < high):
        middle = (low >> 1) + (high >> 1) + (low & high & 1)  # floor mean, no overflow
        counts = sum(actors.each(_at_most, tag, middle))
        enough = counts > ranks
        high = np.where(enough, middle, high)
        low = np.where(enough, low, middle + 1)
    return _from_keys(low)


def _proportions(counts: Array) -> list[float]:
    total = int(np.sum(counts))
    return [float(c) / total if total else 0.0 for c in np.asarray(counts).tolist()]
