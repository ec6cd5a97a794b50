"""One part of a dataset scored: its rows to the model's matrix, and the output columns.

The matrix is built by ``service.models.encoding.encode``, the encoder ``/v1`` predict and
``/v2`` infer end in, so a stored row means the same matrix row as the same record sent to
``/v1``: a numeric column's values as float64 (null → NaN), a categorical column's texts as
the feature's category codes (a category training never saw, and null, → missing), a feature
the dataset lacks → missing in every row. The categorical lookup is done once per distinct
text of a part (Parquet keeps them as a dictionary), not once per row.

Output columns, in order: the kept columns as stored, ``prediction`` (the class label as text,
or the regression value), ``proba_<class>`` per class (``return_proba``), then
``contribution_<feature>`` per feature and ``bias`` (``explain``); beyond two classes the
explanation is per class: ``contribution_<feature>_<class>`` and ``bias_<class>``, as
``/v1`` gives ``contributions[row][feature][class]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from service.datasets.columns import canonical_text
from service.db.tables import ColumnKind
from service.models import encoding, explanations
from service.models.cache import LoadedModel
from service.models.encoding import Numbers
from service.models.service import class_probabilities
from service.training.metrics import classification_metrics, regression_metrics

PREDICTION = "prediction"
PROBA_PREFIX = "proba_"
CONTRIBUTION_PREFIX = "contribution_"
BIAS = "bias"


def reserved(name: str) -> bool:
    """Whether a kept column would clash with an output column's name."""
    return (
        name in (PREDICTION, BIAS)
        or name.startswith((PROBA_PREFIX, CONTRIBUTION_PREFIX))
        or name.startswith(BIAS + "_")
    )


class InfiniteValue(ValueError):
    """A numeric feature holds an infinity, which ``/v1`` refuses too (422)."""

    def __init__(self, feature: str, row: int) -> None:
        super().__init__(
            f"Row {row} of column '{feature}' is infinite; a model takes finite numbers or "
            "missing values. Replace it (with null for missing) and score the dataset again."
        )


@dataclass
class Scored:
    """One part's output: its record batch and what the metrics need of it."""

    batch: pa.RecordBatch
    # Classification: class index per row; regression: the predicted values.
    predicted: npt.NDArray[Any]
    proba: npt.NDArray[np.float64] | None


@dataclass
class Unseen:
    """Per categorical feature, how many non-missing values training never saw."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, feature: str, count: int) -> None:
        if count:
            self.counts[feature] = self.counts.get(feature, 0) + count


def categorical_codes(
    column: pa.ChunkedArray | pa.Array, categories: Sequence[str]
) -> tuple[npt.NDArray[np.float64], int]:
    """A text column's category codes (NaN for missing or unseen) and how many were unseen."""
    lookup = {category: float(code) for code, category in enumerate(categories)}
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    texts = column.dictionary.to_pylist()
    # /v1 strips a text before it looks it up; so does this, once per distinct text.
    mapping = np.array(
        [lookup.get(text.strip(), math.nan) if text is not None else math.nan for text in texts]
        + [math.nan],
        dtype=np.float64,
    )
    indices = column.indices.fill_null(len(texts)).to_numpy(zero_copy_only=False)
    codes = mapping[indices.astype(np.intp, copy=False)]
    present = int(len(column) - column.null_count)
    unseen = present - int(np.count_nonzero(~np.isnan(codes)))
    return codes, unseen


def numeric_codes(
    values: npt.NDArray[np.float64], categories: Sequence[str]
) -> tuple[npt.NDArray[np.float64], int]:
    """A numeric column used by a categorical feature: each number as the text a dataset
    stores it as (``1.0`` → ``"1"``), as ``/v1`` compares a JSON number, then its code."""
    lookup = {category: float(code) for code, category in enumerate(categories)}
    distinct, inverse = np.unique(values, return_inverse=True)
    mapped = np.array(
        [
            lookup.get(canonical_text(float(v)), math.nan) if math.isfinite(v) else math.nan
            for v in distinct
        ],
        dtype=np.float64,
    )
    codes = mapped[inverse.reshape(-1)] if distinct.size else np.empty(0)
    present = int(np.count_nonzero(np.isfinite(values)))
    return codes, present - int(np.count_nonzero(~np.isnan(codes)))


