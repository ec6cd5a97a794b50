"""Input checks the metrics share: 1-D arrays of one length, sample weights, label codes."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from engine._validation import check_sample_weight


def _as_1d(values: ArrayLike, name: str) -> NDArray[Any]:
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array.ravel()
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional; got shape {array.shape}.")
    if array.shape[0] == 0:
        raise ValueError(f"{name} is empty; a minimum of 1 sample is required.")
    return array


def _check_lengths(**arrays: Any) -> None:
    lengths = {name: len(a) for name, a in arrays.items() if a is not None}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: {lengths}.")


def _weights(sample_weight: ArrayLike | None, n_samples: int) -> NDArray[np.float64] | None:
    return None if sample_weight is None else check_sample_weight(sample_weight, n_samples)


def _is_text(array: NDArray[Any]) -> bool:
    if array.dtype.kind in "US":
        return True
    return array.dtype.kind == "O" and array.size > 0 and isinstance(array.flat[0], str)


def _encode(values: NDArray[Any], labels: NDArray[Any]) -> tuple[NDArray[np.intp], NDArray[Any]]:
    """Index of each value in ``labels`` (any order) and a mask of values found there.

    Returns
    -------
    codes : ndarray of shape (n_samples,), dtype intp
        Meaningful only where ``known`` is True.
    known : ndarray of shape (n_samples,), dtype bool
    """
    if labels.size == 0 or _is_text(values) != _is_text(labels):
        return np.zeros(values.shape[0], dtype=np.intp), np.zeros(values.shape[0], dtype=bool)
    order = np.argsort(labels, kind="stable")
    position = np.minimum(np.searchsorted(labels[order], values), labels.size - 1)
    return order[position], labels[order][position] == values
