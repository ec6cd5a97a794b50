"""Rules of monitoring: feedback joined to the log, and the drift and performance report."""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from service.datasets.columns import canonical_text
from service.db.tables import ModelRecord
from service.errors import InvalidInput
from service.models.service import get_model
from service.monitoring import repository
from service.monitoring.aggregates import ROWS, WindowCounts, steps, tally_rows, whole_hours
from service.monitoring.baseline import drift, psi
from service.monitoring.log import PredictionLog
from service.training.metrics import classification_metrics, regression_metrics

DEFAULT_WINDOW = timedelta(hours=24)
TOP_UNSEEN = 5
# How long feedback waits for the predictions still queued for the log to be written.
FEEDBACK_WAIT_SECONDS = 15.0


# --- feedback ---------------------------------------------------------------------------------


def feedback(
    session: Session,
    log: PredictionLog | None,
    model_id: str,
    ids: list[str],
    actuals: list[Any],
) -> dict[str, Any]:
    record = get_model(session, model_id)
    if len(ids) != len(actuals):
        raise InvalidInput(
            f"'ids' has {len(ids)} items but 'actuals' has {len(actuals)}; send one actual per id.",
            errors=[
                {"loc": ["body", "actuals"], "msg": f"{len(actuals)} items, expected {len(ids)}"}
            ],
        )
    coded = _coded_actuals(record, actuals)
    if log is not None:
        log.drain(FEEDBACK_WAIT_SECONDS)  # the rows just predicted are written first
    unique = list(dict.fromkeys(ids))
    known = repository.known_ids(session, model_id, unique)
    repository.set_actuals(
        session, model_id, [(i, a) for i, a in zip(ids, coded, strict=True) if i in known]
    )
    unknown = [i for i in ids if i not in known]
    return {
        "model_id": model_id,
        "received": len(ids),
        "matched": len(ids) - len(unknown),
        "unknown": len(unknown),
        "unknown_ids": unknown[:20],
    }


def _coded_actuals(record: ModelRecord, actuals: list[Any]) -> list[float]:
    """Actuals as the log stores them: the class index, or the value; a wrong type is 422."""
    if record.task == "classification":
        classes = [str(c) for c in record.classes or []]
        index = {label: i for i, label in enumerate(classes)}
        coded = []
        for i, actual in enumerate(actuals):
            text = _label_text(actual)
            if text is None or text not in index:
                shown = ", ".join(f"'{c}'" for c in classes[:10])
                raise InvalidInput(
                    f"Actual {i} ({actual!r}) is not a class of this classifier; its classes "
                    f"are {shown}.",
                    errors=[{"loc": ["body", "actuals", i], "msg": "not a class of the model"}],
                )
            coded.append(float(index[text]))
        return coded
    coded = []
    for i, actual in enumerate(actuals):
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            raise InvalidInput(
                f"Actual {i} ({actual!r}) is not a number; this regressor's actuals are numbers.",
                errors=[{"loc": ["body", "actuals", i], "msg": "not a number"}],
            )
        value = float(actual)
        if not math.isfinite(value):
            raise InvalidInput(
                f"Actual {i} is not finite; send a finite number.",
                errors=[{"loc": ["body", "actuals", i], "msg": "not finite"}],
            )
        coded.append(value)
    return coded


def _label_text(actual: Any) -> str | None:
    if isinstance(actual, str):
        return actual.strip()
    if isinstance(actual, bool):
        return "true" if actual else "false"
    if isinstance(actual, int | float) and math.isfinite(float(actual)):
        return canonical_text(float(actual))
    return None


# --- the report ---------------------------------------------------------------------------------


