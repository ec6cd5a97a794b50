"""The training baseline a monitoring report compares live rows with, and the bins of both.

Kept with the model at training (inside its metrics document, as the ROC curves are), so a
report never re-reads the training table. Each feature gets a histogram of the training
rows: a numeric feature on ``NUMERIC_BINS`` quantile bins (edges between them, so each holds
about a tenth of the rows) plus one bin for missing; a categorical feature one bin per
training category, one for missing and one for a category training never saw (empty in
training by definition, which is exactly what makes it show in the PSI). The predictions get
one too: per class for a classifier, quantile bins for a regressor.

The bin of a value is what the prediction log stores per row (``bins``), so a report over a
million logged rows only counts small integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

NUMERIC_BINS = 10
# PSI of an empty bin is infinite; each proportion is floored here first, as is usual
# (Yurdakul 2018, "Statistical properties of population stability index").
PSI_FLOOR = 1e-4
# The usual reading of PSI (Siddiqi 2006, "Credit Risk Scorecards"): below 0.1 no shift,
# up to 0.25 a moderate one, beyond a major one.
MODERATE, MAJOR = 0.1, 0.25


def training_baseline(
    X: npt.NDArray[np.float64] | list[dict[str, Any]],
    features: Sequence[dict[str, str]],
    categories: dict[str, list[str]],
    predictions: npt.NDArray[Any],
    classes: Sequence[str] | None,
    *,
    rows: int | None = None,
) -> dict[str, Any]:
    """``{"rows", "features": [...], "prediction": {...}}`` of the training rows ``X`` and the
    model's ``predictions`` (class labels, or values) on the rows it is scored on.

    ``X`` may be the rows' entries already (:func:`feature_baseline`): a fit from parts
    describes its binning's sample as soon as it has read it and drops the rows (30 MiB of
    200,000 × 20 floats) before the trees grow. ``rows``: how many training rows there are,
    when ``X`` is a uniform sample of them (a fit from parts reads no more than its binning's
    sample; the proportions are the sample's).
    """
    if isinstance(X, list):
        if rows is None:
            raise ValueError("training_baseline of described features needs the row count")
        described, count = X, rows
    else:
        described = feature_baseline(X, features, categories)
        count = int(X.shape[0]) if rows is None else rows
    if classes is not None:
        index = {label: i for i, label in enumerate(classes)}
        codes = np.array([index.get(str(label), -1) for label in predictions], dtype=np.float64)
        codes[codes < 0] = np.nan
        prediction = {
            "kind": "categorical",
            "labels": list(classes),
            **_categorical(codes, len(classes)),
        }
    else:
        prediction = {"kind": "numeric", **_numeric(np.asarray(predictions, dtype=np.float64))}
    return {"rows": count, "features": described, "prediction": prediction}


def feature_baseline(
    X: npt.NDArray[np.float64],
    features: Sequence[dict[str, str]],
    categories: dict[str, list[str]],
) -> list[dict[str, Any]]:
    """The baseline's ``features`` entries: each feature's histogram over the rows ``X``."""
    described = []
    for j, feature in enumerate(features):
        name = feature["name"]
        column = X[:, j]
        if name in categories:
            entry = _categorical(column, len(categories[name]))
        else:
            entry = _numeric(column)
        described.append({"name": name, "kind": feature["kind"], **entry})
    return described


def _numeric(column: npt.NDArray[np.float64]) -> dict[str, Any]:
    present = column[~np.isnan(column)]
    if present.size:
        quantiles = np.quantile(present, np.linspace(0, 1, NUMERIC_BINS + 1)[1:-1])
        edges = [float(edge) for edge in np.unique(quantiles)]
    else:
        edges = []
    counts = np.bincount(numeric_bins(column, edges), minlength=len(edges) + 2)
    return {"edges": edges, "proportions": _proportions(counts)}


def _categorical(codes: npt.NDArray[np.float64], n_categories: int) -> dict[str, Any]:
    unseen = np.zeros(codes.shape, dtype=np.bool_)
    counts = np.bincount(categorical_bins(codes, n_categories, unseen), minlength=n_categories + 2)
    return {"proportions": _proportions(counts)}


def _proportions(counts: npt.NDArray[np.int64]) -> list[float]:
    total = int(counts.sum())
    return [float(c) / total if total else 0.0 for c in counts]


def numeric_bins(column: npt.NDArray[np.float64], edges: Sequence[float]) -> npt.NDArray[np.intp]:
    """Bin of each value: 0..len(edges) by the edges (a value on an edge goes right), and
    len(edges) + 1 for missing."""
    bins = np.searchsorted(np.asarray(edges, dtype=np.float64), column, side="right")
    bins[np.isnan(column)] = len(edges) + 1
    return bins


def categorical_bins(
    codes: npt.NDArray[np.float64], n_categories: int, unseen: npt.NDArray[np.bool_]
) -> npt.NDArray[np.intp]:
    """Bin of each code: the code itself, ``n_categories`` for missing (or a code outside
    ``[0, n_categories)``, which the encoder never makes), ``n_categories + 1`` where
    ``unseen`` (the encoder made the value missing because training never saw it)."""
    known = (codes >= 0) & (codes < n_categories)  # False for NaN
    bins = np.where(known, np.nan_to_num(codes), n_categories).astype(np.intp)
    bins[unseen] = n_categories + 1
    return bins


def n_bins(entry: dict[str, Any]) -> int:
    return len(entry["proportions"])


def psi(expected: Sequence[float], counts: npt.NDArray[np.int64]) -> float | None:
    """Population stability index of live ``counts`` against training ``expected``
    proportions over the same bins: sum of (live − training) × ln(live / training)."""
    total = int(counts.sum())
    if total == 0:
        return None
    live = np.maximum(counts / total, PSI_FLOOR)
    train = np.maximum(np.asarray(expected, dtype=np.float64), PSI_FLOOR)
    value = float(np.sum((live - train) * np.log(live / train)))
    return value if math.isfinite(value) else None


def drift(value: float | None) -> str | None:
    if value is None:
        return None
    return "none" if value < MODERATE else "moderate" if value <= MAJOR else "major"
