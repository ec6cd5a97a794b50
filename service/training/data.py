"""From dataset columns to the engine's arrays: X, y and the encoding that maps them back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.tree._binning import BinMapper
from service.datasets.columns import CategoricalColumn, ColumnData, NumericColumn
from service.db.tables import ColumnKind
from service.training.part_table import PartTable, PassAnswer
from service.training.spec import TrainingError, TrainingSpec

# The engine bins a categorical feature into at most this many categories.
MAX_CATEGORIES = 255


@dataclass(frozen=True, slots=True)
class TrainingData:
    """The rows a run learns from (rows with a missing target are already left out)."""

    X: npt.NDArray[np.float64]  # (n_rows, n_features); NaN missing; categories as codes
    y: npt.NDArray[Any]  # (n_rows,): str labels (classification) or float64 (regression)
    features: list[dict[str, str]]
    categorical_features: list[int]
    categories: dict[str, list[str]]
    classes: list[str] | None
    # Set when the rows stay in the dataset's parts (then X is empty, shape (0, n_features)):
    # fits read them part by part into bin codes (service.training.part_table).
    parts: PartRows | None = None


@dataclass(frozen=True, slots=True)
class PartRows:
    """Where a run's rows lie in the parts: the global row of each row of ``y``, ascending
    (``rows``; None when every row of the table is a row of ``y``, as when no target is
    missing: then no array of them, 8 bytes a row, is held through the run)."""

    table: PartTable
    rows: npt.NDArray[np.intp] | None
    features: tuple[str, ...]
    # The codes of each fit of the run, by the fitted estimator's id, until its metrics are
    # computed (service.training.run); they go with the run.
    coded: dict[int, Any] = field(default_factory=dict)

    def at(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """The global rows of ``rows`` (indices into ``y``)."""
        return rows if self.rows is None else self.rows[rows]

    def values(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """The float rows ``rows`` (ascending indices into ``y``), read part by part."""
        return self.table.gather(self.at(rows), self.features)

    def bin(
        self,
        mapper: BinMapper,
        groups: Sequence[npt.NDArray[np.intp]],
        *,
        feature_major: bool = False,
    ) -> list[npt.NDArray[np.unsignedinteger[Any]]]:
        """Each group of rows (ascending indices into ``y``) binned by ``mapper``, one pass."""
        return self.table.bin(
            mapper, [self.at(g) for g in groups], self.features, feature_major=feature_major
        )


def prepare_from_parts(
    spec: TrainingSpec, table: PartTable, answers: Sequence[PassAnswer] | None = None
) -> TrainingData:
    """As :func:`prepare`, with the feature values left in the parts: one pass reads the
    target and the categorical features' categories, nothing else (``answers``: that pass
    made on the Dask workers, :meth:`PartTable.first_pass`)."""
    missing = [name for name in spec.columns if name not in table]
    if missing:
        raise TrainingError(
            "missing_columns",
            "The dataset lacks the columns " + ", ".join(f"'{m}'" for m in missing) + ".",
        )
    target = table.first_pass(spec.target, spec.features, answers)
    y, keep = _target(spec, target)
    features, categorical, categories = describe_features(table, spec.features)
    classes = _classes(y) if spec.task == "classification" else None
    return TrainingData(
        X=np.empty((0, len(spec.features))),
        y=y,
        features=features,
        categorical_features=categorical,
        categories=categories,
        classes=classes,
        parts=PartRows(
            table,
            None if keep.all() else np.flatnonzero(keep).astype(np.intp),
            tuple(spec.features),
        ),
    )


def _check_categories(name: str, count: int) -> None:
    if count > MAX_CATEGORIES:
        raise TrainingError(
            "too_many_categories",
            f"Feature '{name}' has {count} categories; at most "
            f"{MAX_CATEGORIES} are supported. Leave it out of 'features', or group "
            "its rare categories.",
        )


def prepare(spec: TrainingSpec, columns: Mapping[str, ColumnData]) -> TrainingData:
    missing = [name for name in spec.columns if name not in columns]
    if missing:
        raise TrainingError(
            "missing_columns",
            "The dataset lacks the columns " + ", ".join(f"'{m}'" for m in missing) + ".",
        )
    y, keep = _target(spec, columns[spec.target])
    blocks = []
    features: list[dict[str, str]] = []
    categorical: list[int] = []
    categories: dict[str, list[str]] = {}
    for index, name in enumerate(spec.features):
        column = columns[name]
        if isinstance(column, CategoricalColumn):
            _check_categories(name, len(column.categories))
            categorical.append(index)
            categories[name] = list(column.categories)
        blocks.append(column.as_float()[keep])
        features.append({"name": name, "kind": column.kind.value})
    X = np.column_stack(blocks) if blocks else np.empty((int(keep.sum()), 0))
    classes = _classes(y) if spec.task == "classification" else None
    return TrainingData(
        X=np.ascontiguousarray(X, dtype=np.float64),
        y=y,
        features=features,
        categorical_features=categorical,
        categories=categories,
        classes=classes,
    )


def _target(
    spec: TrainingSpec, column: ColumnData
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """The target values of the rows that have one, and which rows those are."""
    if isinstance(column, CategoricalColumn):
        if spec.task != "classification":
            raise TrainingError(
                "categorical_target",
                f"The target '{spec.target}' is categorical; regression needs numbers.",
            )
        keep = column.codes >= 0
        labels = np.asarray(column.categories, dtype=object)
        y: npt.NDArray[Any] = (
            labels[column.codes[keep]].astype(str) if labels.size else np.array([], dtype=str)
        )
    else:
        assert isinstance(column, NumericColumn)
        keep = ~np.isnan(column.values)
        values = column.values[keep]
        y = numeric_labels(values) if spec.task == "classification" else values
    if not keep.any():
        raise TrainingError(
            "no_rows", f"Every row's target '{spec.target}' is missing; there is nothing to learn."
        )
    if spec.task == "classification" and np.unique(y).size < 2:
        raise TrainingError(
            "one_class",
            f"The target '{spec.target}' has only one class ({y[0]!r}) in the rows that have "
            "a value; classification needs at least two.",
        )
    if spec.task == "regression" and np.ptp(y) == 0:
        raise TrainingError(
            "constant_target",
            f"The target '{spec.target}' is constant ({float(y[0])!r}); there is nothing to "
            "learn. Choose another target.",
        )
    return y, keep


def _classes(y: npt.NDArray[Any]) -> list[str]:
    """The sorted distinct labels (np.unique sorts strings by code point, as sorted does),
    without a Python string per row."""
    return [str(label) for label in np.unique(y).tolist()]


def numeric_labels(values: npt.NDArray[np.float64]) -> npt.NDArray[np.str_]:
    """Each number as its class label (:func:`_label`), one Python string per distinct value
    rather than per row: a 2 M-row target took 28 s and ~110 MiB of strings the other way."""
    distinct = np.unique(values)
    labels: npt.NDArray[np.str_] = np.array([_label(v) for v in distinct.tolist()], dtype=str)
    return labels[np.searchsorted(distinct, values)] if distinct.size else labels


def _label(value: float) -> str:
    """A number as a class label, written the way datasets write numbers as categories."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def describe_features(
    table: PartTable, names: Sequence[str]
) -> tuple[list[dict[str, str]], list[int], dict[str, list[str]]]:
    """The features as a model records them (name and kind), the positions of the categorical
    ones and their categories, from a table whose categories are known (after its first pass)."""
    features: list[dict[str, str]] = []
    categorical: list[int] = []
    categories: dict[str, list[str]] = {}
    for index, name in enumerate(names):
        kind = table.kinds[name]
        if kind == ColumnKind.CATEGORICAL:
            found = table.categories[name]
            _check_categories(name, len(found))
            categorical.append(index)
            categories[name] = list(found)
        features.append({"name": name, "kind": str(ColumnKind(kind).value)})
    return features, categorical, categories
