"""Rows to predict on, as the server takes them, and its answers as the caller gave them.

Input may be a DataFrame, a 2-D (or one-row 1-D) array in the model's feature order, a list
of records, or one record. A DataFrame's answers come back as pandas objects on its index;
everything else gets NumPy arrays.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Rows:
    """A predict body's row part, and the pandas index to answer on (``None``: NumPy)."""

    body: dict[str, Any]
    index: Any = None

    @property
    def as_pandas(self) -> bool:
        return self.index is not None


def rows_of(data: Any, features: Sequence[str]) -> Rows:
    """The ``records`` or ``columns``/``rows`` part of a predict body for ``data``."""
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(data, pandas.DataFrame):
        columns = [str(column) for column in data.columns]
        values = data.astype(object).to_numpy().tolist()
        return Rows({"columns": columns, "rows": _clean_rows(values)}, data.index)
    if isinstance(data, Mapping):
        return Rows({"records": [_clean_record(data)]})
    if isinstance(data, np.ndarray):
        matrix = data.reshape(1, -1) if data.ndim == 1 else data
        if matrix.ndim != 2 or matrix.shape[1] != len(features):
            raise ValueError(
                f"an array to predict on must have the model's {len(features)} features as "
                f"columns ({', '.join(features)}); its shape is {data.shape}"
            )
        rows = matrix.tolist()
        if matrix.dtype.kind == "O":
            # Float NaN is handled when the body is written (coppice._json); objects may
            # also hold NumPy scalars or pandas' NA.
            rows = _clean_rows(rows)
        return Rows({"columns": list(features), "rows": rows})
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        if all(isinstance(row, Mapping) for row in data):
            return Rows({"records": [_clean_record(row) for row in data]})
        return rows_of(np.asarray(data, dtype=object), features)
    raise TypeError(
        "predict takes a pandas DataFrame, a NumPy array with the model's features as columns, "
        f"a list of records (dicts) or one record; got {type(data).__name__}"
    )


def _clean(value: Any) -> Any:
    """A cell as JSON has it: NaN, None and pandas' NA are missing (``null``)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    pandas = sys.modules.get("pandas")
    if pandas is not None and pandas.isna(value):
        return None
    return value


def _clean_rows(rows: list[list[Any]]) -> list[list[Any]]:
    return [[_clean(value) for value in row] for row in rows]


def _clean_record(record: Mapping[str, Any]) -> dict[str, Any]:
    return {str(key): _clean(value) for key, value in record.items()}


def predictions_out(values: list[Any], task: str, rows: Rows) -> Any:
    """Predicted labels (classification) or values (regression): an array, or a Series."""
    array = np.asarray(values, dtype=float if task == "regression" else object)
    if rows.as_pandas:
        import pandas

        return pandas.Series(array, index=rows.index, name="prediction")
    return array


def table_out(values: list[Any], columns: Sequence[str], rows: Rows) -> Any:
    """A 2-D answer (probabilities, contributions): an array, or a DataFrame."""
    array = np.asarray(values, dtype=float)
    if rows.as_pandas:
        import pandas

        return pandas.DataFrame(array, index=rows.index, columns=list(columns))
    return array