def as_floats(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.float64]:
    """A numeric column as float64, NaN for null."""
    array = column.cast(pa.float64())
    if array.null_count:
        array = pc.fill_null(array, math.nan)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)


def feature_matrix(
    model: LoadedModel,
    table: pa.Table,
    kinds: dict[str, str],
    first_row: int,
    unseen: Unseen,
) -> npt.NDArray[np.float64]:
    """The (rows, features) matrix of one part, encoded as ``/v1`` encodes records."""
    cats = encoding.categories(model)
    columns: dict[str, encoding.Column] = {}
    for name in encoding.feature_names(model):
        if name not in kinds:
            continue  # absent from the dataset: missing in every row (encode does it)
        column = table.column(name)
        if name in cats:
            if kinds[name] == ColumnKind.CATEGORICAL:
                codes, count = categorical_codes(column, cats[name])
            else:
                codes, count = numeric_codes(as_floats(column), cats[name])
            unseen.add(name, count)
            columns[name] = Numbers(codes)
        else:
            values = as_floats(column)
            infinite = np.flatnonzero(np.isinf(values))
            if infinite.size:
                raise InfiniteValue(name, first_row + int(infinite[0]))
            columns[name] = Numbers(values)
    return encoding.encode(model, columns, table.num_rows)


def score(
    model: LoadedModel,
    table: pa.Table,
    kinds: dict[str, str],
    keep: Sequence[str],
    *,
    return_proba: bool,
    explain: bool,
    first_row: int,
    unseen: Unseen,
    with_proba: bool = False,
) -> Scored:
    """Score one part's rows: the output batch (kept columns first) and what metrics need
    (``with_proba``: the class probabilities even when not written, for the metrics)."""
    X = feature_matrix(model, table, kinds, first_row, unseen)
    estimator = model.estimator
    names: list[str] = []
    arrays: list[pa.Array] = []
    for name in keep:
        names.append(name)
        kind = kinds[name]
        arrays.append(
            table.column(name).combine_chunks().cast(pa.string())
            if kind == ColumnKind.CATEGORICAL
            else pa.array(as_floats(table.column(name)), type=pa.float64(), from_pandas=True)
        )
    proba: npt.NDArray[np.float64] | None = None
    classes = model.classes or []
    if model.task == "classification":
        # /v1's predictions are str() of each label; taken once per distinct label here.
        distinct, inverse = np.unique(np.asarray(estimator.predict(X)), return_inverse=True)
        texts = [str(label) for label in distinct.tolist()]
        position = {label: i for i, label in enumerate(classes)}
        inverse = inverse.reshape(-1)
        predicted: npt.NDArray[Any] = np.array(
            [position.get(text, -1) for text in texts], dtype=np.int64
        )[inverse]
        names.append(PREDICTION)
        arrays.append(
            pa.DictionaryArray.from_arrays(
                pa.array(inverse.astype(np.int32)), pa.array(texts, type=pa.string())
            ).cast(pa.string())
        )
        if hasattr(estimator, "predict_proba") and (return_proba or with_proba):
            proba = class_probabilities(estimator, X, classes)
            if return_proba:
                for j, label in enumerate(classes):
                    names.append(f"{PROBA_PREFIX}{label}")
                    arrays.append(pa.array(proba[:, j], type=pa.float64()))
    else:
        predicted = np.asarray(estimator.predict(X), dtype=np.float64)
        names.append(PREDICTION)
        arrays.append(pa.array(predicted, type=pa.float64(), from_pandas=True))
    if explain:
        explained = explanations.explain_rows(estimator, X, None)
        _add_explanation(names, arrays, model, explained.contributions, explained.bias)
    batch = pa.RecordBatch.from_arrays(arrays, names=names)
    return Scored(batch=batch, predicted=predicted, proba=proba)


