"""Predict rows to the engine's matrix, encoded exactly as training encoded the columns.

The one encoder of both protocols: ``/v1`` predict hands it rows or records of JSON cells
(:func:`encode_rows`, :func:`encode_records`), ``/v2`` infer one column per feature decoded
from its tensors (``service.inference.features``); both end in :func:`encode`, so a row means
the same matrix row whichever way it came.

Numeric features are float64 (``null`` is missing); categorical features are the index of
the value in the feature's training category list, and a value training never saw is missing.
A categorical value sent as a JSON number is compared as the text a dataset stores a number
as in a categorical column (``1.0`` → ``"1"``), booleans as ``"true"``/``"false"``; a column
of :class:`Numbers` for a categorical feature holds category *codes* (the ``/v2`` matrix), and
anything but a known code is missing. The encoder refuses a cell with :class:`CellError`;
each protocol words it with its own names for where the cell was (a ``/v1`` 422 naming the
field, a ``/v2`` 400 naming the tensor).
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.datasets.columns import canonical_text
from service.errors import FieldError, InvalidInput
from service.models.cache import LoadedModel

MAX_NAMED = 10

# What is wrong with a refused cell; /v1 uses these as the field error's ``msg``.
INFINITE = "infinite"
NOT_A_NUMBER = "not a number"
NOT_A_SCALAR = "not a scalar"


@dataclass(frozen=True, slots=True)
class Cells:
    """One feature's values, a JSON scalar a row: numbers, text, booleans, or null (missing)."""

    values: Sequence[Any] | npt.NDArray[np.object_]


@dataclass(frozen=True, slots=True)
class Numbers:
    """One feature's values as float64, NaN for missing; a categorical feature's are codes."""

    values: npt.NDArray[np.float64]


Column = Cells | Numbers


class CellError(ValueError):
    """A cell the encoder cannot use: ``problem`` (``INFINITE``, …) at ``row`` of ``feature``."""

    def __init__(self, feature: str, row: int, value: Any, problem: str) -> None:
        super().__init__(f"row {row}, feature '{feature}': {problem}")
        self.feature = feature
        self.row = row
        self.value = value
        self.problem = problem


# --- the model's features ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schema:
    """What encoding a request needs of a model, worked out once per loaded model (a one-row
    predict spent more on re-deriving these than on its arithmetic). Shared: never modify."""

    names: list[str]
    position: dict[str, int]  # feature name → its column in the matrix
    categories: dict[str, list[str]]
    # By column: a categorical feature's category text → code; None for a numeric feature.
    codes: list[dict[str | None, float] | None]


def schema(model: LoadedModel) -> Schema:
    found = model.derived.get("schema")
    if found is None:
        names = [str(feature["name"]) for feature in model.features]
        cats = dict(model.encoding.get("categories") or {})
        codes: list[dict[str | None, float] | None] = [
            {c: float(code) for code, c in enumerate(cats[name])} if name in cats else None
            for name in names
        ]
        found = Schema(names, {name: j for j, name in enumerate(names)}, cats, codes)
        model.derived["schema"] = found
    assert isinstance(found, Schema)
    return found


def feature_names(model: LoadedModel) -> list[str]:
    """The model's features in matrix order (shared: do not modify)."""
    return schema(model).names


def categories(model: LoadedModel) -> dict[str, list[str]]:
    """Each categorical feature's categories; a category's code is its index in the list
    (shared: do not modify)."""
    return schema(model).categories


