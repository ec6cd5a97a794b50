"""Request tensors to the engine's feature matrix, encoded as training encoded the columns.

Two layouts are accepted (docs/inference.md):

- one tensor named ``input`` of shape ``[n, n_features]`` in the model's feature order, any
  numeric datatype; a categorical feature's column carries the category *code* (its index in
  the feature's category list, published by the model metadata);
- one tensor per feature, named after it, of shape ``[n]`` or ``[n, 1]``: numeric features in a
  numeric datatype, categorical features as ``BYTES`` (the category text) or as codes. An absent
  feature is missing in every row, as in ``/v1`` predict.

Missing values are NaN (``null`` in JSON). A category code that is not an integer in
``[0, n_categories)`` — ``-1`` say — is missing, like a category training never saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.errors import BadRequest, PayloadTooLarge
from service.inference.schemas import RequestInput
from service.inference.tensors import BYTES, Tensor
from service.models import encoding
from service.models.cache import LoadedModel
from service.models.encoding import CellError, Cells, Column, Numbers, quoted

MATRIX_INPUT = "input"


@dataclass(frozen=True, slots=True)
class Layout:
    """How a request's inputs map onto the model's features, checked before data is decoded."""

    n_rows: int
    matrix: bool  # one [n, n_features] tensor, else one tensor per feature


def plan(
    model: LoadedModel, inputs: Sequence[RequestInput], max_rows: int, *, setting: str
) -> Layout:
    """Check the inputs' names, shapes and datatypes against the model; 400 or 413 if wrong."""
    names = encoding.feature_names(model)
    for i, tensor in enumerate(inputs):
        if any(dim < 0 for dim in tensor.shape):
            raise BadRequest(f"{where(i, tensor)}.shape {tensor.shape} has a negative dimension.")
    planner = _plan_matrix if _is_matrix(model, inputs) else _plan_columns
    layout = planner(model, inputs, names)
    if layout.n_rows > max_rows:
        raise PayloadTooLarge(
            f"The request has {layout.n_rows} rows; at most {max_rows} are predicted per "
            f"request ({setting}). Split it into smaller requests."
        )
    return layout


def matrix(model: LoadedModel, tensors: Sequence[Tensor], layout: Layout) -> npt.NDArray[Any]:
    """The (n_rows, n_features) float64 matrix the estimator predicts on, from
    ``service.models.encoding`` (the encoder ``/v1`` predict uses), one column per tensor or
    per column of the matrix."""
    n = layout.n_rows
    columns: dict[str, Column]
    if layout.matrix:
        (tensor,) = tensors
        names = encoding.feature_names(model)
        given = np.asarray(tensor.values, dtype=np.float64).reshape(n, len(names))
        columns = {name: Numbers(given[:, j]) for j, name in enumerate(names)}
    else:
        columns = {
            tensor.name: Cells(tensor.values)
            if tensor.datatype == BYTES
            else Numbers(tensor.values)
            for tensor in tensors
        }
    try:
        return encoding.encode(model, columns, n)
    except CellError as error:
        # Tensors are typed when decoded (numbers, or BYTES text for a categorical feature),
        # so the one cell the encoder can still refuse is an infinite number.
        if layout.matrix:
            (tensor,) = tensors
            cell = f"row {error.row}, feature '{error.feature}'"
        else:
            tensor = next(tensor for tensor in tensors if tensor.name == error.feature)
            cell = f"element {error.row}"
        raise BadRequest(
            f"{tensor.where}: {cell} is {error.problem}; send a finite number, or NaN (null in "
            "JSON) for missing."
        ) from None


# The cell a request sent for (row, feature), or None.
SentText = Callable[[int, str], Any]