def window(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """The report's ``[since, until)``: by default the 24 hours before ``until`` (now), then
    widened to whole hours (``since`` rounded down, ``until`` up), which is what the hourly
    counts can answer."""
    # A time without an offset is UTC, as every time the API answers is.
    since, until = (t if t is None or t.tzinfo else t.replace(tzinfo=UTC) for t in (since, until))
    end = until or now
    try:
        start = since or end - DEFAULT_WINDOW
        if start > end:
            raise InvalidInput(
                f"'since' ({start.isoformat()}) is after 'until' ({end.isoformat()}).",
                errors=[{"loc": ["query", "since"], "msg": "after until"}],
            )
        return whole_hours(start, end)
    except OverflowError:
        # Within an hour of year 1 or 9999 there is no whole hour to round to.
        name = "until" if until is not None else "since"
        raise InvalidInput(
            f"'{name}' is too close to the end of the calendar to report on.",
            errors=[{"loc": ["query", name], "msg": "out of range"}],
        ) from None


def report(
    session: Session,
    log: PredictionLog | None,
    model_id: str,
    since: datetime,
    until: datetime,
    *,
    from_rows: bool = False,
) -> dict[str, Any]:
    """The report over the whole hours ``[since, until)``, from the hourly counts; with
    ``from_rows`` from the logged rows themselves instead (slow; the tests hold both equal)."""
    record = get_model(session, model_id)
    baseline = (record.metrics or {}).get("monitoring")
    n_features = len(baseline["features"]) if baseline is not None else len(record.features or [])
    counts = (
        _counts_from_rows(session, record, baseline, since, until)
        if from_rows
        else _counts(session, model_id, n_features, since, until)
    )
    n_labelled, labelled = repository.window_labelled(session, model_id, since, until)
    out: dict[str, Any] = {
        "model_id": model_id,
        "window": {"since": since, "until": until},
        "n_predictions": counts.rows,
        "baseline": baseline is not None,
        "note": None,
        "features": [],
        "prediction": None,
        "performance": _performance(record, n_labelled, labelled),
        "timeline": [],
    }
    if baseline is None:
        out["note"] = (
            "This model was trained before the server kept a training baseline with each "
            "model, so its live rows cannot be compared with its training rows; train it "
            "again to monitor drift. Counts and performance are still reported."
        )
        out["timeline"] = _timeline(record, counts, None, labelled, since, until)
        return out
    entries = baseline["features"]
    categories = (record.encoding or {}).get("categories") or {}
    for j, entry in enumerate(entries):
        out["features"].append(
            _feature(entry, counts.column(j, len(entry["proportions"])), counts.unseen.get(j),
                     categories)
        )  # fmt: skip
    prediction = baseline["prediction"]
    predicted = counts.column(len(entries), len(prediction["proportions"]))
    value = psi(prediction["proportions"], predicted)
    out["prediction"] = {
        "psi": value,
        "drift": drift(value),
        "training": prediction["proportions"],
        "live": _shares(predicted),
        "bins": _labels(prediction, prediction.get("labels")),
    }
    out["timeline"] = _timeline(record, counts, prediction, labelled, since, until)
    if log is not None:
        log.set_gauges(model_id, out)
    return out


def _counts(
    session: Session, model_id: str, n_features: int, since: datetime, until: datetime
) -> WindowCounts:
    return WindowCounts.from_sums(
        repository.window_totals(session, model_id, since, until),
        repository.window_hourly(session, model_id, since, until, [ROWS, n_features]),
        repository.window_unseen_counts(session, model_id, since, until),
        n_features,
    )


def _counts_from_rows(
    session: Session,
    record: ModelRecord,
    baseline: dict[str, Any] | None,
    since: datetime,
    until: datetime,
) -> WindowCounts:
    features = [str(f["name"]) for f in record.features or []]
    width = None if baseline is None else len(baseline["features"]) + 1
    rows = repository.window_rows(session, record.id, since, until)
    tally = tally_rows(record.id, rows, features, width)
    # The cap on distinct unseen values per hour holds for the counts only; none is reached
    # where the two are compared.
    return WindowCounts.from_tally(tally, len(features) if width is None else width - 1)


def _feature(
    entry: dict[str, Any],
    counts: npt.NDArray[np.int64],
    unseen: Counter[str] | None,
    categories: dict[str, list[str]],
) -> dict[str, Any]:
    expected = entry["proportions"]
    value = psi(expected, counts)
    categorical = entry["kind"] == "categorical"
    missing_bin = len(expected) - 2 if categorical else len(expected) - 1
    total = int(counts.sum())
    return {
        "name": entry["name"],
        "kind": entry["kind"],
        "psi": value,
        "drift": drift(value),
        "missing_rate": {
            "training": expected[missing_bin],
            "live": counts[missing_bin] / total if total else None,
        },
        "unseen": {
            "count": int(counts[-1]),
            "top": [
                {"value": v, "count": c}
                for v, c in sorted((unseen or Counter()).items(), key=lambda vc: (-vc[1], vc[0]))[
                    :TOP_UNSEEN
                ]
            ],
        }
        if categorical
        else None,
        "training": expected,
        "live": _shares(counts),
        "bins": _labels(entry, categories.get(entry["name"])),
    }


def _shares(counts: npt.NDArray[np.int64]) -> list[float]:
    total = int(counts.sum())
    return [float(c) / total if total else 0.0 for c in counts]


def _labels(entry: dict[str, Any], categories: list[str] | None) -> list[str]:
    """A person's name for each bin: ``< 1.5``, ``[1.5, 3)``, ``≥ 3``, a category, missing…"""
    if "edges" in entry:
        edges = entry["edges"]
        if not edges:
            return ["all", "missing"]
        names = [f"< {edges[0]:.4g}"]
        names += [f"[{a:.4g}, {b:.4g})" for a, b in itertools.pairwise(edges)]
        return [*names, f"≥ {edges[-1]:.4g}", "missing"]
    n = len(entry["proportions"]) - 2
    names = list(categories or [])[:n] or [str(i) for i in range(n)]
    return [*names, "missing", "unseen"]


Labelled = list[tuple[datetime, float | None, bytes | None, float]]


def _performance(record: ModelRecord, n_labelled: int, rows: Labelled) -> dict[str, Any]:
    out: dict[str, Any] = {"n_labelled": n_labelled}
    if len(rows) < n_labelled:
        out["n_scored"] = len(rows)  # only the newest LABELLED_ROWS are scored
    if not rows:
        return out
    actual = np.array([a for _, _, _, a in rows], dtype=np.float64)
    if record.task != "classification":
        predicted = np.array(
            [math.nan if p is None else p for _, p, _, _ in rows], dtype=np.float64
        )
        kept = ~np.isnan(predicted)
        return out | regression_metrics(actual[kept], predicted[kept])
    classes = [str(c) for c in record.classes or []]
    labels = np.asarray(classes)
    y = labels[actual.astype(np.intp)]
    n_classes = len(classes)
    if all(q is not None and len(q) == 4 * n_classes for _, _, q, _ in rows):
        proba = np.frombuffer(b"".join(q for _, _, q, _ in rows if q is not None), dtype=np.float32)
        return out | classification_metrics(
            y, proba.reshape(-1, n_classes).astype(np.float64), classes
        )
    codes = [p for _, p, _, _ in rows]
    kept = np.array([p is not None for p in codes])
    predicted = labels[np.array([int(p) for p in codes if p is not None], dtype=np.intp)]
    return out | classification_metrics(y[kept], None, classes, predicted=predicted)


def _timeline(
    record: ModelRecord,
    counts: WindowCounts,
    prediction: dict[str, Any] | None,
    labelled: Labelled,
    since: datetime,
    until: datetime,
) -> list[dict[str, Any]]:
    """The window in at most 48 periods: rows logged, the prediction's PSI, and the labelled
    rows' headline metric (accuracy, or RMSE) in each, for the console's chart."""
    classification = record.task == "classification"
    metric = "accuracy" if classification else "rmse"
    periods = steps(since, until)
    starts = [start for start, _ in periods]
    hits: list[list[float]] = [[] for _ in periods]
    for logged_at, predicted, _, actual in labelled:
        if predicted is None:
            continue
        k = bisect.bisect_right(starts, logged_at) - 1
        if 0 <= k < len(periods):
            error = float(predicted == actual) if classification else (predicted - actual) ** 2
            hits[k].append(error)
    out = []
    for (start, end), scored in zip(periods, hits, strict=True):
        n_rows = sum(n for hour, n in counts.hourly_rows.items() if start <= hour < end)
        value = None
        if prediction is not None:
            n_bins = len(prediction["proportions"])
            predicted_bins = np.zeros(n_bins, dtype=np.int64)
            for hour, bins in counts.hourly_prediction.items():
                if start <= hour < end:
                    predicted_bins[: min(n_bins, bins.size)] += bins[:n_bins]
            value = psi(prediction["proportions"], predicted_bins)
        score = None
        if scored:
            mean = float(np.mean(scored))
            score = mean if classification else math.sqrt(mean)
        out.append({"since": start, "until": end, "n_predictions": n_rows,
                    "prediction_psi": value, "n_labelled": len(scored), metric: score})  # fmt: skip
    return out
