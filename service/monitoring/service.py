"""Rules of monitoring: feedback joined to the log, and the drift and performance report."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.orm import Session

from service.datasets.columns import canonical_text
from service.db.tables import ModelRecord
from service.errors import InvalidInput
from service.models.service import get_model
from service.monitoring import repository
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


# --- the report -------------------------------------------------------------------------------


def window(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """The report's ``[since, until)``: by default the 24 hours before ``until`` (now)."""
    end = until or now
    start = since or end - DEFAULT_WINDOW
    if start > end:
        raise InvalidInput(
            f"'since' ({start.isoformat()}) is after 'until' ({end.isoformat()}).",
            errors=[{"loc": ["query", "since"], "msg": "after until"}],
        )
    return start, end


def report(
    session: Session,
    log: PredictionLog | None,
    model_id: str,
    since: datetime,
    until: datetime,
) -> dict[str, Any]:
    record = get_model(session, model_id)
    baseline = (record.metrics or {}).get("monitoring")
    out: dict[str, Any] = {
        "model_id": model_id,
        "window": {"since": since, "until": until},
        "n_predictions": repository.window_count(session, model_id, since, until),
        "baseline": baseline is not None,
        "note": None,
        "features": [],
        "prediction": None,
        "performance": _performance(session, record, since, until),
    }
    if baseline is None:
        out["note"] = (
            "This model was trained before the server kept a training baseline with each "
            "model, so its live rows cannot be compared with its training rows; train it "
            "again to monitor drift. Counts and performance are still reported."
        )
        return out
    entries = baseline["features"]
    blobs = repository.window_bins(session, model_id, since, until)
    width = len(entries) + 1
    bins = np.frombuffer(blobs, dtype=np.uint16).reshape(-1, width)
    unseen_values = _unseen_values(repository.window_unseen(session, model_id, since, until))
    categories = (record.encoding or {}).get("categories") or {}
    for j, entry in enumerate(entries):
        out["features"].append(
            _feature(entry, bins[:, j], unseen_values.get(entry["name"]), categories)
        )
    prediction = baseline["prediction"]
    counts = np.bincount(bins[:, -1], minlength=len(prediction["proportions"]))
    value = psi(prediction["proportions"], counts)
    out["prediction"] = {
        "psi": value,
        "drift": drift(value),
        "training": prediction["proportions"],
        "live": _shares(counts),
        "bins": _labels(prediction, prediction.get("labels")),
    }
    if log is not None:
        log.feature_psi[model_id] = {
            f["name"]: f["psi"] for f in out["features"] if f["psi"] is not None
        }
        if value is not None:
            log.prediction_psi[model_id] = value
    return out


def _feature(
    entry: dict[str, Any],
    column: npt.NDArray[np.uint16],
    unseen: Counter[str] | None,
    categories: dict[str, list[str]],
) -> dict[str, Any]:
    expected = entry["proportions"]
    counts = np.bincount(column, minlength=len(expected))[: len(expected)]
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
                {"value": v, "count": c} for v, c in (unseen or Counter()).most_common(TOP_UNSEEN)
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


def _unseen_values(rows: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    found: dict[str, Counter[str]] = {}
    for row in rows:
        for name, value in (row or {}).items():
            found.setdefault(name, Counter())[str(value)] += 1
    return found


def _performance(
    session: Session, record: ModelRecord, since: datetime, until: datetime
) -> dict[str, Any]:
    rows = repository.window_labelled(session, record.id, since, until)
    out: dict[str, Any] = {"n_labelled": len(rows)}
    if not rows:
        return out
    actual = np.array([a for _, _, a in rows], dtype=np.float64)
    if record.task != "classification":
        predicted = np.array([math.nan if p is None else p for p, _, _ in rows], dtype=np.float64)
        kept = ~np.isnan(predicted)
        return out | regression_metrics(actual[kept], predicted[kept])
    classes = [str(c) for c in record.classes or []]
    labels = np.asarray(classes)
    y = labels[actual.astype(np.intp)]
    n_classes = len(classes)
    if all(q is not None and len(q) == 4 * n_classes for _, q, _ in rows):
        proba = np.frombuffer(b"".join(q for _, q, _ in rows if q is not None), dtype=np.float32)
        return out | classification_metrics(
            y, proba.reshape(-1, n_classes).astype(np.float64), classes
        )
    codes = [p for p, _, _ in rows]
    kept = np.array([p is not None for p in codes])
    predicted = labels[np.array([int(p) for p in codes if p is not None], dtype=np.intp)]
    return out | classification_metrics(y[kept], None, classes, predicted=predicted)