def closest_name(name: str, names: Sequence[str]) -> str | None:
    """The one of ``names`` that ``name`` most likely misspells, if any is close."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else None


def quoted(names: Sequence[str]) -> str:
    """``'a', 'b'`` …, the first ``MAX_NAMED`` of ``names`` and a count of the rest."""
    shown = ", ".join(f"'{name}'" for name in names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


# --- the encoder ------------------------------------------------------------------------------


def encode(
    model: LoadedModel, columns: Mapping[str, Column], n_rows: int
) -> npt.NDArray[np.float64]:
    """The (n_rows, n_features) float64 matrix of ``columns`` (feature name → its ``n_rows``
    values), in the model's feature order; a feature absent from ``columns`` is missing in
    every row. Raises :class:`CellError` for the first cell it cannot use."""
    known = schema(model)
    X = np.empty((n_rows, len(known.names)), dtype=np.float64)
    for j, name in enumerate(known.names):
        column = columns.get(name)
        lookup = known.codes[j]
        if column is None:
            X[:, j] = np.nan
        elif lookup is not None:
            X[:, j] = _category_codes(column, lookup, len(known.categories[name]), name)
        else:
            X[:, j] = _numbers(column, name)
    return X


def _category_codes(
    column: Column, lookup: dict[str | None, float], n_categories: int, name: str
) -> npt.NDArray[np.float64] | list[float]:
    if isinstance(column, Numbers):
        codes = np.asarray(column.values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            known = (codes >= 0) & (codes < n_categories) & (np.floor(codes) == codes)
        return np.where(known, codes, np.nan)
    values = column.values
    if _TEXT_TYPES.issuperset(map(type, values)):  # the usual column: text and nulls
        return [math.nan if v is None else lookup.get(v.strip(), math.nan) for v in values]
    return [lookup.get(_category_text(v, i, name), math.nan) for i, v in enumerate(values)]


# Cell types a column converts without a check per cell (``type``, so bools are not ints).
_NUMBER_TYPES = frozenset({int, float, type(None)})
_TEXT_TYPES = frozenset({str, type(None)})


def _numbers(column: Column, name: str) -> npt.NDArray[np.float64] | list[float]:
    """A numeric feature's values as floats, NaN for missing.

    A column of JSON numbers and nulls converts in one NumPy call (None becomes NaN), ten
    times faster than cell by cell on large requests. Anything else — text, booleans, an
    infinity, an integer too large for a float — takes the per-cell path, which names the
    first offending cell.
    """
    if isinstance(column, Numbers):
        infinite = np.flatnonzero(np.isinf(column.values))
        if infinite.size:
            row = int(infinite[0])
            raise CellError(name, row, float(column.values[row]), INFINITE)
        return column.values
    values = column.values
    floats = _finite_floats(values, values)
    if floats is not None:
        return floats
    return [_number(v, i, name) for i, v in enumerate(values)]


def _finite_floats(data: Any, cells: Iterable[Any]) -> npt.NDArray[np.float64] | None:
    """``data`` as float64 (null → NaN) in one NumPy call when every one of its ``cells`` is a
    JSON number or null and finite; None otherwise (text, a boolean, an infinity, an integer
    past float range), for the per-cell path to name the offending cell."""
    if not _NUMBER_TYPES.issuperset(map(type, cells)):
        return None
    try:
        array = np.array(data, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):  # a huge integer; a nested list
        return None
    return None if np.isinf(array).any() else array


def _category_text(value: Any, row: int, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = float(value)
        return canonical_text(number) if math.isfinite(number) else None
    if isinstance(value, str):
        return value.strip()
    raise CellError(name, row, value, NOT_A_SCALAR)


def _number(value: Any, row: int, name: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isinf(number):
            raise CellError(name, row, value, INFINITE)
        return number
    raise CellError(name, row, value, NOT_A_NUMBER)


# --- /v1 predict: records and rows of JSON cells ------------------------------------------


def encode_records(
    model: LoadedModel, records: Sequence[dict[str, Any]]
) -> npt.NDArray[np.float64]:
    """``records`` (one dict per row; absent keys are missing) as an (n_rows, n_features) matrix."""
    fast = _records_matrix(schema(model), records)
    if fast is not None:
        return fast
    seen: dict[str, None] = {}
    for record in records:
        for key in record:
            seen.setdefault(key, None)
    _check_columns(model, list(seen), loc_root="records")
    columns = {
        name: Cells([record.get(name) for record in records]) for name in feature_names(model)
    }
    return _encode_cells(
        model, columns, len(records), lambda row, name: ["body", "records", row, name]
    )


# Up to this many cells a records body's infinities are searched in its list (_records_matrix).
_LIST_SEARCH_CELLS = 4096


def _records_matrix(
    known: Schema, records: Sequence[dict[str, Any]]
) -> npt.NDArray[np.float64] | None:
    """The usual records (known features only; numbers or nulls for numeric features, text or
    nulls for categorical ones) straight into one flat list and one NumPy call: a few
    microseconds for a one-row predict, where a column per feature cost a NumPy call each.
    None for anything else (an unknown key, a boolean, a number for a category, an infinity,
    an integer past float range), which the general path converts or refuses by name."""
    width = len(known.names)
    cells = [math.nan] * (len(records) * width)
    position, codes = known.position, known.codes
    for i, record in enumerate(records):
        base = i * width
        for key, value in record.items():
            j = position.get(key)
            if j is None:
                return None
            kind = type(value)
            lookup = codes[j]
            if lookup is None:
                if kind is float or kind is int:
                    cells[base + j] = value
                elif value is not None:
                    return None
            elif kind is str:
                cells[base + j] = lookup.get(value.strip(), math.nan)
            elif value is not None:
                return None
    # A few cells' infinity is found by the list's own search (a C loop of comparisons), not
    # by ``np.isinf(X).any()``: between requests the caches have let NumPy's reduction go, and
    # that one call cost a one-row predict ~40 us. Past a few thousand cells the reduction is
    # the cheaper (20,000 x 40 cells: 0.4-0.9 ms against 12.6-15.7 ms for the two searches).
    # An int past float range fails below.
    few = len(cells) <= _LIST_SEARCH_CELLS
    if few and (math.inf in cells or -math.inf in cells):
        return None
    try:
        X = np.array(cells, dtype=np.float64).reshape(len(records), width)
    except OverflowError:
        return None
    return X if few or not np.isinf(X).any() else None


def encode_rows(
    model: LoadedModel,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    numbers_only: bool = False,
) -> npt.NDArray[np.float64]:
    """``rows`` of cells in ``columns`` order as an (n_rows, n_features) matrix.

    ``numbers_only``: the caller knows every cell is a JSON number or null (the ``/v1``
    router reads it from the body's bytes), so the cells' types need no check."""
    _check_rows(columns, rows)
    _check_columns(model, list(columns), loc_root="columns")
    position = {name: i for i, name in enumerate(columns)}
    features = [name for name in feature_names(model) if name in position]
    given = _numeric_matrix(model, rows, numbers_only)
    if given is not None and list(columns) == feature_names(model):
        return given  # already the model's matrix: finite numbers and NaN, in feature order
    if given is not None:
        numbers = {name: Numbers(given[:, position[name]]) for name in features}
        return encode(model, numbers, len(rows))
    by_column = list(zip(*rows, strict=True)) if rows else [() for _ in columns]  # in C
    cells = {name: Cells(by_column[position[name]]) for name in features}

    def loc(row: int, name: str) -> list[str | int]:
        return ["body", "rows", row, position.get(name, name)]

    return _encode_cells(model, cells, len(rows), loc)


def encode_matrix(
    model: LoadedModel, columns: Sequence[str], given: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """``rows`` the router already read into floats (``service.models.json_rows``: numbers,
    null as NaN, never an infinity), one column per name in ``columns``, as encode_rows
    would encode them: as they are when they are the model's features in its order,
    else column by column (a number in a categorical column is its category's text)."""
    _check_repeated(columns)
    _check_columns(model, list(columns), loc_root="columns")
    known = schema(model)
    if list(columns) == known.names and not known.categories:
        return given
    position = {name: i for i, name in enumerate(columns)}
    cells: dict[str, Column] = {}
    for name in known.names:
        at = position.get(name)
        if at is None:
            continue
        values = given[:, at]
        if name in known.categories:
            cells[name] = Cells([None if v != v else v for v in values.tolist()])
        else:
            cells[name] = Numbers(np.ascontiguousarray(values))

    def loc(row: int, name: str) -> list[str | int]:
        return ["body", "rows", row, position.get(name, name)]

    return _encode_cells(model, cells, given.shape[0], loc)


def _check_repeated(columns: Sequence[str]) -> None:
    repeated = sorted({name for name in columns if columns.count(name) > 1})
    if repeated:
        raise InvalidInput(
            "Columns are named more than once: " + quoted(repeated) + ".",
            errors=[{"loc": ["body", "columns"], "msg": f"'{name}' repeated"} for name in repeated],
        )


def _check_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    _check_repeated(columns)
    not_lists = [i for i, row in enumerate(rows) if not isinstance(row, list)]
    if not_lists:
        raise InvalidInput(
            f"Row {not_lists[0]} is not a list of cells; each row is a JSON array in "
            "'columns' order.",
            errors=[
                {"loc": ["body", "rows", i], "msg": "not an array"} for i in not_lists[:MAX_NAMED]
            ],
        )
    ragged = [i for i, row in enumerate(rows) if len(row) != len(columns)]
    if ragged:
        first = ragged[0]
        raise InvalidInput(
            f"Row {first} has {len(rows[first])} cells but there are {len(columns)} columns"
            + (f" ({len(ragged)} rows are ragged)." if len(ragged) > 1 else "."),
            errors=[
                {
                    "loc": ["body", "rows", i],
                    "msg": f"{len(rows[i])} cells, expected {len(columns)}",
                }
                for i in ragged[:MAX_NAMED]
            ],
        )


def _numeric_matrix(
    model: LoadedModel, rows: Sequence[Sequence[Any]], numbers_only: bool = False
) -> npt.NDArray[np.float64] | None:
    """The usual large request, every cell a JSON number or null and no feature categorical,
    converted in one NumPy call (3× faster than column by column); None for anything else,
    which the general path converts, naming any offending cell. (Only without categorical
    features: a JSON number there is a category's text, not the code :class:`Numbers` means.)"""
    if not rows or categories(model):
        return None
    # Known numbers need no type check; the cells are then their own, always-passing stand-in.
    cells: Iterable[Any] = () if numbers_only else itertools.chain.from_iterable(rows)
    return _finite_floats(rows, cells)


def _check_columns(model: LoadedModel, given: list[str], *, loc_root: str) -> None:
    names = feature_names(model)
    known = set(names)
    unknown = [name for name in given if name not in known]
    if not unknown:
        return
    errors: list[FieldError] = []
    parts = []
    for name in unknown:
        close = closest_name(name, names)
        hint = f" (did you mean '{close}'?)" if close else ""
        if not close and name == model.target:
            hint = " (the target)"
        parts.append(f"'{name}'{hint}")
        errors.append({"loc": ["body", loc_root, name], "msg": f"not a feature of the model{hint}"})
    raise InvalidInput(
        f"The model has no feature named {', '.join(parts[:MAX_NAMED])}"
        + (f" and {len(parts) - MAX_NAMED} more" if len(parts) > MAX_NAMED else "")
        + f". Its features are {quoted(names)}; leave other columns out.",
        errors=errors[:MAX_NAMED],
    )


def _encode_cells(
    model: LoadedModel,
    columns: Mapping[str, Column],
    n_rows: int,
    loc: Callable[[int, str], list[str | int]],
) -> npt.NDArray[np.float64]:
    """:func:`encode`, with a refused cell as the 422 naming its field."""
    try:
        return encode(model, columns, n_rows)
    except CellError as error:
        row, name, value = error.row, error.feature, error.value
        if error.problem == INFINITE:
            detail = (
                f"Row {row}, feature '{name}' is infinite ({value!r}); send a finite number "
                "or null for missing."
            )
        elif error.problem == NOT_A_NUMBER:
            detail = (
                f"Row {row}, feature '{name}' is numeric but holds {value!r}; send a number, "
                "or null for missing."
            )
        else:
            detail = (
                f"Row {row}, feature '{name}' holds a JSON {type(value).__name__}; send a "
                "string, a number, a boolean or null."
            )
        raise InvalidInput(detail, errors=[{"loc": loc(row, name), "msg": error.problem}]) from None
