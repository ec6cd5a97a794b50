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

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from service.errors import BadRequest, PayloadTooLarge
from service.inference.schemas import RequestInput
from service.inference.tensors import BYTES, Tensor
from service.models.cache import LoadedModel

MATRIX_INPUT = "input"
MAX_NAMED = 10


@dataclass(frozen=True, slots=True)
class Layout:
    """How a request's inputs map onto the model's features, checked before data is decoded."""

    n_rows: int
    matrix: bool  # one [n, n_features] tensor, else one tensor per feature


def feature_names(model: LoadedModel) -> list[str]:
    return [str(feature["name"]) for feature in model.features]


def categories(model: LoadedModel) -> dict[str, list[str]]:
    return dict(model.encoding.get("categories") or {})


def plan(
    model: LoadedModel, inputs: Sequence[RequestInput], max_rows: int, *, setting: str
) -> Layout:
    """Check the inputs' names, shapes and datatypes against the model; 400 or 413 if wrong."""
    names = feature_names(model)
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
    """The (n_rows, n_features) float64 matrix the estimator predicts on."""
    names = feature_names(model)
    cats = categories(model)
    n = layout.n_rows
    if layout.matrix:
        (tensor,) = tensors
        X = np.array(tensor.values, dtype=np.float64).reshape(n, len(names))
        for j, name in enumerate(names):
            if name in cats:
                X[:, j] = _codes(X[:, j], len(cats[name]))
            else:
                _check_finite(
                    X[:, j], lambda row, name=name: f"row {row}, feature '{name}'", tensor
                )
        return X
    X = np.full((n, len(names)), np.nan)
    position = {name: j for j, name in enumerate(names)}
    for tensor in tensors:
        j = position[tensor.name]
        if tensor.datatype == BYTES:
            lookup = {category: float(code) for code, category in enumerate(cats[tensor.name])}
            X[:, j] = [
                math.nan if value is None else lookup.get(value.strip(), math.nan)
                for value in tensor.values
            ]
        elif tensor.name in cats:
            X[:, j] = _codes(tensor.values, len(cats[tensor.name]))
        else:
            X[:, j] = tensor.values
            _check_finite(X[:, j], lambda row: f"element {row}", tensor)
    return X


def where(index: int, tensor: RequestInput | Tensor) -> str:
    return f"inputs[{index}] ('{tensor.name}')"


# --- layouts ----------------------------------------------------------------------------------


def _is_matrix(model: LoadedModel, inputs: Sequence[RequestInput]) -> bool:
    names = set(feature_names(model))
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
            f"prediction, one column per feature in this order: {_quoted(names)}."
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
    cats = categories(model)
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
    close = difflib.get_close_matches(name, [*names, MATRIX_INPUT], n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    if not close and name == model.target:
        hint = " (that is the target)"
    return (
        f"{here} names no input of this model{hint}. Send one tensor '{MATRIX_INPUT}' of shape "
        f"[n, {len(names)}], or one tensor per feature named after it: {_quoted(names)}."
    )


# --- values -----------------------------------------------------------------------------------


def _codes(values: npt.NDArray[np.float64], n_categories: int) -> npt.NDArray[np.float64]:
    """Category codes as training encoded them; anything but a known code is missing."""
    codes = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        known = (codes >= 0) & (codes < n_categories) & (np.floor(codes) == codes)
    return np.where(known, codes, np.nan)


def _check_finite(column: npt.NDArray[np.float64], describe: Any, tensor: Tensor) -> None:
    infinite = np.flatnonzero(np.isinf(column))
    if infinite.size:
        raise BadRequest(
            f"{tensor.where}: {describe(int(infinite[0]))} is infinite; send a finite number, "
            "or NaN (null in JSON) for missing."
        )


def _quoted(names: Sequence[str]) -> str:
    shown = ", ".join(f"'{name}'" for name in names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