def _add_explanation(
    names: list[str],
    arrays: list[pa.Array],
    model: LoadedModel,
    contributions: npt.NDArray[np.float64],
    bias: npt.NDArray[np.float64],
) -> None:
    features = encoding.feature_names(model)
    n = contributions.shape[0]
    if contributions.ndim == 2:
        for j, feature in enumerate(features):
            names.append(f"{CONTRIBUTION_PREFIX}{feature}")
            arrays.append(pa.array(contributions[:, j], type=pa.float64()))
        names.append(BIAS)
        arrays.append(pa.array(np.full(n, float(bias)), type=pa.float64()))
        return
    classes = model.classes or [str(k) for k in range(contributions.shape[2])]
    for j, feature in enumerate(features):
        for k, label in enumerate(classes):
            names.append(f"{CONTRIBUTION_PREFIX}{feature}_{label}")
            arrays.append(pa.array(contributions[:, j, k], type=pa.float64()))
    for k, label in enumerate(classes):
        names.append(f"{BIAS}_{label}")
        arrays.append(pa.array(np.full(n, float(bias[k])), type=pa.float64()))


class TargetScore:
    """The model's metric set over every part, on the rows whose target is known.

    Holds, per row, the target's class index (or value), the prediction and the class
    probabilities: a few numbers a row, never the features.
    """

    def __init__(self, model: LoadedModel, kind: str) -> None:
        self.model = model
        self.kind = kind
        self.classification = model.task == "classification"
        self._targets: list[npt.NDArray[Any]] = []
        self._predicted: list[npt.NDArray[Any]] = []
        self._proba: list[npt.NDArray[np.float64]] = []
        self.unknown_labels = 0

    def add(self, column: pa.ChunkedArray, scored: Scored) -> None:
        known = target_values(self.model, self.kind, column)
        if known is not None:
            self.add_values(*known, scored.predicted, scored.proba)

    def add_values(
        self,
        values: npt.NDArray[Any],
        unknown_labels: int,
        predicted: npt.NDArray[Any],
        proba: npt.NDArray[np.float64] | None,
    ) -> None:
        """A part's ``target_values`` and its predictions (from wherever it was scored)."""
        self.unknown_labels += unknown_labels
        self._targets.append(values)
        self._predicted.append(predicted)
        if proba is not None:
            self._proba.append(proba)

    def metrics(self) -> tuple[dict[str, Any] | None, int]:
        """The metric set and how many rows it was computed on; None when no row had one."""
        if not self._targets:
            return None, 0
        target = np.concatenate(self._targets)
        predicted = np.concatenate(self._predicted)
        known = ~np.isnan(target)
        n = int(np.count_nonzero(known))
        if n == 0:
            return None, 0
        if not self.classification:
            return regression_metrics(target[known], predicted[known]), n
        labels = np.asarray(self.model.classes or [], dtype=object)
        y = labels[target[known].astype(np.intp)]
        proba = np.concatenate(self._proba)[known] if self._proba else None
        chosen = predicted[known]
        predicted_labels = None if proba is not None else labels[np.clip(chosen, 0, None)]
        return classification_metrics(y, proba, list(labels), predicted_labels), n


def target_values(
    model: LoadedModel, kind: str, column: pa.ChunkedArray
) -> tuple[npt.NDArray[np.float64], int] | None:
    """A part's target as the metrics take it (class index or value, NaN where unknown) and
    how many labels the model does not know; None when it cannot be compared (a text target
    of a regression)."""
    if model.task == "classification":
        classes = model.classes or []
        if kind == ColumnKind.CATEGORICAL:
            return categorical_codes(column, classes)
        return numeric_codes(as_floats(column), classes)
    if kind == ColumnKind.CATEGORICAL:
        return None  # a text target cannot be compared with a regression's numbers
    return as_floats(column), 0