def sent_text(tensors: Sequence[Tensor], layout: Layout) -> SentText | None:
    """The text each ``BYTES`` feature tensor sent, by (row, feature); None when the request
    sent no text (the matrix layout, or codes only). The prediction log reads it to tell a
    category training never saw from a missing value: the encoder makes both NaN."""
    if layout.matrix:
        return None
    texts = {
        t.name: np.asarray(t.values, dtype=object).ravel() for t in tensors if t.datatype == BYTES
    }
    if not texts:
        return None

    def cell(row: int, name: str) -> Any:
        values = texts.get(name)
        return None if values is None else values[row]

    return cell


def where(index: int, tensor: RequestInput | Tensor) -> str:
    return f"inputs[{index}] ('{tensor.name}')"


# --- layouts ----------------------------------------------------------------------------------


def _is_matrix(model: LoadedModel, inputs: Sequence[RequestInput]) -> bool:
    names = set(encoding.feature_names(model))
    matrices = [
        tensor
        for tensor in inputs
        # A feature may itself be called "input": then a 1-D tensor of that name is the feature.
        if tensor.name == MATRIX_INPUT and not (MATRIX_INPUT in names and len(tensor.shape) == 1)
    ]
    if matrices and len(inputs) > 1:
        raise BadRequest(
            f"The request has {len(inputs)} inputs, among them '{MATRIX_INPUT}': send either one "
            f"'{MATRIX_INPUT}' tensor of shape [n, {len(names)}] or one tensor per feature, not both."
        )
    return bool(matrices)


def _plan_matrix(model: LoadedModel, inputs: Sequence[RequestInput], names: list[str]) -> Layout:
    (tensor,) = inputs
    here = where(0, tensor)
    if len(tensor.shape) != 2 or tensor.shape[1] != len(names):
        raise BadRequest(
            f"{here} has shape {tensor.shape}; the model takes [n, {len(names)}]: one row per "
            f"prediction, one column per feature in this order: {quoted(names)}."
        )
    if tensor.datatype == BYTES:
        raise BadRequest(
            f"{here} is BYTES; '{MATRIX_INPUT}' carries numbers (FP64, FP32 or INT*), with "
            "categorical features as category codes. To send category text, send one tensor "
            "per feature instead."
        )
    return Layout(n_rows=tensor.shape[0], matrix=True)


def _plan_columns(model: LoadedModel, inputs: Sequence[RequestInput], names: list[str]) -> Layout:
    known = set(names)
    cats = encoding.categories(model)
    seen: dict[str, int] = {}
    rows: set[int] = set()
    for i, tensor in enumerate(inputs):
        here = where(i, tensor)
        if tensor.name not in known:
            raise BadRequest(_unknown_input(model, tensor.name, here, names))
        if tensor.name in seen:
            raise BadRequest(
                f"{here} repeats inputs[{seen[tensor.name]}]: each feature is sent at most once."
            )
        seen[tensor.name] = i
        if len(tensor.shape) not in (1, 2) or (len(tensor.shape) == 2 and tensor.shape[1] != 1):
            raise BadRequest(
                f"{here} has shape {tensor.shape}; a tensor per feature has shape [n] or [n, 1]."
            )
        if tensor.datatype == BYTES and tensor.name not in cats:
            raise BadRequest(
                f"{here} is BYTES but feature '{tensor.name}' is numeric; send it as FP64 "
                "(or another numeric datatype)."
            )
        rows.add(tensor.shape[0])
    if len(rows) > 1:
        raise BadRequest(
            "The inputs have different numbers of rows ("
            + ", ".join(f"'{t.name}': {t.shape[0]}" for t in inputs)
            + "); every feature tensor needs one element per row."
        )
    return Layout(n_rows=rows.pop(), matrix=False)


def _unknown_input(model: LoadedModel, name: str, here: str, names: list[str]) -> str:
    close = encoding.closest_name(name, [*names, MATRIX_INPUT])
    hint = f" (did you mean '{close}'?)" if close else ""
    if not close and name == model.target:
        hint = " (that is the target)"
    return (
        f"{here} names no input of this model{hint}. Send one tensor '{MATRIX_INPUT}' of shape "
        f"[n, {len(names)}], or one tensor per feature named after it: {quoted(names)}."
    )
