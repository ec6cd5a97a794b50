"""What a predict hands the prediction log: its rows' ids, and a ``LoggedRequest``.

The request side of logging does no more than this: ids for the rows (the client's, or one
prefix per request and the row's index, so 20,000 rows cost a list of short strings),
and references to the arrays the predict made anyway. The log (its shipping thread and its
writer process) does the rest.
"""

from __future__ import annotations

import itertools
import math
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from service.db.types import utc_now
from service.inference.outputs import PREDICTIONS, PROBABILITIES, RequestedOutput
from service.inference.tensors import OutputTensor
from service.models.cache import LoadedModel
from service.models.encoding import schema
from service.models.schemas import PredictRequest
from service.monitoring.log import Cell, LoggedRequest, PredictionLog


class _Prefixes:
    """Ids' prefixes unique to a request: 20 random hex digits drawn once per process, then
    a 12-digit request counter; 32 digits, as long as a uuid's. A ``uuid4`` per request read
    the kernel's random source each time (1.5% of a busy one-row server's samples). A forked
    child draws its own random part, so two processes never share a prefix."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._random = uuid.uuid4().hex[:20]
        self._counter = itertools.count()

    def next(self) -> str:
        return f"{self._random}{next(self._counter) & 0xFFFFFFFFFFFF:012x}"


_prefixes = _Prefixes()


def row_ids(n_rows: int, given: Sequence[str] | None) -> list[str]:
    """The client's ids, or ``<request prefix>-<row>`` for each row."""
    if given is not None:
        return list(given)
    prefix = _prefixes.next()
    if n_rows == 1:
        return [f"{prefix}-0"]
    return [f"{prefix}-{i}" for i in range(n_rows)]


def log_v1(
    log: PredictionLog,
    model: LoadedModel,
    body: PredictRequest,
    ids: list[str],
    X: npt.NDArray[np.float64],
    out: dict[str, Any],
) -> None:
    """Hand a ``/v1`` predict's rows to the log. The body's cells are kept (for the unseen
    categories) only when the model has categorical features: otherwise nothing reads them,
    and a queued request holding its body kept every record's dict alive until its batch."""
    found = schema(model)  # the model's names and categories, made once and kept
    known = found.categories
    log.submit(
        LoggedRequest(  # positional, in field order: a keyword a field costs more
            model.id,
            utc_now(),
            X,
            out["predictions"],
            out.get("probabilities"),
            ids,
            found.names,
            known,
            model.classes if model.task == "classification" else None,
            _v1_cell(body) if known else None,
        )
    )


def _v1_cell(body: PredictRequest) -> Cell:
    if body.records is not None:
        records = body.records
        return lambda row, name: records[row].get(name)
    assert body.columns is not None and body.rows is not None
    position = {name: i for i, name in enumerate(body.columns)}
    matrix = body.matrix
    if matrix is not None:  # read straight into floats: null is NaN

        def number(row: int, name: str) -> Any:
            at = position.get(name)
            value = None if at is None else float(matrix[row, at])
            return None if value is None or math.isnan(value) else value

        return number
    rows = body.rows

    def cell(row: int, name: str) -> Any:
        at = position.get(name)
        return None if at is None else rows[row][at]

    return cell


def log_v2(
    log: PredictionLog,
    model: LoadedModel,
    request_id: str | None,
    X: npt.NDArray[np.float64],
    requested: list[RequestedOutput],
    tensors: list[OutputTensor],
    cell: Cell | None = None,
) -> None:
    """Hand a ``/v2`` inference's rows to the log; its rows' ids are ``<request id>-<row>``
    when the request has an id (the protocol's response has no place for generated ones).
    ``cell`` gives the text a ``BYTES`` feature tensor sent, so an unseen category is counted
    as unseen, not missing."""
    n = X.shape[0]
    predictions: Any = None
    proba: npt.NDArray[np.float64] | None = None
    for output, tensor in zip(requested, tensors, strict=True):
        if output.kind == PREDICTIONS:
            predictions = tensor.values
        elif output.kind == PROBABILITIES and not output.classification:
            proba = np.asarray(tensor.values, dtype=np.float64).reshape(tensor.shape)
    classification = model.task == "classification"
    if predictions is None:
        if proba is None or not classification or not model.classes:
            return  # contributions only: nothing a report reads
        predictions = np.asarray(model.classes)[np.argmax(proba, axis=1)]
    prefix = request_id or _prefixes.next()
    log.submit(
        LoggedRequest(
            model_id=model.id,
            logged_at=utc_now(),
            X=X,
            predictions=predictions,
            proba=proba,
            ids=[f"{prefix}-{i}" for i in range(n)],
            features=(found := schema(model)).names,
            categories=found.categories,
            classes=model.classes if classification else None,
            cell=cell,
        )
    )
